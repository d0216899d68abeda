"""Prompt files (JSONL, CSV, text) and ShareGPT conversations as cases: fields read, filters,
seeded sampling, and every problem located in the file it is in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfbench.errors import CaseError, Problem
from perfbench.sources.tokenizer import Tokenizer
from perfbench.suite import Suite, load_suite

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sources"
SHAREGPT = FIXTURES / "sharegpt.json"
TURNS = FIXTURES / "sharegpt_turns.json"  # multi-turn conversations
JSONL = FIXTURES / "prompts.jsonl"
CSV = FIXTURES / "prompts.csv"


def workload(folder: Path, kind: str, settings: dict[str, object]) -> Path:
    """A case file holding only a source block (JSON is YAML)."""
    path = folder / f"{kind}.yaml"
    path.write_text(json.dumps({"source": {kind: settings}}, ensure_ascii=False), "utf-8")
    return path


def load(folder: Path, kind: str, **settings: object) -> Suite:
    return load_suite([workload(folder, kind, settings)])


def problem(folder: Path, kind: str, **settings: object) -> Problem:
    with pytest.raises(CaseError) as info:
        load(folder, kind, **settings)
    (only,) = info.value.problems
    return only


# --- JSONL, CSV, text --------------------------------------------------------------------------


def test_a_jsonl_file_gives_a_case_per_line(tmp_path: Path) -> None:
    suite = load(tmp_path, "prompts", path=str(JSONL))
    cases = {c.id: c for c in suite.cases}
    assert list(cases) == [f"prompt-000{i}" for i in range(1, 7)]  # the blank line is skipped
    first, zh, ja, bare, es, extra = cases.values()
    assert (first.input, first.output_tokens, first.max_tokens, first.name) == (
        "Summarise the benefits of unit tests in one paragraph.",
        64,
        64,
        "p1",
    )
    assert (zh.input, zh.language, zh.output_tokens) == ("用一句话解释什么是机器学习。", "zh", None)
    assert (ja.language, ja.max_tokens, ja.output_tokens) == ("ja", 40, None)
    assert bare.input.startswith("A bare JSON string")
    assert (es.language, es.output_tokens) == ("es", 16)  # given, not detected
    assert extra.output_tokens == 48  # fields a workload does not use are left alone
    assert suite.sources["prompt-0005"] == f"{JSONL}:6"


def test_a_csv_file_gives_a_case_per_row(tmp_path: Path) -> None:
    suite = load(tmp_path, "prompts", path=str(CSV))
    first, fr, two_lines = suite.cases
    assert (first.name, first.output_tokens) == ("c1", 32)
    assert (fr.input, fr.output_tokens) == ("Écris une phrase sur la pluie.", None)
    assert two_lines.input == "A prompt over\ntwo lines, quoted as CSV allows."
    assert suite.sources[two_lines.id] == f"{CSV}:5"  # a row's last line


def test_output_asks_one_length_of_every_prompt(tmp_path: Path) -> None:
    suite = load(tmp_path, "prompts", path=str(CSV), output=20)
    assert {(c.output_tokens, c.max_tokens) for c in suite.cases} == {(20, 20)}


def test_a_text_file_gives_a_case_per_line(tmp_path: Path) -> None:
    data = tmp_path / "lines.txt"
    data.write_text("first prompt\n\n第二个提示\r\nthird\n", "utf-8")
    suite = load(tmp_path, "prompts", path="lines.txt")  # relative to the case file
    assert [c.input for c in suite.cases] == ["first prompt", "第二个提示", "third"]
    assert [c.language for c in suite.cases] == ["en", "zh", "en"]


def test_length_filters_count_tokens_in_the_tokenizer_named(tmp_path: Path) -> None:
    tok = Tokenizer("cl100k_base")
    counts = {c.input: tok.count(c.input) for c in load(tmp_path, "prompts", path=str(JSONL)).cases}
    kept = load(
        tmp_path, "prompts", path=str(JSONL), min_input=10, max_input=14, tokenizer="cl100k_base"
    ).cases
    assert [c.input for c in kept] == [t for t, n in counts.items() if 10 <= n <= 14]
    assert 0 < len(kept) < len(counts)


def test_n_samples_by_seed_and_keeps_file_order(tmp_path: Path) -> None:
    def picked(seed: int) -> list[str]:
        suite = load(tmp_path, "prompts", path=str(JSONL), n=3, seed=seed)
        return [c.name or c.input[:12] for c in suite.cases]

    assert picked(1) == picked(1)
    assert len({tuple(picked(s)) for s in range(8)}) > 1
    order = [c.input for c in load(tmp_path, "prompts", path=str(JSONL)).cases]
    taken = [c.input for c in load(tmp_path, "prompts", path=str(JSONL), n=3, seed=5).cases]
    assert taken == sorted(taken, key=order.index)


def test_the_digest_covers_the_prompts(tmp_path: Path) -> None:
    one = load(tmp_path, "prompts", path=str(JSONL), n=3, seed=1)
    assert load(tmp_path, "prompts", path=str(JSONL), n=3, seed=1).digest == one.digest
    seeds = [
        s
        for s in range(2, 10)
        if [c.input for c in load(tmp_path, "prompts", path=str(JSONL), n=3, seed=s).cases]
        != [c.input for c in one.cases]
    ]
    assert load(tmp_path, "prompts", path=str(JSONL), n=3, seed=seeds[0]).digest != one.digest


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ('{"prompt": "ok"}\n{"prompt": "cut\n', 2, "is not JSON: Unterminated string"),
        ('{"prompt": "ok"}\n\n[1, 2]\n', 3, "expected an object with a prompt field"),
        ('{"question": "where is the prompt?"}\n', 1, "has none of the fields 'prompt'"),
        ('{"prompt": "  "}\n', 1, "prompt must be non-empty text"),
        ('{"prompt": 42}\n', 1, "prompt must be non-empty text"),
        ('{"prompt": "a"}\n{"prompt": "b", "output_tokens": 0}\n', 2, "output_tokens must be"),
        ('{"prompt": "a", "max_tokens": "lots"}\n', 1, "max_tokens must be a whole number"),
        ('{"prompt": "a", "language": 7}\n', 1, "language must be text"),
    ],
)
def test_a_malformed_jsonl_line_names_file_and_line(
    tmp_path: Path, text: str, line: int, message: str
) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text(text, "utf-8")
    found = problem(tmp_path, "prompts", path="data.jsonl")
    assert (found.file, found.line) == (data, line)
    assert message in found.message
    assert str(found).startswith(f"{data}:{line}:")


def test_a_bad_csv_names_file_and_line(tmp_path: Path) -> None:
    data = tmp_path / "data.csv"
    data.write_text("prompt,output_tokens\nfine,3\n,4\n", "utf-8")
    found = problem(tmp_path, "prompts", path="data.csv")
    assert (found.file, found.line, found.message) == (data, 3, "prompt must be non-empty text")
    data.write_text("question\nno prompt column\n", "utf-8")
    no_column = problem(tmp_path, "prompts", path="data.csv")
    assert "names no prompt or text or input column" in no_column.message


def test_a_file_that_is_not_utf8_names_its_line(tmp_path: Path) -> None:
    (tmp_path / "latin1.txt").write_bytes("one\ntwo\ncaf\xe9\n".encode("latin-1"))
    found = problem(tmp_path, "prompts", path="latin1.txt")
    assert (found.line, found.message) == (3, "is not UTF-8 text; save it as UTF-8")


def test_a_bad_setting_is_located_in_the_case_file(tmp_path: Path) -> None:
    found = problem(tmp_path, "prompts", path="missing.jsonl")
    assert (found.file.name, found.line, found.field) == ("prompts.yaml", 1, "source.prompts.path")
    assert found.message == f"no such file: {tmp_path / 'missing.jsonl'}"
    (tmp_path / "data.json").write_text("[]", "utf-8")
    unknown = problem(tmp_path, "prompts", path="data.json")
    assert "cannot tell the format of data.json" in unknown.message
    found = problem(tmp_path, "prompts", path=str(JSONL), n=50)
    assert found.field == "source.prompts.n"
    fewer = "asks for 50 prompts, but the file has fewer: 6 of its 6 entries pass the filters"
    assert found.message == fewer
    typo = problem(tmp_path, "prompts", path=str(JSONL), max_inputs=3)
    assert "did you mean 'max_input'" in typo.message


# --- ShareGPT ----------------------------------------------------------------------------------


def test_sharegpt_takes_the_first_human_turn_and_the_reply_length(tmp_path: Path) -> None:
    suite = load(tmp_path, "sharegpt", path=str(SHAREGPT))
    conversations = json.loads(SHAREGPT.read_text("utf-8"))
    # Skipped as vLLM skips them: no turns, no human turn, an empty human turn.
    assert [c.name for c in suite.cases] == [
        e["id"] for e in conversations if e["id"] not in ("sg_a6", "sg_a8", "sg_a12")
    ]
    tok = Tokenizer()
    by_name = {c.name: c for c in suite.cases}
    great_wall = by_name["sg_a2"]
    assert great_wall.input == "请用三句话介绍一下长城的历史。"
    reply = conversations[1]["conversations"][1]["value"]
    assert great_wall.output_tokens == great_wall.max_tokens == tok.count(reply)
    assert by_name["sg_a5"].input == "Write a haiku about the sea 🌊."  # after a system turn
    assert {by_name[k].language for k in ("sg_a2", "sg_a3", "sg_a13")} == {"zh", "ja", "ko"}
    assert suite.cases[0].id == "sg-0001"


def test_sharegpt_filters_and_samples(tmp_path: Path) -> None:
    tok = Tokenizer()
    short = load(tmp_path, "sharegpt", path=str(SHAREGPT), max_input=12, max_output=20)
    assert short.cases and all(tok.count(c.input or "") <= 12 for c in short.cases)
    assert all((c.output_tokens or 0) <= 20 for c in short.cases)
    everything = load(tmp_path, "sharegpt", path=str(SHAREGPT)).cases
    long = load(tmp_path, "sharegpt", path=str(SHAREGPT), min_output=40).cases
    assert [c.name for c in long] == [c.name for c in everything if (c.output_tokens or 0) >= 40]
    assert 0 < len(long) < len(everything)
    a = load(tmp_path, "sharegpt", path=str(SHAREGPT), n=4, seed=11)
    b = load(tmp_path, "sharegpt", path=str(SHAREGPT), n=4, seed=11, id_prefix="chat")
    assert [c.name for c in a.cases] == [c.name for c in b.cases] and len(a.cases) == 4
    assert [c.id for c in b.cases] == ["chat-0001", "chat-0002", "chat-0003", "chat-0004"]
    fixed = load(tmp_path, "sharegpt", path=str(SHAREGPT), output=100, n=2)
    assert {c.output_tokens for c in fixed.cases} == {100}


def test_sharegpt_jsonl_and_its_problems_are_located(tmp_path: Path) -> None:
    good = {
        "id": "x",
        "conversations": [
            {"from": "human", "value": "hi"},
            {"from": "gpt", "value": "hello there"},
        ],
    }
    bad = {"id": "y", "conversations": [{"from": "human", "value": "hi"}, {"from": "gpt"}]}
    data = tmp_path / "sg.jsonl"
    data.write_text(json.dumps(good) + "\n" + json.dumps(good) + "\n", "utf-8")
    assert len(load(tmp_path, "sharegpt", path="sg.jsonl").cases) == 2
    data.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n", "utf-8")
    found = problem(tmp_path, "sharegpt", path="sg.jsonl")
    assert (found.file, found.line) == (data, 2)
    assert found.message.startswith("[1].conversations[1]: expected a turn")


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ('{"id": 1}', 1, "expected a JSON list of conversations"),
        ('[\n  {"id": 1,\n   "conversations": [}\n]', 3, "is not JSON"),
        ('[{"id": 1, "conversations": {"from": "human"}}]', None, "[0].conversations: expected"),
        ('[{"id": 1, "conversations": []}, "text"]', None, "[1]: expected a conversation"),
    ],
)
def test_a_malformed_sharegpt_file_says_where(
    tmp_path: Path, text: str, line: int | None, message: str
) -> None:
    (tmp_path / "sg.json").write_text(text, "utf-8")
    found = problem(tmp_path, "sharegpt", path="sg.json")
    assert (found.file, found.line) == (tmp_path / "sg.json", line)
    assert message in found.message


def _human_turns(name: str) -> list[str]:
    (entry,) = [e for e in json.loads(TURNS.read_text("utf-8")) if e["id"] == name]
    return [t["value"] for t in entry["conversations"] if t["from"] == "human"]


def _replies(name: str) -> list[int]:
    (entry,) = [e for e in json.loads(TURNS.read_text("utf-8")) if e["id"] == name]
    return [Tokenizer().count(t["value"]) for t in entry["conversations"] if t["from"] == "gpt"]


def test_sharegpt_all_turns_make_a_multi_turn_case(tmp_path: Path) -> None:
    suite = load(tmp_path, "sharegpt", path=str(TURNS), turns="all")
    by_name = {c.name: c for c in suite.cases}
    # No human turn: skipped, as turns: first skips it.
    assert list(by_name) == ["mt_three", "mt_unanswered", "mt_empty_first", "mt_zh"]
    three = by_name["mt_three"]
    assert three.input is None and three.turns == _human_turns("mt_three")  # in order
    assert len(three.turns) == 3
    replies = _replies("mt_three")  # 36, 13 and 14 tokens: their mean is asked of each turn
    assert three.output_tokens == three.max_tokens == round(sum(replies) / 3) == 21
    # The last turn, unanswered in the file, is sent too; only the recorded reply counts.
    unanswered = by_name["mt_unanswered"]
    assert unanswered.turns == ["Name a prime number.", "Another one, please."]
    assert unanswered.output_tokens == _replies("mt_unanswered")[0]
    assert by_name["mt_empty_first"].turns == ["Sorry: what is 2 + 2?"]  # no empty turn
    assert by_name["mt_zh"].language == "zh"
    assert all(c.id.startswith("sg-") for c in suite.cases)


def test_sharegpt_first_is_the_default_and_unchanged(tmp_path: Path) -> None:
    default = load(tmp_path, "sharegpt", path=str(TURNS))
    first = load(tmp_path, "sharegpt", path=str(TURNS), turns="first")
    assert default.digest == first.digest and default.cases == first.cases
    three = {c.name: c for c in first.cases}["mt_three"]
    assert (three.input, three.turns) == ("Plan a day in Lisbon for me.", None)
    assert three.output_tokens == _replies("mt_three")[0]
    old = load(tmp_path, "sharegpt", path=str(SHAREGPT), turns="first")
    assert old.digest == load(tmp_path, "sharegpt", path=str(SHAREGPT)).digest
    # The digest covers the turns: another workload, another digest.
    assert load(tmp_path, "sharegpt", path=str(TURNS), turns="all").digest != first.digest


def test_sharegpt_max_turns_caps_the_conversation(tmp_path: Path) -> None:
    two = load(tmp_path, "sharegpt", path=str(TURNS), turns="all", max_turns=2)
    three = {c.name: c for c in two.cases}["mt_three"]
    assert three.turns == _human_turns("mt_three")[:2]
    assert three.output_tokens == 25  # the mean of the two replies taken, 36 and 13, half up
    assert all(len(c.turns or []) <= 2 for c in two.cases)
    one = load(tmp_path, "sharegpt", path=str(TURNS), turns="all", max_turns=1)
    assert {len(c.turns or []) for c in one.cases} == {1}
    found = problem(tmp_path, "sharegpt", path=str(TURNS), max_turns=2)
    assert "max_turns needs turns: all" in found.message
    assert "turns" in problem(tmp_path, "sharegpt", path=str(TURNS), turns="every").field


def test_sharegpt_filters_bound_a_conversation(tmp_path: Path) -> None:
    # Input: the human turns sent, together (mt_three's first turn is 8 tokens, all 20).
    first = load(tmp_path, "sharegpt", path=str(TURNS), max_input=10)
    every = load(tmp_path, "sharegpt", path=str(TURNS), max_input=10, turns="all")
    assert "mt_three" in {c.name for c in first.cases}
    assert [c.name for c in every.cases] == ["mt_unanswered", "mt_empty_first"]
    # Output: the length asked of each turn (mt_three's mean is 21).
    long = load(tmp_path, "sharegpt", path=str(TURNS), min_output=20, turns="all")
    assert [(c.name, c.output_tokens) for c in long.cases] == [("mt_three", 21)]
    fixed = load(tmp_path, "sharegpt", path=str(TURNS), output=7, turns="all")
    assert {c.output_tokens for c in fixed.cases} == {7}


def test_sharegpt_all_turns_is_seeded(tmp_path: Path) -> None:
    a = load(tmp_path, "sharegpt", path=str(TURNS), turns="all", n=2, seed=5)
    b = load(tmp_path, "sharegpt", path=str(TURNS), turns="all", n=2, seed=5)
    assert a.digest == b.digest and len(a.cases) == 2


def test_a_malformed_later_turn_is_located_with_all_turns(tmp_path: Path) -> None:
    talk = [
        {"from": "human", "value": "hi"},
        {"from": "gpt", "value": "hello"},
        {"from": "human", "value": "and?"},
        {"from": "gpt", "value": 3},
    ]
    good = {"id": "x", "conversations": talk[:2]}
    data = tmp_path / "sg.jsonl"
    data.write_text(json.dumps(good) + "\n" + json.dumps({"conversations": talk}) + "\n")
    # turns: first reads only the first exchange, which is good.
    assert len(load(tmp_path, "sharegpt", path="sg.jsonl").cases) == 2
    found = problem(tmp_path, "sharegpt", path="sg.jsonl", turns="all")
    assert (found.file, found.line) == (data, 2)
    assert found.message.startswith("[1].conversations[3]: expected a turn")
    (tmp_path / "sg.json").write_text(json.dumps([{"conversations": talk}]))
    found = problem(tmp_path, "sharegpt", path="sg.json", turns="all")
    assert (found.file, found.line) == (tmp_path / "sg.json", None)
    assert found.message.startswith("[0].conversations[3]: expected a turn")


def test_cases_and_a_source_in_one_file(tmp_path: Path) -> None:
    path = tmp_path / "mixed.yaml"
    path.write_text(
        f"cases:\n  - id: hand\n    input: hello\nsource:\n  prompts: {{path: {JSONL}, n: 2}}\n",
        "utf-8",
    )
    suite = load_suite([path])
    assert [c.id for c in suite.cases] == ["hand", "prompt-0001", "prompt-0002"]


def test_two_sources_with_the_same_ids_are_duplicates(tmp_path: Path) -> None:
    workload(tmp_path, "prompts", {"path": str(JSONL)})
    workload(tmp_path, "sharegpt", {"path": str(SHAREGPT), "id_prefix": "prompt"})
    with pytest.raises(CaseError, match="duplicate case id 'prompt-0001'"):
        load_suite([tmp_path])


# --- the output_tokens case field ----------------------------------------------------------


def test_output_tokens_sets_max_tokens_and_leaves_old_digests_alone(tmp_path: Path) -> None:
    plain = tmp_path / "plain.yaml"
    plain.write_text("cases:\n  - id: a\n    input: hi\n", "utf-8")
    asked = tmp_path / "asked.yaml"
    asked.write_text("defaults: {output_tokens: 64}\ncases:\n  - id: a\n    input: hi\n", "utf-8")
    case = load_suite([asked]).cases[0]
    assert (case.output_tokens, case.max_tokens) == (64, 64)
    assert load_suite([plain]).digest != load_suite([asked]).digest
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text("cases:\n  - id: a\n    input: hi\n    max_tokens: 8\n    output_tokens: 9\n")
    with pytest.raises(CaseError, match=r"max_tokens \(8\) is below output_tokens \(9\)"):
        load_suite([wrong])
