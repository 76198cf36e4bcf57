"""Comparisons (:mod:`.compare`) and promotion decisions (:mod:`.promote`) as rich tables and
GitHub Markdown, with one set of number formatters; duck-typed, so neither module is imported."""

from __future__ import annotations

import math
import sys
from typing import Any, Sequence

from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ..evaluation.metric_key import metric_title
from ..stats.shown import p_digits
from ..terminal import console as make_console

WARN = "⚠"


def fmt(v: float | None, signed: bool = False) -> str:
    return "—" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:+.3f}" if signed else f"{v:.3f}"


def p_text(p: float) -> str:
    return p_digits(p)  # four places near α


def _fmt_p(p: float | None) -> str:
    return "p n/a" if p is None else "p" + p_text(p) if p < 0.001 else "p=" + p_text(p)


def value_text(cell) -> str:
    if cell.value is None:
        return "—"
    if cell.interval is None:
        return fmt(cell.value)
    return f"{fmt(cell.value)} [{cell.interval[0]:.2f}, {cell.interval[1]:.2f}]"


def delta_text(cell, alpha: float) -> tuple[str, int]:
    """'Δ+0.100 p=0.012*' and its sign when significant (+1 better, -1 worse, 0 neither)."""
    if cell.delta is None:
        return "", 0
    sig = cell.p_adj is not None and cell.p_adj < alpha
    direction = (1 if cell.delta > 0 else -1 if cell.delta < 0 else 0) if sig else 0
    return f"Δ{fmt(cell.delta, True)} {_fmt_p(cell.p_adj)}{'*' if sig else ''}", direction


def power_text(cell, alpha: float, sep: str = " ") -> str:
    """A non-significant delta's 'MDE 0.047 n≈1,900': the smallest difference these paired cases could
    detect (α, power 0.8) and the cases that would detect the observed Δ (:mod:`..stats.power`);
    '' when the delta is significant or was not tested."""
    est = getattr(cell, "power", None)
    if est is None or cell.p_adj is None or cell.p_adj < alpha:
        return ""
    if est.mde is None:
        return "MDE n/a"
    return f"MDE {est.mde:.3f}" + (f"{sep}n≈{_count(est.n_for_delta)}" if est.n_for_delta is not None else "")


def _count(n: int) -> str:
    return f"{n:,}" if n < 100_000 else f"{n:.0e}".replace("e+0", "e")


def best_cells(cmp) -> set[tuple[int, str]]:
    """(row index, column) of each quality column's highest value (every row that has it); the
    label-coverage columns (judged@k) have no best."""
    out = set()
    for c in cmp.columns:
        name = c.key.mlflow_name
        if c.key.metric == "judged":
            continue
        values = [(i, r.cells[name].value) for i, r in enumerate(cmp.rows)]
        values = [(i, v) for i, v in values if v is not None and not math.isnan(v)]
        if len(values) < 2:
            continue
        top = max(v for _, v in values)
        out |= {(i, name) for i, v in values if v >= top - 1e-12}
    return out


def family_text(cmp) -> str:
    """Exactly which tests one star's Holm correction covers (compare's --family)."""
    k = len(cmp.rows) - 1
    tests = sum(1 for row in cmp.rows[1:] for cell in row.cells.values() if cell.p is not None)
    columns = len(cmp.columns)
    if getattr(cmp, "family", "runs") == "all":
        return (f"Holm-corrected across all {tests} paired tests of this table ({k} run(s) x {columns} columns: "
                f"metrics, segments, judged@k) at once")
    if k == 1:
        return (f"not corrected: Holm runs across the runs compared, per column, and with one run compared each of "
                f"the table's {tests} tests stands alone (--family all corrects them together)")
    return (f"Holm-corrected across the {k} runs compared, separately in each column: one star covers its "
            f"column's {k} tests, not the table's {tests} (--family all corrects them together)")


def legend(cmp) -> str:
    base = cmp.baseline
    return (f"bold value: the column's best; value [95% interval: bootstrap; exact when every case scores 1, or every case 0]; "
            f"Δ = run − baseline ({base.label}) over cases paired by case_id; "
            f"p = two-sided paired randomization test, {family_text(cmp)}; "
            f"* p < {cmp.alpha:g}; a Δ that is not significant shows MDE, the smallest |Δ| these "
            f"paired cases could detect (α {cmp.alpha:g}, power 0.8), and n≈, the cases that would detect the "
            f"Δ observed; W/T/L = cases won/tied/lost on {metric_title(cmp.primary)}; "
            f"segment columns show {metric_title(cmp.primary)}.")


#: terminal layout: a wide cell is "0.705 [0.65, 0.76]" over "Δ+0.020 p=0.569*"; a narrow one
#: stacks value, interval, delta and p (11 characters), and columns that do not fit go to a
#: second table with the run labels repeated, so nothing is cut at 80 columns
_WIDE_CELL, _NARROW_CELL, _LABEL_MAX = 18, 11, 26


def rich_tables(cmp, width: int = 180) -> list:
    """The comparison as rich tables that fit ``width`` columns (one when it fits)."""
    n_cols = len(cmp.columns) + 1  # + W/T/L
    flag_w = len(f"{WARN} golden+corpus differ") if any(r.flags for r in cmp.rows) else 0
    label_w = min(_LABEL_MAX, max(flag_w, *(len(r.label) for r in cmp.rows)) + 2)
    fixed = label_w + 3 + 5 + 3 + 1  # run, n (with padding and borders)
    wide = fixed + n_cols * (_WIDE_CELL + 3) <= width
    cell_w = _WIDE_CELL if wide else _NARROW_CELL
    per_table = max(1, (width - fixed) // (cell_w + 3))
    keys = [c.key.mlflow_name for c in cmp.columns] + ["W/T/L"]
    chunks = [keys[i:i + per_table] for i in range(0, len(keys), per_table)]
    return [rich_table(cmp, chunk, wide, label_w, first=(i == 0), last=(i == len(chunks) - 1))
            for i, chunk in enumerate(chunks)]


def rich_table(cmp, keys: Sequence[str], wide: bool, label_w: int, first: bool, last: bool):
    columns = [c for c in cmp.columns if c.key.mlflow_name in keys]
    golden = cmp.baseline.run.golden
    title = (f"{len(cmp.rows)} runs | golden {golden[:12] if golden else 'unknown'} | "
             f"baseline: {cmp.baseline.label}")
    if not cmp.comparable:
        title = f"{WARN} NOT COMPARABLE: different golden set or corpus {WARN} | " + title
    table = Table(title=title if first else None, caption=legend(cmp) if last else None, caption_justify="left",
                  show_lines=True, title_style="bold red" if not cmp.comparable else "bold")
    # labels wrap at spaces (fold inside a long word) instead of being cut to "retri…"
    table.add_column("run", overflow="fold", max_width=label_w)
    table.add_column("n", justify="right", no_wrap=True)
    cell_w = _WIDE_CELL if wide else _NARROW_CELL
    for c in columns:
        table.add_column(c.title, justify="right", overflow="fold", max_width=cell_w)
    if "W/T/L" in keys:
        table.add_column(f"W/T/L {metric_title(cmp.primary)}", justify="right", overflow="fold", max_width=cell_w)
    sep = " " if wide else "\n"
    best = best_cells(cmp)
    for i, row in enumerate(cmp.rows):
        label = Text(row.label, style="bold" if row.baseline else "")
        if row.flags:
            label.append(f"\n{_flag_text(row)}", style="bold red")
        cells = []
        for c in columns:
            cell = row.cells[c.key.mlflow_name]
            value = value_text(cell)
            t = Text(value if wide else value.replace(" [", "\n[").replace(", ", ","),
                     style="bold underline" if (i, c.key.mlflow_name) in best else "")
            if row.baseline:
                t.append("\nbaseline", style="dim")
            else:
                text, direction = delta_text(cell, cmp.alpha)
                if text:
                    t.append("\n" + text.replace(" ", sep, 1), style={1: "bold green", -1: "bold red"}.get(direction, "dim"))
                power = "" if c.key.metric == "judged" else power_text(cell, cmp.alpha, sep)
                if power:
                    t.append("\n" + power, style="dim")
            cells.append(t)
        if "W/T/L" in keys:
            cells.append(Text("" if row.wtl is None else str(row.wtl)))
        n = row.n_cases
        table.add_row(label, "" if n is None else str(n), *cells)
    return table


def markdown_table(cmp, rows: Sequence | None = None, compact: bool = False) -> str:
    """Markdown that GitHub and MLflow's own viewer both render: warnings as a quoted bold line
    (MLflow shows a GitHub alert, ``> [!WARNING]``, as raw text), then the table and its legend.

    Plain Markdown only (no ``<br>``/``<sub>``: MLflow's viewer shows HTML as text): a cell is
    ``value [interval] · Δ delta p`` on one line. ``compact``: a cell is ``value`` and, for a run
    other than the baseline, ``Δdelta`` with ``*`` when significant (intervals, p-values and MDE
    stay in the full table), so a sweep parent's Overview reads in one screen without wrapping
    cells. ``rows``: a subset to show (default: all).
    """
    lines: list[str] = []
    for w in cmp.warnings:
        lines += [f"> **{WARN} Warning:** {_md_escape(w)}", ""]
    head = ["run", "n"] + [c.title for c in cmp.columns] + [f"W/T/L {metric_title(cmp.primary)}"]
    lines.append("| " + " | ".join(_md_escape(h) for h in head) + " |")
    lines.append("|" + "---|" + "---:|" * (len(head) - 1))
    best = best_cells(cmp)
    index = {id(r): i for i, r in enumerate(cmp.rows)}
    for row in (cmp.rows if rows is None else rows):
        label = f"**{_md_escape(row.label)}** (baseline)" if row.baseline else _md_escape(row.label)
        if row.flags:
            label += f" {_flag_text(row)}"
        cells = []
        for c in cmp.columns:
            cell = row.cells[c.key.mlflow_name]
            text = fmt(cell.value) if compact else value_text(cell)
            if (index.get(id(row)), c.key.mlflow_name) in best:
                text = f"**{text}**"
            if not row.baseline and compact:
                if cell.delta is not None:
                    sig = cell.p_adj is not None and cell.p_adj < cmp.alpha
                    text += f" Δ{fmt(cell.delta, True)}" + ("\\*" if sig else "")
            elif not row.baseline:
                dt, direction = delta_text(cell, cmp.alpha)
                if dt:
                    dt = _md_escape(dt)
                    text += f" · {f'**{dt}**' if direction else dt}"
                power = "" if c.key.metric == "judged" else power_text(cell, cmp.alpha, ", ")
                if power:
                    text += f" ({power} for Δ)" if "n≈" in power else f" ({power})"
            cells.append(text)
        n = row.n_cases
        lines.append("| " + " | ".join([label, "" if n is None else str(n), *cells,
                                          "" if row.wtl is None else str(row.wtl)]) + " |")
    lines += ["", f"_{_md_escape(compact_legend(cmp) if compact else legend(cmp))}_", ""]
    lines += [f"- {_md_escape(n)}" for n in [*cmp.notes, *champion_notes(cmp)]]
    return "\n".join(lines) + "\n"


#: the champion's row tag with its value on the newest golden version (tracking.champion_newest.TAG)
NEWEST_TAG = "on_newest_golden"


def champion_notes(cmp) -> list[str]:
    """For a compared run that is the champion and was measured on an older golden version: its value
    on the newest version (its ranked lists rescored, as its row in the runs list says)."""
    out = []
    for row in cmp.rows:
        text = row.run.tags.get(NEWEST_TAG)
        if row.run.tags.get("champion") == "true" and text and not text.startswith("measured on the newest"):
            out.append(f"{row.label} is the champion; on the newest golden version: {text}")
    return out


def compact_legend(cmp) -> str:
    return (f"bold: the column's best; Δ = run − baseline ({cmp.baseline.label}), paired over cases; "
            f"* significant (two-sided paired randomization test, {family_text(cmp)}, α {cmp.alpha:g}); "
            f"W/T/L = cases won/tied/lost on {metric_title(cmp.primary)}; segment columns show "
            f"{metric_title(cmp.primary)}. Intervals, p-values and MDE: artifact comparison/table.md "
            f"or `rag-exp compare --sweep`.")


def _flag_text(row) -> str:
    return f"{WARN} {'+'.join(row.flags)} differ{'s' if len(row.flags) == 1 else ''}"


def _md_escape(text: str) -> str:
    # '*' (the significance mark) would start emphasis ('_' inside words does not); '|' ends a cell
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("*", "\\*").replace("<", "&lt;").replace("\n", " ")


def print_comparison(cmp, markdown: bool = False, console: Any = None) -> None:
    if markdown:
        sys.stdout.write(markdown_table(cmp))
        for w in cmp.warnings:  # also where a person watching the job log sees it
            print(f"WARNING: {w}", file=sys.stderr)
        return

    out = console or make_console()
    for w in cmp.warnings:
        out.print(Panel(w, title=f"{WARN} WARNING {WARN}", style="bold red"))
    if not cmp.comparable:  # also in the table title, which a narrow table wraps
        out.print(f"[bold red]{WARN} NOT COMPARABLE: different golden set or corpus {WARN}[/]")
    for table in rich_tables(cmp, out.width):
        out.print(table)
    for n in [*cmp.notes, *champion_notes(cmp)]:
        out.print(f"[yellow]note:[/yellow] {n}")


# -- promotion decisions --------------------------------------------------------------------------
MDE_LEGEND = ("MDE = the smallest |Δ| these paired cases could detect (power 0.8), shown when Δ is not "
              "significant; n≈ = the cases that would detect the Δ observed")

CHECK_HEAD = ["check", "champion", "candidate", "Δ", "p (paired)", "W/T/L", "cases", "MDE (n for Δ)", "result"]
#: the column beside "champion" when it was measured on an older golden version: its ranked lists
#: rescored on the newest one (tracking.champion_newest); the note under the table says on which cases
NEWEST_HEAD = "champion, newest golden"


def _has_newest(decision) -> bool:
    return any(getattr(chk, "champion_newest", None) is not None for chk in decision.checks)


def check_head(decision) -> list[str]:
    head = list(CHECK_HEAD)
    if _has_newest(decision):
        head.insert(2, NEWEST_HEAD)
    return head


def check_cells(chk, alpha: float = 0.05, newest: bool = False) -> list[str]:
    notes = [n for n in (chk.note, getattr(chk, "noise", None)) if n]
    return [chk.title, fmt(chk.champion),
            *([fmt(getattr(chk, "champion_newest", None))] if newest else []), fmt(chk.candidate),
            fmt(chk.delta, True),
            "—" if chk.p is None else p_text(chk.p),
            "—" if chk.wtl is None else str(chk.wtl), str(chk.n), check_power(chk, alpha),
            ("ok" if chk.passed else "FAIL") + (f" ({'; '.join(notes)})" if notes else "")]


def refused_by_selection(decision, chk) -> bool:
    """The primary check passed alone, but the best of several points (or runs) is refused once every one
    tried is counted (tracking.promote.Selection): its row said "ok" beside a REFUSED verdict (a new
    user's trial, 2026-12-07)."""
    sel = getattr(decision, "selection", None)
    return (sel is not None and bool(decision.checks) and chk is decision.checks[0]
            and not sel.passed(decision.alpha))


def check_power(chk, alpha: float) -> str:
    """A non-significant check's 'MDE 0.047 (n≈1,900)': the smallest |Δ| its paired cases could detect
    at α with power 0.8, and the cases that would detect the Δ observed; '—' when significant."""
    est = getattr(chk, "power", None)
    if est is None or chk.p is None or chk.p < alpha:
        return "—"
    if est.mde is None:
        return "n/a (no case differs)" if est.differing == 0 else f"n/a ({est.n} cases)"
    return f"{est.mde:.3f}" + (f" (n≈{_count(est.n_for_delta)})" if est.n_for_delta is not None else "")


#: the terminal table's widest line: a 120-column screen shows it whole (issue 48: the verdict table reads
#: in one screen); the MDE column and the checks' notes are lines under the table, not columns
TABLE_WIDTH = 120
TERMINAL_DROP = ("MDE (n for Δ)",)


def mde_line(decision) -> str | None:
    """'MDE (n for Δ): recall@5 0.082 (n≈289); recall@5 (exact) n/a (no case differs). MDE = ...' for the
    checks whose Δ is not significant (the terminal table's column, as a line); None when every Δ is."""
    shown = [(chk.title, check_power(chk, decision.alpha)) for chk in decision.checks]
    shown = [(t, v) for t, v in shown if v != "—"]
    if not shown:
        return None
    return "MDE (n for Δ): " + "; ".join(f"{t} {v}" for t, v in shown) + f". {MDE_LEGEND}"


def decision_table(decision, title: str, candidate_label: str = "candidate"):
    """The checks as a table, its title a line of its own above it: a rich table title is wrapped to
    the table's width and folds a word longer than that (``default.record.json`` / ``, version 1)``),
    so the same decision read differently on a narrower table (issue 49, item 6).

    The table fits :data:`TABLE_WIDTH` columns (it was 139-141 wide with the MDE column, a check's
    note in its result cell and the champion's newest-golden column): the MDE values are one line
    under it and a check's note (``no per-case table``, ``within the HNSW noise floor``) a ``note:``
    line, so no number is lost; the Markdown summary keeps them as columns."""
    table = Table(caption=f"two-sided paired randomization test over cases, alpha {decision.alpha:g}; "
                  f"W/T/L = cases the {candidate_label} won/tied/lost", caption_justify="left")
    newest = _has_newest(decision)
    head = check_head(decision)
    keep = [i for i, h in enumerate(head) if h not in TERMINAL_DROP]
    for i in keep:
        h = head[i].replace("candidate", candidate_label)
        if h == NEWEST_HEAD:
            h = h.replace(", ", ",\n")  # two header lines: the column is as wide as its numbers' neighbours
        table.add_column(h, justify="left" if h in ("check", "result") else "right")
    below = []
    for chk in decision.checks:
        cells = check_cells(chk, decision.alpha, newest)
        cells = [cells[i] for i in keep]
        passed = chk.passed and not refused_by_selection(decision, chk)
        cells[-1] = "ok" if passed else ("FAIL: max-T" if chk.passed else "FAIL")
        style = "green" if passed else "bold red"
        table.add_row(*cells[:-1], f"[{style}]{cells[-1]}[/{style}]")
        if chk.note:
            below.append(Text(f"note: {chk.title}: {chk.note}", style="yellow"))
        if chk.noise and not any(n.startswith(f"{chk.title}: ") and "noise floor" in n
                                 for n in getattr(decision, "notes", [])):
            below.append(Text(f"note: {chk.title}: {chk.noise}", style="yellow"))
    mde = mde_line(decision)
    lines = [Text(mde)] if mde else []
    notes = [Text(f"note: {n}", style="yellow") for n in getattr(decision, "notes", [])]
    return Group(Text(title, style="bold"), table, *lines, *below, *notes)


def decision_markdown(decision, candidate_label: str = "candidate") -> str:
    head = [h.replace("candidate", candidate_label) for h in check_head(decision)]
    newest = _has_newest(decision)
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 2) + "---|"]
    for chk in decision.checks:
        cells = check_cells(chk, decision.alpha, newest)
        if refused_by_selection(decision, chk):
            cells[-1] = "❌ **FAIL: max-T** (ok alone)"
        else:
            cells[-1] = ("✅ " if chk.passed else "❌ **") + cells[-1] + ("" if chk.passed else "**")
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    lines += ["", f"_{MDE_LEGEND}_"]
    lines += [f"- {n}" for n in getattr(decision, "notes", [])]
    return "\n".join(lines) + "\n"
