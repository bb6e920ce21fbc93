"""Expected-noise losses and their data augmentations (MATH.md sections 2-3).

Every loss enters the collapsed objective through per-example terms that depend on the
example only via the mean score ``m_n = w.x_n + b`` and the score variance under the
noise ``s_n = sum_d v_nd w_d^2``::

    J(w, b) = ||w||^2 + sum_n term(m_n, s_n, y_n)

A loss supplies

* :meth:`Loss.terms` -- the term and its partial derivatives in ``m`` and ``s`` (the
  gradient of ``J`` follows by the chain rule, see :func:`objective`);
* :meth:`Loss.expected_augmentation` -- the conditional means of its augmentation
  variables (the IRLS / E-step weights);
* :meth:`Loss.draw_augmentation` -- a draw of the augmentation variables from their
  conditional distribution (the Gibbs step);
* :meth:`Loss.system_weights` -- the per-example weight ``rho_n`` and target ``t_n`` of the
  shared weighted least-squares system (:mod:`bayesdrop.linalg.wls`)::

      A = 2 I' + sum_n rho_n (xbar_n xbar_n^T + diag(vbar_n)),   r = sum_n t_n xbar_n

  IRLS plugs in the expectations and solves; the Gibbs sampler plugs in draws and samples.

Numerical floors
----------------
The hinge and epsilon-insensitive weights are ``1 / (C sqrt(E zeta^2))``, infinite for a
point exactly on the margin at zero noise. The square root is floored at
:data:`ROOT_FLOOR` (``1e-9``) in the weights and derivatives only (never in the value of
``J``). Any positive weight gives a valid upper bound, so the floor can raise ``J`` by at
most ``C * ROOT_FLOOR / 2`` per example in one IRLS step.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod

import numpy as np

from .._validation import as_float_vector, check_binary_labels, check_scalar
from .augmentation import inverse_gaussian, polya_gamma
from ._logistic_rows import KAPPA_SERIES as _KAPPA_SERIES
from ._logistic_rows import PSI_SERIES as _PSI_SERIES
from ._logistic_rows import SIMD_MIN_ROWS, logistic_rows

__all__ = [
    "ROOT_FLOOR",
    "Loss",
    "HingeLoss",
    "LogisticLoss",
    "EpsilonInsensitiveLoss",
    "SquaredLoss",
    "make_loss",
]

#: Floor on ``sqrt(E zeta^2)`` (hinge) and ``sqrt(E (Delta -+ eps)^2)`` (epsilon-insensitive)
#: used in the IRLS weights and in derivatives.
ROOT_FLOOR = 1e-9


def _root_curvature(a, s, C):
    """Second derivatives of ``C sqrt(a^2 + s)`` with ``da/dm = -1``.

    ``d2/dm2 = C s / R^3``, ``d2/dm ds = C a / (2 R^3)``, ``d2/ds2 = -C / (4 R^3)`` with
    ``R = max(sqrt(a^2 + s), ROOT_FLOOR)``.
    """
    R = np.maximum(np.sqrt(a * a + s), ROOT_FLOOR)
    c3 = C / (R * R * R)
    return c3 * s, 0.5 * c3 * a, -0.25 * c3


def _excess_root(a, s):
    """Stable ``sqrt(a^2 + s) - |a| = s / (sqrt(a^2 + s) + |a|)`` for ``s >= 0``."""
    root = np.sqrt(a * a + s)
    denom = root + np.abs(a)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(denom > 0, s / np.where(denom > 0, denom, 1.0), 0.0)
    return out, root


class Loss(ABC):
    """Base class of the augmented losses. See the module docstring for the contract."""

    name = "base"
    #: number of augmentation variables per example
    n_augmentation = 1
    #: whether targets are class labels in {-1, +1}
    binary = True
    #: per-example weights ``w_n > 0`` (None: all 1); see :meth:`weighted`
    weights = None

    @property
    def c(self):
        """The regularisation constant of each example: ``C``, or ``C w_n`` if weighted."""
        return self.C if self.weights is None else self.C * self.weights

    def weighted(self, sample_weight):
        """This loss with example ``n``'s term scaled by ``w_n > 0`` (``sample_weight``).

        Every term of ``J``, its derivatives and its curvature are linear in ``C``, so
        scaling an example's term by ``w_n`` is the same loss with ``C_n = C w_n``; the
        augmentations of MATH.md section 3 hold per example with ``C_n`` in place of ``C``
        (``docs/weights.md``): the hinge and epsilon-insensitive mixing variables are
        ``IG(1 / (C_n root_n), 1)`` with system weights ``rho_n = C_n^2 u_n``, the logistic
        one ``PG(2 C_n, psi_n)``. An integer ``w_n`` is the same as ``w_n`` copies of the
        example, in ``J`` and in the pseudo-posterior ``exp(-J)``.

        Parameters
        ----------
        sample_weight : ndarray of shape (n_samples,), all > 0 and finite, or None

        Returns
        -------
        Loss
            A copy (``self`` unchanged); ``sample_weight=None`` gives ``self``.

        Examples
        --------
        >>> loss = HingeLoss(C=1.0)
        >>> m, s, y = np.array([0.2, 0.2]), np.zeros(2), np.array([1.0, 1.0])
        >>> loss.weighted(np.array([1.0, 3.0])).value(m, s, y).tolist()
        [1.6, 4.800000000000001]
        """
        if sample_weight is None:
            return self
        new = copy.copy(self)
        new.weights = np.asarray(sample_weight, dtype=np.float64)
        return new

    def check_target(self, y, n):
        """Validate the target vector (labels in {-1, +1} for binary losses)."""
        if self.binary:
            yf = np.asarray(y, dtype=np.float64)
            if yf.shape == (n,) and np.all(np.abs(yf) == 1.0):  # so finite and in range
                return yf
        y = as_float_vector(y, n)
        if self.binary:
            check_binary_labels(y)
        return y

    @abstractmethod
    def terms(self, m, s, y):
        """Return ``(value, d_value/d_m, d_value/d_s)`` per example."""

    def value(self, m, s, y):
        """Per-example term of ``J`` only (no derivatives); see :meth:`terms`."""
        return self.terms(m, s, y)[0]

    @abstractmethod
    def expected_augmentation(self, m, s, y):
        """Conditional means of the augmentation variables given ``(m, s)``."""

    @abstractmethod
    def draw_augmentation(self, m, s, y, rng):
        """Draw the augmentation variables from their conditional law given ``(m, s)``.

        Returns a tuple like :meth:`expected_augmentation`; ``rng`` is a
        :class:`numpy.random.Generator`. No floor is applied: a zero root gives the exact
        limit law (Levy for the inverse-Gaussian augmentations).
        """

    @abstractmethod
    def system_weights(self, aug, y):
        """Per-example ``(rho, t)`` of the weighted least-squares system."""

    def irls_weights(self, m, s, y):
        """``(rho, t)`` with the augmentation variables at their conditional means."""
        return self.system_weights(self.expected_augmentation(m, s, y), y)

    #: whether the term is twice differentiable in ``m`` at zero score variance
    smooth = True

    def curvature(self, m, s, y):
        """Second derivatives ``(d2/dm2, d2/dm ds, d2/ds2)`` of the term per example.

        With :meth:`terms` they give Newton's Hessian of ``J``
        (:func:`bayesdrop.linalg.hessian.hessian_matrix`). Where the term has a kink
        (``s = 0`` on the margin of the hinge / tube of the epsilon-insensitive loss) the
        values are those at the floored root :data:`ROOT_FLOOR`.
        """
        raise TypeError(f"{type(self).__name__} defines no curvature: Newton does not apply "
                        "(use the IRLS solver)")

    def kinks(self, y):
        """Kinks of a piecewise-linear term at zero noise, or None for smooth losses.

        Returns ``(positions, slopes)``: ``positions`` of shape (n_samples, k) holds the
        values of ``m`` where ``term(m)`` bends (sorted per row), ``slopes`` of shape
        (n_samples, k + 1) the slopes ``d term / dm`` of the pieces between them. Used by
        the IRLS active-set polish (:func:`bayesdrop.solvers.irls.active_set_polish`).
        """
        return None

    def __repr__(self):
        params = ", ".join(f"{k}={v!r}" for k, v in self._params().items())
        weighted = "" if self.weights is None else f".weighted(<{self.weights.shape[0]}>)"
        return f"{type(self).__name__}({params}){weighted}"

    def _params(self):
        return {"C": self.C}

    def __eq__(self, other):
        if type(self) is not type(other) or self._params() != other._params():
            return False
        if self.weights is None or other.weights is None:
            return self.weights is other.weights
        return bool(np.array_equal(self.weights, other.weights))

    def __hash__(self):
        return hash((type(self).__name__, tuple(self._params().items())))


class HingeLoss(Loss):
    """Expected hinge loss with margin ``l``, bounded as in MATH.md section 3.

    With ``zeta_n = l - y_n (w.x~_n + b)``, ``E zeta = l - y m`` and
    ``E zeta^2 = (l - y m)^2 + s``::

        term_n = C (E zeta_n + sqrt(E zeta_n^2))

    (``2 C max(0, zeta_n)`` at zero noise). Augmentation
    ``u_n = 1/lambda_n ~ InverseGaussian(1 / (C sqrt(E zeta_n^2)), 1)``, mean
    ``gamma_n = 1 / (C sqrt(E zeta_n^2))``; system weights ``rho_n = C^2 u_n`` and
    ``t_n = (C + C^2 l u_n) y_n``.

    Parameters
    ----------
    C : float > 0
        Regularisation constant (scikit-learn's ``C``).
    margin : float >= 0, default=1.0
        ``l``; ``l = 0`` with fixed weights gives the MCF-quadratic loss.

    Examples
    --------
    >>> loss = HingeLoss(C=1.0)
    >>> m, s, y = np.array([0.2, 3.0]), np.zeros(2), np.array([1.0, 1.0])
    >>> loss.value(m, s, y).tolist()  # zero noise: 2C max(0, 1 - y m)
    [1.6, 0.0]
    """

    name = "hinge"

    def __init__(self, C=1.0, margin=1.0):
        self.C = check_scalar(C, "C", min_val=0.0, include_min=False)
        self.margin = check_scalar(margin, "margin", min_val=0.0)

    def _params(self):
        return {"C": self.C, "margin": self.margin}

    def terms(self, m, s, y):
        C = self.c
        zeta = self.margin - y * m
        excess, root = _excess_root(zeta, s)
        value = C * (excess + 2.0 * np.maximum(zeta, 0.0))
        root_f = np.maximum(root, ROOT_FLOOR)
        d_m = -C * y * (1.0 + zeta / root_f)
        d_s = C / (2.0 * root_f)
        return value, d_m, d_s

    def expected_augmentation(self, m, s, y):
        zeta = self.margin - y * m
        root = np.maximum(np.sqrt(zeta * zeta + s), ROOT_FLOOR)
        return (1.0 / (self.c * root),)

    def draw_augmentation(self, m, s, y, rng):
        zeta = self.margin - y * m
        with np.errstate(divide="ignore"):
            mean = 1.0 / (self.c * np.sqrt(zeta * zeta + s))
        return (inverse_gaussian(mean, rng),)

    def system_weights(self, aug, y):
        (u,) = aug
        C = self.c
        rho = C * C * u
        return rho, (C + self.margin * rho) * y

    smooth = False

    def curvature(self, m, s, y):
        # C sqrt(zeta^2 + s) with zeta = l - y m (d zeta/dm = -y; y^2 = 1)
        d_mm, d_ms, d_ss = _root_curvature(self.margin - y * m, s, self.c)
        return d_mm, y * d_ms, d_ss

    def kinks(self, y):
        # 2C max(0, l - y m): kink at m = l y; slope -2C y on the side where y m < l
        c2 = 2.0 * self.c
        left = np.where(y > 0, -c2, 0.0)
        right = np.where(y > 0, 0.0, c2)
        return (self.margin * y)[:, None], np.column_stack([left, right])


class LogisticLoss(Loss):
    """Expected logistic loss, bounded through the Polya-Gamma augmentation.

    With ``h = 2C`` and ``psi_n = sqrt(m_n^2 + s_n)``::

        term_n = h log(2 cosh(psi_n / 2)) - (h/2) y_n m_n

    which equals ``2C log(1 + exp(-y_n m_n))`` at zero noise (the constant ``h log 2`` is
    kept so that ``J`` is the ordinary regularised objective there). Augmentation
    ``lambda_n ~ PG(h, psi_n)``, mean ``(h / (2 psi_n)) tanh(psi_n / 2)`` (``h/4`` at
    ``psi = 0``); system weights ``rho_n = lambda_n``, ``t_n = (h/2) y_n``.

    The value is evaluated as ``h [s / (2 (psi + |m|)) + log1p(exp(-psi)) + max(0, -y m)]``,
    which has no cancellation. On 1-D inputs of ``SIMD_MIN_ROWS`` (16) rows or more the
    terms, derivatives and curvature take ``exp``, ``log1p`` and ``tanh`` from numpy's SIMD
    ufuncs and do the rest compiled (:mod:`bayesdrop.model._logistic_rows`; the same
    numbers to a few units in the last place).

    Parameters
    ----------
    C : float > 0

    Examples
    --------
    >>> loss = LogisticLoss(C=0.5)  # h = 2C = 1
    >>> m, y = np.array([0.0, 2.0]), np.array([1.0, -1.0])
    >>> bool(np.allclose(loss.value(m, np.zeros(2), y) - loss.value(np.zeros(2), np.zeros(2), y),
    ...                  2 * 0.5 * (np.logaddexp(0, -y * m) - np.log(2))))
    True
    """

    name = "logistic"

    def __init__(self, C=1.0):
        self.C = check_scalar(C, "C", min_val=0.0, include_min=False)

    @property
    def h(self):
        """Polya-Gamma shape ``h = 2C`` (per example ``2 C w_n`` if weighted)."""
        return 2.0 * self.c

    def _mean_pg(self, psi):
        h = self.h
        small = psi < _PSI_SERIES
        safe = np.where(small, 1.0, psi)
        return np.where(small, h / 4.0 * (1.0 - psi * psi / 12.0),
                        h / (2.0 * safe) * np.tanh(safe / 2.0))

    def _rows(self, m, s, y, order):
        """:func:`bayesdrop.model._logistic_rows.logistic_rows` (numpy's SIMD
        transcendental functions, the arithmetic compiled) for 1-D inputs of
        ``SIMD_MIN_ROWS`` rows or more; None otherwise (the numpy formulas below)."""
        n = np.shape(m)[0] if np.ndim(m) == 1 else 0
        if n < SIMD_MIN_ROWS or np.shape(s) != (n,) or np.shape(y) != (n,):
            return None
        if self.weights is not None and np.shape(self.weights) != (n,):
            return None
        return logistic_rows(2.0 * self.C, m, s, y, self.weights, order)

    def terms(self, m, s, y):
        rows = self._rows(m, s, y, 1)
        if rows is not None:
            return rows[0], rows[1], rows[2]
        h = self.h
        psi = np.sqrt(m * m + s)
        excess, _ = _excess_root(m, s)  # psi - |m|
        value = h * (0.5 * excess + np.log1p(np.exp(-psi)) + np.maximum(-y * m, 0.0))
        lam = self._mean_pg(psi)
        return value, lam * m - 0.5 * h * y, 0.5 * lam

    def curvature(self, m, s, y):
        # term = f(psi) - (h/2) y m with f' = psi lam; lam' = d lam / d psi, kappa = lam'/psi:
        # d2/dm2 = lam + m^2 kappa, d2/dm ds = m kappa / 2, d2/ds2 = kappa / 4
        rows = self._rows(m, s, y, 2)
        if rows is not None:
            return rows[3], rows[4], rows[5]
        h = self.h
        psi = np.sqrt(m * m + s)
        lam = self._mean_pg(psi)
        small = psi < _KAPPA_SERIES
        p = np.where(small, 1.0, psi)
        x = 0.5 * p
        with np.errstate(over="ignore"):  # cosh^2 -> inf: 1 / cosh^2 -> 0, as it should
            exact = 0.5 * h * (0.5 / np.cosh(x) ** 2 / (p * p) - np.tanh(x) / (p * p * p))
        p2 = psi * psi
        series = 0.25 * h * (-1.0 / 6.0 + p2 / 30.0 - 17.0 * p2 * p2 / 3360.0)
        kappa = np.where(small, series, exact)
        return np.maximum(lam + m * m * kappa, 0.0), 0.5 * m * kappa, 0.25 * kappa

    def value(self, m, s, y):
        rows = self._rows(m, s, y, 0)
        if rows is not None:
            return rows[0]
        psi = np.sqrt(m * m + s)
        excess, _ = _excess_root(m, s)
        return self.h * (0.5 * excess + np.log1p(np.exp(-psi)) + np.maximum(-y * m, 0.0))

    def expected_augmentation(self, m, s, y):
        return (self._mean_pg(np.sqrt(m * m + s)),)

    def draw_augmentation(self, m, s, y, rng):
        return (polya_gamma(self.h, np.sqrt(m * m + s), rng),)

    def system_weights(self, aug, y):
        (lam,) = aug
        return lam, 0.5 * self.h * y


class EpsilonInsensitiveLoss(Loss):
    """Expected epsilon-insensitive loss for regression.

    With ``Delta_n = y_n - (w.x~_n + b)``, ``e+ = (y - m - eps)^2 + s`` and
    ``e- = (y - m + eps)^2 + s``::

        term_n = C (sqrt(e+_n) + sqrt(e-_n) - 2 eps)

    (``2 C max(0, |Delta_n| - eps)`` at zero noise). Two augmentation variables,
    ``u ~ IG(1 / (C sqrt(e+)), 1)``, ``u' ~ IG(1 / (C sqrt(e-)), 1)``; system weights
    ``rho = C^2 (u + u')``, ``t = C^2 (u (y - eps) + u' (y + eps))``.

    Parameters
    ----------
    C : float > 0
    epsilon : float >= 0

    Examples
    --------
    >>> loss = EpsilonInsensitiveLoss(C=1.0, epsilon=0.5)
    >>> loss.value(np.zeros(3), np.zeros(3), np.array([0.2, 1.0, -2.0])).tolist()
    [0.0, 1.0, 3.0]
    """

    name = "epsilon_insensitive"
    n_augmentation = 2
    binary = False

    def __init__(self, C=1.0, epsilon=0.1):
        self.C = check_scalar(C, "C", min_val=0.0, include_min=False)
        self.epsilon = check_scalar(epsilon, "epsilon", min_val=0.0)

    def _params(self):
        return {"C": self.C, "epsilon": self.epsilon}

    def terms(self, m, s, y):
        C, eps = self.c, self.epsilon
        r = y - m
        ap, am = r - eps, r + eps
        exc_p, root_p = _excess_root(ap, s)
        exc_m, root_m = _excess_root(am, s)
        value = C * (exc_p + exc_m + 2.0 * np.maximum(np.abs(r) - eps, 0.0))
        rp, rm = np.maximum(root_p, ROOT_FLOOR), np.maximum(root_m, ROOT_FLOOR)
        d_m = -C * (ap / rp + am / rm)
        d_s = 0.5 * C * (1.0 / rp + 1.0 / rm)
        return value, d_m, d_s

    def expected_augmentation(self, m, s, y):
        r = y - m
        eps = self.epsilon
        root_p = np.maximum(np.sqrt((r - eps) ** 2 + s), ROOT_FLOOR)
        root_m = np.maximum(np.sqrt((r + eps) ** 2 + s), ROOT_FLOOR)
        return 1.0 / (self.c * root_p), 1.0 / (self.c * root_m)

    def draw_augmentation(self, m, s, y, rng):
        r = y - m
        eps = self.epsilon
        with np.errstate(divide="ignore"):
            mean_p = 1.0 / (self.c * np.sqrt((r - eps) ** 2 + s))
            mean_m = 1.0 / (self.c * np.sqrt((r + eps) ** 2 + s))
        return inverse_gaussian(mean_p, rng), inverse_gaussian(mean_m, rng)

    def system_weights(self, aug, y):
        u, u2 = aug
        c2 = self.c * self.c
        eps = self.epsilon
        return c2 * (u + u2), c2 * (u * (y - eps) + u2 * (y + eps))

    smooth = False

    def curvature(self, m, s, y):
        r = y - m
        p = _root_curvature(r - self.epsilon, s, self.c)
        q = _root_curvature(r + self.epsilon, s, self.c)
        return p[0] + q[0], p[1] + q[1], p[2] + q[2]

    def kinks(self, y):
        # 2C max(0, |y - m| - eps): kinks at y -+ eps, slopes -2C, 0, 2C
        c2 = 2.0 * self.c * np.ones(y.shape[0])
        slopes = np.column_stack([-c2, np.zeros_like(c2), c2])
        return np.column_stack([y - self.epsilon, y + self.epsilon]), slopes


class SquaredLoss(Loss):
    """Expected squared loss (MCF-quadratic, van der Maaten et al. 2013).

    The hinge surrogate with margin ``l = 0`` and weights fixed at ``gamma = 1/C``::

        term_n = (C/2) E (y_n - w.x~_n - b)^2 = (C/2) ((y_n - m_n)^2 + s_n)

    System weights ``rho_n = C``, ``t_n = C y_n``. There is no augmentation: one IRLS step
    is the closed-form solution
    ``theta = (2 I' + C (Xbar^T Xbar + diag(sum_n vbar_n)))^{-1} C Xbar^T y``.

    Parameters
    ----------
    C : float > 0
    binary : bool, default=True
        Whether targets must be labels in {-1, +1} (classification) or any reals.

    Examples
    --------
    >>> SquaredLoss(C=2.0).value(np.array([0.5]), np.array([0.25]), np.array([1.0])).tolist()
    [0.5]
    """

    name = "squared"
    n_augmentation = 0

    def __init__(self, C=1.0, binary=True):
        self.C = check_scalar(C, "C", min_val=0.0, include_min=False)
        self.binary = bool(binary)

    def terms(self, m, s, y):
        C = self.c
        r = y - m
        return 0.5 * C * (r * r + s), -C * r, 0.5 * C * np.ones_like(m)

    def expected_augmentation(self, m, s, y):
        return ()

    def draw_augmentation(self, m, s, y, rng):
        return ()

    def curvature(self, m, s, y):
        return self.c * np.ones_like(m), np.zeros_like(m), np.zeros_like(m)

    def system_weights(self, aug, y):
        return self.c * np.ones(y.shape), self.c * y


def make_loss(name, **params):
    """Build a loss by name: ``"hinge"``, ``"logistic"``, ``"epsilon_insensitive"``, ``"squared"``.

    Examples
    --------
    >>> make_loss("hinge", C=2.0, margin=0.5)
    HingeLoss(C=2.0, margin=0.5)
    """
    table = {
        "hinge": HingeLoss,
        "logistic": LogisticLoss,
        "epsilon_insensitive": EpsilonInsensitiveLoss,
        "squared": SquaredLoss,
    }
    if name not in table:
        raise ValueError(f"loss must be one of {sorted(table)}, got {name!r}")
    return table[name](**params)
