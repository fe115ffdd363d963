"""Reductions and scans: ``sum``, ``mean``, ``max``/``min``, ``var``/``std``, ``norm``,
``median``, ``quantile``, ``cumsum``/``cummax``, ``logcumsumexp``, ``diff``, ``gradient``,
``trapezoid``...
"""

from __future__ import annotations

import builtins
import math

from torcia import _creation as C
from torcia import _dtype as D
from torcia._oplib._common import (
    _dims,
    _readable_value,
    _return_type,
    _tname,
    _to_float,
)
from torcia._oplib.elementwise import isnan, to_dtype, where
from torcia._oplib.views import cat
from torcia._ops import linalg_functions
from torcia._ops import reduce as _declared
from torcia._ops._common import along_dim as _along_dim
from torcia._ops.reduce import ALL_DIMS as _ALL_DIMS
from torcia._ops.reduce import acc_dtype as _acc_dtype
from torcia._ops.reduce import check_nonempty as _check_nonempty
from torcia._ops.reduce import over_all as _over_all
from torcia._tensor import Tensor, _torch_name, _wrap_dim, call

#: the public functions declared beside their ops in torcia._ops.reduce (``any``,
#: ``cummax``...)
globals().update({fn.__name__: fn for fn in _declared.PUBLIC})


def sum(input, dim=_ALL_DIMS, keepdim=None, *, dtype=None):
    """Sum over ``dim`` (int, tuple, or all); integer and bool inputs sum in int64.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1, 2], [3, 4]])
    >>> torcia.sum(x), torcia.sum(x, dim=0), x.sum(1, keepdim=True).shape
    (tensor(10), tensor([4, 6]), torcia.Size([2, 1]))
    """
    if dim is _ALL_DIMS and keepdim is None:
        dim = None  # x.sum(): _over_all's first case, without the call
    elif _over_all("sum", dim, keepdim, none_ok=True):
        dim = None
    if dim is None and dtype is None and input._data.dtype.kind in "fc":
        return call("sum", (input,), {"dim": None, "keepdim": bool(keepdim), "dtype": None})
    return call("sum", (input,), {"dim": _dims(dim, input.ndim), "keepdim": bool(keepdim),
                                  "dtype": _acc_dtype(input, dtype)})


def mean(input, dim=_ALL_DIMS, keepdim=None, *, dtype=None):
    """Mean over ``dim``; the input must be floating point (or ``dtype`` given).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> torcia.mean(x)
    tensor(2.5000)
    >>> torcia.mean(x, dim=0, keepdim=True)
    tensor([[2., 3.]])
    """
    if _over_all("mean", dim, keepdim, none_ok=True):
        dim = None
    if dtype is None and input.dtype.category < 2:
        raise RuntimeError(
            "mean(): could not infer output dtype. Input dtype must be either a floating point "
            f"or complex dtype. Got: {_tname(input.dtype)}"
        )
    if dtype is not None:
        input = to_dtype(input, dtype)
    return call("mean", (input,), {"dim": _dims(dim, input.ndim), "keepdim": bool(keepdim)})


def prod(input, dim=_ALL_DIMS, keepdim=None, *, dtype=None):
    """Product over one ``dim`` (or all).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1, 2], [3, 4]])
    >>> torcia.prod(x)
    tensor(24)
    >>> torcia.prod(x, dim=0)
    tensor([3, 8])
    """
    if _over_all("prod", dim, keepdim):
        dim = None
    return call("prod", (input,), {"dim": _dims(dim, input.ndim), "keepdim": bool(keepdim),
                                   "dtype": _acc_dtype(input, dtype)})


def amax(input, dim=(), keepdim=False):
    """Maximum over ``dim`` (all dims when empty).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1, 5], [4, 2]])
    >>> torcia.amax(x)
    tensor(5)
    >>> torcia.amax(x, dim=0)
    tensor([4, 5])
    """
    _check_nonempty(input, dim, "amax")
    return call("amax", (input,), {"dim": _dims(dim, input.ndim) if dim != () else None,
                                   "keepdim": bool(keepdim)})


def amin(input, dim=(), keepdim=False):
    """Minimum over ``dim`` (all dims when empty).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1, 5], [4, 2]])
    >>> torcia.amin(x, dim=1)
    tensor([1, 2])
    """
    _check_nonempty(input, dim, "amin")
    return call("amin", (input,), {"dim": _dims(dim, input.ndim) if dim != () else None,
                                   "keepdim": bool(keepdim)})


def argmax(input, dim=None, keepdim=False):
    """Index of the maximum (of the flattened input when ``dim`` is None).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1, 5], [4, 2]])
    >>> torcia.argmax(x)
    tensor(1)
    >>> torcia.argmax(x, dim=1)
    tensor([1, 0])
    """
    return _arg_extreme("argmax", input, dim, keepdim)


def argmin(input, dim=None, keepdim=False):
    """Index of the minimum (of the flattened input when ``dim`` is None).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1, 5], [4, 2]])
    >>> torcia.argmin(x, dim=0)
    tensor([0, 1])
    """
    return _arg_extreme("argmin", input, dim, keepdim)


def _arg_extreme(op, input, dim, keepdim):
    # refused by dtype before the dim is looked at, as PyTorch
    if input.dtype is D.bool_ or input.is_complex():
        kind = "bool" if input.dtype is D.bool_ else "complex"
        raise RuntimeError(f"{op}(): does not support {kind} input")
    _check_nonempty(input, dim, op)
    return _along_dim(op, (input,), {
        "dim": None if dim is None else _wrap_dim(dim, input.ndim), "keepdim": bool(keepdim)})


def _correction(unbiased, correction):
    if correction is not None:
        return correction
    return 1 if unbiased in (None, True) else 0


def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Variance over ``dim`` with Bessel's ``correction`` (default 1).

    Examples
    --------
    >>> import torcia
    >>> torcia.var(torcia.tensor([1.0, 2.0, 3.0, 4.0]))
    tensor(1.6667)
    """
    if isinstance(dim, bool):
        unbiased, dim = dim, None
    return call("var", (_float_input(input, "var"),),
                {"dim": _dims(dim, input.ndim), "correction": _correction(unbiased, correction),
                 "keepdim": bool(keepdim)})


def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Standard deviation over ``dim`` with Bessel's ``correction`` (default 1).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([1.0, 2.0, 3.0, 4.0])
    >>> torcia.std(x)
    tensor(1.2910)
    >>> torcia.std(x, correction=0)
    tensor(1.1180)
    """
    if isinstance(dim, bool):
        unbiased, dim = dim, None
    return call("std", (_float_input(input, "std"),),
                {"dim": _dims(dim, input.ndim), "correction": _correction(unbiased, correction),
                 "keepdim": bool(keepdim)})


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """The variance and the mean over ``dim``, as :func:`var` and :func:`mean`.

    Examples
    --------
    >>> import torcia
    >>> torcia.var_mean(torcia.tensor([1.0, 2.0, 3.0]))
    (tensor(1.), tensor(2.))
    """
    return (var(input, dim, unbiased, keepdim, correction=correction),
            mean(input, dim, keepdim))


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """The standard deviation and the mean over ``dim``, as :func:`std` and :func:`mean`.

    Examples
    --------
    >>> import torcia
    >>> torcia.std_mean(torcia.tensor([1.0, 2.0, 3.0]))
    (tensor(1.), tensor(2.))
    """
    return (std(input, dim, unbiased, keepdim, correction=correction),
            mean(input, dim, keepdim))


def _float_input(input, name):
    if input.dtype.category < 2:
        raise RuntimeError(f"{name}(): input dtype should be floating point, got "
                           f"{input.dtype.name}")
    return input


def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    """Vector p-norm over ``dim`` (``"fro"`` is the 2-norm of all elements).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[3.0, 4.0], [0.0, 0.0]])
    >>> torcia.norm(x)
    tensor(5.)
    >>> torcia.norm(x, p=1, dim=1)
    tensor([7., 0.])
    """
    if p in ("fro", None):
        p = 2.0
    if p == "nuc":
        return linalg_functions.matrix_norm(input, "nuc", dim=(-2, -1) if dim is None else dim,
                                            keepdim=keepdim)
    if dtype is not None:
        input = to_dtype(input, dtype)
    return call("norm", (_float_input(input, "norm"),),
                {"p": float(p), "dim": _dims(dim, input.ndim), "keepdim": bool(keepdim)})


def logsumexp(input, dim, keepdim=False):
    """``log(sum(exp(input)))`` over ``dim``, computed stably.

    Examples
    --------
    >>> import torcia
    >>> torcia.logsumexp(torcia.tensor([[0.0, 0.0], [1000.0, 1000.0]]), dim=1)
    tensor([6.9315e-01, 1.0007e+03])
    """
    input = _to_float(input)
    return call("logsumexp", (input,), {"dim": _dims(dim, input.ndim), "keepdim": bool(keepdim)})


def cumsum(input, dim, *, dtype=None):
    """Cumulative sum along ``dim``.

    Examples
    --------
    >>> import torcia
    >>> torcia.cumsum(torcia.tensor([[1, 2], [3, 4]]), dim=1)
    tensor([[1, 3],
            [3, 7]])
    """
    return _along_dim("cumsum", (input,), {"dim": _wrap_dim(dim, input.ndim),
                                           "dtype": _acc_dtype(input, dtype)})


def cumprod(input, dim, *, dtype=None):
    """Cumulative product along ``dim``.

    Examples
    --------
    >>> import torcia
    >>> torcia.cumprod(torcia.tensor([1, 2, 3, 4]), dim=0)
    tensor([ 1,  2,  6, 24])
    """
    return _along_dim("cumprod", (input,), {"dim": _wrap_dim(dim, input.ndim),
                                            "dtype": _acc_dtype(input, dtype)})


def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """Mean over the non-NaN elements.

    Examples
    --------
    >>> import torcia
    >>> torcia.nanmean(torcia.tensor([1.0, float("nan"), 3.0]))
    tensor(2.)
    """
    if not (input.is_floating_point() or input.is_complex()):
        raise RuntimeError(f"nanmean(): expected input to have floating point or complex "
                           f"dtype but got {_torch_name(input.dtype)}")
    # the count first, as PyTorch: a dim out of range is an IndexError before nansum
    # refuses a complex input
    keep = ~isnan(input)
    count = keep.sum(dim=dim, keepdim=keepdim) if dim is not None else keep.sum()
    total = _declared.nansum(input, dim=dim, keepdim=keepdim)
    out = total / count
    return out if dtype is None else out.to(dtype)


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """The ``q``-th quantiles (``q`` a number or 1-D tensor in [0, 1]) along ``dim`` (of
    the flattened input by default), interpolated as ``interpolation`` says.

    Examples
    --------
    >>> import torcia
    >>> torcia.quantile(torcia.tensor([0.0, 1.0, 2.0, 3.0]), 0.5)
    tensor(1.5000)
    """
    return _quantile(input, q, dim, keepdim, interpolation, ignore_nan=False)


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """:func:`quantile` ignoring NaNs.

    Examples
    --------
    >>> import torcia
    >>> torcia.nanquantile(torcia.tensor([1.0, float("nan"), 3.0]), 0.5)
    tensor(2.)
    """
    return _quantile(input, q, dim, keepdim, interpolation, ignore_nan=True)


def _quantile(input, q, dim, keepdim, interpolation, ignore_nan):
    if interpolation not in ("linear", "lower", "higher", "midpoint", "nearest"):
        raise ValueError(f"quantile() interpolation must be one of linear, lower, higher, "
                         f"midpoint or nearest. Got {interpolation}")
    if not input.is_floating_point():
        raise RuntimeError("quantile() input tensor must be either float or double dtype")
    if isinstance(q, Tensor):
        if q.dtype is not input.dtype:
            raise RuntimeError("quantile() q tensor must be same dtype as the input tensor")
        # in the graph: the interpolation's weights move with q, as torch's; a 0-dim q
        # gives a result without the q dim, as a number does
        qs = q.to(D.float64)
        scalar_q = qs.ndim == 0
        qs = qs.reshape(-1) if scalar_q else qs
    else:
        if not 0 <= q <= 1:
            raise RuntimeError(f"quantile() q must be in the range [0, 1] but got {q}")
        scalar_q = True
        qs = C.tensor([float(q)], dtype=D.float64)
    if qs.ndim > 1:
        raise RuntimeError("quantile() q must be a scalar or 1D tensor")
    # a q without values to read (meta, batched by vmap) is not checked, as torch's
    if _readable_value(((qs >= 0) & (qs <= 1)).all()) is False:
        raise RuntimeError("quantile() q values must be in the range [0, 1]")
    if dim is not None:
        dim = _wrap_dim(dim, input.ndim)
    x = input.reshape(-1) if dim is None or not input.ndim else input.movedim(dim, -1)
    srt = x.sort(dim=-1).values  # NaNs sort last
    n = x.shape[-1]
    if ignore_nan:
        valid = (~isnan(x)).sum(-1, keepdim=True).to(D.float64)
    else:
        valid = C.full((*x.shape[:-1], 1), float(n), dtype=D.float64, device=x.device)
    pos = (valid - 1).clamp(min=0) * qs.to(x.device)  # (..., len(q))
    if interpolation == "lower":
        pos = pos.floor()
    elif interpolation == "higher":
        pos = pos.ceil()
    elif interpolation == "nearest":
        pos = pos.round()
    lo = pos.floor().long().clamp(0, builtins.max(n - 1, 0))
    hi = pos.ceil().long().clamp(0, builtins.max(n - 1, 0))
    a = srt.gather(-1, lo)
    b = srt.gather(-1, hi)
    if interpolation == "midpoint":
        frac = (hi != lo).to(x.dtype) * 0.5
    else:
        frac = (pos - lo.to(D.float64)).to(x.dtype)
    out = a + (b - a) * frac
    if not ignore_nan:
        has_nan = isnan(x).any(-1, keepdim=True)
        out = where(has_nan, C.full_like(out, math.nan), out)
    else:
        out = where(valid == 0, C.full_like(out, math.nan), out)
    out = out.movedim(-1, 0)  # q first, as PyTorch
    if keepdim:
        if dim is None:
            out = out.reshape(out.shape[0], *([1] * input.ndim))
        elif input.ndim:
            out = out.unsqueeze(dim + 1)
    elif dim is not None and not input.ndim:
        out = out.reshape(out.shape[0])  # a 0-dim tensor's dim 0 leaves no dim
    return out[0] if scalar_q else out


_NanMedian = _return_type("nanmedian", ("values", "indices"))


_AMinMax = _return_type("aminmax", ("min", "max"))


def nanmedian(input, dim=_ALL_DIMS, keepdim=None):
    """The median ignoring NaNs (the lower of the two middle values, as ``median``).

    Examples
    --------
    >>> import torcia
    >>> torcia.nanmedian(torcia.tensor([1.0, float("nan"), 3.0, 2.0]))
    tensor(2.)
    """
    over_all = _over_all("nanmedian", dim, keepdim)
    keepdim = bool(keepdim)
    if not input.is_floating_point():
        # no NaN to ignore: the median, as PyTorch computes it for integers
        return _declared.median(input) if over_all else _NanMedian(
            *_declared.median(input, dim, keepdim))
    if over_all:
        flat = input.reshape(-1)
        return _quantile(flat, 0.5, None, False, "lower", ignore_nan=True)
    if not input.ndim:
        _wrap_dim(dim, 0)
        return _NanMedian(input.clone(), C.zeros((), dtype=D.int64, device=input.device))
    dim = _wrap_dim(dim, input.ndim)
    if input.shape[dim] == 0:
        raise IndexError(f"median(): Expected reduction dim {dim} to have non-zero size.")
    vals = _quantile(input, 0.5, dim, keepdim, "lower", ignore_nan=True)
    target = vals.unsqueeze(dim) if not keepdim else vals
    hit = (input == target) & ~isnan(input)
    idx = where(hit, C.arange(input.shape[dim], device=input.device).reshape(
        [-1 if k == dim else 1 for k in range(input.ndim)]).expand(*input.shape),
        C.full(input.shape, input.shape[dim], dtype=D.int64, device=input.device))
    indices = idx.amin(dim, keepdim=keepdim)
    return _NanMedian(vals, indices)


def aminmax(input, *, dim=None, keepdim=False):
    """``(amin, amax)`` in one call.

    Examples
    --------
    >>> import torcia
    >>> torcia.aminmax(torcia.tensor([3, 1, 2]))
    torcia.return_types.aminmax(
    min=tensor(1),
    max=tensor(3))
    """
    if dim is None:
        lo, hi = input.amin(), input.amax()
        if keepdim:
            lo, hi = lo.reshape([1] * input.ndim), hi.reshape([1] * input.ndim)
    else:
        lo, hi = input.amin(dim, keepdim=keepdim), input.amax(dim, keepdim=keepdim)
    return _AMinMax(lo, hi)


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
    x = cat(parts, dim) if len(parts) > 1 else input
    for _ in range(n):
        # each difference is one shorter; past the length, the result stays empty
        length = builtins.max(x.shape[dim] - 1, 0)
        a = x.narrow(dim, builtins.min(1, x.shape[dim]), length)
        b = x.narrow(dim, 0, length)
        x = (a ^ b) if x.dtype is D.bool_ else a - b
    return x


def sum_to_size(input, *size):
    """Sum ``input`` down to ``size`` (which it must broadcast to).

    Examples
    --------
    >>> import torcia
    >>> torcia.ones(2, 3).sum_to_size(1, 3)
    tensor([[2., 2., 2.]])
    """
    size = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (list, tuple)) else size
    lead = input.ndim - len(size)
    out = input.sum(dim=tuple(range(lead))) if lead > 0 else input
    dims = tuple(k for k, s in enumerate(size) if s == 1 and out.shape[k] != 1)
    return out.sum(dim=dims, keepdim=True) if dims else out


def _no_bool(name, y, x):
    """PyTorch's refusal of bool samples, whose differences and sums are not numbers."""
    if y.dtype == D.bool_ or (isinstance(x, Tensor) and x.dtype == D.bool_):
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
    if isinstance(spacing, (int, float, Tensor)) and not (
            isinstance(spacing, Tensor) and spacing.ndim > 0):
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
    if isinstance(h, Tensor) and h.ndim == 1:
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
        h = float(h.item() if isinstance(h, Tensor) else h)
        inner = (sl(2, n) - sl(0, n - 2)) / (2 * h)
        if edge_order == 1:
            first = (sl(1, 2) - sl(0, 1)) / h
            last = (sl(n - 1, n) - sl(n - 2, n - 1)) / h
        else:
            first = (-1.5 * sl(0, 1) + 2 * sl(1, 2) - 0.5 * sl(2, 3)) / h
            last = (0.5 * sl(n - 3, n - 2) - 2 * sl(n - 2, n - 1) + 1.5 * sl(n - 1, n)) / h
    return cat([first, inner, last], d)


#: the functions here that are also Tensor methods, under the same name
METHODS = tuple(fn.__name__ for fn in _declared.PUBLIC) + (
    "sum", "mean", "prod", "amax", "amin", "argmax", "argmin", "var", "std", "norm",
    "logsumexp", "cumsum", "cumprod", "var_mean", "std_mean",
)

#: ... and those with an in-place ``name_`` method (computed out of place, then written back)
INPLACE = (
    "cumsum", "cumprod",
)

#: Tensor methods set only where ``torcia.linalg``'s, ``torcia.special``'s or the class's
#: own have not set them
FALLBACK_METHODS = (
    "nanmean", "quantile", "nanquantile", "nanmedian", "aminmax", "diff", "sum_to_size",
)

#: the names ``torcia`` exports from here
__all__ = sorted(tuple(fn.__name__ for fn in _declared.PUBLIC) + (
    "amax", "amin", "aminmax", "argmax", "argmin", "cumprod", "cumsum", "cumulative_trapezoid",
    "diff", "gradient", "logsumexp", "mean", "nanmean", "nanmedian", "nanquantile", "norm",
    "prod", "quantile", "std", "std_mean", "sum", "trapezoid", "trapz", "var", "var_mean",
))
