"""Estimator benchmark (session 4's IRLS benchmark): time and objective against
scikit-learn, and against explicit corruption.

Since 0.2 the estimators use ``solver="auto"`` (Newton, the dual or IRLS; see
:mod:`bayesdrop.solvers`), so "ours" below is whichever optimiser that picks; the
per-solver comparison lives in ``benchmarks/solvers.py``.

Run:  python benchmarks/irls.py [--quick]

Part 1 (zero noise): the same objective ``J`` is minimised by scikit-learn
(``SVC(kernel="linear")`` -- libsvm, unpenalised intercept -- and ``LogisticRegression``)
and by bayesdrop's IRLS. Reported: both times, the ratio ours/sklearn (goal <= 2) and the
relative objective difference ``(J_ours - J_sklearn) / J_sklearn`` (negative = ours lower).

Part 2 (q > 0): dropout-noise IRLS against explicit corruption (the ordinary model trained
on M seeded dropout copies with C/M per copy, M in {1, 4, 16, 64}); time and test
accuracy, ratio time(M=16) / time(ours) (goal >= 10 with accuracy at least as good).
All ratios are measured in the same run.
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing as mp
import time

import numpy as np
import scipy.sparse as sp
from sklearn.datasets import load_breast_cancer, make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC, LinearSVC

from bayesdrop import DropoutLogisticRegression, DropoutSVC, Problem
from bayesdrop.studies.datasets import load_newsgroups
from bayesdrop.model.losses import HingeLoss, LogisticLoss
from bayesdrop.model.noise import Dropout


def timed(fn, repeat=1):
    best, out = np.inf, None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return out, best


#: Time budget of one scikit-learn reference fit; a slower fit is reported as "> cap".
REFERENCE_CAP_S = 300.0


def _fit_in_child(make, X, y, queue):
    t = time.perf_counter()
    model = make().fit(X, y)
    queue.put((model, time.perf_counter() - t))


def capped_fit(make, X, y):
    """Fit ``make()`` in a child process; ``(None, cap)`` if it exceeds the cap."""
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=_fit_in_child, args=(make, X, y, queue))
    proc.start()
    try:
        model, elapsed = queue.get(timeout=REFERENCE_CAP_S)
    except Exception:
        proc.kill()
        proc.join()
        return None, REFERENCE_CAP_S
    proc.join()
    return model, elapsed


def dense_coef(c):
    return c.toarray().ravel() if sp.issparse(c) else np.ravel(c)


def zero_noise_rows(datasets, C=1.0):
    rows = []
    for name, X, y, repeat in datasets:
        for loss_name in ("hinge", "logistic"):
            if loss_name == "hinge":
                if repeat == 1:
                    ref, t_ref = capped_fit(functools.partial(SVC, kernel="linear", C=C), X, y)
                else:
                    ref, t_ref = timed(lambda: SVC(kernel="linear", C=C).fit(X, y), repeat)
                ours, t_ours = timed(lambda: DropoutSVC(C=C, noise="none", tol=1e-8).fit(X, y),
                                     repeat)
                loss = HingeLoss(C)
                label = "SVC(linear)"
            else:
                ref, t_ref = timed(lambda: LogisticRegression(C=C, max_iter=10_000).fit(X, y),
                                   repeat)
                ours, t_ours = timed(
                    lambda: DropoutLogisticRegression(C=C, noise="none", tol=1e-8).fit(X, y),
                    repeat)
                loss = LogisticLoss(C)
                label = "LogisticRegression(lbfgs)"
            p = Problem.create(X, np.where(y == ours.classes_[1], 1.0, -1.0), loss, "none")
            J_ours = p.objective(p.design.pack(ours.coef_[0], ours.intercept_[0]))
            if ref is None:  # reference exceeded the time cap
                rel = np.nan
            else:
                J_ref = p.objective(p.design.pack(dense_coef(ref.coef_), ref.intercept_[0]))
                rel = (J_ours - J_ref) / abs(J_ref)
            row = (name, loss_name, label, t_ref, t_ours, t_ours / t_ref, rel,
                   int(ours.n_iter_[0]), ref is None)
            print(f"{row[0]:<30} {row[1]:<9} {row[2]:<26} "
                  f"{('>' if row[8] else '') + format(row[3], '.3f'):>9} {row[4]:>9.3f} "
                  f"{('<' if row[8] else '') + format(row[5], '.3f'):>7} {row[6]:>10.2e} "
                  f"{row[7]:>5d}", flush=True)
            rows.append(row)
    return rows


def explicit_rows(name, Xtr, ytr, Xte, yte, q, C, Ms, seed=0):
    rows = []
    noise = Dropout(q)
    for loss_name in ("logistic", "hinge"):
        Est = DropoutLogisticRegression if loss_name == "logistic" else DropoutSVC
        ours, t_ours = timed(lambda: Est(C=C, noise_level=q, tol=1e-6).fit(Xtr, ytr))
        acc_ours = ours.score(Xte, yte)
        rows.append((name, loss_name, "bayesdrop (auto)", "-", t_ours, acc_ours, 1.0))
        for M in Ms:
            rng = np.random.default_rng(seed)
            stack = sp.vstack if sp.issparse(Xtr) else np.vstack
            Xc = stack([noise.corrupt(Xtr, rng) for _ in range(M)])
            if sp.issparse(Xc):
                Xc = Xc.tocsr()
            yc = np.tile(ytr, M)
            if loss_name == "logistic":
                model = LogisticRegression(C=C / M, max_iter=10_000)
            else:
                model = LinearSVC(C=C / M, loss="hinge", dual=True, max_iter=20_000,
                                  intercept_scaling=10.0)
            ref, t_ref = timed(lambda: model.fit(Xc, yc))
            rows.append((name, loss_name, f"explicit M={M}", M, t_ref, ref.score(Xte, yte),
                         t_ref / t_ours))
        for r in rows[-len(Ms) - 1:]:
            print(f"{r[0]:<30} {r[1]:<9} {r[2]:<16} {r[4]:>8.3f} {r[5]:>9.3f} {r[6]:>9.1f}",
                  flush=True)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the N=20000 problem")
    args = parser.parse_args(argv)

    Xc, yc = load_breast_cancer(return_X_y=True)
    Xc = StandardScaler().fit_transform(Xc)
    Xn, yn = load_newsgroups()
    yn = 2.0 * yn - 1.0  # +-1 targets
    datasets = [("breast cancer 569x30", Xc, yc, 5)]
    if not args.quick:
        Xs, ys = make_classification(n_samples=20_000, n_features=200, n_informative=20,
                                     flip_y=0.05, random_state=0)
        datasets.append(("synthetic 20000x200", Xs, ys, 1))
    datasets.append(("newsgroups 1427x22178 sparse", Xn, yn, 1))

    print("== zero noise: same objective as scikit-learn (C=1) ==")
    print(f"{'data':<30} {'loss':<9} {'reference':<26} {'t_ref[s]':>9} {'t_ours[s]':>9} "
          f"{'ratio':>7} {'relJ':>10} {'iter':>5}")
    zero_noise_rows(datasets)

    print("\n== q > 0: expected-noise fit vs explicit corruption ==")
    print(f"{'data':<30} {'loss':<9} {'method':<16} {'time[s]':>8} {'test acc':>9} "
          f"{'t/t_ours':>9}")
    rng = np.random.default_rng(0)
    perm = rng.permutation(Xn.shape[0])
    half = Xn.shape[0] // 2
    tr, te = perm[:half], perm[half:]
    Ms = (1, 4, 16) if args.quick else (1, 4, 16, 64)
    blocks = [explicit_rows("newsgroups (2-fold half)", Xn[tr], yn[tr], Xn[te], yn[te],
                            q=0.5, C=1.0, Ms=Ms)]
    permc = rng.permutation(Xc.shape[0])
    trc, tec = permc[:400], permc[400:]
    blocks.append(explicit_rows("breast cancer", Xc[trc], yc[trc], Xc[tec], yc[tec],
                                q=0.3, C=0.1, Ms=Ms))


if __name__ == "__main__":
    main()
