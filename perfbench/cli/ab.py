"""``perfbench ab``: the user's own code at two commits, measured interleaved on this machine,
then ``perfbench compare``'s verdict and exit code.

The sides and their runs are ``perfbench.ab``'s; the verdict is ``compare`` itself, called with
the two sides' run patterns, so its statistics, flags, config file, Markdown and exit codes are
the same by construction. Its gate flags are read from ``compare``'s signature, not declared
again: a flag added to ``compare`` is a flag of ``ab`` too."""

from __future__ import annotations

import copy
import functools
import inspect
import os
import signal
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Annotated, Any

import typer

from perfbench import ab as lib
from perfbench import store
from perfbench.cli import compare, rules, shape
from perfbench.cli.app import ExitCode, app
from perfbench.cli.options import Flag, Flags, shared
from perfbench.cli.output import err, errors, warning, write_text
from perfbench.errors import AbError
from perfbench.suite import load_suite

_GATE_PANEL = "Gate (as perfbench compare)"
# compare's parameters ab sets itself: the sides, the run folder, --summary's file, --force (one
# copied suite: its digest always matches) and --paired (a round's two runs are a pair).
_SET_BY_AB = {"baseline_ref", "candidate_ref", "root", "markdown_file", "force", "paired"}
# The exit codes of a child run that mean the same for ab: stopped, or --strict's client-bound.
_PASSED_ON = {ExitCode.INTERRUPTED, ExitCode.TERMINATED, ExitCode.CLIENT_BOUND}
# The command's own options, in two --help panels (the gate's are compare's own, above).
_side_option = functools.partial(typer.Option, rich_help_panel="Sides")
_run_option = functools.partial(typer.Option, rich_help_panel="Run (each side, as perfbench run)")


def _in_panel(kind: Any, panel: str) -> Any:
    """``Annotated[type, typer.Option]`` with the option shown under ``panel`` in --help."""
    info = copy.copy(kind.__metadata__[0])  # compare's own option stays as it is
    info.rich_help_panel = panel
    return Annotated[kind.__origin__, info]


def _gate_flags() -> tuple[Flag, ...]:
    params = inspect.signature(compare.compare_, eval_str=True).parameters.values()
    return tuple(
        Flag(p.name, _in_panel(p.annotation, _GATE_PANEL), p.default)
        for p in params
        if p.name not in _SET_BY_AB
    )


GATE = _gate_flags()


BaselineOpt = Annotated[
    str,
    _side_option(
        "--baseline",
        "-b",
        show_default=False,
        help="The commit to compare against: a sha, branch or tag (in a pull request, its "
        "base: origin/main, or github.event.pull_request.base.sha).",
    ),
]
TargetOpt = Annotated[
    str,
    _run_option(
        "--target",
        "-t",
        show_default=False,
        help="What to measure, run in each side's tree: python:module:function imports "
        "that side's module (the tree is on PYTHONPATH); a mock profile path is read from "
        "the side's tree too.",
    ),
]
CandidateOpt = Annotated[
    str,
    _side_option(
        "--candidate",
        help="The commit under test; '.' is the working tree as it is, uncommitted "
        "changes included (HEAD is the last commit).",
    ),
]
CasesOpt = Annotated[
    list[Path] | None,
    _run_option(
        "--cases",
        help="Case files or folders (repeatable; default: cases). A relative path is read "
        "from the candidate, once, and both sides run that copy.",
    ),
]
RoundsOpt = Annotated[
    int,
    _side_option(
        min=2,
        help="Rounds: each runs one measured pass per side, the side going first "
        "alternating; its two runs are a pair (compare --paired). Under 9 no change in one "
        "metric alone can be significant; a gated metric the rounds could not have flagged at "
        "--detect makes the verdict underpowered, which says how many would.",
    ),
]
WarmupOpt = Annotated[
    int,
    _run_option(min=0, help="Warmup passes before each measured one."),
]
PythonpathOpt = Annotated[
    list[str] | None,
    _run_option(
        "--pythonpath",
        help="Folder of each side's tree to put on PYTHONPATH (repeatable; default: the "
        "folder ab was started in, e.g. add src for a src layout).",
    ),
]
SetupOpt = Annotated[
    str | None,
    _side_option(
        help="Shell command run in each side's tree before the first round (a build, "
        "pip install -r requirements.txt); a failure stops ab with exit 3.",
    ),
]
OutDirOpt = Annotated[
    Path | None,
    _side_option(
        "--out",
        help="New folder for both sides' runs (default: runs/ab-<UTC time>).",
    ),
]
SummaryOpt = Annotated[
    Path | None,
    _side_option(
        help="Also write the Markdown verdict here. On GitHub it is appended to "
        "$GITHUB_STEP_SUMMARY (the job's summary page) in any case.",
    ),
]
ConfirmRoundsOpt = Annotated[
    int | None,
    _side_option(
        "--confirm-rounds",
        min=0,
        help="On a regression, measure this many more interleaved rounds (default: as "
        "many as --rounds; 0: off) and judge every round's pairs together: the build "
        "fails only if they still regress. One noisy stretch cannot fail it.",
    ),
]
RunTimeoutOpt = Annotated[float, _run_option(min=1, help="Seconds one side's run may take.")]
ExtraOpt = Annotated[
    list[str] | None,
    typer.Argument(
        metavar="[-- RUN_FLAGS...]",
        show_default=False,
        help="More perfbench run flags, after --, for both sides (--header, --retries, --rate…).",
    ),
]


RepeatOpt = Annotated[
    int | None,
    _run_option(
        min=1,
        help=f"Executions of each case per pass (default: enough for {lib.TASKS_A_RUN} tasks "
        f"a run, at least {lib.LEAST_REPEAT}: a run averages the machine's jitter over them).",
    ),
]


@app.command("ab")
@shared(GATE)
def ab(
    baseline: BaselineOpt,
    target: TargetOpt,
    candidate: CandidateOpt = lib.WORKING_TREE,
    cases: CasesOpt = None,
    rounds: RoundsOpt = lib.DEFAULT_ROUNDS,
    repeat: RepeatOpt = None,
    warmup: WarmupOpt = 1,
    concurrency: shape.ConcurrencyOpt = 1,
    pythonpath: PythonpathOpt = None,
    setup: SetupOpt = None,
    out_dir: OutDirOpt = None,
    summary: SummaryOpt = None,
    confirm_rounds: ConfirmRoundsOpt = None,
    run_timeout: RunTimeoutOpt = 3600,
    extra: ExtraOpt = None,
    *,
    flags: Flags,
) -> None:
    """Measure your code at two commits on this machine, interleaved, and gate on the change.

    Checks out --baseline (and --candidate, unless it is the working tree) into temporary git
    worktrees, then runs [bold]perfbench run[/] alternately in each side's tree, --rounds
    times, one measured pass per run: a runner that slows down midway slows both sides. Both
    sides run the same copy of the candidate's suite. Then [bold]perfbench compare[/] pools
    each side's runs and decides; the exit code is its verdict: 0 pass, 4 regression,
    5 threshold breached, 6 inconclusive or underpowered (with --strict), 3 perfbench error
    (a ref that does not exist, not a git repository, a side's run that failed).

    Example: [bold]perfbench ab --baseline origin/main -t python:agent:run --repeat 3 --
    --retries 0[/]
    """
    started = time.monotonic()
    with errors(), _cleanup_on_sigterm():
        _check_rounds(rounds, flags)
        lib.check_extra(extra or [])
        out = _new_folder(out_dir)
        refs: dict[lib.SideName, str] = {"baseline": baseline, "candidate": candidate}
        with lib.checkouts(lib.repository(Path.cwd()), refs) as sides:
            suite = lib.copy_suite(cases or [Path("cases")], sides["candidate"], out / "suite")
            _say_sides(sides, out)
            repeat = repeat or _default_repeat(suite)
            run_args = [
                "-t", target, "--repeat", str(repeat), "--warmup", str(warmup),
                "-c", str(concurrency), *(extra or []),
            ]  # fmt: skip
            env = {n: lib.side_env(s, os.environ, pythonpath or ["."]) for n, s in sides.items()}
            if setup:
                _set_up(sides, env, setup, run_timeout)
            _measure(sides, env, suite, out, lib.schedule(rounds), run_args, run_timeout)
            more = rounds if confirm_rounds is None else confirm_rounds
            confirming = more > 0 and _regressed(out, flags)
            if confirming:
                err.print(
                    f"A regression in {rounds} rounds: confirming it with {more} more "
                    "interleaved rounds; all the rounds' pairs together decide",
                    highlight=False,
                )
                slots = lib.schedule(more, rounds + 1)
                _measure(sides, env, suite, out, slots, run_args, run_timeout, lib.CONFIRM)
    err.print(f"Measured in {time.monotonic() - started:.0f} s; runs in [bold]{out}[/]")
    _gate(sides, out, (rounds, more if confirming else 0), summary, flags)


def _check_rounds(rounds: int, flags: Flags) -> None:
    """Warn when no change in one gated metric alone could be significant in ``rounds``."""
    gate = {k: v for k, v in flags.items() if k in rules.RULE_FLAGS and k != "config_file"}
    built = rules.gate_rules(rules.settings(flags.get("config_file")), **gate)
    least = lib.least_rounds(built.alpha, len(built.gate))
    if rounds < least:
        warning(
            f"{rounds} rounds are too few for a change in one metric to be significant: the "
            f"verdict will be underpowered; use --rounds {max(least, lib.DEFAULT_ROUNDS)}"
        )


def _default_repeat(suite: list[Path]) -> int:
    """--repeat when none is given (``perfbench.ab.default_repeat``), said on stderr with the
    flag that changes it."""
    per_pass = load_suite(suite).per_pass(1)
    repeat = lib.default_repeat(per_pass)
    err.print(
        f"--repeat {repeat}: {repeat * per_pass} tasks a run ({per_pass} a pass); give "
        "--repeat to choose",
        highlight=False,
    )
    return repeat


def _regressed(out: Path, flags: Flags) -> bool:
    """Whether the first rounds show a regression, by compare's own rules (nothing printed)."""
    gate = {k: v for k, v in flags.items() if k in rules.RULE_FLAGS}
    with errors():
        return rules.regressed("baseline*", "candidate*", out, paired=True, **gate)


def _new_folder(given: Path | None) -> Path:
    """The runs' folder, absolute (the runs start elsewhere) and new: compare pools every run
    labelled baseline in it, so earlier ones must not be there."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    folder = (given or Path("runs") / f"ab-{stamp}").absolute()
    store.make_dir(folder)
    return folder


def _say_sides(sides: Mapping[lib.SideName, lib.Side], out: Path) -> None:
    for side in sides.values():
        commit = side.commit[:12] if side.commit else "working tree"
        err.print(f"{side.name}: {side.ref} ({commit}) in {side.workdir}", highlight=False)
    err.print(f"suite: copied from the candidate into {out / 'suite'}", highlight=False)


def _set_up(
    sides: Mapping[lib.SideName, lib.Side],
    env: Mapping[lib.SideName, Mapping[str, str]],
    command: str,
    timeout: float,
) -> None:
    for name, side in sides.items():
        ran = lib.run_once(["sh", "-c", command], side, env[name], timeout)
        if ran.code != 0:
            _show_tail(ran)
            raise AbError(f"--setup failed in the {name}'s tree (exit {ran.code})")


def _measure(
    sides: Mapping[lib.SideName, lib.Side],
    env: Mapping[lib.SideName, Mapping[str, str]],
    suite: list[Path],
    out: Path,
    slots: list[lib.Slot],
    run_args: list[str],
    timeout: float,
    suffix: str = "",
) -> None:
    """Every slot of the schedule, one child run each; the first failure ends ab."""
    last = slots[-1].round if slots else 0
    for slot in slots:
        t0 = time.monotonic()
        command = lib.run_command(suite, slot, out, run_args, suffix)
        ran = lib.run_once(command, sides[slot.side], env[slot.side], timeout)
        took = time.monotonic() - t0
        err.print(f"round {slot.round}/{last} {slot.side:<9} {took:5.1f} s", highlight=False)
        if ran.code != 0:
            _show_tail(ran)
            if ran.code in _PASSED_ON:
                raise typer.Exit(ran.code)
            raise AbError(
                f"the {slot.side}'s run of round {slot.round} failed (exit {ran.code}, its "
                f"output above); try it alone: cd {sides[slot.side].workdir} && PYTHONPATH=. "
                f"perfbench run "
                f"{' '.join(map(str, suite))} {' '.join(run_args)}"
            )


def _show_tail(ran: lib.Ran) -> None:
    for line in ran.tail.splitlines():
        err.print(f"  │ {line}", highlight=False, markup=False)


def _gate(
    sides: Mapping[lib.SideName, lib.Side],
    out: Path,
    rounds: tuple[int, int],
    summary: Path | None,
    flags: Flags,
) -> None:
    """``compare --paired``'s verdict over every round (a confirmation's pooled with the first
    ones'; runs sort by time, so run i of each side is round i); ends with compare's code."""
    heading = lib.heading(sides, rounds)
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    with errors():
        if step_summary:  # compare appends its verdict there; the heading goes first
            write_text(Path(step_summary), heading, append=True)
    verdict_file = out / "verdict.md"
    try:  # compare ends with typer.Exit(its verdict's code), which ends ab too
        compare.compare_(
            baseline_ref="baseline*", candidate_ref="candidate*", root=out,
            markdown_file=verdict_file, force=False, paired=True, **flags,
        )  # fmt: skip
    finally:
        _write_summaries(verdict_file, heading, summary, step_summary)


def _write_summaries(
    verdict_file: Path, heading: str, summary: Path | None, step_summary: str | None
) -> None:
    """The verdict with its heading in the run folder (for a PR comment) and at --summary."""
    with errors():
        text = heading + verdict_file.read_text(encoding="utf-8") if verdict_file.exists() else ""
        if text:
            write_text(verdict_file, text)
        same = summary and step_summary and summary.absolute() == Path(step_summary).absolute()
        if text and summary is not None and not same:
            write_text(summary, text)


@contextmanager
def _cleanup_on_sigterm() -> Iterator[None]:
    """SIGTERM (a cancelled CI job) as an exception, so the worktrees are removed on the way
    out: the command line's own handler exits at once, leaving them behind."""

    def stop(signum: int, frame: FrameType | None) -> None:
        err.print("perfbench: terminated")
        raise typer.Exit(ExitCode.TERMINATED)

    before = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)
