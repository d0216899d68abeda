"""report.html in a real browser, and the committed example report.

The example in reports/example/ is rendered again from the runs committed in inputs/ (their
meta.json and gzipped summary.json) and must match: report.md byte for byte, report.html with
the chart payloads left out (matplotlib's output may change with its version; the charts' own
tests pin their content). The page is then opened in headless Chromium, driven over the
DevTools protocol on a pipe (no port, no extra package): it must load with no console error and
no request beyond the file itself, and show the verdict and every chart at a non-zero size.
"""

from __future__ import annotations

import fcntl
import gzip
import json
import os
import re
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from perfbench.cli import app
from perfbench.report import html

EXAMPLE = Path(__file__).resolve().parents[2] / "reports" / "example"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
INSTALL = "install one: apt-get install -y chromium (what .ci/run does)"
DATA_URI = re.compile(r"data:image/[a-z+]+;base64,[A-Za-z0-9+/=]+")
TIMEOUT_S = 60.0


def render_example(tmp: Path) -> Path:
    """The committed runs unpacked into a run folder, and `perfbench report` run on them as
    `make example` does."""
    root = tmp / "runs"
    for kept in sorted((EXAMPLE / "inputs").iterdir()):
        run = root / kept.name
        run.mkdir(parents=True)
        shutil.copyfile(kept / "meta.json", run / "meta.json")
        (run / "summary.json").write_bytes(gzip.decompress((kept / "summary.json.gz").read_bytes()))
    out = tmp / "report"
    args = ["report", "v1", "v2", "--baseline", "v1", "--root", str(root), "--out", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return render_example(tmp_path_factory.mktemp("example"))


def test_the_committed_example_is_what_the_code_renders(rendered: Path) -> None:
    assert (rendered / "report.md").read_text() == (EXAMPLE / "report.md").read_text(), (
        "reports/example/ is stale: run `make example` and commit it"
    )
    fresh, kept = ((d / "report.html").read_text() for d in (rendered, EXAMPLE))
    assert DATA_URI.sub("data:…", fresh) == DATA_URI.sub("data:…", kept)
    charts = {p.name for p in rendered.iterdir()}
    assert charts == {p.name for p in EXAMPLE.iterdir() if p.is_file()} - {"slower.yaml"}


def test_the_example_opens_on_its_verdict(rendered: Path) -> None:
    lines = (rendered / "report.md").read_text().splitlines()
    assert lines[2] == "## Verdict: ❌ regression — v2 against v1"
    block = "\n".join(lines[: lines.index("## Runs")])
    assert "**Regressed:** P50 latency +" in block and "| P95 latency |" in block
    assert "](" not in block  # no image, no relative link: it reads wherever it is pasted
    assert len(block.splitlines()) < 30


def test_the_page_is_self_contained(rendered: Path) -> None:
    page = (rendered / "report.html").read_text()
    for forbidden in ("<script", "<link", "@import", 'src="http', "url(http"):
        assert forbidden not in page
    sources = re.findall(r'<img src="([^"]+)"', page)
    assert sources and all(s.startswith("data:image/") for s in sources)
    assert len(sources) == (rendered / "report.md").read_text().count("![")


def test_user_text_is_escaped_and_markdown_tables_become_html_tables() -> None:
    text = "# t <b>\n\n| a | `<script>` |\n| --- | ---: |\n| **x** | 1 \\| 2 |\n\n- <i>one</i>\n"
    page = html.page(text, {})
    assert "<script>" not in page and "&lt;script&gt;" in page and "&lt;i&gt;one" in page
    assert '<td style="text-align:right">1 | 2</td>' in page and "<strong>x</strong>" in page


def test_nested_findings_and_collapsed_details_keep_their_structure() -> None:
    text = "- knee\n  - level 4: p95\n- fit\n\n<details><summary>P95 of `x`</summary>\n</details>\n"
    page = html.page(text, {})
    assert "<li>knee<ul>\n<li>level 4: p95</li>\n</ul></li>\n<li>fit</li>\n</ul>" in page
    assert "<details><summary>P95 of <code>x</code></summary>\n</details>" in page


def find_browser() -> str | None:
    return next((found for name in BROWSERS if (found := shutil.which(name))), None)


class DevTools:
    """The Chrome DevTools protocol over ``--remote-debugging-pipe``: JSON messages ended by
    a NUL byte, commands on the browser's fd 3, answers and events on its fd 4."""

    def __init__(self, browser: str, profile: Path) -> None:
        to_browser, self._write = map(_above_4, os.pipe())
        self._read, from_browser = map(_above_4, os.pipe())
        flags = [
            "--headless",
            "--no-sandbox",  # CI runs as root
            "--disable-gpu",
            "--no-first-run",
            # This machine has no network: without these Chromium dials out at every start.
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-quic",
            f"--user-data-dir={profile}",
            "--remote-debugging-pipe",
            "about:blank",
        ]
        # The protocol wants the pipe on fds 3 and 4: a Python stub puts it there and becomes
        # the browser (a shell's redirections take single-digit fds only, and dash is sh here).
        stub = f"import os, sys; os.dup2({to_browser}, 3); os.dup2({from_browser}, 4); "
        stub += "os.execv(sys.argv[1], sys.argv[1:])"
        self.process = subprocess.Popen(
            [sys.executable, "-c", stub, browser, *flags],
            pass_fds=(to_browser, from_browser),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser)
        os.close(from_browser)
        self.events: list[dict[str, Any]] = []
        self._buffer = b""
        self._next_id = 0

    def call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        for reply in self._messages():
            if reply.get("id") == self._next_id:
                assert "error" not in reply, reply
                result: dict[str, Any] = reply["result"]
                return result
            self.events.append(reply)
        raise AssertionError(f"no answer to {method}")

    def wait_for(self, method: str) -> dict[str, Any]:
        for message in self._messages():
            self.events.append(message)
            if message.get("method") == method:
                return message
        raise AssertionError(f"no {method} event")

    def _messages(self) -> Iterator[dict[str, Any]]:
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                yield json.loads(raw)
            ready, _, _ = select.select([self._read], [], [], deadline - time.monotonic())
            if ready:
                chunk = os.read(self._read, 1 << 16)
                assert chunk, "the browser closed the pipe"
                self._buffer += chunk

    def close(self) -> None:
        """Browser.close lets Chromium end its renderer and helper processes itself."""
        try:
            os.write(self._write, b'{"id": 0, "method": "Browser.close"}\0')
            self.process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait(timeout=TIMEOUT_S)
        os.close(self._write)
        os.close(self._read)


def _above_4(fd: int) -> int:
    """The same pipe end on a descriptor above 4, so that moving one end to 3 or 4 never
    overwrites the other (pytest's capture leaves 3 and 4 free)."""
    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return high


# What the page shows, measured in the page: every image decoded, its laid-out size.
MEASURE = """(async () => {
  const images = [...document.images];
  await Promise.all(images.map(i => i.decode().catch(() => null)));
  const box = e => { const r = e.getBoundingClientRect(); return [r.width, r.height]; };
  return {
    verdict: [...document.querySelectorAll('h2')].map(h => h.innerText).filter(
      t => t.startsWith('Verdict')),
    images: images.map(i => ({alt: i.alt, natural: [i.naturalWidth, i.naturalHeight],
                              box: box(i), complete: i.complete})),
    svgs: [...document.querySelectorAll('svg')].map(box),
  };
})()"""


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevTools]:
    found = find_browser()
    if found is None:
        message = f"no Chromium or Chrome on PATH ({', '.join(BROWSERS)}): {INSTALL}"
        if os.environ.get("CI"):  # CI must run this test, never skip it
            pytest.fail(message)
        pytest.skip(message)
    tools = DevTools(found, tmp_path_factory.mktemp("profile"))
    try:
        yield tools
    finally:
        tools.close()


def test_the_page_loads_without_errors_and_shows_the_verdict_and_every_chart(
    rendered: Path, browser: DevTools
) -> None:
    target = browser.call("Target.createTarget", url="about:blank")["targetId"]
    session = browser.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
    for domain in ("Page", "Runtime", "Log", "Network"):
        browser.call(f"{domain}.enable", session)
    browser.call("Page.navigate", session, url=(rendered / "report.html").as_uri())
    browser.wait_for("Page.loadEventFired")
    shown = browser.call(
        "Runtime.evaluate", session, expression=MEASURE, awaitPromise=True, returnByValue=True
    )["result"]["value"]
    assert shown["verdict"] == ["Verdict: ❌ regression — v2 against v1"]
    charts = (rendered / "report.md").read_text().count("![")
    assert len(shown["images"]) + len(shown["svgs"]) == charts >= 4
    for image in shown["images"]:
        assert image["complete"] and min(image["natural"]) > 0, image["alt"]  # decoded
        assert min(image["box"]) > 100, image["alt"]  # laid out at a visible size
    assert all(min(box) > 100 for box in shown["svgs"])
    errors = [e for e in browser.events if is_error(e)]
    assert not errors, errors
    requests = [
        e["params"]["request"]["url"]
        for e in browser.events
        if e.get("method") == "Network.requestWillBeSent"
    ]
    assert requests and all(u.startswith(("file:", "data:")) for u in requests), requests


def is_error(event: dict[str, Any]) -> bool:
    """A console error, an uncaught exception, or a browser log entry at error level (a
    resource that failed to load is one)."""
    method, params = event.get("method"), event.get("params", {})
    if method == "Runtime.exceptionThrown":
        return True
    if method == "Runtime.consoleAPICalled":
        return params.get("type") in ("error", "assert")
    return method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error"
