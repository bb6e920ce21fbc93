"""The corrupted design: ``X``, its noise variances ``V`` and the intercept column.

Parameters are packed as one vector ``theta = (w_1, ..., w_D, b)`` (``b`` last, present
only with an intercept). The intercept is a feature of constant 1 that is never corrupted
and never penalised: ``xbar_n = (x_n, 1)``, ``vbar_n = (v_n, 0)`` (MATH.md section 1).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .._validation import as_float_design, check_bool
from .noise import FeatureVariance, NoiseModel, make_noise

__all__ = ["Design", "unsigned_indices"]


def unsigned_indices(indices):
    """CSR / CSC ``indices`` for the compiled loops: int32 ones as a uint32 view (no
    copy; scipy's choice below 2^31 entries and columns), others as they are. Unsigned,
    the loops skip the wrap-around test of a signed index on every load (on newsgroups
    a Hessian-vector product took 310 us with int32 indices, 255 us with uint32). The
    compiled sparse Gibbs sweep's passes take theirs from here too.

    Examples
    --------
    >>> unsigned_indices(np.array([0, 3], dtype=np.int32)).dtype
    dtype('uint32')
    """
    return indices.view(np.uint32) if indices.dtype == np.int32 else indices


#: storage kinds of ``V`` in :meth:`Design.sweep_arrays` (``vkind`` of the compiled
#: sweeps): zero, ``scale * M`` with ``M`` stored like ``X``, the constant ``scale``
V_ZERO, V_LIKE_X, V_CONSTANT = 0, 1, 2


class Design:
    """Mean design ``X``, noise variances ``V`` and intercept handling.

    Parameters
    ----------
    X : ndarray or sparse matrix of shape (n_samples, n_features)
        Clean (mean) inputs. Converted to float64 (dense) or CSR without modifying the
        caller's array.
    noise : NoiseModel, str or FeatureVariance, default="none"
        The corrupting distribution, or directly its variance operator.
    fit_intercept : bool, default=True
        Append the unpenalised, uncorrupted intercept ``b`` to ``theta``.

    Attributes
    ----------
    n_samples, n_features : int
    n_params : int
        ``n_features + fit_intercept``.
    variance : FeatureVariance
    sparse : bool

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from bayesdrop import Dropout
    >>> design = Design(sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 2.0]])), Dropout(0.5))
    >>> design.n_params, design.sparse
    (3, True)
    >>> m, s = design.scores(np.array([1.0, 1.0, 0.5]))  # w = (1, 1), b = 0.5
    >>> m.tolist(), s.tolist()
    ([1.5, 2.5], [1.0, 4.0])
    """

    def __init__(self, X, noise="none", fit_intercept=True):
        self.X = as_float_design(X)
        if isinstance(noise, FeatureVariance):
            if noise.shape != self.X.shape:
                raise ValueError("the variance operator does not match the shape of X")
            self.variance = noise
        else:
            if not isinstance(noise, NoiseModel):
                noise = make_noise(noise)
            self.variance = noise.variance(self.X)
        self.fit_intercept = check_bool(fit_intercept, "fit_intercept")
        self.sparse = sp.issparse(self.X)
        self.n_samples, self.n_features = self.X.shape
        self.n_params = self.n_features + int(self.fit_intercept)
        # V = scale X * X of this very (dense, C-ordered) X: rmatvec_pair in one pass
        self._squares = (not self.sparse and self.X.flags.c_contiguous
                         and getattr(self.variance, "squares_of", None) is self.X)

    # -- packing --------------------------------------------------------------------
    def split(self, theta):
        """Return ``(w, b)`` from ``theta`` (``b = 0`` without intercept)."""
        theta = np.asarray(theta, dtype=float)
        if self.fit_intercept:
            return theta[:-1], float(theta[-1])
        return theta, 0.0

    def pack(self, coef, intercept=0.0):
        """Return ``theta`` from ``coef`` and ``intercept``."""
        coef = np.asarray(coef, dtype=float).ravel()
        if coef.shape[0] != self.n_features:
            raise ValueError(
                f"coef has {coef.shape[0]} entries, expected n_features={self.n_features}"
            )
        if self.fit_intercept:
            return np.append(coef, float(intercept))
        return coef.copy()

    def penalty_mask(self):
        """Diagonal of ``I'``: ones for weights, zero for the intercept."""
        mask = np.ones(self.n_params)
        if self.fit_intercept:
            mask[-1] = 0.0
        return mask

    # -- products with xbar ----------------------------------------------------------
    def matvec(self, theta):
        """Mean scores ``m = Xbar @ theta = X w + b``."""
        w, b = self.split(theta)
        return np.asarray(self.X @ w).ravel() + b

    def rmatvec(self, a):
        """``Xbar.T @ a = (X.T a, sum(a))``."""
        g = np.asarray(self.X.T @ a).ravel()
        if self.fit_intercept:
            g = np.append(g, np.sum(a))
        return g

    def scores(self, theta):
        """Return ``(m, s)``: mean ``m_n = w.x_n + b`` and variance ``s_n = v_n.(w*w)``."""
        w, _ = self.split(theta)
        return self.matvec(theta), self.variance.score_variance(w * w)

    def scores_many(self, thetas):
        """Scores of many parameter vectors at once: ``(m, s)`` of shape (n_thetas, n_samples).

        One sparse/dense product for all of them when the noise covariance is diagonal
        (``m = Theta Xbar^T``, ``s = (W * W) V^T``); a loop over :meth:`scores` otherwise.

        Examples
        --------
        >>> design = Design(np.array([[1.0, 2.0], [0.0, 1.0]]), "dropout")
        >>> thetas = np.array([[1.0, 0.0, 0.5], [0.0, 1.0, 0.0]])
        >>> m, s = design.scores_many(thetas)
        >>> bool(np.allclose(m[1], design.scores(thetas[1])[0]))
        True
        """
        thetas = np.atleast_2d(np.asarray(thetas, dtype=float))
        if not self.diagonal_noise or type(self).scores is not Design.scores:
            pairs = [self.scores(t) for t in thetas]
            return np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
        W = thetas[:, : self.n_features]
        m = np.asarray(self.X @ W.T).T
        if self.fit_intercept:
            m = m + thetas[:, self.n_features][:, None]
        V = self.variance
        W2 = W * W
        if V.is_zero:
            s = np.zeros_like(m)
        elif V.is_constant:
            s = np.repeat(V.scale * W2.sum(axis=1)[:, None], self.n_samples, axis=1)
        else:
            s = V.scale * np.asarray(V.matrix @ W2.T).T
        return m, s

    def noise_diagonal(self, rho):
        """``V.T @ rho`` padded with 0 for the intercept: ``sum_n rho_n vbar_n``."""
        d = self.variance.weighted_column_sums(rho)
        if self.fit_intercept:
            d = np.append(d, 0.0)
        return d

    def add_noise_term(self, A, rho):
        """Add ``sum_n rho_n diag(vbar_n)`` to the normal matrix ``A`` in place.

        Subclasses with a full per-example covariance (the latent models) override this,
        :meth:`noise_apply` and :meth:`scores`; everything else in the core is shared.
        """
        A[np.diag_indices_from(A)] += self.noise_diagonal(rho)
        return A

    def noise_apply(self, rho, w):
        """``(sum_n rho_n Cov_n) w`` for the weights ``w`` (``Cov_n = diag(v_n)`` here)."""
        return self.variance.weighted_column_sums(rho) * w

    #: whether the per-example noise covariance is diagonal, ``diag(v_n)`` (Newton's
    #: Hessian, :mod:`bayesdrop.linalg.hessian`, needs it; the latent design has a full one)
    diagonal_noise = True

    # -- what the solvers ask of the design besides its products ----------------------
    @property
    def noise_free(self):
        """Whether every noise variance is zero (``V = 0``: the clean model, where the
        hinge and epsilon-insensitive terms keep their kinks)."""
        return bool(self.variance.is_zero)

    def row_block(self, idx):
        """The rows ``idx`` of ``X`` in its storage (dense or CSR): the few rows of an
        active-set system (the examples on a kink)."""
        return self.X[idx]

    def without_intercept(self):
        """The same ``X`` and variances (shared, not copied) without the intercept."""
        return Design(self.X, self.variance, fit_intercept=False)

    def quiet_rows(self):
        """Mask of the examples whose noise variance is zero in every feature (``s_n = 0``
        for every ``w``), or None when ``V`` is zero or constant (all rows or none)."""
        V = self.variance
        if V.is_zero or V.is_constant:
            return None
        return np.asarray(V.matrix.sum(axis=1)).ravel() <= 0.0

    def nonzero_rows(self):
        """Mask of the rows of ``X`` with a non-zero entry."""
        if self.sparse:
            return np.asarray(abs(self.X).sum(axis=1)).ravel() > 0.0
        return np.any(self.X != 0.0, axis=1)

    def dense_kernel_arrays(self, max_constant_entries=4_000_000):
        """``(X, M, scale)``, ``V = scale * M`` with ``M`` stored like a C-ordered dense
        ``X``, for compiled dense loops; ``M`` None where it is ``X * X`` (dropout and
        multiplicative noise on this ``X``) or the variance is zero: the loops form the
        squares from ``X``'s row in the cache
        (:func:`bayesdrop.model._design_kernels.m_entry`; digits 1797 x 64: the scores'
        pass 30 -> 18 us); a constant variance as ``M`` of ones (up to
        ``max_constant_entries`` entries); None for a sparse ``X`` or another variance."""
        if self.sparse:
            return None
        arrays = self.row_kernel_arrays()
        V = self.variance
        if arrays is not None:
            (X, M), scale = arrays[1], arrays[2]
            if V.is_zero or getattr(V, "squares_of", None) is self.X:
                return X, None, scale
            return X, M, scale
        if V.is_constant and self.n_samples * self.n_features <= max_constant_entries:
            X = np.ascontiguousarray(self.X)
            return X, np.ones_like(X), V.scale
        return None

    def sweep_arrays(self):
        """The arrays of the compiled Gibbs sweeps, or None when ``V`` is stored otherwise.

        ``dict(vkind, scale, ...)`` with ``vkind`` one of ``V_ZERO``,
        ``V_LIKE_X`` (``V = scale * M``) and ``V_CONSTANT`` (``V = scale``), and
        for a dense ``X`` ``Xb = [X, 1]`` (C-ordered; without the column of ones when
        there is no intercept) and ``M`` (a dense array; ``1 x 1`` when not
        ``V_LIKE_X``), for a CSR ``X`` its ``indptr`` (int64), ``indices``
        (:func:`unsigned_indices`), ``xdata`` and
        ``mdata`` (``M``'s values in ``X``'s pattern; ``X``'s own when not
        ``V_LIKE_X``), and ``X`` itself as ``csr`` (the sparse sweep's dual system is
        set up from it).
        """
        V, X = self.variance, self.X
        if V.is_zero:
            vkind, scale = V_ZERO, 0.0
        elif V.is_constant:
            vkind, scale = V_CONSTANT, float(V.scale)
        else:
            vkind, scale = V_LIKE_X, float(V.scale)
        if self.sparse:
            mdata = X.data
            if vkind == V_LIKE_X:
                arrays = self.row_kernel_arrays()
                if arrays is None or arrays[0] != "csr":
                    return None
                mdata = arrays[1][3]
            return dict(vkind=vkind, scale=scale, csr=X,
                        indptr=X.indptr.astype(np.int64), indices=unsigned_indices(X.indices),
                        xdata=np.ascontiguousarray(X.data, dtype=np.float64),
                        mdata=np.ascontiguousarray(mdata, dtype=np.float64))
        n, D = X.shape
        Xb = np.empty((n, self.n_params))
        Xb[:, :D] = X
        if self.fit_intercept:
            Xb[:, D] = 1.0
        M = np.zeros((1, 1))
        if vkind == V_LIKE_X:
            M = np.ascontiguousarray(V.matrix.toarray() if hasattr(V.matrix, "toarray")
                                     else V.matrix, dtype=np.float64)
        return dict(vkind=vkind, scale=scale, Xb=Xb, M=M)

    @property
    def every_row_noisy(self):
        """Whether every example has a positive noise variance in some feature (so its score
        variance ``s_n`` is positive for every ``w`` with ``w_d != 0`` wherever
        ``v_nd > 0``). False at zero noise and when a row of ``V`` is all zero, e.g. an
        all-zero row of ``X`` under dropout."""
        if getattr(self, "_every_row_noisy", None) is None:
            quiet = self.quiet_rows()
            self._every_row_noisy = (not self.variance.is_zero if quiet is None
                                     else not bool(np.any(quiet)))
        return self._every_row_noisy

    def row_kernel_arrays(self):
        """Arrays for the compiled row passes of :mod:`bayesdrop.linalg.kernels`, or None.

        ``("csr", (indptr, indices, x_data, m_data), scale)`` or
        ``("dense", (X, M), scale)`` when ``V = scale * M`` with ``M`` stored like ``X``
        (zero noise: ``M = X``, ``scale = 0``); None for a constant variance or a
        variance matrix with another sparsity pattern (the generic products are used).
        CSR ``indices`` by :func:`unsigned_indices`.
        """
        if getattr(self, "_row_kernel", False) is not False:
            return self._row_kernel
        V, X, out = self.variance, self.X, None
        if self.sparse:
            idx = unsigned_indices(X.indices)
            if V.is_zero:
                out = ("csr", (X.indptr, idx, X.data, X.data), 0.0)
            elif not V.is_constant and sp.issparse(V.matrix):
                M = V.matrix.tocsr()
                if (M.shape == X.shape and np.array_equal(M.indptr, X.indptr)
                        and np.array_equal(M.indices, X.indices)):
                    out = ("csr", (X.indptr, idx, X.data, M.data), V.scale)
        else:
            Xc = np.ascontiguousarray(X)
            if V.is_zero:
                out = ("dense", (Xc, Xc), 0.0)
            elif not V.is_constant and not sp.issparse(V.matrix):
                out = ("dense", (Xc, np.ascontiguousarray(V.matrix)), V.scale)
        self._row_kernel = out
        return out

    def single_arrays(self):
        """float32 copies ``(X, M)`` of the dense arrays of :meth:`dense_kernel_arrays`
        (``M`` None where the loops form ``X * X`` from ``X``: dropout, multiplicative and
        zero noise), made at the first call and kept with the design (half the memory of
        the float64 arrays): for products that only shape a direction, such as
        :func:`bayesdrop.linalg.hessian.single_operator`'s. Raises ``ValueError`` where
        there are none (a sparse design, or one without row kernels)."""
        if getattr(self, "_single_arrays", None) is None:
            compiled = self.row_kernel_arrays()
            if compiled is None or compiled[0] != "dense":
                raise ValueError("single_arrays needs a dense design with row kernels")
            X, M, _ = self.dense_kernel_arrays()
            self._single_arrays = (X.astype(np.float32),
                                   None if M is None else M.astype(np.float32))
        return self._single_arrays

    def noise_matvec(self, z):
        """``V @ z`` for ``z`` of shape (n_features,): per-example ``sum_d v_nd z_d``."""
        return self.variance.score_variance(z)

    def noise_rmatvec(self, a):
        """``V.T @ a`` for ``a`` of shape (n_samples,) (no intercept entry)."""
        return self.variance.weighted_column_sums(a)

    def rmatvec_pair(self, a, rho):
        """``(Xbar.T @ a, V.T @ rho)``, the two products of the gradient of ``J``.

        With ``V = scale X * X`` on a dense ``X`` (dropout, multiplicative noise) both
        come from one compiled pass over ``X``, reading ``N D`` numbers instead of
        ``2 N D`` (:func:`bayesdrop.model._design_kernels.dense_rmatvec_squares`); with
        ``V = scale M``, ``M`` a CSR matrix of the pattern of a CSR ``X``, from one
        compiled pass over the stored entries
        (:func:`bayesdrop.model._design_kernels.csr_rmatvec_pair`); otherwise :meth:`rmatvec`
        and :meth:`noise_rmatvec`.

        Examples
        --------
        >>> from bayesdrop import Dropout
        >>> X = np.array([[1.0, 2.0], [3.0, -1.0]])
        >>> g, nd = Design(X, Dropout(0.5)).rmatvec_pair(np.array([1.0, 2.0]),
        ...                                               np.array([1.0, 1.0]))
        >>> g.tolist(), nd.tolist()  # (X^T a, sum a), q/(1-q) (X*X)^T rho
        ([7.0, 0.0, 3.0], [10.0, 5.0])
        """
        compiled = None
        if self.sparse and not self.variance.is_zero:
            compiled = self.row_kernel_arrays()
        if not (getattr(self, "_squares", False) or compiled is not None):
            return self.rmatvec(a), self.noise_rmatvec(rho)
        from . import _design_kernels as kernels

        a = np.ascontiguousarray(a, dtype=np.float64)
        rho = np.ascontiguousarray(rho, dtype=np.float64)
        g = np.empty(self.n_params)
        nd = np.empty(self.n_features)
        if compiled is None:
            kernels.dense_rmatvec_squares(self.X, a, rho, g, nd)
        else:
            kernels.csr_rmatvec_pair(*compiled[1], a, rho, g, nd)
        if self.fit_intercept:
            g[-1] = np.sum(a)
        nd *= self.variance.scale
        return g, nd

    def noise_cross(self, a):
        """Dense ``Xbar.T diag(a) V`` of shape (n_params, n_features); ``a`` of any sign.

        Cost ``O(N D^2)`` dense, ``O(nnz D)``-ish sparse; ``O(N D)`` for constant ``V``.
        """
        V, D = self.variance, self.n_features
        if V.is_zero:
            return np.zeros((self.n_params, D))
        if V.is_constant:
            return np.outer(self.rmatvec(a), np.full(D, V.scale))
        M = V.matrix
        if self.sparse:
            top = (self.X.T @ M.multiply(a[:, None]).tocsr()).toarray()
        else:
            top = (self.X * a[:, None]).T @ M
        top *= V.scale
        if self.fit_intercept:
            return np.vstack([top, V.scale * np.asarray(M.T @ a).ravel()[None, :]])
        return top

    def noise_gram(self, a):
        """Dense ``V.T diag(a) V`` of shape (n_features, n_features); ``a`` of any sign."""
        V, D = self.variance, self.n_features
        if V.is_zero:
            return np.zeros((D, D))
        if V.is_constant:
            return np.full((D, D), V.scale * V.scale * float(np.sum(a)))
        M = V.matrix
        if self.sparse:
            out = (M.T @ M.multiply(a[:, None]).tocsr()).toarray()
        else:
            out = (M * a[:, None]).T @ M
        return (V.scale * V.scale) * out

    #: linear-algebra back-ends valid for this design (see :mod:`bayesdrop.linalg.wls`)
    linalg_backends = ("cholesky", "woodbury", "cg")

    def gram(self, rho, single=False, row_step=1):
        """Dense ``Xbar.T diag(rho) Xbar`` of shape (n_params, n_params); ``rho >= 0``.

        Cost ``O(N D^2)`` dense (one BLAS ``syrk``-like product), ``O(nnz D)`` sparse.
        With ``single=True`` a dense ``X``'s product runs in float32 (about twice as fast,
        relative error of order ``1e-7``: for approximate normal matrices only; the
        intercept row stays float64). With ``row_step = k > 1`` (dense, ``single`` only)
        it is estimated from every ``k``-th row weighted ``k``,
        ``k sum_i rho_{ik} xbar_{ik} xbar_{ik}^T`` (unbiased over the offset): a
        starting matrix, ``k`` times cheaper.

        Examples
        --------
        The float32 product is checked against the worst-case bound of a float32 sum of
        ``N`` rounded products (Higham 2002, section 3.1), ``(N + 2) u`` times
        ``|Xbar|^T diag(rho) |Xbar|`` entrywise with ``u = 2^-24``, which holds for every
        summation order (every BLAS, every CPU):

        >>> rng = np.random.default_rng(0)
        >>> design = Design(rng.normal(size=(4000, 3)))
        >>> rho = rng.random(4000)
        >>> exact = design.gram(rho)
        >>> Xbar = np.c_[design.X, np.ones(4000)]
        >>> bound = (4000 + 2) * 2.0**-24 * (np.abs(Xbar).T * rho) @ np.abs(Xbar)
        >>> bool(np.all(np.abs(design.gram(rho, single=True) - exact) <= bound))
        True
        >>> est = design.gram(rho, single=True, row_step=4)
        >>> X4 = Xbar[::4]
        >>> bound4 = (1000 + 2) * 2.0**-24 * 4 * (np.abs(X4).T * rho[::4]) @ np.abs(X4)
        >>> bool(np.all(np.abs(est - 4 * (X4.T * rho[::4]) @ X4) <= bound4))
        True
        """
        X = self.X
        p, D = self.n_params, self.n_features
        row_step = int(row_step)
        if row_step > 1 and (self.sparse or not single):
            raise ValueError("row_step > 1 needs a dense design and single=True")
        G = np.empty((p, p))
        if self.sparse:
            G[:D, :D] = (X.T @ X.multiply(rho[:, None]).tocsr()).toarray()
        elif single:  # rows sqrt(rho) x_n in float32 (compiled: a casting multiply is slow)
            from .._blas import padded_rows
            from ._design_kernels import scaled_rows

            if row_step > 1:  # rows sqrt(k rho_n) xbar_n of every k-th n, intercept included
                r = np.sqrt(row_step * rho[::row_step])
                Xs = padded_rows(r.shape[0], p, np.float32)
                scaled_rows(np.ascontiguousarray(X), r, self.fit_intercept, Xs, row_step)
                G[:] = (Xs.T @ Xs)[:p, :p]
                return G
            Xs = padded_rows(X.shape[0], D, np.float32)  # zero columns: a faster syrk
            scaled_rows(np.ascontiguousarray(X), np.sqrt(rho), False, Xs)
            G[:D, :D] = (Xs.T @ Xs)[:D, :D]
        else:
            Xs = X * np.sqrt(rho)[:, None]
            G[:D, :D] = Xs.T @ Xs
        if self.fit_intercept:
            col = np.asarray(X.T @ rho).ravel()
            G[:D, D] = col
            G[D, :D] = col
            G[D, D] = np.sum(rho)
        return G

    def row_gram(self):
        """Dense ``X X^T`` of shape (n_samples, n_samples), computed once and cached."""
        if getattr(self, "_row_gram", None) is None:
            G = self.X @ self.X.T
            self._row_gram = G.toarray() if sp.issparse(G) else np.asarray(G)
        return self._row_gram

    def gram_diagonal(self, rho):
        """Diagonal of ``Xbar.T diag(rho) Xbar`` (for Jacobi preconditioning)."""
        X2 = self.X.multiply(self.X) if self.sparse else self.X * self.X
        d = np.asarray(X2.T @ rho).ravel()
        if self.fit_intercept:
            d = np.append(d, np.sum(rho))
        return d
