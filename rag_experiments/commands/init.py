"""`rag-exp init DIR`: a project folder for one's own documents, beside no copy of this repository."""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path

from ..errors import UserError

NEXT_STEPS = """\
# {name}: retrieval experiments on your own documents

Made by `rag-exp init`. The tool's configs come with the package; `conf/` here adds yours
(`conf/project.yaml` selects the corpus and golden set below; more groups and presets can go
next to them). Run every command from this folder (or set `RAG_EXP_HOME` to it).

| what | where |
|---|---|
| corpus | `{corpus}` (`conf/corpus/{name}.yaml`) |
| golden set | `experiments/golden/{name}.jsonl` (append-only; `conf/golden/{name}.yaml`) |
| MLflow store | `mlruns/` (or `$MLFLOW_TRACKING_URI`) |
| database | an embedded PostgreSQL under `.rag-exp/` (or `$DATABASE_URL`), the conversion cache beside it |
| champion | registered model `rag-retriever-{name}`, alias `champion` (`rag-exp promote`); `experiments/promoted/` |

## Next steps

```bash
rag-exp golden generate -n 100            # an LLM writes the questions sampled passages answer ($ANTHROPIC_API_KEY)
rag-exp golden add --query "..." --source-uri DOC --quote "..." --author you   # or write cases by hand
rag-exp golden label                      # the judge labels near-misses of the objective's top k (recall@5: 5)
rag-exp golden spotcheck                  # you check the judge: its labels count once it agrees with you
```

Without an LLM key, write the cases and label the hits yourself:

```bash
rag-exp corpus show DOC --grep "TEXT"     # the converted text a quote must match, with line numbers
rag-exp golden add --kind exact --query "What does OPTION_NAME do?" --source-uri DOC --quote "..."
rag-exp golden add --kind paraphrase --query "..." --source-uri DOC --quote "..."   # other words than the text
rag-exp run -m retrieval=vector,keyword,hybrid,hybrid_rerank   # then label the sweep's pool by hand:
rag-exp golden label --by-hand --sweep PARENT_ID          # to the objective's depth (recall@5: the top 5; -k 10 for MRR@10, nDCG@10)
rag-exp golden label --decide RUN_A RUN_B --by-hand       # or only what decides between two runs, until settled
```

Then measure:

```bash
rag-exp run                               # the default experiment on your documents
rag-exp run -m retrieval=vector,keyword,hybrid   # a sweep: one MLflow parent, one child per point
rag-exp compare --last-sweep              # paired tests between the points
rag-exp promote                           # the winner becomes the champion (conf/experiment/promoted.yaml)
rag-exp gate --run-now                    # what the nightly workflow runs (.github/workflows/nightly.yml)
```
"""

NIGHTLY = """\
# Nightly retrieval gate (made by `rag-exp init`): re-run the promoted config and compare it with
# the champion by a paired test over the golden cases; fails on a significant regression.
# Optional secrets: MLFLOW_TRACKING_URI (a shared store with the registry), DATABASE_URL.
name: nightly retrieval gate
on:
  schedule:
    - cron: "23 3 * * *"
  workflow_dispatch:
permissions:
  contents: read
jobs:
  gate:
    runs-on: ubuntu-latest
    timeout-minutes: 60
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: "3.11"
      - name: Use the tracking store and database from secrets, when set
        env:
          SECRET_MLFLOW_TRACKING_URI: ${{{{ secrets.MLFLOW_TRACKING_URI }}}}
          SECRET_DATABASE_URL: ${{{{ secrets.DATABASE_URL }}}}
        run: |
          if [ -n "$SECRET_MLFLOW_TRACKING_URI" ]; then echo "MLFLOW_TRACKING_URI=$SECRET_MLFLOW_TRACKING_URI" >> "$GITHUB_ENV"; fi
          if [ -n "$SECRET_DATABASE_URL" ]; then echo "DATABASE_URL=$SECRET_DATABASE_URL" >> "$GITHUB_ENV"; fi
      - name: Install the tool
        # where your team gets rag-experiments: set the repository variable RAG_EXPERIMENTS_REQUIREMENT
        # (a git URL, a wheel on your index); the default is the version that made this project
        env:
          REQUIREMENT: ${{{{ vars.RAG_EXPERIMENTS_REQUIREMENT }}}}
        run: pip install "${{REQUIREMENT:-{requirement}}}"
      - name: Gate the promoted config against the champion
        run: rag-exp gate --run-now --markdown-summary "$GITHUB_STEP_SUMMARY"
      - name: Objective over time
        if: always()
        run: rag-exp history --markdown-summary "$GITHUB_STEP_SUMMARY"
"""

GITIGNORE = """\
mlruns/*
!mlruns/.gitkeep
.rag-exp/
outputs/
multirun/
experiments/golden/.*.lock
experiments/promoted/.*.lock
"""


def register(sub) -> None:
    p = sub.add_parser(
        "init", help="scaffold a project folder for your own documents",
        description="Writes conf/corpus/NAME.yaml, conf/golden/NAME.yaml and conf/project.yaml (the packaged "
        "default experiment with that corpus and golden set), an empty golden set with its manifest under "
        "experiments/golden/, a nightly workflow, a .gitignore and a README of next steps. Refuses a folder "
        "that is not empty unless --add; never overwrites a file (a golden set least of all).")
    p.add_argument("dir", help="the project folder (created when missing)")
    p.add_argument("--corpus", default=None,
                   help="folder of your documents (default DIR/corpus, created empty); a relative path is "
                   "taken from where you run init (else from DIR); inside DIR it is written relative to DIR")
    p.add_argument("--name", default=None, help="name of the corpus and golden set (default: the folder's name)")
    p.add_argument("--add", action="store_true", help="add to a folder that is not empty (existing files kept)")
    p.set_defaults(func=cmd_init)


def _name(raw: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_-]+", "_", raw).strip("_").lower()
    if not name:
        raise UserError(f"--name: {raw!r} has no letters or digits to name the corpus after")
    return name


def corpus_setting(corpus_dir: Path, root: Path) -> tuple[str, str | None]:
    """``corpus.path`` as the project's config writes it, and a note when a clone may not find it:
    relative to the project when the corpus lies inside it (``corpus``) or beside it
    (``../docs``: one repository holding both), absolute only when it can be neither."""
    if corpus_dir.is_relative_to(root):
        return corpus_dir.relative_to(root).as_posix() or ".", None
    if root.parent != root and corpus_dir.is_relative_to(root.parent):
        rel = Path(os.path.relpath(corpus_dir, root)).as_posix()
        return rel, (f"the corpus lies beside the project ({rel}), not in it: commit them together (one "
                     "repository) or a clone of the project alone, such as the nightly workflow's checkout, "
                     f"has no documents; or move them into {root / 'corpus'}")
    return str(corpus_dir), (f"corpus path written absolute ({corpus_dir}): it lies neither in nor beside "
                             f"{root}, so it is written absolute, and a clone elsewhere (the nightly workflow's "
                             f"runner) will not find it; move or copy the documents into {root / 'corpus'} and set "
                             "path: corpus in the project's conf/corpus/ file")


def conversion_sources(corpus_dir: Path, cache_before: Path) -> list[Path]:
    """Where a corpus's earlier conversions may be: the cache of the folder init runs from, every
    cache this user converted into (corpus.convert_cache.known_caches, from any folder), and the
    ``.rag-exp/convert-cache`` of the corpus folder and of each folder above it."""
    from ..corpus.convert_cache import known_caches

    near = [folder / ".rag-exp" / "convert-cache" for folder in (corpus_dir, *corpus_dir.parents)]
    found = [cache_before, *known_caches(), *(c for c in near if c.is_dir())]
    return list(dict.fromkeys(p.resolve() for p in found))


def _seed_conversions(corpus_dir: Path, cache_before: Path, target: Path) -> int:
    """Copy the corpus's conversions found in :func:`conversion_sources` into the project's cache;
    say where they came from, or, when the corpus has files to convert and none was found, where
    init looked."""
    from ..corpus.convert_seed import seed
    from ..corpus.loader import corpus_files

    if all(fmt in ("md", "unsupported", "link") for _, fmt in corpus_files(corpus_dir)):
        return 0  # Markdown is read as it is: nothing was ever converted
    copied = 0
    sources = [p for p in conversion_sources(corpus_dir, cache_before) if p != target.resolve()]
    for source in sources:
        n = seed(corpus_dir, source, target)
        if n:
            print(f"  copied {n} conversion(s) of the corpus from {source} into the project's cache")
        copied += n
    if not copied:
        looked = ", ".join(str(p) for p in sources) or "nowhere: no conversion cache exists yet"
        print(f"  no earlier conversion of the corpus found (looked in {looked}); the first run converts it")
    return copied


def cmd_init(args) -> int:
    from .. import __version__
    from ..corpus.convert_cache import default_cache_dir
    from ..corpus.loader import corpus_files
    from ..golden.golden_file import GoldenFile

    root = Path(args.dir).expanduser().resolve()
    if root.exists() and not root.is_dir():
        raise UserError(f"{root}: exists and is not a folder")
    if root.is_dir() and any(root.iterdir()) and not args.add:
        raise UserError(f"{root}: not empty", hint="pass --add to add a project to it (existing files are kept)")
    name = _name(args.name or root.name)
    corpus_dir = Path(args.corpus or "corpus").expanduser()
    if not corpus_dir.is_absolute():
        # what a shell user means by `init evals --corpus our-docs`: ./our-docs; a folder named
        # relative to the project (DIR/docs) still works when there is none here
        here = Path.cwd() / corpus_dir
        corpus_dir = here.resolve() if args.corpus and here.is_dir() else root / corpus_dir
    if args.corpus and not corpus_dir.is_dir():
        raise UserError(f"--corpus: {args.corpus} is not a folder (looked in {Path.cwd()} and {root})",
                        hint="point it at the folder of your documents")
    corpus_dir = corpus_dir.resolve()
    corpus, note = corpus_setting(corpus_dir, root)
    cache_before = default_cache_dir()  # where `rag-exp corpus convert` put its conversions before the project
    corpus_dir.mkdir(parents=True, exist_ok=True)
    golden = root / "experiments" / "golden" / f"{name}.jsonl"
    files = {
        root / "conf" / "corpus" / f"{name}.yaml":
            f"# your documents ({'rag-exp init'}); spans of the golden set index into their text\npath: {corpus}\n"
            f"name: {name}\n",
        root / "conf" / "golden" / f"{name}.yaml":
            f"# the frozen golden set for corpus {name} (append-only; its sha256 is its version)\n"
            f"path: experiments/golden/{name}.jsonl\n",
        root / "conf" / "project.yaml":
            "# this project's default experiment: the packaged one, with this project's corpus and golden set\n"
            "# (rag-exp run composes it; a preset: rag-exp run experiment=NAME, from conf/experiment/ here or\n"
            "# the package)\ndefaults:\n  - config\n"
            f"  - override corpus: {name}\n  - override golden: {name}\n  - _self_\n\n"
            f"# the project's name: its champion is registered as rag-retriever-{name} (rag-exp promote)\n"
            f"hydra:\n  job:\n    name: {name}\n",
        root / ".github" / "workflows" / "nightly.yml": NIGHTLY.format(requirement=f"rag-experiments=={__version__}"),
        root / ".gitignore": GITIGNORE,
        root / "README.md": NEXT_STEPS.format(name=name, corpus=corpus),
        root / "mlruns" / ".gitkeep": "",
    }
    written, kept = [], []
    for path, text in files.items():
        if path.exists():
            kept.append(path)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    if golden.exists():
        kept.append(golden)
    else:
        GoldenFile(golden).append([])  # the manifest of the empty set (0 records), before the file exists
        golden.touch()
        written += [golden, golden.with_name(f"{name}.manifest.json")]
    for p in written:
        print(f"  wrote {p.relative_to(root)}")
    for p in kept:
        print(f"  kept  {p.relative_to(root)} (exists)")
    if note:
        print(f"  note: {note}")
    _seed_conversions(corpus_dir, cache_before, default_cache_dir(root))
    formats = Counter(fmt for _, fmt in corpus_files(corpus_dir) if fmt not in ("unsupported", "link"))
    kinds = ", ".join(f"{n} {fmt}" for fmt, n in sorted(formats.items()))
    print(f"project {name} in {root}: corpus {corpus_dir} ({sum(formats.values())} documents"
          f"{': ' + kinds if kinds else ''})")
    if os.environ.get("ANTHROPIC_API_KEY"):
        print(f"next: cd {root} && rag-exp golden generate -n 100   (README.md lists the steps)")
    else:  # no key: the way in that needs none
        print(f"next: cd {root} && rag-exp corpus show DOC --grep TEXT, then rag-exp golden add "
              "--kind exact|paraphrase --query ... --source-uri DOC --quote ...   (no LLM key set: README.md lists "
              "the steps)")
    return 0
