"""The install command for an extra that fits how this package was installed (issue 58 item 5).

An editable clone (``make setup``, ``pip install -e .``) needs ``pip install -e '<clone>[api]'``:
``pip install 'rag-experiments[api]'`` there would fetch the package from an index on top of the
clone. pip records how a distribution was installed in its ``direct_url.json`` (PEP 610): absent
for an index install, ``dir_info`` for a local folder (``editable`` for -e), ``vcs_info`` for a
git URL, ``archive_info`` for a wheel or sdist file.
"""

from __future__ import annotations

import json
from importlib import metadata
from urllib.parse import unquote, urlparse

DIST = "rag-experiments"


def _direct_url() -> dict | None:
    # every distribution of the name on the path, not the first: run from a clone, the working
    # folder's rag_experiments.egg-info (no direct_url.json) comes before the venv's dist-info
    for dist in metadata.distributions(name=DIST):
        text = dist.read_text("direct_url.json")
        if text:
            try:
                return json.loads(text)
            except ValueError:
                return None
    return None


def install_hint(extra: str, direct_url: dict | None = None) -> str:
    """``pip install ...`` adding ``extra`` to this installation (``direct_url``: PEP 610's record,
    read from the installed distribution when not given)."""
    info = direct_url if direct_url is not None else _direct_url()
    url = (info or {}).get("url", "")
    if url.startswith("file://") and "dir_info" in info:
        folder = unquote(urlparse(url).path)
        editable = "-e " if info["dir_info"].get("editable") else ""
        return f"pip install {editable}'{folder}[{extra}]'   (the clone this package was installed from)"
    if "vcs_info" in (info or {}):
        vcs = info["vcs_info"]
        return f"pip install '{DIST}[{extra}] @ {vcs.get('vcs', 'git')}+{url}@{vcs.get('commit_id', '')}'"
    return f"pip install '{DIST}[{extra}]'"
