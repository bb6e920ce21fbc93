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


# -- numba's threads: the CSR products' fixed row chunks ---------------------------------

def _wide_problem(loss):
    import numpy as np
    import scipy.sparse as sp

    from bayesdrop import Dropout, Problem

    rng = np.random.default_rng(5)
    X = sp.random(400, 3000, density=0.05, format="csr", random_state=6)  # 6e4 entries
    y = np.where(X @ rng.normal(size=3000) + 0.1 * rng.normal(size=400) > 0, 1.0, -1.0)
    return Problem.create(X, y, loss, Dropout(0.3))


def test_row_chunks_split_the_stored_entries_evenly():
    import numpy as np

    from bayesdrop.linalg.kernels import CHUNKED_MIN_ENTRIES, HVP_CHUNKS, row_chunks

    indptr = np.cumsum(np.r_[0, np.full(1000, 60)])
    chunks = row_chunks(indptr)
    assert indptr[-1] >= CHUNKED_MIN_ENTRIES and chunks.size == HVP_CHUNKS + 1
    sizes = np.diff(indptr[chunks])
    assert chunks[0] == 0 and chunks[-1] == 1000 and sizes.max() - sizes.min() <= 60
    assert row_chunks(indptr[:10]).tolist() == [0, 9]  # few entries: one chunk


def test_products_on_threads_are_the_products_in_one_thread():
    """The chunks run on numba's threads or one after the other: the same sums, bit for
    bit, and ``H z`` to rounding (against the dense Hessian)."""
    import numpy as np

    from bayesdrop import LogisticLoss
    from bayesdrop.linalg import hessian as hess
    from bayesdrop.linalg import kernels

    problem = _wide_problem(LogisticLoss(1.0))
    design = problem.design
    theta = np.random.default_rng(1).normal(size=design.n_params) * 0.1
    _, _, curv = hess.curvature(problem, theta)
    indptr, indices, xdata, mdata = design.row_kernel_arrays()[1]
    scale = design.row_kernel_arrays()[2]
    xg, _ = kernels.csr_hessian_entries(indptr, indices, xdata, mdata, scale, True, curv.w,
                                        curv.d_mm, curv.d_ms, curv.d_ss, curv.noise_diag,
                                        np.empty(2 * xdata.size), np.empty(0))
    chunks = kernels.row_chunks(indptr)
    assert chunks.size == 3
    z = np.random.default_rng(2).normal(size=design.n_params)
    base = 2.0 + curv.noise_diag
    out = {}
    for threads in (True, False, None):  # None: the variant without the parallel kernel
        out[threads] = kernels.csr_hvp(indptr, indices, xg, True, curv.d_mm, curv.d_ms,
                                       curv.d_ss, base, z, np.empty(z.size), chunks,
                                       np.empty((1, base.size)), threads)
    one = kernels.csr_hvp(indptr, indices, xg, True, curv.d_mm, curv.d_ms, curv.d_ss, base,
                          z, np.empty(z.size), np.array([0, design.n_samples]),
                          np.empty((0, base.size)), False)
    assert np.array_equal(out[True], out[False]) and np.array_equal(out[True], out[None])
    H = hess.hessian_matrix(design, curv)
    np.testing.assert_allclose(out[True], H @ z, rtol=1e-10, atol=1e-10 * np.abs(H @ z).max())
    np.testing.assert_allclose(out[True], one, rtol=1e-12, atol=1e-13 * np.abs(one).max())


def test_gradient_pass_on_threads_is_the_pass_in_one_thread():
    """``csr_gradient_pass``: its two chunks on numba's threads or one after the other
    give the same bits, the same entries ``xg`` as ``csr_gradient_entries``, and
    ``X^T a``, ``M^T rho`` to rounding of the one-chunk pass -- which is bit for bit
    ``csr_gradient_entries`` (with entries) and ``csr_rmatvec_pair`` (without)."""
    import numpy as np

    from bayesdrop import LogisticLoss
    from bayesdrop.linalg import kernels
    from bayesdrop.model._design_kernels import csr_rmatvec_pair

    design = _wide_problem(LogisticLoss(1.0)).design
    (indptr, indices, xdata, mdata), scale = design.row_kernel_arrays()[1:]
    n, D = design.n_samples, design.n_features
    rng = np.random.default_rng(3)
    w, a, rho = rng.normal(size=D), rng.normal(size=n), rng.random(n)
    chunks = kernels.row_chunks(indptr)
    assert chunks.size == 3

    def run(chunks, threads, entries=True):
        g, nd, xg = np.full(D + 1, 7.0), np.empty(D), np.zeros(2 * xdata.size)
        kernels.csr_gradient_pass(indptr, indices, xdata, mdata, scale, w, a, rho, g, nd, xg,
                                  entries, chunks, threads)
        assert g[D] == 7.0  # the intercept's entry is the caller's
        return g[:D], nd, xg

    on, off = run(chunks, True), run(chunks, False)
    one = run(np.array([0, n]), False)
    ref = [np.empty(D), np.empty(D), np.empty(2 * xdata.size)]
    kernels.csr_gradient_entries(indptr, indices, xdata, mdata, scale, w, a, rho, *ref)
    pair = [np.empty(D + 1), np.empty(D)]
    csr_rmatvec_pair(indptr, indices, xdata, mdata, a, rho, *pair)
    for x, y in zip(on, off):
        assert np.array_equal(x, y)
    for x, y in zip(one, ref):
        assert np.array_equal(x, y)
    plain = run(np.array([0, n]), False, entries=False)
    assert np.array_equal(plain[0], pair[0][:D]) and np.array_equal(plain[1], pair[1])
    assert np.array_equal(on[2], ref[2])
    for x, y in zip(on[:2], one[:2]):
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-13 * np.abs(y).max())


def test_newton_cg_gives_the_same_bits_with_and_without_numba_threads(monkeypatch):
    """(One loss: the products do not depend on it, and each variant compiles for seconds.)"""
    import numpy as np

    from bayesdrop import LogisticLoss
    from bayesdrop.linalg import hessian as hess
    from bayesdrop.solvers import newton

    problem = _wide_problem(LogisticLoss(1.0))
    fits = {}
    for threads in (True, False):
        for module in (newton, hess):
            monkeypatch.setattr(module, "numba_threads", lambda t=threads: t)
        fits[threads] = [newton.fit(problem, linalg="cg", compiled=c) for c in (True, False)]
    for c in (0, 1):
        assert np.array_equal(fits[True][c].theta, fits[False][c].theta)


def test_no_numba_threads_in_a_forked_child_or_another_thread():
    import multiprocessing as mp
    from concurrent.futures import ThreadPoolExecutor

    from bayesdrop._threads import numba_threads

    if "fork" not in mp.get_all_start_methods():
        pytest.skip("no fork here")
    numba_threads()  # the parent decided first
    with mp.get_context("fork").Pool(1) as pool:
        assert pool.apply(numba_threads) is False
    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(numba_threads).result() is False


def test_sparse_sweep_gives_the_same_draws_with_and_without_numba_threads(monkeypatch):
    """One chain of the compiled sparse sweep (the dual products' row chunks on numba's
    threads, or one after the other): the same draws, bit for bit."""
    import numpy as np

    from bayesdrop import LogisticLoss
    from bayesdrop.samplers import compiled, sample
    from bayesdrop.solvers import fit_problem

    problem = _wide_problem(LogisticLoss(1.0))
    assert compiled.compiled_setup(problem, "auto")["chunks"].size == 3
    theta_hat = fit_problem(problem).theta
    draws = {}
    for threads in (True, False):
        monkeypatch.setattr(compiled, "numba_threads", lambda t=threads: t)
        result = sample(problem, draws=15, tune=5, chains=1, random_state=3,
                       theta_hat=theta_hat, progressbar=False, compiled=True)
        draws[threads] = result.theta
    assert np.array_equal(draws[True], draws[False])


def test_start_check_of_a_warm_fit_runs_blas_on_one_thread(monkeypatch):
    """``fit_problem`` checks ``J`` at a caller's ``theta0`` with every BLAS library on
    one thread: a multithreaded product there (``||w||^2`` of a wide ``w``) left numpy's
    OpenBLAS threads spinning on the cores that Newton-CG's products on numba's threads
    then shared -- newsgroups, warm-started logistic fits (every fit of the CV path) 14 ->
    27 ms. Checked where it is decided: the BLAS thread counts while ``J`` is computed."""
    from threadpoolctl import threadpool_info

    from bayesdrop import LogisticLoss
    from bayesdrop.model.problem import Problem
    from bayesdrop.solvers import fit_problem

    if all(i["num_threads"] == 1 for i in threadpool_info() if i["user_api"] == "blas"):
        pytest.skip("every BLAS library runs one thread here: nothing to limit")
    problem = _wide_problem(LogisticLoss(1.0))
    theta0 = fit_problem(problem).theta
    seen = []
    real = Problem.objective

    def objective(self, theta, *args, **kwargs):
        seen.append({i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"})
        return real(self, theta, *args, **kwargs)

    monkeypatch.setattr(Problem, "objective", objective)
    result = fit_problem(problem, theta0)
    assert result.converged and seen and all(threads == {1} for threads in seen)


def test_a_threaded_one_vs_rest_fit_keeps_the_limit_for_all_its_problems(secondary,
                                                                           monkeypatch):
    """``n_jobs=2`` fits the one-vs-rest problems in two threads, each problem's solver
    inside its own ``single_blas_pool`` block; the calling thread holds the limit around
    them all, so that no thread's block ends by lifting it while another problem
    computes (the other BLAS then ran its own threads against the fits': digits
    ``DropoutSVC``, 10 classes, 72 ms without the outer block against 24 ms with it, and
    slower sequential fits after it). Every problem starts with the secondary BLAS on one
    thread, and the limit is lifted after the fit."""
    from sklearn.datasets import load_digits

    from bayesdrop import DropoutSVC
    from bayesdrop.estimators import linear

    seen = []
    real = linear.fit_problem

    def recording(*args, **kwargs):
        seen.append(set(_secondary_threads().values()))
        return real(*args, **kwargs)

    monkeypatch.setattr(linear, "fit_problem", recording)
    X, y = load_digits(n_class=4, return_X_y=True)
    DropoutSVC(0.1, noise_level=0.2, n_jobs=2).fit(X / 16.0, y)
    assert len(seen) == 4 and all(s == {1} for s in seen)
    assert _secondary_threads() == secondary
