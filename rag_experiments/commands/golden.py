"""``rag-exp golden``: build, label, check and inspect the append-only golden set.

generate / label / add read the corpus through ``rag_experiments.session.open_retriever`` (imported
lazily: the database is only touched by the commands that need it); ``--set KEY=VALUE`` is passed
through as Hydra overrides (``--set retrieval=hybrid``, ``--set chunking.max_tokens=256``).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from ..errors import GoldenSetError, UserError
from . import drift, generating, labelling
from .drift import excerpt as _excerpt
from .drift import read_quote_file
from .llm_job import (  # noqa: F401 (configured_corpus, configured_llm: callers import them from here too)
    configured_corpus,
    configured_llm,
    console as _console,
    counter_line as _counter_line,
    open_session as _open_session,
    say as _say,
)

DEFAULT_GOLDEN = "experiments/golden/demo.jsonl"
ADD_KINDS = ("exact", "paraphrase", "production", "multi")  # golden.add.KINDS + golden.multi.KIND (not imported at start-up)
ADD_METHODS = ("human", "agent")  # rag_experiments.golden.add.ADD_METHODS


def rates_line(v: dict) -> str:
    """The judge against the human as rates (rag_experiments.golden.spotcheck.judge_rates)."""
    def pct(x):
        return "n/a" if x is None else f"{x:.0%}"

    return (f"true-positive rate {pct(v.get('tpr'))} (of {v.get('human_relevant', 0)} pairs checked YES/PART), "
            f"true-negative rate {pct(v.get('tnr'))} (of {v.get('human_no', 0)} checked NO); prevalence of YES "
            f"{pct(v.get('prevalence_yes'))}, of YES/PART {pct(v.get('prevalence_relevant'))}")


def configured_golden(overrides: list[str] | None = None) -> str:
    """The golden set the configuration names (a project's conf/project.yaml selects its own):
    what --golden defaults to, so `rag-exp golden ...` in a project folder works on its set."""
    from ..conf_source import config_source

    if config_source().name == "config" and not any(o.startswith(("golden", "+golden")) for o in overrides or []):
        return DEFAULT_GOLDEN  # the packaged default: no composition needed
    from ..configured_paths import configured_paths

    return configured_paths(overrides)["golden"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "golden", help="build, label, spot-check and inspect the golden set",
        description="The golden set is an append-only JSONL file (hash-chained, with a manifest): "
        "cases with evidence spans, judgements, retirements. Its sha256 is the golden-set version "
        "every run records.")
    sub = p.add_subparsers(dest="golden_command", metavar="SUBCOMMAND")
    p.set_defaults(func=lambda args: (p.print_help(), 1)[1])

    def golden_arg(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--golden", default=None, metavar="PATH",
                        help=f"golden-set file (default: the configured golden.path: {DEFAULT_GOLDEN}, or the "
                        "project's from rag-exp init)")

    def overrides_arg(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="Hydra override for the retriever/corpus config, repeatable "
                        "(e.g. --set retrieval=hybrid --set chunking.max_tokens=256)")

    def llm_args(sp: argparse.ArgumentParser, concurrency_default: int = 4) -> None:
        from ..llm import DEFAULT_MAX_RETRIES, DEFAULT_MODEL, PROVIDERS

        g = sp.add_argument_group(
            "LLM (provider anthropic: ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL optional; provider openai: any "
            "OpenAI-compatible server at --base-url, OPENAI_API_KEY if it needs a key)")
        g.add_argument("--provider", choices=PROVIDERS, default=None,
                       help="which API answers (default: the configured llm.provider, i.e. anthropic unless "
                       "--set llm.provider=... or the project's config says otherwise)")
        g.add_argument("--base-url", metavar="URL", default=None,
                       help="the server, with its API prefix: http://localhost:8000/v1 (vLLM), "
                       "http://localhost:11434/v1 (Ollama) (default: the configured llm.base_url, else "
                       "ANTHROPIC_BASE_URL / OPENAI_BASE_URL, else the provider's own)")
        g.add_argument("--model", default=None,
                       help=f"model name (default with provider anthropic: {DEFAULT_MODEL}; provider openai: "
                       "required, the name the server serves)")
        g.add_argument("--price", metavar="IN,OUT", help="USD per million input,output tokens, for a model "
                       "missing from the built-in (Anthropic) price table; 0,0 for a model on your own server. "
                       "Without a price nothing is sent (default: the configured llm.price)")
        g.add_argument("--concurrency", type=int, default=concurrency_default,
                       help=f"parallel requests (default: {concurrency_default})")
        g.add_argument("--max-retries", type=int, default=DEFAULT_MAX_RETRIES,
                       help=f"SDK retries on 429/529/5xx/timeouts, with backoff (default: {DEFAULT_MAX_RETRIES})")
        g.add_argument("--timeout", type=float, default=60.0, help="seconds per request (default: 60)")
        g.add_argument("--batch", action="store_true",
                       help="use the Message Batches API (provider anthropic only; half price, up to 24 h); the "
                       "batch id is checkpointed, so rerunning resumes polling instead of resubmitting")
        g.add_argument("--poll-interval", type=float, default=30.0, help="seconds between batch polls (default: 30)")
        g.add_argument("--poll-timeout", type=float, default=None,
                       help="stop polling after this many seconds (rerun later to resume); default: wait")
        g.add_argument("--retry-malformed", action="store_true",
                       help="ask again for items whose earlier answer was unusable (malformed JSON)")
        g.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation of the cost estimate")

    generating.add_parser(sub, golden_arg, llm_args, overrides_arg)

    labelling.add_parser(sub, golden_arg, llm_args, overrides_arg)

    sp = sub.add_parser(
        "spotcheck", help="check the machine judges (LLM, agent) by hand: agreement and Cohen's kappa",
        description="Shows seeded-random machine-judged (judge.kind llm or agent) (question, passage) "
        "pairs with the verdict "
        "hidden; answer y(es) / p(art) / n(o), s to skip, q to quit. Each answer is saved at once "
        "to experiments/spotcheck/<golden stem>.jsonl (not the golden set). Each judge is validated "
        "with >= 30 pairs and <= 10% disagreement; the labels are validated when every judge is. Reads answers from stdin (pipes work).")
    golden_arg(sp)
    sp.add_argument("-n", "--n", type=int, default=30, help="pairs to check in total (default: 30)")
    sp.add_argument("--seed", type=int, default=7, help="pair-order seed (default: 7)")
    sp.add_argument("--author", help="who answers (default: $USER)")
    sp.add_argument("--cases", type=int, metavar="N", default=None,
                    help="check every machine pair of the first N cases of a seeded case order instead (the case "
                    "sample that runs' judge-corrected metrics need: from 30 cases; -n is then unused)")
    mode = sp.add_mutually_exclusive_group()
    mode.add_argument("--report", action="store_true", help="only print the agreement report")
    mode.add_argument("--export", type=Path, metavar="CSV",
                      help="write the next unchecked pairs (up to -n in all) to a new CSV to answer offline: "
                      "judgement_id, question, source_uri, passage and an empty verdict column (the machine's "
                      "verdict is not in it)")
    mode.add_argument("--answers", type=Path, metavar="CSV",
                      help="record the verdicts (YES / PART / NO, y / p / n; empty = skip) of an exported CSV, "
                      "keyed by judgement id; every row is checked before anything is saved")
    sp.set_defaults(func=cmd_spotcheck)

    sp = sub.add_parser(
        "add", help="add a case written by hand: a production failure, or a question of a given --kind",
        description="The expected evidence is a document and a quoted passage (--source-uri with --quote or "
        "--quote-file), or a chunk id (--chunk-id). A quote is found in the document's text as loaded (Markdown as it "
        "is, HTML/PDF/DOCX/PPTX as converted: rag-exp corpus show DOC prints it): verbatim, else through whitespace, "
        "else through whitespace, Markdown markup and case; it must occur once, and the span stored is the matched "
        "span of that text. Adding by quote reads only the corpus files (no database, no embedding); only --chunk-id "
        "opens the retriever's store (and ingests if the chunking is not there yet). A miss prints the closest "
        "passages of the document and the documents where the quote is.")
    golden_arg(sp)
    sp.add_argument("--query", required=True, help="the question, as the user asked it")
    src = sp.add_mutually_exclusive_group(required=True)
    src.add_argument("--source-uri", metavar="DOC", help="the document that answers the query: its source_uri, "
                     "doc_id or unique file stem (rag-exp corpus list); with --quote/--quote-file")
    src.add_argument("--chunk-id", help="a chunk of the configured chunking strategy that answers the query "
                     "(opens the database)")
    q = sp.add_mutually_exclusive_group()
    q.add_argument("--quote", help="the passage of that document that answers the query")
    q.add_argument("--quote-file", type=Path, help="read the passage from this file ('-' = stdin)")
    sp.add_argument("--kind", choices=ADD_KINDS, default="production",
                    help="exact: the question names an identifier (option, parameter, error code, function) that "
                    "the passage holds, what keyword search must find (the gate guards this segment); paraphrase: "
                    "the question in other words than the passage; production: as a user asked it (default); multi: "
                    "the question needs several passages, all of them (give the others with --group)")
    sp.add_argument("--group", nargs=2, action="append", metavar=("DOC", "QUOTE"), default=None,
                    help="with --kind multi (a question that needs several passages, all of them): a further "
                    "evidence group, a document and the passage of it that answers another part; repeat per group "
                    "(--source-uri/--quote is group 0)")
    sp.add_argument("--identifier", metavar="TEXT", help="the identifier an exact question names (default: found "
                    "in the question and the passage); it must occur in both")
    sp.add_argument("--corpus", dest="corpus_folder", default=None, metavar="demo|FOLDER",
                    help="the corpus the quote is in (default: the configured corpus.path: demo, or the project's "
                    "from rag-exp init)")
    sp.add_argument("--author", help="who wrote the case (default: $USER)")
    sp.add_argument("--by", dest="method", choices=ADD_METHODS, default="human",
                    help="what --author is, recorded as provenance.method: human (a person, the default) or agent "
                    "(an AI agent or a script; golden stats counts its cases as generated)")
    sp.add_argument("--note", help="free text kept in the provenance, e.g. the incident or ticket")
    overrides_arg(sp)
    sp.set_defaults(func=cmd_add)

    sp = sub.add_parser(
        "retire", help="take a case out of evaluation (appends a 'retire' record; nothing is edited)",
        description="Appends a `retire` record naming the case, the reason and who. The case line "
        "stays in the file; runs from now on evaluate without it (and record the new golden sha256).")
    golden_arg(sp)
    sp.add_argument("case_id", metavar="CASE_ID", help="the case to retire, e.g. c-0123456789ab")
    sp.add_argument("--reason", required=True, help="why it leaves evaluation (kept in the record)")
    sp.add_argument("--author", help="who retires it (default: $USER)")
    sp.set_defaults(func=cmd_retire)

    sp = sub.add_parser(
        "split", help="freeze a dev/test split of the cases (appends a 'split' record): select on dev, report on test",
        description="Appends a `split` record: within each stratum (kind x doc_type) the cases are ordered by "
        "sha256('SEED:CASE_ID') and the first round(TEST_FRACTION x n) go to test, the rest to dev. A case added "
        "later goes to test when that hash, read as a fraction, is below TEST_FRACTION. Sweeps then choose their "
        "best point on dev; the sweep parent, compare --sweep and promote --sweep report it on test. A second "
        "split needs --replace and --reason (both stay in the file). rag_experiments/golden/split.py.")
    golden_arg(sp)
    sp.add_argument("--seed", type=int, default=13, help="seed of the case hash (default: 13)")
    sp.add_argument("--test-fraction", type=float, default=0.3, help="share of each stratum held out (default: 0.3)")
    sp.add_argument("--replace", action="store_true", help="replace the split in force (needs --reason)")
    sp.add_argument("--reason", default="", help="why (required with --replace)")
    sp.add_argument("--author", help="who freezes it (default: $USER)")
    sp.set_defaults(func=cmd_split)

    sp = sub.add_parser("verify", help="check the hash chain and manifest; print counts",
                        description="Reads the whole file, checking every line's hash chain and "
                        "the manifest (edits, insertions, truncation are reported by line), and that every "
                        "labelled span lies inside its document with its quote at its offsets (spans whose "
                        "document changed are counted as drift: see `golden check`).")
    golden_arg(sp)
    sp.add_argument("--corpus", default=None, metavar="demo|FOLDER",
                    help="the corpus the spans point into (default: the configured corpus.path: demo, or the "
                    "project's from rag-exp init)")
    sp.set_defaults(func=cmd_verify)

    sp = sub.add_parser("stats", help="counts, question quality (overlap, duplicates, coverage), judge validation",
                        description="Counts of cases by kind and doc type, judgements by verdict and "
                        "by judge; the question quality report: content-word overlap of each kind's questions "
                        "with their evidence passage (paraphrases above 0.5 copy their passage and inflate "
                        "scores), near-duplicate questions (Jaccard >= 0.8), cases by doc type against the "
                        "corpus, documents holding more than 5% of the cases (rag_experiments/golden/quality.py); "
                        "and whether the LLM judge is validated by spot-checks.")
    golden_arg(sp)
    sp.add_argument("--corpus", default=None, metavar="demo|FOLDER",
                    help="the corpus, for coverage by doc type (default: the configured corpus.path)")
    sp.set_defaults(func=cmd_stats)

    sp = sub.add_parser(
        "manifest", help="rebuild a missing manifest, after confirming the file is as intended",
        description="The manifest records the golden set's line count and last line hash, so a "
        "truncated file is caught; a run or `golden verify` refuses a golden set without one. "
        "Restore it from git if you can. Otherwise --rebuild shows the file as it is now and asks "
        "you to confirm that nothing was lost (or pass --yes); the rebuild is appended to the "
        "golden set as a `manifest` record (who, why, the line count you vouched for).")
    golden_arg(sp)
    sp.add_argument("--rebuild", action="store_true", required=True, help="rebuild the manifest from the file")
    sp.add_argument("--yes", action="store_true", help="confirm without a prompt that the file is as intended")
    sp.add_argument("--reason", default="manifest missing; file confirmed as intended",
                    help="why, kept in the manifest record")
    sp.add_argument("--author", help="who confirms it (default: $USER)")
    sp.set_defaults(func=cmd_manifest)

    def corpus_arg(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--corpus", default=None, metavar="demo|FOLDER",
                        help="the corpus as it is now: 'demo' (shipped) or a folder of .md files (default: the "
                        "configured corpus.path)")
        sp.add_argument("--fuzzy-threshold", type=float, default=0.85, metavar="X",
                        help="minimum token similarity for a 'fuzzy' re-anchoring (default: 0.85)")

    drift.add_parsers(sub, golden_arg, corpus_arg)

    # subcommands that live in modules of their own, rag_experiments/commands/golden_<name>.py, each
    # with register(sub, golden_arg, corpus_arg): a new one is one file, not more lines here
    import importlib
    import pkgutil

    for info in sorted(pkgutil.iter_modules([str(Path(__file__).parent)]),
                       key=lambda i: i.name):
        if info.name.startswith("golden_"):
            importlib.import_module(f"{__package__}.{info.name}").register(sub, golden_arg, corpus_arg)


# -- helpers -----------------------------------------------------------------------------------
# -- commands ----------------------------------------------------------------------------------
def cmd_spotcheck(args: argparse.Namespace) -> int:
    from ..golden.spotcheck import (answers_command, export_pairs, import_answers, judge_validation, print_report,
                                    run_spotcheck)

    console = _console()
    if args.cases is not None and args.cases < 1:
        raise UserError(f"--cases must be >= 1, got {args.cases}")
    if args.report:
        print_report(judge_validation(args.golden), console)
        return 0
    if args.export is not None:
        n = export_pairs(args.golden, args.export, n=args.n, seed=args.seed, cases=args.cases)
        print(f"wrote {n} pair(s) to {args.export}: fill in the verdict column (YES / PART / NO, empty to skip), "
              f"then: {answers_command(args.golden, args.export, args.author)}")
        return 0
    if args.answers is not None:
        result = import_answers(args.golden, args.answers, author=args.author)
        print(f"recorded {result['answered']} verdict(s) from {args.answers}; skipped {result['skipped']} empty, "
              f"{result['already']} already checked")
        print_report(result, console)
        return 0
    run_spotcheck(args.golden, n=args.n, seed=args.seed, author=args.author, console=console, cases=args.cases)
    return 0


def cmd_add(args: argparse.Namespace) -> int:
    """A quote is found in the corpus files alone; only --chunk-id opens the store."""
    from ..golden.add import NotFoundError, QuoteError, add_production_case
    from ..limits import check_query

    quote = read_quote_file(args.quote_file) if args.quote_file is not None else args.quote
    if args.kind == "multi" or args.group:
        return _add_multi(args, quote)
    if args.source_uri and not quote:
        raise UserError("--source-uri needs --quote or --quote-file")
    if args.chunk_id and quote:
        raise UserError("--quote/--quote-file go with --source-uri, not with --chunk-id")
    check_query(" ".join(args.query.split()), "--query")  # before the corpus or the database is read
    common = dict(author=args.author, note=args.note, kind=args.kind, identifier=args.identifier, method=args.method)
    if args.chunk_id:
        if args.corpus_folder is not None:
            raise UserError("--corpus goes with --source-uri; a chunk comes from the configured store "
                            "(--set corpus.path=FOLDER)")
        session = _open_session(args.overrides)
        try:
            result = add_production_case(args.golden, args.query, chunk_id=args.chunk_id,
                                         chunk_lookup=session.chunk, **common)
        finally:
            session.close()
    else:
        corpus = _add_corpus(args)
        try:  # reads the named document alone (every document only when a miss needs them)
            result = add_production_case(args.golden, args.query, source_uri=args.source_uri, quote=quote,
                                         corpus_path=corpus, corpus=args.corpus_folder, **common)
        except (QuoteError, NotFoundError) as exc:
            for line in exc.context:
                print(line, file=sys.stderr)
            raise
    rec = result.record
    ev = rec["evidence"][0]
    how = {"chunk": "the chunk's span", "exact": "quote found verbatim",
           "whitespace": "quote found with whitespace differences (the stored quote is the document's text)",
           "normalised": "quote found through whitespace, markup and case (the stored quote is the document's "
                         f"text: {_excerpt(ev['quote'])})"}
    ident = f", identifier {rec['identifier']!r}" if rec.get("identifier") else ""
    _say(_console(), f"added case {rec['id']} (kind {rec['kind']}{ident}; {ev['source_uri']} chars "
                     f"{ev['start']}..{ev['end']}; {how[result.located]})", soft_wrap=True)
    return 0


def _add_multi(args: argparse.Namespace, quote: str | None) -> int:
    """``golden add --kind multi --source-uri DOC --quote Q --group DOC2 Q2 ...`` (rag_experiments.golden.multi)."""
    from ..corpus.loader import load_corpus
    from ..golden.add import NotFoundError, QuoteError
    from ..golden.multi import add_multi_case
    from ..limits import check_query

    if args.kind != "multi":
        raise UserError(f"--group goes with --kind multi (a question that needs several passages), not --kind {args.kind}")
    if args.chunk_id or not args.source_uri or not quote:
        raise UserError("--kind multi: give the first passage as --source-uri with --quote, each further one as "
                        "--group DOC QUOTE")
    if args.identifier:
        raise UserError("--identifier goes with --kind exact, not --kind multi")
    check_query(" ".join(args.query.split()), "--query")
    docs = load_corpus(_add_corpus(args))
    try:
        result = add_multi_case(args.golden, args.query, [(args.source_uri, quote), *map(tuple, args.group or ())],
                                docs=docs, corpus=args.corpus_folder, author=args.author, note=args.note,
                                method=args.method)
    except (QuoteError, NotFoundError) as exc:
        for line in exc.context:
            print(line, file=sys.stderr)
        raise
    rec = result.record
    parts = "; ".join(f"group {ev['group']}: {ev['source_uri']} chars {ev['start']}..{ev['end']}" for ev in rec["evidence"])
    _say(_console(), f"added case {rec['id']} (kind multi, {len(rec['evidence'])} evidence groups, all needed; {parts})",
         soft_wrap=True)
    return 0


def _add_corpus(args: argparse.Namespace) -> str:
    """The corpus a quote is looked up in: --corpus, else the configured one. Overrides are
    composed (so a bad one is refused here as everywhere), never a database opened."""
    if args.overrides:
        from ..experiment import corpus_path
        from ..session import compose_settings

        settings = compose_settings(list(args.overrides))[0]
        return args.corpus_folder or str(corpus_path(settings))
    return args.corpus_folder or configured_corpus([])


def cmd_retire(args: argparse.Namespace) -> int:
    from ..golden.retire import retire_case

    record = retire_case(args.golden, args.case_id, args.reason, args.author)
    _say(_console(), f"retired case {record['target']} ({record['id']}): {record['reason']}")
    return 0


def cmd_split(args: argparse.Namespace) -> int:
    from ..golden.split import freeze

    record, counts = freeze(args.golden, args.seed, args.test_fraction, args.reason, args.author, args.replace)
    out = _console()
    _say(out, f"split {record['id']}: {len(record['dev'])} dev, {len(record['test'])} test cases "
              f"(seed {record['seed']}, test fraction {record['test_fraction']:g}), appended to {args.golden}")
    for stratum, n in counts.items():
        _say(out, f"  {stratum}: {n['dev']} dev, {n['test']} test")
    _say(out, "sweeps now choose their best point on dev; compare --sweep, promote --sweep and the sweep parent "
              "report it on test")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from ..golden.golden_file import GoldenFile

    from ..corpus.loader import load_corpus
    from ..golden.anchoring import drift_status
    from ..golden.evidence_check import unscorable_spans

    gf = GoldenFile(args.golden)
    records = gf.read_records()
    docs = load_corpus(args.corpus)
    problems = unscorable_spans(records, docs)
    for p in problems:
        print(p.describe(gf.path), file=sys.stderr)
    if problems:
        raise GoldenSetError(f"{gf.path}: {len(problems)} labelled spans cannot be scored against corpus "
                             f"{args.corpus} (listed above)",
                             hint="retire the case or re-anchor the span (rag-exp golden reanchor --ref ...)")
    counts = Counter(type(r).__name__.lower() for r in records)  # Case -> "case", as on disk
    drift = drift_status(gf.path, docs)
    beyond = gf.beyond_manifest()
    vouched = len(records) - beyond
    manifest_note = (f"manifest checked (it vouches for lines 1-{vouched}; the {beyond} line(s) after it, "
                     f"{vouched + 1}-{len(records)}, continue its chain)") if beyond else "manifest checked"
    print(f"{gf.path}: OK, {len(records)} records ({_counter_line(dict(counts))}); {manifest_note}; "
          f"{drift['spans']} labelled spans resolve in corpus {args.corpus}"
          + (f" ({drift['pending']} drifted: rag-exp golden check)" if drift["pending"] else ""))
    print(f"sha256 (golden-set version): {gf.digest()}")
    return 0


def cmd_manifest(args: argparse.Namespace) -> int:
    import getpass

    from ..golden.golden_file import GoldenFile

    gf = GoldenFile(args.golden)
    if not gf.exists():
        raise UserError(f"golden set {gf.path} does not exist")
    raw = gf.path.read_bytes()
    n = raw.count(b"\n")
    print(f"{gf.path}: {n} lines, {len(raw)} bytes, sha256 {gf.digest()}")
    print("The rebuilt manifest will vouch for exactly these lines: a file truncated before now stays "
          "truncated. Restore the manifest from git instead if you can (git checkout -- FILE).")
    if not args.yes:
        if not sys.stdin.isatty():
            raise UserError("not rebuilding the manifest without a confirmation",
                            hint="check the file (git log -p / git diff), then pass --yes")
        if input(f"Is {gf.path.name} exactly as intended, with no line lost? [y/N] ").strip().lower() not in ("y", "yes"):
            print("cancelled; nothing was written")
            return 1
    manifest = gf.rebuild_manifest(who=args.author or getpass.getuser(), reason=args.reason)
    print(f"manifest rebuilt: {manifest['records']} records (the last one records the rebuild); "
          f"new sha256 {manifest['sha256']}")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    from rich.table import Table

    from ..golden.records import Judgement
    from ..golden.resolve import current, load_golden
    from ..golden.spotcheck import judge_validation

    console = _console()
    golden = load_golden(args.golden)
    now = current(golden.records)
    cases, retired, judgements = now.cases, now.retired, now.live_judgements  # tables: what labels the cases now
    n_judgements = sum(isinstance(r, Judgement) for r in golden.records)
    _say(console, f"{golden.path}  sha256 {golden.digest}")
    _say(console, f"cases: {len(cases)} ({len(retired)} retired, {len(golden.scorable)} scorable); "
                  f"judgements: {len(judgements)} live ({n_judgements - len(judgements)} superseded); "
                  f"anchors: {_counter_line(golden.anchor_counts())}")

    def table(title: str, counter: Counter, *cols: str) -> None:
        from rich.text import Text

        t = Table(title=title)
        for c in cols:
            t.add_column(c)
        t.add_column("n", justify="right")
        for key, n in sorted(counter.items()):
            t.add_row(*(Text(str(k)) for k in (key if isinstance(key, tuple) else (key,))), str(n))
        _say(console, t)

    live = [r for r in cases if r.id not in retired]
    table("cases by kind", Counter(r.kind for r in live), "kind")
    table("cases by doc type", Counter(r.doc_type for r in live), "doc type")
    table("judgements by verdict", Counter(r.verdict for r in judgements), "verdict")
    _unanswered(console, golden)
    def who(j: dict) -> str:  # as the spot-check names a judge: <provider>:<model> unless Anthropic's
        provider = j.get("provider")
        model = j.get("model")
        return f"{provider}:{model}" if model and provider and provider != "anthropic" else model or j.get("name", "")

    judges = Counter((j["kind"], who(j), j.get("prompt_version", "")) for j in (r.raw["judge"] for r in judgements))
    table("judgements by judge", judges, "kind", "model / name", "prompt version")
    _quality(console, golden, args)
    v = judge_validation(args.golden)
    if v["judge_model"] is None:
        _say(console, "judge validation: no LLM judgements and no agent judgements")
    else:
        kappa = "undefined" if v["kappa"] is None else f"{v['kappa']:.3f}"
        agreement = "n/a" if v["agreement"] is None else f"{v['agreement']:.1%}"
        _say(console, f"judge validation ({v['judge_model']} / {v['judge_prompt_version']}): "
                      f"{'VALIDATED' if v['validated'] else 'not validated'}; {v['n']} spot-checked pairs "
                      f"(need {v['min_pairs']}), agreement {agreement}, kappa {kappa}")
        _say(console, "  " + rates_line(v))
        if v.get("class_warning"):
            _say(console, f"WARNING: {v['class_warning']}")
    return 0


def _unanswered(console: Any, golden) -> None:
    """Production queries recorded without evidence (golden import-queries): answered / unanswerable /
    unlabelled, per stratum; the share of labelled ones no passage answers."""
    from rich.table import Table

    from ..golden.import_queries import unanswered_share

    rows = unanswered_share(golden)
    if not rows:
        return
    t = Table(title="real queries (import-queries): does the corpus answer them?")
    for c in ("stratum", "answered", "unanswerable (judged, none relevant)", "not labelled yet", "unanswerable share"):
        t.add_column(c)
    for group in ["all"] + sorted(g for g in rows if g != "all"):
        r = rows[group]
        share = "n/a" if r["share"] is None else f"{r['share']:.0%}"
        t.add_row(group, str(r["answered"]), str(r["unanswerable"]), str(r["unlabelled"]), share)
    _say(console, t)


def _quality(console: Any, golden, args: argparse.Namespace) -> None:
    """The golden set's quality report (rag_experiments.golden.quality): overlap, duplicates, coverage."""
    from rich.table import Table

    from ..corpus.loader import load_corpus
    from ..golden.quality import PARAPHRASE_OVERLAP_WARN, quality_report, reference_groups

    try:
        docs = load_corpus(args.corpus) if getattr(args, "corpus", None) else []
    except UserError:
        docs = []  # the corpus is not here: the report without the corpus's coverage
    r = quality_report(golden.scorable, docs, reference=reference_groups(golden.records))
    t = Table(title="question quality: content-word overlap with the evidence passage")
    for c in ("kind", "cases", "mean overlap", "note"):
        t.add_column(c)
    for kind, value in r.overlap_by_kind.items():
        note = (f"> {PARAPHRASE_OVERLAP_WARN}: copies its passage" if kind == "paraphrase"
                and value > PARAPHRASE_OVERLAP_WARN else "shares the identifier by design" if kind == "exact" else "")
        t.add_row(kind, str(r.n_by_kind[kind]), f"{value:.2f}", note)
    if r.reference:  # generated against hand-written / real questions (rag_experiments.golden.quality)
        for group, label in (("generated", "generated (llm / agent)"), ("reference", "hand-written reference")):
            g = r.reference[group]
            t.add_row(label, str(g["n"]), f"{g['mean_overlap']:.2f}", "written by a person (golden add)"
                      if group == "reference" else "all kinds")
    _say(console, t)
    if docs:
        t = Table(title="coverage: cases by doc type against the corpus")
        for c in ("doc type", "cases", "share of cases", "documents", "share of documents"):
            t.add_column(c)
        n_docs = sum(r.corpus_docs_by_doc_type.values()) or 1
        for dt in sorted(set(r.cases_by_doc_type) | set(r.corpus_docs_by_doc_type)):
            nc, nd = r.cases_by_doc_type.get(dt, 0), r.corpus_docs_by_doc_type.get(dt, 0)
            t.add_row(dt, str(nc), f"{nc / max(r.n_cases, 1):.0%}", str(nd), f"{nd / n_docs:.0%}")
        _say(console, t)
    _say(console, f"near-duplicate questions: {len(r.near_duplicates)}; most cases on one document: "
                  f"{r.max_cases_per_doc}")
    for w in r.warnings:
        _say(console, f"WARNING: {w}")
