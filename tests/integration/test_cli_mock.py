from __future__ import annotations

from pathlib import Path

import httpx
from typer.testing import CliRunner

from perfbench.cli import app
from tests.helpers import mock_process


def test_mock_profiles_lists_the_shipped_ones() -> None:
    result = CliRunner().invoke(app, ["mock", "profiles"])
    assert result.exit_code == 0
    for name in ("default", "rate-limited", "flaky", "slow-tail", "zero"):
        assert name in result.output


def test_mock_serve_rejects_a_bad_profile_clearly(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("ttft_ms: {lognormal: {median: 100, p99: 50}}\nfaults: {reset: 2}\n")
    result = CliRunner().invoke(app, ["mock", "serve", "--profile", str(bad)])
    assert result.exit_code == 3
    assert f"{bad}:1: ttft_ms.lognormal" in result.output
    assert "p99 must be at least the median" in result.output
    missing = CliRunner().invoke(app, ["mock", "serve", "--profile", "nope"])
    assert missing.exit_code == 3 and "rate-limited" in missing.output


def test_mock_serve_prints_its_url_and_serves() -> None:
    with mock_process("default", "--seed", "3") as url:
        health = httpx.get(url + "/health").json()
    assert health == {"status": "ok", "profile": "default"}


def test_help_paragraphs_wrap_to_the_terminal_not_to_the_source() -> None:
    """A docstring's paragraphs are re-flowed: in a wide terminal each is one line, where
    typer kept the source's line breaks (ragged help in a terminal narrower than the editor)."""
    result = CliRunner().invoke(app, ["calibrate", "--help"], env={"COLUMNS": "250"})
    assert result.exit_code == 0
    assert "the client. Short non-streaming calls at 64 in flight (calls/s" in result.output
    sweep = CliRunner().invoke(app, ["sweep", "--help"], env={"COLUMNS": "250"}).output
    assert "\n Example: perfbench sweep cases/" in sweep  # a paragraph of its own
