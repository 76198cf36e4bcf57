"""MkDocs hook: fills the reference pages from the code when the site is built.

``docs/reference/config.md``, ``cli.md`` and ``metrics.md`` hold their generated part between
``<!-- generated: NAME -->`` and ``<!-- end generated: NAME -->`` (committed, so the pages read on
GitHub; ``python -m devtools.docs_reference --write`` refreshes them and
tests/docs/test_reference.py fails when they drift). At build time the region is replaced by a
fresh rendering of :func:`devtools.docs_reference.render` (the params dataclasses and the
packaged YAML, the ``rag-exp`` argument parser, the metric families), so the site cannot drift
from the code either. A marker naming no generator fails the build.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _reference():
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))  # a checkout without `pip install -e .`
    from devtools import docs_reference

    return docs_reference


def on_page_markdown(markdown: str, page, config, files) -> str:
    if "<!--" not in markdown or "generated:" not in markdown:
        return markdown
    ref = _reference()
    try:
        return ref.fill(markdown, markers=False, where=page.file.src_uri)
    except KeyError as exc:
        from mkdocs.exceptions import PluginError

        raise PluginError(str(exc.args[0])) from None


def on_serve(server, config, builder):
    """`make docs`: a change to the code the reference is generated from rebuilds the site too."""
    for folder in ("rag_experiments/conf", "rag_experiments/commands"):
        server.watch(str(ROOT / folder))
    for module in ("devtools/docs_reference.py", "rag_experiments/config.py", "rag_experiments/cli.py"):
        server.watch(str(ROOT / module))
    return server
