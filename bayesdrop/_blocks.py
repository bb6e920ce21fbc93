"""Blocks of compiled work: a compiled loop returns to Python every :data:`BLOCK_SECONDS`
or so, so that Ctrl-C (a Python signal handler runs only between bytecodes), progress
reports and ``stop`` requests act within about that long, whatever the data and
hyper-parameters -- the chains of :mod:`bayesdrop.samplers.compiled` (through
:func:`bayesdrop.samplers.chain.run_chain`), and through :func:`in_blocks` the latent
models' L-BFGS (``CompiledLatent.run``) and the compiled CG solves of CSR designs called
from Python (:func:`bayesdrop.linalg.kernels.csr_pcg_blocks`)."""

from __future__ import annotations

import time

__all__ = ["BLOCK_SECONDS", "in_blocks", "next_block"]

#: wall-clock seconds a block of compiled work aims at: an interrupt acts within about
#: this long (or one unit of work -- a sweep, an iteration -- if a single one takes longer)
BLOCK_SECONDS = 0.1


def next_block(block, elapsed, most=1000):
    """Units of work (sweeps, iterations) in the next compiled block, from the last
    block's ``block`` units and ``elapsed`` seconds: aim at :data:`BLOCK_SECONDS` a
    block, at most double the last block and ``most``, at least one.

    Examples
    --------
    >>> next_block(100, 1.0), next_block(10, 0.001), next_block(1, 30.0)
    (10, 20, 1)
    """
    per_unit = elapsed / max(block, 1)
    if per_unit <= 0.0:
        return min(2 * block, most)
    return int(max(1, min(most, 2 * block, BLOCK_SECONDS / per_unit)))


def in_blocks(advance, total, first):
    """Run resumable compiled work in blocks: ``advance(stop)`` goes on until ``stop``
    units are done in all (or it finishes early) and returns ``(units done, finished)``;
    it is called with ``stop`` growing by :func:`next_block` -- ``first`` units, then
    about :data:`BLOCK_SECONDS` a block -- until it finishes or ``total`` units are
    done. Returns the units done.

    Examples
    --------
    >>> calls = []
    >>> def advance(stop):
    ...     calls.append(stop)
    ...     return stop, stop >= 25  # finishes at 25 units
    >>> in_blocks(advance, 100, 4), calls  # (fast units: each block doubles)
    (28, [4, 12, 28])
    """
    done, block = 0, first
    while True:
        t0 = time.perf_counter()
        reached, finished = advance(min(total, done + block))
        if finished or reached >= total:
            return reached
        block = next_block(reached - done, time.perf_counter() - t0, total)
        done = reached
