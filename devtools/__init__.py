"""Developer tooling of this repository, kept out of the runtime package (issue 46 item 3): not
installed by ``pip install`` (pyproject.toml packages only ``rag_experiments`` and ``hydra_plugins``);
run from the repository's root.

* ``docs_reference``: the generated reference pages (``python -m devtools.docs_reference --write``,
  ``--check``; the MkDocs hook and tests/docs/test_reference.py use it);
* ``shipped_make``: the demo's shipped vectors (``make demo-vectors``);
* ``demo_selection``: how the demo corpus's pages were chosen from the PostgreSQL manual;
* ``scale_demo``: ``make scale-demo`` (PostgreSQL with a password, an MLflow server and a Ray
  cluster on loopback, then a sweep on them).

``rag-exp bench`` (``rag_experiments/bench.py``, ``bench_scale.py``, ``bench_startup.py``) stays in
the package: it is a user command (the HNSW noise floor, a team's own cost per corpus size).
"""
