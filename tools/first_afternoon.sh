#!/usr/bin/env bash
# Replay issue 44's "first afternoon" on zsh-doc end to end, in a temp folder, timing each step
# (experiments/reports/2026-12-05-first-afternoon-zsh-doc.md is the transcript it replays):
# fresh venv + pip install of this repository, corpus convert, init, ingest with embedding=static,
# MiniLM ingest, the transcript's 24 hand-written cases (tools/first_afternoon/cases.tsv), a
# first look with static, by-hand labelling through the CSV export/import with the transcript's
# verdicts (tools/first_afternoon/verdicts.tsv: an AI agent's, recorded as judge.kind agent),
# the four variants, compare per segment, promote, gate, history, a warm run. Prints each step's
# wall time, the embedding texts/s of both embedders, and a Markdown table at the end.
#
#   tools/first_afternoon.sh                       # everything, in a new folder under /tmp
#   SKIP_INSTALL=1 tools/first_afternoon.sh        # reuse .venv of this repository (no venv, no pip)
#   DOCS=/tmp/debdoc/zsh WORK=/tmp/fa tools/first_afternoon.sh
#
# DOCS: the zsh-doc files (186 .html + zsh.pdf; /tmp/debdoc/get.sh makes them with apt-get download).
# Needs python3.11 (or PYTHON) and, for the install, the package index pip is configured with.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
DATA=$REPO/tools/first_afternoon
DOCS=${DOCS:-/tmp/debdoc/zsh}
WORK=${WORK:-$(mktemp -d /tmp/first-afternoon.XXXXXX)}
PYTHON=${PYTHON:-python3.11}
WHO=${LABELLER:-first-afternoon-script}
STEPS=()  # "step|command|seconds"
LOG=$WORK/logs

[ -d "$DOCS" ] && ls "$DOCS"/*.html >/dev/null 2>&1 || {
  echo "error: DOCS=$DOCS holds no zsh-doc HTML pages (run /tmp/debdoc/get.sh, or set DOCS)" >&2; exit 2; }
mkdir -p "$WORK" "$LOG"
echo "work folder: $WORK (logs in $LOG); load: $(cut -d' ' -f1-3 /proc/loadavg)"

# step NAME COMMAND... : run, log its output to $LOG/NAME.log, record its wall time (fail: stop)
step() {
  local name=$1; shift
  local t0 t1 rc=0
  t0=$(date +%s.%N)
  "$@" >"$LOG/$name.log" 2>&1 || rc=$?
  t1=$(date +%s.%N)
  local s; s=$(python3 -c "print(f'{$t1 - $t0:.2f}')")
  STEPS+=("$name|$*|$s")
  printf '%-28s %8s s  (load %s)\n' "$name" "$s" "$(cut -d' ' -f1 /proc/loadavg)"
  if [ $rc -ne 0 ]; then
    echo "error: step $name failed (exit $rc); its output:" >&2; tail -20 "$LOG/$name.log" >&2; exit $rc
  fi
}

# 1. empty folder, venv, install
cd "$WORK"
if [ "${SKIP_INSTALL:-0}" = 1 ]; then
  VENV=$REPO/.venv
  echo "SKIP_INSTALL=1: using $VENV (no venv made, nothing installed)"
else
  step venv "$PYTHON" -m venv .venv
  step install .venv/bin/pip install -q "$REPO"
  VENV=$WORK/.venv
fi
X=$VENV/bin/rag-exp
step help "$X" --help

# 2. documents, convert, init
mkdir -p docs && cp "$DOCS"/* docs/
step convert "$X" corpus convert docs
step init "$X" init zsh-evals --corpus docs --name zsh
cd zsh-evals
step corpus_list "$X" corpus list

# 3. first ingest with the static embedder, then MiniLM
step ingest_static "$X" ingest --set embedding=static
step ingest_minilm "$X" ingest

# 4. the 24 hand-written cases (an AI agent's, as in the transcript)
add_cases() {  # every case is added, or the step fails (after trying them all)
  local n=0 failed=0
  while IFS=$'\t' read -r kind query doc quote ident; do
    [ "$kind" = kind ] && continue
    n=$((n + 1))
    local extra=()
    [ -n "$ident" ] && extra=(--identifier "$ident")
    local t0 t1; t0=$(date +%s.%N)
    "$X" golden add --by agent --author "$WHO" --kind "$kind" --query "$query" --source-uri "$doc" \
      --quote "$quote" "${extra[@]}" || failed=$((failed + 1))
    t1=$(date +%s.%N)
    python3 -c "print(f'golden add {$n}: {$t1 - $t0:.2f} s')" >>"$LOG/add_times.txt"
  done <"$DATA/cases.tsv"
  echo "$n cases, $failed refused"
  [ "$failed" -eq 0 ]
}
: >"$LOG/add_times.txt"
step cases_24 add_cases
step verify "$X" golden verify

# 5. first look with static; label its top-5 pool by hand (CSV export, the verdicts, import)
parent_of() { sed -n 's/^sweep summary logged to parent run \([0-9a-f]*\).*/\1/p' "$LOG/$1.log" | tail -1; }
fill() {  # fill the exported CSV's verdict column from tools/first_afternoon/verdicts.tsv
  python3 - "$1" "$DATA/verdicts.tsv" <<'EOF'
import csv, sys
path, table = sys.argv[1], sys.argv[2]
known = {(r["question"], r["document"], r["start"], r["end"]): r["verdict"]
         for r in csv.DictReader(open(table, newline=""), delimiter="\t")}
with open(path, newline="") as f:
    reader = csv.DictReader(f)
    fields, rows = reader.fieldnames, list(reader)
hit = 0
for r in rows:
    v = known.get((r["question"], r["document"], r["start"], r["end"]))
    if v:
        r["verdict"], hit = v, hit + 1
with open(path, "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=fields)
    w.writeheader()
    w.writerows(rows)
print(f"{path}: {hit} of {len(rows)} passages given the transcript's verdict (the rest left empty: skipped)")
EOF
}
label_pool() {  # label_pool NAME PARENT
  step "label_export_$1" "$X" golden label --by-hand --judge-kind agent --labeller "$WHO" --sweep "$2" -k 5 \
    --export "$WORK/pool_$1.csv"
  fill "$WORK/pool_$1.csv" | tee -a "$LOG/fill.log"
  step "label_import_$1" "$X" golden label --by-hand --judge-kind agent --labeller "$WHO" --import "$WORK/pool_$1.csv"
}
step run_static "$X" run -m retrieval=vector,keyword,hybrid embedding=static
label_pool static "$(parent_of run_static)"
step compare_static "$X" compare --last-sweep --segments exact,paraphrase

# 6. the four variants with MiniLM; label what the first pool did not cover; compare, promote, gate
step variants "$X" run experiment=compare_variants
label_pool minilm "$(parent_of variants)"
step variants_labelled "$X" run experiment=compare_variants
VARIANTS=$(parent_of variants_labelled)
step compare "$X" compare --last-sweep --segments exact,paraphrase,production
step promote "$X" promote --sweep "$VARIANTS"
step gate "$X" gate --run-now --markdown-summary "$WORK/gate_summary.md"
step history "$X" history --markdown-summary "$WORK/history.md"
step warm_run "$X" run

# the numbers
rate() { tr '\r' '\n' <"$LOG/$1.log" | grep -o '[0-9.]*text/s' | tail -1; }
echo
echo "embedding texts/s: static $(rate ingest_static), MiniLM $(rate ingest_minilm)"
echo "golden add per case: $(sort -t: -k2 -n "$LOG/add_times.txt" | awk -F': ' '{print $2}' | tr '\n' ' ')"
grep -h "time: total" "$LOG/warm_run.log" | tail -1 | sed 's/^/warm run: /'
echo
echo "| step | command | wall (s) |"
echo "|---|---|---:|"
for s in "${STEPS[@]}"; do
  IFS='|' read -r name cmd secs <<<"$s"
  cmd=${cmd//$VENV\/bin\//}
  printf '| %s | `%s` | %s |\n' "$name" "${cmd:0:110}" "$secs"
done
echo
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg); compare: $LOG/compare.log; gate: $WORK/gate_summary.md"
