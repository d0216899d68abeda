"""meta.json, sweep-plan.json and samples.jsonl's lines read through their pydantic types
(issue 41, item 6):
what a real run wrote reads back equal and is written back byte for byte; a damaged document
is named where and what; documents of older and newer versions keep their other keys."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from perfbench import store
from perfbench.cli import app
from perfbench.errors import StoreError
from perfbench.sample import Sample, Step
from perfbench.store.checks import Damage
from perfbench.store.documents import check_meta, check_sweep, read_sample
from perfbench.store.sweeps import PLAN_FILE
from tests.helpers import CASES


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real run: cases with tools (several steps a line) and without."""
    out = tmp_path_factory.mktemp("runs")
    made = CliRunner().invoke(app, ["run", str(CASES / "workflow.yaml"), str(CASES / "answer.yaml"),
                                    "-t", "mock:zero", "--runs", "1", "--warmup", "1",
                                    "--out", str(out), "-q"])  # fmt: skip
    assert made.exit_code == 0, made.output
    [found] = out.iterdir()
    return found


def lines(run_dir: Path) -> list[bytes]:
    return (run_dir / store.SAMPLES).read_bytes().splitlines(keepends=True)


# --- sample lines ----------------------------------------------------------------------------


def test_every_line_of_a_run_reads_as_the_sample_it_was_and_writes_back_the_same_bytes(
    run_dir: Path,
) -> None:
    found = lines(run_dir)
    assert len(found) == 2 * (4 + 4)  # warmup + measured, two suites of four cases
    assert any(len(orjson.loads(line)["steps"]) > 1 for line in found)
    for line in found:
        sample = read_sample(line)
        assert sample == Sample.from_json(orjson.loads(line))
        assert all(isinstance(step, Step) for step in sample.steps)
        assert orjson.dumps(sample.to_json(), option=orjson.OPT_APPEND_NEWLINE) == line


def test_a_whole_number_in_a_float_field_stays_whole_so_a_resume_rewrites_it_unchanged(
    run_dir: Path, tmp_path: Path
) -> None:
    """pydantic's float would read 3 as 3.0, and a resumed run (which rewrites samples.jsonl
    from what it read) would change the file."""
    line = lines(run_dir)[0]
    doc = orjson.loads(line)
    doc["ttft"], doc["steps"][0]["duration"] = 0, 3
    edited = orjson.dumps(doc, option=orjson.OPT_APPEND_NEWLINE)
    sample = read_sample(edited)
    assert type(sample.ttft) is int and type(sample.steps[0].duration) is int
    store.rewrite_samples(tmp_path, [sample])
    assert (tmp_path / store.SAMPLES).read_bytes() == edited


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        for key in parents:
            doc = doc[int(key)] if isinstance(doc, list) else doc[key]  # type: ignore[assignment]
        doc[last] = value

    return edit


def _drop(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda doc: doc.pop(key)


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (_set("start", "x"), "start: expected a finite number, found a string ('x')"),
        (_set("end", None), "end: expected a finite number, found null"),
        (_set("ttft", True), "ttft: expected a finite number, found a boolean (True)"),
        (_set("run", 1.0), "run: expected an integer, found a number (1.0)"),
        (_set("tokens_estimated", 0), "tokens_estimated: expected true or false, found a number"),
        (_set("status", "fine"), "status: expected 'ok', 'error', 'timeout'"),
        (_set("steps.0.ttft", "fast"), "steps[0].ttft: expected a finite number"),
        (_set("steps.0.kind", "nap"), "steps[0].kind: expected 'model', 'tool' or 'agent'"),
        (_set("steps.0.extra", 1), "steps[0].extra: not a key this document has"),
        (_set("surprise", 1), "surprise: not a key this document has"),
        (_set("latency", "slow"), "latency: expected a finite number, found a string"),
        (_set("itl_gaps", [[1.5, 1]]), "itl_gaps[0][0]: expected an integer"),
        (_set("tags", "a,b"), "tags: expected a list, found a string"),
        (_drop("case"), "the key 'case' is missing"),
        # orjson, which wrote the line, has 64-bit integers: an iteration of 10^30 would have
        # sized --resume's set of tasks done (store.tasks) at 10^29 bytes.
        (_set("iteration", 10**30), "iteration: input should be less than or equal to"),
    ],
)
def test_a_damaged_line_is_said_where_and_what(
    run_dir: Path, edit: Callable[[dict[str, Any]], None], said: str
) -> None:
    doc = orjson.loads(lines(run_dir)[-1])
    edit(doc)
    with pytest.raises(Damage) as caught:
        read_sample(json.dumps(doc).encode())  # json: orjson writes no 10**30
    assert str(caught.value).startswith(said), str(caught.value)


@pytest.mark.parametrize(
    ("line", "said"),
    [
        (b'"start":1e999', "start: expected a finite number, found a number (inf)"),
        (b'"start":NaN', "start: expected a finite number, found a number (nan)"),
        (b"[1, 2]", "expected an object, found a list"),
        (b'{"phase": "warm', "not a JSON line (EOF while parsing a string at line 1 column 15)"),
        (b"\xff\xfe", "not a JSON line (expected value at line 1 column 1)"),
    ],
)  # fmt: skip
def test_a_line_that_is_not_a_sample_is_said_so(run_dir: Path, line: bytes, said: str) -> None:
    """``line``: a whole line, or a new start for a line of the run (JSON has no 1e999 nor
    NaN, which Python's json and pydantic's parser read as numbers)."""
    if line.startswith(b'"start"'):
        whole = lines(run_dir)[0]
        start = whole.index(b'"start":')
        line = whole[:start] + line + whole[whole.index(b",", start) :]
    with pytest.raises(Damage) as caught:
        read_sample(line)
    assert str(caught.value).startswith(said), str(caught.value)


def test_a_damaged_line_is_a_store_error_naming_the_file_and_line(
    run_dir: Path, tmp_path: Path
) -> None:
    found = lines(run_dir)
    found[2] = found[2].replace(b'"iteration":', b'"iteration":"0","x":', 1)
    (tmp_path / store.SAMPLES).write_bytes(b"".join(found))
    with pytest.raises(StoreError) as caught:
        list(store.read_samples(tmp_path))
    said = str(caught.value)
    assert said.startswith(f"{tmp_path / store.SAMPLES}:3: iteration: expected an integer"), said
    assert "perfbench run --resume" in said  # how to repair it


# --- meta.json -------------------------------------------------------------------------------


@pytest.fixture
def meta(run_dir: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((run_dir / store.META).read_text())
    return doc


def test_a_runs_meta_json_is_read_as_written_and_written_back_byte_for_byte(
    run_dir: Path, tmp_path: Path
) -> None:
    """The reader keeps the document as parsed (pydantic's copy would reorder keys and make
    3 of 3.0): a resumed run writes meta.json back from what it read."""
    written = (run_dir / store.META).read_bytes()
    doc = store.read_json(run_dir / store.META)
    assert doc == json.loads(written)
    doc["duration_s"] = 3  # a whole number, in a float field
    store.write_json(tmp_path / store.META, doc)
    again = store.read_json(tmp_path / store.META)
    assert type(again["duration_s"]) is int
    store.write_json(tmp_path / "again.json", again)
    assert (tmp_path / "again.json").read_bytes() == (tmp_path / store.META).read_bytes()
    doc["duration_s"] = json.loads(written)["duration_s"]
    store.write_json(tmp_path / store.META, doc)
    assert (tmp_path / store.META).read_bytes() == written


def test_keys_of_older_and_newer_versions_are_kept(meta: dict[str, Any]) -> None:
    """A run from before specs (``invocation``, no ``spec``), and keys this version does not
    know at any open level (a newer perfbench's), are read."""
    older = copy.deepcopy(meta)
    del older["spec"], older["plan"], older["schema"]
    older["invocation"] = {"runs": 2, "concurrency": 1}
    check_meta(older)
    newer = copy.deepcopy(meta)
    newer["tomorrow"] = {"x": 1}
    newer["suite"]["cases"][0]["weight"] = 2.5
    newer["spec"]["target"]["transport"] = "h3"
    newer["spec"]["plan"]["shards"] = 4
    check_meta(newer)


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (_set("suite", "x"), "suite: expected an object, found a string ('x')"),
        (_set("label", 1), "label: expected a string, found a number (1)"),
        (_set("suite.cases.1.timeout_s", "9"), "suite.cases[1].timeout_s: expected a number"),
        (_set("spec.plan.runs", "2"), "spec.plan.runs: expected an integer"),
        (_set("spec.plan.repeat", 0), "spec.plan.repeat: input should be greater than or equal"),
        # Read back by --resume, which rebuilt the plan from them with a traceback before.
        (_set("spec.plan.stages", True), "spec.plan.stages: expected a list, found a boolean"),
        (_set("spec.plan.ray", 1), "spec.plan.ray: expected a string"),
        (_set("spec.target.proxy", "yes"), "spec.target.proxy: expected true or false"),
        (_set("spec.plan.load", {"shape": "rate", "per_second": 2, "burst": 1}),
         "spec.plan.load.burst: not a key this document has"),
        (_set("spec.plan.load", {"shape": "wave"}), "spec.plan.load.shape: expected 'adaptive'"),
        (_set("duration_s", float("inf")), "duration_s: expected a finite number"),
        (_drop("status"), "the key 'status' is missing"),
    ],
)  # fmt: skip
def test_a_damaged_meta_json_is_said_where_and_what(
    meta: dict[str, Any], edit: Callable[[dict[str, Any]], None], said: str
) -> None:
    edit(meta)
    with pytest.raises(Damage) as caught:
        check_meta(meta)
    assert str(caught.value).startswith(said), str(caught.value)


def test_the_specs_load_names_its_shape_and_the_older_plans_load_need_not(
    tmp_path: Path,
) -> None:
    """meta.json's ``plan`` is ``asdict(Plan)``: its load has no ``shape``; the spec's load,
    from which --resume rebuilds the load, must name it (a KeyError in ``spec._plan`` else)."""
    made = CliRunner().invoke(app, ["run", str(CASES / "answer.yaml"), "-t", "mock:zero",
                                    "--rate", "50", "--runs", "1", "--warmup", "0",
                                    "--out", str(tmp_path), "-q"])  # fmt: skip
    assert made.exit_code == 0, made.output
    [run] = tmp_path.iterdir()
    meta = json.loads((run / store.META).read_text())
    assert "shape" not in meta["plan"]["load"] and meta["spec"]["plan"]["load"]["shape"] == "rate"
    check_meta(meta)
    del meta["spec"]["plan"]["load"]["shape"]
    with pytest.raises(Damage, match=r"^spec\.plan\.load: the key 'shape' is missing"):
        check_meta(meta)


def test_every_reader_of_meta_json_says_which_file_and_how_to_fix_it(
    run_dir: Path, meta: dict[str, Any], tmp_path: Path
) -> None:
    meta["spec"]["plan"]["stages"] = [[1.0, 2, 3]]
    (tmp_path / store.META).write_text(json.dumps(meta))
    with pytest.raises(StoreError) as caught:
        store.read_meta(tmp_path)
    said = str(caught.value)
    assert said.startswith(f"{tmp_path / store.META}: spec.plan.stages[0]: "), said
    assert "restore meta.json from a copy" in said


# --- sweep-plan.json -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sweep_plan(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("sweeps")
    made = CliRunner().invoke(app, ["sweep", str(CASES / "answer.yaml"), "-t", "mock:zero",
                                    "-c", "1,2", "--runs", "1", "--warmup", "0",
                                    "--out", str(out), "-q"])  # fmt: skip
    assert made.exit_code == 0, made.output
    [found] = out.iterdir()
    doc: dict[str, Any] = json.loads((found / PLAN_FILE).read_text())
    return doc


def test_a_sweeps_plan_and_one_from_before_specs_are_read(sweep_plan: dict[str, Any]) -> None:
    check_sweep(sweep_plan)
    older = copy.deepcopy(sweep_plan)
    older["target"] = older["target"]["target"]
    older["options"] = {"base_url": None, "api_key_env": None, "seed": 0}
    check_sweep(older)


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (_set("plan.levels", [1, 0]), "plan.levels[1]: input should be greater than 0"),
        (_set("plan.slo", ["p95", "2s"]), "plan.slo[1]: expected a number, found a string"),
        (_set("plan.slo", "p95<2s"), "plan.slo: expected a list, found a string"),
        (_set("plan.rule.patience", 2), "plan.rule.patience: not a key this document has"),
        (_set("plan.base.repeat", 0), "plan.base.repeat: input should be greater than or equal"),
        (_set("target", 7), "target: expected an object, found a number (7)"),
        (_set("target.retries", -1), "target.retries: input should be greater than or equal"),
        (_drop("status"), "the key 'status' is missing"),
    ],
)
def test_a_damaged_sweep_plan_is_said_where_and_what(
    sweep_plan: dict[str, Any], edit: Callable[[dict[str, Any]], None], said: str
) -> None:
    doc = copy.deepcopy(sweep_plan)
    edit(doc)
    with pytest.raises(Damage) as caught:
        check_sweep(doc)
    assert str(caught.value).startswith(said), str(caught.value)
