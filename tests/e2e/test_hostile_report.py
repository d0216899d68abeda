"""report.html from runs whose labels hold active content (issue 35, item 4): Markdown links
to ``javascript:``, remote images, raw HTML with script. Opened in headless Chromium (the
DevTools helper of test_html_report), the page makes no request beyond the file and its
data URIs (a server counting hits sees none), runs no script, and shows each label as the
text it is. And a label that would forge a heading is refused (item 5)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from html import escape
from pathlib import Path

import pytest
from aiohttp import web

from perfbench.report import html
from perfbench.report.format import md_code, md_text
from tests.e2e.test_html_report import DevTools, browser, is_error
from tests.helpers import CASES, invoke, serving

__all__ = ["browser"]  # the fixture, shared with test_html_report


class Hits:
    def __init__(self) -> None:
        self.paths: list[str] = []
        self.lock = threading.Lock()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        with self.lock:
            self.paths.append(request.path)
        return web.Response(body=b"GIF89a", content_type="image/gif")


@pytest.fixture
def attacker() -> Iterator[tuple[Hits, str]]:
    hits = Hits()
    with serving(hits.handle) as url:
        yield hits, url


def labels(url: str) -> list[str]:
    return [
        f"![p]({url}/md-image.png) [x](javascript:window.pwned=1) v1",
        f"<script>window.pwned=2</script><img src={url}/raw-img.png onerror=window.pwned=3> "
        f"[y]({url}/link) **b** `c` \\![z]({url}/escaped.png) <a href=javascript:x>v2</a>",
    ]


def hostile_report(tmp: Path, url: str) -> Path:
    runs = []
    for n, label in enumerate(labels(url)):
        out = tmp / f"runs{n}"
        done = invoke("run", str(CASES / "answer.yaml"), "-t", "mock:zero", "--runs", "1",
                   "--warmup", "0", "-q", "--out", str(out), "--label", label)  # fmt: skip
        assert done.returncode == 0, done.stderr
        (run,) = [d for d in out.iterdir() if (d / "meta.json").exists()]
        runs.append(str(run))
    report = tmp / "report"
    done = invoke("report", *runs, "--baseline", runs[0], "--out", str(report))
    assert done.returncode == 0, done.stderr
    return report / "report.html"


PROBE = """(() => ({
  pwned: typeof window.pwned,
  active: document.querySelectorAll('script, iframe, object, embed, [onerror]').length,
  images: [...document.images].map(i => i.getAttribute('src').slice(0, 5)),
  links: [...document.links].map(a => a.getAttribute('href')),
  text: document.body.innerText,
}))()"""


def test_a_report_of_hostile_labels_fetches_nothing_and_runs_nothing(
    tmp_path: Path, attacker: tuple[Hits, str], browser: DevTools
) -> None:
    hits, url = attacker
    page = hostile_report(tmp_path, url)
    target = browser.call("Target.createTarget", url="about:blank")["targetId"]
    session = browser.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
    for domain in ("Page", "Runtime", "Log", "Network"):
        browser.call(f"{domain}.enable", session)
    browser.call("Page.navigate", session, url=page.as_uri())
    browser.wait_for("Page.loadEventFired")
    shown = browser.call("Runtime.evaluate", session, expression=PROBE, returnByValue=True)
    seen = shown["result"]["value"]
    assert seen["pwned"] == "undefined" and seen["active"] == 0
    assert all(src == "data:" for src in seen["images"]), seen["images"]
    assert all(h.startswith(("#", "http://", "https://")) or ":" not in h for h in seen["links"])
    assert "[x](javascript:window.pwned=1) v1" in seen["text"]  # the label, as text
    assert "<script>window.pwned=2</script>" in seen["text"]
    requests = [e["params"]["request"]["url"] for e in browser.events
                if e.get("method") == "Network.requestWillBeSent"]  # fmt: skip
    assert all(u.startswith(("file:", "data:")) for u in requests), requests
    assert hits.paths == [] and not [e for e in browser.events if is_error(e)]


def test_the_html_shows_only_its_own_charts_relative_images_and_web_links() -> None:
    text = (
        "![a](http://h/a.png) ![b](//h/b.png) ![c](\x01javascript:x) ![d](chart.png) "
        "![e](file:///etc/passwd) [f](javascript:alert(1)) [g](JaVaScRiPt:x) [h](https://x.y) "
        "[i](#runs) [j](data:text/html,x) [k](latency.svg) \\[l\\](javascript:y)"
    )
    page = html.page(text, {"chart.png": "data:image/png;base64,AA=="})
    assert page.count("<img ") == 1 and '<img src="data:image/png;base64,AA=="' in page
    hrefs = sorted(part.split('"')[1] for part in page.split("<a href=")[1:])
    assert hrefs == ["#runs", "https://x.y", "latency.svg"]
    assert "[l](javascript:y)" in page  # an escaped link reads as its text


@pytest.mark.parametrize(
    "value",
    ["![p](http://h/p.png)", "[x](javascript:a)", "<b>x</b>", "a_b*c*", "x\\y", "`v`", "t&lt;"],
)
def test_a_user_string_in_markdown_reads_as_itself(value: str) -> None:
    for line, shown in ((md_text(value), value), (md_code(value), value.replace("`", "'"))):
        page = html.page(f"| {line} |\n| --- |\n", {})
        assert "<img" not in page and "<a " not in page and "<b>" not in page
        assert escape(shown, quote=False) in page, (line, page)


def test_a_line_break_in_a_label_is_refused(tmp_path: Path) -> None:
    forged = "v2\n## ✅ pass — no regression"
    done = invoke("run", str(CASES / "answer.yaml"), "-t", "mock:zero", "--runs", "1", "-q",
               "--out", str(tmp_path), "--label", forged)  # fmt: skip
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "--label" in done.stderr and "control character" in done.stderr
    assert not list(tmp_path.glob("*/meta.json"))  # refused before any run starts
