"""Cold start: time to the first fit and the first posterior in a new process (issue
goals: first fit <= 5 s, first ``sample_posterior`` (2 chains x 500) <= 10 s, for each
linear estimator, dense and sparse; a warm process doing import + fit + predict <= 1.2x
scikit-learn's).

Part 1, cold: for each estimator and input kind, a new process with a new, empty
``NUMBA_CACHE_DIR`` imports bayesdrop, fits (breast cancer, standardised; or a random
1000 x 5000 CSR matrix at density 0.002), then samples (2 chains x 500 kept, 200 tuning):
the three times, and the compile time of each jitted function of bayesdrop that the
two calls compiled (numba's ``compiler_lock`` timer of each signature, summed; the top 8
by time, and the count). Part 2, warm: with the cache filled by part 1, pairs of new processes,
alternating, each importing its library, fitting breast cancer and predicting --
``DropoutLogisticRegression(noise_level=0.2)`` against scikit-learn's
``LogisticRegression()`` (lbfgs, its default) -- the median ratio over the pairs, timed
two ways: inside the process from the estimator's import on (both sides have loaded the
data with scikit-learn first, so scikit-learn's own import is not in its time), and the
whole process's wall clock seen from outside (interpreter start-up, the imports, the data,
the fit and the interpreter's exit: the issue's measurement).
Writes benchmarks/results/cold_start.txt.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COLD = r"""
import time, sys
t0 = time.perf_counter()
import numpy as np, scipy.sparse as sp
import bayesdrop
t_import = time.perf_counter() - t0
from sklearn.datasets import load_breast_cancer
from sklearn.preprocessing import StandardScaler
name, kind = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(0)
if kind == "dense":
    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
else:
    X = sp.random(1000, 5000, density=0.002, format="csr", random_state=0)
    y = (np.asarray(X @ rng.normal(size=5000)).ravel() > 0).astype(int)
if name == "DropoutSVR":
    y = np.asarray(X @ rng.normal(size=X.shape[1])).ravel()
est = getattr(bayesdrop, name)(noise_level=0.2)
t0 = time.perf_counter(); est.fit(X, y); t_fit = time.perf_counter() - t0
t0 = time.perf_counter()
est.sample_posterior(X, y, draws=500, tune=200, chains=2, progressbar=False, random_state=0)
t_sample = time.perf_counter() - t0
t0 = time.perf_counter(); est.fit(X, y); t_fit2 = time.perf_counter() - t0
import numba, json
per = {}
for mod_name, mod in list(sys.modules.items()):
    if not mod_name.startswith("bayesdrop"):
        continue
    for attr, obj in vars(mod).items():
        if isinstance(obj, numba.core.registry.CPUDispatcher):
            t = sum((c.metadata or {}).get("timers", {}).get("compiler_lock", 0.0)
                    for c in obj.overloads.values())
            if t:
                per[f"{obj.py_func.__module__}.{obj.__name__}/{len(obj.overloads)}"] = t
print(t_import, t_fit, t_sample, t_fit2)
print(json.dumps(per))
"""

WARM = r"""
import time, sys
t0 = time.perf_counter()
from sklearn.datasets import load_breast_cancer
X, y = load_breast_cancer(return_X_y=True)
from sklearn.preprocessing import StandardScaler
X = StandardScaler().fit_transform(X)
t0 = time.perf_counter()
if sys.argv[1] == "ours":
    from bayesdrop import DropoutLogisticRegression as E
    est = E(noise_level=0.2)
else:
    from sklearn.linear_model import LogisticRegression as E
    est = E()
est.fit(X, y).predict(X)
print(time.perf_counter() - t0)
"""
# the warm script times from the estimator's import on (both sides load the data first)


def run(code, *args, env=None, wall=None):
    """The numbers the process prints on its first line, and its other lines; ``wall``
    (a list): the whole process's wall clock is appended to it."""
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                         env=env, check=True)
    if wall is not None:
        wall.append(time.perf_counter() - t0)
    first = out.stdout.splitlines()[0]
    return [float(v) for v in first.split()], out.stdout.splitlines()[1:]


def main():
    lines = [f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
             f"Python {platform.python_version()}.", "",
             "Part 1, cold (new process, empty numba cache):", "",
             "| estimator | input | import s | first fit s | first sample s (2 x 500) "
             "| second fit s |", "|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    cache = tempfile.mkdtemp(prefix="bayesdrop-numba-")
    compiled = []
    for name in ("DropoutLogisticRegression", "DropoutSVC", "DropoutSVR"):
        for kind in ("dense", "sparse"):
            fresh = tempfile.mkdtemp(prefix="bayesdrop-numba-")
            env = {**os.environ, "NUMBA_CACHE_DIR": fresh}
            (t_import, t_fit, t_sample, t_fit2), rest = run(COLD, name, kind, env=env)
            lines.append(f"| {name} | {kind} | {t_import:.2f} | {t_fit:.1f} | {t_sample:.1f} "
                         f"| {t_fit2 * 1e3:.1f} ms |")
            print(lines[-1], flush=True)
            per = json.loads(rest[0])
            top = sorted(per.items(), key=lambda kv: -kv[1])[:8]
            compiled.append(f"- {name}, {kind}: {len(per)} functions, "
                            f"{sum(per.values()):.1f} s in all; "
                            + ", ".join(f"`{k.split('.')[-1]}` {v:.1f} s" for k, v in top))
    lines += ["", "Compiled per run (function/signatures: compile seconds, numba's "
              "compiler_lock timer):", ""] + compiled
    env = {**os.environ, "NUMBA_CACHE_DIR": cache}
    run(COLD, "DropoutLogisticRegression", "dense", env=env)  # fill the cache
    ours_t, peer_t, ours_w, peer_w = [], [], [], []
    for _ in range(7):
        ours_t.append(run(WARM, "ours", env=env, wall=ours_w)[0][0])
        peer_t.append(run(WARM, "sklearn", env=env, wall=peer_w)[0][0])
    lines += ["", "Part 2, warm cache, a new process each: import + fit + predict, breast "
              "cancer (7 alternating pairs)", "",
              "| timed | ours s (median) | scikit-learn LogisticRegression s (median) "
              "| ratio median | ratio range |", "|---|---|---|---|---|"]
    for label, a, b in (("from the estimator's import on", ours_t, peer_t),
                        ("the whole process (wall, from outside)", ours_w, peer_w)):
        ratios = [x / y for x, y in zip(a, b)]
        lines.append(f"| {label} | {statistics.median(a):.3f} | {statistics.median(b):.3f} "
                     f"| {statistics.median(ratios):.2f} | {min(ratios):.2f}-{max(ratios):.2f} |")
    print("\n".join(lines[-6:]), flush=True)
    out = Path(__file__).parent / "results" / "cold_start.txt"
    out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
