"""The scans, each declared once: schema, reference kernel, meta shape, decomposition,
autocast policy, the dtypes it refuses. :data:`torcia.ops.SCAN` accumulates along one dim
(``cumsum``, ``cumprod``, ``logcumsumexp``, and ``cummax``/``cummin`` with the indices).

Kernels, decompositions and dtypes as in :mod:`torcia._ops.reduce`, whose reductions the
decompositions run on the (..., n, n) rows of the elements up to each position. Below them
are the scans' public functions and those built on differences and running sums along a
dim (``diff``, ``trapezoid``, ``cumulative_trapezoid``, ``gradient``); their derivatives
are torcia-autograd's.
"""

from __future__ import annotations

import builtins
import math

import numpy as np

from torcia import _dtype as D
from torcia import _opdef
from torcia._dtype import np_floating as _floating
from torcia._opdef import define
from torcia._ops._common import (
    COMPLEX,
    HALF,
    along_dim,
    low_precision,
    no_kernel,
    op,
    refuse,
    return_type,
    scan_with_indices,
    to_float,
    wrap_dim,
)
from torcia._ops._common import where as _where
from torcia._ops.reduce import acc_dtype, itself_at_zero, shifted_log_sum_exp

# ----- reference kernels -----------------------------------------------------------------


class Kernels:
    """The reference kernels of the scans (see the module's doc)."""

    def cumsum(self, a, dim, dtype=None):
        # the array's own method: NumPy's function warns from its Python code, outside the
        # modules that torcia's warning filter covers (torcia/__init__.py)
        if dtype is None and low_precision(a):
            return a.cumsum(axis=dim, dtype=np.float32).astype(a.dtype)
        return a.cumsum(axis=dim, dtype=dtype)

    def cumprod(self, a, dim, dtype=None):
        if dtype is None and low_precision(a):
            return a.cumprod(axis=dim, dtype=np.float32).astype(a.dtype)
        return a.cumprod(axis=dim, dtype=dtype)

    def cummax(self, a, dim):
        return _cum_extreme(self.xp, a, dim, self.xp.maximum)

    def cummin(self, a, dim):
        return _cum_extreme(self.xp, a, dim, self.xp.minimum)

    def logcumsumexp(self, a, dim):
        xp = self.xp
        if a.dtype.kind != "c":
            return xp.logaddexp.accumulate(a, axis=dim)
        # logaddexp has no complex loop: accumulate along dim, each step shifted by the
        # greater real part of the two terms
        out = xp.moveaxis(a.copy(), dim, 0)
        with np.errstate(invalid="ignore", over="ignore"):
            for i in range(1, out.shape[0]):
                x, y = out[i - 1], out[i]
                big = xp.where(x.real >= y.real, x, y)
                small = xp.where(x.real >= y.real, y, x)
                out[i] = big + xp.log1p(xp.exp(small - big))
        return xp.moveaxis(out, 0, dim)


def _cum_extreme(xp, a, dim, ufunc):
    vals = ufunc.accumulate(a, axis=dim)
    shape = [1] * a.ndim
    shape[dim] = a.shape[dim]
    pos = xp.broadcast_to(xp.arange(a.shape[dim]).reshape(shape), a.shape)
    # the running index moves to the latest element equal to the running extreme (or NaN)
    hit = a == vals
    if _floating(a.dtype):
        hit = hit | xp.isnan(a)
    idx = xp.maximum.accumulate(xp.where(hit, pos, 0), axis=dim).astype(np.int64)
    # the value is the element at the index, as PyTorch's: of 0.0 and -0.0 the latest
    # (maximum's choice between them varies with the dtype's loop)
    return xp.take_along_axis(a, idx, axis=dim), idx


# ----- the dtypes PyTorch has no kernel for ----------------------------------------------


_CUMMAX, _CUMMIN = {COMPLEX: no_kernel("cummax_cpu")}, {COMPLEX: no_kernel("cummin_cpu")}


def _empty(a):
    """A scan of an empty tensor: PyTorch answers it before it looks for the dtype's
    kernel."""
    return a.size == 0


# ----- decompositions (tensors; half precision computes in float32, see opmath) ---------


# scans: each position reduces the elements up to it (n^2 work along the dim)


def _up_to(a, dim, fill):
    """(moved, masked): ``a`` with ``dim`` moved last (..., n), and (..., n, n) whose row i
    holds the elements 0..i, ``fill`` after them."""
    moved = a.movedim(dim, -1)
    n = moved.shape[-1]
    arange = _opdef.PUBLIC.arange
    upto = arange(n, device=a.device).unsqueeze(0) <= arange(n, device=a.device).unsqueeze(1)
    return moved, _where(upto, moved.unsqueeze(-2), fill)


def running_logsumexp(a, dim):
    if not a.numel():
        return a.clone()
    _, rows = _up_to(a, dim, a.new_full((), -math.inf))
    return shifted_log_sum_exp(rows, (-1,)).movedim(-1, dim)


def running_product(a, dim, dtype=None):
    if dtype is not None:  # a NumPy dtype, as kernels are given
        a = op("cast", a, dtype=np.dtype(dtype))
    elif a.dtype in HALF:  # in float32, rounded once, as the reference kernel
        return running_product(a.float(), dim).to(a.dtype)
    if not a.numel():
        return a.clone()
    _, rows = _up_to(a, dim, a.new_ones(()))
    return rows.prod(-1).movedim(-1, dim)


def _running_extreme(a, dim, largest):
    """cummax (``largest``) or cummin: the running extreme (NaN once one is met) and the
    latest index of an element equal to it."""
    if not a.numel():  # answered before the dtype's kernel is looked for (answers_early)
        return a.clone(), a.new_zeros(a.shape, dtype=D.int64)
    refuse(_CUMMAX if largest else _CUMMIN, a)
    n = a.shape[dim]
    if a.is_floating_point():
        fill = a.new_full((), -math.inf if largest else math.inf)
    elif a.dtype == D.bool_:
        fill = a.new_full((), not largest)
    else:
        info = np.iinfo(a.dtype.to_numpy())
        fill = a.new_full((), int(info.min if largest else info.max))
    moved, rows = _up_to(a, dim, fill)
    values = rows.amax(-1) if largest else rows.amin(-1)
    hit = moved.unsqueeze(-2) == values.unsqueeze(-1)  # [i, j]: a_j is the extreme up to i
    if a.is_floating_point():
        hit = hit.bitwise_or(moved.isnan().unsqueeze(-2))
    pos = _opdef.PUBLIC.arange(n, device=a.device)
    upto = pos.unsqueeze(0) <= pos.unsqueeze(1)
    index = _where(hit.bitwise_and(upto), pos, pos.new_zeros(())).amax(-1)
    index = index.movedim(-1, dim)
    # the value is the element at the index, as PyTorch's: of 0.0 and -0.0 the latest
    return a.gather(dim, index), index


def running_max(a, dim):
    return _running_extreme(a, dim, largest=True)


def running_min(a, dim):
    return _running_extreme(a, dim, largest=False)


# ----- shapes ----------------------------------------------------------------------------


def scan(x, dim=0, dtype=None, **params):
    if dtype is not None:
        return x.shape, np.dtype(dtype)
    return x.shape, np.dtype(np.int64) if x.dtype.kind in "biu" else x.dtype


# ----- the declarations ------------------------------------------------------------------


def _scan(schema, kernel, **fields):
    """An op of ``SCAN``: the running reduction along ``dim``."""
    return define(schema, kernel, shape=fields.pop("shape", scan), group="scan", **fields)


#: PyTorch runs these in float32 under CUDA autocast
_CUDA_FLOAT32 = {"cuda": "float32"}

#: in the order of :data:`torcia.ops.SCAN`
DECLARED = (
    _scan("cumsum(Tensor x, *, int? dim=None, ScalarType? dtype=None) -> Tensor",
          Kernels.cumsum, autocast=_CUDA_FLOAT32),
    _scan("cumprod(Tensor x, *, int? dim=None, ScalarType? dtype=None) -> Tensor",
          Kernels.cumprod, decomposition=running_product, autocast=_CUDA_FLOAT32),
    _scan("cummax(Tensor x, *, int? dim=None) -> (Tensor, Tensor)", Kernels.cummax,
          shape=scan_with_indices, decomposition=running_max,
          refuses=_CUMMAX, answers_early=_empty),
    _scan("cummin(Tensor x, *, int? dim=None) -> (Tensor, Tensor)", Kernels.cummin,
          shape=scan_with_indices, decomposition=running_min,
          refuses=_CUMMIN, answers_early=_empty),
    _scan("logcumsumexp(Tensor x, *, int? dim=None) -> Tensor", Kernels.logcumsumexp,
          decomposition=running_logsumexp),
)


# ----- public functions (torcia.cumsum, torcia.cummax, torcia.diff...) -------------------


def cumsum(input, dim, *, dtype=None):
    """Cumulative sum along ``dim``.

    Examples
    --------
    >>> import torcia
    >>> torcia.cumsum(torcia.tensor([[1, 2], [3, 4]]), dim=1)
    tensor([[1, 3],
            [3, 7]])
    """
    return along_dim("cumsum", (input,), {"dim": wrap_dim(dim, input.ndim),
                                          "dtype": acc_dtype(input, dtype)})


def cumprod(input, dim, *, dtype=None):
    """Cumulative product along ``dim``.

    Examples
    --------
    >>> import torcia
    >>> torcia.cumprod(torcia.tensor([1, 2, 3, 4]), dim=0)
    tensor([ 1,  2,  6, 24])
    """
    return along_dim("cumprod", (input,), {"dim": wrap_dim(dim, input.ndim),
                                           "dtype": acc_dtype(input, dtype)})


_Cummax = return_type("cummax", ("values", "indices"))


_Cummin = return_type("cummin", ("values", "indices"))


def cummax(input, dim):
    """Running maximum along ``dim`` and the index where it was reached.

    Examples
    --------
    >>> import torcia
    >>> torcia.cummax(torcia.tensor([1, 3, 2, 5]), dim=0)
    torcia.return_types.cummax(
    values=tensor([1, 3, 3, 5]),
    indices=tensor([0, 1, 1, 3]))
    """
    d = wrap_dim(dim, input.ndim)
    if not input.ndim and input.is_complex():
        return _Cummax(*itself_at_zero(input))
    return _Cummax(*along_dim("cummax", (input,), {"dim": d}))


def cummin(input, dim):
    """Running minimum along ``dim`` and the index where it was reached.

    Examples
    --------
    >>> import torcia
    >>> torcia.cummin(torcia.tensor([4, 2, 3, 1]), dim=0)
    torcia.return_types.cummin(
    values=tensor([4, 2, 2, 1]),
    indices=tensor([0, 1, 1, 3]))
    """
    d = wrap_dim(dim, input.ndim)
    if not input.ndim and input.is_complex():
        return _Cummin(*itself_at_zero(input))
    return _Cummin(*along_dim("cummin", (input,), {"dim": d}))


def logcumsumexp(input, dim):
    """``log(cumsum(exp(input)))`` along ``dim``, without overflow.

    Examples
    --------
    >>> import torcia
    >>> torcia.logcumsumexp(torcia.tensor([0.0, 0.0, 1000.0]), dim=0)
    tensor([0.0000e+00, 6.9315e-01, 1.0000e+03])
    """
    input = to_float(input)
    d = wrap_dim(dim, input.ndim)
    return along_dim("logcumsumexp", (input,), {"dim": d})


def diff(input, n=1, dim=-1, prepend=None, append=None):
    """The ``n``-th forward difference along ``dim``.

    Examples
    --------
    >>> import torcia
    >>> torcia.diff(torcia.tensor([1, 3, 6, 10]))
    tensor([2, 3, 4])
    """
    if input.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    parts = [t for t in (prepend, input, append) if t is not None]
    x = _opdef.PUBLIC.cat(parts, dim) if len(parts) > 1 else input
    for _ in range(n):
        # each difference is one shorter; past the length, the result stays empty
        length = builtins.max(x.shape[dim] - 1, 0)
        a = x.narrow(dim, builtins.min(1, x.shape[dim]), length)
        b = x.narrow(dim, 0, length)
        x = (a ^ b) if x.dtype is D.bool_ else a - b
    return x


def _no_bool(name, y, x):
    """PyTorch's refusal of bool samples, whose differences and sums are not numbers."""
    if y.dtype == D.bool_ or (isinstance(x, _opdef.PUBLIC.Tensor) and x.dtype == D.bool_):
        raise RuntimeError(f"{name}: received a bool input for `x` or `y`, but bool is not "
                           "supported")


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The trapezoidal-rule integral of ``y`` along ``dim`` (spacing ``dx``, default 1, or
    sample points ``x``).

    Examples
    --------
    >>> import torcia
    >>> torcia.trapezoid(torcia.tensor([1.0, 2.0, 3.0]))
    tensor(4.)
    """
    _no_bool("trapezoid", y, x)
    n = y.shape[dim]
    left, right = y.narrow(dim, 0, n - 1), y.narrow(dim, 1, n - 1)
    if x is None:
        return (left + right).sum(dim) * ((1.0 if dx is None else dx) / 2)
    spacing = diff(x, dim=dim if x.ndim > 1 else -1)
    if x.ndim == 1 and y.ndim > 1:
        shape = [1] * y.ndim
        shape[dim] = n - 1
        spacing = spacing.reshape(shape)
    return ((left + right) * spacing).sum(dim) / 2


def trapz(y, x=None, *, dx=None, dim=-1):
    """Alias of :func:`trapezoid`.

    Examples
    --------
    >>> import torcia
    >>> torcia.trapz(torcia.tensor([1.0, 2.0, 3.0]))
    tensor(4.)
    """
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """The running trapezoidal-rule integral of ``y`` along ``dim``.

    Examples
    --------
    >>> import torcia
    >>> torcia.cumulative_trapezoid(torcia.tensor([1.0, 2.0, 3.0]))
    tensor([1.5000, 4.0000])
    """
    _no_bool("cumulative_trapezoid", y, x)
    n = y.shape[dim]
    pieces = y.narrow(dim, 0, n - 1) + y.narrow(dim, 1, n - 1)
    if x is None:
        pieces = pieces * ((1.0 if dx is None else dx) / 2)
    else:
        spacing = diff(x, dim=dim if x.ndim > 1 else -1)
        if x.ndim == 1 and y.ndim > 1:
            shape = [1] * y.ndim
            shape[dim] = n - 1
            spacing = spacing.reshape(shape)
        pieces = pieces * spacing / 2
    return pieces.cumsum(dim)


def gradient(input, *, spacing=1, dim=None, edge_order=1):
    """The gradient of a sampled function along each dimension (or ``dim``): second-order
    central differences inside, one-sided differences of order ``edge_order`` (1 or 2) at
    the edges. ``spacing`` is one number, one number per dimension, or one 1-D tensor of
    sample coordinates per dimension. Returns a tuple with one tensor per dimension.

    Examples
    --------
    >>> import torcia
    >>> torcia.gradient(torcia.tensor([1.0, 4.0, 9.0, 16.0]))
    (tensor([3., 4., 6., 7.]),)
    """
    if edge_order not in (1, 2):
        raise RuntimeError(f"torch.gradient only supports edge_order=1 and edge_order=2, "
                           f"but got {edge_order}")
    dims = list(range(input.ndim)) if dim is None else (
        [dim] if isinstance(dim, int) else list(dim))
    dims = [d % input.ndim for d in dims]
    if isinstance(spacing, (int, float, _opdef.PUBLIC.Tensor)) and not (
            isinstance(spacing, _opdef.PUBLIC.Tensor) and spacing.ndim > 0):
        spacings = [spacing] * len(dims)
    else:
        spacings = list(spacing)
        if len(spacings) == 1 and len(dims) > 1:
            spacings = spacings * len(dims)
        if len(spacings) != len(dims):
            raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar "
                               f"or it's spacing and dim arguments to have the same length, "
                               f"but got a spacing argument of length {len(spacings)} and a "
                               f"dim argument of length {len(dims)}.")
    x = input if input.is_floating_point() or input.is_complex() else input.to(
        D.get_default_dtype())
    out = []
    for d, h in zip(dims, spacings):
        n = x.shape[d]
        if n < edge_order + 1:
            raise RuntimeError("torch.gradient expected each dimension size to be at least "
                               "edge_order+1")
        out.append(_gradient_1d(x, d, h, edge_order))
    return tuple(out)


def _gradient_1d(f, d, h, edge_order):
    def sl(a, b):
        return f.narrow(d, a, b - a)

    n = f.shape[d]
    if isinstance(h, _opdef.PUBLIC.Tensor) and h.ndim == 1:
        if h.shape[0] != n:
            raise RuntimeError(f"torch.gradient expected each tensor to be on the same "
                               f"device and to have size {n} along dim {d}")
        shape = [1] * f.ndim
        shape[d] = -1
        xs = h.to(f.dtype).reshape(shape)
        dx = xs.narrow(d, 1, n - 1) - xs.narrow(d, 0, n - 1)
        hd, hs = dx.narrow(d, 0, n - 2), dx.narrow(d, 1, n - 2)
        inner = (hd ** 2 * sl(2, n) + (hs ** 2 - hd ** 2) * sl(1, n - 1)
                 - hs ** 2 * sl(0, n - 2)) / (hs * hd * (hd + hs))
        if edge_order == 1:
            first = (sl(1, 2) - sl(0, 1)) / dx.narrow(d, 0, 1)
            last = (sl(n - 1, n) - sl(n - 2, n - 1)) / dx.narrow(d, n - 2, 1)
        else:
            h1, h2 = dx.narrow(d, 0, 1), dx.narrow(d, 1, 1)
            first = (-(2 * h1 + h2) / (h1 * (h1 + h2)) * sl(0, 1)
                     + (h1 + h2) / (h1 * h2) * sl(1, 2) - h1 / (h2 * (h1 + h2)) * sl(2, 3))
            h1, h2 = dx.narrow(d, n - 3, 1), dx.narrow(d, n - 2, 1)
            last = (h2 / (h1 * (h1 + h2)) * sl(n - 3, n - 2)
                    - (h2 + h1) / (h1 * h2) * sl(n - 2, n - 1)
                    + (2 * h2 + h1) / (h2 * (h1 + h2)) * sl(n - 1, n))
    else:
        h = float(h.item() if isinstance(h, _opdef.PUBLIC.Tensor) else h)
        inner = (sl(2, n) - sl(0, n - 2)) / (2 * h)
        if edge_order == 1:
            first = (sl(1, 2) - sl(0, 1)) / h
            last = (sl(n - 1, n) - sl(n - 2, n - 1)) / h
        else:
            first = (-1.5 * sl(0, 1) + 2 * sl(1, 2) - 0.5 * sl(2, 3)) / h
            last = (0.5 * sl(n - 3, n - 2) - 2 * sl(n - 2, n - 1) + 1.5 * sl(n - 1, n)) / h
    return _opdef.PUBLIC.cat([first, inner, last], d)


#: the functions here that are also Tensor methods, under the same name
METHODS = ("cumsum", "cumprod", "cummax", "cummin", "logcumsumexp")

#: ... and those with an in-place ``name_`` method (computed out of place, then written back)
INPLACE = ("cumsum", "cumprod")

#: Tensor methods set only where ``torcia.linalg``'s, ``torcia.special``'s or the class's
#: own have not set them
FALLBACK_METHODS = ("diff",)

#: the names ``torcia`` exports from here
__all__ = ["cummax", "cummin", "cumprod", "cumsum", "cumulative_trapezoid", "diff", "gradient",
           "logcumsumexp", "trapezoid", "trapz"]
