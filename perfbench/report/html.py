"""report.html: the Markdown report as one self-contained page (pure).

The page is converted from the Markdown that :mod:`perfbench.report.release_md` writes, so the
two never disagree, by a converter of just the subset perfbench writes: ATX headings, GitHub
tables, ``-`` lists (two levels), paragraphs, ``<details>``/``<summary>`` lines, and inline
code, bold, links, images and backslash escapes. Everything else is text, escaped: run labels
and case ids come from users' files (the Markdown writers escape them too). An image is shown
only when it is a chart perfbench drew or a relative file, a link only when it is relative or
http(s), so a user's string cannot make the page fetch or run anything. Images whose source is
a key of ``images`` are replaced by its data URI, so the page loads nothing at view time (no
network, no file beside it, no script, no external CSS) and can be mailed or attached to a CI
job as it is.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from html import escape

STYLE = """
body { font: 15px/1.5 system-ui, sans-serif, "Apple Color Emoji", "Segoe UI Emoji",
       "Noto Color Emoji"; max-width: 72rem; margin: 2rem auto; padding: 0 1rem; color: #1f2328; }
table { border-collapse: collapse; margin: 0.5rem 0 1rem; font-size: 13px; }
th, td { border: 1px solid #d0d7de; padding: 3px 8px; }
th { background: #f6f8fa; }
code { background: #eff1f3; padding: 0 3px; border-radius: 3px; font-size: 90%; }
img { max-width: 100%; height: auto; display: block; margin: 0.5rem 0; }
h1, h2 { border-bottom: 1px solid #d8dee4; padding-bottom: 0.2rem; }
summary { cursor: pointer; }
"""

_INLINE = re.compile(
    r"\\(?P<escaped>[!-/:-@\[-`{-~])"  # a backslash escape: the character as text
    r"|`(?P<code>[^`]+)`"
    r"|!\[(?P<alt>[^\]]*)\]\((?P<src>[^)\s]+)\)"
    r"|\[(?P<text>[^\]]+)\]\((?P<href>[^)\s]+)\)"
    r"|\*\*(?P<bold>.+?)\*\*"
)
_HEADING = re.compile(r"(#{1,6}) (.*)")
_DELIMITER = re.compile(r"\|(\s*:?-{3,}:?\s*\|)+")
_SUMMARY = re.compile(r"<details><summary>(.*)</summary>")
_PIPE = re.compile(r"(?<!\\)\|")


def page(markdown: str, images: Mapping[str, str], title: str = "perfbench report") -> str:
    """The whole HTML document for ``markdown``; ``images`` maps an image's Markdown source
    (``latency.png``) to what the page shows instead (a ``data:`` URI)."""
    body = "\n".join(_blocks(markdown.splitlines(), images))
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n"
        f"<body>\n{body}\n</body>\n</html>\n"
    )


def _blocks(lines: Sequence[str], images: Mapping[str, str]) -> Iterator[str]:
    """Block by block: each branch consumes the lines of one block and yields its HTML."""
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
        elif heading := _HEADING.fullmatch(line):
            level = len(heading.group(1))
            text = heading.group(2)
            yield f'<h{level} id="{_slug(text)}">{_inline(text, images)}</h{level}>'
            i += 1
        elif summary := _SUMMARY.fullmatch(line):
            yield f"<details><summary>{_inline(summary.group(1), images)}</summary>"
            i += 1
        elif line == "</details>":
            yield "</details>"
            i += 1
        elif line.startswith("|") and i + 1 < len(lines) and _DELIMITER.fullmatch(lines[i + 1]):
            end = _run_end(lines, i, lambda s: s.startswith("|"))
            yield _table(lines[i:end], images)
            i = end
        elif line.startswith("- "):
            end = _run_end(lines, i, lambda s: s.startswith(("- ", "  - ")))
            yield _list(lines[i:end], images)
            i = end
        else:
            end = _run_end(lines, i, _is_text)
            yield f"<p>{_inline(' '.join(lines[i:end]), images)}</p>"
            i = end


def _run_end(lines: Sequence[str], start: int, belongs: Callable[[str], bool]) -> int:
    """The index after the run of lines from ``start`` that ``belongs`` accepts."""
    end = start + 1
    while end < len(lines) and belongs(lines[end]):
        end += 1
    return end


def _is_text(line: str) -> bool:
    """A paragraph goes on until a blank line or the start of another kind of block."""
    return bool(line.strip()) and not (
        _HEADING.fullmatch(line) or line.startswith(("|", "- ", "<details>", "</details>"))
    )


def _cells(line: str) -> list[str]:
    inner = line.strip().removeprefix("|").removesuffix("|")
    return [c.strip().replace("\\|", "|") for c in _PIPE.split(inner)]


def _table(lines: Sequence[str], images: Mapping[str, str]) -> str:
    header, delimiters, *rows = (_cells(line) for line in lines)
    styles = [' style="text-align:right"' if d.endswith(":") else "" for d in delimiters]
    head = "".join(
        f"<th{style}>{_inline(c, images)}</th>" for c, style in zip(header, styles, strict=False)
    )
    body = "\n".join(
        "<tr>"
        + "".join(f"<td{s}>{_inline(c, images)}</td>" for c, s in zip(row, styles, strict=False))
        + "</tr>"
        for row in rows
    )
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>"


def _list(lines: Sequence[str], images: Mapping[str, str]) -> str:
    """Items, each with the items indented under it (sweep findings nest one level)."""
    out = ["<ul>"]
    nested = False
    for line in lines:
        inner = line.startswith("  - ")
        if inner and not nested:
            out[-1] = out[-1].removesuffix("</li>") + "<ul>"
        elif nested and not inner:
            out.append("</ul></li>")
        nested = inner
        out.append(f"<li>{_inline(line.lstrip()[2:], images)}</li>")
    out.append("</ul></li>\n</ul>" if nested else "</ul>")
    return "\n".join(out)


def _inline(text: str, images: Mapping[str, str]) -> str:
    """Code, images, links and bold; the text between them escaped."""
    out: list[str] = []
    at = 0
    for match in _INLINE.finditer(text):
        out.append(escape(text[at : match.start()], quote=False))
        out.append(_token(match, images))
        at = match.end()
    out.append(escape(text[at:], quote=False))
    return "".join(out)


def _token(match: re.Match[str], images: Mapping[str, str]) -> str:
    if match.group("escaped") is not None:
        return escape(match.group("escaped"), quote=False)
    if match.group("code") is not None:
        return f"<code>{escape(match.group('code'), quote=False)}</code>"
    if match.group("src") is not None:
        return _image(match.group("src"), match.group("alt"), images)
    if match.group("href") is not None:
        shown = _inline(match.group("text"), images)
        if not (_relative(match.group("href")) or _WEB.match(match.group("href"))):
            return shown  # javascript:, data:, file:…: the text, not a link
        return f'<a href="{escape(match.group("href"))}">{shown}</a>'
    return f"<strong>{_inline(match.group('bold'), images)}</strong>"


def _image(src: str, alt: str, images: Mapping[str, str]) -> str:
    """A chart perfbench drew (its data URI), or a relative image; any other source (a
    remote one would make the page fetch it) is shown as its alt text."""
    if src in images:
        src = images[src]
    elif not _relative(src):
        return escape(f"[image: {alt}]", quote=False)
    return f'<img src="{escape(src)}" alt="{escape(alt)}">'


def _relative(url: str) -> bool:
    """A URL relative to the page, with no scheme and no host (``latency.svg``, ``#runs``):
    it names nothing on a network. Browsers drop control characters and spaces from a URL,
    so one that holds any is not taken as relative (``\x01javascript:``)."""
    return not (_SCHEME.match(url) or url.startswith(("/", "\\")) or _UNSAFE.search(url))


_SCHEME = re.compile(r"[^/?#]*:")  # a colon before the path: a scheme (javascript:, http:)
_UNSAFE = re.compile(r"[\x00-\x20\x7f\\]")
_WEB = re.compile(r"https?://[^\x00-\x20\x7f\\]+\Z", re.IGNORECASE)


def _slug(text: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", text.lower()).strip().replace(" ", "-")
