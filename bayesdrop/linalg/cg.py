"""Jacobi-preconditioned conjugate gradients (scipy's ``cg``) with an iteration count: the
one loop behind the primal CG back-end (:mod:`bayesdrop.linalg.wls`) and the dual one
(:class:`bayesdrop.linalg.woodbury.DualCG`)."""

from __future__ import annotations

import numpy as np
import scipy.sparse.linalg as spla

__all__ = ["jacobi_cg"]


def jacobi_cg(op, diag, b, x0=None, tol=1e-10, maxiter=None):
    """Solve ``op x = b`` by CG preconditioned with ``diag(1 / diag)`` to the relative
    residual ``tol``.

    Returns
    -------
    x : ndarray
    iterations : int
    converged : bool

    Examples
    --------
    >>> A = np.array([[4.0, 1.0], [1.0, 3.0]])
    >>> x, its, ok = jacobi_cg(A, np.diag(A), np.array([1.0, 2.0]), tol=1e-12)
    >>> bool(np.allclose(A @ x, [1.0, 2.0])), ok
    (True, True)
    """
    n = b.shape[0]
    precond = spla.LinearOperator((n, n), matvec=lambda z: np.ravel(z) / diag,
                                  dtype=np.float64)
    count = [0]

    def callback(_):
        count[0] += 1

    x, status = spla.cg(op, b, x0=x0, rtol=tol, atol=0.0, M=precond,
                        maxiter=10 * n if maxiter is None else maxiter, callback=callback)
    return x, count[0], status == 0
