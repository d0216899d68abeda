"""Synthetic workloads: prompt lengths exact in the named tokenizer, distributions that are the
ones asked, a shared prefix shared, and the same seed the same suite (digest)."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import pytest

from perfbench.errors import CaseError, SuiteError
from perfbench.sources import synthetic
from perfbench.sources.tokenizer import Tokenizer
from perfbench.suite import load_suite, synthetic_suite


def lengths(spec: str, tokenizer: str = "o200k_base") -> list[int]:
    tok = Tokenizer(tokenizer)
    return [tok.count(c.prompt_text()) for c in synthetic_suite(spec).cases]


@pytest.mark.slow  # make test-slow: 1,000 prompts tokenised a language
@pytest.mark.parametrize("language", ["en", "zh"])
def test_constant_lengths_are_exact_over_a_thousand_prompts(language: str) -> None:
    suite = synthetic_suite(f"input=512,output=128,n=1000,language={language},seed=7")
    tok = Tokenizer("o200k_base")
    counts = [tok.count(c.prompt_text()) for c in suite.cases]
    assert all(abs(n - 512) <= 1 for n in counts)
    assert counts.count(512) >= 990  # ±1 is the promise; exact is the practice
    assert {(c.output_tokens, c.max_tokens, c.language) for c in suite.cases} == {
        (128, 128, language)
    }
    assert [c.id for c in suite.cases[:2]] == ["syn-0001", "syn-0002"]


@pytest.mark.parametrize("language", ["ja", "es"])
@pytest.mark.parametrize("tokenizer", ["o200k_base", "cl100k_base"])
def test_other_languages_and_tokenizers_are_exact_too(language: str, tokenizer: str) -> None:
    spec = f"input=96,output=8,n=60,language={language},tokenizer={tokenizer}"
    assert all(abs(n - 96) <= 1 for n in lengths(spec, tokenizer))


@pytest.mark.parametrize("language", ["zh", "ja"])
def test_cjk_prompts_are_written_in_their_script(language: str) -> None:
    from perfbench.language import detect_language

    case = synthetic_suite(f"input=64,output=8,n=1,language={language}").cases[0]
    assert detect_language(case.prompt_text()) == language
    assert " " not in case.prompt_text()


def test_very_short_prompts_are_exact() -> None:
    for n in (1, 2, 3, 5):
        assert set(lengths(f"input={n},output=1,n=20")) == {n}


@pytest.mark.parametrize(("dist", "stddev"), [("normal", 64), ("lognormal", 96), ("uniform", 48)])
def test_drawn_lengths_follow_the_distribution_asked(dist: str, stddev: float) -> None:
    counts = lengths(f"input=256,output=16,n=1000,dist={dist},stddev={stddev},seed=3")
    # The mean of 1,000 draws is within 4 standard errors; the spread within 10%.
    assert abs(statistics.fmean(counts) - 256) < 4 * stddev / math.sqrt(1000)
    assert statistics.stdev(counts) == pytest.approx(stddev, rel=0.1)
    if dist == "lognormal":  # skewed right: the median is below the mean
        assert statistics.median(counts) < statistics.fmean(counts) - 5
    if dist == "uniform":  # flat: nothing beyond √3 standard deviations
        half = math.sqrt(3) * stddev
        assert 256 - half - 1 <= min(counts) and max(counts) <= 256 + half + 1


def test_uniform_over_a_range() -> None:
    counts = lengths("input=200,output=8,n=400,dist=uniform,min=100,max=300")
    assert 100 <= min(counts) < 110 and 290 < max(counts) <= 300
    assert abs(statistics.fmean(counts) - 200) < 10


def test_min_and_max_bound_every_draw() -> None:
    counts = lengths("input=200,output=8,n=500,dist=normal,stddev=150,min=120,max=260")
    assert min(counts) == 120 and max(counts) == 260  # a wide spread: both bounds are hit
    assert all(120 <= n <= 260 for n in counts)


def test_output_lengths_may_be_drawn_too() -> None:
    suite = synthetic_suite("input=32,output=128,output_stddev=32,dist=normal,stddev=4,n=500")
    outputs = [c.output_tokens or 0 for c in suite.cases]
    assert abs(statistics.fmean(outputs) - 128) < 6
    assert statistics.stdev(outputs) == pytest.approx(32, rel=0.15)
    assert all(c.max_tokens == c.output_tokens for c in suite.cases)


@pytest.mark.parametrize("language", ["en", "zh"])
def test_a_shared_prefix_opens_the_share_of_prompts_asked(language: str) -> None:
    spec = f"input=200,output=8,n=50,prefix=64,prefix_share=0.4,language={language},seed=5"
    tok = Tokenizer("o200k_base")
    prompts = [c.prompt_text() for c in synthetic_suite(spec).cases]
    heads = [tuple(tok.encode(p)[:64]) for p in prompts]
    shared = max(set(heads), key=heads.count)
    assert heads.count(shared) == 20  # exactly round(50 × 0.4)
    assert all(abs(tok.count(p) - 200) <= 1 for p in prompts)
    prefix = next(p for p, h in zip(prompts, heads, strict=True) if h == shared)[:32]
    assert sum(p.startswith(prefix) for p in prompts) == 20


def test_the_prefix_is_shared_by_every_prompt_by_default() -> None:
    tok = Tokenizer("o200k_base")
    cases = synthetic_suite("input=100,output=8,n=10,prefix=99").cases
    assert len({tuple(tok.encode(c.prompt_text())[:99]) for c in cases}) == 1
    assert {tok.count(c.prompt_text()) for c in cases} == {100}


def test_the_same_seed_gives_the_same_digest_and_another_seed_another() -> None:
    one = synthetic_suite("input=128,output=16,n=20,seed=1")
    assert synthetic_suite("seed=1,n=20,output=16,input=128").digest == one.digest
    assert synthetic_suite("input=128,output=16,n=20,seed=2").digest != one.digest
    assert synthetic_suite("input=128,output=17,n=20,seed=1").digest != one.digest


def test_a_prompt_does_not_depend_on_how_many_are_made() -> None:
    few = synthetic_suite("input=64,output=8,n=3,seed=9").cases
    many = synthetic_suite("input=64,output=8,n=30,seed=9").cases
    assert tuple(few) == many[:3]


def test_a_case_file_source_block_makes_the_same_suite_as_the_flag(tmp_path: Path) -> None:
    path = tmp_path / "workload.yaml"
    path.write_text(
        "defaults: {timeout_s: 30}\n"
        "source:\n  synthetic: {input: 64, output: 8, n: 5, language: zh, seed: 4}\n",
        encoding="utf-8",
    )
    suite = load_suite([path])
    flag = synthetic_suite("input=64,output=8,n=5,language=zh,seed=4")
    assert [c.input for c in suite.cases] == [c.input for c in flag.cases]
    assert {c.timeout_s for c in suite.cases} == {30}  # the file's defaults apply
    assert suite.sources["syn-0001"] == f"{path}:3"


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        ("input=512,output=1,outptu=128", "outptu", "did you mean 'output'?"),
        ("input=512", "output", "is required but missing"),
        ("input=many,output=1", "input", "valid integer"),
        ("input=0,output=1", "input", "greater than or equal to 1"),
        ("input=5,output=1,language=fr", "language", "must be one of en, es, zh, ja"),
        ("input=5,output=1,tokenizer=gpt2", "tokenizer", "o200k_base, cl100k_base"),
        ("input=5,output=1,dist=zipf", "dist", "'constant', 'uniform', 'normal' or 'lognormal'"),
        ("input=5,output=1,input=6", "input", "is given twice"),
        ("input=5,output", "", "expected key=value"),
        ("input=5,output=1,dist=normal", "", "dist=normal needs stddev"),
        ("input=5,output=1,stddev=2", "", "stddev and output_stddev need dist="),
        ("input=50,output=1,prefix=50", "", "prefix (50) must be shorter than input (50)"),
        ("input=50,output=1,prefix_share=0.5", "", "prefix_share needs prefix"),
        ("input=50,output=1,min=60", "", "input (50) must be within min..max (60.."),
    ],
)
def test_a_bad_spec_names_the_key(spec: str, field: str, message: str) -> None:
    with pytest.raises(SuiteError) as info:
        synthetic_suite(spec)
    (problem,) = info.value.problems
    assert (str(problem.file), problem.line, problem.field) == (synthetic.FLAG, None, field)
    assert message in problem.message
    assert str(info.value).startswith(f"{synthetic.FLAG}:")


def test_a_bad_source_block_is_located_in_the_case_file(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text("source:\n  synthetic:\n    input: 64\n    output: -3\n", encoding="utf-8")
    with pytest.raises(CaseError) as info:
        load_suite([path])
    (problem,) = info.value.problems
    assert (problem.file, problem.line, problem.field) == (path, 4, "source.synthetic.output")
