"""Files and processes (issue 35, items 6–8): `--record` never overwrites a file silently
(a case file or a run's documents never, another file only with --force); a `cmd:` agent's
detached child neither turns a finished task into a timeout nor outlives it. The real
executable on loopback, bounded in tasks and time."""

from __future__ import annotations

import gzip
import os
import signal
import sys
from pathlib import Path

import pytest

from tests.helpers import alive, cli, run_samples, serving_raw, write_suite

AGENTS = Path(__file__).resolve().parent.parent / "fixtures" / "agents"
QUICK = f"cmd:{sys.executable} {AGENTS / 'urllib_agent.py'}"


def record(tmp: Path, cases: Path, to: Path, *more: str) -> tuple[int, str]:
    done = cli("run", str(cases), "-t", QUICK, "--runs", "1", "--warmup", "0", "-q",
               "--out", str(tmp / "runs"), "--record", str(to), *more)  # fmt: skip
    return done.returncode, done.stderr


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    folder = tmp_path / "cases"
    folder.mkdir()
    return write_suite(folder / "one.yaml", "cases:\n  - {id: a, input: hi, timeout_s: 30}\n")


def test_an_existing_file_is_overwritten_only_with_force(tmp_path: Path, suite: Path) -> None:
    kept = tmp_path / "calls.jsonl"
    kept.write_text("precious\n")
    code, said = record(tmp_path, suite, kept)
    assert code == 2 and "exists" in said and "--force" in said and "Traceback" not in said
    assert kept.read_text() == "precious\n" and not (tmp_path / "runs").exists()
    code, said = record(tmp_path, suite, kept, "--force")
    assert code == 0, said
    assert kept.read_text().startswith('{"perfbench_recording":1')


@pytest.mark.parametrize("which", ["the suite file", "a yaml in the suite folder", "samples"])
def test_the_suites_files_and_a_runs_documents_are_never_overwritten(
    tmp_path: Path, suite: Path, which: str
) -> None:
    run_dir = tmp_path / "old-run"
    run_dir.mkdir()
    (run_dir / "meta.json").write_text("{}")
    targets = {
        "the suite file": (suite, suite),
        "a yaml in the suite folder": (suite.parent, suite.parent / "two.yaml"),
        "samples": (suite, run_dir / "samples.jsonl"),
    }
    cases, to = targets[which]
    before = to.read_bytes() if to.exists() else None
    code, said = record(tmp_path, cases, to, "--force")
    assert code == 2 and "elsewhere" in said and "Traceback" not in said, said
    assert (to.read_bytes() if to.exists() else None) == before


def test_a_setsid_child_neither_holds_the_answer_nor_outlives_its_task(tmp_path: Path) -> None:
    cases = write_suite(tmp_path / "c.yaml", "cases:\n  - {id: a, input: hi, timeout_s: 20}\n")
    pid_file = tmp_path / "child.pid"
    env = {**os.environ, "AGENT_CHILD_PID_FILE": str(pid_file)}
    done = cli("run", str(cases), "-t", f"cmd:{sys.executable} {AGENTS / 'setsid_agent.py'}",
               "--runs", "1", "--warmup", "0", "-q", "--out", str(tmp_path / "runs"),
               env=env)  # fmt: skip
    child = int(pid_file.read_text())
    try:
        (sample,) = run_samples(tmp_path / "runs")
        assert sample["status"] == "ok" and sample["error_kind"] is None, (sample, done.stderr)
        assert sample["leftovers"] == 1  # the sample says a process was left, and killed
        assert not alive(child), "the agent's setsid child outlived its task"
    finally:
        if alive(child):  # a failed run leaves nothing behind either
            os.kill(child, signal.SIGKILL)


async def _gzip_error(request: bytes) -> bytes:
    body = gzip.compress(b'{"error": "bad\x00\x00request\x1b[31m red"}')
    head = (f"HTTP/1.1 500 Oops\r\ncontent-type: application/json\r\ncontent-encoding: gzip\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n")  # fmt: skip
    return head.encode() + body


def test_an_error_text_keeps_no_control_character(tmp_path: Path) -> None:
    cases = write_suite(tmp_path / "c.yaml", "cases:\n  - {id: a, input: hi, timeout_s: 20}\n")
    with serving_raw(_gzip_error) as url:
        done = cli("run", str(cases), "-t", "openai/m", "--base-url", f"{url}/v1", "--runs",
                   "1", "--warmup", "0", "-q", "--retries", "0", "--out",
                   str(tmp_path / "runs"), "--no-preflight")  # fmt: skip
    (sample,) = run_samples(tmp_path / "runs")
    assert sample["error_kind"] == "http_500", (sample, done.stderr)
    assert "bad" in sample["error"] and "request" in sample["error"]
    assert not [c for c in sample["error"] if ord(c) < 32 and c not in "\t\n"], sample["error"]
