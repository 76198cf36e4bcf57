#!/usr/bin/env bash
# The transcript's first decision again, from zero labels, with the code of today (docs/examples/
# gitdoc-decide-transcript.md, "Again from zero"): each batch exports the --decide order, fills its
# first BATCH rows with the verdicts the transcript gave (fill_from_truth.py), and imports them, until
# --decide says the decision is settled. Run it from the transcript's project folder:
#   RUN_A=... RUN_B=... bash decide_again.sh        (BATCH=10, OUT=/tmp/decide-again)
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TRUTH=experiments/golden/gitdoc.jsonl   # the 24 cases, then every verdict the transcript gave
OUT=${OUT:-/tmp/decide-again}; rm -rf "$OUT"; mkdir -p "$OUT"
G=$OUT/gitdoc.jsonl
head -24 $TRUTH > "$G"                  # the cases alone: zero labels
rag-exp golden manifest --golden "$G" --rebuild --yes > /dev/null
for i in $(seq -w 0 99); do
  echo "== batch $i: $(python "$HERE/decide_status.py" "$RUN_A" "$RUN_B" "$G" --brief 2>&1 | tail -1)"
  rag-exp golden label --golden "$G" --decide "$RUN_A" "$RUN_B" --by-hand --export "$OUT/x$i.csv" 2>&1 | tail -3
  [ -f "$OUT/x$i.csv" ] || break        # nothing to export: the decision is settled
  python "$HERE/fill_from_truth.py" "$OUT/x$i.csv" "$OUT/f$i.csv" "${BATCH:-10}" $TRUTH
  rag-exp golden label --golden "$G" --import "$OUT/f$i.csv" --labeller transcript-agent --judge-kind agent | tail -1
done
