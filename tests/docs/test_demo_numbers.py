"""One number per thing (issue 48, item 7 / Deliver 5): the demo's headline numbers that the README
and the docs quote are the ones in docs/_data/demo_numbers.json, and that file is what a fresh
``python run.py`` prints (tests/docs/test_tutorials.py checks the latter on the demo tutorial's own
fresh run). A quoted row is a line of the summary table, plain (``all  230  0.798 ...``) or as rich
draws it (``│ all │ 230 │ 0.798 │``); in prose, a headline number names its golden version
(``recall@5 0.798 on `cfaa7100```). Numbers measured otherwise (a sweep, another golden version)
are written with the golden version and date they were measured on.

First run (2026-12-05): 8 rows on 2 pages differed (README.md 3, docs/tutorials/demo.md 5: r@5
0.796 for 0.798, MRR@10 0.798 for 0.800, nDCG@10 0.749 for 0.750, judged@10 ...), numbers from
before the vector leg searched exactly (24946f9).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def demo_numbers():
    spec = importlib.util.spec_from_file_location("demo_numbers", ROOT / "tools" / "demo_numbers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_quoted_demo_row_is_the_measured_one():
    D = demo_numbers()
    data = D.load()
    assert data["rows"]["all"][0] == data["cases"] and data["golden"] and data["measured_on"]
    quoted = D.quoted_rows()
    assert any(where.startswith("README.md") for where, _ in quoted), "the README's summary table is not found"
    stale = D.stale_quotes(data)
    assert not stale, ("pages quote demo numbers that differ from docs/_data/demo_numbers.json (python "
                       "tools/demo_numbers.py --write-pages puts the file's numbers in):\n" + "\n".join(stale))


def test_a_stale_quote_is_found(tmp_path):
    D = demo_numbers()
    data = D.load()
    (tmp_path / "docs").mkdir()
    all_ = data["rows"]["all"]
    (tmp_path / "README.md").write_text(f"```\nall                {all_[0]}  {all_[1] - 0.002:.3f}  {all_[2]:.3f}\n```\n")
    (tmp_path / "docs" / "page.md").write_text(f"│ all │ {all_[0]} │ {all_[1]:.3f} │ {all_[2]:.3f} │\n"
                                               "│ kind=nothing │ 3 │ 0.500 │\n"
                                               f"hybrid gives recall@5 0.100 on `{data['golden'][:8]}`, "
                                               f"MRR@10 {all_[3]:.3f} on `{data['golden'][:8]}`, "
                                               "and recall@5 0.813 on `d9daf140` (history); r@20 0.100\n"
                                               f"on `{data['golden'][:8]}` across a line break\n")
    stale = D.stale_quotes(data, tmp_path)
    assert len(stale) == 4 and stale[0].startswith("README.md:2: all: r@5") and "kind=nothing" in stale[1], stale
    assert stale[2].startswith("docs/page.md:3: recall@5 0.100 on") and stale[3].startswith("docs/page.md:3: r@20"), stale
    assert D.write_pages(data, tmp_path) == ["README.md", "docs/page.md"]
    assert [x.split(": ")[1] for x in D.stale_quotes(data, tmp_path)] == ["segment 'kind=nothing' is not in docs/_data/demo_numbers.json"]
    assert "(history)" in (tmp_path / "docs" / "page.md").read_text() and "0.813 on `d9daf140`" in (tmp_path / "docs" / "page.md").read_text()


def test_the_summary_parser_reads_rich_and_plain_tables():
    D = demo_numbers()
    rich = ("┃ segment ┃ n ┃ r@5 ┃ r@20 ┃ mrr@10 ┃ ndcg@10 ┃ hit@5 ┃ hit@20 ┃ judged@10 ┃\n"
            "│ all                │ 230 │ 0.798 │ 0.945 │  0.800 │   0.750 │ 0.943 │  0.978 │     0.724 │\n")
    plain = ("segment              n    r@5   r@20  mrr@10  ndcg@10  hit@5  hit@20  judged@10\n"
             "all                230  0.798  0.945   0.800    0.750  0.943   0.978      0.724\n")
    assert D.parse_summary(rich) == D.parse_summary(plain) == {"all": [230, 0.798, 0.945, 0.8, 0.75, 0.943, 0.978, 0.724]}
