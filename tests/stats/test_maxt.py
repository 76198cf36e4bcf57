"""Max-T (Westfall-Young single-step): hand-worked values and a reference that enumerates every
sign vector written here, independently of rag_experiments.stats.maxt."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from rag_experiments.stats.maxt import against_control, all_pairs, max_t_adjusted
from rag_experiments.stats.paired import paired_permutation_test


def reference(diffs: np.ndarray) -> list[float]:
    """Adjusted p of each column by brute force: for every sign vector s over all cases (zero rows
    included), the largest |sum_i s_i d_ik| / sqrt(sum_i d_ik^2) over the columns; p_k is the share
    of vectors where that largest value reaches column k's observed one."""
    d = np.asarray(diffs, float)
    n, k = d.shape
    scale = [math.sqrt(sum(d[i, j] ** 2 for i in range(n))) for j in range(k)]
    observed = [abs(sum(d[:, j])) / scale[j] if scale[j] else 0.0 for j in range(k)]
    maxima = []
    for signs in itertools.product((1, -1), repeat=n):
        maxima.append(max(abs(sum(s * d[i, j] for i, s in enumerate(signs))) / scale[j]
                          for j in range(k) if scale[j]))
    return [sum(m >= observed[j] - 1e-9 for m in maxima) / len(maxima) if scale[j] else 1.0 for j in range(k)]


def test_hand_worked_two_points_against_a_control():
    # differences from the control: A = (1, 1, 1, 0), B = (0, 1, 0, 1); z_A = 3/√3 = √3, z_B = 2/√2 = √2.
    # Over the 16 sign vectors: |s1+s2+s3|/√3 reaches √3 when s1 = s2 = s3 (4 of 16); |s2+s4|/√2 is at
    # most √2 < √3, so p_A = 4/16 (A's own exact p, 2/8). The max reaches √2 when s2 = s4 (8) or
    # s1 = s2 = s3 (4), both together 2 times: 10/16 for B (alone: 2/4).
    control = np.zeros(4)
    points = np.array([[1, 0], [1, 1], [1, 0], [0, 1]], float)
    assert against_control(control, points).tolist() == pytest.approx([4 / 16, 10 / 16], abs=1e-15)
    assert reference(points) == pytest.approx([4 / 16, 10 / 16], abs=1e-15)
    # one point alone is the single paired test
    assert against_control(control, points[:, :1])[0] == paired_permutation_test(control, points[:, 0])


@pytest.mark.parametrize("seed", range(6))
def test_exact_path_equals_the_enumeration_reference(seed):
    rng = np.random.default_rng(seed)
    n, k = 9, 1 + seed % 4
    # recall-like per-case values: 0, 1/2, 1, with many ties and some all-zero rows
    control = rng.choice([0.0, 0.5, 1.0], n)
    points = np.where(rng.random((n, k)) < 0.5, control[:, None], rng.choice([0.0, 0.5, 1.0], (n, k)))
    assert against_control(control, points).tolist() == pytest.approx(reference(points - control[:, None]),
                                                                      abs=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_all_pairs_equals_the_enumeration_reference(seed):
    rng = np.random.default_rng(100 + seed)
    points = rng.choice([0.0, 1.0], (8, 3 + seed % 2))
    got = all_pairs(points)
    pairs = list(itertools.combinations(range(points.shape[1]), 2))
    want = reference(np.column_stack([points[:, a] - points[:, b] for a, b in pairs]))
    assert [got[a, b] for a, b in pairs] == pytest.approx(want, abs=1e-12)
    assert np.allclose(got, got.T) and (np.diag(got) == 1.0).all()


def test_sampled_path_agrees_with_exact_within_monte_carlo_error():
    rng = np.random.default_rng(7)
    control = (rng.random(14) < 0.6).astype(float)
    points = np.where(rng.random((14, 5)) < 0.6, control[:, None], (rng.random((14, 5)) < 0.6).astype(float))
    exact = against_control(control, points)
    sampled = against_control(control, points, n_resamples=20000, exact_max=0)
    se = np.sqrt(exact * (1 - exact) / 20000)
    assert (np.abs(sampled - exact) <= 4 * se + 1e-4).all(), (sampled, exact)


def test_one_point_equals_the_single_test_on_the_sampled_path():
    rng = np.random.default_rng(3)
    control = (rng.random(230) < 0.8).astype(float)
    point = np.where(rng.random(230) < 0.3, (rng.random(230) < 0.8).astype(float), control)
    assert against_control(control, point[:, None])[0] == paired_permutation_test(control, point)


def test_more_points_never_lower_the_best_points_adjusted_p():
    rng = np.random.default_rng(11)
    control = (rng.random(60) < 0.7).astype(float)
    points = np.where(rng.random((60, 12)) < 0.7, control[:, None], (rng.random((60, 12)) < 0.7).astype(float))
    best = int(points.mean(axis=0).argmax())
    alone = against_control(control, points[:, [best]], n_resamples=4000)[0]
    previous = alone
    for n in (3, 6, 12):
        cols = sorted(set(range(n)) | {best})
        p = against_control(control, points[:, cols], n_resamples=4000)[cols.index(best)]
        assert p >= previous - 1e-12
        previous = p
    assert previous > alone


def test_identical_points_and_bad_input():
    control = np.array([0.0, 1.0, 1.0])
    assert against_control(control, np.column_stack([control, control])).tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="align them by case id"):
        against_control(control, np.ones((4, 2)))
    with pytest.raises(ValueError, match="finite"):
        max_t_adjusted(np.array([[np.nan, 1.0]]))


def test_simultaneous_intervals_by_enumeration_and_wider_with_more_points():
    from rag_experiments.stats.maxt import simultaneous_intervals

    x = np.array([[1, 0], [0, 0], [1, 1], [1, 0.5], [0, 1]], float)
    d = x - x.mean(axis=0)
    scale = np.sqrt((d ** 2).sum(axis=0))
    maxima = [max(abs(np.dot(s, d[:, j])) / scale[j] for j in range(2))
              for s in itertools.product((1, -1), repeat=5)]
    q = np.quantile(maxima, 0.95)
    want = [(x[:, j].mean() - q * scale[j] / 5, x[:, j].mean() + q * scale[j] / 5) for j in range(2)]
    assert np.allclose(simultaneous_intervals(x), want, atol=1e-12, rtol=0)
    rng = np.random.default_rng(2)
    many = (rng.random((200, 20)) < 0.7).astype(float)
    one = simultaneous_intervals(many[:, :1], n_resamples=2000)[0]
    assert one == pytest.approx((many[:, 0].mean() - 1.96 * many[:, 0].std() / np.sqrt(200),
                                 many[:, 0].mean() + 1.96 * many[:, 0].std() / np.sqrt(200)), abs=0.006)
    lo, hi = simultaneous_intervals(many, n_resamples=2000)[0]
    assert hi - lo > (one[1] - one[0]) * 1.25  # 20 points tried: a wider interval for each


def test_all_pairs_sampled_path_equals_the_pair_columns_resampled():
    # the fast path (one product for all pairs) gives what max_t_adjusted gives on the pair columns
    rng = np.random.default_rng(21)
    shared = (rng.random((230, 1)) < 0.7).astype(float)
    points = np.where(rng.random((230, 12)) < 0.8, shared, (rng.random((230, 12)) < 0.7).astype(float))
    left, right = np.triu_indices(12, k=1)
    fast = all_pairs(points, n_resamples=2000)[left, right]
    assert fast.tolist() == max_t_adjusted(points[:, left] - points[:, right], n_resamples=2000).tolist()


def test_a_column_zero_on_every_case_gets_one_beside_live_ones_on_both_paths():
    # (1, 1, 1) beside a column of zeros: the zero column cannot move the max, so the live column's p is its
    # own exact p, 2 of the 8 sign vectors (all +, all -) reach |sum| = 3: 0.25; the zero column gets 1.0
    d = np.array([[1, 0], [1, 0], [1, 0]], float)
    assert max_t_adjusted(d).tolist() == [0.25, 1.0]
    # the sampled path (exact_max=0): the same draws as the live column alone, and 1.0 for the zero one
    sampled = max_t_adjusted(d, n_resamples=999, exact_max=0)
    assert sampled[1] == 1.0
    assert sampled[0] == max_t_adjusted(d[:, :1], n_resamples=999, exact_max=0)[0] == pytest.approx(0.25, abs=0.05)


def test_adjusted_p_values_do_not_depend_on_the_unit():
    # a metric in other units (latency in ms or s) is the same test: every statistic is a sum over its own
    # standard deviation, and the float tolerance is taken on that scale; sampled paths (230 cases)
    rng = np.random.default_rng(21)
    shared = (rng.random((230, 1)) < 0.7).astype(float)
    points = np.where(rng.random((230, 6)) < 0.8, shared, (rng.random((230, 6)) < 0.7).astype(float))
    for factor in (1000.0, 1e-3):
        assert all_pairs(points * factor, n_resamples=500).tolist() == all_pairs(points, n_resamples=500).tolist()
        assert (against_control(points[:, 0] * factor, points[:, 1:] * factor, n_resamples=500).tolist()
                == against_control(points[:, 0], points[:, 1:], n_resamples=500).tolist())
