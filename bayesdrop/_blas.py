"""BLAS routines that numba does not wrap, called from compiled code through scipy's
Fortran BLAS (``scipy.linalg.cython_blas``, the library numba's own ``np.dot`` uses).

The address of a routine is looked up once per process and passed to the compiled
function as an ordinary integer argument, so that the compiled code stays cacheable
(``cache=True``: no process-specific constant is baked into it).
"""

from __future__ import annotations

import functools

import numpy as np

from . import _jit

__all__ = ["GEMM_SMALL_MNK", "SYRK_PAD", "cholesky_lower", "dpotrf_address", "dsyrk_address",
           "gram_pair", "gram_pair_single", "gram_rows", "padded", "padded_rows",
           "ssyrk_address", "syrk_rows", "syrk_work", "syrk_work_single"]

#: the symmetric rank-k products (``syrk``, numpy's ``W.T @ W``) run on rows padded with
#: zero columns to a multiple of this width: OpenBLAS's kernels handle a remainder of
#: columns slowly (measured on this project's Intel VM, float32 20000 rows: 51 columns
#: 1.23 ms, 52 columns 0.95 ms; float64 570 rows: 31 columns 34 us, 32 columns 26 us);
#: the zero columns add zero rows and columns to the product, which are dropped
SYRK_PAD = 4

#: :func:`gram_rows` forms ``W^T W`` by ``gemm`` (the whole square: twice the arithmetic
#: of ``syrk``) where ``p^2 rows`` is at most this, else by ``syrk``: OpenBLAS has a
#: small-matrix ``gemm`` kernel up to ``M N K = 100^3`` (its ``SMALL_MATRIX_OPT``, x86-64
#: AVX-512), and no such ``syrk``. Measured (this project's Intel Xeon, one thread,
#: 1797 rows in blocks of 128, padded widths 32 / 68 / 132): float32 ``gemm`` 31 / 106 /
#: 562 us against ``syrk`` 66 / 166 / 419 us; float64 55 / 236 / 1176 against 103 / 314 /
#: 821 us -- faster while ``p^2 rows`` stays under the kernel's bound (at 68 columns
#: blocks of 256 rows: ``gemm`` 428 us, ``syrk`` 369 us)
GEMM_SMALL_MNK = 1_000_000


@_jit.njit(cache=True, nogil=True)
def padded(p):
    """``p`` rounded up to a multiple of :data:`SYRK_PAD`.

    Examples
    --------
    >>> padded(31), padded(32), padded(1)
    (32, 32, 4)
    """
    return -(-p // SYRK_PAD) * SYRK_PAD


def padded_rows(n, p, dtype=np.float64):
    """Uninitialised ``(n, padded(p))`` rows for a ``syrk`` whose columns ``p..`` are zero
    (the caller writes columns ``0..p-1``; the product's leading ``p x p`` block is the
    one wanted).

    Examples
    --------
    >>> W = padded_rows(2, 3); W[:, :3] = 1.0
    >>> W.shape, (W.T @ W)[:3, :3].tolist()[0], float(W[:, 3:].sum())
    ((2, 4), [2.0, 2.0, 2.0], 0.0)
    """
    W = np.empty((n, padded(p)), dtype=dtype)
    W[:, p:] = 0.0
    return W


@functools.cache
def _address(module, name):
    """The address of ``name`` in scipy's Cython module ``module``, looked up once per
    process (numba's lookup imports the module's capsule table: about 20 us a call, three
    calls per compiled dense fit)."""
    from numba.extending import get_cython_function_address

    return get_cython_function_address(module, name)


def dsyrk_address():
    """Address of the Fortran ``dsyrk`` of ``scipy.linalg.cython_blas`` (an int)."""
    return _address("scipy.linalg.cython_blas", "dsyrk")


def ssyrk_address():
    """Address of the Fortran ``ssyrk`` (float32) of ``scipy.linalg.cython_blas``."""
    return _address("scipy.linalg.cython_blas", "ssyrk")


def gram_pair():
    """``(dsyrk, dgemm)``: the addresses :func:`gram_rows` chooses from (float64)."""
    return (dsyrk_address(), _address("scipy.linalg.cython_blas", "dgemm"))


def gram_pair_single():
    """``(ssyrk, sgemm)``: the float32 addresses of :func:`gram_rows`."""
    return (ssyrk_address(), _address("scipy.linalg.cython_blas", "sgemm"))


def dpotrf_address():
    """Address of the Fortran ``dpotrf`` of ``scipy.linalg.cython_lapack`` (an int)."""
    return _address("scipy.linalg.cython_lapack", "dpotrf")


def _fortran_call(addr, arrays):
    """``(signature, codegen)`` of an intrinsic that calls the Fortran routine at ``addr``
    with the data pointers of ``arrays`` (every Fortran argument is passed by
    reference), or None if the types do not fit."""
    from llvmlite import ir
    from numba import types

    if not isinstance(addr, types.Integer) or not all(isinstance(a, types.Array)
                                                      for a in arrays):
        return None
    sig = types.void(addr, *arrays)

    def codegen(context, builder, signature, args):
        i8p = ir.IntType(8).as_pointer()
        fnty = ir.FunctionType(ir.VoidType(), [i8p] * len(arrays))
        fptr = builder.inttoptr(args[0], fnty.as_pointer())
        ptrs = [builder.bitcast(context.make_array(aty)(context, builder, val).data, i8p)
                for aty, val in zip(signature.args[1:], args[1:])]
        builder.call(fptr, ptrs)
        return context.get_dummy_value()

    return sig, codegen


@_jit.intrinsic
def _fortran_call5(typingctx, addr, a1, a2, a3, a4, a5):
    """Call the Fortran routine at ``addr`` with the data pointers of five arrays."""
    return _fortran_call(addr, (a1, a2, a3, a4, a5))


@_jit.njit(cache=True, nogil=True)
def cholesky_lower(addr, A):
    """Overwrite the lower triangle of the C-ordered symmetric positive definite ``A``
    (p x p) with ``L``, ``A = L L^T``, by LAPACK ``dpotrf`` (``addr`` from
    :func:`dpotrf_address`; numba's own ``np.linalg.cholesky`` costs seconds of
    compilation). The strict upper triangle is left as it was. Returns LAPACK's ``info``:
    0, or ``k > 0`` if the leading minor of order ``k`` is not positive definite.

    Examples
    --------
    >>> A = np.array([[4.0, 2.0], [2.0, 5.0]])
    >>> info = cholesky_lower(dpotrf_address(), A)
    >>> info, np.tril(A).tolist()
    (0, [[2.0, 0.0], [1.0, 2.0]])
    """
    ints = np.empty(3, dtype=np.int32)
    ints[0] = A.shape[0]
    ints[1] = A.shape[0]
    ints[2] = 0
    uplo = np.empty(1, dtype=np.uint8)
    uplo[0] = 85  # "U": Fortran's upper triangle of the C-ordered A is C's lower one
    _fortran_call5(addr, uplo, ints[0:1], A, ints[1:2], ints[2:3])
    return ints[2]


@_jit.intrinsic
def _fortran_call10(typingctx, addr, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10):
    """Call the Fortran routine at ``addr`` with the data pointers of ten arrays."""
    return _fortran_call(addr, (a1, a2, a3, a4, a5, a6, a7, a8, a9, a10))


@_jit.njit(cache=True, nogil=True)
def syrk_rows(addr, W, rows, A, work):
    """``A += W[:rows]^T W[:rows]`` in the upper triangle of C-ordered ``A`` (p x p) by
    ``dsyrk`` (half the work of a ``gemm``); ``W`` is C-ordered (>= rows, p), ``addr``
    from :func:`dsyrk_address`, ``work`` from :func:`syrk_work`. The lower triangle is
    left as it was: call :func:`mirror_upper` once the sum is complete."""
    ints, chars, scal = work
    p = W.shape[1]
    ints[0] = p
    ints[1] = rows
    ints[2] = p
    ints[3] = p
    # C-ordered W (rows x p) is the Fortran p x rows matrix W^T: dsyrk("L", "N") on it
    # forms W^T W in Fortran's lower triangle, which is C's upper one
    _fortran_call10(addr, chars[0:1], chars[1:2], ints[0:1], ints[1:2], scal[0:1], W,
                    ints[2:3], scal[1:2], A, ints[3:4])


@_jit.intrinsic
def _fortran_call13(typingctx, addr, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12,
                    a13):
    """Call the Fortran routine at ``addr`` with the data pointers of thirteen arrays."""
    return _fortran_call(addr, (a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13))


@_jit.njit(cache=True, nogil=True)
def gram_rows(pair, W, rows, A, work):
    """``A += W[:rows]^T W[:rows]`` (``beta`` of ``work``: 1 adds, 0 overwrites) in at
    least the upper triangle of C-ordered ``A`` (p x p), as :func:`syrk_rows`, by
    ``gemm`` (the whole square) where ``p^2 rows <= GEMM_SMALL_MNK`` and ``syrk``
    otherwise; ``pair`` from :func:`gram_pair` or :func:`gram_pair_single` (the type of
    ``W`` and ``A``), ``work`` from :func:`syrk_work` or :func:`syrk_work_single`.

    Examples
    --------
    >>> W = np.arange(12.0).reshape(4, 3)
    >>> A = np.zeros((3, 3))
    >>> gram_rows(gram_pair(), W, 3, A, syrk_work())  # gemm: a small product
    >>> A.tolist() == (W[:3].T @ W[:3]).tolist()
    True
    """
    p = W.shape[1]
    if p * p * rows > GEMM_SMALL_MNK:
        syrk_rows(pair[0], W, rows, A, work)
        return
    ints, chars, scal = work
    ints[0] = p
    ints[1] = rows
    ints[2] = p
    ints[3] = p
    # C-ordered W (rows x p) is the Fortran p x rows matrix W^T: gemm("N", "T") of it with
    # itself is W^T W (symmetric: the same in either order)
    _fortran_call13(pair[1], chars[1:2], chars[2:3], ints[0:1], ints[0:1], ints[1:2],
                    scal[0:1], W, ints[2:3], W, ints[2:3], scal[1:2], A, ints[3:4])


@_jit.njit(cache=True, nogil=True)
def mirror_upper(A):
    """Copy the upper triangle of square ``A`` to its lower one."""
    p = A.shape[0]
    for a in range(p):
        for c in range(a + 1, p):
            A[c, a] = A[a, c]


@_jit.njit(cache=True, nogil=True)
def _syrk_chars():
    """``uplo = "L"``, ``trans = "N"`` of :func:`syrk_rows`' call (and ``"N"``, ``"T"``
    of :func:`gram_rows`' ``gemm``)."""
    chars = np.empty(3, dtype=np.uint8)
    chars[0] = 76  # "L"
    chars[1] = 78  # "N"
    chars[2] = 84  # "T"
    return chars


@_jit.njit(cache=True, nogil=True)
def syrk_work():
    """The argument arrays of :func:`syrk_rows` (``alpha = beta = 1``)."""
    return np.zeros(4, dtype=np.int32), _syrk_chars(), np.ones(2)


@_jit.njit(cache=True, nogil=True)
def syrk_work_single():
    """The argument arrays of :func:`syrk_rows` for ``ssyrk`` (float32 ``W`` and ``A``;
    ``alpha = 1``, ``beta = 0``: ``A = W^T W`` in its upper triangle, overwritten)."""
    scal = np.zeros(2, dtype=np.float32)
    scal[0] = 1.0
    return np.zeros(4, dtype=np.int32), _syrk_chars(), scal
