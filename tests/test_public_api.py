"""The public API is ``perfbench.__all__`` (httpx's test_exported_members): a name added or
removed by accident fails here, and every exported name resolves."""

from __future__ import annotations

import subprocess
import sys

import perfbench

PUBLIC = [
    "Case", "ModelAccess", "PerfbenchError", "Plan", "RunObserver", "RunResult", "RunSpec",
    "Sample", "Session", "Step", "Suite", "Sweep", "SweepPlan", "SweepResult", "SweepSpec",
    "Target", "TargetSpec", "Task", "__version__", "api", "load_run", "load_suite",
]  # fmt: skip


def test_the_public_names_are_pinned() -> None:
    assert sorted(perfbench.__all__) == sorted(PUBLIC)
    assert set(perfbench._EXPORTS) == set(PUBLIC)


# perfbench.api: running (run, resume, sweep, …) and judging stored runs (compare, plan, report),
# so a script or CI job gets compare's verdict without re-assembling the CLI's pipeline.
API = [
    "Needs", "RunResult", "SweepResult", "Verdict", "check", "compare", "confirmed", "extend",
    "more_runs", "plan", "report", "rerun", "resume", "resume_sweep", "run", "sweep",
]  # fmt: skip


def test_the_library_entry_points_are_pinned() -> None:
    from perfbench import api

    assert sorted(api.__all__) == sorted(API)
    for name in API:
        value = getattr(api, name)
        assert value.__name__ == name, name
        if callable(value) and not isinstance(value, type):
            assert value.__module__ == "perfbench.api", name  # defined in the face, not moved
            assert value.__doc__, name


def test_every_public_name_resolves_to_what_it_names() -> None:
    for name in perfbench.__all__:
        value = getattr(perfbench, name)
        assert value is not None
        if name not in ("__version__", "api"):
            assert value.__name__ == name, name
    assert perfbench.api.run.__module__ == "perfbench.api"
    assert set(perfbench.__all__) <= set(dir(perfbench))


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        perfbench.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("expected AttributeError")


def test_documented_imports_keep_working() -> None:
    """docs/python-api.md tells users to import these."""
    from perfbench import store
    from perfbench.export import export, load_run

    assert callable(store.list_runs) and callable(store.resolve_run)
    assert callable(export) and callable(load_run)


def test_importing_the_package_loads_none_of_the_engine() -> None:
    """The CLI and every worker process import perfbench first: it must stay cheap."""
    code = (
        "import sys, perfbench; print(sorted(m for m in sys.modules if m.startswith('perfbench')))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert loaded.stdout.strip() == "['perfbench']"
