"""The case-suite loader: every mistake is located (file, line, field) and good suites load.

Line numbers in the expectations are counted in the YAML each test writes. Every triple-quoted
YAML text opens with a backslash-newline, so the line after the opening quotes is line 1.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from perfbench.cli import app
from perfbench.errors import CaseError, Problem, SuiteError
from perfbench.suite import Case, Suite, Tool, detect_language, load_suite

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "cases"


# --- helpers ---------------------------------------------------------------------------------


def write(folder: Path, text: str, name: str = "suite.yaml") -> Path:
    """Write dedented YAML to ``folder/name`` (creating subfolders) and return the path."""
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def problems_of(paths: list[Path]) -> list[Problem]:
    with pytest.raises(CaseError) as info:
        load_suite(paths)
    assert info.value.problems, "a CaseError must carry at least one problem"
    return info.value.problems


def only_problem(path: Path) -> Problem:
    problems = problems_of([path])
    assert len(problems) == 1, problems
    return problems[0]


def load_one(folder: Path, text: str) -> Suite:
    return load_suite([write(folder, text)])


def case_by_id(suite: Suite, case_id: str) -> Case:
    return next(c for c in suite.cases if c.id == case_id)


# --- bad case files: one located problem each --------------------------------------------------


@dataclass(frozen=True)
class Bad:
    yaml: str
    line: int | None
    field: str
    fragment: str


BAD_FILES = {
    "yaml-syntax-colon-in-plain-scalar": Bad(
        """\
        cases:
          - id: a
            input: where: now
        """,
        3,
        "",
        "invalid YAML: mapping values are not allowed here",
    ),
    "yaml-syntax-tab-indent": Bad(
        "cases:\n  - id: a\n\tinput: hi\n",
        3,
        "",
        "invalid YAML: found character '\\t' that cannot start any token",
    ),
    "duplicate-key-in-case": Bad(
        """\
        cases:
          - id: a
            input: first
            max_steps: 3
            input: second
        """,
        5,
        "cases[0].input",
        "appears twice",
    ),
    "duplicate-key-top-level": Bad(
        """\
        cases:
          - id: a
            input: hi
        cases:
          - id: b
            input: hi
        """,
        4,
        "cases",
        "appears twice",
    ),
    "unknown-case-field-suggests-timeout_s": Bad(
        """\
        cases:
          - id: a
            input: hi
            timeout: 5
        """,
        4,
        "cases[0].timeout",
        "unknown field 'timeout'; did you mean 'timeout_s'?",
    ),
    "unknown-tool-field-suggests-latency_ms": Bad(
        """\
        cases:
          - id: a
            input: hi
            tools:
              - name: lookup
                latency: 20
        """,
        6,
        "cases[0].tools[0].latency",
        "unknown field 'latency'; did you mean 'latency_ms'?",
    ),
    "unknown-defaults-field-suggests-timeout_s": Bad(
        """\
        defaults:
          timout_s: 5
        cases:
          - id: a
            input: hi
        """,
        2,
        "defaults.timout_s",
        "unknown field 'timout_s'; did you mean 'timeout_s'?",
    ),
    "unknown-field-far-from-any-lists-the-known-ones": Bad(
        """\
        cases:
          - id: a
            input: hi
            colour: red
        """,
        4,
        "cases[0].colour",
        "unknown field 'colour'; expected one of: id, name, language,",
    ),
    "missing-id": Bad(
        """\
        cases:
          - id: a
            input: hi
          - name: no id here
            input: hi
        """,
        4,
        "cases[1].id",
        "is required but missing",
    ),
    "wrong-type-max_steps": Bad(
        """\
        cases:
          - id: a
            input: hi
            max_steps: many
        """,
        4,
        "cases[0].max_steps",
        "valid integer, unable to parse string as an integer (got 'many')",
    ),
    "negative-tool-latency": Bad(
        """\
        cases:
          - id: a
            input: hi
          - id: b
            input: hi
            tools:
              - name: fast
                latency_ms: 5
              - name: slow
                description: goes back in time
                latency_ms: -5
        """,
        11,
        "cases[1].tools[1].latency_ms",
        "greater than or equal to 0 (got -5)",
    ),
    "empty-suite": Bad(
        """\
        # nothing to run yet
        cases: []
        """,
        2,
        "cases",
        "should have at least 1 item",
    ),
    "cases-is-not-a-list": Bad(
        """\
        cases:
          id: a
          input: hi
        """,
        1,
        "cases",
        "valid list",
    ),
    "case-is-not-a-mapping": Bad(
        """\
        cases:
          - id: a
            input: hi
          - just a sentence
        """,
        4,
        "cases[1]",
        "valid dictionary (got 'just a sentence')",
    ),
    "undeclared-tool-in-expect": Bad(
        """\
        cases:
          - id: a
            input: hi
            tools:
              - name: search
              - name: reserve
            expect:
              tool_calls:
                - search
                - book
                - reserve
        """,
        10,
        "cases[0].expect.tool_calls[1]",
        "tool 'book' is not declared in this case's tools (declared: reserve, search)",
    ),
    "expect-tool-with-no-tools-declared": Bad(
        """\
        cases:
          - id: a
            input: hi
            expect: {tool_calls: [search]}
        """,
        4,
        "cases[0].expect.tool_calls[0]",
        "(declared: none)",
    ),
    "both-input-and-messages": Bad(
        """\
        cases:
          - id: a
            input: hi
          - id: b
            input: hi
            messages:
              - {role: user, content: hi}
        """,
        4,
        "cases[1]",
        "give exactly one of 'input', 'messages' or 'turns'",
    ),
    "neither-input-nor-messages": Bad(
        """\
        cases:
          - id: a
            name: forgot the prompt
        """,
        2,
        "cases[0]",
        "give exactly one of 'input', 'messages' or 'turns'",
    ),
    "bad-message-role": Bad(
        """\
        cases:
          - id: a
            messages:
              - role: user
                content: hi
              - role: robot
                content: hello
        """,
        6,
        "cases[0].messages[1].role",
        "'system', 'user' or 'assistant'",
    ),
    "tool-parameters-not-an-object-schema": Bad(
        """\
        cases:
          - id: a
            input: hi
            tools:
              - name: search
                parameters:
                  type: array
                  items: {type: string}
        """,
        6,
        "cases[0].tools[0].parameters",
        "must be a JSON schema with type: object",
    ),
    "duplicate-tool-names": Bad(
        """\
        cases:
          - id: a
            input: hi
            tools:
              - name: search
              - name: search
        """,
        2,
        "cases[0]",
        "tool names must be unique in a case; repeated: search",
    ),
    "invalid-language-tag": Bad(
        """\
        cases:
          - id: a
            input: hi
            language: English
        """,
        4,
        "cases[0].language",
        "should match pattern '^$|^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$' (got 'English')",
    ),
    "invalid-case-id": Bad(
        """\
        cases:
          - id: has spaces
            input: hi
        """,
        2,
        "cases[0].id",
        "should match pattern",
    ),
    "top-level-list": Bad(
        """\
        # a list of cases without the 'cases:' key
        - id: a
          input: hi
        """,
        2,
        "",
        "expected a mapping with 'cases:' at the top",
    ),
    "empty-file": Bad("", None, "", "file is empty; expected a mapping with 'cases:'"),
    "comments-only-file": Bad(
        "# cases will come here\n", None, "", "file is empty; expected a mapping with 'cases:'"
    ),
}


@pytest.mark.parametrize("bad", BAD_FILES.values(), ids=BAD_FILES.keys())
def test_bad_case_file_is_located(tmp_path: Path, bad: Bad) -> None:
    path = write(tmp_path, bad.yaml)
    problem = only_problem(path)
    assert problem.file == path
    assert problem.line == bad.line
    assert problem.field == bad.field
    assert bad.fragment in problem.message


def test_problem_str_names_file_line_and_field(tmp_path: Path) -> None:
    path = write(tmp_path, BAD_FILES["wrong-type-max_steps"].yaml)
    with pytest.raises(CaseError) as info:
        load_suite([path])
    assert str(info.value).startswith(f"{path}:4: cases[0].max_steps: input should be")


def test_file_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes("cases:\n  - id: a\n    input: café\n".encode("latin-1"))
    problem = only_problem(path)
    assert (problem.file, problem.line, problem.field) == (path, 3, "")  # the bad byte's line
    assert "is not UTF-8 text" in problem.message


def test_duplicate_ids_across_files_name_the_first_location(tmp_path: Path) -> None:
    first = write(
        tmp_path,
        """\
        cases:
          - id: refund
            input: How do refunds work?
        """,
        "a.yaml",
    )
    second = write(
        tmp_path,
        """\
        cases:
          - id: other
            input: hi
          - id: refund
            input: Refund please
        """,
        "b.yaml",
    )
    problem = only_problem(tmp_path)
    assert (problem.file, problem.line, problem.field) == (second, 4, "id")
    assert f"duplicate case id 'refund' (first defined at {first}:2)" in problem.message


def test_duplicate_ids_in_one_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        cases:
          - id: same
            input: one
          - id: same
            input: two
        """,
    )
    problem = only_problem(path)
    assert (problem.file, problem.line, problem.field) == (path, 4, "id")
    assert f"first defined at {path}:2" in problem.message


def test_folder_without_yaml_files(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("cases: []\n", encoding="utf-8")
    (tmp_path / "sub").mkdir()
    with pytest.raises(SuiteError) as info:
        load_suite([tmp_path])
    [problem] = info.value.problems
    assert (problem.file, problem.line, problem.field) == (tmp_path, None, "")
    assert "folder holds no .yaml/.yml case files" in problem.message


def test_path_that_does_not_exist(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(SuiteError) as info:
        load_suite([missing])
    [problem] = info.value.problems
    assert (problem.file, problem.line, problem.field) == (missing, None, "")
    assert "no such file or folder" in problem.message


def test_every_problem_in_every_file_is_reported(tmp_path: Path) -> None:
    write(
        tmp_path,
        """\
        cases:
          - id: a
            input: hi
            max_steps: many
          - id: b
            input: hi
            temperature: 9
        """,
        "a.yaml",
    )
    write(tmp_path, "cases: []\n", "b.yaml")
    write(tmp_path, "cases:\n  - id: c\n    input: hi\n", "c.yaml")
    got = [(p.file.name, p.line, p.field) for p in problems_of([tmp_path])]
    assert got == [
        ("a.yaml", 4, "cases[0].max_steps"),
        ("a.yaml", 7, "cases[1].temperature"),
        ("b.yaml", 1, "cases"),
    ]


def test_several_undeclared_tools_are_each_located(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        cases:
          - id: a
            input: hi
            expect:
              tool_calls:
                - one
                - two
        """,
    )
    got = [(p.line, p.field) for p in problems_of([path])]
    assert got == [(6, "cases[0].expect.tool_calls[0]"), (7, "cases[0].expect.tool_calls[1]")]


# --- harder bad-input cases ----------------------------------------------------------------


def test_unterminated_quote_points_at_where_the_string_opens(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        cases:
          - id: a
            input: "where is my order?
          - id: b
            input: fine
          - id: c
            input: also fine
        """,
    )
    problem = only_problem(path)
    assert problem.line == 3
    assert "invalid YAML" in problem.message


def test_unknown_yaml_tag_is_a_located_problem(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        cases:
          - id: a
            input: !env PROMPT
        """,
    )
    problem = only_problem(path)
    assert (problem.line, problem.field) == (3, "cases[0].input")
    assert "!env" in problem.message


def test_yaml_merge_key_is_supported(tmp_path: Path) -> None:
    suite = load_one(
        tmp_path,
        """\
        x-shared: &shared
          input: hi
        cases:
          - id: a
            <<: *shared
        """,
    )
    assert case_by_id(suite, "a").input == "hi"


@pytest.mark.parametrize(
    ("line", "field"),
    [(2, "defaults.max_steps"), (5, "defaults.tools[0].latency_ms")],
    ids=["max_steps", "tool-latency"],
)
def test_bad_default_is_located_in_defaults(tmp_path: Path, line: int, field: str) -> None:
    path = write(
        tmp_path,
        """\
        defaults:
          max_steps: 0
          tools:
            - name: slow
              latency_ms: -1
        cases:
          - id: a
            input: hi
          - id: b
            input: hi
        """,
    )
    located = [(p.line, p.field) for p in problems_of([path])]
    assert located.count((line, field)) == 1, located


@pytest.mark.parametrize(
    "files",
    [
        {"a.yaml": ""},
        {"a.yaml": "cases: []\n"},
        {
            "a.yaml": "cases:\n  - {id: x, input: hi}\n",
            "b.yaml": "cases:\n  - {id: x, input: hi}\n",
        },
    ],
    ids=["empty-file", "empty-cases", "duplicate-ids"],
)
def test_whole_suite_problems_are_suite_errors(tmp_path: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        write(tmp_path, text, name)
    with pytest.raises(SuiteError):
        load_suite([tmp_path])


# --- the CLI ---------------------------------------------------------------------------------


def test_cli_check_bad_file_exits_3_and_names_file_and_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, BAD_FILES["negative-tool-latency"].yaml, "bad.yaml")
    monkeypatch.chdir(tmp_path)  # a short relative path keeps rich from wrapping it
    result = CliRunner().invoke(app, ["cases", "check", "bad.yaml"])
    assert result.exit_code == 3, result.output
    assert "bad.yaml:11: cases[1].tools[1].latency_ms:" in result.output
    assert "Traceback" not in result.output


def test_cli_check_example_suite_lists_16_cases(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    result = CliRunner().invoke(app, ["cases", "check", "cases/"])
    assert result.exit_code == 0, result.output
    assert re.search(r"cases:\s+16\s+cases", result.output), result.output
    for case in load_suite([EXAMPLES]).cases:
        assert case.id in result.output


def test_cli_prints_problem_messages_verbatim(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, BAD_FILES["invalid-language-tag"].yaml, "bad.yaml")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["cases", "check", "bad.yaml"])
    assert result.exit_code == 3
    assert "^[a-z]{2,3}" in result.output


def test_cli_survives_markup_like_text_in_a_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(
        tmp_path,
        """\
        cases:
          - id: a
            input: hi
            language: "[/b]"
        """,
        "bad.yaml",
    )
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["cases", "check", "bad.yaml"])
    assert result.exit_code == 3
    assert "bad.yaml:4: cases[0].language:" in result.output


# --- good suites -----------------------------------------------------------------------------


def test_defaults_are_inherited_and_overridden_by_the_case(tmp_path: Path) -> None:
    suite = load_one(
        tmp_path,
        """\
        defaults:
          tags: [orders]
          timeout_s: 30
          max_steps: 4
          system: Be brief.
          tools:
            - name: get_order
              result: {status: shipped}
        cases:
          - id: inherits
            input: Where is my order?
            expect: {tool_calls: [get_order]}
          - id: overrides
            input: Where is my parcel?
            tags: [parcels, slow]
            timeout_s: 90
            tools:
              - name: track
            expect: {tool_calls: [track]}
        """,
    )
    inherits, overrides = suite.cases
    assert inherits.tags == ["orders"]
    assert (inherits.timeout_s, inherits.max_steps, inherits.system) == (30, 4, "Be brief.")
    assert [t.name for t in inherits.tools] == ["get_order"]
    assert overrides.tags == ["parcels", "slow"]
    assert (overrides.timeout_s, overrides.max_steps, overrides.system) == (90, 4, "Be brief.")
    assert [t.name for t in overrides.tools] == ["track"]


def test_defaults_apply_only_to_their_own_file(tmp_path: Path) -> None:
    write(tmp_path, "defaults: {timeout_s: 5}\ncases:\n  - {id: a, input: hi}\n", "a.yaml")
    write(tmp_path, "cases:\n  - {id: b, input: hi}\n", "b.yaml")
    suite = load_suite([tmp_path])
    assert case_by_id(suite, "a").timeout_s == 5
    assert case_by_id(suite, "b").timeout_s == Case.model_fields["timeout_s"].default


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("こんにちは、元気ですか", "ja"),
        ("カタカナだけ", "ja"),
        ("안녕하세요, 주문 조회 부탁드립니다", "ko"),
        ("我的订单在哪里？", "zh"),
        ("Where is my order?", "en"),
        ("¿Dónde está mi pedido?", "en"),
    ],
    ids=["hiragana", "katakana", "hangul", "han-only", "latin", "latin-accents"],
)
def test_language_is_detected_from_the_script(tmp_path: Path, text: str, language: str) -> None:
    suite = load_one(tmp_path, f"cases:\n  - id: a\n    input: {json.dumps(text)}\n")
    assert suite.cases[0].language == language


def test_stated_language_wins_over_detection(tmp_path: Path) -> None:
    suite = load_one(
        tmp_path,
        """\
        defaults:
          language: es
        cases:
          - id: stated
            language: fr
            input: こんにちは
          - id: from-defaults
            input: 你好
          - id: from-messages
            language: ""
            messages:
              - {role: system, content: Answer in Korean.}
              - {role: user, content: 안녕하세요}
        """,
    )
    assert case_by_id(suite, "stated").language == "fr"
    assert case_by_id(suite, "from-defaults").language == "es"
    assert case_by_id(suite, "from-messages").language == "ko"
    assert suite.languages == ["es", "fr", "ko"]


def test_detect_language_on_mixed_japanese_starting_with_kanji() -> None:
    assert detect_language("東京駅から新宿まで何分かかりますか") == "ja"
    assert detect_language("注文番号A-1042") == "zh"  # kanji alone cannot be told apart
    assert detect_language("") == "en"


def test_detect_language_on_halfwidth_katakana() -> None:
    assert detect_language("ｶﾀｶﾅ") == "ja"


def test_sources_name_the_file_and_line_of_each_case(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        # two cases
        cases:
          - id: a
            input: hi

          - id: b
            input: hi
        """,
    )
    suite = load_suite([path])
    assert suite.sources == {"a": f"{path}:3", "b": f"{path}:6"}
    assert suite.name == "suite"


SUITE_A = """\
cases:
  - id: alpha
    input: First question
    tags: [x, y]
    tools:
      - name: t
        result: {b: 2, a: 1}
    expect: {tool_calls: [t]}
"""
SUITE_A_REORDERED = """\
cases:
  - expect:
      tool_calls: [t]
    tools:
      - result: {a: 1, b: 2}
        name: t
    tags: [x, y]
    input: First question
    id: alpha
"""
SUITE_B = """\
cases:
  - id: beta
    input: Second question
"""


def test_digest_is_independent_of_file_order_and_key_order(tmp_path: Path) -> None:
    a = write(tmp_path, SUITE_A, "a.yaml")
    a2 = write(tmp_path, SUITE_A_REORDERED, "a2.yaml")
    b = write(tmp_path, SUITE_B, "b.yaml")
    forward = load_suite([a, b])
    backward = load_suite([b, a])
    reordered = load_suite([b, a2])
    assert [c.id for c in forward.cases] == ["alpha", "beta"]
    assert [c.id for c in backward.cases] == ["beta", "alpha"]
    assert forward.digest == backward.digest == reordered.digest
    assert re.fullmatch(r"[0-9a-f]{64}", forward.digest)


def test_digest_changes_when_a_case_input_changes(tmp_path: Path) -> None:
    a = write(tmp_path, SUITE_A, "a.yaml")
    changed = write(tmp_path, SUITE_A.replace("First question", "First question!"), "c.yaml")
    assert load_suite([a]).digest != load_suite([changed]).digest


def test_folder_is_searched_recursively_in_sorted_order(tmp_path: Path) -> None:
    root = tmp_path / "suite"
    write(root, "cases:\n  - {id: c1, input: hi}\n", "c.yml")
    write(root, "cases:\n  - {id: a-sub-z, input: hi}\n", "a/z.yaml")
    write(root, "cases:\n  - {id: b1, input: hi}\n  - {id: b2, input: hi}\n", "b.yaml")
    write(root, "cases:\n  - {id: a-sub-deep, input: hi}\n", "a/sub/deep.yaml")
    write(root, "not: a case file\n", "a/readme.txt")
    suite = load_suite([root])
    assert [c.id for c in suite.cases] == ["a-sub-deep", "a-sub-z", "b1", "b2", "c1"]
    assert suite.name == "suite"


def test_result_text_of_a_dict_is_sorted_json() -> None:
    tool = Tool(name="t", result={"zeta": 1, "alpha": {"y": [2, 1], "x": "café"}})
    text = tool.result_text()
    assert text == '{"alpha": {"x": "café", "y": [2, 1]}, "zeta": 1}'
    assert json.loads(text) == tool.result
    assert Tool(name="t", result=[{"b": 1, "a": 2}]).result_text() == '[{"a": 2, "b": 1}]'
    assert Tool(name="t", result="plain text").result_text() == "plain text"


def test_output_contains_accepts_a_single_string(tmp_path: Path) -> None:
    suite = load_one(
        tmp_path,
        """\
        cases:
          - id: one
            input: hi
            expect: {output_contains: A-1042}
          - id: many
            input: hi
            expect:
              output_contains: [A-1042, shipped]
        """,
    )
    assert case_by_id(suite, "one").expect.output_contains == ["A-1042"]
    assert case_by_id(suite, "many").expect.output_contains == ["A-1042", "shipped"]


def test_messages_case_and_scalar_types(tmp_path: Path) -> None:
    suite = load_one(
        tmp_path,
        """\
        cases:
          - id: chat
            temperature: 0.5
            max_tokens: 200
            messages:
              - {role: system, content: Be brief.}
              - {role: user, content: Hi}
              - {role: assistant, content: Hello!}
              - {role: user, content: "Where is my order?"}
        """,
    )
    case = suite.cases[0]
    assert case.input is None
    assert case.prompt_text() == "Be brief.\nHi\nHello!\nWhere is my order?"
    assert (case.temperature, case.max_tokens, case.tool_count) == (0.5, 200, 0)


# --- the shipped example suite ---------------------------------------------------------------


def test_example_suite_loads_and_covers_languages_and_tool_counts() -> None:
    suite = load_suite([EXAMPLES])
    assert len(suite.cases) >= 12
    languages = {"en", "zh", "ja", "es"}
    assert languages <= set(suite.languages)
    counts = Counter((c.language, c.tool_count) for c in suite.cases)
    missing = [(lang, n) for lang in sorted(languages) for n in range(4) if not counts[lang, n]]
    assert missing == []
    assert len(set(suite.sources)) == len(suite.cases)
