"""The losses' compiled per-example kernels, and the calls every engine makes.

A loss (MATH.md section 3) is four compiled functions of one example, registered with
:func:`register` for the loss's parameter type -- a :class:`typing.NamedTuple` whose
first field is ``C`` (every term is linear in it):

``term(p, m, s, y, derivs)``
    the example's term of ``J`` at unit weight and its derivatives in the score mean
    ``m`` and variance ``s``: ``(value, d_m, d_s, d_mm, d_ms, d_ss)``; ``derivs`` 0 the
    value only, 1 also the first derivatives, 2 also the second ones. It may leave the
    value out (0) when derivatives are asked for if the loss also registers
    ``term_and_value``, the same kernel with the value (:func:`term_and_value`).
``mean(p, c, m, s, y)``
    the conditional means of the augmentation variables and the system weights they
    give, ``(a1, a2, rho, t)`` (IRLS; floored, see :data:`ROOT_FLOOR`);
``draw(p, c, m, s, y, rng, tables, i)``
    a draw of the augmentation variables and the system weights, ``(a1, a2, rho, t)``
    (the Gibbs sweep; ``tables`` are the loss's :meth:`Loss.draw_tables`, ``i`` the
    example's index in them);
``system(p, c, a1, a2, y)``
    the system weights ``(rho, t)`` of given augmentation variables.

``c = C w_n`` is the example's constant (its weight ``w_n`` times ``C``). The system is
MATH.md section 4's ``A = 2 I' + sum_n rho_n (xbar_n xbar_n^T + diag(vbar_n))``,
``r = sum_n t_n xbar_n``: **a loss supplies per-example weights; a solver plugs in their
expectations (``mean``), the sampler plugs in draws (``draw``)**.

The engines (Newton, L-BFGS, IRLS, the Hessian, the latent model, the Gibbs sweeps) call
the generic :func:`term`, :func:`term_and_value`, :func:`mean`, :func:`draw` and
:func:`system` with the parameter tuple; numba resolves them to the registered kernels
when it compiles the engine for that tuple's type, so each engine is compiled for the
one loss it runs (and cached on disk per loss). No engine knows which losses exist.
The sweeps draw through :func:`draws_loop`, whose loop is compiled per loss with the
draw kernel inlined (a draw kernel declares ``inline="always"``; see
:func:`draw_rows`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ... import _jit

__all__ = ["ROOT_FLOOR", "LossKernels", "register", "kernels_of", "has_kernels", "require", "term",
           "term_and_value", "mean", "draw", "system", "root_terms", "root_value", "terms_loop",
           "terms_curvature", "means_loop", "draws_loop", "system_loop", "ridge",
           "objective_from_scores"]

#: Floor on ``sqrt(E zeta^2)`` (hinge) and ``sqrt(E (Delta -+ eps)^2)``
#: (epsilon-insensitive) in the IRLS weights and the derivatives (never in ``J``'s value).
ROOT_FLOOR = 1e-9


class LossKernels(NamedTuple):
    """The compiled kernels of one loss (see the module docstring)."""

    term: object
    mean: object = None
    draw: object = None
    system: object = None
    term_and_value: object = None


#: parameter type -> :class:`LossKernels`
_REGISTRY: dict = {}


def register(params_type, *, term, mean=None, draw=None, system=None,
             term_and_value=None):
    """Register the compiled kernels of the loss whose parameters are ``params_type``.

    Parameters
    ----------
    params_type : NamedTuple class
        The loss's parameter tuple (first field ``C``); :attr:`Loss.kernel_params`
        returns one.
    term : numba dispatcher
        The term kernel (module docstring): enough for Newton, L-BFGS, the Hessian and
        the latent model.
    mean, draw, system : numba dispatchers, optional
        The augmentation's kernels (module docstring): IRLS needs ``mean``, the Gibbs
        sampler ``draw`` and ``system``. A loss without an exact augmentation leaves them
        out; the engines that need them then refuse it with a TypeError.
    term_and_value : numba dispatcher, optional
        A kernel like ``term`` that always returns the value, for a ``term`` that leaves
        it out when derivatives are asked for (a cheaper pass for the callers that need
        only the derivatives); by default ``term`` itself.
    """
    if not (isinstance(params_type, type) and issubclass(params_type, tuple)
            and getattr(params_type, "_fields", ())[:1] == ("C",)):
        raise TypeError("params_type must be a NamedTuple class whose first field is C")
    _REGISTRY[params_type] = LossKernels(term, mean, draw, system,
                                         term if term_and_value is None else term_and_value)


def _foreign(types):
    """Whether any of ``types`` is, or holds (an evaluator's tuple of data), the parameter
    tuple of a loss defined outside bayesdrop (a user's script, a notebook, a test
    module)."""
    for ty in types:
        cls = getattr(ty, "instance_class", None)
        if cls in _REGISTRY and not cls.__module__.startswith("bayesdrop."):
            return True
        if isinstance(getattr(ty, "types", None), tuple) and _foreign(ty.types):
            return True
    return False


@_jit.on_load
def _keep_foreign_engines_in_memory(numba):
    """numba's :meth:`numba.core.caching.Cache.save_overload`, except for engines
    compiled for a loss defined outside bayesdrop. numba keeps all compiled versions of a
    function in one index file and unpickles every key when it loads it; a key naming a
    class of ``__main__`` or of a module another process cannot import would make every
    later load of that engine fail (``ModuleNotFoundError``). Such engines are compiled
    in memory only, once per process."""
    from numba.core import caching

    save = caching.Cache.save_overload

    def save_overload(self, sig, data):
        args = getattr(getattr(data, "signature", None), "args", ())
        if _foreign(args):
            return None
        return save(self, sig, data)

    caching.Cache.save_overload = save_overload


@_jit.on_load
def _registry_dispatchers(numba):
    """The registered kernels as numba dispatchers once numba is loaded (the compiled
    engines' overloads return calls of them)."""
    for key, entry in list(_REGISTRY.items()):
        _REGISTRY[key] = LossKernels(*(_jit.resolve(k) for k in entry))


def kernels_of(params):
    """The :class:`LossKernels` of a parameter tuple (or its type), or None."""
    key = params if isinstance(params, type) else type(params)
    return _REGISTRY.get(key)


def has_kernels(loss, *names):
    """Whether ``loss`` has compiled kernels, with each of ``names`` (``"mean"``,
    ``"draw"``, ``"system"``) among them."""
    params = getattr(loss, "kernel_params", None)
    entry = None if params is None else kernels_of(params)
    return entry is not None and all(getattr(entry, name) is not None for name in names)


def require(loss, name, purpose):
    """Raise a TypeError unless ``loss`` has the kernel ``name`` (needed for
    ``purpose``)."""
    if not has_kernels(loss, name):
        raise TypeError(f"{type(loss).__name__} has no compiled {name!r} kernel "
                        f"(bayesdrop.model.losses.kernels.register): {purpose}")


def _entry(p):
    """The registry entry of a numba type (a NamedTuple type), or None."""
    return _REGISTRY.get(getattr(p, "instance_class", None))


def _python(p):
    entry = kernels_of(p)
    if entry is None:
        raise TypeError(f"no kernels are registered for {type(p).__name__}")
    return entry


# The generic calls. From Python they call the registered kernel; in compiled code numba
# replaces them by the kernel of the argument's type (the overloads below).

def term(p, m, s, y, derivs):
    """The example's term and its derivatives (module docstring)."""
    return _python(p).term(p, m, s, y, derivs)


def mean(p, c, m, s, y):
    """The expected augmentation and system weights (module docstring)."""
    return _python(p).mean(p, c, m, s, y)


def draw(p, c, m, s, y, rng, tables, i):
    """A draw of the augmentation and its system weights (module docstring)."""
    return _python(p).draw(p, c, m, s, y, rng, tables, i)


def system(p, c, a1, a2, y):
    """The system weights of given augmentation variables (module docstring)."""
    return _python(p).system(p, c, a1, a2, y)


def term_and_value(p, m, s, y, derivs):
    """:func:`term` with the value filled in whatever ``derivs``."""
    return _python(p).term_and_value(p, m, s, y, derivs)


_JIT = {"cache": True, "nogil": True}


def _kernel(p, name):
    """The registered kernel ``name`` of a numba parameter type, or None."""
    entry = _entry(p)
    return None if entry is None else getattr(entry, name)


def _dispatch(generic, name):
    """Overload ``generic`` in compiled code: for a registered parameter type, a call of
    the loss's kernel ``name``."""
    def typer(p, *args):
        fn = _kernel(p, name)
        return None if fn is None else (lambda p, *args: fn(p, *args))

    _jit.overload(generic, jit_options=_JIT)(typer)


for _generic, _name in ((term, "term"), (term_and_value, "term_and_value"), (mean, "mean"),
                        (draw, "draw"), (system, "system")):
    _dispatch(_generic, _name)


def draw_rows(p, m, s, y, sw, rng, tables, a1, a2, rho, t):
    """Every example's augmentation draw and system weights (:func:`draws_loop`)."""
    draws_loop(p, m, s, y, sw, rng, tables, a1, a2, rho, t)


@_jit.overload(draw_rows, jit_options=_JIT)
def _draw_rows_overload(p, m, s, y, sw, rng, tables, a1, a2, rho, t):
    # The loop over examples, compiled per loss with its draw kernel referenced directly
    # (not through the generic draw), so that numba inlines a kernel declared
    # inline="always" into the loop before typing: a draw is called once per example and
    # sweep, and the logistic draw's tables passed to a separate function each time cost
    # 12-30% of a sweep (typed inlining of the generic call instead cost 2.5 s of compile
    # time).
    fn = _kernel(p, "draw")
    if fn is None:
        return None

    def impl(p, m, s, y, sw, rng, tables, a1, a2, rho, t):
        for i in range(m.shape[0]):
            a1[i], a2[i], rho[i], t[i] = fn(p, p.C * sw[i], m[i], s[i], y[i], rng, tables, i)
    return impl


@_jit.njit(cache=True, nogil=True, inline="always")
def root_value(a, s, C):
    """The value of :func:`root_terms` alone, ``C (sqrt(a^2 + s) - |a|)`` (the same
    operations; 0 at ``s = 0`` without them): a loss's ``term`` at ``derivs = 0``."""
    if s == 0.0:
        return 0.0
    denom = math.sqrt(a * a + s) + abs(a)
    return C * (s / denom) if denom > 0.0 else 0.0


@_jit.njit(cache=True, nogil=True)
def root_terms(a, s, C):
    """``C (sqrt(a^2 + s) - |a|)`` (cancellation-free) and the derivatives of
    ``C sqrt(a^2 + s)`` for ``da/dm = -1``: ``(value, d_m, d_s, d_mm, d_ms, d_ss)`` with
    ``d_m = -C a / R``, ``d_s = C / (2R)``, ``d_mm = C s / R^3``, ``d_ms = C a / (2 R^3)``,
    ``d_ss = -C / (4 R^3)``, ``R = max(sqrt(a^2 + s), ROOT_FLOOR)``."""
    root = math.sqrt(a * a + s)
    denom = root + abs(a)
    excess = s / denom if denom > 0.0 else 0.0
    R = max(root, ROOT_FLOOR)
    c3 = C / (R * R * R)
    return C * excess, -C * a / R, 0.5 * C / R, c3 * s, 0.5 * c3 * a, -0.25 * c3


# Loops over examples (the numpy methods of :class:`bayesdrop.model.losses.Loss` and the
# engines' row passes).

@_jit.njit(cache=True, nogil=True)
def terms_loop(p, m, s, y, sw, derivs, value, d_m, d_s):
    """Every example's weighted term (and with ``derivs=1`` its first derivatives)."""
    for i in range(m.shape[0]):
        out = term_and_value(p, m[i], s[i], y[i], derivs)
        w = sw[i]
        value[i] = w * out[0]
        if derivs > 0:
            d_m[i] = w * out[1]
            d_s[i] = w * out[2]


@_jit.njit(cache=True, nogil=True)
def ridge(theta, D):
    """``||w||^2 = sum_{d < D} theta_d^2``, the prior's term of ``J`` (the intercept,
    ``theta_D``, is not penalised)."""
    total = 0.0
    for d in range(D):
        total += theta[d] * theta[d]
    return total


@_jit.njit(cache=True, nogil=True)
def objective_from_scores(p, y, sw, m, s, penalty, terms, u, a, c, delta):
    """``J = penalty + sum_n sw_n term_n`` from the scores ``(m, s)`` -- ``J`` of the
    compiled dense engines (Newton's loop, the Gibbs sweeps' ``lp`` and MH moves), in
    one place. With ``delta != 0`` the scores are those of ``theta + delta v`` on a line,
    ``m_n + delta u_n`` and ``max(s_n + delta (2 a_n + delta c_n), 0)`` (``u = Xbar v``,
    ``a_n = V_n . (w v_w)``, ``c_n = V_n . v_w^2``; the caller's ``penalty`` is then
    ``||w + delta v_w||^2``); with ``delta = 0``, ``u``, ``a`` and ``c`` are not read.
    Each example's weighted term is also written to ``terms`` unless it is empty."""
    keep = terms.shape[0] > 0
    shifted = delta != 0.0
    value = penalty
    for i in range(m.shape[0]):
        mi = m[i]
        si = s[i]
        if shifted:
            mi = m[i] + delta * u[i]
            si = max(s[i] + delta * (2.0 * a[i] + delta * c[i]), 0.0)
        ti = sw[i] * term(p, mi, si, y[i], np.int64(0))[0]
        if keep:
            terms[i] = ti
        value += ti
    return value


@_jit.njit(cache=True, nogil=True)
def terms_curvature(p, m, s, y, sw, value, d_m, d_s, d_mm, d_ms, d_ss):
    """Every example's (weighted) term of ``J`` and its first and second derivatives in
    ``(m, s)``, written to the six output arrays (one pass, no temporaries)."""
    for i in range(m.shape[0]):
        out = term_and_value(p, m[i], s[i], y[i], np.int64(2))
        w = sw[i]
        value[i] = w * out[0]
        d_m[i] = w * out[1]
        d_s[i] = w * out[2]
        d_mm[i] = w * out[3]
        d_ms[i] = w * out[4]
        d_ss[i] = w * out[5]


@_jit.njit(cache=True, nogil=True)
def means_loop(p, m, s, y, sw, a1, a2, rho, t):
    """Every example's expected augmentation and system weights (``c = C w_n``)."""
    for i in range(m.shape[0]):
        a1[i], a2[i], rho[i], t[i] = mean(p, p.C * sw[i], m[i], s[i], y[i])


@_jit.njit(cache=True, nogil=True)
def draws_loop(p, m, s, y, sw, rng, tables, a1, a2, rho, t):
    """Every example's augmentation draw and system weights, in example order from one
    generator (the compiled Gibbs sweeps' augmentation step; the loop of
    :func:`draw_rows`, compiled per loss)."""
    draw_rows(p, m, s, y, sw, rng, tables, a1, a2, rho, t)


@_jit.njit(cache=True, nogil=True)
def system_loop(p, y, sw, a1, a2, rho, t):
    """Every example's system weights from given augmentation variables."""
    for i in range(y.shape[0]):
        rho[i], t[i] = system(p, p.C * sw[i], a1[i], a2[i], y[i])
