"""Install hints fit how the tool was installed (issue 58 item 5): PEP 610's direct_url.json says
an editable clone, a local folder, a git URL or (absent) a package index."""

from __future__ import annotations

import json
from importlib import metadata

import pytest

from rag_experiments.install_hint import install_hint


def test_the_hint_names_the_clone_of_an_editable_install_and_the_index_otherwise():
    clone = {"url": "file:///home/me/rag%20experiments", "dir_info": {"editable": True}}
    assert install_hint("api", clone).startswith("pip install -e '/home/me/rag experiments[api]'")
    folder = {"url": "file:///src/rag", "dir_info": {}}
    assert install_hint("rerank", folder).startswith("pip install '/src/rag[rerank]'")
    git = {"url": "https://example.org/rag.git", "vcs_info": {"vcs": "git", "commit_id": "abc123"}}
    assert install_hint("api", git) == "pip install 'rag-experiments[api] @ git+https://example.org/rag.git@abc123'"
    assert install_hint("api", {}) == "pip install 'rag-experiments[api]'"  # an index install records none


def test_this_installation_gets_its_own_hint():
    text = next((t for d in metadata.distributions(name="rag-experiments") if (t := d.read_text("direct_url.json"))),
                None)
    if not text:
        pytest.skip("installed from a package index: the default hint is the right one")
    info = json.loads(text)
    if "dir_info" in info and info["dir_info"].get("editable"):
        assert install_hint("api").startswith("pip install -e '")
        assert "[api]'" in install_hint("api")
