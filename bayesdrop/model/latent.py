"""One-hidden-layer (latent) dropout models (MATH.md section 6; paper sections 4.2, 5.2).

Hidden features ``g_nk = sigmoid(alpha_k . x_n + c_k)``, ``k = 1..K`` (``alpha`` of shape
(D, K), hidden biases ``c`` uncorrupted and unpenalised). A first-order Taylor expansion
around the clean input gives the corrupted hidden features mean ``g(x_n)`` and the **full**
``K x K`` covariance ``S_n = Jac_n^T diag(v_n) Jac_n`` with
``Jac_n[d, k] = g_nk (1 - g_nk) alpha_dk``. The output layer is the linear model of
:mod:`bayesdrop.model.losses` on the hidden features, with score variance::

    s_n = w^T S_n w = sum_d v_nd u_nd^2,    u_nd = sum_k alpha_dk g'_nk w_k

and the collapsed objective is::

    J(w, b, alpha) = ||w||^2 + alpha_penalty ||alpha||_F^2 + sum_n term(m_n, s_n, y_n),
    m_n = w . g(x_n) + b.

:class:`LatentDesign` is a :class:`bayesdrop.model.design.Design` over the hidden features whose
noise term is ``sum_n rho_n S_n`` instead of a diagonal, so the ``w``-step is the shared
weighted least-squares core unchanged (IRLS solves, Gibbs samples). The ``alpha``-step is
L-BFGS on ``J`` with the analytic gradient of :func:`latent_objective`; the alternation
itself is :func:`bayesdrop.solvers.alternating.fit_latent`.

Only the nonzero noise variances enter (``nnz`` of them, the nonzeros of ``X`` for
dropout), in chunks: every product costs ``O(nnz K)`` and ``sum_n rho_n S_n`` costs
``O(nnz K^2)``.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.special import expit

from .. import _jit
from .losses.kernels import has_kernels
from ._latent_compiled import LatentWork, latent_value_grad
from .design import Design
from .noise import FeatureVariance

__all__ = ["LatentDesign", "latent_gradients", "latent_objective", "noise_entries"]

#: entries per chunk in the ``O(nnz K)`` products (bounds temporary memory)
_CHUNK = 200_000


def noise_entries(X, noise):
    """Nonzero noise variances of ``X`` as COO triplets ``(rows, cols, v, V)``.

    ``V`` is the dense ``N x D`` variance matrix for dense ``X`` (the products then run as
    BLAS matrix products) and None for sparse ``X`` (they run over the triplets). Additive
    noise on sparse ``X`` (every entry noisy: dense variances) is a ``ValueError``.

    Parameters
    ----------
    X : ndarray or sparse matrix of shape (n_samples, n_features)
    noise : NoiseModel

    Returns
    -------
    rows, cols : ndarray of int
    v : ndarray of float
    V : ndarray of shape (n_samples, n_features) or None

    Examples
    --------
    >>> from bayesdrop import Dropout
    >>> rows, cols, v, V = noise_entries(np.array([[1.0, 0.0], [2.0, 3.0]]), Dropout(0.5))
    >>> rows.tolist(), cols.tolist(), v.tolist()
    ([0, 1, 1], [0, 0, 1], [1.0, 4.0, 9.0])
    """
    fv = noise.variance(X)
    n, d = X.shape
    if fv.is_zero:
        return np.zeros(0, int), np.zeros(0, int), np.zeros(0), None
    if not sp.issparse(X):
        V = np.full((n, d), fv.scale) if fv.is_constant else fv.scale * np.asarray(fv.matrix)
        rows, cols = np.nonzero(V)
        return rows, cols, V[rows, cols], V
    if fv.is_constant:
        raise ValueError(
            f"noise={noise.name!r} corrupts every entry of X, its zeros too: on a sparse X "
            f"its variances form a dense {n} x {d} matrix, which the latent models do not "
            "build from sparse data; pass X dense (X.toarray()) or use a noise that keeps "
            "zeros (dropout, multiplicative, poisson)")
    M = fv.matrix.tocoo()
    keep = M.data != 0
    return M.row[keep], M.col[keep], fv.scale * M.data[keep], None


class LatentDesign(Design):
    """The output layer's design: hidden features ``g(x_n)`` and covariances ``S_n``.

    Parameters
    ----------
    X : ndarray or sparse matrix of shape (n_samples, n_features)
    entries : tuple ``(rows, cols, v, V)``
        From :func:`noise_entries`.
    alpha : ndarray of shape (n_features + 1, n_hidden)
        Hidden weights; the last row holds the hidden biases.
    fit_intercept : bool

    Examples
    --------
    >>> from bayesdrop import Dropout
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(10, 3)); alpha = rng.normal(size=(4, 4))  # K = 4 units (+ bias)
    >>> design = LatentDesign(X, noise_entries(X, Dropout(0.2)), alpha)
    >>> design.n_features, design.n_params, design.X.shape
    (4, 5, (10, 4))
    """

    linalg_backends = ("cholesky",)
    diagonal_noise = False

    def __init__(self, X, entries, alpha, fit_intercept=True):
        self.X_in = X
        self.rows, self.cols, self.v, self.V = entries
        self.alpha = np.asarray(alpha, dtype=float)
        pre = np.asarray(X @ self.alpha[:-1]) + self.alpha[-1]
        G = expit(pre)
        self.G = G
        self.Gp = G * (1.0 - G)
        n, k = G.shape
        super().__init__(G, "none", fit_intercept)
        if self.v.size:  # a stand-in whose only use here is ``is_zero``
            self.variance = FeatureVariance(None, 1.0, (n, k))

    def _chunks(self):
        return _chunks(self.rows.shape[0])

    def u_dense(self, w):
        """``u_nd = sum_k alpha_dk g'_nk w_k`` for every ``(n, d)`` (dense ``X``)."""
        return (self.Gp * w) @ self.alpha[:-1].T

    def u_entries(self, w, sl):
        """``u_nd`` at the noise entries ``sl`` of the COO triplets (sparse ``X``)."""
        r, c = self.rows[sl], self.cols[sl]
        return np.einsum("jk,jk->j", self.Gp[r] * w, self.alpha[:-1][c])

    def score_variances(self, w):
        """``s_n = w^T S_n w``."""
        s = np.zeros(self.n_samples)
        if not self.v.size:
            return s
        if self.V is not None:
            U = self.u_dense(w)
            return np.einsum("nd,nd->n", self.V, U * U)
        for sl in self._chunks():
            r = self.rows[sl]
            u = self.u_entries(w, sl)
            s += np.bincount(r, weights=self.v[sl] * u * u, minlength=self.n_samples)
        return s

    def scores(self, theta):
        w, _ = self.split(theta)
        return self.matvec(theta), self.score_variances(w)

    def noise_matrix(self, rho):
        """``sum_n rho_n S_n`` (``K x K``).

        ``M_kl = sum_n g'_nk g'_nl [(rho v)_n . (alpha_k * alpha_l)]``: one product of the
        ``N x D`` weighted variances with the ``D x K(K+1)/2`` column products of
        ``alpha`` for ``k <= l`` (BLAS, or sparse times dense), then a compiled
        ``O(N K^2)`` contraction with the ``g'_nk g'_nl``; the lower triangle mirrored.
        """
        k = self.n_features
        aw = self.alpha[:-1]
        iu, ju = np.triu_indices(k)
        pairs = aw[:, iu] * aw[:, ju]
        if self.V is not None:
            ZT = pairs.T @ (rho[:, None] * self.V).T
        else:
            P = sp.csr_matrix((rho[self.rows] * self.v, (self.rows, self.cols)),
                              shape=(self.n_samples, aw.shape[0]))
            ZT = np.asarray(P @ pairs).T
        upper = _pair_contraction(np.ascontiguousarray(self.Gp.T), np.ascontiguousarray(ZT),
                                  np.empty(iu.shape[0]))
        M = np.empty((k, k))
        M[iu, ju] = upper
        M[ju, iu] = upper
        return M

    def add_noise_term(self, A, rho):
        if self.v.size:
            k = self.n_features
            A[:k, :k] += self.noise_matrix(rho)
        return A

    def noise_apply(self, rho, w):
        out = np.zeros(self.n_features)
        aw = self.alpha[:-1]
        if not self.v.size:
            return out
        if self.V is not None:
            U = self.u_dense(w)
            return np.sum(((rho[:, None] * self.V * U) @ aw) * self.Gp, axis=0)
        for sl in self._chunks():
            r, c = self.rows[sl], self.cols[sl]
            u = self.u_entries(w, sl)
            coef = rho[r] * self.v[sl] * u
            out += np.einsum("j,jk->k", coef, aw[c] * self.Gp[r])
        return out

    def gram_diagonal(self, rho):  # pragma: no cover - CG is not offered
        raise ValueError("latent designs use the Cholesky back-end only")


def latent_objective(X, entries, y, loss, theta, alpha, alpha_penalty, fit_intercept=True):
    """``J(w, b, alpha)`` and its gradient in ``alpha`` (see :func:`latent_gradients`).

    Parameters
    ----------
    X : ndarray or sparse matrix
    entries : (rows, cols, v, V)
        From :func:`noise_entries`.
    y : ndarray
    loss : Loss
    theta : ndarray of shape (n_hidden + fit_intercept,)
    alpha : ndarray of shape (n_features + 1, n_hidden)
    alpha_penalty : float
    fit_intercept : bool

    Returns
    -------
    J : float
    grad : ndarray of shape (n_features + 1, n_hidden)

    Examples
    --------
    >>> from bayesdrop import HingeLoss, Dropout
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(20, 2)); y = np.sign(X[:, 0])
    >>> entries, alpha = noise_entries(X, Dropout(0.2)), rng.normal(size=(3, 3))
    >>> J, g = latent_objective(X, entries, y, HingeLoss(1.0), np.r_[1.0, -1.0, 0.5, 0.0],
    ...                         alpha, alpha_penalty=0.1)
    >>> e = np.zeros_like(alpha); e[0, 0] = 1e-6
    >>> Jp, _ = latent_objective(X, entries, y, HingeLoss(1.0), np.r_[1.0, -1.0, 0.5, 0.0],
    ...                          alpha + e, alpha_penalty=0.1)
    >>> bool(abs((Jp - J) / 1e-6 - g[0, 0]) < 1e-3)  # the analytic alpha-gradient
    True
    """
    J, _, grad = latent_gradients(X, entries, y, loss, theta, alpha, alpha_penalty,
                                  fit_intercept)
    return J, grad


def latent_gradients(X, entries, y, loss, theta, alpha, alpha_penalty, fit_intercept=True,
                     work=None):
    """``J(w, b, alpha)`` and its gradients in ``theta = (w, b)`` and in ``alpha``.

    With ``(d_m, d_s)`` the derivatives of the loss terms in ``(m, s)``,
    ``C_nk = g'_nk w_k``, ``g''_nk = g'_nk (1 - 2 g_nk)``, the ``N x D`` matrix
    ``F_nd = d_s_n v_nd u_nd`` (sparse: only at the noise entries) and ``P = F alpha``::

        dJ/dw     = 2 w + G^T d_m + 2 sum_n P_n * g'_n
        dJ/db     = sum_n d_m
        dJ/dalpha = 2 alpha_penalty [alpha; 0] + Xbar^T (d_m C + 2 P * w * g'')
                    + [2 F^T C; 0]

    One evaluation costs five ``N x D x K`` products (BLAS for dense ``X``, ``O(nnz K)``
    sparse) and no :class:`LatentDesign`; dense ``X`` with noise and a loss with compiled
    kernels is evaluated by :func:`bayesdrop.model._latent_compiled.latent_value_grad` (one compiled
    call). Pass the same dict as ``work`` to repeated calls (an optimiser's) to reuse the
    work arrays.

    Returns
    -------
    J : float
    grad_theta : ndarray of shape (n_hidden + fit_intercept,)
    grad_alpha : ndarray of shape (n_features + 1, n_hidden)

    Examples
    --------
    >>> from bayesdrop import LogisticLoss, Dropout
    >>> from scipy.optimize import approx_fprime
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(30, 3)); y = np.sign(X[:, 0] * X[:, 1])
    >>> entries, alpha = noise_entries(X, Dropout(0.3)), rng.normal(size=(4, 2))
    >>> theta = rng.normal(size=3)
    >>> J, g_theta, _ = latent_gradients(X, entries, y, LogisticLoss(1.0), theta, alpha, 0.1)
    >>> fd = approx_fprime(theta, lambda t: latent_gradients(
    ...     X, entries, y, LogisticLoss(1.0), t, alpha, 0.1)[0], 1e-7)
    >>> bool(np.allclose(g_theta, fd, rtol=1e-5, atol=1e-5))
    True
    """
    rows, cols, v, V = entries
    n = X.shape[0]
    K = alpha.shape[1]
    w = theta[:K]
    b = theta[K] if fit_intercept else 0.0
    aw = alpha[:-1]
    work = {} if work is None else work

    def buf(name, shape):  # reused between calls (work): no N x D allocation per call
        a = work.get(name)
        if a is None or a.shape != shape:
            a = work[name] = np.empty(shape)
        return a

    if V is not None and has_kernels(loss):
        # dense X, a loss with compiled kernels: the compiled evaluation of the L-BFGS loop
        return _compiled_gradients(X, V, y, loss, theta, alpha, alpha_penalty,
                                   fit_intercept, work)
    NK, ND = (n, K), (n, X.shape[1])
    pre = buf("pre", NK)
    if sp.issparse(X):
        pre[...] = np.asarray(X @ aw)
    else:
        np.matmul(X, aw, out=pre)
    G, Gp, C = buf("G", NK), buf("Gp", NK), buf("C", NK)
    P = buf("P", NK)
    pre += alpha[-1]
    expit(pre, out=G)
    np.subtract(1.0, G, out=Gp)
    Gp *= G
    m = G @ w + b
    np.multiply(Gp, w, out=C)
    s = np.zeros(n)
    P[...] = 0.0
    term1 = np.zeros_like(aw)
    if V is not None:
        U = np.matmul(C, aw.T, out=buf("U", ND))
        VU = np.multiply(V, U, out=buf("VU", ND))
        s = np.einsum("nd,nd->n", VU, U)
        value, d_m, d_s = loss.terms(m, s, y)
        F = VU
        F *= d_s[:, None]
        np.matmul(F, aw, out=P)
        term1 = 2.0 * (F.T @ C)
    else:
        us = []
        for sl in _chunks(rows.shape[0]):
            r, c = rows[sl], cols[sl]
            u = np.einsum("jk,jk->j", C[r], aw[c])
            us.append(u)
            s += np.bincount(r, weights=v[sl] * u * u, minlength=n)
        value, d_m, d_s = loss.terms(m, s, y)
        for sl, u in zip(_chunks(rows.shape[0]), us):
            r, c = rows[sl], cols[sl]
            F = sp.csr_matrix((d_s[r] * v[sl] * u, (r, c)), shape=X.shape)
            P += F @ aw
            term1 += 2.0 * (F.T @ C)
    J = float(w @ w + alpha_penalty * np.sum(aw * aw) + np.sum(value))
    grad_theta = np.empty_like(theta)
    PGp = np.multiply(P, Gp, out=pre)  # pre is free again
    grad_theta[:K] = 2.0 * w + G.T @ d_m + 2.0 * PGp.sum(axis=0)
    if fit_intercept:
        grad_theta[K] = np.sum(d_m)
    # R = d_m C + 2 P w g'(1 - 2g), built in place in PGp
    one_m2G = np.multiply(G, -2.0, out=buf("tmp", NK))
    one_m2G += 1.0
    R = PGp
    R *= one_m2G
    R *= 2.0 * w
    R += np.multiply(C, d_m[:, None], out=one_m2G)
    grad_alpha = np.empty_like(alpha)
    grad_alpha[:-1] = np.asarray(X.T @ R) + term1 + 2.0 * alpha_penalty * aw
    grad_alpha[-1] = R.sum(axis=0)
    return J, grad_theta, grad_alpha


def _compiled_gradients(X, V, y, loss, theta, alpha, alpha_penalty, fit_intercept,
                        work):
    """:func:`latent_gradients` for dense ``X`` with noise and a loss with compiled kernels, by
    :func:`bayesdrop.model._latent_compiled.latent_value_grad` (its work arrays kept in
    ``work``)."""
    n, D = X.shape
    K = alpha.shape[1]
    lw = work.get("compiled")
    if lw is None or lw.DN.shape != (D, n) or lw.KD.shape[0] != K:
        lw = work["compiled"] = LatentWork(n, D, K)
    z = np.concatenate([theta, alpha.ravel()])
    grad = np.empty_like(z)
    sw = np.ones(n) if loss.weights is None else np.ascontiguousarray(loss.weights,
                                                                      dtype=np.float64)
    J = latent_value_grad(loss.kernel_params,
                          np.ascontiguousarray(X.T), np.ascontiguousarray(V.T),
                          np.ascontiguousarray(y, dtype=np.float64), sw, z, K,
                          bool(fit_intercept), float(alpha_penalty), *lw.arrays(), grad)
    nt = theta.shape[0]
    return float(J), grad[:nt], grad[nt:].reshape(alpha.shape)


@_jit.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _pair_contraction(GpT, ZT, out):
    """``out_p = sum_n Gp[n, k] Gp[n, l] Z[n, p]`` over the pairs ``p = (k, l)``,
    ``k <= l``, in ``np.triu_indices`` order, from the transposes ``GpT`` (``K x N``)
    and ``ZT`` (``K(K+1)/2 x N``): three contiguous streams per pair (sums in SIMD lanes;
    inf and NaN propagate)."""
    K, n = GpT.shape
    p = 0
    for k in range(K):
        for l in range(k, K):
            acc = 0.0
            for i in range(n):
                acc += GpT[k, i] * GpT[l, i] * ZT[p, i]
            out[p] = acc
            p += 1
    return out


def _chunks(n_entries):
    for start in range(0, n_entries, _CHUNK):
        yield slice(start, start + _CHUNK)
