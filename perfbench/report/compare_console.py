"""``compare``'s verdict on a terminal: the Markdown of report/compare_md.py drawn by rich
(tables as tables, at the terminal's width, cells wrapped rather than rows broken), with the
verdict heading moved last, where the terminal leaves it, and each mark (✅ ❌ ⚠️) replaced
by a coloured word (PASS, FAIL, WARN): without an emoji font they showed as empty boxes. The
folded tables (``<details>``) stay in the Markdown (``--markdown FILE``, the CI summary).
Pure: Markdown in, renderables out; the CLI prints."""

from __future__ import annotations

import re
from typing import ClassVar

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.markdown import Markdown, MarkdownElement, TableElement
from rich.table import Table
from rich.text import Text

# Each mark, as compare_md writes it, and the word and colour that replace it.
MARKS = (("✅", "PASS", "green"), ("❌", "FAIL", "red"), ("⚠️", "WARN", "yellow"))
_DETAILS = re.compile(r"<details>.*?</details>\n?", re.DOTALL)
_RANGE = re.compile(r"(?<=[\d%s])–(?=[\d(])")  # 0.09 ms–0.10 ms, 1.2/s–1.4/s, 5%–7%
FOLDED = "(Tables of every case and language: `--markdown FILE`.)"


class _FoldedTable(TableElement):
    """A Markdown table whose columns are each as wide as their longest word at least (when
    the words fit the terminal), and whose cells fold a word wider than its column, never cut
    it: rich narrowed the widest columns first and cut ``1,903.89/s`` to ``1,903.89…`` and
    ``WARN: underpowered`` to ``WARN: underpowe…`` on an 80-column terminal."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        rows = [self.header.row] if self.header is not None and self.header.row else []
        rows += self.body.rows if self.body is not None else []
        cells = [[cell.content for cell in row.cells] for row in rows]
        for row in cells:
            for text in row:
                text.overflow = "fold"
        for table in super().__rich_console__(console, options):
            if isinstance(table, Table):
                # Each column's padding and divider: two characters (rich's SIMPLE box,
                # collapsed padding), the table's edges included.
                room = options.max_width - 2 * len(table.columns)
                for column, width in zip(table.columns, _widths(cells, room), strict=False):
                    column.width = width
            yield table


def _widths(rows: list[list[Text]], room: int) -> list[int | None]:
    """Column widths that fit ``room``: each column its longest word, then what is left shared
    in proportion to what each lacks of its longest cell; None each (rich's own widths) when
    the longest words alone do not fit."""
    columns = list(zip(*rows, strict=False))
    least = [max((len(word) for text in column for word in text.plain.split()), default=1)
             for column in columns]  # fmt: skip
    most = [max(max(len(line) for line in text.plain.splitlines() or [""]) for text in column)
            for column in columns]  # fmt: skip
    spare, lacking = room - sum(least), sum(most) - sum(least)
    if spare < 0:
        return [None] * len(columns)
    share = min(1.0, spare / lacking) if lacking else 0.0
    return [low + int((high - low) * share) for low, high in zip(least, most, strict=True)]


class _Markdown(Markdown):
    elements: ClassVar[dict[str, type[MarkdownElement]]] = {
        **Markdown.elements,
        "table_open": _FoldedTable,
    }


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
    return [
        _Markdown(plain_marks(_spaced_ranges(folded))),
        _headline(plain_marks(heading.lstrip("# "))),
    ]


def _spaced_ranges(markdown: str) -> str:
    """Table cells' ranges as ``(0.09 ms – 0.10 ms)``: rich wraps at spaces only, and
    ``(1,476.97/s–2,330.81/s)`` was one word wider than its column."""
    lines = markdown.split("\n")
    return "\n".join(_RANGE.sub(" – ", line) if line.startswith("|") else line for line in lines)


def _headline(text: str) -> Text:
    line = Text(text, style="bold")
    for _, word, colour in MARKS:
        line.highlight_words([word], style=f"bold {colour}")
    return line


def render(markdown: str) -> Group:
    return Group(*verdict(markdown))
