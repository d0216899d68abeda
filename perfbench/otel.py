"""A run's tasks as OpenTelemetry traces and metrics, in the GenAI semantic conventions.

Each task is an ``invoke_agent`` span; its model calls are ``chat`` spans and its tool calls
``execute_tool`` spans under it, timed from the samples (the run's ``started_at`` plus each
sample's offset). Run-level metrics: ``gen_ai.client.operation.duration`` (per model call and
per task), ``gen_ai.client.operation.time_to_first_chunk`` and ``gen_ai.client.token.usage``.

Built with the official SDK (the ``otel`` extra) and sent with its OTLP/HTTP protobuf exporter,
or written as OTLP JSON lines (one ``ExportTraceServiceRequest`` or ``ExportMetricsService-
Request`` a line, what the collector's file exporter writes and its ``otlpjsonfile`` receiver
reads). The spans are made after the run from samples.jsonl, never while it measures: the
SDK's exporters work on threads, which must not share the measuring process's GIL.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import orjson

from perfbench import store
from perfbench.errors import PerfbenchError, StoreError
from perfbench.sample import Sample, Step
from perfbench.stats import breakdown

OTEL_HINT = (
    "OpenTelemetry export needs the otel extra: pip install 'perfbench-llm[otel]' "
    "(opentelemetry-sdk and opentelemetry-exporter-otlp-proto-http)"
)

try:  # the otel extra; importing this module without it says how to install it
    from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import (
        InMemoryMetricReader,
        MetricExportResult,
        MetricsData,
    )
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
    from opentelemetry.sdk.trace.export import SpanExportResult
    from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as ga
    from opentelemetry.semconv._incubating.metrics import gen_ai_metrics as gm
    from opentelemetry.trace import Tracer
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise PerfbenchError(OTEL_HINT) from exc

_BATCH = 512  # spans handed to the exporter at once
# The semantic conventions' advised bucket boundaries (gen_ai metrics).
_DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48,
                     40.96, 81.92)  # fmt: skip
_TOKEN_BUCKETS = tuple(float(4**i) for i in range(14))


@dataclass(frozen=True)
class Sent:
    """What an export carried."""

    tasks: int
    spans: int


class _Exporter(Protocol):
    def spans(self, batch: Sequence[ReadableSpan]) -> None: ...
    def metrics(self, data: MetricsData) -> None: ...


def send(
    run_dir: Path, meta: dict[str, Any], url: str, phase: str = "measured", timeout: float = 10
) -> Sent:
    """Send the run's tasks to an OTLP/HTTP endpoint (``http://host:4318``, or its full
    ``…/v1/traces`` address); the exporter retries a refused batch for ``timeout`` seconds."""
    return _export(run_dir, meta, _Http(url, timeout), phase)


def write_json(run_dir: Path, meta: dict[str, Any], path: Path, phase: str = "measured") -> Sent:
    """Write the run's tasks as OTLP JSON lines to ``path``."""
    try:
        with path.open("w", encoding="utf-8") as fh:
            return _export(run_dir, meta, _JsonLines(fh.write), phase)
    except OSError as exc:
        raise StoreError(f"cannot write {path}: {exc.strerror or exc}") from exc


# --- building -------------------------------------------------------------------------------


def _export(run_dir: Path, meta: dict[str, Any], out: _Exporter, phase: str) -> Sent:
    wanted = (lambda _: True) if phase == "all" else (lambda p: p == phase)
    samples = (s for s in store.read_samples(run_dir) if wanted(s.phase))
    return record(samples, meta, out)


def record(samples: Iterable[Sample], meta: dict[str, Any], out: _Exporter) -> Sent:
    """Spans and metrics for ``samples`` handed to ``out``, a batch of spans at a time."""

    resource = Resource.create(_resource(meta))
    batches = _Batches(out.spans)
    traces = TracerProvider(resource=resource, shutdown_on_exit=False)
    traces.add_span_processor(batches)
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader], resource=resource, shutdown_on_exit=False)
    shape = _Shape.of(meta)
    tracer = traces.get_tracer("perfbench", _version())
    instruments = _Instruments(meters)
    tasks = 0
    try:
        for s in samples:
            _task(tracer, s, shape)
            instruments.add(s, shape)
            tasks += 1
        batches.flush()
        data = reader.get_metrics_data()
        if data is not None:
            out.metrics(data)
    finally:
        meters.shutdown()
        traces.shutdown()
    return Sent(tasks, batches.total)


@dataclass(frozen=True)
class _Shape:
    """What every span of the run shares: when it started (epoch ns), provider and model."""

    origin_ns: int
    provider: str | None  # None: not known (an agent whose model calls perfbench did not see)
    model: str | None
    agent: str

    @classmethod
    def of(cls, meta: dict[str, Any]) -> _Shape:
        started = datetime.fromisoformat(str(meta["started_at"]))
        target = str(meta.get("target") or "unknown")
        provider, model = _model_of(target, (meta.get("spec") or {}).get("target") or {})
        return cls(int(started.timestamp() * 1e9), provider, model, target)

    def ns(self, offset: float) -> int:
        return self.origin_ns + int(offset * 1e9)

    def asked(self, step: Step) -> str | None:
        """The model a call asked for: its own when the step saw the request (an agent's call
        through the proxy names its model), else the target's."""
        return step.model or self.model


MOCK_PROVIDER = "perfbench.mock"  # the mock speaks OpenAI's wire format but is no provider
_AGENTS = ("cmd:", "python:", "http+agent:", "http+agents:")


def _model_of(target: str, spec: dict[str, Any]) -> tuple[str | None, str | None]:
    """``gen_ai.provider.name`` and ``gen_ai.request.model`` for a target string (registry.py's
    forms): ``openai/gpt-4o`` is provider and model; a mock is perfbench's with the model it is
    asked for (``@model``, else ``mock``); an agent's model calls go to its ``--upstream``
    (``cmd:`` always, the others with ``--proxy``), else neither is known. Never a piece of a
    command line: ``cmd:/usr/bin/python a.py`` split at its first "/" gave a provider "cmd:"."""
    if target.startswith(_AGENTS):
        upstream = spec.get("upstream") or ("mock+http" if target.startswith("cmd:") else None)
        proxied = target.startswith("cmd:") or spec.get("proxy")
        return _model_of(str(upstream), {}) if upstream and proxied else (None, None)
    if target.startswith("mock"):
        model = target.partition("@")[2]
        return MOCK_PROVIDER, model or "mock"
    provider, slash, model = target.partition("/")
    if slash and ":" not in provider:
        return provider, model
    return None, None


def _resource(meta: dict[str, Any]) -> dict[str, Any]:
    attrs: dict[str, Any] = {"service.name": "perfbench", "perfbench.target": meta.get("target")}
    for key in ("id", "label"):
        if meta.get(key):
            attrs[f"perfbench.run.{key}"] = meta[key]
    return {k: v for k, v in attrs.items() if v is not None}


def _task(tracer: Tracer, s: Sample, shape: _Shape) -> None:

    root = tracer.start_span(
        f"invoke_agent {shape.agent}",
        kind=trace.SpanKind.INTERNAL,
        start_time=shape.ns(s.start),
        attributes=_task_attributes(s, shape),
    )
    if s.status != "ok":
        root.set_status(trace.StatusCode.ERROR, s.error)
    parent = trace.set_span_in_context(root)
    for step in s.steps:
        if step.kind == "agent":  # the agent's own time: the parent span's, not a call
            continue
        name, kind, attrs = _step_shape(step, shape)
        child = tracer.start_span(
            name, parent, kind=kind, start_time=shape.ns(step.start), attributes=attrs
        )
        if step.status != "ok":
            child.set_status(trace.StatusCode.ERROR)
        child.end(end_time=shape.ns(step.start + step.duration))
    root.end(end_time=shape.ns(s.end))


def _task_attributes(s: Sample, shape: _Shape) -> dict[str, Any]:

    attrs: dict[str, Any] = {
        ga.GEN_AI_OPERATION_NAME: "invoke_agent",
        ga.GEN_AI_AGENT_NAME: shape.agent,
        ga.GEN_AI_PROVIDER_NAME: shape.provider,
        ga.GEN_AI_REQUEST_MODEL: shape.model,
        ga.GEN_AI_RESPONSE_MODEL: s.model_served,
        ga.GEN_AI_USAGE_INPUT_TOKENS: s.tokens_in,
        ga.GEN_AI_USAGE_OUTPUT_TOKENS: s.tokens_out,
        ga.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: s.tokens_cache_read,
        ga.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: s.tokens_cache_write,
        ga.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: s.tokens_reasoning,
        ga.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: s.ttft,
        "error.type": s.error_kind,
        "perfbench.case": s.case,
        "perfbench.phase": s.phase,
        "perfbench.run": s.run,
        "perfbench.iteration": s.iteration,
        "perfbench.status": s.status,
        "perfbench.language": s.language,
        "perfbench.expect_ok": s.expect_ok,
        "perfbench.cost_usd": s.cost,
    }
    # Where the task's time went (stats/breakdown.py), so a trace view can sort by it.
    attrs.update({f"perfbench.time.{part}_s": v for part, v in breakdown.split(s).items()})
    return {k: v for k, v in attrs.items() if v is not None}


def _step_shape(step: Step, shape: _Shape) -> tuple[str, Any, dict[str, Any]]:

    if step.kind == "tool":
        attrs: dict[str, Any] = {
            ga.GEN_AI_OPERATION_NAME: "execute_tool",
            ga.GEN_AI_TOOL_NAME: step.name,
        }
        name, kind = f"execute_tool {step.name}", trace.SpanKind.INTERNAL
    else:
        model = shape.asked(step)
        attrs = {
            ga.GEN_AI_OPERATION_NAME: "chat",
            ga.GEN_AI_PROVIDER_NAME: shape.provider,
            ga.GEN_AI_REQUEST_MODEL: model,
            ga.GEN_AI_RESPONSE_MODEL: step.model_served,
            ga.GEN_AI_USAGE_INPUT_TOKENS: step.tokens_in,
            ga.GEN_AI_USAGE_OUTPUT_TOKENS: step.tokens_out,
            ga.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: step.tokens_cache_read,
            ga.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: step.tokens_cache_write,
            ga.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: step.tokens_reasoning,
            ga.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: step.ttft,
            ga.GEN_AI_RESPONSE_FINISH_REASONS: [step.finish] if step.finish else None,
            "http.response.status_code": step.http_status,
            "perfbench.api": step.name,
        }
        # The conventions' name: "{operation} {request model}".
        name, kind = f"chat {model}" if model else "chat", trace.SpanKind.CLIENT
    attrs["error.type"] = _step_error(step)
    attrs["perfbench.turn"] = step.turn
    return name, kind, {k: v for k, v in attrs.items() if v is not None}


def _step_error(step: Step) -> str | None:
    if step.status == "ok":
        return None
    return f"http_{step.http_status}" if step.http_status else step.status


class _Instruments:
    """The run-level metrics, one histogram each, recorded per model call and per task."""

    def __init__(self, meters: MeterProvider) -> None:

        meter = meters.get_meter("perfbench", _version())
        self.duration = meter.create_histogram(
            gm.GEN_AI_CLIENT_OPERATION_DURATION,
            unit="s",
            description="GenAI operation duration",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
        )
        self.ttft = meter.create_histogram(
            gm.GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK,
            unit="s",
            description="Time to receive the first chunk of a streamed response",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
        )
        self.tokens = meter.create_histogram(
            gm.GEN_AI_CLIENT_TOKEN_USAGE,
            unit="{token}",
            description="Number of input and output tokens used",
            explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS,
        )

    def add(self, s: Sample, shape: _Shape) -> None:

        task = {**_known(shape.provider, shape.model), ga.GEN_AI_OPERATION_NAME: "invoke_agent"}
        if s.error_kind:
            task["error.type"] = s.error_kind
        self.duration.record(s.latency, task)
        for step in s.steps:
            if step.kind == "model":
                attrs = _known(shape.provider, shape.asked(step))
                self._call(step, {**attrs, ga.GEN_AI_OPERATION_NAME: "chat"})

    def _call(self, step: Step, attrs: dict[str, str]) -> None:

        error = _step_error(step)
        self.duration.record(step.duration, {**attrs, "error.type": error} if error else attrs)
        if step.ttft is not None:
            self.ttft.record(step.ttft, attrs)
        for kind, count in (("input", step.tokens_in), ("output", step.tokens_out)):
            if count is not None:
                self.tokens.record(count, {**attrs, ga.GEN_AI_TOKEN_TYPE: kind})


def _known(provider: str | None, model: str | None) -> dict[str, str]:
    known = {ga.GEN_AI_PROVIDER_NAME: provider, ga.GEN_AI_REQUEST_MODEL: model}
    return {k: v for k, v in known.items() if v is not None}


class _Batches(SpanProcessor):
    """A span processor that hands ended spans to the exporter ``_BATCH`` at a time, on the
    caller's thread (the SDK's batch processor runs a thread of its own; here the spans are
    made as fast as samples are read, so a synchronous batch is all that is needed)."""

    def __init__(self, export: Callable[[Sequence[ReadableSpan]], None]) -> None:
        self._export = export
        self._spans: list[ReadableSpan] = []
        self.total = 0

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        self._spans.append(span)
        if len(self._spans) >= _BATCH:
            self.flush()

    def flush(self) -> None:
        spans, self._spans = self._spans, []  # taken first: a refused batch is not retried
        if spans:
            self._export(spans)
            self.total += len(spans)

    def shutdown(self) -> None:
        self.flush()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        self.flush()
        return True


# --- out ------------------------------------------------------------------------------------


class _Http:
    """The SDK's OTLP/HTTP protobuf exporters; a refused export is perfbench's error."""

    def __init__(self, url: str, timeout: float) -> None:

        base = url.rstrip("/").removesuffix("/v1/traces")
        self.url = base
        self._spans = OTLPSpanExporter(endpoint=f"{base}/v1/traces", timeout=timeout)
        self._metrics = OTLPMetricExporter(endpoint=f"{base}/v1/metrics", timeout=timeout)

    def spans(self, batch: Sequence[ReadableSpan]) -> None:

        if self._spans.export(batch) is not SpanExportResult.SUCCESS:
            raise PerfbenchError(self._refused("traces"))

    def metrics(self, data: MetricsData) -> None:

        if self._metrics.export(data) is not MetricExportResult.SUCCESS:
            raise PerfbenchError(self._refused("metrics"))

    def _refused(self, what: str) -> str:
        return (
            f"the OTLP endpoint {self.url}/v1/{what} did not accept the export (its log "
            "above says why); check that a collector listens there for OTLP/HTTP (port 4318)"
        )


class _JsonLines:
    """OTLP JSON: the protobuf request in protobuf's JSON mapping, with the trace and span ids
    in hex as the OTLP specification asks (the mapping would write bytes as base64)."""

    def __init__(self, write: Callable[[str], Any]) -> None:
        self._write = write

    def spans(self, batch: Sequence[ReadableSpan]) -> None:

        self._line(encode_spans(batch))

    def metrics(self, data: MetricsData) -> None:

        self._line(encode_metrics(data))

    def _line(self, message: Any) -> None:

        doc = MessageToDict(message, use_integers_for_enums=True)
        self._write(orjson.dumps(_hex_ids(doc)).decode() + "\n")


_ID_KEYS = frozenset({"traceId", "spanId", "parentSpanId"})


def _hex_ids(node: Any) -> Any:
    if isinstance(node, dict):
        return {
            k: base64.b64decode(v).hex() if k in _ID_KEYS else _hex_ids(v) for k, v in node.items()
        }
    if isinstance(node, list):
        return [_hex_ids(v) for v in node]
    return node


def spans_of(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """Every span in OTLP JSON lines (a reader for tests and notebooks)."""

    for line in lines:
        doc = orjson.loads(line)
        for rs in doc.get("resourceSpans", []):
            for ss in rs.get("scopeSpans", []):
                yield from ss.get("spans", [])


def _version() -> str:
    from perfbench.version import __version__

    return __version__


__all__ = ["OTEL_HINT", "Sent", "record", "send", "spans_of", "write_json"]
