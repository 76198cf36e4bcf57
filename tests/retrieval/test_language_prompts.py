"""corpus.language in the LLM prompts (issue 47 item 4): generation, rewriting and judging ask for /
name the corpus's language when it is not english; english prompts are byte for byte as before
(their checkpoints and caches are keyed by the request)."""

from __future__ import annotations

from pathlib import Path

from rag_experiments import llm
from rag_experiments.golden import generate as gen
from rag_experiments.golden import label

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CHUNK = {"chunk_id": "c1", "doc_id": "man1/cp.1", "source_uri": "man1/cp.1", "doc_type": "manpage",
         "start": 0, "end": 30, "text": "Dateien und Verzeichnisse kop.", "n_tokens": 80, "doc_hash": "h"}


def test_english_prompts_are_unchanged():
    assert gen.build_prompt(CHUNK) == gen.build_prompt(CHUNK, "english") == (
        "Passage (from man1/cp.1, document type manpage):\n<passage>\nDateien und Verzeichnisse kop.\n</passage>\n\n"
        "Write the questions following the rubric. Answer with the JSON list only.")
    assert label.build_prompt("q?", "p") == label.build_prompt("q?", "p", "english") == (
        "Question: q?\n\nPassage:\n<passage>\np\n</passage>\n\nAnswer with the JSON object only.")
    assert "Write the questions in" not in gen.build_rewrite_prompt("Wie kopiere ich?", "kopieren", None)
    assert gen.build_prompt(CHUNK, "simple") == gen.build_prompt(CHUNK)  # simple names no language


def test_other_languages_ask_for_questions_in_them(tmp_path):
    assert "Write the questions in German. Write the questions following the rubric." in gen.build_prompt(CHUNK, "german")
    assert "Write the questions in French." in gen.build_rewrite_prompt("Comment copier ?", "copier", None, "french")
    assert "The question and the passage are in Spanish." in label.build_prompt("¿Cómo?", "p", "spanish")
    # the plan the command makes: every generation job's prompt carries the sentence
    chunks = [dict(CHUNK, chunk_id=f"c{i}", text="x" * 30) for i in range(5)]
    plan = gen.plan_generation(chunks, tmp_path / "g.jsonl", n=5, model="m", provider="openai",
                               price=llm.Price(0, 0), language="german")
    assert plan.pending and all("Write the questions in German." in j.prompt for j in plan.pending)
    assert plan.language == "german"
