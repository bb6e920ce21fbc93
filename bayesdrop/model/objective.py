"""The collapsed objective ``J`` every solver minimises and every sampler targets.

``J(theta) = ||w||^2 + sum_n term(m_n, s_n, y_n)`` (MATH.md section 2): the penalty, plus
each example's bound on ``2C E[loss]`` through its mean score ``m_n`` and score variance
``s_n`` under the noise. ``exp(-J)`` is the pseudo-posterior of the Gibbs sampler.
"""

from __future__ import annotations

import numpy as np

__all__ = ["check_theta", "objective", "penalised", "terms_many", "value_and_gradient"]


def penalised(w, terms):
    """``J = ||w||^2 + sum_n term_n`` from the weights and each example's term of ``J``
    (of scores already computed): how every in-memory engine sums ``J``.

    Examples
    --------
    >>> penalised(np.array([1.0, 2.0]), np.array([0.5, 0.25]))
    5.75
    """
    return float(w @ w + np.sum(terms))


def terms_many(design, loss, y, thetas):
    """Each example's (weighted) term of ``J`` at each parameter vector of ``thetas``
    (one per row): shape (n_thetas, n_samples).

    The scores of all of them by one product with the design
    (:meth:`bayesdrop.model.design.Design.scores_many`), the terms by the loss's numpy
    method one vector at a time (:meth:`bayesdrop.model.losses.Loss.value` on 1-D rows:
    the kernels a fit has compiled, and the logistic loss's SIMD rows).

    Examples
    --------
    >>> from bayesdrop import Design, HingeLoss
    >>> design = Design(np.array([[1.0, 2.0], [-1.0, 0.5]]), "none")
    >>> terms_many(design, HingeLoss(1.0), np.array([1.0, -1.0]), np.zeros((2, 3))).tolist()
    [[2.0, 2.0], [2.0, 2.0]]
    """
    m, s = design.scores_many(thetas)
    out = np.empty(m.shape)
    for k in range(m.shape[0]):
        out[k] = loss.value(m[k], s[k], y)
    return out


def objective(design, loss, y, theta, *, gradient=True):
    """Collapsed objective ``J(theta) = ||w||^2 + sum_n term(m_n, s_n, y_n)``.

    Parameters
    ----------
    design : Design
        Mean design and noise variances.
    loss : Loss
    y : ndarray of shape (n_samples,)
    theta : ndarray of shape (n_params,)
        ``(w, b)``.
    gradient : bool, default=True
        Also return the gradient::

            dJ/dw = 2 w + X^T d_m + 2 (sum_n d_s_n Cov_n) w,    dJ/db = sum_n d_m

        (``Cov_n = diag(v_n)`` for the linear models, so the last term is
        ``2 w * (V^T d_s)``).

    Returns
    -------
    value : float
    grad : ndarray of shape (n_params,), only if ``gradient``

    Raises
    ------
    TypeError
        ``design`` not a :class:`~bayesdrop.model.design.Design`, ``loss`` not a
        :class:`~bayesdrop.model.losses.Loss`.
    ValueError
        ``y`` not a finite vector of ``n_samples`` targets (labels in ``{-1, +1}`` for a
        binary loss), ``theta`` not finite or not of shape ``(n_params,)``.

    Examples
    --------
    >>> from bayesdrop import Design, HingeLoss
    >>> design = Design(np.array([[1.0, 2.0], [-1.0, 0.5]]), "none")
    >>> J, grad = objective(design, HingeLoss(1.0), np.array([1.0, -1.0]), np.zeros(3))
    >>> float(J), grad.tolist()  # 2C sum max(0, 1 - y m) at theta = 0
    (4.0, [-4.0, -3.0, 0.0])
    """
    from .design import Design
    from .losses import Loss

    if not isinstance(design, Design):
        raise TypeError(f"design must be a Design, got {type(design).__name__}")
    if not isinstance(loss, Loss):
        raise TypeError(f"loss must be a Loss, got {type(loss).__name__}")
    y = loss.check_target(y, design.n_samples)
    return value_and_gradient(design, loss, y, check_theta(design, theta), gradient)


def check_theta(design, theta, name="theta"):
    """``theta`` as a float64 vector of shape ``(design.n_params,)``, finite; a
    ``ValueError`` naming it (``name``) otherwise (no NaN ``J``, no error from inside the
    products).

    Examples
    --------
    >>> from bayesdrop import Design
    >>> check_theta(Design(np.ones((2, 2))), [0, 1, 2]).tolist()
    [0.0, 1.0, 2.0]
    >>> check_theta(Design(np.ones((2, 2))), [0, 1])
    Traceback (most recent call last):
    ...
    ValueError: theta must have shape (3,) (the coefficients, then the intercept if fitted), got (2,)
    """
    try:
        theta = np.asarray(theta, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a vector of real numbers: {exc}") from None
    n = design.n_params
    if theta.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},) (the coefficients, then the "
                         f"intercept if fitted), got {theta.shape}")
    if not np.all(np.isfinite(theta)):
        raise ValueError(f"{name} contains NaN or infinity")
    return theta


def value_and_gradient(design, loss, y, theta, gradient=True):
    """:func:`objective` of inputs already checked (``y`` the loss's targets, ``theta``
    by :func:`check_theta`): what :meth:`bayesdrop.model.problem.Problem.objective`
    computes."""
    w, _ = design.split(theta)
    m, s = design.scores(theta)
    value, d_m, d_s = loss.terms(m, s, y)
    J = penalised(w, value)
    if not gradient:
        return J
    if design.diagonal_noise:  # (sum_n d_s_n diag(v_n)) w = (V^T d_s) * w
        grad, nd = design.rmatvec_pair(d_m, d_s)
        grad[: design.n_features] += 2.0 * (w + nd * w)
        return J, grad
    grad = design.rmatvec(d_m)
    grad[: design.n_features] += 2.0 * (w + design.noise_apply(d_s, w))
    return J, grad
