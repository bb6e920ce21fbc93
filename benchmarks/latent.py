"""Latent (one hidden layer) models against the linear ones: test error and fit time.

Run:  python benchmarks/latent.py [--quick] [--fashion-train N] [--data digits fashion]

For K in {10, 20, 40} hidden units and dropout q in {0, 0.2, 0.3}, one-vs-rest
DropoutLatentSVC / DropoutLatentLogisticRegression against DropoutSVC /
DropoutLogisticRegression at the same q (C = 1, alpha_penalty = 0.01). Data: scikit-learn's
digits (70/30 split) and Fashion-MNIST from the Debian package ``dataset-fashion-mnist``
(a random training subset of ``--fashion-train`` images and 2000 test images; skipped
with a message if the package is absent). Writes ``benchmarks/results/latent_<data>.csv``.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from bayesdrop import (
    DropoutLatentLogisticRegression,
    DropoutLatentSVC,
    DropoutLogisticRegression,
    DropoutSVC,
)
from bayesdrop.studies.datasets import load_fashion_mnist


def datasets(names, fashion_train):
    out = []
    if "digits" in names:
        X, y = load_digits(return_X_y=True)
        Xtr, Xte, ytr, yte = train_test_split(X / 16.0, y, test_size=0.3, random_state=0)
        out.append(("digits", Xtr, ytr, Xte, yte))
    if "fashion" in names:
        try:
            Xtr, ytr, Xte, yte = load_fashion_mnist()
        except FileNotFoundError as exc:
            print(f"skipping Fashion-MNIST: {exc}")
        else:
            rng = np.random.default_rng(0)
            tr = rng.choice(len(ytr), fashion_train, replace=False)
            te = rng.choice(len(yte), 2000, replace=False)
            out.append((f"fashion ({fashion_train} train)", Xtr[tr], ytr[tr], Xte[te], yte[te]))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="K=10 only, q in {0, 0.3}")
    parser.add_argument("--fashion-train", type=int, default=3000)
    parser.add_argument("--data", nargs="+", default=["digits", "fashion"])
    parser.add_argument("--solver", default="alternating",
                        help="the latent optimiser: alternating (the recorded results), "
                             "lbfgs or auto")
    parser.add_argument("--max-iter", type=int, default=None,
                        help="alternations (default 10) or L-BFGS iterations (default 5000)")
    parser.add_argument("--K", type=int, nargs="+", help="hidden units (default 10 20 40)")
    parser.add_argument("--q", type=float, nargs="+", help="dropout rates (default 0 .2 .3)")
    parser.add_argument("--no-linear", action="store_true", help="latent models only")
    parser.add_argument("--tag", default="", help="suffix of the CSV name")
    args = parser.parse_args()
    Ks = args.K or ([10] if args.quick else [10, 20, 40])
    qs = args.q or ([0.0, 0.3] if args.quick else [0.0, 0.2, 0.3])
    rows = []
    print(f"{'data':22s} {'model':8s} {'q':>4s} {'K':>3s} {'error':>6s} {'time_s':>7s}",
          flush=True)
    for name, Xtr, ytr, Xte, yte in datasets(args.data, args.fashion_train):
        for q in qs:
            noise = dict(noise="dropout", noise_level=q)
            linear = [] if args.no_linear else [("SVC", DropoutSVC(C=1.0, **noise)),
                                                ("LR", DropoutLogisticRegression(C=1.0, **noise))]
            for label, est in linear:
                t = time.perf_counter()
                err = 1 - est.fit(Xtr, ytr).score(Xte, yte)
                rows.append((name, f"lin-{label}", q, 0, err, time.perf_counter() - t))
                print(f"{name:22s} {'lin-' + label:8s} {q:4.1f} {'-':>3s} {err:6.3f} "
                      f"{rows[-1][-1]:7.1f}", flush=True)
            for K in Ks:
                max_iter = args.max_iter or (10 if args.solver == "alternating" else None)
                kw = dict(C=1.0, n_hidden=K, alpha_penalty=0.01, solver=args.solver,
                          max_iter=max_iter, w_iter=30, random_state=0, **noise)
                for label, est in [("SVC", DropoutLatentSVC(**kw)),
                                   ("LR", DropoutLatentLogisticRegression(**kw))]:
                    t = time.perf_counter()
                    err = 1 - est.fit(Xtr, ytr).score(Xte, yte)
                    rows.append((name, f"lat-{label}", q, K, err, time.perf_counter() - t))
                    print(f"{name:22s} {'lat-' + label:8s} {q:4.1f} {K:3d} {err:6.3f} "
                          f"{rows[-1][-1]:7.1f}", flush=True)
    os.makedirs(os.path.join(os.path.dirname(__file__), "results"), exist_ok=True)
    path = os.path.join(os.path.dirname(__file__), "results",
                        f"latent_{'_'.join(args.data)}{args.tag}.csv")
    with open(path, "w") as fh:
        fh.write("data,model,q,K,error,time_s\n")
        for r in rows:
            fh.write(",".join(str(v) for v in r) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
