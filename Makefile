# Two commands on a fresh machine (Python >= 3.11):
#   make run    set up, then run the default experiment end to end (embedded defaults)
#   make test   set up, then run the test suite (real PostgreSQL + pgvector, real MLflow store)
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin

.PHONY: setup setup-test run test bench demo-vectors bench-scale ui serve clean-db scale-demo docs docs-numbers

# The installer is uv (from PyPI, into the venv): the same pins and the same resolution as pip, in a
# fraction of pip's ~4.5 min for the test extras on this kind of machine. As pip does, it copies
# files (uv's default hard links into its cache are refused by llama-index's path checks) and
# compiles them to bytecode (without it, Ray's worker processes compiled Ray on every import: after
# a whole test run not one of Ray's 2,579 modules had a .pyc). uv does not read pip's configuration, so the wheel folders pip is
# configured to look in (a machine's local wheels, such as the CPU build of torch that [rerank]
# pins) are passed on to it.
PIP_FIND_LINKS ?=
FIND_LINKS = $(wildcard $(sort $(PIP_FIND_LINKS) $(shell $(PYTHON) -m pip config get global.find-links 2>/dev/null)))
UV_INSTALL = $(BIN)/uv pip install --quiet --link-mode copy --compile-bytecode --python $(BIN)/python \
             $(foreach d,$(FIND_LINKS),--find-links $(d))

# the package, its test tools and the Hydra sweep plugins (no torch)
setup: $(VENV)/.installed

# a .venv made before uv was the installer gets it here
$(BIN)/uv:
	$(BIN)/pip install --quiet 'uv>=0.13,<0.14'

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet 'uv>=0.13,<0.14'
	$(UV_INSTALL) --upgrade pip
	$(UV_INSTALL) -e '.[test,sweep]'
	touch $@

# + the [rerank] extra (torch CPU, sentence-transformers: the cross-encoder plumbing test),
# the [api] extra (voyageai, openai, cohere SDKs, tested against local stubs) and the [ray] extra
# (the Ray cluster test) and the [integrations] extra (LangChain, LlamaIndex: examples/ measured as
# external retrievers)
setup-test: $(VENV)/.installed-test

$(VENV)/.installed-test: $(VENV)/.installed $(BIN)/uv
	$(UV_INSTALL) -e '.[test,sweep,rerank,api,ray,integrations,docs]'
	touch $@

run: setup
	$(BIN)/python run.py

# two workers, each test file on one of them (module fixtures such as the Ray cluster stay whole).
# --no-loadscope-reorder: files are handed out in the order tests/conftest.py sorts them (the Ray
# cluster and the tutorials first); xdist's default hands out files with the most tests first,
# which started the demo tutorial (then ~5-10 min; ~2 min since the demo ships its vectors) eight
# minutes into the run and left it running alone
test: setup-test
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=30

bench: setup
	$(BIN)/python -m rag_experiments.bench

# the demo's shipped vectors (rag_experiments/data/demo_vectors.npz): the bundled model's vectors of
# the default chunking's texts, read at ingest instead of embedding them (embedding/shipped.py).
# Re-make after changing the demo corpus, the default chunking or the model; a test says when.
demo-vectors: setup
	$(BIN)/python -m devtools.shipped_make

# cost per corpus size: synthetic corpora of 10k and 100k chunks (SCALE_ARGS=--million adds 1M),
# each in a throwaway PostgreSQL and MLflow store; rows per size and their growth exponents.
# CRANFIELD=DIR (a folder holding cran.all.1400) adds its abstracts to the sentence pool.
SCALE_ARGS ?=
bench-scale: setup
	nice -n 10 $(BIN)/python -m rag_experiments.bench_scale $(if $(CRANFIELD),--cranfield $(CRANFIELD)) $(SCALE_ARGS)

# PostgreSQL over TCP with a password, an mlflow server and a 2-node Ray cluster on loopback,
# then an 8-point sweep on them (tests/scale/test_ray_cluster.py runs 4 of its kind); prints where to look
scale-demo: setup $(BIN)/uv
	$(UV_INSTALL) -e '.[ray]'
	$(BIN)/python -m devtools.scale_demo

# opens on MLflow 3's GenAI overview otherwise: the URL printed is the runs table ("Model training")
UI_PORT ?= 5000
ui: setup
	@$(BIN)/python -c "from rag_experiments.tracking.mlflow_run import print_ui_url; print_ui_url('http://127.0.0.1:$(UI_PORT)')"
	$(BIN)/mlflow ui --backend-store-uri sqlite:///$(CURDIR)/mlruns/mlflow.db --port $(UI_PORT) --workers 1

# the champion over HTTP: the registry is re-populated from experiments/promoted/ first and the
# venv's bin folder leads PATH (mlflow models serve --env-manager local execs uvicorn from there)
SERVE_PORT ?= 5001
serve: setup
	$(BIN)/rag-exp serve -p $(SERVE_PORT) -w 1

# the documentation site on http://127.0.0.1:8000 (reloads on edits of docs/ and of the code the
# reference pages are generated from); installs the [docs] extra (MkDocs, Material) first if needed
DOCS_PORT ?= 8000
docs: setup $(BIN)/uv
	@$(BIN)/python -c "import mkdocs, material" 2>/dev/null || $(UV_INSTALL) -e '.[docs]'
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve -a 127.0.0.1:$(DOCS_PORT)

# the demo's headline numbers the README and docs quote: a fresh run (own database, 1-13 min on 2
# cores) rewrites docs/_data/demo_numbers.json, then every quoted row (tools/demo_numbers.py)
docs-numbers: setup
	$(BIN)/python tools/demo_numbers.py --measure --write-pages

clean-db:
	-$(BIN)/rag-exp db stop
	rm -rf .rag-exp
