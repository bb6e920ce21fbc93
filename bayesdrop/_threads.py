"""One BLAS thread pool at a time while bayesdrop computes.

numpy's and scipy's wheels each ship their own OpenBLAS (``numpy.libs`` and
``scipy.libs``), each with a pool of worker threads that *spin* for a while after a call
instead of sleeping. Code that alternates between the two -- numpy Gram products and
``scipy.linalg`` factorisations in IRLS and Newton, ``scipy.optimize``'s L-BFGS-B (whose C
code calls scipy's BLAS) around a numpy objective, numba's ``np.dot`` (scipy's BLAS) next
to numpy -- then has two pools competing for the same cores. Measured on 2 cores: Newton
on a 10^6 x 20 problem 3.4 -> 2.4 s, L-BFGS on the latent digits objective 20.7 -> 3.2 s
with the second pool on one thread.

:func:`single_blas_pool` runs a block with every BLAS library **other than numpy's** on one
thread (numpy's large products keep theirs; scipy's calls here are small ``p x p``
factorisations and vector operations). Where numpy and scipy share one BLAS (conda,
system packages) nothing changes. Like :func:`threadpoolctl.threadpool_limits`, the limit
is process-wide for the duration of the block.
"""

from __future__ import annotations

import functools
import os
import threading
from contextlib import nullcontext

__all__ = ["numba_threads", "one_blas_thread", "single_blas_pool", "with_single_blas_pool"]

#: the process that imported bayesdrop (a forked child is another: :func:`numba_threads`)
_PID = os.getpid()
_SAFE_LAYER = []  # [whether numba has a thread-safe threading layer], filled on first use

_SECONDARY = []  # [selection or None], filled on first use
_ALL_BLAS = []  # the same for every BLAS library (one_blas_thread)


def _kept(cache, choose):
    """The threadpoolctl selection ``choose(controller)`` (or None) of the libraries
    loaded at the first call, kept in ``cache`` (a list) for later calls: inspecting the
    loaded libraries takes milliseconds."""
    if not cache:
        try:
            import scipy.linalg  # noqa: F401 - load scipy's BLAS before inspecting
            from threadpoolctl import ThreadpoolController

            selection = choose(ThreadpoolController())
        except Exception:  # noqa: BLE001  # pragma: no cover - threadpoolctl ships with sklearn
            selection = None
        cache.append(selection)
    return cache[0]


def _not_numpys(controller):
    """The BLAS libraries other than numpy's, where numpy has its own (else None)."""
    import numpy as np

    numpy_dir = os.path.dirname(np.__file__)
    blas = [lib.filepath for lib in controller.lib_controllers if lib.user_api == "blas"]
    paths = [path for path in blas if not path.startswith(numpy_dir)]
    owns = any(path.startswith(numpy_dir) for path in blas)
    return controller.select(filepath=paths) if paths and owns else None


def _secondary_pools():
    """threadpoolctl controller of the BLAS libraries that are not numpy's (or None)."""
    return _kept(_SECONDARY, _not_numpys)


def single_blas_pool():
    """Context manager: BLAS libraries other than numpy's run on one thread inside.

    Examples
    --------
    >>> from threadpoolctl import threadpool_info
    >>> def threads():
    ...     return {i["filepath"]: i["num_threads"] for i in threadpool_info()}
    >>> before = threads()
    >>> with single_blas_pool():
    ...     inside = threads()
    >>> all(inside[path] in (1, n) for path, n in before.items()), threads() == before
    (True, True)
    """
    selection = _secondary_pools()
    return nullcontext() if selection is None else _SingleBlasPool(selection)


class _SingleBlasPool:
    """The limit of :func:`single_blas_pool`, set by a thread's outermost block and lifted
    when that block ends: nested blocks of the same thread -- every fit of a
    regularisation path inside the path's block -- cost a counter, not a threadpoolctl
    call each. (Each thread sets and lifts its own limit, as before: OpenBLAS ignored a
    restore made from another thread than the one that set the limit.)"""

    _local = threading.local()

    def __init__(self, selection):
        self._selection = selection

    def __enter__(self):
        local = self._local
        depth = getattr(local, "depth", 0)
        if depth == 0:
            local.limit = self._selection.limit(limits=1)
        local.depth = depth + 1
        return self

    def __exit__(self, *exc):
        local = self._local
        local.depth -= 1
        if local.depth == 0:
            limit, local.limit = local.limit, None
            limit.restore_original_limits()
        return False


def with_single_blas_pool(func):
    """Decorator: run ``func`` inside :func:`single_blas_pool`."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with single_blas_pool():
            return func(*args, **kwargs)
    return wrapper


def _all_blas():
    """threadpoolctl controller of every BLAS library loaded at first use (or None)."""
    return _kept(_ALL_BLAS, lambda controller: controller.select(user_api="blas"))


def one_blas_thread():
    """Context manager: every BLAS and LAPACK library (numpy's too) on one thread inside --
    where threads are the parallelism (compiled chains in threads), or where a result
    must not depend on the thread count (a multithreaded ``syrk`` sums in another order:
    the sampler's tuning moments). A no-op without threadpoolctl.

    The libraries are found once, at the first call, and kept: ``threadpool_limits``
    inspects every loaded shared library at each call (2.6 ms with bayesdrop's imports,
    12 calls and 45 of 628 ms of a four-chain posterior on breast cancer).

    Examples
    --------
    >>> from threadpoolctl import threadpool_info
    >>> with one_blas_thread():
    ...     inside = {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}
    >>> inside <= {1}
    True
    """
    selection = _all_blas()
    return nullcontext() if selection is None else selection.limit(limits=1)


def numba_threads():
    """Whether compiled kernels may run their fixed chunks of work on numba's threads
    (``parallel=True``; :func:`bayesdrop.linalg.kernels.csr_hvp`): in the main thread of
    the process that imported bayesdrop, with more than one numba thread, and with a
    threading layer that is safe to launch from any thread -- TBB or OpenMP, whichever
    numba picks by default, unless ``NUMBA_THREADING_LAYER`` names another. Not in a
    forked child (GNU OpenMP's threads do not survive ``fork``: numba then aborts the
    child), not from other threads (dask's threaded scheduler, a user's pool: there the
    chunks run one after the other), not with numba's ``workqueue`` layer. The chunks are
    the same either way, so results do not depend on this.

    Examples
    --------
    >>> import threading
    >>> from concurrent.futures import ThreadPoolExecutor
    >>> with ThreadPoolExecutor(1) as pool:  # not from another thread
    ...     pool.submit(numba_threads).result()
    False
    """
    if os.getpid() != _PID or threading.current_thread() is not threading.main_thread():
        return False
    if not _SAFE_LAYER:
        import importlib

        import numba
        from numba.core import config

        layer = config.THREADING_LAYER
        candidates = {"default": ("tbb", "omp"), "safe": ("tbb",), "threadsafe": ("tbb", "omp"),
                      "forksafe": ("tbb",), "tbb": ("tbb",), "omp": ("omp",)}.get(layer, ())
        safe = False
        for name in candidates:
            try:
                importlib.import_module(f"numba.np.ufunc.{name}pool")
            except ImportError:
                continue
            safe = True
            break
        _SAFE_LAYER.append(safe and numba.config.NUMBA_NUM_THREADS > 1)
    if not _SAFE_LAYER[0]:
        return False
    import numba

    return numba.get_num_threads() > 1
