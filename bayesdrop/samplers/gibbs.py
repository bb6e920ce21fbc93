"""Gibbs sampler for the pseudo-posterior ``exp(-J(w, b))`` (MATH.md sections 3-4).

One sweep alternates the two exact conditional draws of the augmented model::

    aug   ~ p(aug | theta)      loss.draw_augmentation(m(theta), s(theta), y)
    theta ~ N(A^{-1} r, A^{-1}) wls.sample(design, *loss.system_weights(aug, y))

The second line is the IRLS step with the expectations replaced by draws and the solve
replaced by a Gaussian draw from the *same* system ``(A, r)``. The marginal of the chain in
``theta = (w, b)`` is exactly ``exp(-J)``, whose mode is the point estimate (the minimiser
of ``J``).

This module is the kernel, in the shape of BlackJAX: :func:`init` builds a
:class:`GibbsState`, :func:`step` takes a :class:`numpy.random.Generator`, the problem and
a state and returns the next state and a :class:`GibbsInfo`; :func:`log_density` is
``-J``. The generic driver (chains, burn-in, thinning, progress, interrupts) is
:func:`bayesdrop.samplers.driver.sample`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..linalg import wls
from ..model.objective import penalised
from .chain import OneSweepBlocks, is_kept
from .result import ChainRecord

__all__ = ["GibbsState", "GibbsInfo", "OVERRELAX", "SweepKernel", "init", "step", "log_density"]


class GibbsState(NamedTuple):
    """``theta`` and its mean scores ``m`` and score variances ``s`` (what the next
    augmentation draw needs)."""

    theta: np.ndarray
    m: np.ndarray
    s: np.ndarray


class GibbsInfo(NamedTuple):
    """What one :func:`step` drew besides ``theta``."""

    augmentation: tuple  # the augmentation variables used for this theta draw
    linalg_info: dict


# ------------------------------------------------------------------------------ kernel
def init(problem, theta):
    """Build the state at ``theta`` (computes ``m`` and ``s``).

    Examples
    --------
    >>> from bayesdrop import Problem, HingeLoss, LogisticLoss, Dropout
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 3)); y = np.sign(X[:, 0] + 0.5 * rng.normal(size=60))
    >>> from bayesdrop.samplers import gibbs
    >>> problem = Problem.create(X, y, LogisticLoss(1.0), Dropout(0.3))
    >>> state = gibbs.init(problem, np.zeros(4))
    >>> state.m.shape, float(state.s.max())
    ((60,), 0.0)
    """
    theta = np.array(theta, dtype=float)
    if theta.shape != (problem.design.n_params,):
        raise ValueError(
            f"initial theta has shape {theta.shape}, expected ({problem.design.n_params},)"
        )
    if not np.all(np.isfinite(theta)):
        raise ValueError("initial theta must be finite")
    m, s = problem.design.scores(theta)
    return GibbsState(theta, m, s)


#: Default over-relaxation of the Gaussian step (see :func:`bayesdrop.linalg.wls.sample`).
OVERRELAX = -0.5


def step(rng, problem, state, *, linalg="auto", cg_tol=1e-12, overrelax=OVERRELAX):
    """One Gibbs sweep: draw the augmentation given ``theta``, then ``theta`` given it.

    With ``overrelax = alpha != 0`` the second half is Adler's over-relaxed Gaussian
    update ``theta' = alpha theta + (1 - alpha) A^{-1} r + sqrt(1 - alpha^2) xi``,
    ``xi ~ N(0, A^{-1})``, which leaves the same conditional invariant; the chain still
    targets ``exp(-J)`` exactly. ``alpha = -0.5`` (the default) roughly doubled the
    minimum bulk ESS per sweep on the benchmark problems and improved tail ESS and the
    ESS of squared deviations too; ``alpha = 0`` is the plain Gibbs sampler.

    Parameters
    ----------
    rng : numpy.random.Generator
    problem : Problem
    state : GibbsState
    linalg : {"auto", "cholesky", "woodbury", "cg"}
        Back-end of the Gaussian draw (:func:`bayesdrop.linalg.wls.sample`).
    cg_tol : float
        Relative residual of the conjugate-gradient solve (``linalg="cg"``).
    overrelax : float in (-1, 1)

    Returns
    -------
    state : GibbsState
    info : GibbsInfo

    Examples
    --------
    >>> from bayesdrop import Problem, HingeLoss, LogisticLoss, Dropout
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 3)); y = np.sign(X[:, 0] + 0.5 * rng.normal(size=60))
    >>> from bayesdrop.samplers import gibbs
    >>> problem = Problem.create(X, y, HingeLoss(1.0), Dropout(0.3))
    >>> state = gibbs.init(problem, np.zeros(4))
    >>> state, info = gibbs.step(np.random.default_rng(1), problem, state)
    >>> state.theta.shape, len(info.augmentation), bool(np.all(info.augmentation[0] > 0))
    ((4,), 1, True)
    """
    loss, y = problem.loss, problem.y
    aug = loss.draw_augmentation(state.m, state.s, y, rng)
    rho, t = loss.system_weights(aug, y)
    theta, linalg_info = wls.sample(problem.design, rho, t, rng, linalg=linalg,
                                    x0=state.theta, cg_tol=cg_tol, theta=state.theta,
                                    overrelax=overrelax)
    return init(problem, theta), GibbsInfo(aug, linalg_info)


def log_density(problem, state):
    """``-J(theta)`` from the state's scores (no extra pass over ``X``).

    Examples
    --------
    >>> from bayesdrop import Problem, HingeLoss, LogisticLoss, Dropout
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 3)); y = np.sign(X[:, 0] + 0.5 * rng.normal(size=60))
    >>> from bayesdrop.samplers import gibbs
    >>> problem = Problem.create(X, y, LogisticLoss(1.0))
    >>> theta = np.array([0.5, 0.0, 0.0, 0.1])
    >>> bool(np.isclose(gibbs.log_density(problem, gibbs.init(problem, theta)),
    ...                 -problem.objective(theta)))
    True
    """
    w, _ = problem.design.split(state.theta)
    value = problem.loss.value(state.m, state.s, problem.y)
    return -penalised(w, value)


class _SweepState:
    """The mutable state of one chain of :class:`SweepKernel`."""

    def __init__(self, gibbs_state, theta_out, lp_out, aug_sum, aug_out):
        self.gibbs = gibbs_state
        self.theta_out, self.lp_out = theta_out, lp_out
        self.aug_sum, self.aug_out = aug_sum, aug_out


class SweepKernel(OneSweepBlocks):
    """The chain kernel (:mod:`bayesdrop.samplers.chain`) of :func:`step`: one sweep per
    block, so that ``stop``, progress and Ctrl-C act after every sweep. It does not keep
    the pointwise terms (callers compute them afterwards,
    :func:`bayesdrop.posterior.pointwise_log_likelihood`).

    ``moves``: further moves applied after each Gibbs step, in order, each a callable
    ``move(rng, problem, state) -> state`` (a :class:`GibbsState`; :func:`init` builds one
    from a new ``theta``) that leaves ``exp(-J)`` invariant on its own, e.g. a
    Metropolis-Hastings step on ``theta``: the composition then samples ``exp(-J)`` too
    (the augmentation is drawn afresh from ``theta`` at the next sweep). The recipe:
    ``docs/architecture.md``, "add a sampler move".
    """

    def __init__(self, problem, *, linalg="auto", cg_tol=1e-12, overrelax=OVERRELAX,
                 store_augmentation=False, moves=()):
        self.problem = problem
        self.linalg, self.cg_tol, self.overrelax = linalg, cg_tol, overrelax
        self.store_augmentation = store_augmentation
        self.moves = tuple(moves)

    def init(self, theta0, rng, draws):
        problem = self.problem
        n_aug, n = problem.loss.n_augmentation, problem.design.n_samples
        return _SweepState(init(problem, theta0), np.empty((draws, problem.design.n_params)),
                           np.empty(draws), np.zeros((n_aug, n)),
                           np.empty((draws, n_aug, n)) if self.store_augmentation else None)

    def run(self, state, rng, n_sweeps, first_sweep, tune, thin, kept):
        new = 0
        for k in range(n_sweeps):
            sweep = first_sweep + k
            state.gibbs, info = step(rng, self.problem, state.gibbs, linalg=self.linalg,
                                     cg_tol=self.cg_tol, overrelax=self.overrelax)
            for move in self.moves:
                state.gibbs = move(rng, self.problem, state.gibbs)
            if is_kept(sweep, tune, thin):
                row = kept + new
                state.theta_out[row] = state.gibbs.theta
                state.lp_out[row] = log_density(self.problem, state.gibbs)
                for j, a in enumerate(info.augmentation):
                    state.aug_sum[j] += a
                    if state.aug_out is not None:
                        state.aug_out[row, j] = a
                new += 1
        return new

    def record(self, state, kept, tune_time, draw_time, interrupted, rng):
        return ChainRecord(state.theta_out[:kept], state.lp_out[:kept],
                           state.aug_sum / max(kept, 1),
                           None if state.aug_out is None else state.aug_out[:kept], kept,
                           tune_time, draw_time, interrupted, None, state.gibbs.theta.copy(),
                           rng.bit_generator.state)
