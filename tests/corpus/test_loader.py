from __future__ import annotations

import pytest

from rag_experiments.corpus.loader import corpus_manifest, load_corpus
from rag_experiments.errors import CorpusError


def _write(folder, name, text):
    (folder / name).write_text(text, encoding="utf-8")


def test_front_matter_and_plain_markdown(tmp_path):
    _write(tmp_path, "a.md", "---\nsource_uri: x/a.html\ntitle: A: the first\ndoc_type: reference\n---\n# A\n\nBody.\n")
    _write(tmp_path, "b.md", "# Bee\n\nPlain markdown.\n")
    docs = {d.doc_id: d for d in load_corpus(tmp_path)}
    a, b = docs["x/a.html"], docs["b.md"]
    assert (a.doc_id, a.title, a.doc_type, a.text) == ("x/a.html", "A: the first", "reference", "# A\n\nBody.\n")
    assert (b.doc_id, b.title, b.doc_type) == ("b.md", "Bee", "doc")


def test_demo_corpus_loads():
    docs = load_corpus("demo")
    assert len(docs) >= 150 and {"reference", "config", "errcodes", "functions", "fulltext", "indexes",
                                 "tutorial"} <= {d.doc_type for d in docs}
    assert corpus_manifest(docs)["n_documents"] == len(docs)


@pytest.mark.parametrize("name, content, needle", [
    ("empty.md", b"---\ntitle: E\n---\n   \n", "empty"),
    ("latin.md", "caf\xe9 cr\xe8me".encode("latin-1"), "not valid UTF-8"),
    ("broken.md", b"---\ntitle: no closing\n# x\n", "closing"),
])
def test_bad_documents_name_the_file(tmp_path, name, content, needle):
    (tmp_path / name).write_bytes(content)
    with pytest.raises(CorpusError) as err:
        load_corpus(tmp_path)
    assert name in str(err.value) and needle in str(err.value)


def test_duplicate_ids_and_missing_folders(tmp_path):
    _write(tmp_path, "a.md", "---\nsource_uri: same\n---\nA\n")
    _write(tmp_path, "b.md", "---\nsource_uri: same\n---\nB\n")
    with pytest.raises(CorpusError, match="duplicate document id 'same'"):
        load_corpus(tmp_path)
    with pytest.raises(CorpusError, match="does not exist"):
        load_corpus(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CorpusError, match="no .md files"):
        load_corpus(tmp_path / "empty")


def test_unreadable_file(tmp_path):
    import os

    _write(tmp_path, "a.md", "A\n")
    os.symlink(tmp_path / "missing-target.md", tmp_path / "dangling.md")
    with pytest.raises(CorpusError, match="dangling.md: cannot read"):
        load_corpus(tmp_path)
