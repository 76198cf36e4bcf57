"""The confident rule's relevance model with features (rag_experiments.golden.relevance_features and
relevance_logit):

* the overlap feature: the share of the question's terms a passage holds, stemmed, stop words out;
* the cosine feature: question and passage under the bundled static-minilm; a hand-worked paraphrase
  (no word shared) on topic ranks above an off-topic passage, where overlap gives both 0;
* a hand-worked case: in one cell, labels show that passages with the question's words are relevant and
  those without are not; an unjudged passage with the words then gets a higher probability than one
  without, where the cell model gives both the same rate; with nothing judged the draws stay wide;
* the tracker reads the questions (``queries``) and the real command passes them as the replay does.

Before this change there were no features and no FeatureModel: every test here fails on import."""

from __future__ import annotations

import numpy as np
import pytest

from rag_experiments.evaluation.bounds import CaseView
from rag_experiments.golden.decide_stop import Judged, RelevanceModel, cell_of
from rag_experiments.golden import relevance_features
from rag_experiments.golden.relevance_features import FEATURE_OF, FEATURES, cosine, features, overlap, terms
from rag_experiments.golden.relevance_logit import FeatureModel
from rag_experiments.tracking.decide_tracker import PairTracker


def test_overlap_counts_the_questions_stemmed_terms():
    assert terms("How do I create an index on the tables?") == {"create", "index", "tabl"}
    assert overlap("How do I create an index on the tables?", "CREATE INDEX builds indexes on the tables") == 1.0
    assert overlap("How do I create an index on the tables?", "VACUUM reclaims storage of the tables") == pytest.approx(1 / 3)
    assert overlap("what is it?", "anything") == 0.0  # stop words only: no terms, no overlap
    assert features(None, "text") == () and features("index", "an index")[0] == 1.0


def test_the_cosine_ranks_an_on_topic_paraphrase_above_an_off_topic_passage():
    """No word of the question in either passage (overlap 0 for both); the static embedder still puts
    the car-repair passage near the question (measured 0.65) and the baking one far (0.21)."""
    question = "How do I repair an automobile engine?"
    on_topic = "Fixing a car motor: replace the spark plugs and check the pistons."
    off_topic = "Bake the bread in a hot oven for twenty minutes."
    assert overlap(question, on_topic) == overlap(question, off_topic) == 0.0
    assert cosine(question, on_topic) > cosine(question, off_topic) + 0.2
    assert cosine(question, question) == pytest.approx(1.0, abs=1e-5)
    assert cosine(question, "") == 0.0  # no token: a zero vector, not NaN
    assert len(features(question, on_topic)) == len(FEATURES)


def test_features_follow_the_names_in_features(monkeypatch):
    """FEATURES names the model's features; a measured one left out (cosine) comes back by its name."""
    question, text = "How do I create an index?", "CREATE INDEX builds an index"
    assert set(FEATURES) <= set(FEATURE_OF) and len(features(question, text)) == len(FEATURES)
    monkeypatch.setattr(relevance_features, "FEATURES", ("overlap", "cosine"))
    assert features(question, text) == (overlap(question, text), cosine(question, text))


def labelled(cell_ranks=(1, None)):
    """One cell (rank 1 in A only): 12 passages with overlap 0.8 (10 YES, 2 NO), 12 with 0.0 (1 YES, 11 NO)."""
    ra, rb = cell_ranks
    out = [Judged(ra, rb, 2 if i < 10 else 0, f"q{i}", (0.8,)) for i in range(12)]
    out += [Judged(ra, rb, 2 if i < 1 else 0, f"r{i}", (0.0,)) for i in range(12)]
    return out


def test_a_passage_with_the_questions_terms_is_more_likely_relevant_once_labels_say_so():
    judged = labelled()
    cell = cell_of(1, None)
    fm = FeatureModel(judged, 1)
    high, low = fm.means([cell, cell], [(0.8,), (0.0,)])
    # hand-worked: the two groups' shares are 10/12 = 0.83 and 1/12 = 0.08; the prior pulls both a little
    # toward each other, but they stay far apart
    assert high > 0.7 and low < 0.2
    cells_only = RelevanceModel(judged).mean()[cell]
    assert 0.4 < cells_only < 0.55  # the cell model: one rate for both (11 of 24, shrunk to the overall)
    # the Monte Carlo draws carry the same order, passage by passage
    p, _ = fm.draw_probs(np.random.default_rng(1), 2000, np.array([cell, cell]), [(0.8,), (0.0,)])
    assert p[:, 0].mean() > 0.65 and p[:, 1].mean() < 0.25 and (p[:, 0] > p[:, 1]).mean() > 0.99


def test_a_feature_that_predicts_nothing_changes_little_and_nothing_judged_stays_wide():
    cell = cell_of(1, None)
    same = [Judged(1, None, 2 if i % 2 else 0, f"q{i}", (0.8 if i % 4 < 2 else 0.0,)) for i in range(40)]
    high, low = FeatureModel(same, 1).means([cell, cell], [(0.8,), (0.0,)])
    assert abs(high - low) < 0.15
    p, _ = FeatureModel([], 1).draw_probs(np.random.default_rng(2), 4000, np.array([cell]), [(0.5,)])
    # a cold start: any rate is possible (the cell model's uniform prior puts 10% below 0.1, 10% above 0.9)
    assert (p < 0.1).mean() > 0.05 and (p > 0.9).mean() > 0.05


def test_the_tracker_gives_each_passage_its_features_from_the_question():
    a = {"c1": CaseView(("d:0-5", "e:5-9", 0, 0, 0), (2,))}
    b = {"c1": CaseView((0, 0, 0, 0, 0), (2,))}
    texts = {"d:0-5": "create an index", "e:5-9": "vacuum storage"}
    tracker = PairTracker("recall_at_5", a, b, texts.get, queries={"c1": "How do I create an index?"})
    _table, _cells, _texts, unit_features = tracker.cases["c1"][5]
    assert [f[0] for f in unit_features] == [1.0, 0.0] and all(len(f) == len(FEATURES) for f in unit_features)
    assert isinstance(tracker.model(), FeatureModel)
    tracker.apply("c1", ("d:0-5",), 2)
    assert tracker.judged[-1].features == features("How do I create an index?", "create an index")
    plain = PairTracker("recall_at_5", a, b, texts.get)  # no questions: the cell model, as before
    assert type(plain.model()) is RelevanceModel


def test_judged_in_pool_gives_the_verdicts_given_before_their_features():
    """golden label --decide learns from verdicts recorded before this session too: with the questions
    (as the command passes them) each judged pool passage carries its features."""
    from rag_experiments.tracking.decide_tracker import judged_in_pool

    start = {"c": CaseView(("d:0-5", "d:5-9"), (2,))}
    now = {"c": CaseView((2, 0), (2, 2))}
    texts = {"d:0-5": "an index", "d:5-9": "vacuum"}
    judged, _ = judged_in_pool(start, start, now, now, 2, texts.get, {"c": "index"})
    assert [(j.grade, j.features[0]) for j in judged] == [(2, 1.0), (0, 0.0)]
    assert [j.features for j in judged] == [features("index", "an index"), features("index", "vacuum")]
