"""Progress counters, provisional percentiles and the plain (non-terminal) view, on a fake
clock."""

from __future__ import annotations

import io

from rich.console import Console

from perfbench.cli.events import LiveView, Progress, describe
from perfbench.sample import Sample


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Recording:
    wants_tasks = True

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def started(self, meta: dict[str, object], snap: dict[str, object]) -> None:
        self.calls.append(("started", meta["id"]))

    def phase(self, phase: str, run: int, tasks: int, snap: dict[str, object]) -> None:
        self.calls.append(("phase", (phase, run, tasks)))

    def task(self, s: Sample, elapsed: float) -> None:
        self.calls.append(("task", round(elapsed, 6)))

    def tick(self, snap: dict[str, object]) -> None:
        self.calls.append(("tick", snap["done"]))

    def finished(
        self, status: str, code: int, run_dir: str | None, snap: dict[str, object]
    ) -> None:
        self.calls.append(("finished", (status, code)))


def sample(status: str, latency: float, phase: str = "measured") -> Sample:
    return Sample(phase, 0, "c", 0, "en", 0.0, latency, status=status, concurrency=3)  # type: ignore[arg-type]


def test_counts_rates_eta_and_provisional_percentiles() -> None:
    clock, sink = FakeClock(), Recording()
    progress = Progress([sink], every=1.0, clock=clock, limit=lambda: 8.0)
    progress.planned = 10
    progress.started({"id": "r1"})
    progress.phase("measured", 0, 10)
    for i, status in enumerate(["ok", "ok", "error", "rate_limited", "ok"]):
        clock.now += 0.5
        progress.sample(sample(status, 0.1 * (i + 1)))
    snap = progress.snapshot()
    assert snap["done"] == 5 and snap["ok"] == 3 and snap["errors"] == 1
    assert snap["rate_limited"] == 1 and snap["concurrency"] == 3 and snap["limit"] == 8.0
    assert snap["tasks_per_s"] == 2.0  # 5 tasks in 2.5 s
    assert snap["eta_s"] == 2.5  # 5 left at 2 per second
    assert snap["p50_s"] == 0.2 and snap["p95_s"] == 0.5  # nearest rank over ok: .1 .2 .5
    # A tick at most once per second of the clock: after 1.0 s and after 2.0 s.
    assert [c for c in sink.calls if c[0] == "tick"] == [("tick", 2), ("tick", 4)]
    assert sink.calls[:2] == [("started", "r1"), ("phase", ("measured", 0, 10))]
    line = describe(snap)
    assert "5/10 tasks" in line and "(limit 8)" in line and "(provisional)" in line


def test_warmup_tasks_count_but_are_not_in_the_percentiles() -> None:
    progress = Progress([], clock=FakeClock())
    progress.sample(sample("ok", 9.0, phase="warmup"))
    progress.sample(sample("ok", 0.3))
    assert progress.snapshot()["p95_s"] == 0.3 and progress.done == 2


def test_plain_view_prints_lines_at_intervals_and_no_escape_codes() -> None:
    buffer = io.StringIO()
    view = LiveView(Console(file=buffer, force_terminal=False, width=200), plain_every=10.0)
    clock = FakeClock()
    progress = Progress([view], every=1.0, clock=clock)
    progress.started({"id": "r"})
    progress.phase("warmup", 0, 4)
    for _ in range(25):  # 25 s of ticks: plain lines at 1 s, 11 s and 21 s
        clock.now += 1.0
        progress.sample(sample("ok", 0.1))
    progress.finished("completed", 0, None)
    text = buffer.getvalue()
    assert "\x1b" not in text
    lines = text.splitlines()
    assert lines[0] == "warmup: 4 tasks"
    assert len([ln for ln in lines if "tasks" in ln and "/s" in ln]) == 3


def test_in_flight_comes_from_the_runner_when_it_knows() -> None:
    clock = FakeClock()
    progress = Progress([], clock=clock)
    progress.sample(sample("ok", 0.1))  # a sample's own count: 3, one process's
    assert progress.snapshot()["concurrency"] == 3
    progress.in_flight = lambda: 8  # the runner's (with workers: every worker's) count now
    assert progress.snapshot()["concurrency"] == 8


def test_429_answers_and_refused_tasks_are_two_counts() -> None:
    """The live view said '429s 0' while every error was a refusal: it counted tasks that ended
    rate_limited. Both are shown, by name: tasks refused, and 429 answers (retried ones too)."""
    progress = Progress([], clock=FakeClock())
    retried = sample("ok", 0.1)
    retried.throttled = 3  # refused three times, then answered
    refused = sample("rate_limited", 0.1)
    refused.throttled = 4
    for s in (retried, refused, sample("ok", 0.1)):
        progress.sample(s)
    snap = progress.snapshot()
    assert (snap["rate_limited"], snap["answers_429"]) == (1, 7)
    assert "refused 1 (429 answers 7)" in describe(snap)


def test_the_sweep_table_gives_429_answers_per_task_not_a_share() -> None:
    from perfbench.report.sweep_md import markdown
    from perfbench.stats.knee import Level

    level = Level(4, 10.0, 0.1, 0.2, 0.3, 0.15, 0.0, 1.933, 40.0)
    text = markdown([level], {"knee": None, "stopped_by": {}, "kneedle": None, "usl": None,
                              "client_bound_levels": []}, rates=False, slo=None)  # fmt: skip
    assert "429s per task" in text and "| 1.93 |" in text and "193" not in text


def test_a_pass_bounded_by_time_says_for_how_long_not_0_tasks() -> None:
    """`-c 2 --duration 5` (and --stages) printed "run 1: 0 tasks" for each measured pass: how
    many tasks a timed pass starts, the time decides. Its header says the time."""
    from perfbench.spec import Plan, RunSpec

    buffer = io.StringIO()
    progress = Progress([LiveView(Console(file=buffer, force_terminal=False, width=200))])
    for plan in (Plan(runs=5, concurrency=2, duration_s=5.0), Plan(runs=2, repeat=3)):
        progress.started({"id": "r", "spec": RunSpec(plan=plan).to_doc()})
        progress.phase("warmup", 0, 4)
        progress.phase("measured", 0, 0 if plan.duration_s else 12)
    assert buffer.getvalue().splitlines() == [
        "warmup: 4 tasks",
        "run 1: tasks for 1 s",
        "warmup: 4 tasks",
        "run 1: 12 tasks",
    ]


def test_a_run_bounded_by_time_counts_down_its_time_not_its_tasks() -> None:
    """A timed run plans no count of tasks: its status line said `left ~0:00` from start to
    end. Its ETA is the measurement's time left, and none during the warmup."""
    from perfbench.spec import Plan, RunSpec

    clock = FakeClock()
    progress = Progress([], clock=clock)
    progress.planned = 0  # as Session.planned_tasks() says of a timed run
    plan = Plan(runs=2, concurrency=2, duration_s=20.0)
    progress.started({"id": "r", "spec": RunSpec(plan=plan).to_doc()})
    progress.phase("warmup", 0, 4)
    progress.sample(sample("ok", 0.1, phase="warmup"))
    assert progress.snapshot()["eta_s"] is None
    clock.now += 3.0
    progress.phase("measured", 0, 0)
    clock.now += 5.0
    progress.sample(sample("ok", 0.1))
    assert progress.snapshot()["eta_s"] == 15.0  # 2 runs × 10 s, 5 s of it gone
    assert "left ~0:15" in describe(progress.snapshot())
    clock.now += 30.0
    assert progress.snapshot()["eta_s"] == 0.0
