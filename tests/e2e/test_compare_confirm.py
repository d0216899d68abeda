"""`compare --confirm` (issue 22 item 6): a regression is measured again before it fails the
build: both sides re-run from their meta.json, and the regression stands only if it shows
again. Real runs of the in-process mock, the CLI in this process (``invoke``: a child
interpreter per command cost a second of CPU each, five a test).

On a loaded machine the sides measured again differ by whatever load came or went between
them: the gaps here are far beyond that (a 5× slowdown; a fluke of +50 ms judged with a
25 ms floor, where the default floor of 5 ms let a burst of load "confirm" it)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import invoke, load_note

CASE = "cases:\n  - {id: c, language: en, input: hi, timeout_s: 5}\n"
PROFILE = """name: fixed-{ms}
description: a fixed {ms} ms to the first token, nothing else
ttft_ms: {ms}
itl_ms: 0
output_chars: 4
tool_latency_scale: 0
models:
  sim:
    tokens_per_char: {{default: 0.25}}
"""


def _run(tmp_path: Path, ms: int, label: str) -> Path:
    profile = tmp_path / f"fixed-{ms}.yaml"
    profile.write_text(PROFILE.format(ms=ms))
    (tmp_path / "s.yaml").write_text(CASE)
    target = f"mock:{profile}"
    done = invoke("run", str(tmp_path / "s.yaml"), "-t", target, "--runs", "5", "--repeat", "4",
               "--label", label, "--out", str(tmp_path / "runs"), "-q")  # fmt: skip
    assert done.returncode == 0, done.stderr
    (run_dir,) = [d for d in (tmp_path / "runs").iterdir() if label in d.name]
    return run_dir


def _compare(tmp_path: Path, *more: str) -> tuple[int, dict[str, object], str]:
    done = invoke("compare", "base", "cand", "--root", str(tmp_path / "runs"), "--json", *more)
    return done.returncode, json.loads(done.stdout), done.stderr


def test_a_real_slowdown_is_confirmed_by_measuring_both_sides_again(tmp_path: Path) -> None:
    _run(tmp_path, 10, "base")
    _run(tmp_path, 50, "cand")
    code, verdict, stderr = _compare(tmp_path, "--confirm")
    assert code == 4, (verdict, stderr)
    assert verdict["outcome"] == "regression"
    assert any(str(n).startswith("confirmed: measured again") for n in verdict["notes"])
    labels = sorted(d.name.rsplit("_", 1)[-1] for d in (tmp_path / "runs").iterdir())
    assert labels == ["base", "base-confirm", "cand", "cand-confirm"]


def test_a_fluke_is_not_confirmed_and_becomes_inconclusive(tmp_path: Path) -> None:
    _run(tmp_path, 50, "base")
    cand = _run(tmp_path, 50, "cand")
    # The candidate's figures doubled after the fact: what a noisy neighbour in one sitting does.
    summary = json.loads((cand / "summary.json").read_text())
    for run in summary["runs"]:
        for key in ("p50", "p95", "p99", "mean"):
            run["overall"]["latency"][key] *= 2
    (cand / "summary.json").write_text(json.dumps(summary))
    floors = [f"--floor={m}=25ms" for m in ("p50", "p95", "p99", "mean")]
    assert _compare(tmp_path, *floors)[0] == 4  # without --confirm the doubled figures fail
    code, verdict, stderr = _compare(tmp_path, "--confirm", *floors)
    assert code == 0 and verdict["outcome"] == "inconclusive", (verdict, stderr, load_note())
    assert any(str(n).startswith("not confirmed:") for n in verdict["notes"])
    assert _compare(tmp_path, "--confirm", "--strict", *floors)[0] == 6
