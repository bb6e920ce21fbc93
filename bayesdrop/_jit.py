"""numba, imported when a compiled kernel is first needed -- not by ``import bayesdrop``.

Every compiled function of bayesdrop is declared with :func:`njit` (numba's options),
and every registration with numba's extension API with :func:`overload`,
:func:`jitable`, :func:`intrinsic` or :func:`on_load`. Until numba is needed these are
plain Python objects: importing numba (about 0.15 s) and its first dispatch in a process
(the typing and target contexts, about 0.25 s, even when the machine code comes from
numba's on-disk cache) are paid by the first call that needs compiled code, not by the
import. At that moment :func:`load` imports numba, turns every declared kernel into a
numba dispatcher with its options, replaces the kernels in the modules' namespaces by
their dispatchers (so that compiled callers see dispatchers, and the machine code and
its cache are those of plain ``numba.njit``) and runs the registrations, once.

A kernel called from Python before that loads numba and runs compiled -- unless the
caller runs under :func:`interpreted`: then the kernel's own Python function runs (the
same source, executed by the interpreter, as with ``NUMBA_DISABLE_JIT``). The estimators
do so for the first small dense fit of a process (:func:`interpret_first`), where the
interpreter is faster than loading numba: a process that fits breast cancer once and
exits never imports numba.
"""

from __future__ import annotations

import sys
import threading
from contextlib import contextmanager, nullcontext

__all__ = ["Kernel", "Lazy", "interpret_first", "interpreted", "interpreting", "intrinsic",
           "jitable", "load", "loaded", "njit", "on_load", "overload", "prange", "resolve"]

_lock = threading.RLock()
_lazy: list = []  # every Lazy declared before load()
_hooks: list = []  # registrations run at load()
_numba = None
_state = threading.local()
_first_done = False


class Lazy:
    """A numba object made by ``factory(numba)`` at :func:`load`; before that, a call
    runs ``py_func`` under :func:`interpreted` and loads numba otherwise."""

    def __init__(self, factory, py_func):
        self._factory = factory
        self.py_func = py_func
        self._obj = None
        for attr in ("__name__", "__qualname__", "__doc__", "__module__"):
            value = getattr(py_func, attr, None)
            if value is not None:
                setattr(self, attr, value)
        self.__wrapped__ = py_func  # inspect.unwrap and doctest find the source here

    def _make(self, numba):
        if self._obj is None:
            self._obj = self._factory(numba)
        return self._obj

    @property
    def dispatcher(self):
        """The numba object (numba is loaded if it is not)."""
        load()
        return self._obj

    def __call__(self, *args, **kwargs):
        obj = self._obj
        if obj is not None:
            return obj(*args, **kwargs)
        if interpreting():
            return self.py_func(*args, **kwargs)
        return self.dispatcher(*args, **kwargs)

    def __getattr__(self, name):
        if name.startswith("__") or name in ("_factory", "_obj", "py_func"):
            raise AttributeError(name)
        return getattr(self.dispatcher, name)

    def __reduce__(self):
        # by reference, as a module-level function pickles: the receiving process finds
        # the kernel (or, numba loaded there, its dispatcher) under the same name
        return _by_name, (self.py_func.__module__, self.py_func.__qualname__)

    def __repr__(self):
        return f"<bayesdrop kernel {getattr(self, '__qualname__', '?')} (numba not loaded)>"


def _by_name(module, qualname):
    import importlib

    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


class Kernel(Lazy):
    """A function declared with :func:`njit`: ``numba.njit(**options)(py_func)`` once
    numba is loaded."""

    def __init__(self, py_func, options):
        super().__init__(lambda numba: numba.njit(**options)(py_func), py_func)


def _declare(obj):
    with _lock:
        if _numba is not None:
            return obj._make(_numba)
        _lazy.append(obj)
        return obj


def njit(*args, **options):
    """``numba.njit`` with the same options, compiled when numba is loaded (module
    docstring); ``@njit(...)`` or ``njit(...)(func)``."""
    if len(args) == 1 and callable(args[0]) and not options:
        return _declare(Kernel(args[0], {}))

    def wrap(func):
        return _declare(Kernel(func, options))
    return wrap


def intrinsic(func):
    """``numba.extending.intrinsic(func)`` at :func:`load` (compiled callers only)."""
    return _declare(Lazy(lambda numba: _extending(numba).intrinsic(func), func))


#: ``numba.prange`` in compiled code; ``range`` when interpreted
prange = _declare(Lazy(lambda numba: numba.prange, range))


def on_load(hook):
    """Run ``hook(numba)`` when numba is loaded (now, if it is)."""
    with _lock:
        if _numba is not None:
            hook(_numba)
        else:
            _hooks.append(hook)
    return hook


def overload(func, **options):
    """``numba.extending.overload(func, **options)`` registered at :func:`load`; the
    decorated typer is returned unchanged."""
    def wrap(typer):
        on_load(lambda numba: _extending(numba).overload(func, **options)(typer))
        return typer
    return wrap


def jitable(func):
    """``numba.extending.register_jitable(func)`` at :func:`load`; ``func`` itself
    returned (callable from Python and, once registered, from compiled code)."""
    on_load(lambda numba: _extending(numba).register_jitable(func))
    return func


def resolve(obj):
    """``obj``'s numba object if it is a declared kernel (numba loaded), else ``obj``."""
    return obj.dispatcher if isinstance(obj, Lazy) else obj


def _extending(numba):
    import numba.extending

    return numba.extending


def loaded():
    """Whether numba has been loaded (:func:`load`)."""
    return _numba is not None


def load():
    """Import numba, make every declared kernel's dispatcher, put the dispatchers in the
    modules' namespaces in place of the kernels and run the registrations (once)."""
    global _numba
    if _numba is not None:
        return _numba
    with _lock:
        if _numba is not None:
            return _numba
        import numba

        for obj in _lazy:
            obj._make(numba)
        _numba = numba  # from here on, declarations and hooks take effect at once
        for name, module in list(sys.modules.items()):
            if name == "bayesdrop" or name.startswith("bayesdrop."):
                _replace(vars(module))
        hooks = list(_hooks)
        _lazy.clear()
        _hooks.clear()
        for hook in hooks:
            hook(numba)
    return numba


def _replace(namespace):
    """The dispatchers in place of the kernels in ``namespace`` (a module's; containers
    of kernels resolve theirs in an :func:`on_load` hook, as the loss registry does)."""
    for key, value in list(namespace.items()):
        if isinstance(value, Lazy):
            namespace[key] = value._obj


def interpreting():
    """Whether kernels called from Python run interpreted (:func:`interpreted`) -- only
    while numba is not loaded."""
    return _numba is None and getattr(_state, "depth", 0) > 0


@contextmanager
def interpreted():
    """Kernels called from Python in this block (this thread) run their Python functions
    while numba is not loaded (module docstring)."""
    _state.depth = getattr(_state, "depth", 0) + 1
    try:
        yield
    finally:
        _state.depth -= 1


def interpret_first(small):
    """:func:`interpreted` for the first call of a process that asks for it with
    ``small`` true (the caller's judgement: a fit the interpreter finishes sooner than
    numba loads) while numba is not loaded; otherwise a block that changes nothing
    (later calls load numba: a loop of fits runs compiled)."""
    global _first_done
    if _numba is not None or _first_done or not small:
        return nullcontext()
    _first_done = True
    return interpreted()
