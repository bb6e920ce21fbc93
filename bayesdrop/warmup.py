"""Compile ahead of use: ``python -m bayesdrop compile``.

numba compiles each kernel the first time it runs and keeps the machine code in its
on-disk cache (``cache=True``: next to the installed modules, or under
``NUMBA_CACHE_DIR``), so only the first process on a machine pays for it. :func:`warm`
runs a small fit and a small posterior sample for each chosen estimator and input kind,
which compiles exactly the kernels those calls use (for the logistic loss at ``C = 1`` and
``C = 0.1``: its sweep has a variant for Polya-Gamma shapes ``2C`` below 1 and one for the
rest), and compiles the whole Newton loop for
small dense problems and Newton-CG's loop for CSR designs of the estimator's loss (which
``compiled="auto"`` runs only once compiled: :func:`bayesdrop.solvers.newton.fit`) and,
for the classifiers, the dense loop's run over a path of ``C`` (:func:`bayesdrop.solvers.newton.fit_path`), the compiled steps of the
certificate that ``w = 0`` is optimal (:func:`bayesdrop.solvers.bare.bare_newton`), the float32 Hessian of larger dense
designs (:data:`LARGE_DENSE`), the threaded products of larger sparse ones
(:data:`LARGE_SPARSE`), the compiled primal CG of the sampler's system on sparse data
with more examples than features and, for the SVMs, the event loop
that the CV estimators' zero-noise path runs (:mod:`bayesdrop.solvers.homotopy`); later
processes load them from the cache.
"""

from __future__ import annotations

import time
import warnings

import numpy as np

from ._arviz import ConvergenceWarning
from ._threads import numba_threads

__all__ = ["ESTIMATORS", "KINDS", "LARGE_DENSE", "LARGE_SPARSE", "warm"]

#: estimators :func:`warm` knows, by the name of their class
ESTIMATORS = ("DropoutLogisticRegression", "DropoutSVC", "DropoutSVR")
#: input kinds: a dense ndarray, a CSR matrix with few rows and many columns (more than
#: :data:`bayesdrop.linalg.wls.MAX_CHOLESKY_PARAMS`: Newton-CG and the sampler's dual
#: sweep, the kernels of wide sparse data such as text)
KINDS = ("dense", "sparse")


#: the shape of the second dense input: more than ``MAX_COMPILED_ROWS`` rows and at least
#: ``HESSIAN_BLOCKED_MIN`` entries, the designs that Newton's Python loop fits with the
#: float32 Hessian (:func:`bayesdrop.linalg.hessian.single_applies`); its kernels took
#: 1 s on the first such fit after the command otherwise
LARGE_DENSE = (2001, 20)

#: the shape and density of the second sparse input: more stored entries than
#: ``CHUNKED_MIN_ENTRIES``, whose products run in row chunks on numba's threads where
#: :func:`bayesdrop._threads.numba_threads` allows (Newton-CG, the one-chain sparse sweep):
#: their parallel kernels took about 3 s on the first such fit after the command otherwise
LARGE_SPARSE = (100, 2500, 0.25)


def _data(kind, regression, shape=None):
    rng = np.random.default_rng(0)
    if kind == "dense":
        X = rng.normal(size=shape or (80, 5))
    else:
        import scipy.sparse as sp

        # more parameters than MAX_CHOLESKY_PARAMS and fewer rows than columns: the
        # kernels of wide sparse data (Newton-CG; the sampler's dual sweep)
        n, D, density = shape or (40, 2500, 0.01)
        X = sp.random(n, D, density=density, format="csr", random_state=0)
    score = np.asarray(X @ rng.normal(size=X.shape[1])).ravel()
    y = score if regression else (score > np.median(score)).astype(int)
    return X, y


def _compile_newton(est, X, y):
    from .model.problem import Problem
    from .solvers import newton

    regression = type(est).__name__ == "DropoutSVR"
    target = np.asarray(y, dtype=float) if regression else 2.0 * np.asarray(y) - 1.0
    problem = Problem.create(X, target, est._make_loss(), "dropout")
    theta = newton.fit(problem, compiled=True, warn=False).theta
    if problem.design.sparse:  # the rest is the dense designs' compiled code
        return
    kinks = problem.loss.kinks(problem.y)
    if kinks is not None:
        from .solvers.bare import bare_newton

        # bare_newton's compiled steps, from a bare model on the first example's kink
        bare_newton(problem, np.append(np.zeros(problem.design.n_features), kinks[0][0, 0]),
                    compiled=True)
    # the float32 products of large designs' refined Newton directions
    # (hessian.single_operator; 512 features or more)
    from .linalg import hessian

    hessian.single_operator(problem.design, hessian.curvature(problem, theta)[2])(theta)
    if not regression:  # the CV path's fits in one call (for the epsilon-insensitive
        # loss only where its tube has at most 64 edges: bayesdrop.solvers.fit_path)
        newton.fit_path(problem, [1.0, 2.0], theta, compiled=True)
        # a classifier's one-vs-rest problems from zero in one call (first_newton_runs)
        newton.fit_problems([problem, problem._replace(y=-problem.y)], compiled=True)


def _sample_primal(est, X, y, Cs):
    """A few sweeps of the sampler's Python kernel with the primal CG on the CSR ``X``
    (the sweeps of sparse designs with more examples than features) at each ``C`` of
    ``Cs``: its augmentation draws and, with ``X``'s stored entries, the CG's row
    chunks (threaded where ``X`` has :data:`LARGE_SPARSE`'s entries)."""
    from .model.problem import Problem
    from .samplers import sample

    regression = type(est).__name__ == "DropoutSVR"
    target = np.asarray(y, dtype=float) if regression else 2.0 * np.asarray(y) - 1.0
    for C in Cs:
        problem = Problem.create(X, target, type(est)(C=C)._make_loss(), "dropout")
        sample(problem, draws=2, tune=1, chains=1, linalg="cg", progressbar=False,
               random_state=0, theta_hat=np.zeros(problem.design.n_params))


def warm(estimators=ESTIMATORS, kinds=KINDS, *, sample=True, file=None):
    """Fit (and sample, if ``sample``) each estimator on each input kind once, printing
    the seconds each step took (compilation, or loading from numba's cache).

    Parameters
    ----------
    estimators : iterable of str
        Names from :data:`ESTIMATORS`.
    kinds : iterable of str
        From :data:`KINDS`.
    sample : bool, default=True
        Also run ``sample_posterior`` (2 chains), which compiles the Gibbs sweeps.
    file : file-like, optional
        Where to print (default: standard output).

    Returns
    -------
    list of (estimator, kind, step, seconds)

    Examples
    --------
    >>> import os
    >>> rows = warm(["DropoutSVR"], ["dense"], sample=False, file=open(os.devnull, "w"))
    >>> [r[:3] for r in rows]
    [('DropoutSVR', 'dense', 'fit')]
    """
    import bayesdrop

    rows = []
    for name in estimators:
        if name not in ESTIMATORS:
            raise ValueError(f"estimators must be among {ESTIMATORS}, got {name!r}")
        for kind in kinds:
            if kind not in KINDS:
                raise ValueError(f"kinds must be among {KINDS}, got {kind!r}")
            X, y = _data(kind, name == "DropoutSVR")
            est = getattr(bayesdrop, name)(noise_level=0.2)
            t0 = time.perf_counter()
            est.fit(X, y)
            _compile_newton(est, X, y)  # the compiled loop that later fits use
            large = None
            if kind == "sparse" and numba_threads():
                large = _data(kind, name == "DropoutSVR", LARGE_SPARSE)
                _compile_newton(est, *large)
            if kind == "dense":
                type(est)(noise_level=0.2).fit(
                    *_data(kind, name == "DropoutSVR", LARGE_DENSE))
                if name != "DropoutLogisticRegression":  # the CV path's zero-noise walk
                    path = type(est)(noise_level=0.0)._fit_path(X, y, None, [0.5, 2.0])
                    for _ in path:
                        pass
            rows.append((name, kind, "fit", time.perf_counter() - t0))
            print(f"{name:<26} {kind:<6} fit              {rows[-1][3]:7.1f} s", file=file,
                  flush=True)
            if sample:
                t0 = time.perf_counter()
                with warnings.catch_warnings():  # 20 draws: short chains, by design
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    est.sample_posterior(X, y, draws=20, tune=10, chains=2,
                                         progressbar=False, random_state=0)
                    if name == "DropoutLogisticRegression":  # shapes 2C below 1: the
                        # sweep's variant with the fractional Polya-Gamma tables
                        type(est)(C=0.1, noise_level=0.2).fit(X, y).sample_posterior(
                            X, y, draws=20, tune=10, chains=2, progressbar=False,
                            random_state=0)
                    if large is not None:  # one chain: the dual products on threads
                        type(est)(noise_level=0.2).fit(*large).sample_posterior(
                            *large, draws=5, tune=5, chains=1, progressbar=False,
                            random_state=0)
                    if kind == "sparse":  # the primal system's sweeps (tall data)
                        Cs = (1.0, 0.1) if name == "DropoutLogisticRegression" else (1.0,)
                        _sample_primal(est, X, y, Cs)
                        if large is not None:
                            _sample_primal(est, *large, Cs[:1])
                rows.append((name, kind, "sample_posterior", time.perf_counter() - t0))
                print(f"{name:<26} {kind:<6} sample_posterior {rows[-1][3]:7.1f} s",
                      file=file, flush=True)
    return rows

