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

import numpy as np
import scipy.linalg as sla

from .._validation import seed_sequence
from ..linalg.woodbury import cholesky_factor
from .chain import OneSweepBlocks, is_kept
from .result import ChainRecord, LastState, generators_from_states
from .start import start_points
from .gibbs import OVERRELAX

__all__ = ["GibbsRowsState", "RowsKernel", "init", "step", "chain_setup"]


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


_init_state = init  # ``chain_setup`` has an argument named ``init``


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


def chain_setup(rows, init, theta_hat, chains, random_state):
    """Starting points, client generators, chunk seeds and first sweep of the chains.

    Chain ``c`` uses child ``c`` of one SeedSequence: its Gaussian draws come from
    ``default_rng(child)``, its chunks' augmentation draws from the seed
    ``child.generate_state(1)``. ``init``: ``"mode"`` (``theta_hat``), ``"overdispersed"``
    (``theta_hat + 3 eta``, ``eta ~ N(0, A^{-1})`` of the IRLS system there: one extra
    pass), an array, or the :class:`~bayesdrop.samplers.driver.LastState` of an earlier
    run on a row back-end (with its chunk seeds ``entropies`` and sweep counter ``sweep``;
    ``random_state`` is then not used).
    """
    p = rows.n_params
    if isinstance(init, LastState):
        if len(init.rng_states) != chains or init.entropies is None:
            raise ValueError(f"init (a LastState of a row back-end) holds "
                             f"{len(init.rng_states)} chains, but chains={chains}"
                             if init.entropies is not None else
                             "init is the LastState of an in-memory run, not of a row "
                             "back-end")
        return (np.array(init.theta, dtype=float), generators_from_states(init.rng_states),
                list(init.entropies), int(init.sweep))
    children = seed_sequence(random_state).spawn(chains)
    rngs = [np.random.default_rng(child) for child in children]
    entropies = [int(child.generate_state(1)[0]) for child in children]
    factor = []

    def perturbation(c):  # eta ~ N(0, A^{-1}) of the IRLS system (one pass), chain c's rng
        if not factor:
            factor.append(cholesky_factor(rows.irls(np.asarray(theta_hat, dtype=float))[1]))
        return sla.solve_triangular(factor[0], rngs[c].standard_normal(p), lower=True,
                                    trans="T", check_finite=False)

    return start_points(init, theta_hat, chains, p, perturbation), rngs, entropies, 0


class RowsKernel(OneSweepBlocks):
    """Every chain of a row back-end as one chain of the chain-kernel protocol
    (:mod:`.chain`, run by :func:`~.chain.run_chain`): its state is all chains' ``theta``
    (n_chains, n_params), and each sweep is one pass over the rows for all of them, so a
    sweep of ``C`` chains reads the data once.

    ``rngs`` and ``entropies`` (from :func:`chain_setup`) are the chains' own generators
    and chunk seeds; the generator :func:`~.chain.run_chain` passes is not used. ``J`` of
    a kept draw arrives with the next pass; the last one's costs one more pass in
    :meth:`record`, which returns ``(chain records, LastState)`` (the augmentation stays
    on the workers: no ``augmentation_mean``).
    """

    def __init__(self, rows, rngs, entropies, first_sweep, overrelax):
        self.rows, self.rngs, self.entropies = rows, rngs, list(entropies)
        self.first_sweep, self.overrelax = int(first_sweep), overrelax

    def init(self, theta0, rng, draws):
        state = init(self.rows, theta0)
        state.sweep = self.first_sweep
        n_chains, p = state.theta.shape
        return {"state": state, "theta": np.empty((n_chains, draws, p)),
                "lp": np.empty((n_chains, draws)), "pending": None}

    def run(self, st, rng, n_sweeps, first_sweep, tune, thin, kept):
        n_new = 0
        for k in range(n_sweeps):
            st["state"], values = step(self.rngs, self.rows, st["state"], self.entropies,
                                       overrelax=self.overrelax)
            if st["pending"] is not None:
                st["lp"][:, st["pending"]] = -values
                st["pending"] = None
            if is_kept(first_sweep + k, tune, thin):
                st["theta"][:, kept + n_new] = st["state"].theta
                st["pending"] = kept + n_new
                n_new += 1
        return n_new

    def record(self, st, kept, tune_time, draw_time, interrupted, rng):
        if st["pending"] is not None:
            st["lp"][:, st["pending"]] = -self.rows.objective(st["theta"][:, st["pending"]])
            st["pending"] = None
        state = st["state"]
        rng_states = tuple(g.bit_generator.state for g in self.rngs)
        chains = [ChainRecord(st["theta"][c, :kept], st["lp"][c, :kept], None, None, kept,
                              tune_time, draw_time, interrupted, None,
                              state.theta[c].copy(), rng_states[c])
                  for c in range(state.theta.shape[0])]
        return chains, LastState(state.theta.copy(), rng_states, tuple(self.entropies),
                                 state.sweep)
