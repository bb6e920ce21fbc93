"""The one weighted least-squares system shared by every loss (MATH.md section 4).

Given per-example weights ``rho_n >= 0`` and targets ``t_n`` (supplied by a loss from
its augmentation variables)::

    A = 2 I' + sum_n rho_n (xbar_n xbar_n^T + diag(vbar_n))
      = 2 I' + Xbar^T diag(rho) Xbar + diag(V^T rho, 0)
    r = sum_n t_n xbar_n = Xbar^T t

IRLS solves ``A theta = r`` (:func:`solve`); the Gibbs sampler draws
``theta ~ N(A^{-1} r, A^{-1})`` from the same system (:func:`sample`, used by
:mod:`bayesdrop.samplers.gibbs`): with the Cholesky factor ``A = L L^T`` as
``theta = L^{-T} (L^{-1} r + z)``, ``z ~ N(0, I)``; with the other back-ends by
perturb-then-solve, ``theta = A^{-1} (r + eta)`` with ``eta ~ N(0, A)`` built from the
pieces of ``A`` (:func:`perturbation`).

Three linear-algebra back-ends:

``"cholesky"``
    forms the dense ``(D+1) x (D+1)`` matrix (cost ``O(N D^2)`` dense, ``O(nnz D)``
    sparse) and factorises it; for moderate ``D``.
``"cg"``
    matrix-free preconditioned conjugate gradients with
    ``A z = 2 I' z + Xbar^T (rho * (Xbar z)) + (V^T rho) * z`` (cost ``O(nnz)`` per
    iteration) and a Jacobi preconditioner; never forms a ``D x D`` matrix. For a CSR
    design the whole iteration is one compiled call (:func:`_csr_cg_solve`).

``"woodbury"``
    the dual solve for ``D > N`` through the ``N x N`` matrix
    ``S = diag(1/rho) + X K X^T``, ``K = diag(1 / (2 + V^T rho))``: factored exactly up to
    :data:`MAX_WOODBURY_SAMPLES` examples (:class:`bayesdrop.linalg.woodbury.WoodburyFactor`;
    cost ``O(N^2 D + N^3)`` dense, less for sparse ``X``), beyond that solved matrix-free
    by conjugate gradients (:class:`bayesdrop.linalg.woodbury.DualCG`, ``O(nnz)`` per
    iteration).

``"auto"`` picks Cholesky up to :data:`MAX_CHOLESKY_PARAMS` parameters; beyond that the
dual (Woodbury) system when ``N < D`` and the primal conjugate gradients otherwise -- each
the system whose conditioning stays bounded as the weights grow with ``C``: where
``N < D`` the primal matrix keeps ``D - N`` eigenvalues at 2 against the others' growth,
where ``N >= D`` the dual one keeps ``N - D`` of them at ``1 / rho``.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla
from scipy.linalg.lapack import dpotrf as _potrf
from scipy.linalg.lapack import dtrtrs as _trtrs
import scipy.sparse.linalg as spla

from .cg import jacobi_cg
from .woodbury import DualCG, WoodburyFactor, cholesky_factor

__all__ = [
    "MAX_CHOLESKY_PARAMS",
    "LINALG",
    "choose_linalg",
    "normal_matrix",
    "normal_rhs",
    "normal_operator",
    "cholesky_factor",
    "WoodburyFactor",
    "DualCG",
    "solve",
    "perturbation",
    "sample",
]

#: Largest number of parameters for which ``linalg="auto"`` forms ``A`` densely.
MAX_CHOLESKY_PARAMS = 2000

#: Largest number of examples for which the dual (Woodbury) solve factors its ``N x N``
#: matrix (``8 N^2`` bytes: 288 MB at 6000); beyond, conjugate gradients solve it.
MAX_WOODBURY_SAMPLES = 6000

LINALG = ("auto", "cholesky", "woodbury", "cg")


def choose_linalg(design, linalg="auto"):
    """Resolve ``linalg="auto"`` to ``"cholesky"``, ``"woodbury"`` or ``"cg"`` for this
    design (see the module docstring).

    Examples
    --------
    >>> from bayesdrop import Design
    >>> rng = np.random.default_rng(0)
    >>> design = Design(rng.normal(size=(30, 4)), "dropout")
    >>> rho = np.full(30, 0.5)
    >>> from bayesdrop.linalg.wls import choose_linalg
    >>> choose_linalg(design), choose_linalg(design, "cg")
    ('cholesky', 'cg')
    """
    if linalg not in LINALG:
        raise ValueError(f"linalg must be one of {LINALG}, got {linalg!r}")
    if linalg != "auto":
        if linalg not in design.linalg_backends:
            raise ValueError(f"linalg {linalg!r} is not available for this design; "
                             f"use one of {design.linalg_backends}")
        return linalg
    if design.linalg_backends == ("cholesky",):
        return "cholesky"
    if design.n_params <= MAX_CHOLESKY_PARAMS:
        return "cholesky"
    if design.n_samples < design.n_features:
        return "woodbury"
    return "cg"


def _diagonal_part(design, rho):
    """``2 I' + diag(V^T rho, 0)`` as a vector."""
    return 2.0 * design.penalty_mask() + design.noise_diagonal(rho)


def normal_matrix(design, rho, penalty=True, single=False, row_step=1):
    """Dense ``A = 2 I' + Xbar^T diag(rho) Xbar + diag(V^T rho, 0)``.

    With ``penalty=False`` the ``2 I'`` is left out: the rows' share of ``A``, which sums
    over row blocks (:mod:`bayesdrop.linalg.backend`). With ``single=True`` the Gram
    product of a dense design runs in float32 (``Design.gram``; an approximate ``A``),
    with ``row_step = k`` estimated from every ``k``-th row (a starting matrix).

    Parameters
    ----------
    design : Design
    rho : ndarray of shape (n_samples,), non-negative

    Returns
    -------
    ndarray of shape (n_params, n_params)

    Examples
    --------
    >>> from bayesdrop import Design
    >>> rng = np.random.default_rng(0)
    >>> design = Design(rng.normal(size=(30, 4)), "dropout")
    >>> rho = np.full(30, 0.5)
    >>> from bayesdrop.linalg.wls import normal_matrix
    >>> A = normal_matrix(design, rho)
    >>> A.shape, bool(np.allclose(A, A.T)), float(A[-1, -1])  # intercept: sum(rho), unpenalised
    ((5, 5), True, 15.0)
    """
    A = design.gram(rho, single=single, row_step=row_step)
    if penalty:
        A[np.diag_indices_from(A)] += 2.0 * design.penalty_mask()
    return design.add_noise_term(A, rho)


def normal_rhs(design, t):
    """``r = Xbar^T t``.

    Examples
    --------
    >>> from bayesdrop import Design
    >>> rng = np.random.default_rng(0)
    >>> design = Design(rng.normal(size=(30, 4)), "dropout")
    >>> rho = np.full(30, 0.5)
    >>> from bayesdrop.linalg.wls import normal_rhs
    >>> float(normal_rhs(design, np.ones(30))[-1])
    30.0
    """
    return design.rmatvec(t)


def normal_operator(design, rho):
    """Matrix-free ``A`` as a :class:`scipy.sparse.linalg.LinearOperator`, and its diagonal.

    Examples
    --------
    >>> from bayesdrop import Design
    >>> rng = np.random.default_rng(0)
    >>> design = Design(rng.normal(size=(30, 4)), "dropout")
    >>> rho = np.full(30, 0.5)
    >>> from bayesdrop.linalg.wls import normal_matrix, normal_operator
    >>> op, diag = normal_operator(design, rho)
    >>> z = np.arange(5.0)
    >>> bool(np.allclose(op @ z, normal_matrix(design, rho) @ z))
    True
    """
    diag_part = _diagonal_part(design, rho)

    def matvec(z):
        z = np.ravel(z)
        return design.rmatvec(rho * design.matvec(z)) + diag_part * z

    p = design.n_params
    op = spla.LinearOperator((p, p), matvec=matvec, rmatvec=matvec, dtype=np.float64)
    return op, diag_part + design.gram_diagonal(rho)


def _cg_solve(design, rho, r, x0, cg_tol, cg_maxiter):
    """Preconditioned CG on ``A theta = r``: compiled for a CSR design
    (:func:`_csr_cg_solve`), scipy's ``cg`` with a matrix-free operator otherwise."""
    out = _csr_cg_solve(design, rho, r, x0, cg_tol, cg_maxiter)
    if out is not None:
        return out
    op, diag = normal_operator(design, rho)
    theta, iterations, converged = jacobi_cg(op, diag, r, x0, cg_tol, cg_maxiter)
    return theta, {"linalg": "cg", "cg_iterations": iterations, "cg_converged": converged}


def _own_products(design):
    """Whether ``design`` uses :class:`Design`'s own products and diagonal noise term
    (a subclass may redefine them: the latent designs, a user's row back-end)."""
    from ..model.design import Design

    cls = type(design)
    return all(getattr(cls, name) is getattr(Design, name)
               for name in ("matvec", "rmatvec", "noise_diagonal", "add_noise_term"))


def _csr_cg_solve(design, rho, r, x0, cg_tol, cg_maxiter):
    """Jacobi-preconditioned CG on ``A theta = r`` for a CSR design, compiled
    (:func:`bayesdrop.linalg.kernels.csr_pcg_blocks`: blocks of products, Ctrl-C acting
    between them), or None where it does not apply (another design, kernels running
    interpreted).

    ``A z = 2 I' z + (V^T rho) z + Xbar^T (rho * (Xbar z))``: the products of
    :func:`bayesdrop.linalg.kernels.csr_hvp` on the weighted normal system
    (``d_mm = rho``, no ``G``: ``d_ms = d_ss = None``), reading ``X``'s stored entries
    alone, with the base ``2 + V^T rho`` (the noise enters through the diagonal only, so
    any diagonal noise model) and the preconditioner ``diag(A)`` of
    :func:`~bayesdrop.linalg.kernels.csr_normal_diagonal` -- nothing per call but that
    one pass. From ``x0`` the solve is ``A delta = r - A x0`` with the relative residual
    ``cg_tol ||r|| / ||r - A x0||``: the criterion of scipy's ``cg`` from ``x0``. The row
    chunks run on numba's threads where :func:`bayesdrop._threads.numba_threads` allows:
    the same sums either way, so the same draws with any thread count.
    """
    from .. import _jit

    X = design.X
    if (not design.sparse or X.format != "csr" or _jit.interpreting()
            or not _own_products(design)):
        return None
    from .._threads import numba_threads
    from ..model.design import unsigned_indices
    from . import kernels

    D, n_p, n = design.n_features, design.n_params, design.n_samples
    rho = np.ascontiguousarray(rho, dtype=np.float64)
    # the compiled loops index these without bounds checks: their shapes first
    for name, value, shape in (("rho", rho, (n,)), ("r", r, (n_p,)),
                               ("x0", x0, (n_p,))):
        if value is not None and np.shape(value) != shape:
            raise ValueError(f"{name} has shape {np.shape(value)}, expected {shape}")
    indptr, indices = X.indptr, unsigned_indices(X.indices)
    data = np.ascontiguousarray(X.data, dtype=np.float64)
    fi = design.fit_intercept
    base = 2.0 + np.ascontiguousarray(design.noise_diagonal(rho)[:D], dtype=np.float64)
    diag = kernels.csr_normal_diagonal(indptr, indices, data, fi, rho, base, np.empty(n_p))
    chunks = kernels.row_chunks(indptr)
    threads = kernels.threads_arg(chunks, numba_threads())

    def apply(z):
        return kernels.csr_hvp(indptr, indices, data, fi, rho, None, None, base, z,
                               np.empty(n_p), chunks, np.empty((chunks.size - 2, D)),
                               threads)

    maxiter = 10 * n_p if cg_maxiter is None else int(cg_maxiter)
    r = np.ascontiguousarray(r, dtype=np.float64)
    start = np.zeros(n_p) if x0 is None else np.array(x0, dtype=np.float64)
    residual = r - apply(start) if start.any() else r
    target = cg_tol * np.linalg.norm(r)
    size = np.linalg.norm(residual)
    if size <= target:
        return start, {"linalg": "cg", "cg_iterations": 0, "cg_converged": True}
    step, iterations = kernels.csr_pcg_blocks(indptr, indices, data, fi, rho, None, None,
                                              base, 1.0 / diag, -residual,
                                              float(target / size), maxiter, chunks, threads)
    theta = start + step
    converged = iterations < maxiter  # CG stopped at the tolerance (or at dHd <= 0)
    if not converged:  # the last product may have reached it: the true residual says
        converged = np.linalg.norm(r - apply(theta)) <= target
    return theta, {"linalg": "cg", "cg_iterations": int(iterations),
                   "cg_converged": bool(converged)}


def solve(design, rho, t, *, linalg="auto", x0=None, cg_tol=1e-10, cg_maxiter=None):
    """Solve ``A theta = r`` for the weights ``rho`` and targets ``t``.

    Parameters
    ----------
    design : Design
    rho : ndarray of shape (n_samples,)
        Per-example weights (non-negative).
    t : ndarray of shape (n_samples,)
        Per-example targets.
    linalg : {"auto", "cholesky", "woodbury", "cg"}
    x0 : ndarray of shape (n_params,), optional
        Warm start for conjugate gradients.
    cg_tol : float
        Relative residual tolerance of conjugate gradients.
    cg_maxiter : int, optional
        Default ``10 * n_params``.

    Returns
    -------
    theta : ndarray of shape (n_params,)
    info : dict
        ``linalg`` and, for CG, ``cg_iterations`` and ``cg_converged``.

    Examples
    --------
    >>> from bayesdrop import Design
    >>> from bayesdrop.linalg.wls import normal_matrix, normal_rhs, solve
    >>> rng = np.random.default_rng(0)
    >>> design = Design(rng.normal(size=(30, 4)), "dropout")
    >>> rho, t = np.full(30, 0.5), rng.normal(size=30)
    >>> theta, _ = solve(design, rho, t)
    >>> A = normal_matrix(design, rho)
    >>> bool(np.allclose(A @ theta, normal_rhs(design, t)))
    True
    """
    linalg = choose_linalg(design, linalg)
    r = normal_rhs(design, t)
    if linalg == "cholesky":
        L = cholesky_factor(normal_matrix(design, rho))
        theta = sla.cho_solve((L, True), r, check_finite=False)
        return theta, {"linalg": "cholesky"}
    if linalg == "woodbury":
        return _dual_solve(design, rho, r, cg_tol, cg_maxiter)
    return _cg_solve(design, rho, r, x0, cg_tol, cg_maxiter)


def _dual_solve(design, rho, r, cg_tol, cg_maxiter):
    """``A^{-1} r`` by the dual system: the exact factor up to
    :data:`MAX_WOODBURY_SAMPLES` examples, conjugate gradients beyond."""
    if design.n_samples <= MAX_WOODBURY_SAMPLES:
        return WoodburyFactor(design, rho).solve(r), {"linalg": "woodbury"}
    dual = DualCG(design, rho, cg_tol, cg_maxiter)
    theta = dual.solve(r)
    return theta, {"linalg": "woodbury", "cg_iterations": dual.iterations,
                   "cg_converged": dual.converged}


def perturbation(design, rho, rng):
    """Draw ``eta ~ N(0, A)`` without forming ``A``.

    ``eta = sqrt(2) I' z1 + Xbar^T (sqrt(rho) * z2) + sqrt(V^T rho) * z3`` with independent
    standard normal ``z1, z2, z3`` (``z3`` is skipped at zero noise); its covariance is
    ``2 I' + Xbar^T diag(rho) Xbar + diag(V^T rho) = A``. Cost ``O(nnz)``.

    Parameters
    ----------
    design : Design
    rho : ndarray of shape (n_samples,), non-negative
    rng : numpy.random.Generator

    Returns
    -------
    ndarray of shape (n_params,)

    Examples
    --------
    >>> from bayesdrop import Design
    >>> rng = np.random.default_rng(0)
    >>> design = Design(rng.normal(size=(30, 4)), "dropout")
    >>> rho = np.full(30, 0.5)
    >>> from bayesdrop.linalg.wls import perturbation
    >>> perturbation(design, rho, np.random.default_rng(1)).shape
    (5,)
    """
    eta = np.sqrt(2.0) * design.penalty_mask() * rng.standard_normal(design.n_params)
    eta += design.rmatvec(np.sqrt(rho) * rng.standard_normal(design.n_samples))
    if not design.variance.is_zero:
        eta += np.sqrt(design.noise_diagonal(rho)) * rng.standard_normal(design.n_params)
    return eta


def sample(design, rho, t, rng, *, linalg="auto", x0=None, cg_tol=1e-12, cg_maxiter=None,
           theta=None, overrelax=0.0):
    """Draw ``theta ~ N(A^{-1} r, A^{-1})`` from the shared system (the Gibbs step).

    ``"cholesky"``: ``A = L L^T`` and ``theta = L^{-T} (L^{-1} r + z)``, ``z ~ N(0, I)``.
    ``"woodbury"`` and ``"cg"``: perturb-then-solve, ``theta = A^{-1} (r + eta)`` with
    ``eta ~ N(0, A)`` from :func:`perturbation`; then ``E theta = A^{-1} r`` and
    ``Cov theta = A^{-1} A A^{-1} = A^{-1}``. The Woodbury solve is exact; conjugate
    gradients are run to the relative residual ``cg_tol`` (warm-started at ``x0``).

    Over-relaxation (Adler 1981): with the current value ``theta`` and ``-1 < alpha < 1``
    the draw is ``alpha theta + (1 - alpha) mu + sqrt(1 - alpha^2) xi`` with
    ``mu = A^{-1} r`` and ``xi ~ N(0, A^{-1})``, i.e. one solve of
    ``A^{-1} ((1 - alpha) r + sqrt(1 - alpha^2) eta)``. It leaves ``N(mu, A^{-1})``
    invariant (and is reversible with respect to it) for every ``alpha``; ``alpha = 0``
    is the plain draw, negative ``alpha`` suppresses the random-walk behaviour of the
    augmented Gibbs sampler.

    Parameters
    ----------
    design : Design
    rho, t : ndarray of shape (n_samples,)
        Weights (drawn augmentation variables through ``loss.system_weights``) and targets.
    rng : numpy.random.Generator
    linalg : {"auto", "cholesky", "woodbury", "cg"}
    x0 : ndarray, optional
        A guess of the draw (e.g. the current value) to warm-start conjugate gradients;
        with over-relaxation the solve's unknown is ``draw - alpha theta``, which starts
        at ``x0 - alpha theta``.
    cg_tol : float
    cg_maxiter : int, optional
    theta : ndarray of shape (n_params,), optional
        Current value, needed when ``overrelax != 0``.
    overrelax : float in (-1, 1), default=0.0

    Returns
    -------
    theta : ndarray of shape (n_params,)
    info : dict

    Examples
    --------
    >>> from bayesdrop import Design
    >>> from bayesdrop.linalg.wls import sample
    >>> rng = np.random.default_rng(0)
    >>> design = Design(rng.normal(size=(30, 4)), "dropout")
    >>> theta, _ = sample(design, np.full(30, 0.5), rng.normal(size=30), rng)
    >>> theta.shape
    (5,)
    """
    linalg = choose_linalg(design, linalg)
    r = normal_rhs(design, t)
    alpha = float(overrelax)
    if alpha != 0.0:
        if theta is None:
            raise ValueError("overrelax != 0 needs the current theta")
        r *= 1.0 - alpha
        scale = np.sqrt(1.0 - alpha * alpha)
        if x0 is not None:  # a guess of the draw; the solve's unknown is draw - alpha theta
            x0 = x0 - alpha * theta
    else:
        scale = 1.0
    new = _draw(design, rho, r, rng, linalg, x0, cg_tol, cg_maxiter, scale)
    if alpha != 0.0:
        new = (new[0] + alpha * theta, new[1])
    return new


def _draw(design, rho, r, rng, linalg, x0, cg_tol, cg_maxiter, scale):
    """``A^{-1} (r + scale * eta)``, ``eta ~ N(0, A)``."""
    if linalg == "cholesky":
        # LAPACK directly: the scipy wrappers' checks cost more than the work at small D
        A = normal_matrix(design, rho)
        L, status = _potrf(A.T, lower=True, overwrite_a=True, clean=False)  # A.T: F-order view
        if status != 0:
            L = cholesky_factor(A)  # raises the explanatory error
        v, _ = _trtrs(L, r, lower=True)
        v += scale * rng.standard_normal(design.n_params)
        theta, _ = _trtrs(L, v, lower=True, trans=1)
        return theta, {"linalg": "cholesky"}
    r = r + scale * perturbation(design, rho, rng)
    if linalg == "woodbury":
        return _dual_solve(design, rho, r, cg_tol, cg_maxiter)
    return _cg_solve(design, rho, r, x0, cg_tol, cg_maxiter)
