"""Screenshots of two docs pages issue 48 changed, from any checkout: the "before" and "after".

    git archive f7ba5d8 | tar -x -C /tmp/before_docs       # the commit before ffe2fd0, issue 48's docs pass
    python tools/docs_screenshots.py --tree /tmp/before_docs --out test-artifacts/browser/before
    python tools/docs_screenshots.py --tree . --out test-artifacts/browser/after

Builds the tree's MkDocs site with this venv's mkdocs (the tree's own package first on PYTHONPATH,
so its docs hooks generate its own reference pages), serves it on 127.0.0.1 and shoots, in Debian's
Chromium through Playwright (/usr/bin/chromium, nothing downloaded), 1600x1000:

* ``6-docs-config-reference.png``: the configuration reference at ``corpus.name``, whose type
  rendered as ``str \\| None`` before the generated reference was fixed (ffe2fd0), with the page's
  table of contents beside it;
* ``7-docs-demo-numbers.png``: the demo tutorial's headline numbers, which now come from
  ``docs/_data/demo_numbers.json`` and say which golden version and date they were measured on.

Prints, per page, the literal ``\\|`` and ``&gt;`` escapes counted in the built HTML.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--no-first-run"]
PAGES = (
    # (file name, page path, the element to scroll to (a Playwright selector), pixels shown above it)
    ("6-docs-config-reference", "reference/config/", "#corpus-name, #corpusname", 120),  # the anchor was renamed
    ("7-docs-demo-numbers", "tutorials/demo/", 'pre:has-text("kind=exact") >> nth=0', 250),
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build_site(tree: Path, site: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(tree), "NO_MKDOCS_2_WARNING": "1"}
    mkdocs = Path(sys.executable).with_name("mkdocs")
    done = subprocess.run([str(mkdocs), "build", "-q", "-d", str(site)], cwd=tree, env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"error: mkdocs build in {tree} failed (exit {done.returncode}): {done.stderr.strip()[-800:]}")


def escapes(site: Path, page: str) -> dict[str, int]:
    html = (site / page / "index.html").read_text(encoding="utf-8")
    return {"\\|": html.count("\\|"), "&gt; in code": len(re.findall(r"<code>[^<]*&amp;gt;", html))}


def shoot(site: Path, out: Path) -> list[Path]:
    from playwright.sync_api import sync_playwright

    port = _free_port()
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:  # noqa: D102 - no line per request
            pass

    handler = functools.partial(Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    out.mkdir(parents=True, exist_ok=True)
    made = []
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            try:
                for name, page_path, selector, above in PAGES:
                    page = browser.new_page(viewport={"width": 1600, "height": 1000})
                    page.goto(f"http://127.0.0.1:{port}/{page_path}", wait_until="load")
                    target = page.locator(selector).first
                    if target.count():
                        target.scroll_into_view_if_needed()
                        page.evaluate(f"window.scrollBy(0, -{above})")  # what leads to it too
                    path = out / f"{name}.png"
                    page.screenshot(path=str(path))
                    page.close()
                    made.append(path)
            finally:
                browser.close()
    finally:
        server.shutdown()
    return made


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", type=Path, required=True, help="a checkout of this repository (holds mkdocs.yml)")
    ap.add_argument("--out", type=Path, required=True, help="folder for the PNG files")
    args = ap.parse_args(argv)
    tree = args.tree.resolve()
    if not (tree / "mkdocs.yml").is_file():
        print(f"error: --tree {tree}: no mkdocs.yml there (a checkout of this repository?)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="docs_shots_") as tmp:
        site = Path(tmp) / "site"
        build_site(tree, site)
        for _name, page, _sel, _above in PAGES:
            print(f"{page}: " + ", ".join(f"{k} {v}" for k, v in escapes(site, page).items()))
        for path in shoot(site, args.out):
            print(f"wrote {path} ({path.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
