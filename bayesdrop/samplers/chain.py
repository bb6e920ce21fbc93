"""One chain, whatever its kernel: the loop of sweeps in blocks, burn-in, thinning,
``stop`` / ``report``, Ctrl-C, timing and the :class:`~.result.ChainRecord` -- written once
(as NumPyro's ``MCMC`` runs any kernel).

A *chain kernel* advances one chain's state by a block of sweeps and keeps the draws of
the kept ones:

=======================================================  =====================================
``init(theta0, rng, draws) -> state``                    the state at ``theta0``, with room
                                                         for ``draws`` kept draws
``run(state, rng, n_sweeps, first_sweep, tune, thin,     advance ``n_sweeps`` sweeps; sweep
kept) -> n``                                             ``k >= tune`` with
                                                         ``(k - tune + 1) % thin == 0`` is
                                                         kept (row ``kept + j``); returns
                                                         how many were kept
``first_block()``, ``next_block(n, seconds)``            sweeps per block (the Python
                                                         kernel: 1; the compiled sweeps:
                                                         sized to about ``BLOCK_SECONDS``)
``end_tuning(state)``                                    fix the kernel of the kept sweeps
``record(state, kept, tune_s, draw_s, interrupted,       the chain's
rng) -> ChainRecord``                                    :class:`~.result.ChainRecord`
=======================================================  =====================================

:class:`bayesdrop.samplers.gibbs.SweepKernel` (the Python kernel),
:class:`bayesdrop.samplers.compiled.CompiledKernel` (the compiled dense and sparse
sweeps) and :class:`bayesdrop.samplers.rows.RowsKernel` (a row back-end's sweep, whose
state is every chain's ``theta``: one pass over the rows serves all chains, and its
``record`` returns their records) implement it; how chains run -- in sequence, in threads
or in processes (:mod:`.runners`), or all in each pass on the cluster -- is chosen by the
driver independently of the kernel.
"""

from __future__ import annotations

import time

import numpy as np

__all__ = ["OneSweepBlocks", "is_kept", "run_chain"]


def is_kept(sweep, tune, thin):
    """Whether sweep ``sweep`` (counted from 0) is kept: ``sweep >= tune`` and
    ``(sweep - tune + 1) % thin == 0``, the rule of every kernel's ``run``."""
    return sweep >= tune and (sweep - tune + 1) % thin == 0


class OneSweepBlocks:
    """``first_block`` / ``next_block`` / ``end_tuning`` of a kernel that runs one sweep
    per block and fixes nothing at the end of tuning (the Python and row kernels)."""

    def first_block(self):
        return 1

    def next_block(self, n, seconds):
        return 1

    def end_tuning(self, state):
        pass


def run_chain(kernel, theta0, seed, *, tune, draws, thin, report=None, stop=None):
    """Run one chain of ``kernel`` from ``theta0``: ``tune`` burn-in sweeps, then ``draws``
    kept ones every ``thin``-th sweep; ``report(n_sweeps_done)`` is called after every
    block and ``stop()`` polled before every block. Returns its
    :class:`~bayesdrop.samplers.result.ChainRecord` (``interrupted`` after Ctrl-C or
    ``stop``)."""
    rng = np.random.default_rng(seed)
    state = kernel.init(theta0, rng, draws)
    total = tune + draws * thin
    done = kept = 0
    interrupted = False
    t0 = time.perf_counter()
    t_tune = t0 if tune == 0 else None
    block = kernel.first_block()
    try:
        while done < total:
            if stop is not None and stop():
                interrupted = True
                break
            n = min(block, (tune - done) if done < tune else (total - done))
            t_block = time.perf_counter()
            kept += kernel.run(state, rng, n, done, tune, thin, kept)
            done += n
            block = kernel.next_block(n, time.perf_counter() - t_block)
            if t_tune is None and done >= tune:
                t_tune = time.perf_counter()
                kernel.end_tuning(state)
            if report is not None:
                report(done)
    except KeyboardInterrupt:
        interrupted = True
    t_end = time.perf_counter()
    if t_tune is None:
        t_tune = t_end
    return kernel.record(state, kept, t_tune - t0, t_end - t_tune, interrupted, rng)
