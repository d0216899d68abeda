"""What a request asks the mock for, on each API: tool_choice, parallel tool calls, structured
output, output length, count_tokens, the Responses API and its event stream, and a 404 for an
unknown route. Through the service (bytes in, bytes out), without sockets."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from perfbench.mock.profile import Profile
from perfbench.mock.service import SendPlan, Service
from perfbench.mock.simulator import Simulator, ToolSpec, Turn

TOOLS = (ToolSpec("a"), ToolSpec("b"), ToolSpec("c"))
SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer"},
        "unit": {"enum": ["c", "f"]},
        "tags": {"type": "array"},
        "where": {"type": "object", "properties": {"lat": {"type": "number"}}},
    },
    "required": ["city", "days", "unit", "tags", "where"],
}


def service(**profile: Any) -> Service:
    base = {"output_chars": 80, "models": {"sim": {"tokens_per_char": {"default": 0.25}}}}
    return Service(Profile.model_validate({**base, **profile}), 0, lambda: 0.0)


def post(svc: Service, path: str, body: dict[str, Any]) -> tuple[SendPlan, dict[str, Any]]:
    plan = svc.handle("POST", path, {}, orjson.dumps(body))
    svc.done(plan)
    return plan, orjson.loads(plan.body) if plan.body else {}


def names(sim: Simulator, turn: Turn) -> list[str]:
    return [c.name for c in sim.reply(turn).calls]


def chat_tools(*tools: str) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": n, "parameters": {}}} for n in tools]


def user(text: str = "hello") -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


# --- which tools a turn calls ---


def test_tool_choice_none_answers_and_a_named_tool_is_called_every_turn() -> None:
    sim = Simulator(Profile())
    assert names(sim, Turn("m", ("q",), TOOLS, tool_choice="none")) == []
    forced = [
        names(
            sim, Turn("m", ("q",), TOOLS, tool_results=i, tool_choice="required", forced_tool="b")
        )
        for i in range(4)
    ]
    assert forced == [["b"]] * 4


def test_required_starts_the_tools_over_rather_than_answer() -> None:
    sim = Simulator(Profile())
    auto = [names(sim, Turn("m", ("q",), TOOLS[:2], tool_results=i)) for i in range(3)]
    required = [
        names(sim, Turn("m", ("q",), TOOLS[:2], tool_results=i, tool_choice="required"))
        for i in range(4)
    ]
    assert auto == [["a"], ["b"], []]
    assert required == [["a"], ["b"], ["a"], ["b"]]


def test_a_profile_asks_for_parallel_calls_unless_the_request_forbids_them() -> None:
    sim = Simulator(Profile(parallel_tool_calls=2))
    turns = [names(sim, Turn("m", ("q",), TOOLS, tool_results=n)) for n in (0, 2, 3)]
    assert turns == [["a", "b"], ["c"], []]
    serial = [
        names(sim, Turn("m", ("q",), TOOLS, tool_results=n, parallel=False)) for n in range(4)
    ]
    assert serial == [["a"], ["b"], ["c"], []]
    reply = sim.reply(Turn("m", ("q",), TOOLS, key="k"))
    first, second = reply.calls
    assert first.id != second.id and reply.text == reply.arguments(first) + reply.arguments(second)


def test_a_plan_entry_that_is_a_list_is_one_turn_of_parallel_calls() -> None:
    sim = Simulator(Profile(plans={"c1": [["b", "c"], "a"]}))
    got = [names(sim, Turn("m", ("q",), TOOLS, tool_results=n, case="c1")) for n in (0, 1, 2, 3)]
    # One result of the pair answered is still that turn: the pair again, as a model would see it.
    assert got == [["b", "c"], ["b", "c"], ["a"], []]


# --- output length and structured output ---


def test_min_tokens_and_ignore_eos_set_the_answer_length() -> None:
    sim = Simulator(Profile(output_chars=40, models={"s": {"tokens_per_char": {"default": 0.25}}}))
    drawn = sim.reply(Turn("m", ("hi",), key="k"))
    assert (drawn.completion_tokens, drawn.finish) == (10, "stop")
    longer = sim.reply(Turn("m", ("hi",), key="k", min_tokens=300))
    assert (longer.completion_tokens, longer.finish) == (300, "stop")
    to_limit = sim.reply(Turn("m", ("hi",), key="k", max_tokens=1000, ignore_eos=True))
    assert (to_limit.completion_tokens, to_limit.finish) == (1000, "length")
    capped = sim.reply(Turn("m", ("hi",), key="k", max_tokens=50, min_tokens=300))
    assert (capped.completion_tokens, capped.finish) == (50, "length")


def test_chat_min_tokens_ignore_eos_and_max_completion_tokens_reach_the_reply() -> None:
    svc = service()
    _, doc = post(svc, "/v1/chat/completions", {"messages": user(), "min_tokens": 64})
    assert doc["usage"]["completion_tokens"] == 64
    _, doc = post(
        svc,
        "/v1/chat/completions",
        {"messages": user(), "max_completion_tokens": 500, "ignore_eos": True},
    )
    assert doc["usage"]["completion_tokens"] == 500
    assert doc["choices"][0]["finish_reason"] == "length"


@pytest.mark.parametrize(
    ("path", "extra"),
    [
        (
            "/v1/chat/completions",
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "w", "schema": SCHEMA},
                }
            },
        ),
        (
            "/v1/messages",
            {
                "max_tokens": 200,
                "output_config": {"format": {"type": "json_schema", "schema": SCHEMA}},
            },
        ),
        (
            "/v1/messages",
            {"max_tokens": 200, "output_format": {"type": "json_schema", "schema": SCHEMA}},
        ),
        (
            "/v1/responses",
            {"text": {"format": {"type": "json_schema", "name": "w", "schema": SCHEMA}}},
        ),
    ],
)
def test_structured_output_is_json_that_fits_the_schema(path: str, extra: dict[str, Any]) -> None:
    body = {"messages": user()} if path != "/v1/responses" else {"input": "hello"}
    _, doc = post(service(), path, {"model": "m", **body, **extra})
    text = _answer_text(path, doc)
    answer = orjson.loads(text)
    assert set(answer) == set(SCHEMA["required"])  # type: ignore[arg-type]
    assert isinstance(answer["city"], str) and isinstance(answer["days"], int)
    assert answer["unit"] in ("c", "f") and answer["tags"] == []
    assert isinstance(answer["where"]["lat"], float)


def test_json_object_mode_answers_an_object() -> None:
    _, doc = post(
        service(),
        "/v1/chat/completions",
        {"messages": user(), "response_format": {"type": "json_object"}},
    )
    assert isinstance(orjson.loads(doc["choices"][0]["message"]["content"]), dict)


def _answer_text(path: str, doc: dict[str, Any]) -> str:
    if path == "/v1/chat/completions":
        return str(doc["choices"][0]["message"]["content"])
    if path == "/v1/messages":
        return str(doc["content"][0]["text"])
    return str(doc["output"][0]["content"][0]["text"])


# --- tool_choice on the wire ---


def test_chat_tool_choice_forms_and_their_errors() -> None:
    svc = service()
    body = {"messages": user(), "tools": chat_tools("a", "b")}
    _, none = post(svc, "/v1/chat/completions", {**body, "tool_choice": "none"})
    assert (
        none["choices"][0]["message"]["content"] and none["choices"][0]["finish_reason"] == "stop"
    )
    named = {"type": "function", "function": {"name": "b"}}
    _, doc = post(svc, "/v1/chat/completions", {**body, "tool_choice": named})
    [call] = doc["choices"][0]["message"]["tool_calls"]
    assert call["function"]["name"] == "b"
    plan, err = post(svc, "/v1/chat/completions", {"messages": user(), "tool_choice": "required"})
    assert plan.status == 400 and err["error"]["param"] == "tool_choice"
    missing = {"type": "function", "function": {"name": "zzz"}}
    plan, err = post(svc, "/v1/chat/completions", {**body, "tool_choice": missing})
    assert plan.status == 400 and "zzz" in err["error"]["message"]


def test_chat_parallel_calls_in_the_body_and_the_stream() -> None:
    svc = service(parallel_tool_calls=3)
    body = {"messages": user(), "tools": chat_tools("a", "b")}
    _, doc = post(svc, "/v1/chat/completions", body)
    calls = doc["choices"][0]["message"]["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["a", "b"]
    _, one = post(svc, "/v1/chat/completions", {**body, "parallel_tool_calls": False})
    assert len(one["choices"][0]["message"]["tool_calls"]) == 1
    plan = svc.handle("POST", "/v1/chat/completions", {}, orjson.dumps({**body, "stream": True}))
    assert plan.frames is not None
    chunks = [orjson.loads(line[6:]) for line in _lines(plan) if line != b"data: [DONE]"]
    named = [
        (t["index"], t["function"]["name"])
        for c in chunks
        for choice in c["choices"]
        for t in choice["delta"].get("tool_calls") or []
        if "name" in t.get("function", {})
    ]
    assert named == [(0, "a"), (1, "b")]


def test_anthropic_tool_choice_any_tool_none_and_parallel() -> None:
    svc = service(parallel_tool_calls=2)
    tools = [{"name": n, "input_schema": {"type": "object"}} for n in ("a", "b", "c")]
    base = {"model": "m", "max_tokens": 100, "messages": user(), "tools": tools}
    _, doc = post(svc, "/v1/messages", base)
    assert [b["name"] for b in doc["content"]] == ["a", "b"] and doc["stop_reason"] == "tool_use"
    single = {"type": "auto", "disable_parallel_tool_use": True}
    _, doc = post(svc, "/v1/messages", {**base, "tool_choice": single})
    assert [b["name"] for b in doc["content"]] == ["a"]
    _, doc = post(svc, "/v1/messages", {**base, "tool_choice": {"type": "tool", "name": "c"}})
    assert [b["name"] for b in doc["content"]] == ["c"]
    _, doc = post(svc, "/v1/messages", {**base, "tool_choice": {"type": "none"}})
    assert doc["content"][0]["type"] == "text" and doc["stop_reason"] == "end_turn"
    answered = [*user(), {"role": "user", "content": [_result("1"), _result("2"), _result("3")]}]
    _, doc = post(
        svc, "/v1/messages", {**base, "messages": answered, "tool_choice": {"type": "any"}}
    )
    assert doc["content"][0]["type"] == "tool_use"  # any: a tool again, never an answer
    plan, err = post(svc, "/v1/messages", {**base, "tool_choice": {"type": "tool", "name": "x"}})
    assert plan.status == 400 and err["error"]["type"] == "invalid_request_error"


def test_anthropic_stream_opens_each_tool_block_with_its_first_token() -> None:
    svc = service(parallel_tool_calls=2)
    tools = [{"name": n, "input_schema": {"type": "object"}} for n in ("a", "b")]
    body = {"model": "m", "max_tokens": 100, "messages": user(), "tools": tools, "stream": True}
    plan = svc.handle("POST", "/v1/messages", {}, orjson.dumps(body))
    assert plan.frames is not None
    head = b"".join(plan.frames.head)
    assert b"content_block_start" not in head  # a tool's name is output: not before a token
    events = [orjson.loads(line[6:]) for line in _lines(plan) if line.startswith(b"data: ")]
    order = [(e["type"], e.get("index")) for e in events if "content_block" in e["type"]]
    starts_and_stops = [o for o in order if o[0] != "content_block_delta"]
    assert starts_and_stops == [
        ("content_block_start", 0),
        ("content_block_stop", 0),
        ("content_block_start", 1),
        ("content_block_stop", 1),
    ]


def _result(tool_id: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": "ok"}


# --- count_tokens, unknown routes ---


def test_count_tokens_counts_what_a_message_would_be_charged() -> None:
    svc = service()
    body = {"model": "m", "messages": user("x" * 400)}
    plan, doc = post(svc, "/v1/messages/count_tokens", body)
    _, message = post(svc, "/v1/messages", {**body, "max_tokens": 10})
    assert plan.status == 200 and doc == {"input_tokens": 100}
    assert message["usage"]["input_tokens"] == 100
    plan, err = post(svc, "/v1/messages/count_tokens", {"model": "m"})
    assert plan.status == 400 and err["type"] == "error"


def test_an_unknown_route_is_a_route_error_not_an_unknown_model() -> None:
    svc = service()
    openai_404 = svc.handle("POST", "/v1/completionz", {}, b"{}")
    doc = orjson.loads(openai_404.body)["error"]
    assert openai_404.status == 404
    assert doc == {
        "message": "Invalid URL (POST /v1/completionz)",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }
    anthropic_404 = svc.handle("POST", "/v1/messages/batchez", {}, b"{}")
    assert anthropic_404.status == 404
    assert orjson.loads(anthropic_404.body)["error"]["type"] == "not_found_error"
    for i in range(50):  # any path a client sends: one counter for all the unknown ones
        svc.handle("GET", f"/probe/{i}", {}, b"")
    assert svc.stats.by_path["(other)"] == 52


# --- the Responses API ---


def responses_tools(*tools: str) -> list[dict[str, Any]]:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    return [{"type": "function", "name": n, "parameters": schema} for n in tools]


def test_responses_function_call_then_answer_with_usage() -> None:
    svc = service()
    body: dict[str, Any] = {"model": "m", "input": "find it", "tools": responses_tools("search")}
    plan, doc = post(svc, "/v1/responses", body)
    assert plan.status == 200 and doc["object"] == "response" and doc["status"] == "completed"
    [call] = doc["output"]
    assert call["type"] == "function_call" and call["name"] == "search"
    assert orjson.loads(call["arguments"]) == {"q": "q-1"} and call["call_id"].startswith("call_")
    follow = [
        {"role": "user", "content": "find it"},
        call,
        {"type": "function_call_output", "call_id": call["call_id"], "output": "found"},
    ]
    _, doc = post(svc, "/v1/responses", {**body, "input": follow})
    [message] = doc["output"]
    assert message["type"] == "message" and message["content"][0]["type"] == "output_text"
    usage = doc["usage"]
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"] > 0


def test_responses_previous_response_id_continues_the_conversation() -> None:
    svc = service()
    body: dict[str, Any] = {"model": "m", "input": "find it", "tools": responses_tools("search")}
    _, first = post(svc, "/v1/responses", body)
    result = {"type": "function_call_output", "call_id": "x", "output": "found"}
    _, second = post(
        svc, "/v1/responses", {**body, "previous_response_id": first["id"], "input": [result]}
    )
    assert second["output"][0]["type"] == "message"  # the one result counted: an answer
    held = first["usage"]["total_tokens"]
    assert second["usage"]["input_tokens"] > held  # the earlier context is still billed
    plan, err = post(svc, "/v1/responses", {**body, "previous_response_id": "resp_nope"})
    assert plan.status == 400 and err["error"]["code"] == "previous_response_not_found"
    _, unstored = post(svc, "/v1/responses", {**body, "store": False})
    plan, _ = post(svc, "/v1/responses", {**body, "previous_response_id": unstored["id"]})
    assert plan.status == 400


def test_responses_max_output_tokens_is_an_incomplete_response() -> None:
    _, doc = post(service(), "/v1/responses", {"model": "m", "input": "hi", "max_output_tokens": 3})
    assert doc["status"] == "incomplete"
    assert doc["incomplete_details"] == {"reason": "max_output_tokens"}
    assert doc["usage"]["output_tokens"] == 3


def test_responses_stream_events_are_numbered_in_order_and_rebuild_the_output() -> None:
    svc = service(parallel_tool_calls=2)
    body = {"model": "m", "input": "hi", "tools": responses_tools("a", "b"), "stream": True}
    plan = svc.handle("POST", "/v1/responses", {}, orjson.dumps(body))
    assert plan.frames is not None
    events = _events(plan)
    assert [e["sequence_number"] for _, e in events] == list(range(len(events)))
    assert all(name == e["type"] for name, e in events)
    kinds = [name for name, _ in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    arguments: dict[int, str] = {}
    for name, e in events:
        if name == "response.function_call_arguments.delta":
            arguments[e["output_index"]] = arguments.get(e["output_index"], "") + e["delta"]
    final = events[-1][1]["response"]["output"]
    assert [o["name"] for o in final] == ["a", "b"]
    assert [arguments[0], arguments[1]] == [o["arguments"] for o in final]
    added = [e["item"]["name"] for n, e in events if n == "response.output_item.added"]
    assert added == ["a", "b"]
    # No item naming a tool leaves with the headers: the model had produced nothing yet.
    assert b"output_item.added" not in b"".join(plan.frames.head)


def test_responses_text_stream_has_one_delta_per_token() -> None:
    svc = service()
    plan = svc.handle("POST", "/v1/responses", {}, orjson.dumps({"input": "hi", "stream": True}))
    assert plan.frames is not None
    events = _events(plan)
    deltas = [e["delta"] for n, e in events if n == "response.output_text.delta"]
    done = next(e for n, e in events if n == "response.output_text.done")
    usage = events[-1][1]["response"]["usage"]
    assert len(deltas) == len(plan.frames.tokens) == usage["output_tokens"] == 20
    assert "".join(deltas) == done["text"]


def _lines(plan: SendPlan) -> list[bytes]:
    assert plan.frames is not None
    raw = b"".join([*plan.frames.head, *plan.frames.tokens, *plan.frames.tail])
    return [line for line in raw.split(b"\n") if line.startswith(b"data: ")]


def _events(plan: SendPlan) -> list[tuple[str, dict[str, Any]]]:
    assert plan.frames is not None
    raw = b"".join([*plan.frames.head, *plan.frames.tokens, *plan.frames.tail])
    out = []
    for block in raw.split(b"\n\n"):
        if not block:
            continue
        name, data = block.split(b"\n")
        assert name.startswith(b"event: ") and data.startswith(b"data: ")
        out.append((name[7:].decode(), orjson.loads(data[6:])))
    return out
