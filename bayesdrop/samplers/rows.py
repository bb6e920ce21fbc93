"""The Gibbs sampler through a row back-end (the dask path): one pass per sweep.

The sweep of :mod:`bayesdrop.samplers.gibbs` with the rows kept where they are::

    per chunk b (on the workers):   aug ~ p(aug | theta)  with block_rng(seed_c, sweep, b)
                                    A_b = Xbar_b^T diag(rho) Xbar_b + diag(V_b^T rho, 0)
                                    r_b = Xbar_b^T t,     J_b = sum_n term_n(theta)
    on the client:                  theta ~ N(A^{-1} r, A^{-1}),  A = 2 I' + sum_b A_b

(over-relaxed as in :func:`bayesdrop.linalg.wls.sample`). All chains share each pass: a
chunk task draws every chain's augmentation and returns one ``(A, r, J)`` per chain, so a
sweep of ``C`` chains reads the data once. The draws depend on the seed and the chunking,
not on the number of workers. The per-example augmentation variables never leave their
chunk, so the result has no ``augmentation_mean`` and no per-example groups.
"""

from __future__ import annotations

import time
import warnings
from typing import NamedTuple

import numpy as np
import scipy.linalg as sla

from .._progress import ProgressBar
from .._validation import check_scalar, seed_sequence
from ..linalg.woodbury import cholesky_factor
from .driver import SamplerResult, generators_from_states
from .gibbs import OVERRELAX

__all__ = ["GibbsRowsState", "RowsLastState", "init", "step", "sample_rows"]


class RowsLastState(NamedTuple):
    """Where :func:`sample_rows` stopped; pass it as ``init`` to continue exactly.

    Attributes
    ----------
    theta : ndarray of shape (chains, n_params)
    rng_states : tuple of dict
        The chains' client-side generator states (the Gaussian draws).
    entropies : tuple of int
        The chains' seeds of the chunk draws (:func:`bayesdrop.linalg.backend.block_rng`).
    sweep : int
        Sweeps done; the next one draws with ``spawn_key=(sweep, b)``.
    """

    theta: np.ndarray
    rng_states: tuple
    entropies: tuple
    sweep: int


class GibbsRowsState:
    """Chains' current ``theta`` (n_chains, n_params) and the sweep counter."""

    __slots__ = ("theta", "sweep")

    def __init__(self, theta, sweep=0):
        self.theta = np.atleast_2d(np.array(theta, dtype=float))
        self.sweep = int(sweep)


def init(rows, thetas):
    """State at ``thetas`` (shape (n_chains, n_params)); checks shape and finiteness."""
    thetas = np.atleast_2d(np.array(thetas, dtype=float))
    if thetas.shape[1] != rows.n_params:
        raise ValueError(f"initial theta has {thetas.shape[1]} entries, expected "
                         f"n_params={rows.n_params}")
    if not np.all(np.isfinite(thetas)):
        raise ValueError("initial theta must be finite")
    return GibbsRowsState(thetas, 0)


_init_state = init  # ``sample_rows`` has an argument named ``init``


def step(rngs, rows, state, entropies, *, overrelax=OVERRELAX):
    """One sweep of every chain: one reduction over the rows, then the Gaussian draws.

    Parameters
    ----------
    rngs : list of numpy.random.Generator
        One per chain (the Gaussian draws on the client).
    rows : RowBackend
    state : GibbsRowsState
    entropies : sequence of int
        One seed per chain for the chunks' augmentation draws
        (:func:`bayesdrop.linalg.backend.block_rng`).
    overrelax : float in (-1, 1)

    Returns
    -------
    state : GibbsRowsState
        The new ``theta`` of each chain.
    values : ndarray of shape (n_chains,)
        ``J`` at the *previous* ``theta`` (computed in the same pass).

    Examples
    --------
    >>> from bayesdrop import Problem, LogisticLoss, Dropout
    >>> from bayesdrop.linalg.backend import InMemoryRows
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 3)); y = np.sign(X[:, 0] + 0.5 * rng.normal(size=60))
    >>> problem = Problem.create(X, y, LogisticLoss(1.0), Dropout(0.3))
    >>> rows = InMemoryRows(problem)
    >>> state = init(rows, np.zeros((2, 4)))
    >>> new, J = step([np.random.default_rng(i) for i in range(2)], rows, state, [1, 2])
    >>> new.theta.shape, bool(np.isclose(J[0], problem.objective(np.zeros(4))))
    ((2, 4), True)
    """
    alpha = float(overrelax)
    values, A, r = rows.gibbs(state.theta, entropies, state.sweep)
    new = np.empty_like(state.theta)
    scale = np.sqrt(1.0 - alpha * alpha)
    for c in range(state.theta.shape[0]):
        L = cholesky_factor(A[c])
        v = sla.solve_triangular(L, (1.0 - alpha) * r[c], lower=True, check_finite=False)
        v += scale * rngs[c].standard_normal(rows.n_params)
        new[c] = sla.solve_triangular(L, v, lower=True, trans="T", check_finite=False) \
            + alpha * state.theta[c]
    if not np.all(np.isfinite(new)):
        raise FloatingPointError(f"a Gibbs draw is not finite at sweep {state.sweep}")
    return GibbsRowsState(new, state.sweep + 1), values


def sample_rows(rows, theta_hat, *, draws=1000, tune=500, chains=4, thin=1, init="irls",
                random_state=None, progressbar=True, overrelax=OVERRELAX):
    """Gibbs chains on ``exp(-J)`` through a row back-end; all chains in each pass.

    Parameters
    ----------
    rows : RowBackend
    theta_hat : ndarray of shape (n_params,)
        The mode (``argmin J``).
    draws, tune, chains, thin : int
        As in :func:`bayesdrop.samplers.sample`: ``tune + draws * thin`` sweeps.
    init : {"irls", "overdispersed"}, ndarray or RowsLastState
        Start at ``theta_hat``, at ``theta_hat + 3 eta`` with ``eta ~ N(0, A^{-1})`` of
        the IRLS system there (one extra pass), at given points, or where an earlier
        call stopped (``result.last_state``; ``random_state`` is then not used, pass
        ``tune=0``): the continued run gives the draws of one longer run.
    random_state : None, int, SeedSequence or Generator
        Chain ``c`` uses child ``c`` of one SeedSequence: its Gaussian draws come from
        ``default_rng(child)``, its chunks' augmentation draws from the seed
        ``child.generate_state(1)``.
    progressbar : bool
    overrelax : float in (-1, 1)

    Returns
    -------
    SamplerResult
        ``augmentation_mean`` and ``augmentation`` are None (they stay on the workers);
        ``tune_time`` / ``draw_time`` are the wall-clock times of the whole run (the
        chains share every pass).

    Notes
    -----
    Ctrl-C keeps the draws made so far (with a ``RuntimeWarning``), as
    :func:`bayesdrop.samplers.sample`; during tuning it propagates.

    Examples
    --------
    >>> from bayesdrop import Problem, HingeLoss, Dropout
    >>> from bayesdrop.linalg.backend import InMemoryRows
    >>> from bayesdrop.solvers import fit_problem
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 3)); y = np.sign(X[:, 0] + 0.5 * rng.normal(size=60))
    >>> problem = Problem.create(X, y, HingeLoss(1.0), Dropout(0.3))
    >>> theta_hat = fit_problem(problem).theta
    >>> res = sample_rows(InMemoryRows(problem), theta_hat, draws=30, tune=10, chains=2,
    ...                   random_state=0, progressbar=False)
    >>> res.theta.shape, bool(res.lp.max() <= -problem.objective(theta_hat) + 1e-9)
    ((2, 30, 4), True)
    """
    draws = check_scalar(draws, "draws", min_val=1, integer=True)
    tune = check_scalar(tune, "tune", min_val=0, integer=True)
    chains = check_scalar(chains, "chains", min_val=1, integer=True)
    thin = check_scalar(thin, "thin", min_val=1, integer=True)
    overrelax = check_scalar(overrelax, "overrelax", min_val=-1.0, max_val=1.0,
                             include_min=False, include_max=False)
    start = time.perf_counter()
    theta_hat = np.asarray(theta_hat, dtype=float)
    p = rows.n_params
    first_sweep = 0
    if isinstance(init, RowsLastState):
        if len(init.rng_states) != chains:
            raise ValueError(f"init (a RowsLastState) holds {len(init.rng_states)} chains, "
                             f"but chains={chains}")
        rngs = generators_from_states(init.rng_states)
        entropies = list(init.entropies)
        first_sweep = int(init.sweep)
    else:
        children = seed_sequence(random_state).spawn(chains)
        rngs = [np.random.default_rng(child) for child in children]
        entropies = [int(child.generate_state(1)[0]) for child in children]
    if isinstance(init, RowsLastState):
        thetas = np.array(init.theta, dtype=float)
    elif isinstance(init, str):
        if init == "irls":
            thetas = np.tile(theta_hat, (chains, 1))
        elif init == "overdispersed":
            _, A, _ = rows.irls(theta_hat)
            L = cholesky_factor(A)
            thetas = np.array([theta_hat + 3.0 * sla.solve_triangular(
                L, rng.standard_normal(p), lower=True, trans="T", check_finite=False)
                for rng in rngs])
        else:
            raise ValueError(f"init must be 'irls', 'overdispersed' or an array, got {init!r}")
    else:
        thetas = np.asarray(init, dtype=float)
        if thetas.shape == (p,):
            thetas = np.tile(thetas, (chains, 1))
        elif thetas.shape != (chains, p):
            raise ValueError(f"init array must have shape ({p},) or ({chains}, {p}), got "
                             f"{thetas.shape}")
    state = _init_state(rows, thetas)
    state.sweep = first_sweep
    theta_init = state.theta.copy()
    total = tune + draws * thin
    kept = np.empty((chains, draws, p))
    lp = np.empty((chains, draws))
    n_kept, interrupted, tune_time = 0, False, np.nan
    pending = None  # index of the kept draw whose J arrives with the next pass
    try:
        with ProgressBar(total, enabled=progressbar, description="Gibbs (rows)") as bar:
            for sweep in range(total):
                state, values = step(rngs, rows, state, entropies, overrelax=overrelax)
                if pending is not None:
                    lp[:, pending] = -values
                    pending = None
                if sweep + 1 == tune:
                    tune_time = time.perf_counter() - start
                done = sweep + 1 - tune
                if done > 0 and done % thin == 0:
                    kept[:, n_kept] = state.theta
                    pending = n_kept
                    n_kept += 1
                bar.update(sweep + 1)
    except KeyboardInterrupt:
        if n_kept == 0:
            raise
        interrupted = True
        warnings.warn(f"sampling interrupted: returning {n_kept} draws per chain",
                      RuntimeWarning, stacklevel=2)
    if pending is not None:
        lp[:, pending] = -rows.objective(kept[:, pending])
    if tune == 0:
        tune_time = 0.0
    wall = time.perf_counter() - start
    last = RowsLastState(state.theta.copy(), tuple(g.bit_generator.state for g in rngs),
                         tuple(entropies), state.sweep)
    return SamplerResult(kept[:, :n_kept], lp[:, :n_kept], None, None, theta_init,
                         np.full(chains, tune_time), np.full(chains, wall - tune_time),
                         tune, thin, interrupted, wall, np.full(chains, np.nan), last)
