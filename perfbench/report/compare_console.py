"""``compare``'s verdict on a terminal: the Markdown of report/compare_md.py drawn by rich
(tables as tables, at the terminal's width, cells wrapped rather than rows broken), with the
verdict heading moved last, where the terminal leaves it, and each mark (✅ ❌ ⚠️) replaced
by a coloured word (PASS, FAIL, WARN): without an emoji font they showed as empty boxes. The
folded tables (``<details>``) stay in the Markdown (``--markdown FILE``, the CI summary).
Pure: Markdown in, renderables out; the CLI prints."""

from __future__ import annotations

import re

from rich.console import Group, RenderableType
from rich.markdown import Markdown
from rich.text import Text

# Each mark, as compare_md writes it, and the word and colour that replace it.
MARKS = (("✅", "PASS", "green"), ("❌", "FAIL", "red"), ("⚠️", "WARN", "yellow"))
_DETAILS = re.compile(r"<details>.*?</details>\n?", re.DOTALL)
FOLDED = "(Tables of every case and language: `--markdown FILE`.)"


def plain_marks(text: str) -> str:
    """``text`` with each mark replaced by its word: ``✅ pass`` → ``PASS``, ``❌ regression``
    → ``FAIL: regression``, ``⚠️ inconclusive (…)`` → ``WARN: inconclusive (…)``."""
    for mark, word, _ in MARKS:
        text = re.sub(rf"{mark}\s*", word + ": ", text)
    return text.replace("PASS: pass", "PASS")


def verdict(markdown: str) -> list[RenderableType]:
    """The verdict's Markdown as renderables: the body, then its heading line last."""
    heading, _, body = markdown.partition("\n")
    folded = _DETAILS.sub("", body)
    if folded != body:
        folded = folded.rstrip() + "\n\n" + FOLDED + "\n"
    return [Markdown(plain_marks(folded)), _headline(plain_marks(heading.lstrip("# ")))]


def _headline(text: str) -> Text:
    line = Text(text, style="bold")
    for _, word, colour in MARKS:
        line.highlight_words([word], style=f"bold {colour}")
    return line


def render(markdown: str) -> Group:
    return Group(*verdict(markdown))
