#!/usr/bin/env bash
# The Action's history mode (action.yml, mode: history): measure this commit once, keep its
# summary on a branch of the repository beside every earlier one, and run `perfbench history`
# on the series, as github-action-benchmark keeps its data on gh-pages. Exits with history's
# code: 0 no recent regression, 4 a metric's newest change point is for the worse, 3 error.
#
# Run from the repository's checkout. Inputs come from the environment (never pasted into
# the script, so a value stays a value):
#   PB_TARGET (required), PB_CASES (cases), PB_RUNS (5), PB_REPEAT (1), PB_RUN_ARGS,
#   PB_LABEL (the commit's short sha), PB_BRANCH (perf-history), PB_PATH (runs: the folder in
#   the branch), PB_PUSH (true), PB_REMOTE (origin), PB_HISTORY_ARGS, RUNNER_TEMP (a scratch
#   folder), and on GitHub GITHUB_OUTPUT, GITHUB_STEP_SUMMARY, GITHUB_EVENT_NAME.
# Only meta.json and summary.json of each run are kept: all `history` reads, a few kB a run.
set -euo pipefail

: "${PB_TARGET:?PB_TARGET: what to measure, as perfbench run -t takes it}"
cases=${PB_CASES:-cases}
runs=${PB_RUNS:-5}
repeat=${PB_REPEAT:-1}
branch=${PB_BRANCH:-perf-history}
folder=${PB_PATH:-runs}
remote=${PB_REMOTE:-origin}
push=${PB_PUSH:-true}
scratch=${RUNNER_TEMP:-$(mktemp -d)}/perfbench-history
label=${PB_LABEL:-$(git rev-parse --short=12 HEAD)}

# The free-text inputs split as a shell would (quotes kept together), but never run.
split() { python -c 'import shlex, sys; sys.stdout.write("".join(a + "\0" for a in shlex.split(sys.argv[1])))' "$1"; }
for given in "${PB_RUN_ARGS:-}" "${PB_HISTORY_ARGS:-}"; do
  python -c 'import shlex, sys; shlex.split(sys.argv[1])' "$given" 2>/dev/null \
    || { echo "::error::unbalanced quotes in: $given" >&2; exit 3; }
done
mapfile -d '' -t more < <(split "${PB_RUN_ARGS:-}")
mapfile -d '' -t wanted < <(split "${PB_HISTORY_ARGS:-}")

output() { [ -z "${GITHUB_OUTPUT:-}" ] || echo "$1" >> "$GITHUB_OUTPUT"; }
summary() { [ -z "${GITHUB_STEP_SUMMARY:-}" ] || cat "$1" >> "$GITHUB_STEP_SUMMARY"; }

rm -rf "$scratch"
mkdir -p "$scratch"
checkout=$scratch/branch
verdict=$scratch/report/history.md
output "verdict=$verdict"
orphan=perfbench-history-$$  # the new branch's local name until pushed, removed on the way out
cleanup() {
  git worktree remove --force "$checkout" 2>/dev/null || true
  git branch -D "$orphan" >/dev/null 2>&1 || true
}
trap cleanup EXIT

# 1. This commit's run, into a folder of its own.
perfbench run "$cases" -t "$PB_TARGET" --runs "$runs" --repeat "$repeat" --label "$label" \
  --out "$scratch/new" -q "${more[@]}"

# 2. The branch, checked out beside the repository (its credentials and remotes are the
# checkout's own); a new, empty one on first use.
if git fetch --no-tags --quiet "$remote" "+refs/heads/$branch:refs/remotes/$remote/$branch" 2>/dev/null; then
  git worktree add --quiet --detach "$checkout" "refs/remotes/$remote/$branch"
else
  echo "perfbench: no branch $branch on $remote yet: starting it"
  git worktree add --quiet --detach "$checkout" HEAD
  git -C "$checkout" checkout --quiet --orphan "$orphan"
  git -C "$checkout" rm -rfq --ignore-unmatch .
fi

# 3. Its summary beside the others, committed.
for run in "$scratch"/new/*/; do
  kept=$checkout/$folder/$(basename "$run")
  mkdir -p "$kept"
  cp "$run/meta.json" "$run/summary.json" "$kept/"
done
git -C "$checkout" add -A
git -C "$checkout" -c user.name="${GITHUB_ACTOR:-perfbench}" \
  -c user.email="${GITHUB_ACTOR:-perfbench}@users.noreply.github.com" \
  commit --quiet -m "perfbench: runs of $label"

# 4. Pushed, unless this is a pull request (its runs are not the main line's history, and a
# fork's token cannot push). A push that lost a race with another job is rebased and retried:
# each run is a new folder, so the rebase cannot conflict.
case "${GITHUB_EVENT_NAME:-}" in pull_request*) push=false ;; esac
if [ "$push" = true ]; then
  for attempt in 1 2 3 4; do
    git -C "$checkout" push --quiet "$remote" "HEAD:refs/heads/$branch" && break
    [ "$attempt" = 4 ] && { echo "::error::could not push to $branch after 4 tries" >&2; exit 3; }
    sleep "$attempt"
    git -C "$checkout" fetch --no-tags --quiet "$remote" "$branch"
    git -C "$checkout" rebase --quiet FETCH_HEAD
  done
else
  echo "perfbench: not pushed to $branch (push-history is $push, or a pull request)"
fi

# 5. The history of every run kept, this one last.
count=$(find "$checkout/$folder" -mindepth 2 -maxdepth 2 -name meta.json | wc -l)
mkdir -p "$(dirname "$verdict")"
if [ "$count" -lt 3 ]; then
  printf '**perfbench history**: %s run(s) on %s so far; the history starts at 3.\n' \
    "$count" "$branch" > "$verdict"
  cat "$verdict"
  summary "$verdict"
  exit 0
fi
set +e
perfbench history --root "$checkout/$folder" --out "$(dirname "$verdict")" "${wanted[@]}"
code=$?
set -e
summary "$verdict"
exit "$code"
