"""The :class:`Loss` base class: a loss's numpy methods, over its compiled kernels.

Every loss enters the collapsed objective through per-example terms that depend on the
example only via the mean score ``m_n = w.x_n + b`` and the score variance under the
noise ``s_n = sum_d v_nd w_d^2`` (MATH.md sections 2-3)::

    J(w, b) = ||w||^2 + sum_n term(m_n, s_n, y_n)

A loss is its parameter tuple (:attr:`Loss.kernel_params`) and four compiled per-example
kernels registered for that tuple's type (:mod:`bayesdrop.model.losses.kernels`). The
numpy methods below run those kernels over arrays; every engine (Newton, IRLS, the
Hessian, L-BFGS, the latent model, the Gibbs sweeps) calls the same kernels compiled
into its own loop. So a loss is defined once, and a new one (``docs/architecture.md``,
"Add a loss") is a parameter tuple, four kernels and a subclass naming them.

* :meth:`Loss.terms` -- the term and its partial derivatives in ``m`` and ``s`` (the
  gradient of ``J`` follows by the chain rule, :func:`bayesdrop.model.objective`);
* :meth:`Loss.expected_augmentation` / :meth:`Loss.irls_weights` -- the conditional
  means of the augmentation variables and the system weights they give (IRLS);
* :meth:`Loss.draw_augmentation` -- a draw of the augmentation variables (Gibbs);
* :meth:`Loss.system_weights` -- the per-example weight ``rho_n`` and target ``t_n`` of
  the shared weighted least-squares system (:mod:`bayesdrop.linalg.wls`)::

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

from ..._validation import as_float_vector, check_binary_labels, check_C
from . import kernels as _k

__all__ = ["Loss"]


def _rows(loss, *arrays):
    """The arrays broadcast to one shape and flattened (C-contiguous float64), the
    per-example weights likewise, and the shape."""
    arrays = np.broadcast_arrays(*[np.asarray(a, dtype=np.float64) for a in arrays])
    shape = arrays[0].shape
    flat = [np.ascontiguousarray(a).reshape(-1) for a in arrays]
    if loss.weights is None:
        sw = np.ones(flat[0].shape[0])
    else:
        sw = np.ascontiguousarray(np.broadcast_to(loss.weights, shape)).reshape(-1)
    return flat, sw, shape


class Loss(ABC):
    """Base class of the augmented losses. See the module docstring for the contract.

    A subclass sets :attr:`name`, :attr:`n_augmentation`, :attr:`binary` and
    :attr:`smooth`, and returns its parameter tuple from :attr:`kernel_params`; the
    tuple's type has kernels registered with
    :func:`bayesdrop.model.losses.kernels.register`.
    """

    name = "base"
    #: number of augmentation variables per example (0, 1 or 2)
    n_augmentation = 1
    #: whether targets are class labels in {-1, +1}
    binary = True
    #: whether the term is twice differentiable in ``m`` at zero score variance
    smooth = True
    #: per-example weights ``w_n > 0`` (None: all 1); see :meth:`weighted`
    weights = None
    #: modelled nanoseconds per example of the compiled ``draw`` and ``term`` kernels
    #: (measured on a 2-core x86-64 machine); only the sampler's schedule of moves reads
    #: them (:func:`bayesdrop.samplers.schedule.move_costs`), never a result
    draw_ns = 50.0
    term_ns = 5.0

    @property
    @abstractmethod
    def kernel_params(self):
        """The parameter tuple the compiled kernels take (first field ``C``)."""

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
        >>> from bayesdrop.model.losses import HingeLoss
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

    def with_C(self, C):
        """This loss at another ``C`` (its weights and other parameters kept): the losses
        of a regularisation path (:func:`bayesdrop.solvers.fit_path`).

        Examples
        --------
        >>> from bayesdrop.model.losses import HingeLoss
        >>> loss = HingeLoss(C=1.0).weighted(np.array([1.0, 3.0])).with_C(2.0)
        >>> loss.C, loss.c.tolist(), loss.kernel_params
        (2.0, [2.0, 6.0], HingeParams(C=2.0, margin=1.0))
        """
        new = copy.copy(self)
        new.C = check_C(C)
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

    # -- the numpy methods: the compiled kernels over arrays ---------------------------

    def terms(self, m, s, y):
        """``(value, d value / d m, d value / d s)`` per example (the kernel ``term``)."""
        (m, s, y), sw, shape = _rows(self, m, s, y)
        value, d_m, d_s = (np.empty(m.shape[0]) for _ in range(3))
        _k.terms_loop(self.kernel_params, m, s, y, sw, np.int64(1), value, d_m, d_s)
        return value.reshape(shape), d_m.reshape(shape), d_s.reshape(shape)

    def value(self, m, s, y):
        """Per-example term of ``J`` only (no derivatives); see :meth:`terms`."""
        (m, s, y), sw, shape = _rows(self, m, s, y)
        value = np.empty(m.shape[0])
        _k.terms_loop(self.kernel_params, m, s, y, sw, np.int64(0), value, value, value)
        return value.reshape(shape)

    def curvature(self, m, s, y):
        """Second derivatives ``(d2/dm2, d2/dm ds, d2/ds2)`` of the term per example.

        With :meth:`terms` they give Newton's Hessian of ``J``
        (:func:`bayesdrop.linalg.hessian.hessian_matrix`). Where the term has a kink
        (``s = 0`` on the margin of the hinge / tube of the epsilon-insensitive loss) the
        values are those at the floored root :data:`ROOT_FLOOR`.
        """
        return Loss.terms_curvature(self, m, s, y)[3:]

    def terms_curvature(self, m, s, y):
        """:meth:`terms` and :meth:`curvature` in one pass: ``(value, d_m, d_s, d_mm,
        d_ms, d_ss)``."""
        (m, s, y), sw, shape = _rows(self, m, s, y)
        out = [np.empty(m.shape[0]) for _ in range(6)]
        _k.terms_curvature(self.kernel_params, m, s, y, sw, *out)
        return tuple(o.reshape(shape) for o in out)

    def _means(self, m, s, y):
        _k.require(self, "mean", "its augmentation's expectations (IRLS) are not defined; "
                   "fit with solver='newton' or 'lbfgs'")
        (m, s, y), sw, shape = _rows(self, m, s, y)
        out = [np.empty(m.shape[0]) for _ in range(4)]
        _k.means_loop(self.kernel_params, m, s, y, sw, *out)
        return [o.reshape(shape) for o in out]

    def expected_augmentation(self, m, s, y):
        """Conditional means of the augmentation variables given ``(m, s)`` (the kernel
        ``mean``): a tuple of :attr:`n_augmentation` arrays."""
        return tuple(self._means(m, s, y)[:self.n_augmentation])

    def irls_weights(self, m, s, y):
        """``(rho, t)`` with the augmentation variables at their conditional means."""
        return tuple(self._means(m, s, y)[2:])

    def draw_tables(self, c):
        """Tables the ``draw`` kernel reads for examples of constants ``c`` (none here)."""
        return ()

    def draw_augmentation(self, m, s, y, rng):
        """Draw the augmentation variables from their conditional law given ``(m, s)``
        (the kernel ``draw``, in example order).

        Returns a tuple like :meth:`expected_augmentation`; ``rng`` is a
        :class:`numpy.random.Generator`. No floor is applied: a zero root gives the exact
        limit law (Levy for the inverse-Gaussian augmentations).
        """
        _k.require(self, "draw", "it has no augmentation to sample")
        (m, s, y), sw, shape = _rows(self, m, s, y)
        out = [np.empty(m.shape[0]) for _ in range(4)]
        p = self.kernel_params
        _k.draws_loop(p, m, s, y, sw, rng, self.draw_tables(p.C * sw), *out)
        return tuple(o.reshape(shape) for o in out[:self.n_augmentation])

    def system_weights(self, aug, y):
        """Per-example ``(rho, t)`` of the weighted least-squares system (the kernel
        ``system``)."""
        _k.require(self, "system", "it has no augmentation to sample")
        aug = tuple(aug) + (np.zeros(np.shape(y)),) * (2 - len(aug))
        (a1, a2, y), sw, shape = _rows(self, aug[0], aug[1], y)
        rho, t = np.empty(y.shape[0]), np.empty(y.shape[0])
        _k.system_loop(self.kernel_params, y, sw, a1, a2, rho, t)
        return rho.reshape(shape), t.reshape(shape)

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
