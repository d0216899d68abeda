"""Warnings about a run's trustworthiness, each saying how to fix the problem (hyperfine's habit).
Pure: summary and meta in, sentences out."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from perfbench.stats.headroom import NEAR

SPREAD_WARN = 1.5  # P95 of the slowest run over the fastest
FIRST_RUN_WARN = 1.25  # the first run's mean latency over the median of the other runs
LAG_WARN_S = 0.005  # event-loop lag at P99 above which requests go out late (a warning)
CPU_WARN = 0.9  # share of one core the client used
WAIT_WARN_S = 0.005  # a model call's wait for its request to go out, at P95


def advise(summary: Mapping[str, Any], meta: Mapping[str, Any]) -> list[str]:
    notes: list[str] = []
    runs = summary["runs"]
    notes.extend(_unfinished(meta))
    if not runs:
        return [*notes, "No measured task finished; there is nothing to summarise."]
    # Most important first (the short screen shows only the first few): what makes this
    # result doubtful (failures, the client's pace, load, the machine), then advice on the
    # statistics (too few runs or samples for a figure to mean much).
    notes.extend(_failures(runs))
    notes.extend(_client(summary.get("client")))
    notes.extend(_open_loop(runs, meta))
    notes.extend(_spread(summary))
    notes.extend(_first_run(runs))
    notes.extend(_wait(summary["pooled"]["overall"]))
    notes.extend(_not_streamed(summary["pooled"]["overall"], meta))
    notes.extend(_output_length(summary, meta))
    if len(runs) < 3:
        notes.append(
            f"Only {len(runs)} measured run(s): the median across runs and its range need 3 or "
            "more to mean much. Use --runs 5 (the default) for release comparisons."
        )
    notes.extend(_tail_resolution(summary))
    return notes


def _unfinished(meta: Mapping[str, Any]) -> Iterable[str]:
    """How a run that did not complete ended, and that it can be continued: a run whose
    meta.json could not be rewritten (a full disk) is read as ``killed``, never ``running``."""
    status = meta.get("status")
    covers = "statistics cover only the tasks that finished"
    resume = "`perfbench run --resume RUN_DIR` measures the rest"
    if status == "interrupted":
        yield f"The run was interrupted: {covers}."
    elif status == "failed":
        why = str(meta.get("error") or "no reason recorded").rstrip(".")
        hint = "" if "--resume" in why else f" Fix the cause; {resume}."  # the error's own
        yield f"The run failed, so {covers}: {why}.{hint}"
    elif status == "killed":
        yield (
            "The run's process ended without saying how (killed, or the disk was too full "
            f"to rewrite meta.json): {covers}; {resume}."
        )


def _output_length(summary: Mapping[str, Any], meta: Mapping[str, Any]) -> Iterable[str]:
    """Cases that asked an exact output length (synthetic workloads) and got another: the
    server ignored max_tokens/min_tokens/ignore_eos, so per-token figures compare unequal work."""
    cases = summary["pooled"].get("cases") or {}
    asked = {
        c["id"]: c["output_tokens"]
        for c in (meta.get("suite") or {}).get("cases") or []
        if c.get("output_tokens")
    }
    missed = []
    for case, wanted in sorted(asked.items()):
        got = _per_call((cases.get(case) or {}), "tokens_out")
        if got is not None and abs(got - wanted) > 1:
            missed.append((case, wanted, got))
    if missed:
        case, wanted, got = missed[0]
        yield (
            f"{len(missed)} of {len(asked)} cases got another output length than they asked "
            f"({case}: {wanted} tokens asked, {got:.0f} a model call on average): "
            f"{_who_ignored(meta)}"
        )


def _who_ignored(meta: Mapping[str, Any]) -> str:
    """Who did not honour the length, named: perfbench's own mock is not "the server"."""
    target = str(((meta.get("spec") or {}).get("target") or {}).get("target", ""))
    if target.startswith("mock+http"):
        return (
            "perfbench's own mock server did not honour max_tokens/min_tokens/ignore_eos, "
            "which it should: a bug in perfbench, please report it."
        )
    if target == "mock" or target.startswith("mock:"):
        return (
            "the in-process mock (-t mock) answers with its profile's output lengths, as a "
            "hosted API ends where its answer ends, so TPOT and tokens/s compare unequal "
            "work; -t mock+http honours the length asked."
        )
    return (
        "the server did not honour max_tokens/min_tokens/ignore_eos, so TPOT and tokens/s "
        "compare unequal work. Self-hosted servers (vLLM, SGLang) honour them when given "
        "as --base-url (only those get min_tokens and ignore_eos); a hosted API stops "
        "where its answer ends."
    )


def _per_call(scope: Mapping[str, Any], key: str) -> float | None:
    """A per-task figure per model call: every call of a case (each turn of a multi-turn
    one) asks the case's output length, so a task's total is that many times it."""
    total, calls = scope.get(key), scope.get("model_calls")
    if not isinstance(total, int | float) or not isinstance(calls, int | float) or calls <= 0:
        return None
    return total / calls


def _not_streamed(overall: Mapping[str, Any], meta: Mapping[str, Any]) -> Iterable[str]:
    """A model target asked to stream whose server answered with one JSON body: no TTFT."""
    target = (meta.get("spec") or {}).get("target") or {}
    name = str(target.get("target", ""))
    if "agent_streams" in overall:  # an agent's calls through the proxy: what they asked
        yield from _agent_streams(overall["agent_streams"])
        return
    if not target.get("stream") or name.startswith(("http+agent", "python:", "cmd:")):
        # Not asked to stream, or a whole agent: it has no TTFT to show, or (cmd:) it makes
        # its own requests, and whether they asked to stream is the agent's choice, not
        # --stream's (an agent that asked not to stream was told its server ignored it).
        return
    ok = overall.get("ok", 0)
    timed = (overall.get("ttft") or {}).get("n", 0)
    if ok and timed < ok:
        yield (
            f"{ok - timed} of {ok} successful tasks have no TTFT: the server answered with one "
            "JSON body although `stream: true` was asked (it ignores streaming, or a proxy "
            "buffers it). TTFT and inter-token gaps are not measured for them: check the "
            "server's streaming support, or say so with --no-stream."
        )


def _agent_streams(asked: Mapping[str, Any]) -> Iterable[str]:
    """A proxied agent's answered calls without TTFT, by whose choice: the agent asked for one
    body (it can ask to stream), or asked to stream and the upstream sent one body anyway."""
    whole, calls = asked.get("asked_but_whole", 0), asked.get("asked", 0)
    if whole:
        yield (
            f"{whole} of {calls} model calls the agent asked to stream (`stream: true`) were "
            "answered with one JSON body: the upstream ignores streaming, or something between "
            "buffers it. TTFT and inter-token gaps are not measured for them: check the "
            "upstream's streaming support (`perfbench verify -t … --base-url …`)."
        )
    if unasked := asked.get("not_asked", 0):
        yield (
            f"{unasked} of {unasked + calls} model calls the agent made did not ask to stream, "
            "so they have no TTFT or inter-token gaps: for them, have the agent ask for a "
            "stream (`stream=True` in the openai and anthropic SDKs)."
        )


def _wait(overall: Mapping[str, Any]) -> Iterable[str]:
    """Model calls that sat in the client before their request went out."""
    p95 = (overall.get("wait") or {}).get("p95")
    if p95 is not None and p95 > WAIT_WARN_S:
        yield (
            f"Model calls waited {p95 * 1e3:.1f} ms at P95 before their request went out (for a "
            "new connection's handshake, or a free connection in the client's pool; retries' "
            "backoffs are not counted). TTFT counts from the request going out, but latency "
            "includes the wait: check the target's connect time (DNS, TLS, a proxy) and "
            "whether it closes connections after each request, so that every call connects."
        )


def _failures(runs: list[Mapping[str, Any]]) -> Iterable[str]:
    tasks = sum(r["overall"]["tasks"] for r in runs)
    ok = sum(r["overall"]["ok"] for r in runs)
    mismatch = sum(r["overall"]["expect_mismatch"] for r in runs)
    if tasks and ok < tasks:
        kinds: Counter[str] = Counter()
        for r in runs:
            for status in ("error", "timeout", "rate_limited"):
                kinds[status] += r["overall"][status]
        detail = ", ".join(f"{n} {k}" for k, n in kinds.items() if n)
        yield (
            f"{tasks - ok} of {tasks} measured tasks failed ({detail}); latency percentiles "
            "cover successful tasks, 'latency_all' counts failures at their timeout. "
            "See samples.jsonl for each error."
        )
    if mismatch:
        # Not only tool calls: an expect may also ask for text in the output (suite.Expect).
        yield (
            f"{mismatch} of {tasks} measured task(s) finished but not as their case's expect "
            "asks (its tool calls in order, its output_contains): they are timed, yet count "
            'against the success rate, not as errors. Their samples have "expect_ok": false '
            "in samples.jsonl; check the case's expect or the target's answers."
        )


def _open_loop(runs: list[Mapping[str, Any]], meta: Mapping[str, Any]) -> Iterable[str]:
    late = sum(r["overall"].get("late", 0) for r in runs)
    dropped = sum(r["overall"].get("dropped", 0) for r in runs)
    # A trace run has no --rate: its arrivals are the trace's.
    traced = bool((meta.get("load") or {}).get("trace"))
    if late:
        fix = (
            "Add --workers, or replay fewer arrivals (a shorter trace)"
            if traced
            else "Lower --rate or add --workers"
        )
        yield (
            f"{late} open-loop task(s) started more than 2 ms after their schedule: the client "
            f"could not keep up. {fix}, or see the scheduler lag in summary.json."
        )
    if dropped:
        yield (
            f"{dropped} open-loop task(s) were dropped at --max-in-flight: the target could not "
            f"keep up with {'the trace' if traced else '--rate'}. Their count is the finding; "
            "raise the cap to see queueing."
        )


def _tail_resolution(summary: Mapping[str, Any]) -> Iterable[str]:
    cases = summary["pooled"]["cases"].values()
    smallest = min((c["latency"]["n"] for c in cases if c["latency"]), default=0)
    if 0 < smallest < 100:
        # Under 20 tasks the P95 is the slowest one too (the tables mark both): naming the
        # P99 alone said the P95 beside it meant something.
        which = "P99 is" if smallest >= 20 else "P95 and P99 are"
        yield (
            f"Some cases have only {smallest} successful task(s) over all runs: their {which} "
            "simply the slowest one (marked *). For a meaningful per-case P99, raise --repeat "
            "so that runs × repeat is 100 or more."
        )


def _spread(summary: Mapping[str, Any]) -> Iterable[str]:
    p95 = summary["across_runs"]["overall"].get("latency.p95")
    if p95 and p95["n"] >= 2 and p95["min"] > 0 and p95["max"] / p95["min"] > SPREAD_WARN:
        yield (
            f"P95 varied {p95['max'] / p95['min']:.1f}× between runs: something else may be "
            "loading this machine or the target. Run on a quiet machine, or add --warmup."
        )


def _first_run(runs: list[Mapping[str, Any]]) -> Iterable[str]:
    """A first run much slower than the rest is a cold start the warmup did not absorb."""
    found = [(r["overall"].get("latency") or {}).get("mean") for r in runs]
    means: list[float] = [m for m in found if m is not None]
    if len(means) < 3 or len(means) != len(found):
        return
    median = statistics.median(means[1:])
    if median and means[0] / median > FIRST_RUN_WARN:
        yield (
            f"The first measured run was {means[0] / median:.2f}× slower (mean latency) than the "
            "median of the others: a cold start the warmup did not absorb. Raise --warmup."
        )


# Where an ITL figure is printed while the client lagged: chunks that arrived apart were read
# together, so gaps read 0 (P50 0.00 ms under load, 1.31 ms quiet) and the next one too long.
ITL_CAVEAT = "client lag merged chunks: gaps unreliable"


def gaps_merged(summary: Mapping[str, Any]) -> bool:
    """Whether the client's own delay (event-loop lag over ``LAG_WARN_S`` at P99) may have
    merged streamed chunks into one read: every inter-token figure then needs its caveat."""
    lag = ((summary.get("client") or {}).get("loop_lag") or {}).get("p99")
    return isinstance(lag, int | float) and lag > LAG_WARN_S


def client_bound(summary: Mapping[str, Any]) -> list[str]:
    """The warnings that say the client, not the target, may have set the pace (--strict)."""
    return list(_client(summary.get("client")))


def _client(client: Mapping[str, Any] | None) -> Iterable[str]:
    """The client was the bottleneck: its own delays are in the latencies measured."""
    if not client:
        return
    lag = (client.get("loop_lag") or {}).get("p99")
    if lag is not None and lag > LAG_WARN_S:
        yield (
            f"perfbench's event loop was {lag * 1e3:.1f} ms late at P99: requests went out "
            "late, so the load offered was not the load planned, and task latencies may "
            "include the client's own delay. Add --workers (one process per core), lower "
            "--concurrency (or the rate), or run perfbench on a less loaded machine."
        )
    share = client.get("cpu_share")
    if share is not None and share > CPU_WARN:
        yield (
            f"perfbench used {share:.0%} of a CPU core: the client, not the target, may have "
            "set the pace. Add --workers, lower --concurrency, or check the result against a "
            "lower load."
        )
    room = client.get("headroom") or {}
    if room.get("share") is not None and room["share"] >= NEAR:
        ceiling = room["ceiling"]
        yield (
            f"Each worker ran at {room['share']:.0%} of perfbench's calibrated ceiling on this "
            f"machine ({ceiling.get('calls_per_s', 0):,.0f} model calls/s, "
            f"{ceiling.get('stream_tokens_per_s', 0):,.0f} streamed tokens/s per worker; "
            f"`perfbench calibrate`, {str(ceiling.get('measured_at', '?'))[:10]}): the client "
            "queues work near its ceiling. Add --workers or lower the load."
        )
