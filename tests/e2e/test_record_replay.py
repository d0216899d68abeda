"""Record real traffic, replay it in CI (issue 24 items 3 and 4): a cmd: agent's calls through
the proxy to the mock are recorded (`run --record`), then served by a mock profile's
`replay:` with the recorded timing; the replayed run's model-call timing matches the
recorded run's, and `compare` of the two passes. A call the recording lacks is a classified
`replay_miss`. Loopback only; a stdlib agent, so no interpreter start-up swamps the timing."""

from __future__ import annotations

import itertools
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import pytest

from perfbench.apis.recording import Call, read
from perfbench.errors import ProfileError
from perfbench.mock.profile import load_profile
from perfbench.mock.replay import Answer, Replay
from tests.helpers import CASES, invoke, load_note, write_suite

AGENTS = Path(__file__).resolve().parent.parent / "fixtures" / "agents"
AGENT = f"cmd:{sys.executable} {AGENTS / 'urllib_agent.py'}"
# Slow enough that the timing, not the machine's noise, is what is compared: stalls of 5-12 ms
# on this 2-core VM (the agents' start-up, the other test process) were 5 % of a 60 ms median
# TTFT's P95 (CI failed on it once); at 150 ms the worst of 4 record/replay pairs was 2.4 %.
PROFILE = ("ttft_ms: {lognormal: {median: 150, p99: 300}}\nitl_ms: 12\noutput_chars: 80\n"
           "models: {sim: {tokens_per_char: {default: 0.25}}}\n")  # fmt: skip
PLAN = ("--runs", "3", "--warmup", "1", "--repeat", "4", "-c", "2", "-q")


def _run(out: Path, upstream: str, *extra: str, cases: Path = CASES / "answer.yaml") -> Path:
    done = invoke("run", str(cases), "-t", AGENT, "--upstream", upstream, *PLAN,
                  "--out", str(out), *extra)  # fmt: skip
    assert done.returncode == 0, done.stderr
    (run_dir,) = [d for d in out.iterdir() if (d / "meta.json").exists()]
    return run_dir


def _overall(run_dir: Path) -> dict[str, Any]:
    overall: dict[str, Any] = json.loads((run_dir / "summary.json").read_text())["pooled"][
        "overall"
    ]
    return overall


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    folder = tmp_path_factory.mktemp("recorded")
    profile = folder / "live.yaml"
    profile.write_text(PROFILE)
    recording = folder / "calls.jsonl"
    run_dir = _run(folder / "runs", f"mock+http:{profile}", "--record", str(recording))
    replay = folder / "replay.yaml"
    replay.write_text("name: replay\nreplay: {path: calls.jsonl, timing: recorded}\n")
    return run_dir, recording, replay


def test_a_recording_holds_every_call_with_its_timing(recorded: tuple[Path, Path, Path]) -> None:
    run_dir, recording, _ = recorded
    header, *calls = [json.loads(line) for line in recording.read_text().splitlines()]
    meta = json.loads((run_dir / "meta.json").read_text())
    assert header["perfbench_recording"] == 1
    assert header["suite_digest"] == meta["suite"]["digest"]
    assert len(calls) == 4 * 4 * (3 + 1)  # cases × repeat × passes (warmup included), 1 call each
    first = calls[0]
    assert first["status"] == 200 and first["path"] == "chat/completions"
    assert first["headers"]["content-type"].startswith("text/event-stream")
    offsets = [[at for at, _ in call["chunks"]] for call in calls]
    assert all(times == sorted(times) for times in offsets)
    # The head (the role chunk) comes with the headers, the first token ~150 ms later: the
    # head is not held back with it. (Not "within 30 ms": at load average 20, with a CPU hog
    # on one core, the first call's head took 36 ms; the wait for the token is the reference.)
    heads = statistics.median(times[0] for times in offsets)
    waits = statistics.median(times[1] - times[0] for times in offsets)
    assert heads < waits / 2, (heads, waits, load_note())
    assert "".join(text for _, text in first["chunks"]).rstrip().endswith("data: [DONE]")


REPLAYS = 3


FIGURES = [(figure, p) for figure in ("request_ttft", "tpot") for p in ("p50", "p95")]


def _timing_off(
    live: dict[str, Any], replayed: dict[str, Any], noise: dict[tuple[str, str], float]
) -> list[tuple[str, str, float, float]]:
    """The figures of a replay off the live run's by more than 5 %, or by more than twice
    ``noise`` (how far two live runs of the same delays came apart, relatively) when that is
    more. P95 of 48 is the third-slowest task: it has 20 ms more room."""
    off = []
    for figure, p in FIGURES:
        rel = max(0.05, 2 * noise.get((figure, p), 0.0))
        slack = 0.02 if p == "p95" else 0.0
        if replayed[figure][p] != pytest.approx(live[figure][p], rel=rel, abs=slack):
            off.append((figure, p, live[figure][p], replayed[figure][p]))
    return off


def _noise(one: dict[str, Any], other: dict[str, Any]) -> dict[tuple[str, str], float]:
    return {(f, p): abs(other[f][p] - one[f][p]) / one[f][p] for f, p in FIGURES if one[f][p]}


def test_a_replay_with_the_recorded_timing_matches_the_recorded_run(
    recorded: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """The replay's timing within 5 % of the recorded run's. Measured apart, the two meet
    different loads (`make test`'s other process, another user's build: a P50 11 % off once
    at load average 7-8). So a replay off by more is measured again beside a reference measured
    now, the recorded profile run live again (the mock's draws are seeded per call: the same
    delays), and may be off by twice what the two live runs differ by (at load average 9 on two
    cores, with a CPU hog on one, two live runs' TPOT P50 differed by 46 %)."""
    run_dir, recording, replay = recorded
    reference = run_dir
    live, noise = _overall(run_dir), {}
    off: list[list[tuple[str, str, float, float]]] = []
    for attempt in range(REPLAYS):
        again = _run(tmp_path / f"replay{attempt}", f"mock+http:{replay}")
        replayed = _overall(again)
        assert replayed["ok"] == live["ok"] == 48
        assert replayed["tokens_out"] == live["tokens_out"]  # the same answers, token for token
        off.append(_timing_off(live, replayed, noise))
        if not off[-1] or attempt == REPLAYS - 1:
            break
        reference = _run(tmp_path / f"live{attempt}", f"mock+http:{recording.parent / 'live.yaml'}")
        now = _overall(reference)
        live, noise = now, _noise(live, now)
    assert not off[-1], f"{len(off)} replays off their reference, {load_note()}: {off}"
    compared = invoke("compare", str(reference), str(again))
    assert compared.returncode == 0, compared.stdout + compared.stderr


def test_a_call_the_recording_lacks_is_a_replay_miss(
    recorded: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    _, _, replay = recorded
    cases = write_suite(tmp_path / "new.yaml", "cases:\n  - {id: never-recorded, input: hi}\n")
    done = invoke("run", str(cases), "-t", AGENT, "--upstream", f"mock+http:{replay}", "--runs",
                  "1", "--warmup", "0", "-q", "--out", str(tmp_path / "runs"))  # fmt: skip
    (run_dir,) = list((tmp_path / "runs").iterdir())
    (sample,) = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert sample["error_kind"] == "replay_miss", done.stderr
    assert "has no call 0 of case 'never-recorded'" in sample["error"]


def _asking(call: Call, key: str) -> dict[str, str]:
    """The headers perfbench's proxy sends for ``call``, under the task key ``key``."""
    return {"x-perfbench-case": call.case, "x-perfbench-step": str(call.step),
            "x-perfbench-phase": call.phase, "x-perfbench-run": str(call.run),
            "x-perfbench-iteration": str(call.iteration), "x-perfbench-key": key}  # fmt: skip


def _first_token_and_gaps(times: list[tuple[float, ...]]) -> tuple[float, float]:
    """The medians of the first token's time (the second chunk: the head goes first) and of
    the gaps after it."""
    gaps = [b - a for t in times for a, b in itertools.pairwise(t[1:])]
    return statistics.median(t[1] for t in times), statistics.median(gaps)


def test_a_fitted_replay_keeps_the_shape_of_the_recorded_delays(
    recorded: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """Each chunk's time drawn from lognormal fits to the recording: a time to first token and
    gaps about the recorded ones (not each call's own), seeded per call. The shape is checked
    on the delays the replay serves, not on a run's timing: measured apart in time, two runs
    at load average 20 (a CPU hog on one core) were 49 % apart, a fitted replay's TTFT P50
    against the recorded timing's replayed just before."""
    run_dir, recording, _ = recorded
    _, calls = read(recording)
    fitted = Replay(recording, "fitted")
    served = [fitted.answer(_asking(call, f"k{n}")) for n, call in enumerate(calls)]
    assert all(isinstance(answer, Answer) for answer in served), served
    drawn = [answer.due for answer in served if isinstance(answer, Answer)]
    kept = [tuple(at for at, _ in call.chunks) for call in calls]
    assert [answer.chunks for answer in served if isinstance(answer, Answer)] == [
        tuple(text.encode() for _, text in call.chunks) for call in calls
    ]  # the recorded answers, chunk for chunk
    assert _first_token_and_gaps(drawn) == pytest.approx(_first_token_and_gaps(kept), rel=0.25)
    assert sum(d == k for d, k in zip(drawn, kept, strict=True)) == 0  # not each call's own
    # Seeded by each call's key: the same draws when the same call comes again, others not.
    again = fitted.answer(_asking(calls[0], "k0"))
    other = fitted.answer(_asking(calls[0], "another key"))
    assert isinstance(again, Answer) and isinstance(other, Answer)
    assert again.due == drawn[0] != other.due
    # Served by the mock through the proxy: the same answers, token for token.
    profile = recording.parent / "fitted.yaml"
    profile.write_text("name: fitted\nreplay: {path: calls.jsonl, timing: fitted}\n")
    replayed = _overall(_run(tmp_path / "runs", f"mock+http:{profile}"))
    live = _overall(run_dir)
    assert replayed["ok"] == 48 and replayed["tokens_out"] == live["tokens_out"]


def test_a_damaged_recording_is_the_profiles_located_error(tmp_path: Path) -> None:
    (tmp_path / "calls.jsonl").write_text('{"perfbench_recording": 1}\n{"case": 3\n')
    profile = tmp_path / "replay.yaml"
    profile.write_text("replay: {path: calls.jsonl}\n")
    with pytest.raises(ProfileError, match=r"calls.jsonl:2: not JSON"):
        load_profile(str(profile))
    done = invoke("run", str(CASES / "answer.yaml"), "-t", AGENT, "--upstream",
                  f"mock+http:{profile}", "--out", str(tmp_path / "runs"))  # fmt: skip
    assert done.returncode != 0 and "calls.jsonl:2: not JSON" in done.stderr
    assert "Traceback" not in done.stderr
    swept = invoke("sweep", str(CASES / "answer.yaml"), "-t", AGENT, "--record",
                   str(tmp_path / "r.jsonl"), "--out", str(tmp_path / "s"))  # fmt: skip
    assert swept.returncode == 2 and "--record is for run" in swept.stderr
