"""What the linear-algebra families of :mod:`torcia._ops` share (``linalg_solves``,
``linalg_factorizations``, ``linalg_functions``): the kernels' half precision, LAPACK's
errors in PyTorch's words (:class:`LinAlgError`, naming the first zero pivot of LU with
partial pivoting, :func:`lu_packed`), the batch dims of the meta shapes, and the checks
that the public functions of :mod:`torcia.linalg` make of their arguments.

The kernels the array module lacks loop over one matrix dimension and are vectorised over
the batch and the other dimension, in ``xp`` (NumPy or CuPy). NumPy's LAPACK has no half
precision: float16 and bfloat16 run in float32 and are rounded once, as PyTorch's CPU
kernels that take them.
"""

from __future__ import annotations

import functools

import numpy as np

from torcia import _dtype as D
from torcia import _opdef
from torcia._dtype import np_floating
from torcia._opdef import define
from torcia._ops._common import low_precision

# ----- the kernels: half precision, LU, the errors ---------------------------------------


def half_in_float32(kernel):
    """``kernel`` with float16 and bfloat16 arrays run in float32 and its floating results
    rounded back to their dtype: NumPy's LAPACK has no half precision (float16 refused,
    bfloat16 answered in float64), as PyTorch's CPU kernels that take them."""
    @functools.wraps(kernel)
    def run(self, *args, **params):
        half = next((a.dtype for a in args if hasattr(a, "dtype") and low_precision(a)), None)
        if half is None:
            return kernel(self, *args, **params)
        out = kernel(self, *(a.astype(np.float32) if getattr(a, "dtype", None) == half else a
                             for a in args), **params)

        def back(o):
            return o.astype(half) if np_floating(o.dtype) else o

        return tuple(back(o) for o in out) if isinstance(out, tuple) else back(out)

    return run


class LinAlgError(RuntimeError):
    """A linear-algebra routine failed on its input (singular or not positive-definite), as
    ``torch.linalg.LinAlgError``; a subclass of :class:`RuntimeError`.

    Examples
    --------
    >>> import torcia
    >>> try:
    ...     torcia.linalg.inv(torcia.zeros(2, 2))
    ... except torcia.linalg.LinAlgError as error:
    ...     print(type(error).__name__)
    LinAlgError
    """

    __module__ = "torcia.linalg"


def lu_packed(xp, a):
    """Batched LU with partial pivoting (LAPACK's getrf): the packed factors, the 1-based
    sequential row swaps (int32) and info (0, or the 1-based index of the first zero pivot).
    """
    m, n = a.shape[-2:]
    k = min(m, n)
    batch = a.shape[:-2]
    lu = xp.array(a.reshape((-1, m, n)), copy=True)
    count = lu.shape[0]
    rows = xp.arange(count)
    piv = xp.empty((count, k), dtype=np.int32)
    info = xp.zeros(count, dtype=np.int32)
    for j in range(k):
        col = lu[:, j:, j]
        # LAPACK's pivot: the largest |re| + |im| (izamax), |x| for real numbers
        size = xp.abs(col.real) + xp.abs(col.imag) if col.dtype.kind == "c" else xp.abs(col)
        p = j + xp.argmax(size, axis=1)
        piv[:, j] = p + 1
        top, low = lu[rows, j, :].copy(), lu[rows, p, :].copy()
        lu[rows, p, :] = top
        lu[rows, j, :] = low
        d = lu[:, j, j]
        info = xp.where((info == 0) & (d == 0), j + 1, info).astype(np.int32)
        # a zero pivot means a zero column below it: dividing by 1 leaves it as LAPACK does
        lu[:, j + 1:, j] /= xp.where(d == 0, 1, d)[:, None]
        lu[:, j + 1:, j + 1:] -= lu[:, j + 1:, j:j + 1] * lu[:, j:j + 1, j + 1:]
    return lu.reshape(a.shape), piv.reshape(batch + (k,)), info.reshape(batch)


def xp_linalg(xp, name, *arrays):
    """A ``xp.linalg`` call whose failure raises :class:`LinAlgError` in PyTorch's words."""
    if low_precision(arrays[0]):
        # NumPy's LAPACK has no half precision (float16 refused, bfloat16 answered in
        # float64): in float32, rounded once, as linalg_det
        out = xp_linalg(xp, name, *(x.astype(np.float32) for x in arrays))
        return out.astype(arrays[0].dtype)
    try:
        return getattr(xp.linalg, name)(*arrays)
    except xp.linalg.LinAlgError:
        raise singular_error(xp, name, arrays[0]) from None


def singular_error(xp, name, a):
    """PyTorch's error for a singular (or, for cholesky, not positive-definite) input,
    naming the first failing batch element and pivot or leading minor."""
    n = a.shape[-1]
    flat = a.reshape((-1, n, n))
    if name == "cholesky":
        for b, mat in enumerate(flat):
            for k in range(1, n + 1):
                try:
                    failed = xp.isnan(xp.linalg.cholesky(mat[:k, :k])).any()
                except xp.linalg.LinAlgError:
                    failed = True
                if failed:
                    where = f"(Batch element {b}): " if a.ndim > 2 else ""
                    return LinAlgError(
                        f"linalg.cholesky: {where}The factorization could not be completed "
                        f"because the input is not positive-definite (the leading minor of "
                        f"order {k} is not positive-definite).")
    _, _, info = lu_packed(xp, flat)
    bad = xp.nonzero(info)[0]
    b = int(bad[0]) if bad.size else 0
    where = f"(Batch element {b}): " if a.ndim > 2 else ""
    if name == "solve":
        return LinAlgError(f"torcia.linalg.solve: {where}The solver failed because the input "
                           f"matrix is singular.")
    return LinAlgError(f"linalg.{name}: {where}The diagonal element {int(info[b])} is zero, "
                       f"the inversion could not be completed because the input matrix is "
                       f"singular.")


# ----- the declarations' shapes and policy, the public functions' checks ---------------


def linalg_op(schema, kernel, shape, **fields):
    """An op of :data:`torcia.ops.LINALG` (:func:`~torcia._opdef.define` in its group)."""
    return define(schema, kernel, shape=shape, group="linalg", **fields)


#: PyTorch runs the factorizations, solvers and inverses in float32 under autocast
FLOAT32 = {"cpu": "float32", "cuda": "float32"}


def batch_dims(*xs) -> tuple:
    """The broadcast batch dims (all but the last two) of several matrices."""
    return tuple(np.broadcast_shapes(*(x.shape[:-2] for x in xs)))


def check_float(A, name):
    """PyTorch's errors of ``linalg.<name>`` for an ``A`` that is no floating-point or
    complex tensor."""
    if not isinstance(A, _opdef.PUBLIC.Tensor):
        raise TypeError(f"linalg.{name}(): argument 'A' must be Tensor, not {type(A).__name__}")
    if A.dtype.category < 2:
        raise RuntimeError(f"linalg.{name}: Expected a floating point or complex tensor as "
                           f"input. Got {D.torch_type_name(A.dtype)}")


def check_matrix(A, name):
    """PyTorch's errors of ``linalg.<name>`` for an ``A`` that is no batch of matrices (of
    floating-point or complex numbers)."""
    check_float(A, name)
    if A.ndim < 2:
        raise RuntimeError(f"linalg.{name}: The input tensor A must have at least 2 "
                           f"dimensions.")


def check_square(A, name):
    """PyTorch's errors of ``linalg.<name>`` for an ``A`` that is no batch of square
    matrices (of floating-point or complex numbers)."""
    check_matrix(A, name)
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"linalg.{name}: A must be batches of square matrices, but they are "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")


def check_same_dtype(A, B, name):
    """PyTorch's error of ``linalg.<name>`` for an ``A`` and a ``B`` of two dtypes."""
    if A.dtype is not B.dtype:
        raise RuntimeError(f"linalg.{name}: Expected A and B to have the same dtype, but found "
                           f"A of type {D.torch_type_name(A.dtype)} and B of type "
                           f"{D.torch_type_name(B.dtype)} instead")


def check_system(A, B, left, name):
    """PyTorch's error of ``linalg.<name>`` for a batch of matrices ``B`` that is no right
    side of ``A X = B`` (``X A = B`` when not ``left``), ``A`` square."""
    n = A.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        raise RuntimeError(f"linalg.{name}: Incompatible shapes of A and B for the equation "
                           f"{'AX = B' if left else 'XA = B'} ({n}x{n} and "
                           f"{B.shape[-2]}x{B.shape[-1]})")


def check_info(info, name, message):
    """:class:`LinAlgError` ``name: message(info)`` for the first nonzero ``info`` of a
    factorization's (each matrix's), as the ``check_errors`` of the ``_ex`` functions."""
    if info.device.type == "meta":
        return  # no values to check: PyTorch's meta kernels do not check either
    # the array's own test: under vmap it sees every sample at once
    if (info.detach()._data != 0).any():
        bad = info.reshape(-1).nonzero()[0, 0].item() if info.ndim else 0
        where = f"(Batch element {bad}): " if info.ndim else ""
        value = info.reshape(-1)[bad].item()
        raise LinAlgError(f"{name}: {where}{message(value)}")


def eye_like(n, like):
    """The ``n`` x ``n`` identity in ``like``'s dtype, on its device."""
    return _opdef.PUBLIC.eye(n, dtype=like.dtype, device=like.device)
