"""Run directories that are locked, cut short, full or damaged (issue 21, items 13–16).

One real run folder is made per module (the CLI in this process, ``-t mock:zero``, four cases);
each test works on copies. Every reader must end with a clear error that names the damaged file
(exit 3) or succeed, never with a traceback; a second writer of a run is refused; a sweep
resumes from any state a kill leaves; a full disk keeps the error that says how to resume."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib.figure import Figure
from typer.testing import CliRunner

from perfbench import store
from perfbench.cli import app
from perfbench.errors import StoreError
from perfbench.store.sweeps import PLAN_FILE
from tests.helpers import CASES, fixed_profile, perfbench

CASE = CASES / "answer.yaml"  # four cases, no tools
TASKS = 4 * 3  # four cases × (one warmup + two measured passes)


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(app, [str(a) for a in args])


def clean(result: Result, codes: tuple[int, ...] = (0, 3)) -> None:
    """One of ``codes`` (a result, or 3: perfbench's own error), and never an exception that
    escaped the command (a traceback)."""
    escaped = result.exception if not isinstance(result.exception, SystemExit) else None
    assert escaped is None, "".join(traceback.format_exception(escaped))
    assert result.exit_code in codes, result.output


VERDICTS = (0, 3, 4, 5, 6)  # compare: pass, error, regression, threshold, inconclusive


def keys(run_dir: Path) -> Counter[tuple[Any, ...]]:
    lines = (run_dir / store.SAMPLES).read_text().splitlines()
    return Counter(
        (d["phase"], d["run"], d["case"], d["iteration"]) for d in map(json.loads, lines)
    )


@pytest.fixture(autouse=True)
def _quick_charts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Charts are built but not rasterised: a report's PNG and SVG cost ~0.5 s, and this
    module reports hundreds of folders (tests/e2e/test_report_cli.py draws them for real)."""

    def save(self: Figure, path: Any, **_: Any) -> None:
        Path(str(path)).write_bytes(b"")

    monkeypatch.setattr(Figure, "savefig", save)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pristine") / "runs"
    made = invoke("run", CASE, "-t", "mock:zero", "--runs", "2", "--warmup", "1",
                  "--out", root, "-q")  # fmt: skip
    assert made.exit_code == 0, made.output
    [run_dir] = root.iterdir()
    return run_dir


def copy_run(pristine: Path, folder: Path) -> Path:
    run_dir = folder / "runs" / pristine.name
    shutil.copytree(pristine, run_dir)
    return run_dir


def interrupted(run_dir: Path, keep: int) -> None:
    """As a kill leaves a run: marked interrupted, the first ``keep`` samples on disk."""
    meta = json.loads((run_dir / store.META).read_text())
    meta["status"] = "interrupted"
    (run_dir / store.META).write_text(json.dumps(meta))
    lines = (run_dir / store.SAMPLES).read_bytes().splitlines(keepends=True)
    (run_dir / store.SAMPLES).write_bytes(b"".join(lines[:keep]))
    (run_dir / store.SUMMARY).unlink()


# --- 13: one writer per run directory -------------------------------------------------------


def slow_profile(folder: Path) -> Path:
    """A mock profile slow enough (~80 ms a task) for a second process to meet the first."""
    path = folder / "slow.json"
    profile = fixed_profile(ttft_ms=40, itl_ms=1)
    path.write_text(json.dumps(profile.model_dump(mode="json", exclude_defaults=True)))
    return path


def test_a_run_being_written_refuses_a_resume_until_its_writer_is_killed(tmp_path: Path) -> None:
    """Without the lock the resume below is accepted, rewrites samples.jsonl under the
    running process and exits 0; with it, it is refused naming the writer, and a kill -9 of
    the writer frees the directory at once."""
    profile = slow_profile(tmp_path)
    out = tmp_path / "runs"
    cmd = perfbench("run", str(CASE), "-t", f"mock:{profile}", "--runs", "2", "--repeat", "3",
                    "--warmup", "0", "--out", str(out), "-q")  # fmt: skip
    with subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as proc:
        try:
            run_dir = _first_samples(out)
            second = invoke("run", "--resume", run_dir, "-q")
            assert second.exit_code == 3, second.output
            assert f"is being written by process {proc.pid}" in second.output
            assert f"kill {proc.pid}" in second.output and "perfbench run --resume" in second.output
        finally:
            proc.send_signal(signal.SIGKILL)
    done = invoke("run", "--resume", run_dir, "-q")
    assert done.exit_code == 0, done.output
    assert set(keys(run_dir).values()) == {1} and len(keys(run_dir)) == 4 * 3 * 2


def _first_samples(out: Path, where: str = "*") -> Path:
    """The run directory ``out/where`` once its first sample is on disk."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = [p for p in out.glob(f"{where}/{store.SAMPLES}") if p.stat().st_size]
        if found:
            return found[0].parent
        time.sleep(0.02)
    raise AssertionError("the run did not start")


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished two-level sweep, to copy."""
    root = tmp_path_factory.mktemp("swept") / "runs"
    made = invoke("sweep", CASE, "-t", "mock:zero", "-c", "1,2", "--runs", "1", "--warmup", "0",
                  "--out", root, "-q")  # fmt: skip
    assert made.exit_code == 0, made.output
    [sweep] = root.iterdir()
    return sweep


def unfinished(swept: Path, folder: Path) -> Path:
    sweep = folder / swept.name
    shutil.copytree(swept, sweep)
    plan = json.loads((sweep / PLAN_FILE).read_text())
    (sweep / PLAN_FILE).write_text(json.dumps({**plan, "status": "running"}))
    (sweep / "sweep.json").unlink()
    return sweep


def test_a_sweep_being_written_refuses_a_second_resume(tmp_path: Path) -> None:
    profile = slow_profile(tmp_path)
    out = tmp_path / "runs"
    cmd = perfbench("sweep", str(CASE), "-t", f"mock:{profile}", "-c", "1,2", "--runs", "1",
                    "--repeat", "2", "--warmup", "0", "--out", str(out), "-q")  # fmt: skip
    with subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as proc:
        try:
            sweep = _first_samples(out, "*/level-1").parent
            second = invoke("sweep", "--resume", sweep, "-q")
            assert second.exit_code == 3, second.output
            assert f"is being written by process {proc.pid}" in second.output
            assert f"perfbench sweep --resume {sweep}" in second.output
        finally:
            proc.send_signal(signal.SIGKILL)
    done = invoke("sweep", "--resume", sweep, "-q")
    assert done.exit_code == 0, done.output
    for level in ("level-1", "level-2"):
        assert set(keys(sweep / level).values()) == {1} and len(keys(sweep / level)) == 4 * 2


# --- 14: a sweep resumes from any state a kill leaves ---------------------------------------


class _Killed(BaseException):
    """The process died here: nothing after it reaches the disk."""


def _kill_at(monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    """Every rename of a written temp file from the ``n``-th on fails as a kill would: the
    temp file stays, the document is not replaced, and no later document is written."""
    real, calls = os.replace, [0]

    def replace(src: Any, dst: Any) -> None:
        calls[0] += 1
        if calls[0] > n:
            raise _Killed
        real(src, dst)

    monkeypatch.setattr(os, "replace", replace)


SWEEP_RENAMES = 9  # os.replace calls of the sweep below: its plan, 3 a level, findings, plan


def test_a_kill_before_any_rename_of_a_sweep_leaves_a_state_resume_takes_up(
    tmp_path: Path,
) -> None:
    """Before the fix, a kill between a level's temp meta file and its rename left only
    ``.meta.json.XXXX`` in the level, and `sweep --resume` exited 3 until a person removed it."""
    for n in range(SWEEP_RENAMES + 1):
        out = tmp_path / f"kill-{n}"
        if not _killed_sweep(out, n):
            break
        [folder] = out.iterdir()
        done = invoke("sweep", "--resume", folder, "-q")
        if (folder / PLAN_FILE).is_file():
            assert done.exit_code == 0, (n, done.output)
            _every_level_once(folder)
        else:  # killed before the sweep recorded how it was started: nothing was measured
            assert done.exit_code == 3 and "Start the sweep again" in done.output
    assert n == SWEEP_RENAMES  # every rename of the sweep was a kill point, and no more


def _killed_sweep(out: Path, n: int) -> bool:
    """Whether the sweep was killed at its ``n``-th rename (else it ran to its end)."""
    with pytest.MonkeyPatch.context() as patch:
        _kill_at(patch, n)
        try:
            sweep = invoke("sweep", CASE, "-t", "mock:zero", "-c", "1,2", "--runs", "1",
                           "--warmup", "0", "--out", out, "-q")  # fmt: skip
        except BaseException as exc:  # from inside the event loop's task group
            if isinstance(exc, BaseExceptionGroup) and exc.subgroup(_Killed) is not None:
                return True
            raise
    if isinstance(sweep.exception, _Killed):
        return True
    assert sweep.exit_code == 0, sweep.output
    return False


def _every_level_once(sweep: Path) -> None:
    assert not list(sweep.glob("**/.*.json.*")), "temp files are left"
    for level in ("level-1", "level-2"):
        assert set(keys(sweep / level).values()) == {1} and len(keys(sweep / level)) == 4
    assert json.loads((sweep / PLAN_FILE).read_text())["status"] == "completed"


def test_a_level_killed_before_its_first_meta_rename_is_measured_afresh(
    swept: Path, tmp_path: Path
) -> None:
    """What a kill -9 leaves there (1 sweep in 10 hit it): the level's lock file and a temp
    meta.json, never renamed. Before the fix, resume exited 3 until a person moved it away."""
    sweep = unfinished(swept, tmp_path)
    shutil.rmtree(sweep / "level-2")
    (sweep / "level-2").mkdir()
    (sweep / "level-2" / ".lock").write_text('{"pid": 1}')
    (sweep / "level-2" / ".meta.json.k2j4_x9q").write_text('{"status": "runn')
    done = invoke("sweep", "--resume", sweep, "-q")
    assert done.exit_code == 0, done.output
    _every_level_once(sweep)


def test_a_level_with_other_files_but_no_meta_is_moved_aside_and_measured(
    swept: Path, tmp_path: Path
) -> None:
    sweep = unfinished(swept, tmp_path)
    shutil.rmtree(sweep / "level-2")
    (sweep / "level-2").mkdir()
    (sweep / "level-2" / "notes.txt").write_text("a user's file")
    done = invoke("sweep", "--resume", sweep, "-q")
    assert done.exit_code == 0, done.output
    assert (sweep / "level-2.partial-1" / "notes.txt").is_file()
    _every_level_once(sweep)


# --- 15: a full disk, a folder that cannot be written ---------------------------------------


def _no_space(*_: Any, **__: Any) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_full_disk_reports_the_first_error_with_its_resume_hint_and_leaves_no_temp_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """samples.jsonl's appends hit a full disk (/dev/full), and so does every document written
    after meta.json's first (fsync reports ENOSPC). Before the fix the append's error, with
    its resume hint, was replaced by "cannot write meta.json", and temp files were left."""
    made, real_fsync, calls = store.new_run_dir, os.fsync, [0]

    def new_run_dir(*args: Any) -> Path:
        path = made(*args)
        (path / store.SAMPLES).symlink_to("/dev/full")
        return path

    def fsync(fd: int) -> None:
        calls[0] += 1
        _no_space() if calls[0] > 1 else real_fsync(fd)

    monkeypatch.setattr(store, "new_run_dir", new_run_dir)
    monkeypatch.setattr(os, "fsync", fsync)
    failed = invoke("run", CASE, "-t", "mock:zero", "--runs", "1", "--out", tmp_path, "-q")
    monkeypatch.undo()
    [run_dir] = tmp_path.iterdir()
    assert failed.exit_code == 3, failed.output
    assert "cannot append to" in failed.output and f"--resume {run_dir}" in failed.output
    assert "cannot write" not in failed.output
    assert sorted(p.name for p in run_dir.iterdir()) == [store.META, store.SAMPLES]
    assert store.read_json(run_dir / store.META)["status"] == "running"  # readers: killed
    (run_dir / store.SAMPLES).unlink()  # space freed
    done = invoke("run", "--resume", run_dir, "-q")
    assert done.exit_code == 0, done.output
    assert len(keys(run_dir)) == 4 * 2


def test_a_disk_full_at_the_end_still_records_failed_from_the_runs_reserve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk fills up during the run: samples.jsonl's appends fail, and meta.json's last
    write finds no room until the run's reserve (a file made as it started) is freed. meta.json
    then says ``failed`` with the error, where it stayed ``running`` before."""
    made, real_write = store.new_run_dir, store.write_json
    writes: list[str] = []
    seen = [False]

    def new_run_dir(*args: Any) -> Path:
        path = made(*args)
        (path / store.SAMPLES).symlink_to("/dev/full")
        return path

    def write_json(path: Path, doc: Any) -> None:
        # The disk is full from meta.json's first write on, unless a reserve made earlier
        # has just been given back.
        reserve = (path.parent / ".reserve").exists()
        seen[0] = seen[0] or reserve
        full = path.name == store.META and store.META in writes and (reserve or not seen[0])
        writes.append(path.name)
        if full:
            raise StoreError(f"cannot write {path}: {os.strerror(errno.ENOSPC)}")
        real_write(path, doc)

    monkeypatch.setattr(store, "new_run_dir", new_run_dir)
    monkeypatch.setattr(store, "write_json", write_json)
    failed = invoke("run", CASE, "-t", "mock:zero", "--runs", "1", "--out", tmp_path, "-q")
    monkeypatch.undo()
    [run_dir] = tmp_path.iterdir()
    assert failed.exit_code == 3, failed.output
    assert "cannot append to" in failed.output and f"--resume {run_dir}" in failed.output
    meta = store.read_json(run_dir / store.META)
    assert meta["status"] == "failed" and "cannot append" in meta["error"]
    assert not (run_dir / ".reserve").exists()  # given back when the run ended


def test_a_failed_write_removes_its_temp_file_and_keeps_the_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "fsync", _no_space)
    with pytest.raises(StoreError, match="No space left on device") as caught:
        store.write_json(tmp_path / store.META, {"status": "running"})
    assert isinstance(caught.value.__cause__, OSError)
    assert list(tmp_path.iterdir()) == []


def test_a_report_on_a_full_disk_is_a_clear_error(
    pristine: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Figure, "savefig", _no_space)
    result = invoke("report", pristine, "--out", tmp_path / "report")
    clean(result)
    assert result.exit_code == 3 and "cannot write the report: No space left" in result.output


def test_an_export_into_a_read_only_folder_is_a_clear_error(
    pristine: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As root (CI) chmod does not stop writes: the file system's refusal is simulated.
    def read_only(*_: Any) -> None:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(os, "replace", read_only)
    for fmt in ("csv", "json"):
        result = invoke("export", pristine, "-f", fmt, "-o", tmp_path / f"out.{fmt}")
        clean(result)
        assert result.exit_code == 3 and "Read-only file system" in result.output
    assert list(tmp_path.iterdir()) == []  # no temp file left


# --- 16: damaged files -----------------------------------------------------------------------


def test_a_damaged_sample_line_is_named_by_file_and_line(pristine: Path, tmp_path: Path) -> None:
    run_dir = copy_run(pristine, tmp_path)
    lines = (run_dir / store.SAMPLES).read_bytes().splitlines(keepends=True)
    lines[2] = lines[2].replace(b'"start":', b'"start":"x",', 1)
    (run_dir / store.SAMPLES).write_bytes(b"".join(lines))
    (run_dir / store.SUMMARY).unlink()  # show recomputes the summary from the samples
    for args in (("show", run_dir), ("export", run_dir, "-o", tmp_path / "x.csv")):
        result = invoke(*args)
        clean(result)
        assert result.exit_code == 3 and f"{store.SAMPLES}:3: " in result.output, result.output


def test_a_torn_last_line_is_skipped_and_a_repeated_line_dropped_on_resume(
    pristine: Path, tmp_path: Path
) -> None:
    """A kill mid-append leaves a torn last line (tolerated); a line found twice (pasted, or
    two writers) was kept by resume and counted twice in every statistic."""
    run_dir = copy_run(pristine, tmp_path)
    interrupted(run_dir, keep=6)
    lines = (run_dir / store.SAMPLES).read_bytes().splitlines(keepends=True)
    torn = lines[5][: len(lines[5]) // 2]
    (run_dir / store.SAMPLES).write_bytes(b"".join([*lines[:5], lines[1], torn]))
    assert invoke("show", run_dir).exit_code == 0
    done = invoke("run", "--resume", run_dir, "-q")
    assert done.exit_code == 0, done.output
    assert set(keys(run_dir).values()) == {1} and len(keys(run_dir)) == TASKS


@pytest.mark.parametrize(
    ("name", "damage", "said"),
    [
        (store.META, lambda d: d.update(suite="x"), "suite: expected an object"),
        (store.META, lambda d: d.update(label=1), "label: expected a string"),
        (store.META, lambda d: d["spec"]["plan"].update(runs="2"), "spec.plan.runs"),
        (store.SUMMARY, lambda d: d.pop("runs"), "the key 'runs' is missing"),
        (store.SUMMARY, lambda d: d["pooled"].update(overall=[]), "pooled.overall"),
        (store.SUMMARY, lambda d: d["histograms"].update(x="HIST=="), "histograms.x"),
    ],
)
def test_damaged_documents_are_named_with_the_key_and_how_to_fix(
    pristine: Path, tmp_path: Path, name: str, damage: Any, said: str
) -> None:
    run_dir = copy_run(pristine, tmp_path)
    doc = json.loads((run_dir / name).read_text())
    damage(doc)
    (run_dir / name).write_text(json.dumps(doc))
    for args in (("show", run_dir), ("report", run_dir, "-o", tmp_path / "r"),
                 ("compare", pristine, run_dir)):  # fmt: skip
        result = invoke(*args)
        clean(result, VERDICTS)
        assert result.exit_code == 3 and f"{run_dir / name}: {said}" in result.output, args
    listed = invoke("list", run_dir.parent)
    clean(listed)
    if name == store.META:
        assert "left out" in listed.output and "restore meta.json" in listed.output


# --- generated damage (hypothesis, bounded) ---------------------------------------------------

_JSON_FILES = st.sampled_from([store.META, store.SUMMARY])
_ANY_FILE = st.sampled_from([store.META, store.SUMMARY, store.SAMPLES])
_AT = st.integers(0, 2**20)  # a byte offset or a pick among a document's keys, taken modulo
# What a key may be retyped to: no large counts, so a resumed run stays a few tasks.
_VALUES = st.sampled_from([None, True, -1, 0, 2, 1.5, 1e999, "x", "", [], {}, [1], {"a": 1}])
DAMAGE = st.one_of(
    st.tuples(st.just("truncate"), _ANY_FILE, _AT),
    st.tuples(st.just("flip"), _ANY_FILE, _AT, st.integers(0, 7)),
    st.tuples(st.just("insert"), _ANY_FILE, _AT, st.binary(min_size=1, max_size=6)),
    st.tuples(st.just("duplicate"), st.just(store.SAMPLES), _AT),
    st.tuples(st.just("remove"), _ANY_FILE),
    st.tuples(st.just("delete"), _JSON_FILES, _AT),
    st.tuples(st.just("retype"), _JSON_FILES, _AT, _VALUES),
)
DAMAGES = st.lists(DAMAGE, min_size=1, max_size=3)
TRIED: Counter[str] = Counter()  # damaged folders each test tried, for the report


def damage(run_dir: Path, how: tuple[Any, ...]) -> None:
    kind, name, *args = how
    path = run_dir / name
    if not path.is_file():
        return
    data = bytearray(path.read_bytes())
    if kind in ("delete", "retype"):
        _damage_key(path, kind, *args)
    elif kind == "remove":
        path.unlink()
    elif kind == "duplicate" and data:
        lines = bytes(data).splitlines(keepends=True)
        lines.insert(args[0] % len(lines), lines[args[0] % len(lines)])
        path.write_bytes(b"".join(lines))
    elif kind == "truncate":
        path.write_bytes(data[: args[0] % (len(data) + 1)])
    elif kind == "flip" and data:
        data[args[0] % len(data)] ^= 1 << args[1]
        path.write_bytes(data)
    elif kind == "insert":
        at = args[0] % (len(data) + 1)
        path.write_bytes(data[:at] + args[1] + data[at:])


def _damage_key(path: Path, kind: str, pick: int, value: Any = None) -> None:
    """Delete or retype one key (at any depth) of a JSON document still readable as JSON."""
    try:
        doc = json.loads(path.read_text())
    except ValueError:
        return
    places = list(_places(doc))
    if not places:
        return
    container, key = places[pick % len(places)]
    if kind == "delete":
        del container[key]
    else:
        container[key] = value
    path.write_text(json.dumps(doc))


def _places(doc: Any) -> Iterator[tuple[Any, Any]]:
    items = (
        doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    )
    for key, value in items:
        yield doc, key
        yield from _places(value)


def readers(run_dir: Path, pristine: Path, work: Path) -> list[tuple[str, Result]]:
    root = run_dir.parent
    return [
        ("show", invoke("show", run_dir)),
        ("list", invoke("list", root)),
        ("report", invoke("report", run_dir, "--out", work / "report")),
        ("export", invoke("export", run_dir, "-o", work / "samples.csv")),
        ("compare", invoke("compare", pristine, run_dir)),
    ]


def said_plainly(result: Result, run_dir: Path) -> bool:
    """A failed reader printed perfbench's own one-line error: most name the damaged file of
    ``run_dir``; some are the plain outcome of the damage (a flipped suite digest: "the runs
    measured different suites"). Returns whether the run directory was named."""
    if result.exit_code == 0:
        return True
    assert "error: " in result.output, result.output  # after what `show` printed first
    return str(run_dir) in result.output


@pytest.mark.slow  # make test-slow: 60 generated damages, a run folder each
@settings(max_examples=60, deadline=None)
@given(how=DAMAGES)
def test_damaged_run_folders_give_a_clear_error_or_a_result_never_a_traceback(
    pristine: Path, how: list[tuple[Any, ...]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        run_dir = copy_run(pristine, work)
        for each in how:
            damage(run_dir, each)
        TRIED["readers"] += 1
        for name, result in readers(run_dir, pristine, work):
            clean(result, VERDICTS if name == "compare" else (0, 3))
            if name == "list":
                assert result.exit_code == 0, result.output
            elif not said_plainly(result, run_dir):
                TRIED["readers: not naming the run"] += 1


@settings(max_examples=25, deadline=None)
@given(how=st.lists(DAMAGE, min_size=1, max_size=2), keep=st.integers(0, TASKS))
def test_a_damaged_interrupted_run_resumes_or_says_which_file_is_damaged(
    pristine: Path, how: list[tuple[Any, ...]], keep: int
) -> None:
    """On resume, every task of the plan is then in samples.jsonl once (a torn last line is
    dropped, a repeated line too), or the damaged file is named; never a traceback."""
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = copy_run(pristine, Path(tmp))
        interrupted(run_dir, keep)
        for each in how:
            if each[1] != store.SUMMARY:  # an interrupted run has none
                damage(run_dir, each)
        TRIED["resume"] += 1
        result = invoke("run", "--resume", run_dir, "-q")
        clean(result)
        if result.exit_code == 3:
            TRIED["resume: refused"] += 1
            if not said_plainly(result, run_dir):
                TRIED["resume: not naming the run"] += 1
            return
        found = keys(run_dir)
        assert set(found.values()) == {1}, found
        assert store.read_json(run_dir / store.META)["status"] == "completed"


def test_damaged_folders_tried() -> None:
    """How many damaged folders the generated tests tried (``-s`` prints it)."""
    print(f"damaged folders tried: {dict(TRIED)}")
