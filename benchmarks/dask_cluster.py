"""Fits on dask arrays living on a LocalCluster: wall time, passes, client memory, and the
time per pass against the in-memory fit per GB (issue 17).

Logistic loss, dropout q = 0.3, C = 1, 64 features, rows generated *on the workers*
(``dask.array.random``, chunks of 250 000 rows = 128 MB) and persisted there, so the
client never holds the data. The fit is ``DropoutLogisticRegression(noise_level=0.3)
.fit(X, y)``: Newton through the dask row back-end, one pass over the data per step
(``J``, gradient and the 65 x 65 Hessian per chunk, tree-summed; see
``bayesdrop/linalg/dask_backend.py``). The in-memory reference fits a numpy array of the
largest size that is cheap here (1e6 rows, 0.5 GB) with the in-memory solver (the same
Newton steps on the whole array at once).

Timing: wall clock of ``fit`` (time.perf_counter), after one warm-up fit on a small dask
array (imports, worker start-up excluded for both sides). Client RSS is sampled every
5 ms by a thread (psutil) during the fit; "grown" is its peak minus its value just before.

Run:  python benchmarks/dask_cluster.py [--rows 1e6,1e7] [--workers 2]
Writes benchmarks/results/dask_cluster.txt.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

# this file is named dask.py: keep its folder off the import path, or "import dask" (here
# and in the spawned workers, which inherit sys.path) would import this script
sys.path[:] = [p for p in sys.path
               if Path(p or ".").resolve() != Path(__file__).parent.resolve()]
os.environ.setdefault("CI", "1")

import numpy as np

D = 64
CHUNK = 250_000
Q = 0.3


def make_dask(n, seed=0):
    import dask.array as da

    rng = da.random.default_rng(seed)
    X = rng.standard_normal((n, D), chunks=(CHUNK, D), dtype=np.float64)
    beta = np.linspace(1.0, -1.0, D) / np.sqrt(D) * 3.0
    p = 1.0 / (1.0 + da.exp(-(X @ beta)))
    y = (rng.random(n, chunks=CHUNK) < p).astype(np.int8)
    return X, y


class PeakRSS:
    """Peak resident memory of this process while the block runs (psutil, 5 ms)."""

    def __enter__(self):
        import psutil

        self.proc = psutil.Process(os.getpid())
        self.base = self.peak = self.proc.memory_info().rss
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()
        return self

    def _watch(self):
        while not self.stop.is_set():
            self.peak = max(self.peak, self.proc.memory_info().rss)
            time.sleep(0.005)

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def fit_dask(X, y):
    from bayesdrop import DropoutLogisticRegression

    with PeakRSS() as mem:
        t0 = time.perf_counter()
        est = DropoutLogisticRegression(noise_level=Q).fit(X, y)
        wall = time.perf_counter() - t0
    return est, wall, mem


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", default="1e6,1e7")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory-limit", default="10GB")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "dask_cluster.txt"))
    args = parser.parse_args()
    sizes = [int(float(s)) for s in args.rows.split(",")]

    import distributed
    from bayesdrop import DropoutLogisticRegression

    lines = []

    def say(s=""):
        print(s, flush=True)
        lines.append(s)

    cluster = distributed.LocalCluster(n_workers=args.workers, threads_per_worker=1,
                                       memory_limit=args.memory_limit,
                                       dashboard_address=None, silence_logs=40)
    client = distributed.Client(cluster)
    try:
        Xw, yw = make_dask(2 * CHUNK // 10)  # warm-up: imports and numba on the workers
        fit_dask(Xw.persist(), yw.persist())

        say("# Dask fits on a LocalCluster (logistic, dropout q=0.3, D=64)")
        say()
        say(f"{args.workers} worker processes x 1 thread, memory limit {args.memory_limit} "
            f"each; chunks of {CHUNK} rows ({CHUNK * D * 8 / 2**20:.0f} MB); this machine: "
            f"{os.cpu_count()} cores.")
        say()
        say("| rows | data GB | fit s | Newton steps | passes | s / pass | s / pass / GB "
            "| client peak grown MB | client RSS MB |")
        say("|---|---|---|---|---|---|---|---|---|")
        per_gb = {}
        for n in sizes:
            X, y = make_dask(n)
            X, y = X.persist(), y.persist()
            distributed.wait([X, y])
            gb = X.nbytes / 1e9
            est, wall, mem = fit_dask(X, y)
            passes = int(est.n_passes_[0]) if hasattr(est, "n_passes_") else None
            steps = int(est.n_iter_[0])
            passes = passes or steps + 1
            per_gb[n] = wall / passes / gb
            say(f"| {n:.0e} | {gb:.2f} | {wall:.1f} | {steps} | {passes} | "
                f"{wall / passes:.2f} | {per_gb[n]:.2f} | {(mem.peak - mem.base) / 2**20:.0f} "
                f"| {mem.peak / 2**20:.0f} |")
            del X, y
            client.run(lambda: __import__("gc").collect())
    finally:
        client.close()
        cluster.close()

    # in-memory reference, same data law, this process (numpy + threaded BLAS, 2 cores)
    n_mem = min(1_000_000, max(sizes))
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n_mem, D))
    beta = np.linspace(1.0, -1.0, D) / np.sqrt(D) * 3.0
    y = (rng.random(n_mem) < 1.0 / (1.0 + np.exp(-(X @ beta)))).astype(np.int8)
    DropoutLogisticRegression(noise_level=Q).fit(X[:10_000], y[:10_000])
    t0 = time.perf_counter()
    ref = DropoutLogisticRegression(noise_level=Q).fit(X, y)
    wall = time.perf_counter() - t0
    gb = X.nbytes / 1e9
    steps = int(ref.n_iter_[0])
    mem_per_gb = wall / steps / gb
    say()
    say("In-memory reference (numpy array in this process, the in-memory Newton solver):")
    say()
    say("| rows | data GB | fit s | Newton steps | s / step | s / step / GB |")
    say("|---|---|---|---|---|---|")
    say(f"| {n_mem:.0e} | {gb:.2f} | {wall:.1f} | {steps} | {wall / steps:.2f} | "
        f"{mem_per_gb:.2f} |")
    say()
    say("| rows on dask | dask s / pass / GB over in-memory s / step / GB |")
    say("|---|---|")
    for n, v in per_gb.items():
        say(f"| {n:.0e} | {v / mem_per_gb:.2f} |")
    say()
    say("A dask pass is one Newton step (the line search is evaluated in the same pass); "
        "the in-memory step also evaluates J along its line search. Both sides use the "
        "two cores; on the cluster each worker runs one task (one BLAS thread) at a time.")
    Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
