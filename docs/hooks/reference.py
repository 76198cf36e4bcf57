"""MkDocs hook: fills the reference pages from the code when the site is built.

``docs/reference/config.md``, ``cli.md`` and ``metrics.md`` are short committed stubs holding a
marker such as ``<!-- generated: config -->``; at build time the marker is replaced by the
Markdown of :func:`rag_experiments.docs_reference.render` (the params dataclasses and the
packaged YAML, the ``rag-exp`` argument parser, the metric families), so the pages cannot drift
from the code. A marker naming no generator fails the build.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"<!--\s*generated:\s*(?P<name>[\w-]+)\s*-->")


def _reference():
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))  # a checkout without `pip install -e .`
    from rag_experiments import docs_reference

    return docs_reference


def on_page_markdown(markdown: str, page, config, files) -> str:
    if "<!--" not in markdown or not MARKER.search(markdown):
        return markdown
    ref = _reference()

    def fill(m: re.Match) -> str:
        name = m.group("name")
        if name not in ref.GENERATORS:
            from mkdocs.exceptions import PluginError

            raise PluginError(f"{page.file.src_uri}: no generator {name!r} (known: {', '.join(ref.GENERATORS)})")
        return ref.render(name)

    return MARKER.sub(fill, markdown)


def on_serve(server, config, builder):
    """`make docs`: a change to the code the reference is generated from rebuilds the site too."""
    for folder in ("rag_experiments/conf", "rag_experiments/commands"):
        server.watch(str(ROOT / folder))
    for module in ("rag_experiments/docs_reference.py", "rag_experiments/config.py", "rag_experiments/cli.py"):
        server.watch(str(ROOT / module))
    return server
