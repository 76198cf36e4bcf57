"""The demo's headline numbers, one source for every page that quotes them (issue 48, item 7).

``docs/_data/demo_numbers.json`` holds the summary table that ``python run.py`` (the default
experiment: hybrid RRF, heading chunks, the 230 cases of ``experiments/golden/demo.jsonl``) prints on
a fresh database and MLflow store, with the golden version, the date and the commit it was
measured on. The README and the docs quote rows of that table, as the plain table ``make run``'s
summary shows (``all  230  0.798  0.945 ...``) or as rich's (``│ all │ 230 │ 0.798 │``):

* in prose a headline number is quoted with its golden version, ``recall@5 0.798 on `cfaa7100```;
  one on the file's version must be the file's ``all`` row (others are labelled history);
* ``tests/docs/test_demo_numbers.py`` fails when a quoted row or number differs from the file;
* ``tests/docs/test_tutorials.py`` fails when the file differs from what the demo tutorial's own
  fresh ``run.py`` prints (the suite runs it anyway);
* ``python tools/demo_numbers.py --measure`` runs the demo on a fresh database in a temporary
  folder (1-2 min on 2 cores while the demo's shipped vectors match its chunks, 13 min on 2 loaded
  cores when they must be embedded) and rewrites the file; ``--write-pages`` puts the file's
  numbers into every quoted row and prose quote (``make docs-numbers`` does both).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "docs" / "_data" / "demo_numbers.json"
COLUMNS = ("n", "r@5", "r@20", "mrr@10", "ndcg@10", "hit@5", "hit@20", "judged@10")
_SEGMENT = r"all|kind=[a-z_]+|doc_type=[a-z_]+"
# a quoted row: plain ("all   230  0.798 ...") or rich ("│ all │ 230 │ 0.798 │"), at least one decimal
ROW = re.compile(rf"^\s*(?:│\s*)?(?P<seg>{_SEGMENT})\s*(?:│\s*)?(?P<n>\d+)(?P<rest>(?:\s*│?\s*\d\.\d{{3}})+)\s*│?\s*$")
_DECIMAL = re.compile(r"\d\.\d{3}")
# a quote in prose: "recall@5 0.798 on `cfaa7100`" (the all row's value on that golden version)
PROSE = re.compile(r"\b(?P<metric>recall@5|recall@20|MRR@10|nDCG@10|r@5|r@20|mrr@10|ndcg@10)\s+(?P<value>\d\.\d{3})\s+"
                   r"on\s+`(?P<golden>[0-9a-f]{8,})`")  # across a line break too
_PROSE_COLUMN = {"recall@5": "r@5", "recall@20": "r@20", "MRR@10": "mrr@10", "nDCG@10": "ndcg@10"}


def pages(root: Path = ROOT) -> list[Path]:
    """The pages that may quote the demo's numbers: the README and every docs page."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def parse_row(line: str) -> tuple[str, list[float]] | None:
    """(segment, [n, metric, ...]) of a quoted summary row, else None."""
    m = ROW.match(line)
    if not m:
        return None
    return m.group("seg"), [int(m.group("n")), *(float(x) for x in _DECIMAL.findall(m.group("rest")))]


def parse_summary(output: str) -> dict[str, list[float]]:
    """The rows of the summary table a run printed (rich's box table or the plain one)."""
    header = next((ln for ln in output.splitlines() if re.search(r"\bsegment\b.*\bn\b.*r@5", ln)), None)
    if header is None:
        raise ValueError("no summary table (a 'segment  n  r@5 ...' header) in the output")
    names = [c for c in re.split(r"[\s┃│]+", header) if c]
    if tuple(names[1:]) != COLUMNS:
        raise ValueError(f"the summary's columns are {names[1:]}, expected {list(COLUMNS)}")
    rows = {}
    for line in output.splitlines():
        row = parse_row(line)
        if row and len(row[1]) == len(COLUMNS):
            rows.setdefault(row[0], row[1])
    return rows


def load(path: Path = DATA) -> dict:
    return json.loads(path.read_text())


def differences(quoted: list[float], expected: list[float]) -> list[str]:
    """Column by column, what a quoted row says that the data file does not."""
    out = []
    for name, q, e in zip(COLUMNS, quoted, expected):
        if (q != e) if name == "n" else abs(q - e) > 5e-4:
            out.append(f"{name} {q:g} (measured {e:g})" if name == "n" else f"{name} {q:.3f} (measured {e:.3f})")
    return out


def stale_quotes(data: dict, root: Path = ROOT) -> list[str]:
    """One line per quoted row that differs from the data file: 'README.md:26: all: r@5 0.796 (measured 0.798)'."""
    rows = data["rows"]
    out = []
    for page in pages(root):
        for i, line in enumerate(page.read_text().splitlines(), 1):
            row = parse_row(line)
            if not row:
                continue
            seg, values = row
            where = f"{page.relative_to(root)}:{i}"
            if seg not in rows:
                out.append(f"{where}: segment {seg!r} is not in {DATA.relative_to(ROOT)}")
                continue
            diff = differences(values, rows[seg])
            if diff:
                out.append(f"{where}: {seg}: " + ", ".join(diff))
        text = page.read_text()
        for m in PROSE.finditer(text):
            if not data["golden"].startswith(m["golden"]):
                continue  # measured on another golden version, and labelled so
            column = _PROSE_COLUMN.get(m["metric"], m["metric"])
            measured = rows["all"][COLUMNS.index(column)]
            if abs(float(m["value"]) - measured) > 5e-4:
                line = text.count("\n", 0, m.start()) + 1
                out.append(f"{page.relative_to(root)}:{line}: {m['metric']} {m['value']} on `{m['golden']}` "
                           f"(measured {measured:.3f})")
    return out


def quoted_rows(root: Path = ROOT) -> list[tuple[str, str]]:
    return [(f"{p.relative_to(root)}:{i}", seg) for p in pages(root)
            for i, line in enumerate(p.read_text().splitlines(), 1) if (row := parse_row(line)) for seg in [row[0]]]


def write_pages(data: dict, root: Path = ROOT) -> list[str]:
    """Put the data file's numbers into every quoted row (each number keeps its column width) and
    every prose quote on the file's golden version."""
    changed = []
    for page in pages(root):
        lines = page.read_text().splitlines(keepends=True)
        dirty = False
        for i, line in enumerate(lines):
            row = parse_row(line)
            if not row or row[0] not in data["rows"]:
                continue
            values = iter(data["rows"][row[0]][1:])

            def put(m: re.Match) -> str:
                return f"{next(values):.3f}"

            m = ROW.match(line)
            new = line[:m.start("rest")] + _DECIMAL.sub(put, m.group("rest")) + line[m.end("rest"):]
            if new != line:
                lines[i], dirty = new, True
        text = "".join(lines)

        def prose(m: re.Match) -> str:
            if not data["golden"].startswith(m["golden"]):
                return m.group(0)
            value = data["rows"]["all"][COLUMNS.index(_PROSE_COLUMN.get(m["metric"], m["metric"]))]
            return m.group(0)[:m.start("value") - m.start()] + f"{value:.3f}" + m.group(0)[m.end("value") - m.start():]

        new_text = PROSE.sub(prose, text)
        if dirty or new_text != text:
            page.write_text(new_text)
            changed.append(str(page.relative_to(root)))
    return changed


def measure() -> dict:
    """Run the demo's default experiment on a fresh database and MLflow store; its summary table."""
    with tempfile.TemporaryDirectory(prefix="demo-numbers-") as tmp:
        folder = Path(tmp)
        shutil.copytree(ROOT / "experiments", folder / "experiments")
        (folder / "mlruns").mkdir()
        env = {k: v for k, v in os.environ.items() if k not in ("RAG_EXP_HOME", "MLFLOW_TRACKING_URI", "DATABASE_URL")}
        env.update(RAG_EXP_HOME=str(folder), MLFLOW_TRACKING_URI=f"sqlite:///{folder}/mlruns/mlflow.db",
                   COLUMNS="250", NO_COLOR="1")
        started = dt.datetime.now(dt.timezone.utc)
        done = subprocess.run([sys.executable, str(ROOT / "run.py"), "progress=false"], cwd=folder, env=env,
                              capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"python run.py exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        subprocess.run([str(Path(sys.executable).parent / "rag-exp"), "db", "stop"], cwd=folder, env=env,
                       capture_output=True, text=True)
    title = re.search(r"(?P<variant>\w+) \| (?P<chunking>[\w-]+) \| golden (?P<golden>[0-9a-f]+) \((?P<cases>\d+) cases\)",
                      done.stdout)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    return {
        "what": "the summary table of the demo's default experiment (hybrid RRF, heading chunks) on a fresh "
                "database and MLflow store; the README and docs quote its rows",
        "command": "python run.py progress=false",
        "measured_on": started.date().isoformat(),
        "commit": commit or "unknown",
        "variant": title["variant"] if title else None,
        "chunking": title["chunking"] if title else None,
        "golden": title["golden"] if title else None,
        "cases": int(title["cases"]) if title else None,
        "columns": list(COLUMNS),
        "rows": parse_summary(done.stdout),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--measure", action="store_true", help="run the demo on a fresh database and rewrite the data file")
    ap.add_argument("--write-pages", action="store_true", help="put the data file's numbers into every quoted row")
    args = ap.parse_args(argv)
    if args.measure:
        data = measure()
        DATA.parent.mkdir(parents=True, exist_ok=True)
        DATA.write_text(json.dumps(data, indent=2) + "\n")
        print(f"wrote {DATA.relative_to(ROOT)}: all {data['rows']['all']}")
    data = load()
    if args.write_pages:
        for page in write_pages(data):
            print(f"updated {page}")
    stale = stale_quotes(data)
    for line in stale:
        print(line)
    if not args.measure and not args.write_pages and not stale:
        print(f"{len(quoted_rows())} quoted rows agree with {DATA.relative_to(ROOT)}")
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
