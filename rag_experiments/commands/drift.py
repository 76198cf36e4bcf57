"""``rag-exp golden check`` and ``golden reanchor``: the golden set's spans against the corpus as it
is now (:mod:`rag_experiments.golden.anchoring`): what drifted, the command that fixes each stale
span, and the anchor records that re-point them. Also :func:`read_quote_file`, the passage a person
gives (``golden add`` and ``reanchor --ref`` both take one)."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any, Callable

from ..errors import ConfigError, UserError
from .llm_job import console as rich_console
from .llm_job import say


def add_parsers(sub: Any, golden_arg: Callable, corpus_arg: Callable) -> None:
    """The ``check`` and ``reanchor`` subcommands (the ``golden`` command's shared argument groups)."""
    sp = sub.add_parser(
        "check", help="corpus drift: list stale labelled spans, with the command that fixes each",
        description="Read-only. Compares every labelled span with the corpus as it is now: what "
        "`golden reanchor` would record (moved / fuzzy / stale), every stale relevant span with a "
        "ready-to-run `golden reanchor --ref ... --source-uri ... --quote ...` command (pre-filled "
        "with the closest passage when there is one), and fuzzy anchors worth a look. Exit 0 when "
        "nothing needs doing, 1 otherwise.")
    golden_arg(sp)
    corpus_arg(sp)
    sp.set_defaults(func=cmd_check)

    sp = sub.add_parser(
        "reanchor", help="corpus drift: re-anchor labelled spans after corpus edits (appends anchor records)",
        description="For every labelled span whose document changed: passage still in place -> nothing; "
        "found verbatim elsewhere -> 'moved'; found approximately -> 'fuzzy' with its similarity; not found "
        "or document removed -> 'stale' (excluded from metrics). Appends `anchor` records (a new "
        "golden-set version); running it twice appends nothing the second time. With --ref, a human "
        "points one span at a passage given like `golden add` takes it (--source-uri with --quote).")
    golden_arg(sp)
    corpus_arg(sp)
    sp.add_argument("--dry-run", action="store_true", help="report what would be recorded, write nothing")
    sp.add_argument("--ref", help="re-anchor this one span by hand ('<case id>#<index>' or a judgement id)")
    sp.add_argument("--source-uri", help="with --ref: the document that now holds the passage")
    q = sp.add_mutually_exclusive_group()
    q.add_argument("--quote", help="with --ref: the passage, verbatim (whitespace may differ)")
    q.add_argument("--quote-file", type=Path, help="with --ref: read the passage from this file ('-' = stdin)")
    sp.add_argument("--author", help="with --ref: who re-anchors it (default: $USER)")
    sp.add_argument("--reason", help="with --ref: why, kept in the anchor record")
    sp.set_defaults(func=cmd_reanchor)


def read_quote_file(path: Path) -> str:
    """The passage in ``path`` ('-': stdin), strict UTF-8; a bad file is one line naming it and the byte."""
    name = "<stdin>" if str(path) == "-" else str(path)
    try:
        data = sys.stdin.buffer.read() if str(path) == "-" else path.read_bytes()
    except OSError as exc:
        raise UserError(f"--quote-file {name}: cannot read: {exc.strerror}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"--quote-file {name}: not valid UTF-8 (byte {exc.start}: {data[exc.start:exc.start + 1]!r})",
                        hint="convert it, e.g. iconv -f latin1 -t utf-8") from None


def _drift_corpus(args: argparse.Namespace) -> list:
    from ..corpus.loader import load_corpus

    if not 0 < args.fuzzy_threshold <= 1:
        raise ConfigError(f"--fuzzy-threshold must be in (0, 1], got {args.fuzzy_threshold}")
    return load_corpus(args.corpus)


def _line(console: Any, text: str) -> None:
    """One unwrapped line: the fix commands must stay copy-pasteable."""
    say(console, text, soft_wrap=True)


def excerpt(text: str, limit: int = 100) -> str:
    t = " ".join(text.split())
    return repr(t if len(t) <= limit else t[: limit - 3] + "...")


def fix_command(item: Any, golden_path: str | Path, corpus: str | Path) -> str:
    """A ready-to-run command that points ``item`` (a ``StaleItem`` of ``golden check``) at a passage
    (the best candidate when there is one; otherwise a placeholder to replace), with the same
    ``--source-uri``/``--quote`` options as ``rag-exp golden add``."""
    source = (item.candidate.source_uri if item.candidate
              else "SOURCE_URI_OF_THE_PAGE_THAT_NOW_HAS_IT" if item.doc_removed else item.old.source_uri)
    quote = item.candidate.quote if item.candidate else "PASTE THE PASSAGE THAT NOW ANSWERS THE QUESTION"
    return shlex.join(["rag-exp", "golden", "reanchor", "--golden", str(golden_path), "--corpus", str(corpus),
                       "--ref", item.ref, "--source-uri", source, "--quote", quote])



def cmd_check(args: argparse.Namespace) -> int:
    from ..golden.anchoring import check

    from ..golden.evidence_check import unscorable_spans
    from ..golden.golden_file import GoldenFile

    docs = _drift_corpus(args)
    rep = check(args.golden, docs, fuzzy_threshold=args.fuzzy_threshold)
    problems = unscorable_spans(GoldenFile(args.golden).read_records(), docs)
    console = rich_console()
    p = rep.pending
    _line(console, f"{p.golden_path} against corpus {args.corpus} ({len(docs)} documents), checked in {p.seconds:.2f} s")
    _line(console, f"{p.spans} labelled spans: document unchanged {p.counts['doc_unchanged']}, changed but passage in "
                  f"place {p.counts['in_place']}; not yet recorded: moved {p.moved}, fuzzy {p.fuzzy}, stale {p.stale}")
    if p.records:
        _line(console, f"-> record them: rag-exp golden reanchor --golden {args.golden} --corpus {args.corpus}")
    if rep.stale:
        _line(console, f"\n{len(rep.stale)} stale relevant spans need a human (fix each with the command shown, "
                      "replacing the quote if it is not the right passage):")
    for item in rep.stale:
        flag = "  [every relevant span of this case is stale: excluded from metrics]" if item.case_all_stale else ""
        state = "recorded stale" if item.recorded else "stale after reanchor"
        _line(console, f"\n* case {item.case_id} ({item.source} {item.ref}, grade {item.grade}, {state}){flag}")
        _line(console, f"  query: {item.query}")
        _line(console, f"  was:   {item.old.source_uri} chars {item.old.start}..{item.old.end}: {excerpt(item.old.quote)}")
        _line(console, f"  why:   {item.reason}")
        if item.candidate is not None:
            _line(console, f"  closest now (similarity {item.similarity:.3f}): {excerpt(item.candidate.quote)}")
        _line(console, "  fix:   " + fix_command(item, args.golden, args.corpus))
    if rep.stale_not_relevant:
        _line(console, f"\n{rep.stale_not_relevant} stale spans were judged not relevant (NO): nothing to fix")
    if rep.review:
        _line(console, f"\n{len(rep.review)} fuzzy anchors to look at (lowest similarity first; a near-duplicate "
                      "passage can pass the threshold):")
        for r in rep.review[:20]:
            state = "recorded" if r["recorded"] else "pending"
            _line(console, f"  {r['ref']} ({state}) similarity {r['similarity']:.3f} at {r['span'].source_uri} "
                          f"{r['span'].start}..{r['span'].end}: {excerpt(r['span'].quote, 80)}")
        if len(rep.review) > 20:
            _line(console, f"  ... {len(rep.review) - 20} more")
    if problems:
        _line(console, f"\n{len(problems)} labelled spans cannot be scored (their document is unchanged, the span "
                      "is not in it): runs refuse this golden set until each is retired or re-anchored:")
        for p in problems:
            _line(console, "  " + p.describe(args.golden))
    if rep.clean and not problems:
        _line(console, "nothing to fix")
    return 0 if rep.clean and not problems else 1


def cmd_reanchor(args: argparse.Namespace) -> int:
    from ..golden.anchoring import manual_anchor, reanchor

    docs = _drift_corpus(args)
    console = rich_console()
    if args.ref:
        quote = read_quote_file(args.quote_file) if args.quote_file is not None else args.quote
        if not args.source_uri or not quote:
            raise UserError("--ref needs --source-uri and --quote (or --quote-file)")
        if args.dry_run:
            raise UserError("--dry-run goes with an automatic reanchor, not with --ref")
        rec = manual_anchor(args.golden, docs, args.ref, args.source_uri, quote, author=args.author,
                            reason=args.reason)
        if rec is None:
            _line(console, f"{args.ref} already points at that passage; nothing appended")
        else:
            s = rec["span"]
            _line(console, f"appended anchor {rec['id']}: {args.ref} -> {s['source_uri']} chars {s['start']}..{s['end']} "
                          f"(similarity to the labelled quote {rec['similarity']:.3f})")
        return 0
    if args.source_uri or args.quote or args.quote_file:
        raise UserError("--source-uri/--quote/--quote-file go with --ref")
    rep = reanchor(args.golden, docs, fuzzy_threshold=args.fuzzy_threshold, dry_run=args.dry_run)
    for o in rep.outcomes:
        if o.outcome in ("moved", "fuzzy", "stale"):
            where = f"{o.new.start}..{o.new.end}" if o.new else "-"
            sim = "" if o.similarity is None else f" similarity {o.similarity:.3f}"
            _line(console, f"  {o.outcome:6} {o.ref}: {o.old.source_uri} {o.old.start}..{o.old.end} -> {where}{sim}"
                          + (f" ({o.note})" if o.note and o.outcome != "fuzzy" else ""))
    _line(console, rep.summary())
    if rep.stale and not args.dry_run:
        _line(console, f"stale spans are excluded from metrics; fix them: rag-exp golden check --golden {args.golden} "
                      f"--corpus {args.corpus}")
    return 0
