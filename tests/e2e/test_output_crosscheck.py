"""Every sentence perfbench prints agrees with the figures printed beside it (issue 37): a
run's headline with its per-run table, its marks with its task counts, its open-loop line with
its headline; a compare's changes and verdict with its medians; a sweep's findings with its
table. Parsed from the real command's output, as a user reads it."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from perfbench.report.format import TITLES
from perfbench.stats.power import tasks_for
from tests.helpers import CASES, invoke

STEADY = """
name: steady
ttft_ms: 20
itl_ms: 2
output_chars: 40
models: {sim: {tokens_per_char: {default: 0.25}}}
"""
LIMITED = STEADY.replace("name: steady", "name: limited") + "rate_limits: {concurrent: 2}\n"
WIDE = {**os.environ, "COLUMNS": "220"}  # one table row a line


def _num(text: str) -> float:
    return float(text.replace(",", "").rstrip("*%/s").split()[0])


def _rows(output: str, first_header: str) -> list[list[str]]:
    """The body rows of the rich table whose header row starts with ``first_header``."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(rf"┃ {first_header}\s+┃", line))
    rows = []
    for line in lines[start + 2 :]:
        if line.startswith("└"):
            break
        if line.startswith("│"):
            rows.append([cell.strip() for cell in line.strip("│").split("│")])
    return rows


def _thin_ok(cell: str, tasks: int, key: str) -> bool:
    """A percentile cell is marked exactly when its tasks are too few to mean it."""
    return cell.endswith("*") == (tasks < tasks_for(int(key[1:]) / 100))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    tmp = tmp_path_factory.mktemp("crosscheck")
    profile = tmp / "steady.yaml"
    profile.write_text(STEADY)
    out, said = tmp / "runs", {}
    common = ["-t", f"mock:{profile}", "--warmup", "0", "--out", str(out), "-q", "--details"]
    closed, opened = ["--runs", "3", "--repeat", "2"], ["--runs", "1", "--rate", "40"]
    for label, extra in (("a1", closed), ("a2", closed), ("open", [*opened, "--duration", "0.5"])):
        args = [str(CASES / "answer.yaml"), *common, *extra, "--label", label]
        done = invoke("run", *args, env=WIDE)
        assert done.returncode == 0, done.stderr
        said[label] = done.stdout
    return out, said


def test_a_runs_sentences_agree_with_its_tables(runs: tuple[Path, dict[str, str]]) -> None:
    text = runs[1]["a1"]
    head = re.search(r"([\d,.]+) \(([\d,.]+)–([\d,.]+)\) tasks/s", text)  # the headline
    assert head is not None, text
    per_run = _rows(text, "run")
    *each, median = per_run
    throughputs = [_num(r[6]) for r in each]
    assert _num(head[1]) == _num(median[6])  # the headline is the median row
    assert (_num(head[2]), _num(head[3])) == (min(throughputs), max(throughputs))
    for row in each:  # ok/tasks, and each percentile marked as its run's tasks deserve
        ok = int(row[1].split("/")[0])
        assert all(_thin_ok(row[2 + i], ok, key) for i, key in enumerate(("p50", "p95", "p99")))
    cases = _rows(text, "case")
    *case_rows, everything = cases
    oks = [int(r[3].split("/")[0]) for r in case_rows]
    tasks = [int(r[3].split("/")[1]) for r in case_rows]
    assert everything[3] == f"{sum(oks)}/{sum(tasks)}"
    for row, ok in zip(case_rows, oks, strict=True):
        assert all(_thin_ok(row[4 + i], ok, key) for i, key in enumerate(("p50", "p95", "p99")))
    errors = re.search(r"errors ([\d.]+)%", text)
    assert errors is not None and _num(errors[1]) == round(100 * (1 - sum(oks) / sum(tasks)), 1)


def test_the_default_screens_marks_and_headline_agree_with_its_table(
    runs: tuple[Path, dict[str, str]],
) -> None:
    """The screen a user sees first (`show` without --details, as `run` prints it): each
    percentile marked exactly when its tasks are too few, the headline's too (by a run's
    tasks), its errors from the table's counts, and the note beside the marks."""
    root = runs[0]
    [run_dir] = [d for d in root.iterdir() if d.name.endswith("_a1")]
    done = invoke("show", str(run_dir), env=WIDE)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(r"\s*case\s+lang\s+ok/tasks", line))
    cells = [
        line.split() for line in lines[start + 2 :] if re.match(r"\s*\S+\s+(\w+\s+)?\d+/\d+", line)
    ]
    *case_rows, everything = cells
    assert everything[0] == "all" and len(case_rows) == 4, done.stdout
    for row in cells:
        ok = int(row[-6].split("/")[0])
        assert all(_thin_ok(row[-5 + i], ok, key) for i, key in enumerate(("p50", "p95", "p99")))
    oks = [int(r[-6].split("/")[0]) for r in case_rows]
    per_run = sum(int(r[-6].split("/")[1]) for r in case_rows) // 3  # 3 runs
    tail = " ".join(lines[-4:])
    for key in ("p50", "p95", "p99"):
        figure = re.search(rf"{key.upper()} ([\d,.]+ m?s)(\*?)", tail)
        assert figure is not None, tail
        assert (figure[2] == "*") == (per_run < tasks_for(int(key[1:]) / 100)), tail
    assert ("*" in done.stdout) == ("*: too few tasks" in done.stdout)
    errors = re.search(r"errors ([\d.]+)%", tail)
    total = sum(int(r[-6].split("/")[1]) for r in case_rows)
    assert errors is not None and _num(errors[1]) == round(100 * (1 - sum(oks) / total), 1)


def test_an_open_loops_offered_and_achieved_agree_with_its_headline(
    runs: tuple[Path, dict[str, str]],
) -> None:
    text = " ".join(runs[1]["open"].split())
    head = re.search(r"completed ([\d,.]+) tasks/s", text)  # the headline: no range, one run
    line = re.search(r"offered ([\d.]+) tasks/s, achieved ([\d.]+) completed \((\d+)%\)", text)
    assert head is not None and line is not None, text
    assert _num(line[1]) == 40.0 and _num(line[2]) == _num(head[1])
    # the share is of the unrounded rates: the printed ones (to 0.01) bound it
    achieved, offered = _num(line[2]), _num(line[1])
    low, high = (round(100 * (achieved + d) / offered) for d in (-0.005, 0.005))
    assert low <= int(line[3]) <= high, text
    last = " ".join(runs[1]["open"].splitlines()[-4:])  # the headline says the same
    assert f"{line[2]} tasks/s of {line[1]} offered ({line[3]}%)" in last, last


def test_a_compares_changes_and_verdict_agree_with_its_medians(
    runs: tuple[Path, dict[str, str]],
) -> None:
    done = invoke("compare", "a1", "a2", "--root", str(runs[0]), env=WIDE)
    text = done.stdout
    rows = [line.strip("|").split("|") for line in text.splitlines() if line.startswith("| ")]
    checked = 0
    for cells in rows:
        cells = [c.strip() for c in cells]
        if len(cells) != 7 or not cells[3].endswith("%") or " ms" not in cells[1]:
            continue
        base, cand, change = _num(cells[1]), _num(cells[2]), _num(cells[3])
        if base >= 1.0:  # printed to 0.01 ms: the ratio of the printed medians is the change
            assert change == pytest.approx(100 * (cand / base - 1), abs=0.6), cells
            checked += 1
    assert checked >= 4, text
    # The headline judges the gated rows (named on the "Gated:" line); the others inform.
    gated_line = next(line for line in text.splitlines() if line.startswith("Gated: "))
    gated = {TITLES.get(k, k) for k in gated_line[7:].split(" (")[0].split(", ")}
    judged = [c for c in rows if len(c) == 7 and c[0].strip() in gated and c[6].strip()]
    assert len(judged) >= 8, gated  # latency, TTFT, throughput, errors, 429s, tokens
    verdicts = {cells[6].strip().split()[0] for cells in judged}
    flagged = verdicts & {"❌", "regression", "inconclusive", "⚠️"}
    headline = text.splitlines()[0]
    assert ("pass" in headline) == (not flagged) and done.returncode in (0, 4, 5)


def test_a_sweeps_findings_agree_with_its_table(tmp_path: Path) -> None:
    profile = tmp_path / "limited.yaml"
    profile.write_text(LIMITED)
    done = invoke("sweep", str(CASES / "answer.yaml"), "-t", f"mock:{profile}", "-c", "1,2,4",
                  "--runs", "1", "--warmup", "0", "--repeat", "8", "--out", str(tmp_path / "s"),
                  "-q", env=WIDE)  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    table = {
        _num(cells[0]): cells
        for line in done.stdout.splitlines()
        if re.match(r"\| \d", line) and (cells := [c.strip() for c in line.strip("|").split("|")])
    }
    knee = re.search(
        r"(\S+) knee at ([\d.]+) \(concurrency\): [^;]+; ([\d.]+) tasks/s at the knee", text
    )
    assert knee is not None, text
    assert _num(knee[3]) == _num(table[_num(knee[2])][1])  # the knee's figure is its row's
    assert ("plateau" in text) == (knee[1] == "Throughput")
    more = re.search(r"; ([\d.]+) completed more \(([\d.]+) tasks/s", text)
    if more is not None:
        row = table[_num(more[1])]
        assert _num(more[2]) == _num(row[1]) > _num(knee[3]) and _num(row[5]) <= 1.0
    for level, per_task in re.findall(r"- ([\d.]+): 429 answers at ([\d.]+) per task", text):
        assert _num(per_task) == _num(table[_num(level)][6])
