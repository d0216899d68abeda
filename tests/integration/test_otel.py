"""OpenTelemetry out: a real run (in-process mock, trio's virtual clock, injected 500s) sent
to a loopback OTLP/HTTP receiver and written as OTLP JSON; each task an ``invoke_agent`` span
with its model calls as ``chat`` and tool calls as ``execute_tool`` children, attributes in
the GenAI semantic conventions' names, tokens equal to the samples'."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from perfbench import otel, store
from perfbench.errors import PerfbenchError
from perfbench.sample import Sample
from perfbench.spec import Plan
from tests.helpers import CASES, failing_priced_run, invoke

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return failing_priced_run(
        tmp_path_factory.mktemp("runs"), Plan(runs=2, warmup=1, repeat=1, concurrency=4)
    )


class _Receiver(BaseHTTPRequestHandler):
    """An OTLP/HTTP endpoint: decodes each protobuf request as a collector would."""

    traces: list[dict[str, Any]]
    metrics: list[dict[str, Any]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        assert self.headers["Content-Type"] == "application/x-protobuf"
        if self.path == "/v1/traces":
            self.traces.append(MessageToDict(ExportTraceServiceRequest.FromString(body)))
        elif self.path == "/v1/metrics":
            self.metrics.append(MessageToDict(ExportMetricsServiceRequest.FromString(body)))
        else:
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[tuple[str, type[_Receiver]]]:
    handler = type("Handler", (_Receiver,), {"traces": [], "metrics": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


def _measured(run_dir: Path) -> list[Sample]:
    return [s for s in store.read_samples(run_dir) if s.phase == "measured"]


def _attrs(span: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for a in span.get("attributes", []):
        (value,) = a["value"].values()
        out[a["key"]] = value
    return out


def _spans(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        span
        for r in requests
        for rs in r["resourceSpans"]
        for ss in rs["scopeSpans"]
        for span in ss["spans"]
    ]


def _count(attrs: dict[str, Any], key: str) -> int | None:
    return int(attrs[key]) if key in attrs else None


def _check_tree(spans: list[dict[str, Any]], samples: list[Sample], failures: bool = True) -> None:
    """One invoke_agent span per task, keyed by (run, case, iteration), its children its
    steps; the test fails on a missing span, child or token count."""
    roots = {}
    for span in spans:
        attrs = _attrs(span)
        if attrs["gen_ai.operation.name"] == "invoke_agent":
            key = (int(attrs["perfbench.run"]), attrs["perfbench.case"],
                   int(attrs["perfbench.iteration"]))  # fmt: skip
            roots[key] = (span, attrs)
    assert len(roots) == len(samples) > 0
    children: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        if "parentSpanId" in span:
            children.setdefault(span["parentSpanId"], []).append(span)
    failed = 0
    finished: set[str | None] = set()
    for s in samples:
        root, attrs = roots[(s.run, s.case, s.iteration)]
        assert "parentSpanId" not in root
        assert root["name"].startswith("invoke_agent ")
        assert _count(attrs, "gen_ai.usage.input_tokens") == s.tokens_in
        assert _count(attrs, "gen_ai.usage.output_tokens") == s.tokens_out
        kids = children.get(root["spanId"], [])
        ops = [_attrs(k)["gen_ai.operation.name"] for k in kids]
        assert ops.count("chat") == s.model_calls and ops.count("execute_tool") == s.tool_calls
        assert all(k["traceId"] == root["traceId"] for k in kids)
        chats = [_attrs(k) for k in kids if _attrs(k)["gen_ai.operation.name"] == "chat"]
        model_steps = [st for st in s.steps if st.kind == "model"]
        assert sorted(int(c.get("gen_ai.usage.output_tokens", -1)) for c in chats) == sorted(
            -1 if st.tokens_out is None else st.tokens_out for st in model_steps
        )
        # Why each reply ended, as the conventions' array (a failed call has none).
        reasons = [c.get("gen_ai.response.finish_reasons", {}).get("values", []) for c in chats]
        assert sorted(",".join(v["stringValue"] for v in r) for r in reasons) == sorted(
            st.finish or "" for st in model_steps
        )
        finished.update(st.finish for st in model_steps if st.status == "ok")
        tools = {_attrs(k).get("gen_ai.tool.name") for k in kids} - {None}
        assert tools == {st.name for st in s.steps if st.kind == "tool"}
        for part in ("model", "tool", "agent", "client"):  # the time split rides along
            assert float(attrs[f"perfbench.time.{part}_s"]) >= 0
        duration = int(root["endTimeUnixNano"]) - int(root["startTimeUnixNano"])
        assert abs(duration - s.latency * 1e9) < 1e3  # the sample's own times
        if s.status != "ok":
            failed += 1
            assert attrs["error.type"] == s.error_kind and root["status"]["code"] in (
                2,
                "STATUS_CODE_ERROR",
            )
    assert failed > 0 or not failures  # the injected 500s are there, as error spans
    assert {"stop", "tool_calls"} <= finished  # every answered call says why it ended


def test_the_run_arrives_at_an_otlp_endpoint_as_a_span_tree(
    run_dir: Path, receiver: tuple[str, type[_Receiver]]
) -> None:
    url, got = receiver
    samples = _measured(run_dir)
    sent = otel.send(run_dir, store.read_json(run_dir / store.META), url)
    assert sent.tasks == len(samples)
    _check_tree(_spans(got.traces), samples)
    metrics = {
        m["name"]: m
        for r in got.metrics
        for rm in r["resourceMetrics"]
        for sm in rm["scopeMetrics"]
        for m in sm["metrics"]
    }
    duration = metrics["gen_ai.client.operation.duration"]["histogram"]["dataPoints"]
    calls = sum(s.model_calls for s in samples)
    by_op = {_attrs(p)["gen_ai.operation.name"]: 0 for p in duration}
    for p in duration:
        by_op[_attrs(p)["gen_ai.operation.name"]] += int(p["count"])
    assert by_op == {"invoke_agent": len(samples), "chat": calls}
    usage = metrics["gen_ai.client.token.usage"]["histogram"]["dataPoints"]
    out = sum(float(p["sum"]) for p in usage if _attrs(p)["gen_ai.token.type"] == "output")
    assert out == sum(st.tokens_out or 0 for s in samples for st in s.steps)
    assert "gen_ai.client.operation.time_to_first_chunk" in metrics


def test_otlp_json_lines_hold_the_same_tree_with_hex_ids(run_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "otlp.jsonl"
    otel.write_json(run_dir, store.read_json(run_dir / store.META), path)
    lines = path.read_text().splitlines()
    spans = list(otel.spans_of(lines))
    _check_tree(spans, _measured(run_dir))
    assert all(len(s["traceId"]) == 32 and len(s["spanId"]) == 16 for s in spans)
    assert all(int(s["traceId"], 16) for s in spans)  # hex, as OTLP JSON asks (not base64)
    assert '"resourceMetrics"' in lines[-1]


def test_an_endpoint_that_refuses_is_perfbenchs_error(run_dir: Path) -> None:
    meta = store.read_json(run_dir / store.META)
    with pytest.raises(PerfbenchError, match="did not accept"):
        otel.send(run_dir, meta, "http://127.0.0.1:9/", timeout=1)  # nothing listens


def test_export_command_writes_otlp_json_and_refuses_a_run_file(run_dir: Path) -> None:
    done = invoke("export", str(run_dir), "--format", "otlp-json")
    assert done.returncode == 0, done.stderr
    assert list(otel.spans_of((run_dir / "otlp.jsonl").read_text().splitlines()))
    refused = invoke("export", str(run_dir), "-f", "otlp-json", "-o", str(run_dir / "meta.json"))
    assert refused.returncode != 0 and "one of the run's own files" in refused.stderr
    bad = invoke("export", str(run_dir), "--otlp", "localhost:4318")
    assert bad.returncode == 2 and "OTLP/HTTP address" in bad.stderr
    assert "Traceback" not in refused.stderr


def test_run_with_otlp_sends_its_tasks_after_the_run(
    tmp_path: Path, receiver: tuple[str, type[_Receiver]]
) -> None:
    url, got = receiver
    done = invoke("run", str(CASES / "lookup.yaml"), "-t", "mock", "--runs", "1", "--warmup", "0",
               "--out", str(tmp_path), "--otlp", url, "-q")  # fmt: skip
    assert done.returncode == 0, done.stderr
    (run_dir,) = tmp_path.iterdir()
    _check_tree(_spans(got.traces), _measured(run_dir), failures=False)
    assert f"sent to {url}" in done.stderr


class _Kept:
    """An exporter that keeps the spans (otel.record's other end)."""

    def __init__(self) -> None:
        self.kept: list[Any] = []

    def spans(self, batch: Any) -> None:
        self.kept.extend(batch)

    def metrics(self, data: Any) -> None:
        pass


@pytest.mark.parametrize(
    ("target", "spec", "provider", "model"),
    [
        ("cmd:/usr/bin/python my_agent.py", {"upstream": "openai/gpt-4o-mini"}, "openai",
         "gpt-4o-mini"),
        ("cmd:/usr/bin/python my_agent.py", {"upstream": "mock+http:/tmp/p.yaml"},
         "perfbench.mock", "mock"),
        ("mock+http:default@sim", {}, "perfbench.mock", "sim"),
        ("anthropic/claude-3-5-haiku", {}, "anthropic", "claude-3-5-haiku"),
        ("http+agent://127.0.0.1:9/run", {"upstream": "openai/gpt-4o", "proxy": False}, None,
         None),
        ("python:pkg.mod:fn", {"upstream": "deepseek/deepseek-chat", "proxy": True}, "deepseek",
         "deepseek-chat"),
    ],
)  # fmt: skip
def test_provider_and_model_come_from_the_model_a_task_called(
    run_dir: Path, target: str, spec: dict[str, Any], provider: str | None, model: str | None
) -> None:
    """A `cmd:` agent's spans said provider "cmd:" and model "usr/bin/python my_agent.py" (the
    target split at its first "/"); a mock's, "mock+http:default" for both. Its model calls go
    to --upstream: that names them; an agent whose calls perfbench did not see names none."""
    meta = {**store.read_json(run_dir / store.META), "target": target}
    meta["spec"] = {**meta["spec"], "target": {**meta["spec"]["target"], **spec}}
    kept = _Kept()
    otel.record(_measured(run_dir)[:4], meta, kept)
    chats = [s for s in kept.kept if s.attributes["gen_ai.operation.name"] == "chat"]
    roots = [s for s in kept.kept if s.attributes["gen_ai.operation.name"] == "invoke_agent"]
    assert chats and len(roots) == 4
    for span in chats + roots:
        assert span.attributes.get("gen_ai.provider.name") == provider, span.attributes
        assert span.attributes.get("gen_ai.request.model") == model
    assert {s.name for s in chats} == {f"chat {model}" if model else "chat"}
    assert {s.attributes["gen_ai.agent.name"] for s in roots} == {target}


def test_a_call_names_the_model_it_asked_for(run_dir: Path) -> None:
    """An agent's calls through the proxy choose their model (the step's ``model``): their chat
    spans and metrics name it, not the --upstream's."""
    meta = {**store.read_json(run_dir / store.META), "target": "cmd:agent"}
    meta["spec"] = {**meta["spec"], "target": {**meta["spec"]["target"],
                                               "upstream": "openai/gpt-4o"}}  # fmt: skip
    samples = _measured(run_dir)[:3]
    for s in samples:
        for st in s.steps:
            st.model = "gpt-4o-mini" if st.kind == "model" else None
    kept = _Kept()
    otel.record(samples, meta, kept)
    chats = [s for s in kept.kept if s.attributes["gen_ai.operation.name"] == "chat"]
    assert chats and {s.name for s in chats} == {"chat gpt-4o-mini"}
    assert {s.attributes["gen_ai.request.model"] for s in chats} == {"gpt-4o-mini"}


class WholeBody(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint that answers o4-mini with a dated snapshot, reporting
    cached and reasoning tokens, as a router or OpenAI itself does."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        body = json.dumps({
            "model": "o4-mini-2025-04-16",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 50, "completion_tokens": 9,
                      "prompt_tokens_details": {"cached_tokens": 40},
                      "completion_tokens_details": {"reasoning_tokens": 3}},
        }).encode()  # fmt: skip
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_chat_span_carries_its_calls_served_model_and_cache_and_reasoning_tokens(
    tmp_path: Path, receiver: tuple[str, type[_Receiver]]
) -> None:
    """Only the task's span had them (summed): a call's span now says which model answered
    it and its own cached and reasoning tokens, in the conventions' names."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), WholeBody)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url, got = receiver
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}/v1"
        done = invoke("run", str(CASES / "answer.yaml"), "-t", "openai/o4-mini",
                      "--base-url", base, "--no-stream", "--no-preflight", "--runs", "1",
                      "--warmup", "0", "--out", str(tmp_path), "--otlp", url, "-q",
                      env={"OPENAI_API_KEY": "sk-test"})  # fmt: skip
    finally:
        server.shutdown()
        server.server_close()
    assert done.returncode == 0, done.stdout + done.stderr
    chats = [_attrs(s) for s in _spans(got.traces)]
    chats = [a for a in chats if a["gen_ai.operation.name"] == "chat"]
    assert len(chats) == 4  # answer.yaml: four cases, one call each
    for attrs in chats:
        assert attrs["gen_ai.request.model"] == "o4-mini"
        assert attrs["gen_ai.response.model"] == "o4-mini-2025-04-16"
        assert _count(attrs, "gen_ai.usage.cache_read.input_tokens") == 40
        assert _count(attrs, "gen_ai.usage.reasoning.output_tokens") == 3
        assert "gen_ai.usage.cache_creation.input_tokens" not in attrs  # not reported
