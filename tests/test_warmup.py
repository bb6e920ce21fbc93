"""``python -m bayesdrop compile`` (:mod:`bayesdrop.warmup`) fills numba's cache with the
kernels that later fits and posteriors of wide sparse data, and fits of dense data of the
size of digits, use."""

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.heavy  # few long tests: scheduled first (conftest.py)


def _python(code, **env):
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, env={**os.environ, **env})
    assert out.returncode == 0, out.stderr
    return out.stdout


_ADDED = """
        import gc, os, warnings
        from numba.core.dispatcher import Dispatcher
        from bayesdrop.warmup import warm

        def overloads():
            return {{obj: set(obj.overloads) for obj in gc.get_objects()
                    if issubclass(type(obj), Dispatcher)  # (weak proxies among the objects)
                    and (obj.py_func.__module__ or "").startswith("bayesdrop")}}

        warm({warm}, file=open(os.devnull, "w"))
        before = overloads()
        warnings.simplefilter("ignore")
{calls}
        print(sorted(f"{{d.py_func.__module__}}.{{d.py_func.__qualname__}}{{sig}}"
                     for d, sigs in overloads().items() for sig in sigs - before.get(d, set())))
"""


def _kernels_added(warm, calls, **env):
    """Run ``warm(<warm>)`` and then ``calls`` in one fresh process; the specialisations
    of bayesdrop's numba dispatchers that the calls added. A kernel the command did not
    compile is added when the calls first need it (compiled, or loaded from numba's cache
    if another process compiled it), so the list is empty exactly when the command covers
    the calls, whatever the cache already holds. (That the cache written by one process
    serves the next is tested below and in ``test_newton_reuse.py``.)"""
    calls = textwrap.indent(textwrap.dedent(calls), " " * 8)
    return _python(_ADDED.format(warm=warm, calls=calls), **env).strip()


def test_compile_covers_the_fit_and_posterior_of_wide_sparse_data():
    """After ``warm`` of the logistic estimator on sparse input, fitting and sampling a
    wide CSR problem -- Newton-CG, the sampler's dual sweep -- and a tall one -- the
    sampler's primal CG -- at ``C = 1`` and ``C = 0.1`` (the sweep's variants without and
    with the fractional Polya-Gamma tables) adds no specialisation to any of bayesdrop's
    numba dispatchers. On one numba thread: the warm-up then skips the threaded variants
    (``warmup.LARGE_SPARSE``, which these problems' one row chunk would not use anyway)."""
    out = _kernels_added('["DropoutLogisticRegression"], ["sparse"]', """
        import numpy as np, scipy.sparse as sp
        import bayesdrop
        rng = np.random.default_rng(1)
        wide = sp.random(60, 3000, density=0.01, format="csr", random_state=2)
        # more examples than features: the sampler's primal CG
        tall = sp.random(2100, 2050, density=0.002, format="csr", random_state=3)
        for X, draws, tune, chains in ((wide, 10, 5, 2), (tall, 3, 1, 1)):
            y = (np.asarray(X @ rng.normal(size=X.shape[1])).ravel() > 0).astype(int)
            for C in (1.0, 0.1):
                est = bayesdrop.DropoutLogisticRegression(C=C, noise_level=0.3).fit(X, y)
                est.sample_posterior(X, y, draws=draws, tune=tune, chains=chains,
                                     progressbar=False, random_state=0)
    """, NUMBA_NUM_THREADS="1")
    assert out == "[]", out


def test_compile_covers_dense_fits_of_the_size_of_digits():
    """After ``warm`` of the SVC on dense input, fitting 10-class digits-like data
    (1800 x 64, 10 classes: Newton's Python loop with the float32 Hessian, and the IRLS
    start of the hinge loss) adds no specialisation to bayesdrop's numba dispatchers.
    Without the second dense input of the warm-up (:data:`bayesdrop.warmup.LARGE_DENSE`)
    the fit adds ``model._design_kernels.dense_rmatvec_squares`` (checked)."""
    out = _kernels_added('["DropoutSVC"], ["dense"], sample=False', """
        import numpy as np
        import bayesdrop
        rng = np.random.default_rng(1)
        X = rng.random((1800, 64))
        y = np.argmax(X[:, :10] + 0.3 * rng.normal(size=(1800, 10)), axis=1)
        bayesdrop.DropoutSVC(C=0.1, noise_level=0.2).fit(X, y)
    """)
    assert out == "[]", out


_MISSES = """
        misses = hits = 0
        for name, mod in list(sys.modules.items()):
            if not name.startswith("bayesdrop"):
                continue
            for obj in vars(mod).values():
                stats = getattr(obj, "stats", None)
                if hasattr(obj, "py_func") and stats is not None:
                    misses += sum(stats.cache_misses.values())
                    hits += sum(stats.cache_hits.values())
        print(misses, hits)
"""


def test_a_regular_install_keeps_its_compiled_kernels_for_the_next_process(tmp_path):
    """A regular (non-editable) install -- the package's files copied into a directory
    on the path, as pip puts them in ``site-packages`` -- with numba's default cache
    location (no ``NUMBA_CACHE_DIR``): the first process compiles (cache misses), the
    next one loads every kernel the same calls need from the cache (none)."""
    import shutil
    from pathlib import Path

    import bayesdrop

    shutil.copytree(Path(bayesdrop.__file__).parent, tmp_path / "bayesdrop",
                    ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["PYTHONPATH"] = str(tmp_path)
    code = textwrap.dedent("""
        import sys, warnings
        import numpy as np
        import bayesdrop
        assert bayesdrop.__file__.startswith(sys.argv[1]), bayesdrop.__file__
        warnings.simplefilter("ignore")
        rng = np.random.default_rng(0)
        X = rng.normal(size=(300, 8))
        y = (X[:, 0] + rng.normal(size=300) > 0).astype(int)
        for _ in range(2):  # the second fit runs compiled (the first is interpreted)
            bayesdrop.DropoutLogisticRegression(noise_level=0.2).fit(X, y)
    """) + textwrap.dedent(_MISSES)
    counts = []
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                             text=True, env=env, cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        counts.append(tuple(map(int, out.stdout.split())))
    (misses1, _), (misses2, hits2) = counts
    assert misses1 > 0 and misses2 == 0 and hits2 > 0, counts
