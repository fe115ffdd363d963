"""PyTorch's remaining everyday names: aliases (``arccos``, ``greater``, ``absolute``...),
small compositions of existing ops (``kron``, ``diff``, ``quantile``, ``rot90``,
``atleast_2d``, ``cartesian_prod``...), the in-place functions at top level (``torch.abs_``),
constants (``torch.inf``, ``torch.pi``) and ``finfo``/``iinfo``.

Every function here is written with differentiable torcia ops, so gradients come from the
ops it uses; ``METHODS`` become Tensor methods and ``INPLACE`` also get an ``op_`` method.
"""

from __future__ import annotations

import builtins
import itertools
import math

import numpy as np

from torcia import _creation as C
from torcia import _dtype as D
from torcia import _ops, _ops_complex, _ops_extra
from torcia._tensor import Tensor, _torch_name, inplace, result_type
from torcia.amp import autocast_as

inf = math.inf
nan = math.nan
pi = math.pi
e = math.e
newaxis = None

# ---------------------------------------------------------------------------------------
# aliases: PyTorch's second names for ops torcia has
# ---------------------------------------------------------------------------------------

ALIASES = {
    "absolute": "abs", "arccos": "acos", "arccosh": "acosh", "arcsin": "asin",
    "arcsinh": "asinh", "arctan": "atan", "arctan2": "atan2", "arctanh": "atanh",
    "negative": "neg", "greater": "gt", "greater_equal": "ge", "less": "lt",
    "less_equal": "le", "not_equal": "ne", "fix": "trunc", "row_stack": "vstack",
}


# the examples of the aliases of ops that have none in ``_ops._EXAMPLES``
_ALIAS_EXAMPLES = {
    "row_stack": """

Examples
--------
>>> import torcia
>>> torcia.row_stack([torcia.tensor([1, 2]), torcia.tensor([3, 4])])
tensor([[1, 2],
        [3, 4]])
""",
}


def _alias(new, old):
    fn = getattr(_ops, old)

    def alias(*args, **kwargs):
        return fn(*args, **kwargs)

    alias.__name__ = new
    alias.__doc__ = f"Alias of :func:`torcia.{old}` (PyTorch's ``torch.{new}``)." + (
        _ops._example(old).replace(f"torcia.{old}(", f"torcia.{new}(")
        or _ALIAS_EXAMPLES.get(new, ""))
    return alias


for _new, _old in ALIASES.items():
    globals()[_new] = _alias(_new, _old)


# ---------------------------------------------------------------------------------------
# dtype limits
# ---------------------------------------------------------------------------------------


class finfo:  # noqa: N801 - PyTorch's name
    """Limits of a floating dtype: ``bits``, ``eps``, ``max``, ``min``, ``tiny``
    (``smallest_normal``), ``resolution``, ``dtype``.

    Examples
    --------
    >>> import torcia
    >>> torcia.finfo(torcia.float32).eps
    1.1920928955078125e-07
    >>> torcia.finfo().dtype
    'float32'
    """

    def __init__(self, type=None):  # noqa: A002 - PyTorch's argument name
        dt = D.get_default_dtype() if type is None else type
        if not dt.is_floating_point:
            raise TypeError(f"torcia.finfo() requires a floating point input type. Use "
                            f"torcia.iinfo to handle '{dt}'")
        info = np.finfo(dt.np) if dt.np is not None and dt.name != "bfloat16" else None
        if info is None:
            self.bits, self.eps, self.max, self.tiny, self.resolution = (
                16, 0.0078125, 3.3895313892515355e38, 1.1754943508222875e-38, 0.01)
        else:
            self.bits = info.bits
            self.eps = float(info.eps)
            self.max = float(info.max)
            self.tiny = float(info.tiny)
            self.resolution = 10.0 ** -info.precision
        self.min = -self.max
        self.smallest_normal = self.tiny
        self.dtype = dt.name

    def __repr__(self):
        return (f"finfo(resolution={self.resolution}, min={self.min:g}, max={self.max:g}, "
                f"eps={self.eps:g}, smallest_normal={self.tiny:g}, tiny={self.tiny:g}, "
                f"dtype={self.dtype})")


class iinfo:  # noqa: N801 - PyTorch's name
    """Limits of an integer dtype: ``bits``, ``max``, ``min``, ``dtype``.

    Examples
    --------
    >>> import torcia
    >>> torcia.iinfo(torcia.int8).min
    -128
    """

    def __init__(self, type):  # noqa: A002 - PyTorch's argument name
        if type.is_floating_point or type.name == "bool":
            raise TypeError(f"torcia.iinfo() requires an integer input type. Use "
                            f"torcia.finfo to handle '{type}'")
        info = np.iinfo(type.np)
        self.bits, self.max, self.min, self.dtype = info.bits, int(info.max), int(info.min), \
            type.name

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"


def typename(obj) -> str:
    """``"torcia.FloatTensor"`` for a tensor (as ``Tensor.type()``), else the class path.

    Examples
    --------
    >>> import torcia
    >>> torcia.typename(torcia.zeros(1))
    'torcia.FloatTensor'
    """
    if isinstance(obj, Tensor):
        return obj.type()
    cls = obj if isinstance(obj, type) else type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def scalar_tensor(s, *, dtype=None, device=None, requires_grad=False):
    """A 0-d tensor holding the number ``s`` (default dtype float).

    Examples
    --------
    >>> import torcia
    >>> torcia.scalar_tensor(3)
    tensor(3.)
    """
    return C.tensor(s, dtype=dtype or D.get_default_dtype(), device=device,
                    requires_grad=requires_grad)


# ---------------------------------------------------------------------------------------
# elementwise compositions
# ---------------------------------------------------------------------------------------


def positive(input):
    """``input`` itself (PyTorch's unary plus); not defined for bool.

    Examples
    --------
    >>> import torcia
    >>> torcia.positive(torcia.tensor([-1, 2]))
    tensor([-1,  2])
    """
    if input.dtype is D.bool_:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


def deg2rad(input):
    """Degrees to radians.

    Examples
    --------
    >>> import torcia
    >>> torcia.deg2rad(torcia.tensor([180.0, 90.0]))
    tensor([3.1416, 1.5708])
    """
    _no_complex(input.dtype, "deg2rad", RuntimeError,
                "deg2rad is not supported for complex tensors.")
    return _ops._to_float(input) * (math.pi / 180.0)


def rad2deg(input):
    """Radians to degrees.

    Examples
    --------
    >>> import torcia
    >>> torcia.rad2deg(torcia.tensor([3.141592653589793]))
    tensor([180.])
    """
    _no_complex(input.dtype, "rad2deg", RuntimeError,
                "rad2deg is not supported for complex tensors.")
    return _ops._to_float(input) * (180.0 / math.pi)


def _no_complex(dtype, name, error=NotImplementedError, message=None):
    """PyTorch's refusal of an op it has no complex kernel of, computing in ``dtype``:
    ``error(message)``, by default its dispatcher's ``"name_cpu" not implemented``."""
    if dtype.category == 3:
        raise error(message or f'"{name}_cpu" not implemented for \'{_torch_name(dtype)}\'')


def logaddexp(input, other):
    """``log(exp(input) + exp(other))``, computed without overflow.

    Examples
    --------
    >>> import torcia
    >>> torcia.logaddexp(torcia.tensor([0.0]), torcia.tensor([0.0]))
    tensor([0.6931])
    """
    input, other = _log_add_operands(input, other, "logaddexp")
    # shifted by the greater (real part), which sets the magnitude
    m = _ops.maximum(input.real, other.real).detach() if input.is_complex() else \
        _ops.maximum(input, other).detach()
    m = _ops.where(_ops.isfinite(m), m, C.zeros_like(m))
    return m + ((input - m).exp() + (other - m).exp()).log()


def _log_add_operands(input, other, name):
    """logaddexp's operands in their common dtype, which must be floating (or complex
    for logaddexp): PyTorch has no integer kernel."""
    dt = result_type(input, other)
    if dt.category < 2 or (dt.category == 3 and name == "logaddexp2"):
        raise NotImplementedError(f'"{name}_cpu" not implemented for \'{_torch_name(dt)}\'')
    return _ops.to_dtype(input, dt), _ops.to_dtype(other, dt)


def logaddexp2(input, other):
    """``log2(2**input + 2**other)``, computed without overflow.

    Examples
    --------
    >>> import torcia
    >>> torcia.logaddexp2(torcia.tensor([1.0, 100.0]), torcia.tensor([1.0, 100.0]))
    tensor([  2., 101.])
    """
    input, other = _log_add_operands(input, other, "logaddexp2")
    return logaddexp(input * math.log(2), other * math.log(2)) / math.log(2)


def heaviside(input, values):
    """0 where ``input < 0``, 1 where ``> 0``, ``values`` where it is 0.

    Examples
    --------
    >>> import torcia
    >>> torcia.heaviside(torcia.tensor([-1.0, 0.0, 2.0]), torcia.tensor(0.5))
    tensor([0.0000, 0.5000, 1.0000])
    """
    if input.dtype is not values.dtype:
        raise RuntimeError(f"heaviside is not yet implemented for tensors with different "
                           f"dtypes, got {input.dtype} and {values.dtype}")
    zero = C.zeros_like(input)
    return _ops.where(input == 0, values.to(input.dtype), (input > 0).to(input.dtype) + zero)


def copysign(input, other):
    """``|input|`` with the sign of ``other`` (sign bit, so -0.0 counts as negative).

    Examples
    --------
    >>> import torcia
    >>> torcia.copysign(torcia.tensor([1.0, -2.0]), torcia.tensor([-1.0, -0.0]))
    tensor([-1., -2.])
    """
    dt = result_type(input, other)
    if dt.category < 2:
        dt = D.get_default_dtype()
    _no_complex(dt, "copysign")
    mag = _ops.to_dtype(input, dt).abs()
    # the gradient flows to input only (PyTorch's: other's sign is piecewise constant)
    if not isinstance(other, Tensor):
        return -mag if math.copysign(1.0, other) < 0 else mag
    return _ops.where(_ops.signbit(other), -mag, mag)


def ldexp(input, other):
    """``input * 2**other``.

    Examples
    --------
    >>> import torcia
    >>> torcia.ldexp(torcia.tensor([1.0, 3.0]), torcia.tensor([3, -1]))
    tensor([8.0000, 1.5000])
    """
    _ops._tensor_arg(other, "other")
    dt = result_type(input, other)
    if dt.category < 2:
        dt = D.get_default_dtype()
    return _ops.to_dtype(input, dt) * _ops.pow(2.0, _ops.to_dtype(other, dt))




def gcd(input, other):
    """Elementwise greatest common divisor of integer tensors.

    Examples
    --------
    >>> import torcia
    >>> torcia.gcd(torcia.tensor([12, 7]), torcia.tensor([18, 5]))
    tensor([6, 1])
    """
    _ops._tensor_arg(other, "other")
    return _host_binary(np.gcd, "gcd", input, other, "iu")


def lcm(input, other):
    """Elementwise least common multiple of integer tensors.

    Examples
    --------
    >>> import torcia
    >>> torcia.lcm(torcia.tensor([4, 6]), torcia.tensor([6, 5]))
    tensor([12, 30])
    """
    _ops._tensor_arg(other, "other")
    return _host_binary(np.lcm, "lcm", input, other, "iu")


def isneginf(input):
    """Where ``input`` is minus infinity.

    Examples
    --------
    >>> import torcia
    >>> torcia.isneginf(torcia.tensor([float("-inf"), float("inf"), 0.0]))
    tensor([ True, False, False])
    """
    return _ops.isinf(input) & (input < 0)


def isposinf(input):
    """Where ``input`` is plus infinity.

    Examples
    --------
    >>> import torcia
    >>> torcia.isposinf(torcia.tensor([float("-inf"), float("inf"), 0.0]))
    tensor([False,  True, False])
    """
    return _ops.isinf(input) & (input > 0)


def isreal(input):
    """Where the value is real: an imaginary part of 0 (everywhere, for real dtypes).

    Examples
    --------
    >>> import torcia
    >>> torcia.isreal(torcia.tensor([1.0, 2.0 - 0.5j, 3.0 + 0j]))
    tensor([ True, False,  True])
    """
    if input.dtype.category == 3:
        return _ops_complex.imag(input) == 0
    return C.ones(*input.shape, dtype=D.bool_, device=input.device)


def is_signed(input) -> bool:
    """Whether the dtype is signed.

    Examples
    --------
    >>> import torcia
    >>> torcia.is_signed(torcia.tensor([-1]))
    True
    >>> torcia.is_signed(torcia.tensor([1], dtype=torcia.uint8))
    False
    """
    return input.dtype.name not in ("uint8", "bool")


def is_nonzero(input) -> bool:
    """The truth of a one-element tensor (errors otherwise, as PyTorch).

    Examples
    --------
    >>> import torcia
    >>> torcia.is_nonzero(torcia.tensor([0.5]))
    True
    >>> torcia.is_nonzero(torcia.tensor(0))
    False
    """
    if input.numel() != 1:
        if input.numel() == 0:
            raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return bool(input.item())


def is_same_size(input, other) -> bool:
    """Whether two tensors have the same shape.

    Examples
    --------
    >>> import torcia
    >>> torcia.is_same_size(torcia.zeros(2, 3), torcia.ones(2, 3))
    True
    """
    return input.shape == other.shape


def is_inference(input) -> bool:
    """Whether the tensor was made under ``inference_mode``: torcia tensors never are.

    Examples
    --------
    >>> import torcia
    >>> torcia.is_inference(torcia.zeros(1))
    False
    """
    return False


def rsub(input, other, *, alpha=1):
    """``other - alpha * input``.

    Examples
    --------
    >>> import torcia
    >>> torcia.rsub(torcia.tensor([1, 2]), 10)
    tensor([9, 8])
    """
    return _ops.sub(other, input, alpha=alpha)


def nan_to_num_(input, nan=0.0, posinf=None, neginf=None):
    """In-place :func:`nan_to_num`.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([float("nan"), 1.0])
    >>> torcia.nan_to_num_(x, nan=-1.0)
    tensor([-1.,  1.])
    """
    return input.nan_to_num_(nan=nan, posinf=posinf, neginf=neginf)


# ---------------------------------------------------------------------------------------
# reductions and statistics
# ---------------------------------------------------------------------------------------


def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """Mean over the non-NaN elements.

    Examples
    --------
    >>> import torcia
    >>> torcia.nanmean(torcia.tensor([1.0, float("nan"), 3.0]))
    tensor(2.)
    """
    if not input.is_floating_point():
        raise RuntimeError(f"nanmean(): expected input to have floating point dtype but got "
                           f"{input.dtype}")
    keep = ~_ops.isnan(input)
    total = _ops.nansum(input, dim=dim, keepdim=keepdim)
    count = keep.sum(dim=dim, keepdim=keepdim) if dim is not None else keep.sum()
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
    scalar_q = not isinstance(q, Tensor)
    qs = C.tensor([float(q)] if scalar_q else q.tolist(), dtype=D.float64)
    if qs.ndim > 1 or bool(((qs < 0) | (qs > 1)).any()):
        raise RuntimeError("quantile() q values must be in the range [0, 1]")
    if dim is not None:
        dim = _ops._wrap_dim(dim, input.ndim)
    x = input.reshape(-1) if dim is None or not input.ndim else input.movedim(dim, -1)
    srt = x.sort(dim=-1).values  # NaNs sort last
    n = x.shape[-1]
    if ignore_nan:
        valid = (~_ops.isnan(x)).sum(-1, keepdim=True).to(D.float64)
    else:
        valid = C.full((*x.shape[:-1], 1), float(n), dtype=D.float64, device=x.device)
    pos = (valid - 1).clamp(min=0) * qs.to(x.device)  # (..., len(q))
    if interpolation == "lower":
        pos = pos.floor()
    elif interpolation == "higher":
        pos = pos.ceil()
    elif interpolation == "nearest":
        pos = pos.round()
    lo = pos.floor().long().clamp(0, max(n - 1, 0))
    hi = pos.ceil().long().clamp(0, max(n - 1, 0))
    a = srt.gather(-1, lo)
    b = srt.gather(-1, hi)
    if interpolation == "midpoint":
        frac = (hi != lo).to(x.dtype) * 0.5
    else:
        frac = (pos - lo.to(D.float64)).to(x.dtype)
    out = a + (b - a) * frac
    if not ignore_nan:
        has_nan = _ops.isnan(x).any(-1, keepdim=True)
        out = _ops.where(has_nan, C.full_like(out, math.nan), out)
    else:
        out = _ops.where(valid == 0, C.full_like(out, math.nan), out)
    out = out.movedim(-1, 0)  # q first, as PyTorch
    if keepdim:
        if dim is None:
            out = out.reshape(out.shape[0], *([1] * input.ndim))
        elif input.ndim:
            out = out.unsqueeze(dim + 1)
    elif dim is not None and not input.ndim:
        out = out.reshape(out.shape[0])  # a 0-dim tensor's dim 0 leaves no dim
    return out[0] if scalar_q else out


_NanMedian = _ops._return_type("nanmedian", ("values", "indices"))
_AMinMax = _ops._return_type("aminmax", ("min", "max"))


def nanmedian(input, dim=None, keepdim=False):
    """The median ignoring NaNs (the lower of the two middle values, as ``median``).

    Examples
    --------
    >>> import torcia
    >>> torcia.nanmedian(torcia.tensor([1.0, float("nan"), 3.0, 2.0]))
    tensor(2.)
    """
    if not input.is_floating_point():
        # no NaN to ignore: the median, as PyTorch computes it for integers
        out = _ops_extra.median(input, dim, keepdim)
        return out if dim is None else _NanMedian(*out)
    if dim is None:
        flat = input.reshape(-1)
        return _quantile(flat, 0.5, None, False, "lower", ignore_nan=True)
    if not input.ndim:
        _ops._wrap_dim(dim, 0)
        return _NanMedian(input.clone(), C.zeros((), dtype=D.int64, device=input.device))
    dim = _ops._wrap_dim(dim, input.ndim)
    if input.shape[dim] == 0:
        raise IndexError(f"median(): Expected reduction dim {dim} to have non-zero size.")
    vals = _quantile(input, 0.5, dim, keepdim, "lower", ignore_nan=True)
    target = vals.unsqueeze(dim) if not keepdim else vals
    hit = (input == target) & ~_ops.isnan(input)
    idx = _ops.where(hit, C.arange(input.shape[dim], device=input.device).reshape(
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


def dist(input, other, p=2):
    """The ``p``-norm of ``input - other``.

    Examples
    --------
    >>> import torcia
    >>> torcia.dist(torcia.tensor([0.0, 0.0]), torcia.tensor([3.0, 4.0]))
    tensor(5.)
    """
    return (input - other).norm(p=p)


@autocast_as("renorm")
def renorm(input, p, dim, maxnorm):
    """Rescale each slice along ``dim`` whose ``p``-norm exceeds ``maxnorm`` to that norm.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[3.0, 4.0], [0.3, 0.4]])
    >>> torcia.renorm(x, 2, 0, 1.0)
    tensor([[0.6000, 0.8000],
            [0.3000, 0.4000]])
    """
    if input.ndim < 2:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {input.ndim} "
                           "dimensions")
    if p <= 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    if input.dtype.category < 2:
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor "
                           f"as input. Got {_torch_name(input.dtype)}")
    others = tuple(d for d in range(input.ndim) if d != _ops._wrap_dim(dim, input.ndim))
    norms = input.abs().pow(p).sum(dim=others, keepdim=True).pow(1.0 / p)
    scale = _ops.where(norms > maxnorm, maxnorm / (norms + 1e-7), C.ones_like(norms))
    return input * scale


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """Collapse runs of equal consecutive elements (of the flattened input, or slices
    along ``dim``).

    Examples
    --------
    >>> import torcia
    >>> torcia.unique_consecutive(torcia.tensor([1, 1, 2, 2, 1]), return_counts=True)
    (tensor([1, 2, 1]), tensor([2, 2, 1]))
    """
    x = input.reshape(-1) if dim is None else input.movedim(dim, 0)
    n = x.shape[0]
    if n == 0:
        outs = [input]
    else:
        flat = x.reshape(n, -1)
        change = C.ones(n, dtype=D.bool_, device=input.device)
        if n > 1:
            change[1:] = (flat[1:] != flat[:-1]).any(dim=1)
        starts = change.nonzero().reshape(-1)
        values = x[starts]
        outs = [values if dim is None else values.movedim(0, dim)]
        if return_inverse:
            inverse = change.long().cumsum(0) - 1
            outs.append(inverse.reshape(input.shape) if dim is None else inverse)
        if return_counts:
            ends = _ops.cat([starts[1:], C.tensor([n], device=input.device)])
            outs.append(ends - starts)
    return outs[0] if len(outs) == 1 else tuple(outs)


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Where each of ``elements`` occurs in ``test_elements``.

    Examples
    --------
    >>> import torcia
    >>> torcia.isin(torcia.tensor([1, 2, 3]), torcia.tensor([2, 5]))
    tensor([False,  True, False])
    """
    el = elements if isinstance(elements, Tensor) else C.tensor(elements)
    te = test_elements.cpu().numpy() if isinstance(test_elements, Tensor) else test_elements
    out = np.isin(el.cpu().numpy(), te, invert=invert)
    return C.tensor(out, device=el.device)


# ---------------------------------------------------------------------------------------
# shapes and layout
# ---------------------------------------------------------------------------------------


def _each(fn, tensors):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return tuple(fn(t) for t in tensors[0])
    out = tuple(fn(t) for t in tensors)
    return out[0] if len(out) == 1 else out


def atleast_1d(*tensors):
    """Each tensor with at least one dimension.

    Examples
    --------
    >>> import torcia
    >>> torcia.atleast_1d(torcia.tensor(5)).shape
    torcia.Size([1])
    """
    return _each(lambda t: t.reshape(1) if t.ndim == 0 else t, tensors)


def atleast_2d(*tensors):
    """Each tensor with at least two dimensions (a vector becomes a row).

    Examples
    --------
    >>> import torcia
    >>> torcia.atleast_2d(torcia.tensor([1, 2])).shape
    torcia.Size([1, 2])
    """
    return _each(lambda t: t.reshape(1, -1) if t.ndim < 2 else t, tensors)


def atleast_3d(*tensors):
    """Each tensor with at least three dimensions, as ``numpy.atleast_3d``.

    Examples
    --------
    >>> import torcia
    >>> torcia.atleast_3d(torcia.tensor([1, 2])).shape
    torcia.Size([1, 2, 1])
    """
    def three(t):
        if t.ndim == 0:
            return t.reshape(1, 1, 1)
        if t.ndim == 1:
            return t.reshape(1, -1, 1)
        if t.ndim == 2:
            return t.unsqueeze(-1)
        return t
    return _each(three, tensors)


def column_stack(tensors):
    """Stack 0-d/1-d tensors as columns (and 2-d ones side by side).

    Examples
    --------
    >>> import torcia
    >>> torcia.column_stack([torcia.tensor([1, 2]), torcia.tensor([3, 4])])
    tensor([[1, 3],
            [2, 4]])
    """
    cols = [t.reshape(-1, 1) if t.ndim < 2 else t for t in tensors]
    return _ops.cat(cols, 1)


def dstack(tensors):
    """Concatenate along the third dimension after :func:`atleast_3d`.

    Examples
    --------
    >>> import torcia
    >>> torcia.dstack([torcia.tensor([1, 2]), torcia.tensor([3, 4])])
    tensor([[[1, 3],
             [2, 4]]])
    """
    return _ops.cat([atleast_3d(t) for t in tensors], 2)


def _split_by(name, dim_needed, dim, example):
    def split(input, indices_or_sections):
        if input.ndim < dim_needed:
            raise RuntimeError(f"torcia.{name} requires a tensor with at least {dim_needed} "
                               f"dimension, but got a tensor with {input.ndim} dimensions!")
        d = 0 if (name == "hsplit" and input.ndim == 1) else dim
        if isinstance(indices_or_sections, int) and input.shape[d] % indices_or_sections:
            raise RuntimeError(f"torcia.{name} attempted to split along dimension {d}, but "
                               f"the size of the dimension {input.shape[d]} is not "
                               f"divisible by the split_size {indices_or_sections}!")
        return _ops.tensor_split(input, indices_or_sections, d)

    split.__name__ = name
    split.__doc__ = (f"Split ``input`` into pieces along dimension {dim}, as ``numpy.{name}``."
                     f"\n\nExamples\n--------\n>>> import torcia\n{example}\n")
    return split


hsplit = _split_by("hsplit", 1, 1, """>>> torcia.hsplit(torcia.arange(6).reshape(2, 3), [1])
(tensor([[0],
        [3]]), tensor([[1, 2],
        [4, 5]]))""")
vsplit = _split_by("vsplit", 2, 0, """>>> torcia.vsplit(torcia.arange(6).reshape(3, 2), [1])
(tensor([[0, 1]]), tensor([[2, 3],
        [4, 5]]))""")
dsplit = _split_by("dsplit", 3, 2, """>>> [t.shape for t in torcia.dsplit(torcia.zeros(2, 2, 4), 2)]
[torcia.Size([2, 2, 2]), torcia.Size([2, 2, 2])]""")


def ravel(input):
    """The flattened tensor.

    Examples
    --------
    >>> import torcia
    >>> torcia.ravel(torcia.tensor([[1, 2], [3, 4]]))
    tensor([1, 2, 3, 4])
    """
    return input.reshape(-1)


def rot90(input, k=1, dims=(0, 1)):
    """Rotate by 90 degrees ``k`` times in the plane of ``dims``.

    Examples
    --------
    >>> import torcia
    >>> torcia.rot90(torcia.tensor([[1, 2], [3, 4]]))
    tensor([[2, 4],
            [1, 3]])
    """
    d0, d1 = dims
    k %= 4
    if k == 1:
        return input.flip([d1]).transpose(d0, d1)
    if k == 2:
        return input.flip([d0, d1])
    if k == 3:
        return input.transpose(d0, d1).flip([d1])
    return input.clone()


def take(input, index):
    """Elements of the flattened ``input`` at ``index``; the result has ``index``'s shape.

    Examples
    --------
    >>> import torcia
    >>> torcia.take(torcia.tensor([[1, 2], [3, 4]]), torcia.tensor([0, 3]))
    tensor([1, 4])
    """
    return input.reshape(-1)[_flat_index(index, input.numel())].reshape(index.shape)


def _flat_index(index, numel):
    """``take``/``put``'s indices into the flattened input, negative ones counted from the
    end, as a 1-D tensor; one outside ``[-numel, numel)`` raises PyTorch's IndexError."""
    idx = index.reshape(-1)
    bad = idx._data[(idx._data < -numel) | (idx._data >= numel)]
    if bad.size:
        raise IndexError(f"out of range: tried to access index {int(bad[0])} on a tensor of "
                         f"{numel} elements.")
    return _ops.where(idx < 0, idx + numel, idx)


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
    x = _ops.cat(parts, dim) if len(parts) > 1 else input
    for _ in range(n):
        # each difference is one shorter; past the length, the result stays empty
        length = max(x.shape[dim] - 1, 0)
        a = x.narrow(dim, min(1, x.shape[dim]), length)
        b = x.narrow(dim, 0, length)
        x = (a ^ b) if x.dtype is D.bool_ else a - b
    return x


def kron(input, other):
    """The Kronecker product.

    Examples
    --------
    >>> import torcia
    >>> torcia.kron(torcia.eye(2), torcia.ones(1, 2))
    tensor([[1., 1., 0., 0.],
            [0., 0., 1., 1.]])
    """
    nd = max(input.ndim, other.ndim)
    a = input.reshape((1,) * (nd - input.ndim) + tuple(input.shape))
    b = other.reshape((1,) * (nd - other.ndim) + tuple(other.shape))
    a_shape, b_shape = [], []
    for k in range(nd):
        a_shape += [a.shape[k], 1]
        b_shape += [1, b.shape[k]]
    out = a.reshape(a_shape) * b.reshape(b_shape)
    return out.reshape([a.shape[k] * b.shape[k] for k in range(nd)])


def trace(input):
    """The sum of the main diagonal of a matrix.

    Examples
    --------
    >>> import torcia
    >>> torcia.trace(torcia.tensor([[1.0, 2.0], [3.0, 4.0]]))
    tensor(5.)
    """
    if input.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.ndim}")
    return input.diagonal().sum()


def diagflat(input, offset=0):
    """A matrix with the flattened ``input`` on diagonal ``offset``.

    Examples
    --------
    >>> import torcia
    >>> torcia.diagflat(torcia.tensor([1, 2]))
    tensor([[1, 0],
            [0, 2]])
    """
    return _ops_extra.diag(input.reshape(-1), offset)


@autocast_as("chain_matmul")
def chain_matmul(*matrices):
    """The product of 2-D matrices, left to right (deprecated in PyTorch for
    ``linalg.multi_dot``).

    Examples
    --------
    >>> import torcia
    >>> a = torcia.tensor([[1.0, 2.0]])
    >>> torcia.chain_matmul(a, torcia.eye(2), a.t())
    tensor([[5.]])
    """
    out = matrices[0]
    for m in matrices[1:]:
        out = out @ m
    return out


def block_diag(*tensors):
    """A block-diagonal matrix of the (0-, 1- or 2-D) inputs.

    Examples
    --------
    >>> import torcia
    >>> torcia.block_diag(torcia.tensor([[1, 2]]), torcia.tensor(3))
    tensor([[1, 2, 0],
            [0, 0, 3]])
    """
    if not tensors:
        return C.empty(0, 0)
    mats = [t.reshape(1, -1) if t.ndim < 2 else t for t in tensors]
    if any(m.ndim != 2 for m in mats):
        raise RuntimeError("torcia.block_diag: Input tensors must have 2 or fewer dimensions")
    rows = builtins.sum(m.shape[0] for m in mats)
    cols = builtins.sum(m.shape[1] for m in mats)
    dtype = mats[0].dtype
    for m in mats[1:]:
        dtype = D.promote_types(dtype, m.dtype)
    out = C.zeros(rows, cols, dtype=dtype, device=mats[0].device)
    r = c = 0
    pieces = []
    for m in mats:
        pieces.append((r, c, m))
        r += m.shape[0]
        c += m.shape[1]
    for r, c, m in pieces:
        pad_l, pad_r = c, cols - c - m.shape[1]
        row = _ops.cat([C.zeros(m.shape[0], pad_l, dtype=dtype, device=m.device), m.to(dtype),
                        C.zeros(m.shape[0], pad_r, dtype=dtype, device=m.device)], 1)
        out = _ops.cat([out[:r], row, out[r + m.shape[0]:]], 0)
    return out


def meshgrid(*tensors, indexing=None):
    """Coordinate grids from 1-D tensors (``indexing`` "ij", the default, or "xy").

    Examples
    --------
    >>> import torcia
    >>> gx, gy = torcia.meshgrid(torcia.tensor([1, 2]), torcia.tensor([3, 4, 5]),
    ...                          indexing="ij")
    >>> gx.shape
    torcia.Size([2, 3])
    """
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing is None:
        import warnings

        warnings.warn("torch.meshgrid: in an upcoming release, it will be required to pass "
                      "the indexing argument.", UserWarning, stacklevel=2)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"torch.meshgrid: indexing must be one of \"xy\" or \"ij\", "
                           f"but received: {indexing}")
    if any(t.ndim > 1 for t in tensors):
        raise RuntimeError("torch.meshgrid: Expected 0D or 1D tensor in the tensor list")
    vecs = [t.reshape(-1) for t in tensors]
    shape = [v.shape[0] for v in vecs]
    grids = []
    for k, v in enumerate(vecs):
        view = [1] * len(vecs)
        view[k] = -1
        grid = v.reshape(view).expand(*shape)
        # "xy" is "ij" with the first two axes exchanged
        grids.append(grid.transpose(0, 1) if indexing == "xy" and len(vecs) >= 2 else grid)
    return tuple(grids)


def cartesian_prod(*tensors):
    """All combinations of one element of each 1-D tensor, one per row.

    Examples
    --------
    >>> import torcia
    >>> torcia.cartesian_prod(torcia.tensor([1, 2]), torcia.tensor([3, 4]))
    tensor([[1, 3],
            [1, 4],
            [2, 3],
            [2, 4]])
    """
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return _ops.stack([g.reshape(-1) for g in grids], 1)


def combinations(input, r=2, with_replacement=False):
    """The length-``r`` combinations of a 1-D tensor's elements, one per row.

    Examples
    --------
    >>> import torcia
    >>> torcia.combinations(torcia.tensor([1, 2, 3]))
    tensor([[1, 2],
            [1, 3],
            [2, 3]])
    """
    n = input.shape[0]
    pick = (itertools.combinations_with_replacement if with_replacement
            else itertools.combinations)(range(n), r)
    idx = C.tensor(list(pick), dtype=D.int64, device=input.device).reshape(-1, r)
    return input[idx] if idx.numel() else C.empty(0, r, dtype=input.dtype)


def _tri_indices(fn, row, col, offset, dtype, device):
    r, c = fn(row, offset, col)
    return C.tensor(np.stack([r, c]).astype(np.int64), dtype=dtype or D.int64, device=device)


def tril_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """Row and column indices of the lower triangle of a ``row x col`` matrix.

    Examples
    --------
    >>> import torcia
    >>> torcia.tril_indices(3, 3)
    tensor([[0, 1, 1, 2, 2, 2],
            [0, 0, 1, 0, 1, 2]])
    """
    return _tri_indices(np.tril_indices, row, col, offset, dtype, device)


def triu_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """Row and column indices of the upper triangle of a ``row x col`` matrix.

    Examples
    --------
    >>> import torcia
    >>> torcia.triu_indices(3, 3, offset=1)
    tensor([[0, 0, 1],
            [1, 2, 2]])
    """
    return _tri_indices(np.triu_indices, row, col, offset, dtype, device)


def unravel_index(indices, shape):
    """Flat indices into ``shape`` as a tuple of coordinate tensors.

    Examples
    --------
    >>> import torcia
    >>> torcia.unravel_index(torcia.tensor([5, 1]), (2, 3))
    (tensor([1, 0]), tensor([2, 1]))
    """
    idx = indices if isinstance(indices, Tensor) else C.tensor(indices)
    if idx.is_floating_point():
        raise TypeError("expected 'indices' to be integer dtype, but got "
                        f"{idx.dtype}")
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    total = int(np.prod(shape))
    if bool(((idx < -total) | (idx >= total)).any()):
        raise RuntimeError(f"'indices' must be in range [-{total}, {total})")
    coords = np.unravel_index(idx.cpu().numpy() % total, shape)
    return tuple(C.tensor(np.asarray(c, dtype=np.int64), device=idx.device) for c in coords)


# ---------------------------------------------------------------------------------------
# indexed writes (out of place; the op_ versions come from INPLACE)
# ---------------------------------------------------------------------------------------


def index_fill(input, dim, index, value):
    """A copy of ``input`` with the slices at ``index`` along ``dim`` set to ``value``.

    Examples
    --------
    >>> import torcia
    >>> torcia.index_fill(torcia.zeros(2, 3), 1, torcia.tensor([0, 2]), 1.0)
    tensor([[1., 0., 1.],
            [1., 0., 1.]])
    """
    d = _ops._wrap_dim(dim, input.ndim)
    size = _ops._size_at(input, d)
    _ops._check_range(index._data, size, d, IndexError)
    mask_shape = [1] * input.ndim
    if input.ndim:
        mask_shape[d] = size
    mask = C.zeros(size, dtype=D.bool_, device=input.device)
    mask[index.reshape(-1)] = True
    return input.masked_fill(mask.reshape(mask_shape), value)


def masked_scatter(input, mask, source):
    """A copy of ``input`` with the positions where ``mask`` is True filled, in order, from
    ``source``.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.zeros(4)
    >>> mask = torcia.tensor([True, False, True, False])
    >>> torcia.masked_scatter(x, mask, torcia.tensor([1.0, 2.0]))
    tensor([1., 0., 2., 0.])
    """
    m = mask.expand(*input.shape) if mask.shape != input.shape else mask
    flat_mask = m.reshape(-1)
    count = int(flat_mask.sum())
    take_idx = (flat_mask.long().cumsum(0) - 1).clamp(min=0)
    src = source.reshape(-1)
    if src.numel() < count:
        raise RuntimeError("masked_scatter: expected source to have at least as many "
                           "elements as ones in mask")
    gathered = src[take_idx]
    return _ops.where(flat_mask, gathered.to(input.dtype), input.reshape(-1)).reshape(
        input.shape)


def put(input, index, source, accumulate=False):
    """A copy of ``input`` with the flattened positions ``index`` set from ``source`` (or
    increased by it with ``accumulate``).

    Examples
    --------
    >>> import torcia
    >>> torcia.put(torcia.zeros(2, 2), torcia.tensor([0, 3]), torcia.tensor([5.0, 6.0]))
    tensor([[5., 0.],
            [0., 6.]])
    """
    flat = input.reshape(-1)
    idx = _flat_index(index, flat.numel())
    if accumulate:
        out = flat.index_add(0, idx, source.reshape(-1).to(input.dtype))
    else:
        out = flat.index_copy(0, idx, source.reshape(-1).to(input.dtype))
    return out.reshape(input.shape)


def select_scatter(input, src, dim, index):
    """A copy of ``input`` with ``input.select(dim, index)`` replaced by ``src``.

    Examples
    --------
    >>> import torcia
    >>> torcia.select_scatter(torcia.zeros(2, 2), torcia.tensor([1.0, 2.0]), 0, 1)
    tensor([[0., 0.],
            [1., 2.]])
    """
    out = input.clone()
    key = [slice(None)] * input.ndim
    key[dim] = index
    out[tuple(key)] = src
    return out


def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    """A copy of ``input`` with the slice ``start:end:step`` along ``dim`` replaced.

    Examples
    --------
    >>> import torcia
    >>> torcia.slice_scatter(torcia.zeros(4), torcia.ones(2), start=0, step=2)
    tensor([1., 0., 1., 0.])
    """
    out = input.clone()
    key = [slice(None)] * input.ndim
    key[dim] = slice(start, end, step)
    out[tuple(key)] = src
    return out


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    """A copy of ``input`` with the diagonal ``(offset, dim1, dim2)`` replaced by ``src``.

    Examples
    --------
    >>> import torcia
    >>> torcia.diagonal_scatter(torcia.zeros(2, 2), torcia.tensor([1.0, 2.0]))
    tensor([[1., 0.],
            [0., 2.]])
    """
    out = input.clone()
    out.diagonal(offset, dim1, dim2).copy_(src)
    return out


def fill(input, value):
    """A tensor like ``input`` filled with ``value``.

    Examples
    --------
    >>> import torcia
    >>> torcia.fill(torcia.zeros(2), 7.0)
    tensor([7., 7.])
    """
    return C.full_like(input, value.item() if isinstance(value, Tensor) else value)


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


def adjoint(input):
    """The conjugate transpose of the last two dimensions: a view of a real tensor, a
    conjugated copy of a complex one (as :func:`conj`).

    Examples
    --------
    >>> import torcia
    >>> torcia.adjoint(torcia.tensor([[1 + 2j, 3j]]))
    tensor([[1.-2.j],
            [0.-3.j]])
    """
    return _ops_complex.conj(input.transpose(-2, -1))


def ndimension(input) -> int:
    """Alias of ``dim()``.

    Examples
    --------
    >>> import torcia
    >>> torcia.zeros(2, 3).ndimension()
    2
    """
    return input.ndim


def new(self, *args, **kwargs):
    """``self.new(...)``: PyTorch's legacy constructor with ``self``'s dtype and device.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([1.0], dtype=torcia.float64)
    >>> x.new([1, 2]), x.new(2, 3).shape
    (tensor([1., 2.], dtype=torcia.float64), torcia.Size([2, 3]))
    """
    from torcia._tensor import _legacy_new

    return _legacy_new(self.dtype, args, kwargs.get("device", self.device))


# ---------------------------------------------------------------------------------------
# more functions real code calls
# ---------------------------------------------------------------------------------------


def fill_diagonal(input, fill_value, wrap=False):
    """A copy of ``input`` (2-D, or N-D with equal sizes) with its main diagonal set to
    ``fill_value``; ``wrap`` continues the diagonal below a tall matrix, as NumPy's.

    Examples
    --------
    >>> import torcia
    >>> torcia.zeros(3, 2).fill_diagonal(5.0)
    tensor([[5., 0.],
            [0., 5.],
            [0., 0.]])
    >>> torcia.zeros(5, 2).fill_diagonal(5.0, wrap=True)
    tensor([[5., 0.],
            [0., 5.],
            [0., 0.],
            [5., 0.],
            [0., 5.]])
    """
    if input.ndim < 2:
        raise RuntimeError("dimensions must larger than 1")
    if input.ndim > 2 and len(set(input.shape)) != 1:
        raise RuntimeError("all dimensions of input must be of equal length")
    mask = np.zeros(tuple(input.shape), dtype=bool)
    np.fill_diagonal(mask, True, wrap=wrap)
    return _ops.where(C.tensor(mask, device=input.device),
                      C.full_like(input, fill_value), input)


def where_method(self, condition, y):
    """``Tensor.where(condition, y)``: ``torcia.where(condition, self, y)``.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([1, -2, 3])
    >>> x.where(x > 0, 0)
    tensor([1, 0, 3])
    """
    return _ops.where(condition, self, y)


def split_with_sizes(input, split_sizes, dim=0):
    """Split into pieces of the given sizes along ``dim`` (which must add up to it).

    Examples
    --------
    >>> import torcia
    >>> torcia.split_with_sizes(torcia.arange(5), [2, 3])
    (tensor([0, 1]), tensor([2, 3, 4]))
    """
    if builtins.sum(split_sizes) != input.shape[dim]:
        raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to "
                           f"{input.shape[dim]} (input tensor's size at dimension {dim}), "
                           f"but got split_sizes={list(split_sizes)}")
    return _ops.split(input, list(split_sizes), dim)


def _host_binary(fn, name, input, other, kinds):
    """``fn`` (a NumPy function) of two operands on the host, in their dtype as PyTorch
    promotes them, which must be of a NumPy kind in ``kinds`` (else PyTorch's refusal of
    its kernel ``name``); the result is not differentiable."""
    dt = result_type(input, other)
    if dt.to_numpy().kind not in kinds:
        raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{_torch_name(dt)}'")
    a = _ops.to_dtype(input, dt).detach().cpu().numpy()
    b = _ops.to_dtype(other, dt).detach().cpu().numpy() if isinstance(other, Tensor) else \
        np.asarray(D.checked_scalar(other, dt), dtype=dt.np)
    return C.tensor(np.asarray(fn(a, b)).astype(dt.np, copy=False), device=input.device)


def nextafter(input, other):
    """The next representable float after ``input`` towards ``other`` (no gradient).

    Examples
    --------
    >>> import torcia
    >>> torcia.nextafter(torcia.tensor([1.0]), torcia.tensor([2.0])) > 1
    tensor([True])
    """
    return _host_binary(np.nextafter, "nextafter", input, other, "f")


def bitwise_left_shift(input, other):
    """``input << other`` on integer tensors.

    Examples
    --------
    >>> import torcia
    >>> torcia.bitwise_left_shift(torcia.tensor([1, 3]), 2)
    tensor([ 4, 12])
    """
    return _host_binary(np.left_shift, "lshift", input, other, "iu")


def bitwise_right_shift(input, other):
    """``input >> other`` on integer tensors (arithmetic for signed ones).

    Examples
    --------
    >>> import torcia
    >>> torcia.bitwise_right_shift(torcia.tensor([8, -8]), 2)
    tensor([ 2, -2])
    """
    return _host_binary(np.right_shift, "rshift", input, other, "iu")


_Frexp = _ops._return_type("frexp", ("mantissa", "exponent"))


def frexp(input):
    """``(mantissa, exponent)`` with ``input == mantissa * 2**exponent`` and
    ``0.5 <= |mantissa| < 1``; the exponent is int32.

    Examples
    --------
    >>> import torcia
    >>> torcia.frexp(torcia.tensor([8.0])).exponent
    tensor([4], dtype=torcia.int32)
    """
    if not input.is_floating_point():
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    m, e = np.frexp(input.detach().cpu().numpy())
    return _Frexp(C.tensor(m, device=input.device),
                  C.tensor(e.astype(np.int32), device=input.device))


_Histogram = _ops._return_type("histogram", ("hist", "bin_edges"))


def histogram(input, bins=100, *, range=None, weight=None, density=False):  # noqa: A002
    """Histogram of ``input``'s values: ``bins`` equal bins over ``range`` (default the
    data's extent) or explicit edges; returns ``(hist, bin_edges)``, as NumPy's.

    Examples
    --------
    >>> import torcia
    >>> hist, edges = torcia.histogram(torcia.tensor([1.0, 2.0, 2.0, 4.0]), bins=3)
    >>> hist
    tensor([1., 2., 1.])
    >>> edges
    tensor([1., 2., 3., 4.])
    """
    data = input.detach().cpu().numpy().reshape(-1)
    edges = bins.detach().cpu().numpy() if isinstance(bins, Tensor) else bins
    w = None if weight is None else weight.detach().cpu().numpy().reshape(-1)
    hist, out_edges = np.histogram(data, edges, range=range, weights=w, density=density)
    return _Histogram(C.tensor(hist.astype(data.dtype), device=input.device),
                      C.tensor(out_edges.astype(data.dtype), device=input.device))


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The trapezoidal-rule integral of ``y`` along ``dim`` (spacing ``dx``, default 1, or
    sample points ``x``).

    Examples
    --------
    >>> import torcia
    >>> torcia.trapezoid(torcia.tensor([1.0, 2.0, 3.0]))
    tensor(4.)
    """
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


def inclusive_range(start=0, end=None, step=1, *, dtype=None, device=None,
                    requires_grad=False):
    """PyTorch's deprecated inclusive ``range``: ``start, start + step, ..., end``
    (float by default).

    Examples
    --------
    >>> import torcia
    >>> torcia.range(1, 4)
    tensor([1., 2., 3., 4.])
    """
    if end is None:
        start, end = 0, start
    count = int(math.floor((end - start) / step)) + 1
    values = [start + k * step for k in builtins.range(max(count, 0))]
    return C.tensor(values, dtype=dtype or D.get_default_dtype(), device=device,
                    requires_grad=requires_grad)


def pdist(input, p=2.0):
    """The ``p``-norm distances between every pair of rows ``i < j`` of a 2-D ``input``,
    in row-major order of the upper triangle.

    Examples
    --------
    >>> import torcia
    >>> torcia.pdist(torcia.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]]))
    tensor([5.0000, 1.0000, 4.2426])
    """
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    n = input.shape[0]
    rows, cols = np.triu_indices(n, 1)
    diffs = input[C.tensor(rows, device=input.device)] - input[C.tensor(cols,
                                                                         device=input.device)]
    if p == 0:
        return (diffs != 0).sum(-1).to(input.dtype)
    if p == math.inf:
        return diffs.abs().amax(-1)
    return diffs.abs().pow(p).sum(-1).pow(1.0 / p)


def norm_except_dim(v, pow=2, dim=0):  # noqa: A002 - PyTorch's argument name
    """The ``pow``-norm of ``v`` over every dimension but ``dim`` (all, for ``dim=-1``).

    Examples
    --------
    >>> import torcia
    >>> torcia.norm_except_dim(torcia.tensor([[3.0, 4.0], [0.0, 1.0]]), dim=0)
    tensor([[5.],
            [1.]])
    """
    if dim == -1:
        return v.norm(pow)
    dims = tuple(d for d in builtins.range(v.ndim) if d != dim)
    return v.abs().pow(pow).sum(dim=dims, keepdim=True).pow(1.0 / pow)


def frobenius_norm(input, dim=(-2, -1), keepdim=False):
    """The Frobenius norm over ``dim``.

    Examples
    --------
    >>> import torcia
    >>> torcia.frobenius_norm(torcia.tensor([[3.0, 0.0], [0.0, 4.0]]))
    tensor(5.)
    """
    return input.abs().pow(2).sum(dim=dim, keepdim=keepdim).sqrt()


def constant_pad_nd(input, pad, value=0):
    """Pad with ``value`` (``F.pad``'s constant mode).

    Examples
    --------
    >>> import torcia
    >>> torcia.constant_pad_nd(torcia.tensor([1, 2]), (1, 2), value=9)
    tensor([9, 1, 2, 9, 9])
    """
    return _ops_extra.pad(input, pad, "constant", value)


def poisson(input, generator=None):
    """Samples of Poisson distributions with rates ``input``.

    Examples
    --------
    >>> import torcia
    >>> torcia.poisson(torcia.zeros(3))
    tensor([0., 0., 0.])
    """
    from torcia.random import rng_of

    draws = rng_of(generator).poisson(input.detach().cpu().numpy())
    return C.tensor(draws.astype(input.detach().cpu().numpy().dtype), device=input.device)


def binomial(count, prob, generator=None):
    """Samples of binomial distributions with ``count`` trials of probability ``prob``.

    Examples
    --------
    >>> import torcia
    >>> g = torcia.Generator().manual_seed(0)
    >>> torcia.binomial(torcia.tensor([10.0, 10.0]), torcia.tensor([0.0, 1.0]), generator=g)
    tensor([ 0., 10.])
    """
    from torcia.random import rng_of

    n = count.detach().cpu().numpy()
    draws = rng_of(generator).binomial(n.astype(np.int64), prob.detach().cpu().numpy())
    return C.tensor(draws.astype(n.dtype), device=count.device)


def get_device(input) -> int:
    """The tensor's device index (-1 on the CPU).

    Examples
    --------
    >>> import torcia
    >>> torcia.get_device(torcia.zeros(1))
    -1
    """
    return input.get_device()


def is_distributed(input) -> bool:
    """Whether the tensor is a distributed tensor: torcia's never are.

    Examples
    --------
    >>> import torcia
    >>> torcia.is_distributed(torcia.zeros(1))
    False
    """
    return False


# process-wide switches PyTorch offers; torcia's kernels are deterministic already, so the
# determinism switches are recorded and reported back
_SWITCHES = {"deterministic": False, "warn_only": False, "warn_always": False,
             "interop_threads": 1}


def use_deterministic_algorithms(mode, *, warn_only=False) -> None:
    """Record the determinism switch (torcia's kernels are deterministic either way).

    Examples
    --------
    >>> import torcia
    >>> torcia.use_deterministic_algorithms(True)
    >>> torcia.are_deterministic_algorithms_enabled()
    True
    >>> torcia.use_deterministic_algorithms(False)
    """
    _SWITCHES["deterministic"] = bool(mode)
    _SWITCHES["warn_only"] = bool(warn_only)


def are_deterministic_algorithms_enabled() -> bool:
    """The switch set by :func:`use_deterministic_algorithms`.

    Examples
    --------
    >>> import torcia
    >>> torcia.are_deterministic_algorithms_enabled()
    False
    """
    return _SWITCHES["deterministic"]


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    """Whether :func:`use_deterministic_algorithms` was given ``warn_only=True``.

    Examples
    --------
    >>> import torcia
    >>> torcia.is_deterministic_algorithms_warn_only_enabled()
    False
    """
    return _SWITCHES["warn_only"]


def set_deterministic_debug_mode(debug_mode) -> None:
    """0/"default", 1/"warn", 2/"error", as PyTorch: sets the determinism switch.

    Examples
    --------
    >>> import torcia
    >>> torcia.set_deterministic_debug_mode("warn")
    >>> torcia.get_deterministic_debug_mode(), torcia.are_deterministic_algorithms_enabled()
    (1, True)
    >>> torcia.set_deterministic_debug_mode(0)
    >>> torcia.get_deterministic_debug_mode()
    0
    """
    modes = {"default": 0, "warn": 1, "error": 2}
    level = modes[debug_mode] if isinstance(debug_mode, str) else int(debug_mode)
    if level not in (0, 1, 2):
        raise RuntimeError(f"invalid value of debug_mode, expected 0, 1, or 2, but got "
                           f"{debug_mode}")
    use_deterministic_algorithms(level > 0, warn_only=level == 1)


def get_deterministic_debug_mode() -> int:
    """The determinism switch as a number: 0 (off), 1 (warn only) or 2 (on).

    Examples
    --------
    >>> import torcia
    >>> torcia.get_deterministic_debug_mode()
    0
    """
    if not _SWITCHES["deterministic"]:
        return 0
    return 1 if _SWITCHES["warn_only"] else 2


def set_warn_always(b: bool) -> None:
    """Record whether warnings that PyTorch issues once should repeat.

    Examples
    --------
    >>> import torcia
    >>> torcia.set_warn_always(True)
    >>> torcia.is_warn_always_enabled()
    True
    >>> torcia.set_warn_always(False)
    """
    _SWITCHES["warn_always"] = bool(b)


def is_warn_always_enabled() -> bool:
    """Whether :func:`set_warn_always` switched repeated warnings on.

    Examples
    --------
    >>> import torcia
    >>> torcia.is_warn_always_enabled()
    False
    """
    return _SWITCHES["warn_always"]


def get_num_interop_threads() -> int:
    """Threads for inter-op parallelism: torcia runs ops one at a time, so 1 unless set.

    Examples
    --------
    >>> import torcia
    >>> torcia.get_num_interop_threads() >= 1
    True
    """
    return _SWITCHES["interop_threads"]


def set_num_interop_threads(n: int) -> None:
    """Set the number of inter-op threads :func:`get_num_interop_threads` reports (torcia
    runs ops one at a time, so the value is only recorded).

    Examples
    --------
    >>> import torcia
    >>> before = torcia.get_num_interop_threads()
    >>> torcia.set_num_interop_threads(2)
    >>> torcia.get_num_interop_threads()
    2
    >>> torcia.set_num_interop_threads(before)
    """
    if n < 1:
        raise RuntimeError(f"Expected positive number of threads, got {n}")
    _SWITCHES["interop_threads"] = int(n)


def set_flush_denormal(mode: bool) -> bool:
    """Flushing denormals to zero is not supported (NumPy computes them): returns False,
    as PyTorch does on CPUs without the feature.

    Examples
    --------
    >>> import torcia
    >>> torcia.set_flush_denormal(True)
    False
    """
    return False


def _random_fill(sample, doc):
    def fill(self, *args, generator=None, **kwargs):
        from torcia.random import rng_of

        values = sample(rng_of(generator), tuple(self.shape), *args, **kwargs)
        with_grad = self._requires_grad
        if with_grad and self.is_leaf:
            raise RuntimeError("a leaf Variable that requires grad is being used in an "
                               "in-place operation.")
        self.copy_(C.tensor(values.astype(self.detach().cpu().numpy().dtype),
                            device=self.device))
        return self

    fill.__doc__ = doc
    return fill


cauchy_ = _random_fill(lambda rng, shape, median=0.0, sigma=1.0:
                       median + sigma * rng.standard_cauchy(shape), """\
Fill in place with samples of the Cauchy distribution of ``median`` and scale ``sigma``.

Examples
--------
>>> import torcia
>>> x = torcia.empty(3).cauchy_(median=0.0, sigma=1.0)
>>> x.shape, bool(torcia.isfinite(x).all())
(torcia.Size([3]), True)
""")
geometric_ = _random_fill(lambda rng, shape, p: rng.geometric(p, shape), """\
Fill in place with the number of Bernoulli(``p``) trials up to the first success (1, 2, ...).

Examples
--------
>>> import torcia
>>> x = torcia.empty(1000).geometric_(0.5)
>>> bool((x >= 1).all()), bool((x == x.round()).all())
(True, True)
""")
log_normal_ = _random_fill(lambda rng, shape, mean=1.0, std=2.0:
                           rng.lognormal(mean, std, shape), """\
Fill in place with samples whose logarithm is normal with ``mean`` and ``std``.

Examples
--------
>>> import torcia
>>> x = torcia.empty(100).log_normal_(mean=0.0, std=0.5)
>>> bool((x > 0).all())
True
""")


# ---------------------------------------------------------------------------------------
# top-level in-place functions: torch.abs_(x) is x.abs_()
# ---------------------------------------------------------------------------------------

_TOP_INPLACE = (
    "abs_", "acos_", "acosh_", "asin_", "asinh_", "atan_", "atanh_", "ceil_", "clamp_",
    "clamp_max_", "clamp_min_", "clip_", "cos_", "cosh_", "erf_", "erfc_", "exp2_", "exp_",
    "expm1_", "floor_", "frac_", "log10_", "log1p_", "log2_", "log_", "neg_", "reciprocal_",
    "relu_", "round_", "rsqrt_", "sigmoid_", "sin_", "sinh_", "sqrt_", "square_", "tan_",
    "tanh_", "trunc_", "zero_", "detach_", "fill_", "index_put_", "resize_as_",
    "arccos_", "arccosh_", "arcsin_", "arcsinh_", "arctan_", "arctanh_", "negative_",
    "fix_", "deg2rad_", "rad2deg_", "gcd_", "lcm_", "ldexp_",
)


def _top_inplace(name):
    def fn(input, *args, **kwargs):
        return getattr(input, name)(*args, **kwargs)

    fn.__name__ = name
    fn.__doc__ = (f"``input.{name}(...)``, as PyTorch's ``torch.{name}``."
                  + _ops._inplace_example(name[:-1], function=True))
    return fn


ALIAS_METHODS = tuple(ALIASES)
METHODS = ALIAS_METHODS + (
    "positive", "deg2rad", "rad2deg", "logaddexp", "logaddexp2", "heaviside",
    "copysign", "ldexp", "gcd", "lcm", "isneginf", "isposinf", "isreal", "is_signed",
    "is_nonzero", "is_same_size", "is_inference", "nanmean", "quantile", "nanquantile",
    "nanmedian", "aminmax", "dist", "renorm", "unique_consecutive", "ravel", "rot90", "take",
    "diff", "kron", "trace", "diagflat", "index_fill",
    "masked_scatter", "put", "select_scatter", "slice_scatter", "diagonal_scatter",
    "sum_to_size", "ndimension", "new", "hsplit", "vsplit", "dsplit", "isin",
    "split_with_sizes", "nextafter", "bitwise_left_shift", "bitwise_right_shift", "frexp",
    "histogram", "fill_diagonal", "get_device",
)
#: Methods that also get an in-place ``op_`` (PyTorch has them for these).
INPLACE = tuple(n for n in ALIAS_METHODS if n != "row_stack") + (
    "deg2rad", "rad2deg", "copysign", "ldexp", "gcd", "lcm", "heaviside", "renorm",
    "index_fill", "masked_scatter", "put", "fill_diagonal", "nextafter",
    "bitwise_left_shift", "bitwise_right_shift",
)

_FUNCTIONS = (
    "inf", "nan", "pi", "e", "newaxis", "finfo", "iinfo", "typename",
    "scalar_tensor", "rsub", "nan_to_num_", "atleast_1d", "atleast_2d", "atleast_3d",
    "column_stack", "dstack", "chain_matmul", "meshgrid", "block_diag", "cartesian_prod",
    "combinations", "tril_indices", "triu_indices", "unravel_index", "fill",
    "adjoint", "trapezoid", "trapz", "cumulative_trapezoid", "pdist", "norm_except_dim",
    "frobenius_norm", "constant_pad_nd", "poisson", "binomial", "is_distributed",
    "use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
    "is_deterministic_algorithms_warn_only_enabled", "set_deterministic_debug_mode",
    "get_deterministic_debug_mode", "set_warn_always", "is_warn_always_enabled",
    "get_num_interop_threads", "set_num_interop_threads", "set_flush_denormal",
    *_TOP_INPLACE,
)
for _name in _TOP_INPLACE:
    globals()[_name] = _top_inplace(_name)

__all__ = sorted(set(METHODS) - {"new", "ndimension", "sum_to_size", "fill_diagonal"}
                 | set(_FUNCTIONS))
#: Tensor methods with no function of the same name at top level
EXTRA_METHODS = {"where": where_method, "cauchy_": cauchy_, "geometric_": geometric_,
                 "log_normal_": log_normal_}


def make_inplace(fn):
    """The ``op_`` method of an out-of-place function of this module."""
    def method(self, *args, **kwargs):
        return inplace(fn, self, *args, **kwargs)

    method.__name__ = fn.__name__ + "_"
    method.__doc__ = f"In-place version of :meth:`Tensor.{fn.__name__}`."
    return method
