"""Fill the first N rows of a `--decide --export` sheet with the verdicts a golden file already holds
(the same case and passage, or the same text), for decide_again.sh.

    python fill_from_truth.py SHEET FILLED N TRUTH.jsonl
"""

from __future__ import annotations

import csv
import json
import re
import sys


def norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def main(src: str, dst: str, n: int, truth_path: str) -> None:
    by_span: dict[tuple, str] = {}
    by_text: dict[tuple, str] = {}
    with open(truth_path, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            if r.get("type") != "judgement":
                continue
            s = r["span"]
            by_span[(r["case_id"], s["source_uri"], s["start"], s["end"])] = r["verdict"]
            by_text[(r["case_id"], norm(s["quote"]))] = r["verdict"]
    with open(src, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    filled = missing = 0
    for r in rows[:n]:
        verdict = (by_span.get((r["case_id"], r["document"], int(r["start"]), int(r["end"])))
                   or by_text.get((r["case_id"], norm(r["passage"]))))
        if verdict is None:
            missing += 1
            continue
        r["verdict"] = verdict
        filled += 1
    with open(dst, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"filled {filled} of the first {min(n, len(rows))} rows ({len(rows)} exported), {missing} not in the truth")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])
