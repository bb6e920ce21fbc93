"""The dual (Woodbury) solve of the weighted system for ``D > N``, and the Cholesky factor.

See :class:`WoodburyFactor` (an exact ``N x N`` factor) and :class:`DualCG` (the same
dual system, matrix-free, for many examples); :func:`cholesky_factor` is the checked
dense factorisation both back-ends use.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla
import scipy.sparse.linalg as spla

from .cg import jacobi_cg

__all__ = ["DualCG", "WoodburyFactor", "cholesky_factor"]


def cholesky_factor(A):
    """Lower Cholesky factor of the symmetric positive definite ``A``.

    Raises
    ------
    numpy.linalg.LinAlgError
        With a message explaining that ``A`` is not positive definite.

    Examples
    --------
    >>> from bayesdrop.linalg.wls import cholesky_factor
    >>> A = np.array([[4.0, 2.0], [2.0, 3.0]])
    >>> L = cholesky_factor(A)
    >>> bool(np.allclose(L @ L.T, A)), float(L[0, 1])
    (True, 0.0)
    """
    try:
        return sla.cholesky(A, lower=True, check_finite=False)
    except np.linalg.LinAlgError as exc:  # pragma: no cover - rho > 0 makes A SPD
        raise np.linalg.LinAlgError(
            "the weighted normal matrix A is not positive definite; check for NaN weights "
            "or an intercept with all weights zero"
        ) from exc


class _DualSystem:
    """``A^{-1} r`` from solves of the dual system (see :class:`WoodburyFactor`); a
    subclass sets ``design``, ``k`` (the diagonal of ``K``) and ``_solve_dual(v) =
    S^{-1} v``, then calls :meth:`_intercept`."""

    def _intercept(self):
        if self.design.fit_intercept:
            self.s1 = self._solve_dual(np.ones(self.design.n_samples))
            self.schur = float(np.sum(self.s1))

    def solve(self, r):
        """``A^{-1} r``."""
        design = self.design
        r_w = r[: design.n_features]
        v = np.asarray(design.X @ (self.k * r_w)).ravel()
        mu = self._solve_dual(v)
        if design.fit_intercept:
            b = (r[-1] - np.sum(mu)) / self.schur
            mu = mu + b * self.s1
        w = self.k * (r_w - np.asarray(design.X.T @ mu).ravel())
        return np.append(w, b) if design.fit_intercept else w


class WoodburyFactor(_DualSystem):
    """Exact solve of ``A theta = r`` through the ``N x N`` dual system (``"woodbury"``).

    With ``K = diag(1 / (2 + V^T rho))`` (the inverse diagonal of the weight block), the
    normal equations are equivalent to the dual system in ``mu = rho * (X w + b)``::

        S mu - b 1 = X K r_w,    1^T mu = r_b,    S = diag(1/rho) + X K X^T,
        w = K (r_w - X^T mu)

    ``S`` is symmetric positive definite and involves no subtraction, so huge weights
    (points on the margin) stay accurate; the intercept follows from the positive Schur
    complement ``1^T S^{-1} 1``. Without intercept this is the Woodbury identity
    ``A^{-1} = K - K X^T S^{-1} X K``.

    Parameters
    ----------
    design : Design
    rho : ndarray of shape (n_samples,), positive

    Examples
    --------
    >>> from bayesdrop import Design
    >>> from bayesdrop.linalg.wls import normal_matrix
    >>> rng = np.random.default_rng(0)
    >>> design = Design(rng.normal(size=(5, 40)), "dropout")  # D > N
    >>> rho, r = np.full(5, 0.7), rng.normal(size=41)
    >>> theta = WoodburyFactor(design, rho).solve(r)
    >>> bool(np.allclose(normal_matrix(design, rho) @ theta, r))
    True
    """

    def __init__(self, design, rho):
        self.design = design
        X = design.X
        self.k = 1.0 / (2.0 + design.variance.weighted_column_sums(rho))
        if design.variance.is_zero:  # K = I/2: reuse the cached X X^T
            S = 0.5 * design.row_gram()
        elif design.sparse:
            S = (X.multiply(self.k[None, :]).tocsr() @ X.T).toarray()
        else:
            S = (X * self.k) @ X.T
        S[np.diag_indices_from(S)] += 1.0 / np.maximum(rho, 1e-300)
        self.L = cholesky_factor(S)
        self._intercept()

    def _solve_dual(self, v):
        return sla.cho_solve((self.L, True), v, check_finite=False)


class DualCG(_DualSystem):
    """The dual system of :class:`WoodburyFactor` solved matrix-free by conjugate gradients.

    ``S = diag(1/rho) + X K X^T`` is applied as ``v / rho + X (K (X^T v))`` (two passes over
    ``X``) and preconditioned by its diagonal ``1/rho_n + sum_d x_nd^2 K_d``; ``S^{-1} 1``
    (the intercept's Schur complement) is solved once per weights. Neither an ``N x N``
    nor a ``D x D`` matrix is formed. For ``D > N`` this is the system whose conditioning
    stays bounded as the weights grow (with ``C``): ``X K X^T`` has full rank ``N``, while
    the primal matrix ``2 I' + Xbar^T diag(rho) Xbar`` has ``D - N`` eigenvalues left at 2
    against the others' growth.

    Parameters
    ----------
    design : Design
    rho : ndarray of shape (n_samples,), positive
    tol : float
        Relative residual of each dual solve.
    maxiter : int, optional
        Default ``10 N``.

    Attributes
    ----------
    iterations : int
        Conjugate-gradient iterations of all solves so far.
    converged : bool
        Whether every solve reached ``tol``.

    Examples
    --------
    The exact factor's solution, without forming ``S``:

    >>> from bayesdrop import Design
    >>> rng = np.random.default_rng(1)
    >>> design = Design(rng.normal(size=(8, 50)), "none")
    >>> rho, r = rng.uniform(0.1, 2.0, 8), rng.normal(size=51)
    >>> dual = DualCG(design, rho, tol=1e-12)
    >>> exact = WoodburyFactor(design, rho).solve(r)
    >>> bool(np.allclose(dual.solve(r), exact)), dual.converged
    (True, True)
    """

    def __init__(self, design, rho, tol=1e-10, maxiter=None):
        self.design = design
        X = design.X
        n = design.n_samples
        self.k = 1.0 / (2.0 + design.variance.weighted_column_sums(rho))
        inv_rho = 1.0 / np.maximum(rho, 1e-300)
        if design.sparse:
            diag = inv_rho + np.asarray(X.multiply(X) @ self.k).ravel()
        else:
            diag = inv_rho + np.einsum("nd,nd,d->n", X, X, self.k)
        k = self.k

        def matvec(v):
            v = np.ravel(v)
            return inv_rho * v + np.asarray(X @ (k * np.asarray(X.T @ v).ravel())).ravel()

        self._op = spla.LinearOperator((n, n), matvec=matvec, dtype=float)
        self._diag = diag
        self.tol = float(tol)
        self.maxiter = 10 * n if maxiter is None else int(maxiter)
        self.iterations = 0
        self.converged = True
        self._intercept()

    def _solve_dual(self, v):
        x, iterations, converged = jacobi_cg(self._op, self._diag, v, tol=self.tol,
                                             maxiter=self.maxiter)
        self.iterations += iterations
        self.converged = self.converged and converged
        return x
