"""What a new team does, from the installed wheel, with no network (issue 28, item 6).

Its own documents in every format the corpus reads (PDF, DOCX, PPTX, HTML, TXT, Markdown, made
here by the libraries a team's tools would use), ``rag-exp corpus convert``, ``rag-exp init``,
``golden generate`` against a local Anthropic-API stub, ``golden label`` against a local
OpenAI-compatible stub (``--provider openai``: a team mixing providers; both wire formats go
through the real SDKs), ``golden spotcheck`` answered from files (stdin redirected from one, then an exported CSV, in two
sittings), ``golden stats``, a run, a sweep, ``compare`` and ``promote``: every command is the
installed ``rag-exp`` run with the project as its working folder, against the session's real
PostgreSQL and an MLflow store in the project.

The stubs answer like a model that follows the prompts: the generator quotes the passage it was
sent (so every case anchors) and asks about an identifier in it; the judge answers YES / PART / NO
by how many of the question's words the passage holds. The human's answers file agrees with the
judge on all but a few pairs, so the judge is "not validated" after the first sitting (too few
pairs) and "validated" after the second.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
import subprocess
import time
from pathlib import Path

from tests.golden.anthropic_stub import AnthropicStub
from tests.golden.anthropic_stub import prompt_of as anthropic_prompt
from tests.golden.anthropic_stub import text as anthropic_text
from tests.golden.openai_stub import OpenAIStub
from tests.golden.openai_stub import prompt_of as openai_prompt
from tests.golden.openai_stub import text as openai_text
from tests.wheel_venv import installed, project_env  # noqa: F401 - the shared wheel fixture

# -- the team's documents ----------------------------------------------------------------------
MEMORY = ("Sets the base maximum amount of memory to be used by a query operation (such as a sort or hash "
          "table) before writing to temporary disk files. If this value is specified without units, it is taken "
          "as kilobytes. The default value of work_mem is four megabytes.")
SHARED = ("Sets the amount of memory the database server uses for shared memory buffers. The default of "
          "shared_buffers is typically 128 megabytes, but might be less if your kernel settings will not support it.")
MAINT = ("Specifies the maximum amount of memory to be used by maintenance operations, such as VACUUM, "
         "CREATE INDEX, and ALTER TABLE ADD FOREIGN KEY. maintenance_work_mem defaults to 64 megabytes.")
DISK = ("Specifies the maximum amount of disk space that a process can use for temporary files, such as sort "
        "and hash temporary files. A transaction attempting to exceed temp_file_limit will be canceled.")
CODES = [("23000", "integrity_constraint_violation"), ("23502", "not_null_violation"),
         ("23503", "foreign_key_violation"), ("23505", "unique_violation"), ("40001", "serialization_failure"),
         ("40P01", "deadlock_detected")]


def make_pdf() -> bytes:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_title("Resource Consumption")
    pdf.set_font("helvetica", size=11)
    for heading, paragraphs in (("Memory", [SHARED, MEMORY, MAINT]), ("Disk", [DISK])):
        pdf.add_page()
        pdf.start_section(heading)
        pdf.multi_cell(0, 6, heading, align="L", new_x="LMARGIN", new_y="NEXT")
        for p in paragraphs:
            pdf.multi_cell(0, 6, p, align="L", new_x="LMARGIN", new_y="NEXT")
            pdf.ln(3)
    return bytes(pdf.output())


def make_docx() -> bytes:
    import docx

    d = docx.Document()
    d.core_properties.title = "Error Codes"
    d.add_heading("Error Codes", level=1)
    d.add_paragraph("All messages emitted by the database server are assigned five-character error codes that "
                    "follow the SQL standard's conventions for SQLSTATE codes. Applications should test the "
                    "error code rather than the message text.")
    t = d.add_table(rows=len(CODES) + 1, cols=2)
    for r, (a, b) in enumerate([("Error Code", "Condition Name"), *CODES]):
        t.cell(r, 0).text, t.cell(r, 1).text = a, b
    d.add_heading("Unique violations", level=2)
    d.add_paragraph("The code 23505 (unique_violation) is raised when an insert or update would create a "
                    "duplicate value in a column covered by a unique index or a primary key constraint.")
    d.add_paragraph("The code 40P01 (deadlock_detected) is raised when two transactions wait for locks held by "
                    "each other; one of them is rolled back and may be retried by the application.")
    buf = io.BytesIO()
    d.save(buf)
    return buf.getvalue()


def make_pptx() -> bytes:
    from pptx import Presentation
    from pptx.util import Inches

    prs = Presentation()
    for title, body in (
        ("CREATE INDEX", "CREATE INDEX constructs an index on the specified column(s) of the specified relation, "
                         "which can be a table or a materialized view. Indexes are primarily used to enhance "
                         "database performance, at the cost of slower writes."),
        ("Building Indexes Concurrently",
         "Normally the server locks the table to be indexed against writes and performs the entire index build "
         "with a single scan of the table. With the CONCURRENTLY option, the index is built without taking any "
         "locks that prevent concurrent inserts, updates, or deletes on the table."),
    ):
        slide = prs.slides.add_slide(prs.slide_layouts[5])
        slide.shapes.title.text = title
        slide.shapes.add_textbox(Inches(1), Inches(2), Inches(8), Inches(3)).text_frame.text = body
    buf = io.BytesIO()
    prs.save(buf)
    return buf.getvalue()


HTML = """<!doctype html>
<html><head><meta charset="utf-8"><title>Controlling Text Search</title></head><body>
<h1>Controlling Text Search</h1>
<h2>Ranking Search Results</h2>
<p>Ranking attempts to measure how relevant documents are to a particular query. The server provides two
predefined ranking functions, <code>ts_rank</code> and <code>ts_rank_cd</code>, which take into account lexical,
proximity, and structural information.</p>
<p>The function ts_rank_cd computes the cover density ranking for the given document vector and query. This
function requires lexeme positional information to perform its calculation.</p>
<h2>Parsing Queries</h2>
<p>The function websearch_to_tsquery creates a tsquery value from query text using an alternative syntax in which
simple unformatted text is a valid query. Unlike plainto_tsquery, it recognizes quoted phrases and the word or.</p>
</body></html>
"""

TXT = """Getting Started

Creating a Database

The first test to see whether you can access the database server is to try to create a database. A running
server can manage many databases. Typically, a separate database is used for each project or for each user.
To create a new database named mydb, you run the command createdb with the name of the new database.

Accessing a Database

Once you have created a database, you can access it by running the interactive terminal program, called psql,
which allows you to interactively enter, edit, and execute SQL commands against the database.
"""

MD = """# JSON Functions and Operators

## Processing Functions

The function jsonb_path_query returns all JSON items returned by the JSON path for the specified JSON value. The
optional vars and silent arguments act the same as for jsonb_path_exists.

The function jsonb_array_length returns the number of elements in the top-level JSON array.

## Creating JSON

The function to_jsonb converts any SQL value to jsonb. Arrays and composites are converted recursively to arrays
and objects, and numbers keep their precision.
"""


def make_corpus(folder: Path) -> dict[str, str]:
    """Six documents, one per format, in ``folder``; file name -> format."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {"resource-consumption.pdf": make_pdf(), "error-codes.docx": make_docx(),
             "create-index.pptx": make_pptx(), "text-search.html": HTML.encode(),
             "getting-started.txt": TXT.encode(), "json-functions.md": MD.encode()}
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return {name: name.rsplit(".", 1)[1] for name in files}


# -- the stubs' answers: a generator and a judge that follow the prompts ---------------------------
_PASSAGE = re.compile(r"<passage>\n(.*)\n</passage>", re.DOTALL)
_IDENT = re.compile(r"\b(?:[a-z]+(?:_[a-z0-9]+)+|\d{2}[0-9P]\d{2}|[A-Z]{6,}|createdb|psql)\b")
_STOP = {"the", "that", "this", "with", "from", "which", "what", "when", "does", "into", "than", "your", "used",
         "about", "have", "each", "there", "their", "they", "them", "will", "would", "should", "could", "also"}


def content_words(text: str) -> list[str]:
    return [w.lower() for w in re.findall(r"[A-Za-z][A-Za-z0-9_]+", text) if len(w) > 3 and w.lower() not in _STOP]


def _sentences(passage: str) -> list[str]:
    out = []
    for line in passage.splitlines():
        out += [s.strip() for s in re.split(r"(?<=[.!?])\s+", line) if len(s.strip()) >= 25]
    return out


def generation_answer(passage: str) -> list[dict]:
    """A paraphrase anchored on the passage's longest sentence and, when the passage names an
    identifier, an exact question quoting the sentence that holds it (both quotes verbatim)."""
    sentences = _sentences(passage)
    if not sentences:
        return []
    longest = max(sentences, key=len)
    words = content_words(longest)[:6]  # six words: never a copied run of eight
    items = [{"kind": "paraphrase", "question": f"how do I handle {' '.join(words)}?", "identifier": None,
              "evidence_quote": longest}]
    for s in sentences:
        m = _IDENT.search(s)
        if m:
            items.append({"kind": "exact", "question": f"what is {m.group(0)} for?", "identifier": m.group(0),
                          "evidence_quote": s})
            break
    return items


def rewrite_answer(prompt: str) -> dict:
    """A rewrite in a user's words (golden generate's leakage bar sends a question that copies its
    passage back once): two of the copied words in a question of the user's own, the identifier
    kept verbatim when there is one."""
    copied = re.search(r"^Copied words: (.*)$", prompt, re.MULTILINE).group(1).split(", ")
    ident = re.search(r"^Identifier to keep verbatim: (.+)$", prompt, re.MULTILINE)
    words = " ".join(w for w in copied[:2] if w)
    lead = f"{ident.group(1)}: " if ident else ""
    return {"question": f"{lead}what should I know about {words} when I set things up?"}


def generation_reply(body: dict):
    from rag_experiments.golden.generate import REWRITE_SYSTEM_PROMPT

    prompt = anthropic_prompt(body)
    if body.get("system") == REWRITE_SYSTEM_PROMPT:
        return anthropic_text(rewrite_answer(prompt))
    return anthropic_text(generation_answer(_PASSAGE.search(prompt).group(1)))


def verdict_for(question: str, passage: str) -> str:
    """YES when the passage holds most of the question's words, PART for some, NO otherwise (the
    judge's rule, and the human's in the answers file)."""
    q = set(content_words(question))
    share = len(q & set(content_words(passage))) / len(q) if q else 0.0
    return "YES" if share >= 0.6 else "PART" if share >= 0.3 else "NO"


def judge_reply(body: dict):
    prompt = openai_prompt(body)
    question = prompt.split("\n", 1)[0].removeprefix("Question: ")
    verdict = verdict_for(question, _PASSAGE.search(prompt).group(1))
    return openai_text({"verdict": verdict, "reason": "by the words the passage shares with the question"})


def spotcheck_answers(golden: Path, seed: int, disagree: set[int]) -> list[str]:
    """The answers a careful human gives, in the order spot-check shows the pairs (documented in
    rag_experiments/golden/spotcheck_sample.py: live machine judgements sorted by sha256("<seed>|<id>")):
    the judge's rule applied to the question and passage shown, except at the positions in
    ``disagree``."""
    records = [json.loads(line) for line in golden.read_text().splitlines()]
    queries = {r["id"]: r["query"] for r in records if r.get("type") == "case"}
    judged = [r for r in records if r.get("type") == "judgement" and r["judge"]["kind"] == "llm"]
    judged.sort(key=lambda r: hashlib.sha256(f"{seed}|{r['id']}".encode()).hexdigest())
    out = []
    for i, r in enumerate(judged):
        v = verdict_for(queries[r["case_id"]], r["span"]["quote"])
        assert v == r["verdict"], r  # the judge's rule, seen from the human's side
        if i in disagree:
            v = "NO" if v != "NO" else "YES"
        out.append({"YES": "y", "PART": "p", "NO": "n"}[v])
    return out


# -- the test ----------------------------------------------------------------------------------
def _records(golden: Path, kind: str) -> list[dict]:
    return [r for r in map(json.loads, golden.read_text().splitlines()) if r.get("type") == kind]


def test_a_new_team_from_documents_in_every_format_to_a_promoted_champion(installed, tmp_path, pg_url):
    anthropic, openai = AnthropicStub().start(), OpenAIStub().start()
    anthropic.responder, openai.responder = generation_reply, judge_reply
    env = project_env(installed, DATABASE_URL=pg_url, ANTHROPIC_BASE_URL=anthropic.base_url,
                      ANTHROPIC_API_KEY="test", RAG_EXP_CONVERT_CACHE=str(tmp_path / "convert-cache"))
    for key in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        env.pop(key, None)
    docs, project = tmp_path / "our-docs", tmp_path / "retrieval-evals"
    formats = make_corpus(docs)
    golden = project / "experiments" / "golden" / "ours.jsonl"

    timings: list[tuple[str, float]] = []

    def rag_exp(*args: str, cwd: Path = project, answers: Path | None = None) -> str:
        t0 = time.monotonic()
        with open(answers or "/dev/null") as stdin:  # a new team's shell: stdin from a file, never a terminal
            done = subprocess.run([str(installed / "rag-exp"), *args], cwd=cwd, env=env, capture_output=True,
                                  text=True, timeout=600, stdin=stdin)
        timings.append((" ".join(args[:2] if args[0] in ("golden", "corpus") or args[1:2] == ("-m",) else args[:1]),
                        time.monotonic() - t0))
        assert done.returncode == 0, f"rag-exp {' '.join(args)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        return done.stdout + done.stderr

    def flat(text: str) -> str:
        """The output with rich's line wrapping undone (any run of whitespace is one space)."""
        return " ".join(text.split())

    try:
        # the documents, as the corpus reads them: one row per format, nothing failed
        out = rag_exp("corpus", "convert", str(docs), cwd=tmp_path)
        rows = {cells[0]: cells for cells in ([c.strip() for c in line.strip().strip("|").split("|")]
                                              for line in out.splitlines() if line.startswith("| "))}
        for fmt, converter in [("pdf", "pypdf "), ("docx", "mammoth "), ("pptx", "python-pptx "),
                               ("html", "html_import "), ("txt", "-"), ("md", "-")]:
            files, documents, failures = rows[fmt][1], rows[fmt][2], rows[fmt][6]
            assert (files, documents, failures) == ("1", "1", "0") and rows[fmt][7].startswith(converter), out
        assert rows["total"][1:3] == ["6", "6"] and "6 documents" in out

        # as typed in a shell beside the documents: a relative --corpus is taken from there
        out = flat(rag_exp("init", "retrieval-evals", "--corpus", "our-docs", "--name", "ours", cwd=tmp_path))
        assert "wrote experiments/golden/ours.jsonl" in out and (project / "conf" / "project.yaml").is_file()
        assert "(6 documents: 1 docx, 1 html, 1 md, 1 pdf, 1 pptx, 1 txt)" in out, out
        assert "path: ../our-docs\n" in (project / "conf" / "corpus" / "ours.yaml").read_text()  # beside it

        # questions from the Anthropic-API stub: every one anchored in the team's documents
        out = flat(rag_exp("golden", "generate", "-n", "20", "--yes"))
        cases = _records(golden, "case")
        assert f"cases appended: {len(cases)}" in out and len(cases) >= 10, out
        assert {c["evidence"][0]["source_uri"] for c in cases} == set(formats), out  # each format asked about
        assert all(c["provenance"]["provider"] == "anthropic" and c["provenance"]["model"] == "claude-sonnet-4-6"
                   and c["provenance"]["evidence_located"] == "exact" for c in cases)
        assert {c["kind"] for c in cases} == {"paraphrase", "exact"}
        # one generation request per sampled chunk, then one rewrite per question over the leakage bar
        # (the stub's paraphrases copy their passage), each with the key
        from rag_experiments.golden.generate import REWRITE_SYSTEM_PROMPT

        asked = anthropic.requests()
        rewrites = [r for r in asked if r["body"].get("system") == REWRITE_SYSTEM_PROMPT]
        assert len(asked) - len(rewrites) == len({c["provenance"]["source_chunk"] for c in cases})
        assert "rewritten" in out and len(rewrites) >= 1, out
        assert all(r["has_api_key"] for r in asked)

        # judgements from the OpenAI-compatible stub (a team's own server), at no cost
        out = flat(rag_exp("golden", "label", "-k", "10", "--provider", "openai", "--base-url", openai.base_url,
                           "--model", "local-model", "--price", "0,0", "--yes"))
        judgements = _records(golden, "judgement")
        assert f"judgements appended: {len(judgements)}" in out and len(judgements) >= 30, out
        assert "provider openai" in out and "cost $0.0000" in out
        judge = {"kind": "llm", "provider": "openai", "model": "local-model", "prompt_version": "judge-v1"}
        assert all(j["judge"] == judge for j in judgements)
        sent = openai.requests()
        assert len(sent) == len(judgements) and {r["body"]["model"] for r in sent} == {"local-model"}

        # the human checks the judge from an answers file, in two sittings (the file ends: progress is kept)
        answers = spotcheck_answers(golden, seed=7, disagree={12, 20})  # 2 of 30 disagree: 6.7% <= 10%
        first = tmp_path / "answers-1.txt"
        first.write_text("\n".join(answers[:10]) + "\n")
        out = flat(rag_exp("golden", "spotcheck", "--author", "ann", answers=first))
        assert "n=10, agreement 100.0%" in out and "not validated" in out, out
        # the rest offline: an exported CSV (blind: no machine verdict), answered, read back by judgement id
        pairs = tmp_path / "pairs.csv"
        assert "wrote 20 pair(s)" in flat(rag_exp("golden", "spotcheck", "--export", str(pairs)))
        rows = list(csv.DictReader(pairs.open(encoding="utf-8", newline="")))
        for i, row in enumerate(rows):
            row["verdict"] = {"y": "YES", "p": "PART", "n": "NO"}[answers[10 + i]]
        with pairs.open("w", encoding="utf-8", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(reversed(rows))  # any order: keyed by judgement id
        out = flat(rag_exp("golden", "spotcheck", "--answers", str(pairs), "--author", "ann"))
        assert "recorded 20 verdict(s)" in out and "n=30, agreement 93.3%" in out and ": validated" in out, out
        spot = project / "experiments" / "spotcheck" / "ours.jsonl"  # verdicts beside the golden set, not in it
        checks = [json.loads(x) for x in spot.read_text().splitlines()]
        assert len(checks) == 30 and {c["author"] for c in checks} == {"ann"}
        assert sum(c["human_verdict"] != c["llm_verdict"] for c in checks) == 2

        out = flat(rag_exp("golden", "stats"))
        assert f"cases: {len(cases)} (0 retired, {len(cases)} scorable)" in out
        assert "llm │ openai:local-model │ judge-v1 │ 60" in out, out  # the judges table names the provider
        assert "judge validation (openai:local-model / judge-v1): VALIDATED; 30 spot-checked pairs" in out, out
        # this generator's paraphrases are the passage's own words; the leakage bar had them rewritten
        # at generation, so the quality report no longer finds copying paraphrases
        assert "WARNING: paraphrase questions copy their passage" not in out and "paraphrase" in out

        # a run, a sweep, compare, promote
        out = flat(rag_exp("run", "eval.bootstrap_samples=200", "tracking.plots=false"))
        assert f"({len(cases)} cases)" in out and "MLflow run:" in out and "ingest:" in out
        first = out
        sweep = flat(rag_exp("run", "-m", "fusion.rrf_k=30,60", "eval.bootstrap_samples=200",
                             "tracking.plots=false"))
        assert sweep.count(f"({len(cases)} cases,") == 2 and "sweep summary logged to parent run" in sweep
        out = flat(rag_exp("compare", "--last-sweep"))
        assert "rrf_k=30" in out and "rrf_k=60" in out and "randomization" in out
        out = flat(rag_exp("promote"))
        assert "alias champion" in out and "conf/experiment/promoted.yaml" in out
        # no MLflow chatter for the user, and the UI hint fits a project without a Makefile
        assert "Add type hints" not in out and "INFO mlflow" not in out, out
        assert "make ui" not in out and "mlflow ui --backend-store-uri sqlite:///" in out, out
        promoted = (project / "conf" / "experiment" / "promoted.yaml").read_text()
        assert "path: ../our-docs" in promoted and "path: experiments/golden/ours.jsonl" in promoted
        assert re.search(r"^  rrf_k: (30|60)$", promoted, re.MULTILINE), promoted
        record = json.loads((project / "experiments" / "promoted" / "ours.record.json").read_text())
        # the best run of the store: a sweep point, or the first run (rrf_k=60 too) when it ties with
        # the sweep's best, since ties go to the earliest run (the one tie rule, tracking.sweep_parent.best_of)
        assert record["run_id"] in sweep + first and record["metrics"]["n_cases"] == len(cases)
        tags = record["tags"]  # the champion's evidence: this golden set, its labels' judge validated
        assert tags["golden_sha256"] == hashlib.sha256(golden.read_bytes()).hexdigest()
        assert tags["golden_set"] == "ours.jsonl" and tags["labels_validated"] == "validated"
    finally:
        anthropic.stop()
        openai.stop()
        print("seconds per command: " + ", ".join(f"{name} {t:.1f}" for name, t in timings))  # shown with -s / -rP
