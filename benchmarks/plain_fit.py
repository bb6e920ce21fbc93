"""Dropout at the price of a plain fit: our fit of the dropout model (q > 0) against
scikit-learn's fastest fit of the *plain* model (q = 0) on the same data.

Run:  python benchmarks/plain_fit.py [--quick]
      (Fashion-MNIST rows need ``apt-get install dataset-fashion-mnist``)

How each side is timed (same process, wall clock, one BLAS thread setting for both: numpy's
at its default, 2 threads on this machine): 2 s of rest (``SETTLE_S``), then ``R`` rounds,
each fitting ours and every peer once in turn, 0.3 s apart (``GAP_S``: no fit competes
with the spinning threads of the one before) (:func:`best_times`; on a machine whose speed
drifts from minute to minute, no side is timed only in a slow minute); each side's time is
its best round. ``R`` is 15 for fits of tens of milliseconds, where one round's
disturbance is as large as the difference measured.

* **ours** -- the estimator's ``fit`` (validation, one-vs-rest and all) at its defaults
  (``tol=1e-8``, ``solver="auto"``) with the stated ``C`` and ``noise_level``, after
  ``python -m bayesdrop compile``'s kernels and one warm-up fit.
  ``relJ`` = the largest over the one-vs-rest problems of ``(J - J*) / J*``, ``J*`` from
  Newton at ``tol=1e-13`` (issue goal: <= 1e-8); ``solver`` the optimiser ``auto`` chose.
* **peer** -- each scikit-learn estimator named in the row at its defaults (plain
  model, no noise); the faster is the peer. ``LinearSVC``'s
  coordinate descent visits the examples in a random order (``random_state=None``, its
  default), so its time varies between runs (Fashion-MNIST: 1.57-1.94 s); ``R = 3``
  there. ``LogisticRegression`` with ``lbfgs`` (its default), ``newton-cg``,
  ``liblinear`` (which penalises the intercept: a slightly different objective, as
  ``LinearSVC``'s) and, below 5000 features, ``newton-cholesky``. The last column gives
  every peer's time and our ratio to it.
* **Fashion-MNIST** -- 4000 training images drawn at random (seed 0), pixels / 255 in
  [0, 1] as :func:`bayesdrop.studies.datasets.load_fashion_mnist` returns them.
* **degenerate rows** -- the same fit with rows appended that make ``J`` non-smooth or
  redundant (empty rows, whose noise variance is zero for every ``w``; duplicated rows);
  ``cost`` = its time over the time of the clean fit (issue goal: <= 2, same solver).

Results: ``benchmarks/results/plain_fit.txt``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("CI", "1")

import numpy as np
import scipy.sparse as sp
from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits, make_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC, SVR, LinearSVC, LinearSVR

from bayesdrop import DropoutLogisticRegression, DropoutSVC, DropoutSVR
from bayesdrop.solvers import newton
from bayesdrop.studies.datasets import load_fashion_mnist, load_newsgroups


#: seconds of rest before each side is timed (here and in parts 2-4 of solvers.py): for
#: about a second after a large fit the machine runs another one slower -- our newsgroups
#: fit took 17.6 ms right after scikit-learn's lbfgs or liblinear fit on 16 corrupted
#: copies and 10.1-10.5 ms two seconds later -- whichever side came first
SETTLE_S = 2.0
#: rest before every timed fit of :func:`best_times`: BLAS and OpenMP threads spin for a
#: while after a parallel region, and the fit right after one competes with them
#: (measured: newsgroups ``LogisticRegression(liblinear)`` 82-106 ms right after an
#: ``lbfgs`` fit, 42-54 ms 0.3 s later or after another ``liblinear`` fit)
GAP_S = 0.3

#: the ``LogisticRegression`` solvers timed as peers (the fastest counts)
LR_SOLVERS = ("lbfgs", "newton-cg", "newton-cholesky", "liblinear")


def lr_solvers(X):
    """:data:`LR_SOLVERS` for the shape of ``X``: ``newton-cholesky`` forms a dense
    ``D x D`` Hessian, which scikit-learn recommends for ``n_samples >> n_features`` only,
    so it is not tried above 5000 features."""
    return tuple(s for s in LR_SOLVERS if s != "newton-cholesky" or X.shape[1] <= 5000)


def lr_peers(X):
    """``(name, make)`` of each ``LogisticRegression`` peer for ``X`` (:func:`lr_solvers`)."""
    return [(f"LogisticRegression({s})", lambda s=s: LogisticRegression(solver=s))
            for s in lr_solvers(X)]


def best_time(make, X, y, repeat):
    """Best of ``repeat`` fits of ``make()`` after :data:`SETTLE_S` seconds of rest."""
    (best,), (est,) = best_times([(make, X, y)], repeat)
    return best, est


def best_times(jobs, repeat):
    """Best of ``repeat`` fits of each ``(make, X, y)`` of ``jobs``, in ``repeat`` rounds
    that fit each once in turn (after :data:`SETTLE_S` seconds of rest, and
    :data:`GAP_S` before every fit): a machine whose speed drifts from minute to minute
    slows every side alike, not the side timed last."""
    time.sleep(SETTLE_S)
    best, ests = [np.inf] * len(jobs), [None] * len(jobs)
    for _ in range(repeat):
        for i, (make, X, y) in enumerate(jobs):
            time.sleep(GAP_S)
            ests[i] = make()
            t = time.perf_counter()
            ests[i].fit(X, y)
            best[i] = min(best[i], time.perf_counter() - t)
    return best, ests


def rel_J(est, X, y):
    """Largest ``(J - J*) / J*`` over the fitted problems (``J*``: Newton at tol 1e-13
    from the fit, or the fit itself if lower)."""
    worst = 0.0
    problems, thetas = est._problems(X, y)
    for problem, theta in zip(problems, thetas):
        J = problem.objective(theta)
        star = newton.fit(problem, theta, tol=1e-13, max_iter=200, warn=False)
        J_star = min(float(star.objective[-1]), J)
        worst = max(worst, (J - J_star) / abs(J_star))
    return worst


def cases(quick):
    Xc, yc = load_breast_cancer(return_X_y=True)
    Xc = StandardScaler().fit_transform(Xc)
    Xr, yr = load_diabetes(return_X_y=True)
    Xr = StandardScaler().fit_transform(Xr)
    yr = (yr - yr.mean()) / yr.std()
    Xs, ys = make_classification(n_samples=2000 if quick else 10_000, n_features=50,
                                 n_informative=20, random_state=0)
    Xs = StandardScaler().fit_transform(Xs)
    Xd, yd = load_digits(return_X_y=True)
    Xd = Xd / 16.0
    Xn, yn = load_newsgroups()
    svc = [("LinearSVC", lambda: LinearSVC()), ("SVC(linear)", lambda: SVC(kernel="linear"))]
    svr = [("LinearSVR", lambda: LinearSVR()), ("SVR(linear)", lambda: SVR(kernel="linear"))]
    out = [
        ("breast cancer 569x30 LR q=.3 C=.5", Xc, yc,
         lambda: DropoutLogisticRegression(0.5, noise_level=0.3), lr_peers(Xc), 20),
        ("breast cancer 569x30 SVC q=.3", Xc, yc,
         lambda: DropoutSVC(1.0, noise_level=0.3), svc, 20),
        ("diabetes 442x10 SVR q=.3", Xr, yr, lambda: DropoutSVR(1.0, noise_level=0.3), svr, 20),
        (f"synthetic {Xs.shape[0]}x50 LR q=.3", Xs, ys,
         lambda: DropoutLogisticRegression(1.0, noise_level=0.3), lr_peers(Xs), 5),
        ("digits 1797x64 10 classes SVC q=.2 C=.1", Xd, yd,
         lambda: DropoutSVC(0.1, noise_level=0.2), svc, 15),
        ("newsgroups 1427x22178 LR q=.5", Xn, yn,
         lambda: DropoutLogisticRegression(1.0, noise_level=0.5), lr_peers(Xn), 15),
        ("newsgroups 1427x22178 SVC q=.5", Xn, yn,
         lambda: DropoutSVC(1.0, noise_level=0.5), svc, 15),
    ]
    try:
        Xf, yf, _, _ = load_fashion_mnist()
        rng = np.random.default_rng(0)
        idx = rng.choice(Xf.shape[0], 4000, replace=False)
        Xf, yf = Xf[idx], yf[idx]  # pixels / 255 (load_fashion_mnist's scaling)
        out.append(("Fashion-MNIST 4000x784 10 classes SVC q=.5 C=.1", Xf, yf,
                    lambda: DropoutSVC(0.1, noise_level=0.5), svc, 3))
    except (OSError, FileNotFoundError) as exc:
        print(f"Fashion-MNIST skipped: {exc}")
    return out


def degenerate_cases():
    Xn, yn = load_newsgroups()
    Xc, yc = load_breast_cancer(return_X_y=True)
    Xc = StandardScaler().fit_transform(Xc)
    empty_n = sp.vstack([Xn, sp.csr_matrix((5, Xn.shape[1]))]).tocsr()
    y_empty = np.concatenate([yn, [0, 1, 0, 1, 1]])
    Xc_zero = np.vstack([Xc, np.zeros((5, Xc.shape[1]))])
    yc_zero = np.concatenate([yc, [0, 1, 1, 0, 1]])
    Xc_dup = np.vstack([Xc, Xc[:50]])
    yc_dup = np.concatenate([yc, yc[:50]])
    svc_n = lambda: DropoutSVC(1.0, noise_level=0.5)  # noqa: E731
    svc_c = lambda: DropoutSVC(1.0, noise_level=0.3)  # noqa: E731
    lr_c = lambda: DropoutLogisticRegression(0.5, noise_level=0.3)  # noqa: E731
    return [
        ("newsgroups SVC q=.5 + 5 empty documents", (Xn, yn), (empty_n, y_empty), svc_n, 15),
        ("breast cancer SVC q=.3 + 5 zero rows", (Xc, yc), (Xc_zero, yc_zero), svc_c, 20),
        ("breast cancer LR q=.3 + 5 zero rows", (Xc, yc), (Xc_zero, yc_zero), lr_c, 20),
        ("breast cancer SVC q=.3 + 50 duplicated rows", (Xc, yc), (Xc_dup, yc_dup), svc_c, 20),
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    warnings.simplefilter("ignore", ConvergenceWarning)
    from bayesdrop.warmup import warm

    with open(os.devnull, "w") as devnull:  # python -m bayesdrop compile's fit kernels
        warm(sample=False, file=devnull)
    lines = ["| problem | ours s | solver | relJ | peer | peer s | ours / peer "
             "| every peer s (ours / it) |", "|---|---|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    for name, X, y, ours, peers, R in cases(args.quick):
        ours().fit(X, y)  # warm-up
        times, ests = best_times([(make, X, y) for make in [ours] + [m for _, m in peers]], R)
        t_ours, est = times[0], ests[0]
        solver = ",".join(sorted(set(np.atleast_1d(est.solver_).tolist()))) \
            if hasattr(est, "solver_") else "?"
        relj = rel_J(est, X, y)
        timed = [(peer_name, t) for (peer_name, _), t in zip(peers, times[1:])]
        best = min((t, n) for n, t in timed)
        every = ", ".join(f"{n} {t:.4f} ({t_ours / t:.2f})" for n, t in sorted(timed))
        lines.append(f"| {name} | {t_ours:.4f} | {solver} | {relj:.0e} | {best[1]} | "
                     f"{best[0]:.4f} | **{t_ours / best[0]:.2f}** | {every} |")
        print(lines[-1], flush=True)
    lines += ["", "| degenerate rows | clean s | solver | with them s | solver | cost |",
              "|---|---|---|---|---|---|"]
    print("\n".join(lines[-3:]), flush=True)
    for name, (X0, y0), (X1, y1), make, R in degenerate_cases():
        make().fit(X1, y1)
        (t0, t1), (e0, e1) = best_times([(make, X0, y0), (make, X1, y1)], R)
        s0 = ",".join(sorted(set(np.atleast_1d(e0.solver_).tolist())))
        s1 = ",".join(sorted(set(np.atleast_1d(e1.solver_).tolist())))
        lines.append(f"| {name} | {t0:.4f} | {s0} | {t1:.4f} | {s1} | **{t1 / t0:.2f}** |")
        print(lines[-1], flush=True)
    lines += ["", f"machine: {os.cpu_count()} cores; python {sys.version.split()[0]}"]
    if not args.quick:
        (Path(__file__).parent / "results" / "plain_fit.txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
