"""Hostile case files and mock profiles (issue 21, items 9–11): each is refused with a located
problem (file, line where YAML knows it, field) and exit code 3, or it loads, and then runs:
what `cases check` accepts, `run` can use. Fixed examples first, then generated ones
(hypothesis, bounded: the whole file runs in seconds)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import orjson
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trio.testing import MockClock
from typer.testing import CliRunner

from perfbench import yamlfile
from perfbench.apis.anthropic_messages import AnthropicMessages
from perfbench.apis.openai_chat import OpenAIChat
from perfbench.cli import app
from perfbench.engine.observer import RunObserver
from perfbench.engine.session import Session
from perfbench.errors import CaseError, Problem, ProfileError
from perfbench.mock.profile import Profile, load_profile
from perfbench.mock.simulator import _arguments
from perfbench.sample import Sample
from perfbench.spec import Plan, RunSpec
from perfbench.suite import MAX_TOKENS, Case, Suite, load_suite
from perfbench.targets.http_agent import request_fields
from perfbench.targets.mock import MockAgent
from tests.helpers import CASES, fixed_profile

# --- helpers ---------------------------------------------------------------------------------

ONE_CASE = "cases:\n  - id: a\n    input: hi\n"


def write(folder: Path, text: str | bytes, name: str = "suite.yaml") -> Path:
    path = folder / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
    return path


def with_tool(result: str) -> str:
    """One case with one tool whose result (flow YAML) is ``result``: the result is on line 6."""
    return f"{ONE_CASE}    tools:\n      - name: t\n        result: {result}\n"


def only_problem(path: Path) -> Problem:
    with pytest.raises(CaseError) as info:
        load_suite([path])
    assert len(info.value.problems) == 1, info.value.problems
    return info.value.problems[0]


def runs_on_the_wire(suite: Suite) -> None:
    """What `run` does with each case besides the mock: request bodies for the model APIs
    and agents (orjson, as sent), tool results as text, the mock's arguments, the digest."""
    assert re.fullmatch("[0-9a-f]{64}", suite.digest)
    for case in suite.cases:
        for api in (OpenAIChat("m"), AnthropicMessages("m")):
            orjson.dumps(api.request(case, api.opening(case), True)[1])
        orjson.dumps(request_fields(case))
        json.dumps(case.model_dump(mode="json"))
        for tool in case.tools:
            orjson.dumps(_arguments(tool.parameters))
            tool.result_text().encode()


class _Keep(RunObserver):
    def __init__(self) -> None:
        self.samples: list[Sample] = []

    def sample(self, sample: Sample) -> None:
        self.samples.append(sample)


def run_mock(suite: Suite, profile: Profile | None = None) -> list[Sample]:
    """One measured pass in process against the mock, on a virtual clock (tool latencies of
    an hour take no time). It completes, a sample per case, none a perfbench error."""
    keep = _Keep()
    spec = RunSpec(plan=Plan(runs=1, warmup=0), out=None)
    target = MockAgent(profile or fixed_profile())

    async def one_pass() -> None:
        session = Session(spec, keep, suite=suite, target=target)
        assert (await session.run()).meta["status"] == "completed"

    trio.run(one_pass, clock=MockClock(autojump_threshold=0))
    crashed = [(s.case, s.error) for s in keep.samples if "unhandled" in (s.error_kind or "")]
    assert not crashed and len(keep.samples) == len(suite.cases), crashed
    return keep.samples


def run_cases(suite: Suite) -> list[Sample]:
    """As ``run_mock``; against a mock without faults each task ends ok, timed out, or out of
    the steps its case allows: what the case asked for, measured."""
    samples = run_mock(suite)
    failed = [(s.case, s.status, s.error) for s in samples
              if s.status not in ("ok", "timeout") and s.error_kind != "max_steps"]  # fmt: skip
    assert not failed, failed
    return samples


# --- item 9: each trigger found is a located problem, or loads and runs --------------------

FOUND = {
    # name: (file text, line, field, fragment of the message)
    "integer-past-python-4300-digits": (
        f"{ONE_CASE}    max_tokens: {'9' * 5000}\n",
        4,
        "cases[0].max_tokens",
        "out of range",
    ),
    "int-tag-on-text": (
        f"{ONE_CASE}    max_steps: !!int abc\n",
        4,
        "cases[0].max_steps",
        "read as !!int",
    ),
    "bool-tag-on-text": (
        f"{ONE_CASE}    parallel_tools: !!bool maybe\n",
        4,
        "cases[0].parallel_tools",
        "!!bool",
    ),
    "float-tag-on-text": (
        f"{ONE_CASE}    temperature: !!float warm\n",
        4,
        "cases[0].temperature",
        "!!float",
    ),
    "lone-surrogate-in-a-tool-result": (
        with_tool('{k: "\\ud800"}'),
        6,
        "cases[0].tools[0].result.k",
        "surrogate pair",
    ),
    "lone-surrogate-in-a-key": (
        with_tool('{"\\udfff": 1}'),
        6,
        "cases[0].tools[0].result",
        "\\udfff",
    ),
    "lone-surrogate-in-tags": (
        f'{ONE_CASE}    tags: ["\\ud800"]\n',
        4,
        "cases[0].tags[0]",
        "surrogate",
    ),
    "raw-nul": (f"{ONE_CASE}    name: a\x00b\n", 4, "", "U+0000"),
    "raw-bell": ("cases:\n  - id: a\n    input: hi\x07\n", 3, "", "U+0007"),
    "raw-escape-after-crlf-lines": (
        "cases:\r\n  - id: a\r\n    input: \x1b[31m\r\n",
        3,
        "",
        "U+001B",
    ),
    "raw-delete": (f"{ONE_CASE}    name: \x7f\n", 4, "", "U+007F"),
    "recursive-alias": ("x-a: &a [1, *a]\n" + ONE_CASE, 1, "x-a[1]", "inside &a"),
    "recursive-alias-in-a-mapping": (
        with_tool("&r {self: *r}"),
        6,
        "cases[0].tools[0].result.self",
        "*r is used inside &r",
    ),
    "deep-nesting": (
        with_tool("[" * 3000 + "]" * 3000),
        6,
        "cases[0].tools[0].result" + "[0]" * 6 + "…",
        "more than 100 deep",
    ),
    "deep-nesting-of-mappings": (
        with_tool("{a: " * 150 + "1" + "}" * 150),
        6,
        "cases[0].tools[0].result" + ".a" * 6 + "…",
        "more than 100 deep",
    ),
    "deep-nesting-through-aliases": (  # each anchor within the limit, not once copied in
        f"x-1: &l1 {'[' * 60}{']' * 60}\nx-2: &l2 {'[' * 40}*l1{']' * 40}\n{ONE_CASE}",
        2,
        "x-2" + "[0]" * 10 + "…",
        "*l1 nests lists and mappings more than 100 deep",
    ),
    "mapping-as-key": (
        with_tool("{? {a: 1} : x}"),
        6,
        "cases[0].tools[0].result",
        "keys must be text",
    ),
    "sequence-as-key": (
        with_tool("{? [1, 2] : x}"),
        6,
        "cases[0].tools[0].result",
        "keys must be text",
    ),
    "binary-in-a-map": (
        with_tool("{k: !!binary aGVsbG8=}"),
        6,
        "cases[0].tools[0].result.k",
        "tag !!binary",
    ),
    "custom-tag": (f"{ONE_CASE}    name: !shout hi\n", 4, "cases[0].name", "tag !shout"),
    "python-tag": (
        f"{ONE_CASE}    name: !!python/name:os.system\n",
        4,
        "cases[0].name",
        "!!python/name:os.system",
    ),
    "binary-tag-on-a-key": (
        with_tool("{!!binary aGk=: 1}"),
        6,
        "cases[0].tools[0].result",
        "!!binary",
    ),
    "not-utf8-names-its-line": (b"cases:\n  - id: a\n    input: caf\xe9\n", 3, "", "not UTF-8"),
    "utf16-says-so": ("\ufeffcases: []\n".encode("utf-16"), 1, "", "UTF-16 text; save the file"),
}


@pytest.mark.parametrize("name", list(FOUND))
def test_each_hostile_input_found_is_a_located_problem(name: str, tmp_path: Path) -> None:
    text, line, field, fragment = FOUND[name]
    path = write(tmp_path, text)
    problem = only_problem(path)
    assert (problem.file, problem.line, problem.field) == (path, line, field), problem
    assert fragment in problem.message, problem.message


def test_cases_check_prints_the_problem_and_exits_3_never_a_traceback(tmp_path: Path) -> None:
    for name in ("int-tag-on-text", "raw-nul", "deep-nesting", "not-utf8-names-its-line"):
        text, line, field, fragment = FOUND[name]
        path = write(tmp_path, text, f"{name}.yaml")
        result = CliRunner().invoke(app, ["cases", "check", str(tmp_path / f"{name}.yaml")])
        assert result.exit_code == 3, (name, result.output, result.exception)
        where = f"{path}:{line}:" + (f" {field}:" if field else "")
        assert where in result.output and fragment in result.output, result.output


ACCEPTED = {
    # name: (file text, what the first case's first tool's result is, or the case's name)
    "date-in-a-tool-result-is-its-text": (with_tool("{eta: 2026-12-03}"), {"eta": "2026-12-03"}),
    "timestamp-tag-is-text-too": (with_tool("{t: !!timestamp nope}"), {"t": "nope"}),
    "not-a-date-is-text": (with_tool("{t: 2024-13-45}"), {"t": "2024-13-45"}),
    "keys-are-the-text-written": (
        with_tool("{1: a, no: b, 2024-01-01: c, ~: d, 0x10: e}"),
        {"1": "a", "no": "b", "2024-01-01": "c", "~": "d", "0x10": "e"},
    ),
    "surrogate-pair-escape-is-the-character": (with_tool('"\\ud83d\\ude00"'), "😀"),
    "escaped-nul-is-text": (with_tool('"a\\0b"'), "a\x00b"),
    "equals-sign-is-text": (with_tool("{k: =}"), {"k": "="}),
    "64-bit-integers": (with_tool(f"[{2**63 - 1}, {-(2**63)}]"), [2**63 - 1, -(2**63)]),
    "nesting-at-the-limit": (with_tool("[" * 95 + "]" * 95), json.loads("[" * 95 + "]" * 95)),
}


@pytest.mark.parametrize("name", list(ACCEPTED))
def test_what_yaml_means_but_json_cannot_say_loads_as_json_and_runs(
    name: str, tmp_path: Path
) -> None:
    text, result = ACCEPTED[name]
    suite = load_suite([write(tmp_path, text)])
    assert suite.cases[0].tools[0].result == result
    runs_on_the_wire(suite)
    run_cases(suite)


def test_a_date_in_a_tool_result_runs_from_the_cli(tmp_path: Path) -> None:
    """The run the issue saw fail every task: `Object of type date is not JSON serializable`."""
    path = write(tmp_path, with_tool("{eta: 2026-12-03}") + "    expect: {tool_calls: [t]}\n")
    args = ["run", str(path), "-t", "mock:zero", "--runs", "1", "--warmup", "0", "-q"]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "runs")])
    assert result.exit_code == 0, result.output
    [run_dir] = (tmp_path / "runs").iterdir()
    [sample] = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert sample["status"] == "ok" and sample["tool_calls"] == 1, sample


# --- item 10: alias expansion is bounded ------------------------------------------------------


def laughs(levels: int, width: int = 9) -> str:
    """The "billion laughs" bomb: each anchor holds ``width`` aliases of the one before, under
    `x-` keys (free in case files), then used once by a case."""
    lines = [f"x-0: &l0 [{','.join(['lol'] * width)}]"]
    for i in range(1, levels):
        lines.append(f"x-{i}: &l{i} [{','.join([f'*l{i - 1}'] * width)}]")
    return "\n".join(lines) + f"\n{ONE_CASE}    tools: [{{name: t, result: *l{levels - 1}}}]\n"


BOUNDED_CHECK = """
import resource, sys, time, tracemalloc
from pathlib import Path
from perfbench.errors import PerfbenchError
from perfbench.mock.profile import load_profile
from perfbench.suite import load_suite
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))  # a runaway dies, not the machine
tracemalloc.start()
start = time.perf_counter()
try:
    load_suite([Path(sys.argv[2])]) if sys.argv[1] == "suite" else load_profile(sys.argv[2])
except PerfbenchError as exc:
    print(exc)
print(f"{time.perf_counter() - start:.3f} {tracemalloc.get_traced_memory()[1]}")
"""


def bounded(load: str, path: Path) -> tuple[str, float, int]:
    """Load in a child process that is killed after 20 s: without the bound it grows for
    minutes (1.2 GB at 60 s). The message, the seconds and the peak bytes allocated."""
    cmd = [sys.executable, "-c", BOUNDED_CHECK, load, str(path)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=False)
    message, _, figures = done.stdout.rstrip("\n").rpartition("\n")
    seconds, peak = figures.split()
    return message, float(seconds), int(peak)


def test_a_short_laughs_bomb_is_refused_at_once_in_a_case_file(tmp_path: Path) -> None:
    path = write(tmp_path, laughs(9))
    assert len(path.read_bytes()) < 500  # 9**9: 387 million values once built
    message, seconds, peak = bounded("suite", path)
    assert message.startswith(f"{path}:6: x-5[1]: aliases copy more than 200,000 values")
    assert "nest fewer aliases" in message
    assert seconds < 1 and peak < 10_000_000, (seconds, peak)


def test_a_laughs_bomb_is_refused_at_once_in_a_mock_profile(tmp_path: Path) -> None:
    bomb = ["x: &l0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    bomb += [f"y{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 9)]
    path = write(tmp_path, "\n".join(bomb) + "\nmodels: {sim: {description: *l8}}\n", "p.yaml")
    message, seconds, peak = bounded("profile", path)
    assert re.match(rf"{re.escape(str(path))}:\d+: y\d\[\d\]: aliases copy more than", message)
    assert seconds < 1 and peak < 10_000_000, (seconds, peak)


def test_the_alias_budget_counts_every_copied_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(yamlfile, "MAX_ALIAS_NODES", 14)
    shared = "x-r: &r {a: 1, b: [2, 3]}\n"  # 7 values: the mapping, 2 keys, 1, the list, 2, 3
    ok = f"{shared}{ONE_CASE}    tools: [{{name: t, result: *r}}, {{name: u, result: *r}}]\n"
    assert load_suite([write(tmp_path, ok)]).cases[0].tools[1].result == {"a": 1, "b": [2, 3]}
    over = ok.replace("]\n", ", {name: v, result: *r}]\n")
    problem = only_problem(write(tmp_path, over))
    assert (problem.line, problem.field) == (5, "cases[0].tools[2].result")
    assert "copy more than 14 values in this file (*r alone copies 7)" in problem.message


def test_merge_keys_copy_within_the_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(yamlfile, "MAX_ALIAS_NODES", 5)
    base = "x-base: &base {max_steps: 3, timeout_s: 5}\ncases:\n"  # 5 values
    one = "  - {<<: *base, id: a, input: hi}\n"
    assert load_suite([write(tmp_path, base + one)]).cases[0].max_steps == 3
    problem = only_problem(write(tmp_path, base + one + one.replace("a,", "b,")))
    assert problem.line == 4 and "copy more than 5 values" in problem.message


# --- item 11: what check accepts, run can use -----------------------------------------------

CHECK_BUT_NOT_RUN = {
    # name: (case lines, line, field, fragment): each passed `cases check`, then every run
    # failed (a model API or the mock refused it, or perfbench crashed encoding it).
    "max-tokens-past-64-bits": (
        "    max_tokens: 18446744073709551616\n",
        4,
        "cases[0].max_tokens",
        "out of range",
    ),
    "max-tokens-past-32-bits": (
        f"    max_tokens: {2**40}\n",
        4,
        "cases[0].max_tokens",
        f"less than or equal to {MAX_TOKENS}",
    ),
    "schema-properties-a-list": (
        "    tools: [{name: t, parameters: {type: object, properties: [1]}}]\n",
        4,
        "cases[0].tools[0].parameters",
        "properties must map each property name",
    ),
    "schema-property-not-a-schema": (
        "    tools: [{name: t, parameters: {type: object, properties: {a: 5}}}]\n",
        4,
        "cases[0].tools[0].parameters",
        "properties.a must be a schema",
    ),
    "schema-required-not-names": (
        "    tools: [{name: t, parameters: {type: object, required: [[1]]}}]\n",
        4,
        "cases[0].tools[0].parameters",
        "required must be a list of property names",
    ),
    "schema-enum-not-a-list": (
        "    tools: [{name: t, parameters: {type: object, properties: {a: {enum: {x: 1}}}}}]\n",
        4,
        "cases[0].tools[0].parameters",
        "properties.a.enum must be a list",
    ),
    "schema-nested-properties": (
        "    tools: [{name: t, parameters: {type: object, properties: "
        "{a: {type: object, properties: 7}}}}]\n",
        4,
        "cases[0].tools[0].parameters",
        "properties.a.properties must map",
    ),
    "schema-unknown-type": (
        "    tools: [{name: t, parameters: {type: object, properties: {a: {type: text}}}}]\n",
        4,
        "cases[0].tools[0].parameters",
        "properties.a.type must be one of string",
    ),
    "schema-items-not-a-schema": (
        "    tools: [{name: t, parameters: {type: object, properties: "
        "{a: {type: array, items: [1]}}}}]\n",
        4,
        "cases[0].tools[0].parameters",
        "properties.a.items must be a schema",
    ),
}


@pytest.mark.parametrize("name", list(CHECK_BUT_NOT_RUN))
def test_what_every_run_failed_on_is_refused_by_check(name: str, tmp_path: Path) -> None:
    lines, line, field, fragment = CHECK_BUT_NOT_RUN[name]
    problem = only_problem(write(tmp_path, ONE_CASE + lines))
    assert (problem.line, problem.field) == (line, field), problem
    assert fragment in problem.message, problem.message


def test_defaults_are_held_to_the_same_rules(tmp_path: Path) -> None:
    text = f"defaults:\n  max_tokens: {2**40}\n{ONE_CASE}"
    problem = only_problem(write(tmp_path, text))
    assert (problem.line, problem.field) == (2, "defaults.max_tokens")


def test_the_largest_values_check_accepts_are_sent_and_run(tmp_path: Path) -> None:
    schema = (
        "{type: object, required: [a, b], properties: {a: {type: [string, 'null']}, "
        "b: {type: array, items: {type: object, properties: {c: {enum: [x]}}}}}}"
    )
    text = f"{ONE_CASE}    max_tokens: {MAX_TOKENS}\n    tools: [{{name: t, parameters: {schema},"
    text += f" result: {{big: {2**63 - 1}}}}}]\n    expect: {{tool_calls: [t]}}\n"
    suite = load_suite([write(tmp_path, text)])
    assert suite.cases[0].max_tokens == MAX_TOKENS
    runs_on_the_wire(suite)
    [sample] = run_cases(suite)
    assert sample.tool_calls == 1


PROFILES = {
    # name: (profile text, line, field, fragment): each loaded, then failed or hung the mock
    "lognormal-so-wide-its-draws-overflow": (
        "ttft_ms: {lognormal: {median: 1.0e-300, p99: 1.0}}\n", 1, "ttft_ms.lognormal",
        "p99 may be at most 1000 times the median",
    ),
    "infinite-time": ("itl_ms: .inf\n", 1, "itl_ms.fixed", "finite number"),
    "nan-which-passes-every-bound": ("tool_latency_scale: .nan\n", 1, "tool_latency_scale",
                                     "finite number"),
    "endless-answer": ("output_chars: {uniform: [1, 1.0e+300]}\n", 1, "output_chars.uniform[1]",
                       "less than or equal to 3600000"),
    "raw-control-character": ("name: a\x1bb\n", 1, "", "U+001B"),
    "recursive-alias": ("plans: &p {c: [*p]}\n", 1, "plans.c[0]", "*p is used inside &p"),
}  # fmt: skip


@pytest.mark.parametrize("name", list(PROFILES))
def test_a_mock_profile_the_mock_cannot_use_is_refused_located(name: str, tmp_path: Path) -> None:
    text, line, field, fragment = PROFILES[name]
    path = write(tmp_path, text, "profile.yaml")
    with pytest.raises(ProfileError) as info:
        load_profile.__wrapped__(str(path))
    [message] = str(info.value).splitlines()
    assert message.startswith(f"{path}:{line}:" + (f" {field}:" if field else "")), message
    assert fragment in message, message


def test_the_widest_lognormal_allowed_runs(examples: Suite) -> None:
    wide = {"ttft_ms": {"lognormal": {"median": 1, "p99": 1000}}, "itl_ms": 0.001}
    run_mock(examples, Profile.model_validate({**wide, "output_chars": 40}))


# --- generated files (hypothesis) -------------------------------------------------------------

# YAML text that a value can be, chosen to hit each way a file can go wrong.
HOSTILE_SCALARS = [
    "9" * 4301, "-" + "9" * 5000, str(2**63), str(-(2**63) - 1), str(2**64), "0x" + "f" * 17,
    "1:" + "9" * 4400, "!!int abc", "!!int 0x", "!!int _", "!!bool maybe", "!!float warm",
    "!!binary aGVsbG8=", "!!binary '!!'", "!shout hi", "!!python/object:os.system x",
    "!!set {a, b}", "!!omap [a: 1]", "!!map x", "!!seq x", '"\\ud800"', '"x\\udc00"',
    "*nowhere", "&a [1, *a]", "{? [1, 2] : x}", "{? {a: 1} : x}", "{<<: *s, k: 1}",
    "{<<: [*s, 5]}", "&d {a: *s}", "[" * 101 + "]" * 101, "{a: " * 60 + "1" + "}" * 60,
    "\x00", "\x07", "\x1b[31m", "\x7f", "\t", "\ufffe", "a: b", "- x", "#", "'", '"', "{", "[", "]",
    "}", "&", "*", "!", "|", ">", "%YAML 1.1", "---", "...",
]  # fmt: skip
# YAML text that looks odd but means a JSON value, and must load (and run).
ODD_SCALARS = [
    "!!str 5", "!!null x", "!!timestamp nope", "2024-01-01", "2001-12-14t21:59:43.10-05:00",
    "2024-13-45", '"\\ud83d\\ude00"', '"\\0"', '"\\x07\\e"', '"\\u2028"', "=", "~", "null",
    ".inf", "-.inf", ".nan", "yes", "no", "on", "1:20", "0o17", "017", "1_000", "'quoted'",
    str(2**63 - 1), str(-(2**63)), "[" * 40 + "]" * 40, '"\\x85"', "\ufeff", "\u202e",
    # A tab and NEL quoted: bare, neither can start a token inside a flow (`[\t]` is no YAML).
    '"\\t"',
    "hi", "0", "1", "0.5", "true", "t", "u", "en", "''", '""',
]  # fmt: skip


def quoted(surrogates: bool) -> st.SearchStrategy[str]:
    """Text of every kind, quoted as JSON (which YAML reads): non-ASCII and astral characters
    come out as \\u escapes, surrogate pairs included; lone surrogates when asked for."""
    chars = st.characters(codec=None if surrogates else "utf-8")
    return st.text(chars, max_size=8).map(json.dumps)


def flow_list(items: list[str]) -> str:
    return f"[{', '.join(items)}]"


def flow_map(pairs: dict[str, str]) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in pairs.items()) + "}"


def nested(scalars: st.SearchStrategy[str], keys: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.recursive(
        scalars | st.just("[" * 40 + "]" * 40),
        lambda inner: (
            st.lists(inner, max_size=3).map(flow_list)
            | st.dictionaries(keys, inner, max_size=3).map(flow_map)
        ),
        max_leaves=6,
    )


# Keys that YAML reads as scalars of another type, or as text that needs escapes.
ODD_KEYS = quoted(surrogates=False) | st.sampled_from(
    ["1", "-2", "no", "yes", "~", "null", "=", "2024-01-01", "0x10", ".inf", "'quoted'", "x y"]
)
ODD = nested(
    st.sampled_from(ODD_SCALARS)
    | quoted(surrogates=False)
    | st.integers(-(2**63), 2**63 - 1).map(str)
    | st.floats().map(repr),
    ODD_KEYS,
)
HOSTILE = nested(
    st.sampled_from(HOSTILE_SCALARS)
    | st.sampled_from(ODD_SCALARS)
    | quoted(surrogates=True)
    | st.text(max_size=6)  # unquoted: often not YAML at all
    | st.integers(-(2**70), 2**70).map(str),
    st.sampled_from(HOSTILE_SCALARS) | ODD_KEYS | quoted(surrogates=True),
)


def either(
    good: st.SearchStrategy[str], bad: st.SearchStrategy[str] | None
) -> st.SearchStrategy[str]:
    """Mostly what the field takes, one time in twelve ``bad`` (hypothesis favours the low end
    of a range, so the good branch is there); never without ``bad``."""
    if bad is None:
        return good
    return st.integers(0, 11).flatmap(lambda n: bad if n == 11 else good)


SCHEMAS = st.sampled_from([
    "{type: object}", "{type: object, properties: {a: {type: string}}, required: [a]}",
    "{type: object, properties: {n: {type: integer}, e: {enum: [x, y]}, o: {type: object}}}",
    "{type: object, properties: {l: {type: array, items: {type: number}}}}",
])  # fmt: skip
TEXT = quoted(surrogates=False)
TOOL_FIELDS = {
    "description": TEXT,
    "parameters": SCHEMAS,
    "result": TEXT | ODD.map(lambda v: f"[{v}]") | ODD.map(lambda v: f"{{k: {v}}}"),
    "latency_ms": st.sampled_from(["0", "5", "3600000"]),
}
CASE_FIELDS = {
    "name": TEXT,
    "language": st.sampled_from(["en", "de", "zh-Hans"]),
    "tags": st.lists(TEXT, max_size=2).map(flow_list),
    "system": TEXT,
    "max_steps": st.sampled_from(["1", "8", "100"]),
    "timeout_s": st.sampled_from(["0.5", "60", "3600"]),
    "temperature": st.sampled_from(["0", "0.7", "2"]),
    "max_tokens": st.sampled_from(["1", "256", str(MAX_TOKENS)]),
    "parallel_tools": st.sampled_from(["true", "false"]),
}
DEFAULTS = ["language", "tags", "system", "max_steps", "timeout_s", "temperature", "max_tokens"]


# Schemas of type object whose parts are anything: what servers and the mock choke on.
ODD_SCHEMAS = ODD.map(lambda v: f"{{type: object, properties: {{a: {v}}}}}") | ODD.map(
    lambda v: f"{{type: object, required: {v}, properties: {{a: {{type: {v}, enum: {v}}}}}}}"
)


@st.composite
def tool(draw: st.DrawFn, name: str, bad: st.SearchStrategy[str] | None) -> str:
    pairs = {"name": draw(either(st.just(name), bad))}
    for field in draw(st.lists(st.sampled_from(list(TOOL_FIELDS)), max_size=4, unique=True)):
        wrong = bad | ODD_SCHEMAS if bad is not None and field == "parameters" else bad
        pairs[field] = draw(either(TOOL_FIELDS[field], wrong))
    return flow_map(pairs)


@st.composite
def case_block(draw: st.DrawFn, i: int, bad: st.SearchStrategy[str] | None) -> list[str]:
    lines = [f"  - id: {draw(either(st.just(f'c{i}'), bad))}"]
    prompt = draw(either(TEXT.filter(lambda t: t != '""'), bad))
    forms = [f"    input: {prompt}", f"    messages: [{{role: user, content: {prompt}}}]"]
    lines.append(draw(st.sampled_from(forms)))
    for name in draw(st.lists(st.sampled_from(list(CASE_FIELDS)), max_size=3, unique=True)):
        lines.append(f"    {name}: {draw(either(CASE_FIELDS[name], bad))}")
    names = ["t", "u"][: draw(st.integers(0, 2))]
    if names:
        lines.append(f"    tools: {flow_list([draw(tool(name, bad)) for name in names])}")
        lines.append(f"    expect: {{tool_calls: {draw(either(st.just(flow_list(names)), bad))}}}")
    return lines


@st.composite
def case_files(draw: st.DrawFn, hostile: bool = True) -> bytes:
    """A case file: valid structure (an x- anchor, defaults, cases, tools) with odd values
    and, when ``hostile``, hostile ones drawn into it, sometimes a laughs bomb or a stray
    line, then maybe bytes that are not UTF-8 spliced in, or the whole file in UTF-16."""
    bad = HOSTILE if hostile else None
    lines = [f"x-s: &s {draw(ODD if bad is None else bad)}"] if draw(st.booleans()) else []
    if hostile and draw(st.integers(0, 9)) == 9:
        lines += laughs(draw(st.sampled_from([2, 3, 7]))).splitlines()[:-3]
    if draw(st.booleans()):
        name = draw(st.sampled_from(DEFAULTS))
        lines.append(f"defaults: {{{name}: {draw(either(CASE_FIELDS[name], bad))}}}")
    lines.append("cases:")
    for i in range(draw(st.integers(1, 3))):
        lines += draw(case_block(i, bad))
    if hostile and draw(st.integers(0, 9)) == 9:
        lines.insert(draw(st.integers(0, len(lines))), draw(HOSTILE))
    data = ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")
    return draw(spoiled(data)) if hostile else data


@st.composite
def spoiled(draw: st.DrawFn, data: bytes) -> bytes:
    """``data``, or one time in ten with bytes that are not UTF-8 (a stray continuation byte,
    a cut sequence, an encoded surrogate, Latin-1) spliced in, or one in ten as UTF-16."""
    kind = draw(st.integers(0, 9))
    if kind == 8:
        bad = draw(st.sampled_from([b"\xff", b"\x80", b"\xc3", b"\xed\xa0\x80", b"\xe9t\xe9"]))
        at = draw(st.integers(0, len(data)))
        return data[:at] + bad + data[at:]
    if kind == 9:
        return data.decode("utf-8", "surrogatepass").encode("utf-16", "surrogatepass")
    return data


# Numbers a distribution takes; YAML 1.1 reads `1e6` as text, `1.0e+6` as a number.
NUMBER = st.sampled_from(["0", "1", "80", "2.5", "300", "3600000", "1.0e-300"])
EXTREME = st.sampled_from(["1.0e+300", "3600001", ".inf", ".nan", "-1", "1e6"])


@st.composite
def distributions(draw: st.DrawFn, bad: st.SearchStrategy[str] | None) -> str:
    number = either(NUMBER, None if bad is None else EXTREME | bad)
    low, high = draw(number), draw(number)
    forms = [low, f"{{uniform: [{low}, {high}]}}", f"{{lognormal: {{median: {low}, p99: {high}}}}}"]
    return draw(either(st.sampled_from(forms), bad))


PROFILE_FIELDS: dict[str, st.SearchStrategy[str]] = {
    "name": TEXT,
    "description": TEXT,
    "tool_latency_scale": st.sampled_from(["0", "1", "2.5"]),
    "models": st.just("{sim: {tokens_per_char: {en: 0.3, default: 0.25}}}"),
    "model_map": st.just("{'gpt-*': sim}"),
    "plans": st.just("{c0: [t, [t, u]]}"),
    "parallel_tool_calls": st.sampled_from(["1", "4", "128"]),
    "rate_limits": st.just("{requests_per_minute: 600, burst_s: 2}"),
    "faults": st.just("{error_500: 0.1, stall: 0.05, stall_s: 3}"),
}
DISTRIBUTIONS = ["ttft_ms", "itl_ms", "output_chars"]


@st.composite
def profile_files(draw: st.DrawFn, hostile: bool = True) -> bytes:
    """A mock profile: its fields, each mostly valid, and when ``hostile`` with hostile values
    (extreme numbers in the distributions among them) drawn into them."""
    bad = HOSTILE if hostile else None
    lines = []
    names = st.sampled_from([*PROFILE_FIELDS, *DISTRIBUTIONS])
    for name in draw(st.lists(names, max_size=6, unique=True)):
        good = distributions(bad) if name in DISTRIBUTIONS else PROFILE_FIELDS[name]
        if name == "output_chars" and not hostile:  # the mock writes them: keep runs short
            good = st.sampled_from(["0", "40", "{uniform: [1, 500]}"])
        lines.append(f"{name}: {draw(either(good, bad))}")
    data = ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")
    return draw(spoiled(data)) if hostile else data


def assert_located(problems: list[Problem], path: Path, data: bytes) -> None:
    """Each problem names the file, a line inside it (or none), and says what is wrong."""
    assert problems
    for p in problems:
        assert p.file == path and p.message.strip(), p
        assert p.line is None or 1 <= p.line <= _yaml_lines(data), (p, data)


def _yaml_lines(data: bytes) -> int:
    """Lines as YAML counts them (a lone CR, NEL and the Unicode separators break lines too: a
    file of 6 LFs and 2 lone CRs has 8 lines, and an error on its last is on line 8)."""
    text = data.decode("utf-8", errors="replace")
    return len(re.findall("\r\n|[\r\n\x85\u2028\u2029]", text)) + 1


PROFILE_LINE = re.compile(r"(:\d+)?: \S.*")  # after the file: `:line: field: message`, or less
GENERATED = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SAMPLED = settings(max_examples=20, deadline=None)  # each one a run: a small sample
counted: dict[str, Counter[str]] = defaultdict(Counter)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("generated")


@pytest.fixture(scope="module")
def examples() -> Suite:
    return load_suite([CASES])


def generated_file(folder: Path, kind: str, data: bytes) -> Path:
    counted[kind]["tried"] += 1
    return write(folder, data, f"{kind}-{counted[kind]['tried']}.yaml")


def tally(kind: str, outcome: str) -> None:
    counted[kind][outcome] += 1


@pytest.mark.slow  # make test-slow: generated case files, each run on the mock
@GENERATED
@given(data=case_files())
def test_a_generated_case_file_loads_and_can_be_sent_or_is_refused_located(
    folder: Path, data: bytes
) -> None:
    path = generated_file(folder, "cases", data)
    try:
        suite = load_suite([path])
    except CaseError as exc:
        tally("cases", "refused")
        assert_located(exc.problems, path, data)
        assert str(exc).startswith(str(path))
        return
    tally("cases", "loaded")
    runs_on_the_wire(suite)


@SAMPLED
@given(data=case_files(hostile=False))
def test_a_generated_case_file_that_loads_runs_against_the_mock(folder: Path, data: bytes) -> None:
    path = generated_file(folder, "case-runs", data)
    suite = load_suite([path])  # odd values only: they must all load
    run_cases(suite)
    tally("case-runs", "ran")


@GENERATED
@given(data=profile_files())
def test_a_generated_mock_profile_loads_or_is_refused_located(folder: Path, data: bytes) -> None:
    path = generated_file(folder, "profiles", data)
    try:
        profile = load_profile.__wrapped__(str(path))  # not cached: each file is new
    except ProfileError as exc:
        tally("profiles", "refused")
        lines = str(exc).splitlines()
        assert lines, exc
        for line in lines:
            assert line.startswith(str(path)), line
            assert PROFILE_LINE.fullmatch(line.removeprefix(str(path))), line
        return
    tally("profiles", "loaded")
    json.dumps(profile.model_dump(mode="json"))


@SAMPLED
@given(data=profile_files(hostile=False))
def test_a_generated_mock_profile_that_loads_runs(
    folder: Path, examples: Suite, data: bytes
) -> None:
    """Every draw of its distributions is usable: no overflow, no endless sleep or answer."""
    path = generated_file(folder, "profile-runs", data)
    try:
        profile = load_profile.__wrapped__(str(path))
    except ProfileError:
        tally("profile-runs", "refused")
        return
    run_mock(examples, profile)
    tally("profile-runs", "ran")


def test_generated_inputs_were_counted() -> None:
    """How many generated files the tests above tried, and how they came out (the counts the
    issue asks for), printed with `pytest -s`. When they all ran, each kind must have been
    both refused and loaded often enough to mean something."""
    print("\ngenerated inputs:", {kind: dict(c) for kind, c in counted.items()})
    if set(counted) == {"cases", "case-runs", "profiles", "profile-runs"}:
        for kind in ("cases", "profiles"):
            assert min(counted[kind]["loaded"], counted[kind]["refused"]) >= 25, counted
        assert counted["case-runs"]["ran"] >= 15 and counted["profile-runs"]["ran"] >= 10


def test_the_case_rules_still_hold_on_top_of_the_json_ones(tmp_path: Path) -> None:
    problem = only_problem(write(tmp_path, f"{ONE_CASE}    max_tokens: 0\n"))
    assert "greater than or equal to 1" in problem.message
    schema = {"type": "object", "properties": {"a": True}}  # JSON Schema's "anything"
    with pytest.raises(ValueError, match=r"properties.a must be a schema, .* \(\{\}: any value\)"):
        Case.model_validate(
            {"id": "a", "input": "x", "tools": [{"name": "t", "parameters": schema}]}
        )
