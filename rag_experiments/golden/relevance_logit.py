"""The confident rule's relevance model with features: a Bayesian logistic regression of a pool
passage's verdict (relevant or not) on its cell and its features (:mod:`.relevance_features`).

The cell model (:class:`.decide_stop.RelevanceModel`) gives every passage of one rank band and side
the same rate; within a cell the passages that repeat the question's words are more often relevant.
Here the log-odds of relevance is its cell's intercept plus a slope per feature (the features centred
on the judged passages' mean):

* priors: the cells' intercepts around a shared mean ``mu`` (N(mu, CELL_SD^2), mu ~ N(0, MEAN_SD^2):
  with nothing judged any rate from near 0 to near 1 is possible, as the cell model's uniform prior),
  each slope N(0, SLOPE_SD^2);
* the posterior by the Laplace approximation: its mode by Newton's method, its covariance the inverse
  Hessian there. Each Monte Carlo draw takes its own coefficients from N(mode, covariance), so few
  labels still mean wide probabilities and the rule asks for more;
* the per-question factor and the share of YES among the relevant stay the cell model's.

numpy only: the fit has 1 + 15 + len(features) coefficients and at most a few thousand passages.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from .decide_stop import Judged, RelevanceModel

MEAN_SD = 1.5  # the prior of the overall log-odds: 95% of it between rates 0.05 and 0.95
CELL_SD = 1.5  # how far a cell's log-odds may sit from the overall one before its own labels say so
SLOPE_SD = 3.0  # a feature's slope: overlap 0 -> 1 may move the odds by up to e^6 either way
NEWTON_STEPS = 30


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # no overflow for large |x|


class FeatureModel(RelevanceModel):
    """Per passage its own probability of relevance from its cell and its features (a logistic
    regression fitted on the judged pool passages, drawn from its Laplace posterior)."""

    def __init__(self, judged: Iterable[Judged], n_features: int, by_rank: bool = False) -> None:
        super().__init__(judged, by_rank=by_rank)
        self.n_features = n_features
        # one slope per feature for every cell: a slope per side (only A ranks the passage, only B, both),
        # each cell's features centred on its own mean, took more labels on the demo's vector vs keyword
        # (671 against 585 of 1626) and no fewer on vector vs hybrid (241 against 238)
        self.n_slopes = n_features
        cells = np.array(self.cells, dtype=int)
        x = np.array([f for f in self.features], dtype=float).reshape(len(cells), n_features)
        self.centre = x.mean(0) if len(x) else np.zeros(n_features)
        self.mode, self.cov = self._fit(cells, x, np.array(self.relevant, dtype=float))
        self._root: np.ndarray | None = None

    # the coefficients: [mu, one intercept per cell, one slope per feature]
    def _prior_precision(self) -> np.ndarray:
        dim = 1 + self.n_cells + self.n_slopes
        prec = np.zeros((dim, dim))
        cell = slice(1, 1 + self.n_cells)
        prec[0, 0] = 1 / MEAN_SD**2 + self.n_cells / CELL_SD**2
        prec[0, cell] = prec[cell, 0] = -1 / CELL_SD**2
        prec[cell, cell] = np.eye(self.n_cells) / CELL_SD**2
        prec[1 + self.n_cells:, 1 + self.n_cells:] = np.eye(self.n_slopes) / SLOPE_SD**2
        return prec

    def _slopes_x(self, cells: np.ndarray, x: np.ndarray) -> np.ndarray:
        """(units x n_slopes) the features, centred on the judged passages' mean."""
        return x - self.centre

    def _design(self, cells: np.ndarray, x: np.ndarray) -> np.ndarray:
        design = np.zeros((len(cells), 1 + self.n_cells + self.n_slopes))
        design[np.arange(len(cells)), 1 + cells] = 1.0
        design[:, 1 + self.n_cells:] = self._slopes_x(cells, x)
        return design

    def _fit(self, cells: np.ndarray, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The posterior's mode and covariance (Newton's method on the log posterior: it is concave)."""
        prec = self._prior_precision()
        design = self._design(cells, x)
        theta = np.zeros(prec.shape[0])
        hessian = prec
        for _ in range(NEWTON_STEPS):
            p = sigmoid(design @ theta)
            grad = design.T @ (p - y) + prec @ theta
            hessian = (design * (p * (1 - p))[:, None]).T @ design + prec
            step = np.linalg.solve(hessian, grad)
            theta = theta - step
            if np.abs(step).max() < 1e-8:
                break
        p = sigmoid(design @ theta)
        hessian = (design * (p * (1 - p))[:, None]).T @ design + prec
        cov = np.linalg.inv(hessian)
        return theta, (cov + cov.T) / 2

    def _logits(self, theta: np.ndarray, cells: np.ndarray, features: Sequence[tuple[float, ...]]) -> np.ndarray:
        """(draws x units) log-odds of relevance of each unit under each row of coefficients ``theta``."""
        x = np.array(features, dtype=float).reshape(len(cells), self.n_features)
        return theta[:, 1 + cells] + theta[:, 1 + self.n_cells:] @ self._slopes_x(cells, x).T

    def means(self, cells: Sequence[int], features: Sequence[tuple[float, ...]]) -> np.ndarray:
        """The rate at the posterior's mode (the spread order, the per-question factor's expectations)."""
        cells = np.asarray(cells, dtype=int)
        return sigmoid(self._logits(self.mode[None, :], cells, features)[0])

    def mean(self) -> np.ndarray:
        """Each cell's rate at the judged passages' mean features."""
        return sigmoid(self.mode[1:1 + self.n_cells])

    def cell_variance(self) -> np.ndarray:
        """Each cell intercept's posterior variance: how unsure the model still is of the cell's log-odds."""
        return np.diag(self.cov)[1:1 + self.n_cells].copy()

    def coefficients(self, cells: Sequence[int], features: Sequence[tuple[float, ...]]) -> tuple[np.ndarray, np.ndarray]:
        """(units x dim) how each unit's log-odds reads the coefficients (its cell's intercept, its centred
        features' slopes; the shared mean none) and (dim x dim) their posterior covariance."""
        cells = np.asarray(cells, dtype=int)
        x = np.array(features, dtype=float).reshape(len(cells), self.n_features)
        return self._design(cells, x), self.cov

    def draw_probs(self, rng: np.random.Generator, draws: int, cells: np.ndarray,
                   features: Sequence[tuple[float, ...]]) -> tuple[np.ndarray, np.ndarray]:
        """(draws x units) each unit's probability of relevance under coefficients drawn from the
        posterior, and (draws,) shares of YES among the relevant."""
        if self._root is None:
            self._root = np.linalg.cholesky(self.cov + 1e-12 * np.eye(len(self.mode)))
        theta = self.mode + rng.standard_normal((draws, len(self.mode))) @ self._root.T
        yes_share = rng.beta(1 + self.full, 1 + self.part, size=draws)
        return sigmoid(self._logits(theta, np.asarray(cells, dtype=int), features)), yes_share
