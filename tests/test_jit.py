"""numba loaded when first needed (:mod:`bayesdrop._jit`): ``import bayesdrop`` and the
first small dense fit of a process run without it, with the compiled fit's result."""

import subprocess
import sys
import textwrap

import numba

from bayesdrop import _jit


def _run(code):
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_import_and_the_first_small_fit_run_without_numba_and_match_the_compiled_fit():
    """In a new process ``import bayesdrop``, then the first fit and prediction of each
    linear estimator on breast cancer (dense, ``q > 0``), leave numba unimported -- the
    first fit runs its kernels interpreted; the next fit imports numba and runs compiled,
    and every fit of the first round equals its compiled twin to rounding."""
    out = _run("""
        import sys, warnings
        import numpy as np
        from sklearn.datasets import load_breast_cancer
        import bayesdrop
        assert "numba" not in sys.modules, "import"
        X, y = load_breast_cancer(return_X_y=True)
        X = (X - X.mean(0)) / X.std(0)
        makers = [lambda: bayesdrop.DropoutLogisticRegression(noise_level=0.2),
                  lambda: bayesdrop.DropoutSVC(noise_level=0.3),
                  lambda: bayesdrop.DropoutSVR(noise_level=0.3)]
        targets = [y, y, X[:, 0] + 0.5 * X[:, 1]]
        first = makers[0]().fit(X, y)
        first.predict(X)
        print("numba after the first fit:", "numba" in sys.modules)
        second = makers[0]().fit(X, y)
        print("numba after the second fit:", "numba" in sys.modules)
        print(np.abs(second.coef_ - first.coef_).max() / np.abs(second.coef_).max())
        print(first.n_iter_[0], second.n_iter_[0])
    """)
    lines = out.splitlines()
    assert lines[0] == "numba after the first fit: False"
    assert lines[1] == "numba after the second fit: True"
    assert float(lines[2]) <= 1e-10
    assert lines[3].split()[0] == lines[3].split()[1]  # the same Newton steps


def test_the_first_fit_of_svc_and_svr_runs_interpreted_with_the_compiled_result():
    """The hinge and epsilon-insensitive losses' first fits (their IRLS start and Newton
    steps interpreted) against the same fits compiled in the same process."""
    out = _run("""
        import sys
        import numpy as np
        from sklearn.datasets import load_breast_cancer, load_diabetes
        import bayesdrop
        X, y = load_breast_cancer(return_X_y=True)
        X = (X - X.mean(0)) / X.std(0)
        Xr, yr = load_diabetes(return_X_y=True)
        yr = (yr - yr.mean()) / yr.std()
        for make, (A, b) in ((lambda: bayesdrop.DropoutSVC(noise_level=0.3), (X, y)),
                             (lambda: bayesdrop.DropoutSVR(noise_level=0.3), (Xr, yr))):
            first = make().fit(A, b)
            loaded = "numba" in sys.modules
            second = make().fit(A, b)
            rel = np.abs(second.coef_ - first.coef_).max() / np.abs(second.coef_).max()
            print(loaded, rel)
    """)
    (svc_loaded, svc_rel), (svr_loaded, svr_rel) = (line.split() for line in out.splitlines())
    assert svc_loaded == "False"  # the SVC's fit was the process's first
    assert svr_loaded == "True"  # the SVR's came after numba was loaded: compiled
    assert float(svc_rel) <= 1e-10 and float(svr_rel) <= 1e-12


def test_large_or_sparse_first_fits_load_numba():
    """Only a small dense design is fitted interpreted: a first fit of 2500 x 20 (more
    than ``newton.INTERPRET_MAX_ENTRIES`` entries) or of a CSR design loads numba."""
    out = _run("""
        import sys
        import numpy as np, scipy.sparse as sp
        import bayesdrop
        rng = np.random.default_rng(0)
        X = rng.normal(size=(2500, 20))
        bayesdrop.DropoutLogisticRegression(noise_level=0.2).fit(X, X[:, 0] > 0)
        print("numba" in sys.modules)
    """) + _run("""
        import sys
        import numpy as np, scipy.sparse as sp
        import bayesdrop
        X = sp.random(200, 30, density=0.3, format="csr", random_state=0)
        y = np.asarray(X[:, 0].todense()).ravel() > 0
        bayesdrop.DropoutLogisticRegression(noise_level=0.2).fit(X, y)
        print("numba" in sys.modules)
    """)
    assert out.split() == ["True", "True"]


def test_loaded_kernels_are_numba_dispatchers_in_every_namespace():
    """Once numba is loaded, the modules hold numba dispatchers in place of the declared
    kernels (compiled callers and the on-disk cache see plain ``numba.njit``), the loss
    registry returns dispatchers, and a kernel declared afterwards is one at once."""
    from bayesdrop.model.losses import hinge, kernels
    from bayesdrop.model.losses.hinge import HingeParams

    _jit.load()
    dispatcher = numba.core.registry.CPUDispatcher
    assert isinstance(hinge.hinge_term, dispatcher)
    assert isinstance(hinge.root_terms, dispatcher)  # imported from kernels by name
    assert isinstance(kernels.kernels_of(HingeParams).term, dispatcher)

    @_jit.njit(cache=False)
    def twice(x):
        return 2.0 * x

    assert isinstance(twice, dispatcher) and twice(1.5) == 3.0


def test_a_kernel_runs_its_python_function_only_while_interpreted_and_unloaded():
    """:class:`bayesdrop._jit.Kernel` before :func:`~bayesdrop._jit.load`: its Python
    function under :func:`~bayesdrop._jit.interpreted` (numba not imported), numba's
    dispatcher otherwise (numba imported then); after that, interpreted blocks run the
    dispatcher too."""
    out = _run("""
        import sys
        import numpy as np
        from bayesdrop import _jit

        def twice(x):
            return x * 2.0  # interpreted: numpy's float32; compiled: a Python float

        kernel = _jit.njit(cache=False)(twice)
        x = np.float32(1.5)
        with _jit.interpreted():
            a = kernel(x)
        print(type(a).__name__, "numba" in sys.modules)
        b = kernel(x)  # loads numba
        print(type(b).__name__, "numba" in sys.modules, type(_jit.resolve(kernel)).__name__)
        with _jit.interpreted():  # numba loaded: compiled
            c = kernel(x)
        print(type(c).__name__, a == b == c == 3.0)
    """)
    assert out.splitlines() == ["float32 False", "float True CPUDispatcher", "float True"]


def test_a_kernel_pickles_by_reference_before_numba_is_loaded():
    """A declared kernel pickles by name (as a module-level function does): another
    process, or this one, finds it under that name."""
    out = _run("""
        import pickle, sys
        from bayesdrop.model.losses import hinge
        data = pickle.dumps(hinge.hinge_term)
        back = pickle.loads(data)
        print(back is hinge.hinge_term, "numba" in sys.modules, len(data) < 200)
    """)
    assert out.split() == ["True", "False", "True"]


def test_a_users_compiled_function_may_call_a_kernel_before_numba_is_loaded():
    """A user's own ``numba.njit`` function that calls one of bayesdrop's kernels (held in
    the user's namespace as declared, numba not yet loaded by bayesdrop) compiles: numba
    asks the kernel for its type, which loads bayesdrop's dispatchers."""
    out = _run("""
        import numba
        from bayesdrop import _jit
        from bayesdrop.model.losses.kernels import root_terms

        @numba.njit(cache=False)
        def excess(a, s):
            return root_terms(a, s, 1.0)[0]

        print(_jit.loaded(), excess(0.3, 0.2), root_terms.py_func(0.3, 0.2, 1.0)[0])
    """)
    loaded, compiled, interpreted = out.split()
    assert loaded == "False" and float(compiled) == float(interpreted)


def test_a_kernel_found_ready_in_the_disk_cache_can_be_called_from_new_compiled_code():
    """``newton.compiled.ready`` loads a cached kernel's machine code as numba's own first
    call would, registering it for compiled callers too: a kernel that ``compiled="auto"``
    found in numba's on-disk cache (``hessian_workspace``, which ``bare_newton``'s steps
    look up and ``dense_steps`` calls) is then callable from a function compiled after
    it -- without the registration numba failed with "No definition for lowering"."""
    code = """
        from bayesdrop.solvers.newton.compiled import hessian_workspace
        hessian_workspace(5, 3, (0, 0))  # compiled, or loaded, and in the cache
    """
    _run(code)
    out = _run("""
        from numba import njit
        from bayesdrop.solvers.newton.compiled import hessian_workspace, ready
        assert ready(hessian_workspace, 5, 3, (0, 0))

        @njit
        def caller(n, p, sgram):
            return hessian_workspace(n, p, sgram)[0].shape[0]

        print(caller(5, 3, (0, 0)))
    """)
    assert out.strip().splitlines()[-1] == "10"
