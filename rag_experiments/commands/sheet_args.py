"""The options a sheet's import needs again, as the commands that write a sheet print them."""

from __future__ import annotations

import argparse
import shlex


class SheetArgs(list):
    masked = False  # a --set override held a secret, shown as ***


def same_sheet_args(args: argparse.Namespace) -> SheetArgs:
    """The options an import of a sheet needs again: the same golden file and corpus (the --set overrides)
    and who labelled (a command that dropped them would fail on the corpus, or credit the verdicts to
    whoever runs it). A secret in an override (a db.url password, a key) is masked: terminal output ends
    up in CI logs."""
    from ..redaction import redact_text

    shown = [redact_text(o) for o in args.overrides]
    again = SheetArgs([f"--golden {shlex.quote(str(args.golden))}"] + [f"--set {shlex.quote(o)}" for o in shown])
    again += [f"--labeller {shlex.quote(args.labeller)}"] * bool(args.labeller)
    again += ["--judge-kind agent"] * (args.judge_kind == "agent")
    again.masked = shown != list(args.overrides)
    return again
