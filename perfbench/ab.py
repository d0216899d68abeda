"""A/B measurement of two versions of the user's code, on one machine, interleaved.

``perfbench ab`` (``cli/ab.py``) builds on this module: each side (baseline, candidate) is a
git commit checked out in a worktree of its own (or the working tree as it is, ``.``), and each
measured run is a ``perfbench run`` child process started in that side's tree, with the tree on
the import path, so a ``python:module:function`` target imports that side's code and nothing
else. Runs alternate between the sides (``schedule``), so a runner that slows down midway slows
both; the suite is copied once from one side, so both run the same cases (the same digest, which
``compare`` requires).

The planning (schedule, command lines, environment) is pure; git and processes are at the
edges (``repository``, ``checkouts``, ``run_once``)."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from perfbench.errors import AbError
from perfbench.stats import power

SideName = Literal["baseline", "candidate"]
SIDES: tuple[SideName, SideName] = ("baseline", "candidate")
WORKING_TREE = "."  # the candidate as it is on disk, uncommitted changes included
# Flags of `perfbench run` that `ab` sets itself: one measured pass per call, its own labels
# and output folder, the copied suite. Given again after `--`, they would break the pooling.
OWNED_FLAGS = ("--runs", "--label", "--out", "--resume", "--json")
_GIT_TIMEOUT_S = 300  # a worktree of a large repository takes a while; a hung git must not


@dataclass(frozen=True)
class Repo:
    """The git repository being measured, and where in it the command was started."""

    root: Path  # the top of the working tree
    prefix: str  # the starting folder, relative to root ("" at the top; "svc/agent/" below)


@dataclass(frozen=True)
class Side:
    """One version of the code: its ref, the commit it names, and the folder its runs start
    in (the same folder of the repository as the command was started in)."""

    name: SideName
    ref: str
    commit: str | None  # None: the working tree, as it is
    workdir: Path


@dataclass(frozen=True)
class Slot:
    """One measured run in the schedule: which round, which side."""

    round: int  # from 1
    side: SideName


def least_rounds(alpha: float, gated: int) -> int:
    """The fewest rounds with which a change in one of ``gated`` metrics alone can be
    significant. The rounds are pairs (compare --paired: the signed-rank test on the per-round
    ratios), whose smallest p is 1 / 2^rounds; the correction asks alpha / gated of a first
    finding: 9 rounds for the 13 gated by default (1/512 < 0.05/13 < 1/256), 6 for two."""
    return power.fewest_runs(alpha / max(1, gated), paired=True)


# The default: the fewest pairs in which a change in one of the 13 metrics gated by default
# can be significant (least_rounds; 8 could not: 1/256 > 0.05/13, tests/unit/test_paired.py).
DEFAULT_ROUNDS = 9
# The default --repeat: enough passes for this many tasks a run, and at least 2. A task's
# timing jitters with the machine's load; a run's figures average it out as 1/sqrt(tasks).
# Measured (A/A ab, every run seeded alike, docs/ci.md): the 16-case demo suite at 16 tasks a
# run left TTFT P50's run-to-run CV at 3.3% (load average 10), just beyond the ~3% that 8
# rounds can tell from a 10% change; cases/answer.yaml at 8 tasks a run had CVs up to 8.8%
# (load 15, a CPU hog). 32 tasks also give a run's P95 the 20 it needs.
TASKS_A_RUN = 32
LEAST_REPEAT = 2


def default_repeat(per_pass: int) -> int:
    """``ab``'s --repeat when none is given: ``TASKS_A_RUN`` tasks a run of a suite with
    ``per_pass`` tasks a pass, and at least ``LEAST_REPEAT`` passes."""
    return max(LEAST_REPEAT, math.ceil(TASKS_A_RUN / per_pass))


CONFIRM = "-confirm"  # the label suffix of the confirmation rounds' runs
SEED = 1  # every run's (run_command); `-- --seed N` after ab's flags picks another


def schedule(rounds: int, first: int = 1) -> list[Slot]:
    """Every round runs both sides once; the side that goes first alternates (A B, B A, A B…).
    Plain A B A B puts the candidate later in every round, so a runner that slows down steadily
    would count against it; swapping the order each round cancels that drift out. ``first``:
    the number of the first round (confirmation rounds go on from the last one)."""
    slots: list[Slot] = []
    for n in range(first, first + rounds):
        order = SIDES if n % 2 else SIDES[::-1]
        slots.extend(Slot(n, side) for side in order)
    return slots


def check_extra(extra: Sequence[str]) -> None:
    """Refuse extra ``perfbench run`` arguments that would undo what ``ab`` arranges."""
    if extra and not extra[0].startswith("-"):
        raise AbError(
            f"'{extra[0]}' is not a flag: give the suite with --cases, and only `perfbench run` "
            "flags after --"
        )
    for arg in extra:
        flag = arg.partition("=")[0]
        if flag in OWNED_FLAGS:
            raise AbError(f"{flag} is set by perfbench ab itself: leave it out after --")


def run_command(
    cases: Sequence[Path], slot: Slot, out: Path, run_args: Sequence[str], suffix: str = ""
) -> list[str]:
    """The ``perfbench run`` child's command line for one slot: one measured pass, labelled
    with its side (and ``suffix``: confirmation rounds), into the shared output folder. Every
    run has the same seed (common random numbers): a simulated model draws the same values in
    every round of both sides, so the runs differ only by the code and the machine. Seeded by
    the round, the mock's own sampling made the demo suite's P50 vary 16% from round to round,
    which 8 rounds cannot tell from a 10% slowdown (docs/ci.md)."""
    return [
        sys.executable, "-m", "perfbench", "run", *map(str, cases),
        "--runs", "1", "--seed", str(SEED), "--label", slot.side + suffix,
        "--out", str(out), "-q", *run_args,
    ]  # fmt: skip


def side_env(side: Side, environ: Mapping[str, str], paths: Sequence[str]) -> dict[str, str]:
    """The child's environment: the side's folder (and ``paths`` under it) first on the import
    path, so its own modules are imported, never the other side's or an installed copy."""
    first = [str(side.workdir / p) for p in paths]
    rest = [p for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {**environ, "PYTHONPATH": os.pathsep.join([*first, *rest])}


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=_GIT_TIMEOUT_S
        )
    except FileNotFoundError:
        raise AbError("git is not installed (or not on PATH): perfbench ab needs it") from None
    except subprocess.TimeoutExpired:
        raise AbError(f"git {' '.join(args)} took over {_GIT_TIMEOUT_S} s") from None


def repository(cwd: Path) -> Repo:
    """The repository around ``cwd``; an ``AbError`` that says what to do when there is none."""
    found = _git(cwd, "rev-parse", "--show-toplevel", "--show-prefix")
    if found.returncode != 0:
        raise AbError(
            f"{cwd} is not in a git repository: run perfbench ab inside the repository whose "
            "code you measure (in CI, after actions/checkout)"
        )
    root, prefix = [*found.stdout.splitlines(), ""][:2]
    return Repo(Path(root), prefix)


def commit_of(repo: Repo, ref: str) -> str:
    """The commit ``ref`` names, or an ``AbError`` that says how to make it known."""
    found = _git(repo.root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if found.returncode != 0 or not found.stdout.strip():
        raise AbError(
            f"no commit '{ref}' in {repo.root}: check the name, or fetch it (git fetch origin "
            f"{ref}; in CI, actions/checkout with fetch-depth: 0 keeps the history)"
        )
    return found.stdout.strip()


@contextmanager
def checkouts(repo: Repo, refs: Mapping[SideName, str]) -> Iterator[dict[SideName, Side]]:
    """Each side's tree: a detached worktree of its commit in a temporary folder (removed, and
    unregistered from the repository, on the way out, whatever happened), or the working tree
    for ``.``. Every ref is checked before any checkout starts."""
    commits = {
        name: None if ref == WORKING_TREE else commit_of(repo, ref) for name, ref in refs.items()
    }
    temp = Path(tempfile.mkdtemp(prefix="perfbench-ab-"))
    made: list[Path] = []
    try:
        sides = {}
        for name, commit in commits.items():
            tree = repo.root if commit is None else _worktree(repo, commit, temp / name, made)
            sides[name] = Side(name, refs[name], commit, tree / repo.prefix)
        yield sides
    finally:
        for tree in made:
            _git(repo.root, "worktree", "remove", "--force", str(tree))
        shutil.rmtree(temp, ignore_errors=True)
        _git(repo.root, "worktree", "prune")


def _worktree(repo: Repo, commit: str, path: Path, made: list[Path]) -> Path:
    done = _git(repo.root, "worktree", "add", "--detach", "--quiet", str(path), commit)
    if done.returncode != 0:
        raise AbError(f"git worktree add {commit[:12]} failed: {done.stderr.strip()}")
    made.append(path)
    return path


def copy_suite(paths: Sequence[Path], side: Side, into: Path) -> list[Path]:
    """The case files or folders, read from ``side`` (a relative path is under its folder),
    copied once into ``into``: both sides then run the very same cases, even when the change
    under test edits them. Each copy keeps its name, which names the suite."""
    copies = []
    for n, path in enumerate(paths):
        source = path if path.is_absolute() else side.workdir / path
        if not source.exists():
            raise AbError(f"no cases at {source}: give the suite's path with --cases")
        target = into / str(n) / source.name
        target.parent.mkdir(parents=True)
        if source.is_dir():
            shutil.copytree(source, target)
        else:
            shutil.copy2(source, target)
        copies.append(target)
    return copies


@dataclass(frozen=True)
class Ran:
    """How one child run ended: its exit code and the end of what it printed."""

    code: int
    tail: str


def run_once(command: Sequence[str], side: Side, env: Mapping[str, str], timeout: float) -> Ran:
    """One ``perfbench run`` child in the side's folder. Its tables are not shown (ten runs
    of them would bury the verdict); its last lines are kept for an error message."""
    try:
        done = subprocess.run(
            list(command), cwd=side.workdir, env=dict(env), capture_output=True, text=True,
            timeout=timeout,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return Ran(124, f"no result after {timeout:g} s (--run-timeout)")
    lines = (done.stderr + done.stdout).strip().splitlines()
    return Ran(done.returncode, "\n".join(lines[-8:]))


def heading(sides: Mapping[SideName, Side], rounds: tuple[int, int]) -> str:
    """ab's Markdown heading: the commits compared, the rounds, and a confirmation's."""

    def name(side: Side) -> str:
        return f"`{side.ref}`" + (f" ({side.commit[:12]})" if side.commit else " (working tree)")

    first, more = rounds
    confirmed = (
        f"; they showed a regression, so {more} more rounds were measured to confirm it, and "
        f"the verdict below is that of all {first + more} rounds together"
        if more
        else ""
    )
    return (
        f"**perfbench ab**: {name(sides['baseline'])} → {name(sides['candidate'])}, "
        f"{first} interleaved rounds on one machine{confirmed}\n\n"
    )
