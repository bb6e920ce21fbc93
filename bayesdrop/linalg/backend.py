"""Row back-ends: the sums over examples that every solver and the sampler need.

Every quantity of the weighted least-squares system (MATH.md section 4) is a sum over the
rows of the design plus the penalty's ``2 I'``::

    J(theta) = ||w||^2 + sum_n term_n            (the objective)
    grad J   = 2 I' theta + sum_n grad term_n    (Newton)
    H        = 2 I' + sum_n H_n                  (Newton, the exact curvature)
    A        = 2 I' + sum_n [rho_n xbar_n xbar_n^T + diag(rho_n vbar_n)],
    r        = sum_n t_n xbar_n                  (IRLS: rho, t their expectations;
                                                  Gibbs: rho, t from drawn augmentations)

A **row back-end** holds the rows in blocks and returns these sums -- ``D``-sized vectors
and ``D x D`` matrices -- with every per-example quantity (scores ``m, s``, weights
``rho, t``, augmentation draws) computed and discarded inside its block. The optimisers
:func:`bayesdrop.solvers.newton.fit_rows` and :func:`bayesdrop.solvers.irls.fit_rows`
and the sampler (:func:`bayesdrop.samplers.sample` on a row back-end) call only the four reductions
below, so they run unchanged on

* :class:`InMemoryRows` -- one block: a :class:`~bayesdrop.model.problem.Problem` with a
  dense or CSR design (a reference implementation; the in-memory solvers are faster);
* :class:`bayesdrop.linalg.dask_backend.DaskRows` -- row-chunked ``dask.array`` inputs
  (dense or ``scipy.sparse`` chunks): each statistic is computed on the workers, chunk by
  chunk, and tree-summed; only the ``D``-sized results reach the client.

The per-block statistics are the module-level functions :func:`newton_terms`,
:func:`irls_terms`, :func:`gibbs_terms` and :func:`loss_sums`; a back-end sums them over
blocks in a fixed order, so the result does not depend on how many workers compute them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from . import hessian as hess
from .wls import normal_matrix, normal_rhs

__all__ = ["RowBackend", "InMemoryRows", "newton_terms", "irls_terms", "gibbs_terms", "loss_sums",
           "block_rng", "sum_terms"]


# ------------------------------------------------------------------ per-block statistics
def loss_sums(problem, block, thetas):
    """``sum_n term_n(theta)`` for each row of ``thetas`` (no penalty); shape (k,).

    Examples
    --------
    >>> from bayesdrop import Problem, LogisticLoss, Dropout
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(30, 2)); y = np.sign(X[:, 0] + rng.normal(size=30))
    >>> problem = Problem.create(X, y, LogisticLoss(1.0), Dropout(0.3))
    >>> theta = np.array([0.5, -0.2, 0.1])
    >>> rows = float(loss_sums(problem, 0, theta[None, :])[0])
    >>> bool(np.isclose(rows + 0.29, problem.objective(theta)))  # + ||w||^2
    True
    """
    thetas = np.atleast_2d(thetas)
    if problem.design.n_samples == 0:
        return np.zeros(thetas.shape[0])
    m, s = problem.design.scores_many(thetas)
    return np.array([float(np.sum(problem.loss.value(m[i], s[i], problem.y)))
                     for i in range(thetas.shape[0])])


def newton_terms(problem, block, theta, trial=None):
    """The rows' share of ``J``, its gradient and Hessian at ``theta``, and of ``J`` at the
    ``trial`` points (a line search evaluated in the same pass).

    Returns
    -------
    value : float
        ``sum_n term_n``.
    grad : ndarray of shape (n_params,)
        ``Xbar^T d_m + (2 V^T d_s) * w`` (no ``2 w``).
    hess : ndarray of shape (n_params, n_params)
        :func:`bayesdrop.linalg.hessian.hessian_matrix` without the ``2 I'``.
    trial_values : ndarray of shape (n_trial,)
        ``sum_n term_n`` at each trial point.
    """
    design = problem.design
    p = design.n_params
    trial = np.zeros((0, p)) if trial is None else np.atleast_2d(trial)
    if design.n_samples == 0:
        return 0.0, np.zeros(p), np.zeros((p, p)), np.zeros(trial.shape[0])
    J, grad, curv = hess.curvature(problem, theta)
    w = curv.w
    grad[: design.n_features] -= 2.0 * w
    value = J - float(w @ w)
    H = hess.hessian_matrix(design, curv, penalty=False)
    trial_values = loss_sums(problem, block, trial) if trial.shape[0] else np.zeros(0)
    return value, grad, H, trial_values


def irls_terms(problem, block, theta):
    """The rows' share of ``J`` at ``theta`` and of the IRLS system there.

    Returns
    -------
    value : float
        ``sum_n term_n(theta)``.
    A : ndarray of shape (n_params, n_params)
        ``Xbar^T diag(rho) Xbar + diag(V^T rho, 0)`` with ``rho`` the expected weights.
    r : ndarray of shape (n_params,)
        ``Xbar^T t``.
    """
    design, loss, y = problem
    p = design.n_params
    if design.n_samples == 0:
        return 0.0, np.zeros((p, p)), np.zeros(p)
    m, s = design.scores(theta)
    value = float(np.sum(loss.value(m, s, y)))
    rho, t = loss.irls_weights(m, s, y)
    return value, normal_matrix(design, rho, penalty=False), normal_rhs(design, t)


def block_rng(entropy, sweep, block):
    """The generator of one block's augmentation draws in one sweep of one chain.

    ``SeedSequence(entropy, spawn_key=(sweep, block))``: a function of the chain's seed,
    the sweep and the block index only -- not of the worker that computes it.

    Examples
    --------
    >>> a = block_rng(7, 3, 1).standard_normal(); b = block_rng(7, 3, 1).standard_normal()
    >>> a == b, a == block_rng(7, 3, 2).standard_normal()
    (True, False)
    """
    return np.random.default_rng(np.random.SeedSequence(int(entropy),
                                                        spawn_key=(int(sweep), int(block))))


def gibbs_terms(problem, block, thetas, entropies, sweep):
    """One Gibbs sweep's reduction for each chain: draw the augmentation given ``theta``
    (block by block, generator :func:`block_rng`), return the system it defines.

    Parameters
    ----------
    thetas : ndarray of shape (n_chains, n_params)
    entropies : sequence of int
        One seed per chain.
    sweep : int

    Returns
    -------
    values : ndarray of shape (n_chains,)
        ``sum_n term_n(theta_c)`` (so ``-J`` of the current state costs no extra pass).
    A : ndarray of shape (n_chains, n_params, n_params)
        ``Xbar^T diag(rho) Xbar + diag(V^T rho, 0)`` with the *drawn* weights.
    r : ndarray of shape (n_chains, n_params)
        ``Xbar^T t``.
    """
    design, loss, y = problem
    thetas = np.atleast_2d(thetas)
    c, p = thetas.shape
    values, A, r = np.zeros(c), np.zeros((c, p, p)), np.zeros((c, p))
    if design.n_samples == 0:
        return values, A, r
    m_all, s_all = design.scores_many(thetas)
    for i in range(c):
        m, s = m_all[i], s_all[i]
        values[i] = float(np.sum(loss.value(m, s, y)))
        aug = loss.draw_augmentation(m, s, y, block_rng(entropies[i], sweep, block))
        rho, t = loss.system_weights(aug, y)
        A[i] = normal_matrix(design, rho, penalty=False)
        r[i] = normal_rhs(design, t)
    return values, A, r


def sum_terms(parts):
    """Element-wise sum of equally structured results (tuples of floats and arrays), in
    the order given.

    Examples
    --------
    >>> sum_terms([(1.0, np.ones(2)), (2.0, np.ones(2))])
    (3.0, array([2., 2.]))
    """
    parts = list(parts)
    first = parts[0]
    if isinstance(first, tuple):
        return tuple(sum_terms([p[i] for p in parts]) for i in range(len(first)))
    total = np.array(first, dtype=float, copy=True) if np.ndim(first) else float(first)
    for part in parts[1:]:
        total = total + part
    return total


# ------------------------------------------------------------------------- back-ends
class RowBackend(ABC):
    """The interface: :meth:`reduce` sums a per-block statistic over the blocks; the four
    reductions the algorithms call add the penalty's share on top.

    A subclass sets ``loss``, ``n_samples``, ``n_features``, ``n_params``,
    ``fit_intercept``, ``every_row_noisy`` and implements :meth:`reduce`.
    """

    #: the linear models' noise covariance is diagonal (Newton's Hessian needs it)
    diagonal_noise = True

    @abstractmethod
    def reduce(self, statistic, *args):
        """``sum over blocks b of statistic(block_problem_b, b, *args)``, in block order."""

    @abstractmethod
    def subsample(self, step):
        """A back-end over every ``step``-th row (of each block), weighted ``step``
        (:func:`bayesdrop.model.problem.subsample_rows`): Newton's starting point on tall
        data. Its passes are passes over the same blocks."""

    def penalty_mask(self):
        """Diagonal of ``I'`` (1 for weights, 0 for the intercept)."""
        mask = np.ones(self.n_params)
        if self.fit_intercept:
            mask[-1] = 0.0
        return mask

    def _w2(self, thetas):
        w = np.asarray(thetas)[..., : self.n_features]
        return np.sum(w * w, axis=-1)

    def newton(self, theta, trial=None):
        """``(J, grad, H, J_trial)`` at ``theta`` (and ``J`` at each ``trial`` point), one
        pass; see :func:`newton_terms`."""
        value, grad, H, trial_values = self.reduce(newton_terms, theta, trial)
        grad = np.array(grad, dtype=float)
        grad[: self.n_features] += 2.0 * np.asarray(theta)[: self.n_features]
        H = np.array(H, dtype=float)
        H[np.diag_indices_from(H)] += 2.0 * self.penalty_mask()
        if trial is not None and len(trial):
            trial_values = np.asarray(trial_values) + self._w2(np.atleast_2d(trial))
        return float(value) + float(self._w2(theta)), grad, H, trial_values

    def irls(self, theta):
        """``(J, A, r)``: ``J(theta)`` and the IRLS system there, one pass; see
        :func:`irls_terms`."""
        value, A, r = self.reduce(irls_terms, theta)
        A = np.array(A, dtype=float)
        A[np.diag_indices_from(A)] += 2.0 * self.penalty_mask()
        return float(value) + float(self._w2(theta)), A, np.asarray(r, dtype=float)

    def gibbs(self, thetas, entropies, sweep):
        """``(J, A, r)`` per chain: ``J(theta_c)`` and the system of the weights drawn
        given ``theta_c``, one pass; see :func:`gibbs_terms`."""
        thetas = np.atleast_2d(thetas)
        values, A, r = self.reduce(gibbs_terms, thetas, list(entropies), sweep)
        A = np.array(A, dtype=float)
        idx = np.arange(self.n_params)
        A[:, idx, idx] += 2.0 * self.penalty_mask()
        return np.asarray(values) + self._w2(thetas), A, np.asarray(r, dtype=float)

    def objective(self, thetas):
        """``J`` at each row of ``thetas``, one pass."""
        thetas = np.atleast_2d(thetas)
        return self._w2(thetas) + self.reduce(loss_sums, thetas)


class InMemoryRows(RowBackend):
    """All rows as one block: the row back-end of an in-memory :class:`Problem`.

    Parameters
    ----------
    problem : Problem
        Dense or CSR design with diagonal noise covariance.

    Attributes
    ----------
    loss : Loss
    n_samples, n_features, n_params : int
    fit_intercept : bool
    every_row_noisy : bool
        See :attr:`bayesdrop.model.design.Design.every_row_noisy`.
    n_passes : int
        Reductions computed so far (passes over the data).

    Examples
    --------
    >>> from bayesdrop import Problem, LogisticLoss, Dropout
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(40, 3)); y = np.sign(X[:, 0] + rng.normal(size=40))
    >>> problem = Problem.create(X, y, LogisticLoss(1.0), Dropout(0.3))
    >>> rows = InMemoryRows(problem)
    >>> theta = rng.normal(size=4)
    >>> J, g, H, _ = rows.newton(theta)
    >>> J2, g2 = problem.objective(theta, gradient=True)
    >>> bool(np.isclose(J, J2) and np.allclose(g, g2))
    True
    """

    def __init__(self, problem):
        if not problem.design.diagonal_noise:
            raise ValueError("row back-ends need a design with diagonal noise covariance")
        self.problem = problem
        design = problem.design
        self.loss = problem.loss
        self.n_samples, self.n_features = design.n_samples, design.n_features
        self.n_params, self.fit_intercept = design.n_params, design.fit_intercept
        self.every_row_noisy = design.every_row_noisy
        self.n_passes = 0

    def reduce(self, statistic, *args):
        """``statistic(problem, 0, *args)`` (one block; counted as one pass)."""
        self.n_passes += 1
        return statistic(self.problem, 0, *args)

    def subsample(self, step):
        from ..model.problem import subsample_rows

        return InMemoryRows(subsample_rows(self.problem, step))
