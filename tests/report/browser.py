"""A real headless Chromium for the report's tests: the DOM it builds, and the boxes it lays out."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# Run after the page's own scripts: for every inline SVG, its box and every text in it as the browser drew it.
# A text is an SVG <text> element or a group that matplotlib opens with the text as a comment (its glyphs are
# paths), with the tick or legend it is in; a line's markers and the ticks' marks give their centres.
PROBE = """<script>
(() => {
  const box = (el) => { const r = el.getBoundingClientRect(); return {left: r.left, top: r.top, right: r.right, bottom: r.bottom}; };
  const centre = (el) => { const r = el.getBoundingClientRect(); return (r.left + r.right) / 2; };
  const comments = (root) => {
    const found = [], walker = document.createTreeWalker(root, NodeFilter.SHOW_COMMENT);
    for (let c = walker.nextNode(); c; c = walker.nextNode()) found.push(c);
    return found;
  };
  const charts = [...document.querySelectorAll("svg")].map((svg) => {
    const texts = [...svg.querySelectorAll("text")].map((t) => ({label: t.textContent, box: box(t)}));
    for (const c of comments(svg)) {
      const within = c.parentNode.closest("[id^=xtick_],[id^=ytick_],[id$=-legend]");
      texts.push({label: c.data.trim(), id: c.parentNode.id, within: within ? within.id : null, box: box(c.parentNode)});
    }
    const ticks = [...svg.querySelectorAll("[id^=xtick_]")].map((t) => ({
      label: comments(t).map((c) => c.data.trim())[0], x: centre(t.querySelector("use")),
    }));
    const lines = {};
    for (const g of svg.querySelectorAll("g[id*='-line-']")) lines[g.id] = [...g.querySelectorAll("use")].map(centre);
    const figure = svg.closest("figure");
    return {svg: box(svg), texts, ticks, lines,
            name: figure ? figure.id : null, data: figure ? JSON.parse(figure.dataset.chart) : null};
  });
  const pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify(charts);
  document.body.appendChild(pre);
})();
</script>"""


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed in CI")
        pytest.skip("chromium not installed")
    return found


def dump_dom(url: str, profile: Path, *flags: str) -> str:
    """The DOM Chromium serialises once ``url`` has loaded and its scripts have run."""
    done = subprocess.run(
        [chromium(), *CHROMIUM_FLAGS, *flags, f"--user-data-dir={profile}", "--dump-dom", url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.stdout


def screenshot(url: str, profile: Path, shot: Path, size: str = "1200,1600") -> Path:
    subprocess.run(
        [
            chromium(),
            *CHROMIUM_FLAGS,
            f"--user-data-dir={profile}",
            f"--screenshot={shot}",
            f"--window-size={size}",
            url,
        ],
        capture_output=True,
        timeout=120,
    )
    return shot


def laid_out_charts(page: Path, scratch: Path) -> list[dict[str, Any]]:
    """Every chart of ``page`` as Chromium lays it out (see ``PROBE``): the page itself, with the probe
    appended after its own scripts, opened at a fixed window size."""
    probed = scratch / f"probed-{page.parent.name}-{page.name}"
    probed.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    dom = dump_dom(f"file://{probed}", scratch / f"profile-{page.parent.name}", "--window-size=1300,1400")
    assert '<pre id="probe">' in dom, dom[-2000:]
    raw = dom.split('<pre id="probe">')[1].split("</pre>")[0]
    return json.loads(
        raw.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"').replace("&amp;", "&")
    )
