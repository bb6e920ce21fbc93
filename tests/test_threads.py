"""``single_blas_pool``: a thread's limit is set by its outermost block and lifted when that
block ends (nested blocks, as every fit of a CV path inside the path's block), and
overlapping blocks of two threads leave no limit behind."""

import threading

import pytest
from threadpoolctl import threadpool_info

from bayesdrop._threads import _secondary_pools, single_blas_pool


def _secondary_threads():
    paths = {lib.filepath for lib in _secondary_pools().lib_controllers}
    return {i["filepath"]: i["num_threads"] for i in threadpool_info() if i["filepath"] in paths}


@pytest.fixture
def secondary():
    if _secondary_pools() is None:
        pytest.skip("numpy and scipy share one BLAS here: nothing to limit")
    before = _secondary_threads()
    if all(n == 1 for n in before.values()):
        pytest.skip("the secondary BLAS runs one thread already")
    return before


def test_nested_blocks_keep_the_limit_until_the_outermost_ends(secondary):
    with single_blas_pool():
        with single_blas_pool():
            assert set(_secondary_threads().values()) == {1}
        assert set(_secondary_threads().values()) == {1}  # the inner end lifts nothing
    assert _secondary_threads() == secondary


def test_overlapping_blocks_of_two_threads(secondary):
    entered, release = threading.Event(), threading.Event()
    seen = []

    def other():
        with single_blas_pool():
            entered.set()
            release.wait(10)
            seen.append(set(_secondary_threads().values()))

    worker = threading.Thread(target=other)
    with single_blas_pool():
        worker.start()
        entered.wait(10)
    # this thread's block ended first, while the other's was open
    release.set()
    worker.join(10)
    assert len(seen) == 1
    assert _secondary_threads() == secondary  # nothing left behind


def test_one_blas_thread_inspects_the_libraries_once(monkeypatch):
    """``one_blas_thread`` finds the BLAS libraries at its first call and keeps them (a
    ``threadpool_limits`` call inspects every loaded shared library, milliseconds each
    time); each block still puts every BLAS library on one thread and restores it."""
    import threadpoolctl
    from threadpoolctl import threadpool_info

    from bayesdrop import _threads

    inspections = []
    real = threadpoolctl.ThreadpoolController.__init__

    def counting(self, *args, **kwargs):
        inspections.append(1)
        real(self, *args, **kwargs)

    def blas_threads():  # threadpool_info inspects too: not counted
        n = len(inspections)
        info = {i["filepath"]: i["num_threads"] for i in threadpool_info()
                if i["user_api"] == "blas"}
        del inspections[n:]
        return info

    monkeypatch.setattr(threadpoolctl.ThreadpoolController, "__init__", counting)
    monkeypatch.setattr(_threads, "_ALL_BLAS", [], raising=False)
    before = blas_threads()
    for _ in range(3):
        with _threads.one_blas_thread():
            inside = blas_threads()
        assert set(inside) == set(before) and set(inside.values()) == {1}
        assert blas_threads() == before
    assert len(inspections) == 1  # at the first block only
