"""How chains run: one chain of the Python kernel (:func:`run_chain`), chains in
processes (:func:`run_processes`, the Python kernel) or in threads (:func:`run_threads`,
the compiled sweeps, which release the GIL), with progress counts and Ctrl-C handled
while waiting (:func:`collect`)."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import threading
import time
from concurrent.futures import (
    FIRST_COMPLETED,
    ProcessPoolExecutor,
    ThreadPoolExecutor,
    wait,
)

import numpy as np

from . import gibbs
from .compiled import run_chain_compiled
from .result import ChainRecord

__all__ = ["collect", "run_chain", "run_processes", "run_threads"]


def run_chain(problem, theta0, seed, *, tune, draws, thin, linalg, cg_tol, overrelax,
               store_augmentation, store_log_likelihood=False, report=None, stop=None,
               mh_on=None):
    """Run one chain; ``report(n_sweeps_done)`` is called after every sweep and
    ``stop()`` polled before every sweep. (The Python kernel does not keep the pointwise
    terms: ``store_log_likelihood`` is for the compiled sweeps; callers compute them
    afterwards, :func:`bayesdrop.posterior.pointwise_log_likelihood`.)"""
    rng = np.random.default_rng(seed)
    n_aug, n = problem.loss.n_augmentation, problem.design.n_samples
    p = problem.design.n_params
    theta_out = np.empty((draws, p))
    lp_out = np.empty(draws)
    aug_sum = np.zeros((n_aug, n))
    aug_out = np.empty((draws, n_aug, n)) if store_augmentation else None
    state = gibbs.init(problem, theta0)
    kept = 0
    sweep = 0
    interrupted = False
    t0 = time.perf_counter()
    t_tune = None
    try:
        for sweep in range(tune + draws * thin):
            if stop is not None and stop():
                interrupted = True
                break
            if sweep == tune:
                t_tune = time.perf_counter()
            state, info = gibbs.step(rng, problem, state, linalg=linalg, cg_tol=cg_tol,
                               overrelax=overrelax)
            if sweep >= tune and (sweep - tune + 1) % thin == 0:
                theta_out[kept] = state.theta
                lp_out[kept] = gibbs.log_density(problem, state)
                for j, a in enumerate(info.augmentation):
                    aug_sum[j] += a
                    if aug_out is not None:
                        aug_out[kept, j] = a
                kept += 1
            if report is not None:
                report(sweep + 1)
    except KeyboardInterrupt:
        interrupted = True
    t_end = time.perf_counter()
    if t_tune is None:
        t_tune = t_end
    aug_mean = aug_sum / max(kept, 1)
    return ChainRecord(theta_out[:kept], lp_out[:kept], aug_mean,
                  None if aug_out is None else aug_out[:kept], kept,
                  t_tune - t0, t_end - t_tune, interrupted, None, state.theta.copy(),
                  rng.bit_generator.state)


_WORKER = {}


def _worker_init(problem, kwargs, counts, stop_event):
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
    _WORKER.update(problem=problem, kwargs=kwargs, counts=counts, stop=stop_event,
                   parent=os.getppid())
    try:  # one BLAS thread per chain process: the chains are the parallelism
        from threadpoolctl import threadpool_limits

        _WORKER["limits"] = threadpool_limits(1)
    except Exception:  # pragma: no cover - threadpoolctl ships with scikit-learn
        pass


def _worker_chain(index, theta0, seed):
    counts = _WORKER["counts"]

    def report(k):
        counts[index] = k

    stop_event, parent = _WORKER["stop"], _WORKER["parent"]

    def stop():
        # the parent asked (Ctrl-C), or it is gone (SIGTERM / SIGKILL): an orphaned chain
        # stops at its next sweep instead of running on
        return stop_event.is_set() or os.getppid() != parent

    result = run_chain(_WORKER["problem"], theta0, seed, report=report, stop=stop,
                        **_WORKER["kwargs"])
    if os.getppid() != parent:  # orphaned: nobody will read the result
        os._exit(0)
    return result


def _mp_context():
    methods = mp.get_all_start_methods()
    return mp.get_context("fork" if "fork" in methods else methods[0])


def run_processes(problem, inits, seeds, kwargs, cores, bar):
    ctx = _mp_context()
    chains = len(seeds)
    counts = ctx.Array("q", chains, lock=False)
    stop_event = ctx.Event()
    with ProcessPoolExecutor(max_workers=cores, mp_context=ctx, initializer=_worker_init,
                             initargs=(problem, kwargs, counts, stop_event)) as pool:
        futures = [pool.submit(_worker_chain, c, inits[c], seeds[c]) for c in range(chains)]
        return collect(futures, counts, bar, stop_event, 0.05)


def collect(futures, counts, bar, stop_event, interval):
    """Wait for the chains' futures, reporting ``sum(counts)`` to the progress bar; Ctrl-C
    sets ``stop_event`` (the chains stop at their next check) and waiting goes on."""
    results = [None] * len(futures)
    pending = set(range(len(futures)))
    while pending:
        try:
            for c in list(pending):
                if futures[c].done():
                    results[c] = futures[c].result()
                    pending.discard(c)
            bar.update(sum(counts[:]))
            if pending:  # wakes as soon as a chain finishes, else after ``interval``
                wait([futures[c] for c in pending], timeout=interval,
                     return_when=FIRST_COMPLETED)
        except KeyboardInterrupt:
            stop_event.set()
    return results


def run_threads(setup, inits, seeds, kwargs, cores, bar, mh_flags):
    """Compiled chains in ``cores`` threads (one BLAS thread each)."""
    chains = len(seeds)
    counts = [0] * chains
    stop_event = threading.Event()

    def one(c):
        def report(k):
            counts[c] = k

        return run_chain_compiled(setup, inits[c], seeds[c], report=report,
                                   stop=stop_event.is_set, mh_on=mh_flags[c], **kwargs)

    try:
        from threadpoolctl import threadpool_limits

        limits = threadpool_limits(1)  # the chains are the parallelism
    except Exception:  # pragma: no cover - threadpoolctl ships with scikit-learn
        limits = None
    try:
        with ThreadPoolExecutor(max_workers=cores) as pool:
            futures = [pool.submit(one, c) for c in range(chains)]
            return collect(futures, counts, bar, stop_event, 0.02)
    finally:
        if limits is not None:
            limits.restore_original_limits()
