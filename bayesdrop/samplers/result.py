"""What a sampling run returns: :class:`SamplerResult`, the per-chain record the runners
fill (:class:`ChainRecord`), :class:`LastState` to continue a run, and
:func:`assemble` (the records of all chains into one result)."""

from __future__ import annotations

import time
import warnings
from typing import NamedTuple

import numpy as np

__all__ = ["ChainRecord", "LastState", "SamplerResult", "assemble", "generators_from_states",
           "truncate"]


class LastState(NamedTuple):
    """Where every chain stopped: pass it as ``init`` to :func:`sample` to continue.

    Attributes
    ----------
    theta : ndarray of shape (chains, n_params)
        Each chain's current ``theta`` (its last sweep's, kept or not).
    rng_states : tuple of dict
        Each chain's ``numpy.random.Generator`` bit-generator state after its last sweep.
    entropies : tuple of int or None
        Row back-ends only: the chains' seeds of the chunk draws
        (:func:`bayesdrop.linalg.backend.block_rng`).
    sweep : int or None
        Row back-ends only: sweeps done; the next one draws with ``spawn_key=(sweep, b)``.
    moves : tuple of bayesdrop.samplers.compiled.Moves or None
        Compiled chains: each chain's exact MH moves as its tuning fixed them (the
        independence proposal and its number per sweep, the intercept's line, the slice
        moves; the sparse sweep: its slice moves); a continued run keeps them.
    """

    theta: np.ndarray
    rng_states: tuple
    entropies: tuple | None = None
    sweep: int | None = None
    moves: tuple | None = None


def generators_from_states(states):
    """``numpy.random.Generator`` objects resumed from saved bit-generator states.

    Examples
    --------
    >>> g = np.random.default_rng(1); state = g.bit_generator.state; a = g.random()
    >>> generators_from_states([state])[0].random() == a
    True
    """
    gens = []
    for state in states:
        gen = np.random.default_rng()
        gen.bit_generator.state = state
        gens.append(gen)
    return gens


class SamplerResult(NamedTuple):
    """Output of :func:`sample` for one problem.

    Attributes
    ----------
    theta : ndarray of shape (chains, draws, n_params)
    lp : ndarray of shape (chains, draws)
        ``-J(theta)`` of each kept draw.
    augmentation_mean : ndarray of shape (chains, n_augmentation, n_samples)
        Running mean of the augmentation variables over the kept sweeps (``u`` for the
        hinge, ``(u, u')`` for epsilon-insensitive, ``lambda`` for the logistic loss); a
        chain that runs independence moves alone (no Gibbs sweep, see :func:`sample`)
        averages their conditional means given each kept ``theta`` instead of draws.
    augmentation : ndarray of shape (chains, draws, n_augmentation, n_samples) or None
        Full traces, only with ``store_augmentation=True``.
    theta_init : ndarray of shape (chains, n_params)
    tune_time, draw_time : ndarray of shape (chains,)
        Wall-clock seconds of burn-in and of the kept part of each chain.
    tune, thin : int
    interrupted : bool
        Whether sampling was stopped by ``KeyboardInterrupt`` (the draws are those
        collected until then, the same number for every chain).
    wall_time : float
        Wall-clock seconds of the whole call (all chains, parallel or not).
    mh_accept : ndarray of shape (chains,)
        Acceptance rate of the independence MH move per chain (NaN without it).
    mh_moves : ndarray of shape (chains,)
        Independence MH proposals per kept sweep of each chain (the schedule fixed at
        the end of tuning, see :func:`sample`; -1 where the chain has no such move).
    intercept_accept : ndarray of shape (chains,)
        Acceptance rate of the intercept's MH move of the compiled dense sweep per chain
        (NaN without it; see :func:`sample`).
    last_state : LastState
        Where the chains stopped (``sample(..., init=result.last_state, tune=0)`` goes
        on from there, as NumPyro's ``MCMC.last_state``).
    log_likelihood : ndarray of shape (chains, draws, n_samples) or None
        Pointwise log pseudo-likelihood of each draw (``store_log_likelihood=True`` with
        the compiled sweeps), equal to
        :func:`bayesdrop.posterior.pointwise_log_likelihood` of the draws.
    """

    theta: np.ndarray
    lp: np.ndarray
    augmentation_mean: np.ndarray
    augmentation: np.ndarray | None
    theta_init: np.ndarray
    tune_time: np.ndarray
    draw_time: np.ndarray
    tune: int
    thin: int
    interrupted: bool
    wall_time: float = float("nan")
    mh_accept: np.ndarray = None
    last_state: LastState = None
    log_likelihood: np.ndarray | None = None
    intercept_accept: np.ndarray = None
    mh_moves: np.ndarray = None


class ChainRecord(NamedTuple):
    """One chain's draws and statistics, as a runner returns them (see :func:`assemble`)."""

    theta: np.ndarray
    lp: np.ndarray
    aug_mean: np.ndarray
    aug: np.ndarray | None
    n_kept: int
    tune_time: float
    draw_time: float
    interrupted: bool
    mh_stats: np.ndarray = None
    theta_last: np.ndarray = None
    rng_state: dict = None
    terms: np.ndarray | None = None
    moves: tuple | None = None
    intercept_stats: np.ndarray = None


def assemble(results, inits, chains, tune, thin, wall_start, store_augmentation,
              last_state=None):
    """The :class:`SamplerResult` of the chains' records (both runners): the same number
    of draws from every chain; an interrupt keeps them with a warning, or propagates when
    none was kept."""
    interrupted = any(r.interrupted for r in results) or len(results) < chains
    kept = min(r.n_kept for r in results)
    if interrupted:
        if kept == 0:  # stopped during tuning: nothing to return, the interrupt goes on
            raise KeyboardInterrupt("sampling interrupted before any draw was kept")
        warnings.warn(
            f"sampling interrupted: returning the {kept} draw(s) per chain collected so far "
            f"from {len(results)} chain(s)", RuntimeWarning, stacklevel=3,
        )
    aug_traces = None
    if store_augmentation:
        aug_traces = np.stack([r.aug[:kept] for r in results])
    return SamplerResult(
        theta=np.stack([r.theta[:kept] for r in results]),
        lp=np.stack([r.lp[:kept] for r in results]),
        augmentation_mean=(None if any(r.aug_mean is None for r in results)
                           else np.stack([r.aug_mean for r in results])),
        augmentation=aug_traces,
        theta_init=inits[: len(results)],
        tune_time=np.array([r.tune_time for r in results]),
        draw_time=np.array([r.draw_time for r in results]),
        tune=tune,
        thin=thin,
        interrupted=interrupted,
        wall_time=time.perf_counter() - wall_start,
        mh_accept=np.array([r.mh_stats[0] / r.mh_stats[1]
                            if r.mh_stats is not None and r.mh_stats[1] else np.nan
                            for r in results]),
        last_state=(last_state if last_state is not None else
                    LastState(np.stack([r.theta_last for r in results]),
                              tuple(r.rng_state for r in results),
                              moves=(tuple(r.moves for r in results)
                                     if all(r.moves is not None for r in results)
                                     else None))),
        log_likelihood=(-np.stack([r.terms[:kept] for r in results])
                        if all(r.terms is not None for r in results) else None),
        intercept_accept=np.array([
            r.intercept_stats[0] / r.intercept_stats[1]
            if r.intercept_stats is not None and r.intercept_stats[1] else np.nan
            for r in results]),
        mh_moves=np.array([-1 if r.moves is None or r.moves.proposal is None
                           else int(r.moves.mh) for r in results]),
    )


def truncate(result, chains, draws):
    """``result`` with its first ``chains`` chains and their first ``draws`` kept draws,
    marked ``interrupted`` -- so that one-vs-rest problems whose last was interrupted
    share one shape (:func:`bayesdrop.posterior.sample_problems`). The chains' running
    means of the augmentation variables, times and acceptance rates stay those of the
    whole chains; ``last_state`` keeps where the first ``chains`` chains stopped.

    Examples
    --------
    >>> from bayesdrop import Problem, LogisticLoss
    >>> from bayesdrop.samplers import sample
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(40, 2)); y = np.sign(X[:, 0])
    >>> problem = Problem.create(X, y, LogisticLoss(1.0))
    >>> res = sample(problem, draws=20, tune=5, chains=2, theta_hat=np.zeros(3),
    ...              progressbar=False, random_state=0)
    >>> short = truncate(res, 1, 7)
    >>> short.theta.shape, short.lp.shape, short.interrupted, len(short.last_state.rng_states)
    ((1, 7, 3), (1, 7), True, 1)
    """
    def cut(a, per_draw):
        if a is None:
            return None
        a = np.asarray(a)
        return a[:chains, :draws] if per_draw else a[:chains]

    state = result.last_state
    if state is not None:
        state = state._replace(
            theta=state.theta[:chains], rng_states=tuple(state.rng_states[:chains]),
            entropies=None if state.entropies is None else tuple(state.entropies[:chains]),
            moves=None if state.moves is None else tuple(state.moves[:chains]))
    return result._replace(
        theta=cut(result.theta, True), lp=cut(result.lp, True),
        augmentation=cut(result.augmentation, True),
        log_likelihood=cut(result.log_likelihood, True),
        augmentation_mean=cut(result.augmentation_mean, False),
        theta_init=cut(result.theta_init, False), tune_time=cut(result.tune_time, False),
        draw_time=cut(result.draw_time, False), mh_accept=cut(result.mh_accept, False),
        intercept_accept=cut(result.intercept_accept, False),
        mh_moves=cut(result.mh_moves, False), last_state=state, interrupted=True)
