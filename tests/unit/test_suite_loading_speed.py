"""Loading many cases (issue 38): a file without anchors or aliases is composed by libyaml,
with the same values and lines as PyYAML's guarded composer; `cases check` lists the first
rows of a large suite unless asked for all."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from perfbench import yamlfile
from perfbench.cli import app, output
from perfbench.cli.cases import SHOWN

TEXT = """\
defaults:
  timeout_s: 30
cases:
  - id: a
    tags: [x, "y"]
    input: "Say hi"   # a comment
    max_tokens: 16
    expect: {tool_calls: []}
  - id: b
    input: |
      Two
      lines
    temperature: 0.5
    when: 2024-13-45
"""


def _suite(tmp_path: Path, n: int) -> Path:
    rows = [f"  - id: case-{i:04d}\n    language: en\n    input: item {i}\n" for i in range(n)]
    path = tmp_path / "many.yaml"
    path.write_text("cases:\n" + "".join(rows), encoding="utf-8")
    return path


def test_libyaml_gives_the_guarded_composers_values_and_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast_file, slow_file = tmp_path / "fast.yaml", tmp_path / "slow.yaml"
    fast_file.write_text(TEXT, encoding="utf-8")
    slow_file.write_text(TEXT + "# & makes it the guarded composer's\n", encoding="utf-8")
    fast, slow = yamlfile.load(fast_file), yamlfile.load(slow_file)
    assert fast.data == slow.data and fast.lines == slow.lines
    assert fast.lines[("cases", 1, "temperature")] == 13

    def refused(self: object) -> None:
        raise AssertionError("an anchor-free file went through PyYAML's composer")

    monkeypatch.setattr(yamlfile._Loader, "get_single_node", refused)
    assert yamlfile.load(fast_file).data == slow.data


def test_too_deep_without_anchors_is_still_refused_in_the_same_words(tmp_path: Path) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("cases: " + "[" * 150 + "]" * 150 + "\n", encoding="utf-8")
    with pytest.raises(yamlfile.YamlProblem, match="more than 100 deep"):
        yamlfile.load(path)


def test_cases_check_lists_the_first_cases_of_a_large_suite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The console is made once a process, at whatever width an earlier test left: fix it here.
    monkeypatch.setattr(output.out, "_width", 200)
    path = _suite(tmp_path, SHOWN + 5)
    result = CliRunner().invoke(app, ["cases", "check", str(path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert f"case-{SHOWN - 1:04d}" in result.output and f"case-{SHOWN:04d}" not in result.output
    assert "… and 5 more cases, all valid: add --all to list them." in result.output
    every = CliRunner().invoke(app, ["cases", "check", "--all", str(path)], env={"COLUMNS": "200"})
    assert f"case-{SHOWN + 4:04d}" in every.output and "more cases" not in every.output


def test_libyaml_is_there() -> None:
    assert yaml.__with_libyaml__  # PyYAML's wheels bundle it; without, loading is 8x slower
