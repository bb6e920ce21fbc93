"""How chains run, whatever their kernel (:func:`bayesdrop.samplers.chain.run_chain` is
the one chain loop): in processes (:func:`run_processes`, for a kernel that holds the GIL:
the Python kernel) or in threads (:func:`run_threads`, the compiled sweeps, which release
it), with progress counts and Ctrl-C handled while waiting (:func:`collect`); the driver
runs them in sequence otherwise. :class:`CtrlC` turns a Ctrl-C during sampling into a
request to stop at the next block instead of an exception at an arbitrary point."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import threading
from concurrent.futures import (
    FIRST_COMPLETED,
    ProcessPoolExecutor,
    ThreadPoolExecutor,
    wait,
)

from . import gibbs
from .chain import run_chain
from .compiled import CompiledKernel

__all__ = ["CtrlC", "collect", "python_kernel", "run_processes", "run_threads"]


class CtrlC:
    """Within ``with CtrlC() as ctrl_c:`` in the main thread, the first Ctrl-C (SIGINT)
    only sets ``ctrl_c.pressed``; the chains poll it (:func:`collect`, or
    :func:`~bayesdrop.samplers.chain.run_chain`'s ``stop``) and stop at their next block,
    returning the draws kept so far. A second Ctrl-C goes to the handler that was in
    place (Python's default: ``KeyboardInterrupt``), for a user who insists.

    Why not the ``KeyboardInterrupt`` itself: Python raises it wherever the main thread
    happens to be, possibly between taking and releasing a lock of
    :mod:`concurrent.futures`, :mod:`multiprocessing` or tqdm -- a lock that is then
    never released, so that the next wait hangs (seen: the process-pool runner hung for
    good on one SIGINT in four under load) -- or after the last sweep, losing every draw.
    The handler only assigns a flag, so it can interrupt nothing. Outside the main thread,
    or where SIGINT is ignored or has no Python handler, nothing is changed (a
    ``KeyboardInterrupt`` raised by other code is still handled where it used to be).

    Examples
    --------
    >>> import os, signal
    >>> with CtrlC() as ctrl_c:
    ...     os.kill(os.getpid(), signal.SIGINT)
    ...     for _ in range(1000):  # the handler runs between two bytecodes
    ...         if ctrl_c.pressed:
    ...             break
    >>> ctrl_c.pressed, signal.getsignal(signal.SIGINT) is signal.default_int_handler
    (True, True)
    """

    def __init__(self):
        self.pressed = False
        self._previous = None

    def _handler(self, signum, frame):
        if self.pressed:
            self._previous(signum, frame)
        self.pressed = True

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            previous = signal.getsignal(signal.SIGINT)
            if callable(previous):  # not SIG_IGN (a chain process), SIG_DFL or None
                try:
                    signal.signal(signal.SIGINT, self._handler)
                except ValueError:  # not the main interpreter: leave SIGINT alone
                    return self
                self._previous = previous
        return self

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None
        return False


def python_kernel(problem, *, linalg, cg_tol, overrelax, store_augmentation, **_):
    """The Python kernel of ``problem`` with the driver's options."""
    return gibbs.SweepKernel(problem, linalg=linalg, cg_tol=cg_tol, overrelax=overrelax,
                             store_augmentation=store_augmentation)


def _chain_args(kwargs):
    return {k: kwargs[k] for k in ("tune", "draws", "thin")}


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

    kwargs = _WORKER["kwargs"]
    result = run_chain(python_kernel(_WORKER["problem"], **kwargs), theta0, seed,
                       report=report, stop=stop, **_chain_args(kwargs))
    if os.getppid() != parent:  # orphaned: nobody will read the result
        os._exit(0)
    return result


def _mp_context():
    methods = mp.get_all_start_methods()
    return mp.get_context("fork" if "fork" in methods else methods[0])


def run_processes(problem, inits, seeds, kwargs, cores, bar, ctrl_c=None):
    """The Python kernel's chains in ``cores`` processes (forked where the platform
    allows); ``ctrl_c``: :func:`collect`'s."""
    ctx = _mp_context()
    chains = len(seeds)
    counts = ctx.Array("q", chains, lock=False)
    stop_event = ctx.Event()
    with ProcessPoolExecutor(max_workers=cores, mp_context=ctx, initializer=_worker_init,
                             initargs=(problem, kwargs, counts, stop_event)) as pool:
        futures = [pool.submit(_worker_chain, c, inits[c], seeds[c]) for c in range(chains)]
        return collect(futures, counts, bar, stop_event, 0.05, ctrl_c=ctrl_c)


def collect(futures, counts, bar, stop_event, interval, on_running=None, ctrl_c=None):
    """Wait for the chains' futures, reporting ``sum(counts)`` to the progress bar; Ctrl-C
    (``ctrl_c.pressed`` of a :class:`CtrlC`, or a ``KeyboardInterrupt``) sets
    ``stop_event`` (the chains stop at their next check) and waiting goes on.
    ``on_running()`` is called once, as soon as a chain has reported sweeps done."""
    results = [None] * len(futures)
    pending = set(range(len(futures)))
    while pending:
        if ctrl_c is not None and ctrl_c.pressed:
            stop_event.set()
        try:
            for c in list(pending):
                if futures[c].done():
                    results[c] = futures[c].result()
                    pending.discard(c)
            bar.update(sum(counts[:]))
            if on_running is not None and any(counts[:]):
                on_running, call = None, on_running
                call()
            if pending:  # wakes as soon as a chain finishes, else after ``interval``
                wait([futures[c] for c in pending], timeout=interval,
                     return_when=FIRST_COMPLETED)
        except KeyboardInterrupt:
            stop_event.set()
            if ctrl_c is not None and ctrl_c.pressed:
                raise  # a second Ctrl-C: the user does not wait for the next block
    return results


def run_threads(setup, inits, seeds, kwargs, cores, bar, mh_moves, moves, on_running=None,
                ctrl_c=None):
    """Compiled chains in ``cores`` threads (one BLAS thread each); ``on_running`` and
    ``ctrl_c`` see :func:`collect`."""
    chains = len(seeds)
    counts = [0] * chains
    stop_event = threading.Event()

    def one(c):
        def report(k):
            counts[c] = k

        return run_chain(CompiledKernel(setup, mh_moves=mh_moves[c], moves=moves[c],
                                        **kwargs), inits[c],
                         seeds[c], report=report, stop=stop_event.is_set,
                         **_chain_args(kwargs))

    from .._threads import one_blas_thread

    with one_blas_thread(), ThreadPoolExecutor(max_workers=cores) as pool:  # the chains
        futures = [pool.submit(one, c) for c in range(chains)]  # are the parallelism
        return collect(futures, counts, bar, stop_event, 0.02, on_running, ctrl_c)
