"""The README's first screen (60 lines) says what perfbench is, how to set it up, what its
output looks like and how to point it at your own endpoint, agent and releases; the reference
moved to docs/ pages, which its table of contents links. Before, the endpoint example was at
line ~330 of 490 and no output was shown."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_first_screen_has_setup_output_and_the_three_commands() -> None:
    first = "\n".join((ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:60])
    assert "make demo" in first and "make test" in first
    excerpt = first.split("```text", 1)[1].split("```", 1)[0]
    assert re.search(r"tasks/s · [\d,]+ output tokens/s", excerpt)  # a run's real headline
    assert "P95" in excerpt and "all" in excerpt
    assert re.search(r"-t openai/\S+ --base-url http://", first)
    assert '-t "cmd:' in first and "perfbench compare" in first


def test_every_page_the_readme_links_exists() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(((?:docs|reports)/[^)#]+)\)", text)
    assert len(links) >= 8
    assert [link for link in links if not (ROOT / link).is_file()] == []
    for page in (ROOT / "docs").glob("*.md"):  # the pages link each other by file name
        for link in re.findall(r"\]\(([\w./-]+\.md)\)", page.read_text(encoding="utf-8")):
            assert (page.parent / link).is_file(), (page.name, link)
