"""The masked reductions and normalizations of :mod:`torcia.masked` on dense tensors."""

from __future__ import annotations

import torcia
from torcia import Tensor

#: integer and bool inputs of sum and prod accumulate in int64, as PyTorch's
_SMALL_INTS = ("uint8", "bool", "int8", "int16", "int32")


#: torcia.masked.MaskedTensor, built on these ops, registers itself here: the ops take
#: one as their input (its data and mask)
MASKED_TYPES: list[type] = []


def _is_masked(x) -> bool:
    return isinstance(x, tuple(MASKED_TYPES))


def _canonical_dim(dim, ndim: int) -> tuple:
    """``dim`` as a sorted tuple of distinct non-negative dims (all of them for None)."""
    if dim is None or dim == ():
        return tuple(range(ndim))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    out = set()
    for d in dims:
        if d >= ndim or d < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of "
                             f"[{-ndim}, {ndim - 1}], but got {d})")
        if d % ndim in out:
            raise RuntimeError(f"dim={d} appears multiple times in the list of dims")
        out.add(d % ndim)
    return tuple(sorted(out))


def _input_mask(input, mask) -> Tensor:
    """``mask`` broadcast to ``input``'s shape, as bools."""
    if mask.shape != input.shape:
        if mask.ndim > input.ndim:
            raise IndexError("_input_mask expected broadcastable mask (got mask "
                             "dimensionality higher than of the input)")
        mask = mask.broadcast_to(input.shape)
    return mask.to(torcia.bool)


def _identity(op: str, input: Tensor):
    """The value a masked-out element takes for ``op``: leaving it in changes nothing."""
    dt = input.dtype
    floating = dt.is_floating_point
    if op in ("sum", "cumsum", "norm"):
        return 0
    if op in ("prod", "cumprod"):
        return 1
    if op in ("amax", "argmax", "logaddexp", "logsumexp"):
        if floating or dt.is_complex:
            return float("-inf")
        return torcia.iinfo(dt).min
    if op in ("amin", "argmin", "norm-inf"):
        if floating:
            return float("inf")
        return torcia.iinfo(dt).max
    if op == "median":
        return float("nan")
    raise NotImplementedError(f"identity of {op} on {dt} input")


def _combine(op: str, input, mask) -> Tensor:
    """The input with masked-out elements replaced by ``op``'s identity (differentiable
    in the kept elements)."""
    if _is_masked(input):
        input, mask = input.get_data(), input.get_mask()
    if mask is None:
        return input
    fill = _identity(op, input)
    return input.masked_fill(~_input_mask(input, mask), fill)


def _data(input):
    return input.get_data() if _is_masked(input) else input


def _mask_of(input, mask):
    return input.get_mask() if _is_masked(input) else mask


def _accumulate_dtype(input, dtype):
    if dtype is not None:
        return dtype
    return torcia.int64 if input.dtype.name in _SMALL_INTS else input.dtype


def sum(input, dim=None, *, keepdim=False, dtype=None, mask=None):  # noqa: A001
    """The sum of the kept elements over ``dim`` (all dims when None); integers and bools
    are summed in int64.

    Examples
    --------
    >>> import torcia
    >>> torcia.masked.sum(torcia.tensor([1, 2, 3]), mask=torcia.tensor([True, False, True]))
    tensor(4)
    """
    data = _data(input)
    dtype = _accumulate_dtype(data, dtype)
    dims = _canonical_dim(dim, data.ndim)
    combined = _combine("sum", input, mask)
    if not dims:
        return combined.to(dtype)
    return torcia.sum(combined, dims, keepdim=bool(keepdim), dtype=dtype)


def prod(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The product of the kept elements over ``dim``.

    Examples
    --------
    >>> import torcia
    >>> torcia.masked.prod(torcia.tensor([2.0, 5.0, 3.0]), mask=torcia.tensor([True, False, True]))
    tensor(6.)
    """
    data = _data(input)
    dtype = _accumulate_dtype(data, dtype)
    result = _combine("prod", input, mask).to(dtype)
    for d in reversed(_canonical_dim(dim, data.ndim)):
        result = result.prod(dim=d, keepdim=bool(keepdim))
    return result


def cumsum(input, dim, *, dtype=None, mask=None):
    """The cumulative sum along ``dim``, masked-out elements adding nothing.

    Examples
    --------
    >>> import torcia
    >>> torcia.masked.cumsum(torcia.tensor([1.0, 2.0, 3.0]), 0,
    ...                      mask=torcia.tensor([True, False, True]))
    tensor([1., 1., 4.])
    """
    data = _data(input)
    dtype = data.dtype if dtype is None else dtype
    d = _canonical_dim(dim, data.ndim)[0]
    return torcia.cumsum(_combine("sum", input, mask), d, dtype=dtype).to(dtype)


def cumprod(input, dim, *, dtype=None, mask=None):
    """The cumulative product along ``dim``, masked-out elements multiplying by one.

    Examples
    --------
    >>> import torcia
    >>> torcia.masked.cumprod(torcia.tensor([2.0, 5.0, 3.0]), 0,
    ...                       mask=torcia.tensor([True, False, True]))
    tensor([2., 2., 6.])
    """
    data = _data(input)
    dtype = data.dtype if dtype is None else dtype
    d = _canonical_dim(dim, data.ndim)[0]
    return torcia.cumprod(_combine("prod", input, mask), d, dtype=dtype).to(dtype)


def _extremum(op, input, dim, keepdim, dtype, mask):
    data = _data(input)
    dtype = data.dtype if dtype is None else dtype
    combined = _combine(op, input, mask)
    fn = torcia.amax if op == "amax" else torcia.amin
    return fn(combined, _canonical_dim(dim, data.ndim), bool(keepdim)).to(dtype)


def amax(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The maximum of the kept elements (-inf, or the dtype's minimum, where none is kept).

    Examples
    --------
    >>> import torcia
    >>> torcia.masked.amax(torcia.tensor([1.0, 9.0, 3.0]), mask=torcia.tensor([True, False, True]))
    tensor(3.)
    """
    return _extremum("amax", input, dim, keepdim, dtype, mask)


def amin(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The minimum of the kept elements (inf, or the dtype's maximum, where none is kept).

    Examples
    --------
    >>> import torcia
    >>> torcia.masked.amin(torcia.tensor([1.0, -9.0, 3.0]), mask=torcia.tensor([True, False, True]))
    tensor(1.)
    """
    return _extremum("amin", input, dim, keepdim, dtype, mask)


def _arg(op, input, dim, keepdim, dtype, mask):
    data = _data(input)
    dtype = data.dtype if dtype is None else dtype
    fn = torcia.argmax if op == "argmax" else torcia.argmin
    # cast to the input's dtype (a float for float input), as PyTorch does
    return fn(_combine(op, input, mask), dim, bool(keepdim)).to(dtype)


def argmax(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The index of the largest kept element, in the input's dtype (as PyTorch gives it).

    Examples
    --------
    >>> import torcia
    >>> torcia.masked.argmax(torcia.tensor([1.0, 9.0, 3.0]), 0,
    ...                      mask=torcia.tensor([True, False, True]))
    tensor(2.)
    """
    return _arg("argmax", input, dim, keepdim, dtype, mask)


def argmin(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The index of the smallest kept element, in the input's dtype.

    Examples
    --------
    >>> import torcia
    >>> torcia.masked.argmin(torcia.tensor([1.0, -9.0, 3.0]), 0,
    ...                      mask=torcia.tensor([True, False, True]))
    tensor(0.)
    """
    return _arg("argmin", input, dim, keepdim, dtype, mask)


def _count(input, mask, dim, keepdim):
    data = _data(input)
    mask = _mask_of(input, mask)
    if mask is None:
        ones = torcia.ones(data.shape, dtype=torcia.int64, device=data.device)
        return sum(ones, dim, keepdim=keepdim)
    return _input_mask(data, mask).sum(dim=_canonical_dim(dim, data.ndim),
                                       keepdim=bool(keepdim))


def mean(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The mean of the kept elements (NaN where none is kept).

    Examples
    --------
    >>> import torcia
    >>> torcia.masked.mean(torcia.tensor([1.0, 9.0, 3.0]), mask=torcia.tensor([True, False, True]))
    tensor(2.)
    """
    data = _data(input)
    source = "Optional"
    if dtype is None:
        dtype, source = data.dtype, "Input"
    if not (dtype.is_floating_point or dtype.is_complex):
        raise ValueError(f"mean(): Could not infer output dtype. {source} dtype must be either "
                         f"a floating point or complex dtype. Got: {dtype}")
    total = sum(input, dim, keepdim=keepdim, dtype=dtype, mask=mask)
    return total / _count(input, mask, dim, keepdim)


def median(input, dim=-1, *, keepdim=False, dtype=None, mask=None):
    """The median of the kept elements along one ``dim`` (NaN where none is kept; the
    lower of the two middle values for an even count, as ``torcia.median``).

    Examples
    --------
    >>> import torcia
    >>> torcia.masked.median(torcia.tensor([5.0, 9.0, 1.0, 3.0]),
    ...                      mask=torcia.tensor([True, False, True, True]))
    tensor(3.)
    """
    data = _data(input)
    dtype = data.dtype if dtype is None else dtype
    d = _canonical_dim(dim, data.ndim)[0]
    floating = data.dtype.is_floating_point
    if not floating:
        data = data.to(torcia.float32)
    combined = _combine("median", data, _mask_of(input, mask))
    out = torcia.nanmedian(combined, d, keepdim).values
    if floating:
        return out
    if torcia.isnan(out).any():
        raise ValueError("masked median expects no fully masked out rows if dtype is not "
                         "floating point")
    return out.to(dtype)


def logsumexp(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """``log(sum(exp(x)))`` of the kept elements (-inf where none is kept).

    Examples
    --------
    >>> import torcia
    >>> torcia.masked.logsumexp(torcia.tensor([0.0, 9.0, 0.0]),
    ...                         mask=torcia.tensor([True, False, True]))
    tensor(0.6931)
    """
    data = _data(input)
    dtype = data.dtype if dtype is None else dtype
    return torcia.logsumexp(_combine("logsumexp", input, mask),
                            _canonical_dim(dim, data.ndim), keepdim=keepdim).to(dtype)


def logaddexp(input, other, *, dtype=None, input_mask=None, other_mask=None):
    """``log(exp(input) + exp(other))`` with each operand's masked-out elements at -inf.

    Examples
    --------
    >>> import torcia
    >>> torcia.masked.logaddexp(torcia.tensor([0.0, 1.0]), torcia.tensor([0.0, 2.0]),
    ...                         other_mask=torcia.tensor([True, False]))
    tensor([0.6931, 1.0000])
    """
    dtype = _data(input).dtype if dtype is None else dtype
    return torcia.logaddexp(_combine("logaddexp", input, input_mask),
                            _combine("logaddexp", other, other_mask)).to(dtype)


def norm(input, ord=2.0, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The vector ``ord``-norm of the kept elements over ``dim``.

    Examples
    --------
    >>> import torcia
    >>> torcia.masked.norm(torcia.tensor([3.0, 9.0, 4.0]), 2.0,
    ...                    mask=torcia.tensor([True, False, True]))
    tensor(5.)
    """
    data = _data(input)
    dtype = data.dtype if dtype is None else dtype
    op = "norm-inf" if ord == float("-inf") else "norm"
    return torcia.linalg.vector_norm(_combine(op, input, mask), ord,
                                     _canonical_dim(dim, data.ndim), bool(keepdim),
                                     dtype=dtype)


def _std_var(input, dim, unbiased, correction_opt, keepdim, dtype, mask, take_sqrt):
    if unbiased is not None and correction_opt is not None:
        raise AssertionError("Only one of unbiased and correction may be given")
    correction = 1.0
    if unbiased is not None:
        correction = 1.0 if unbiased else 0.0
    if correction_opt is not None:
        correction = float(correction_opt)
    data = _data(input)
    mask = _mask_of(input, mask)
    if dtype is None:
        dtype = data.dtype
        if not (dtype.is_floating_point or dtype.is_complex):
            dtype = torcia.float32
    compute = dtype if (dtype.is_floating_point or dtype.is_complex) else torcia.float32
    inmask = None if mask is None else _input_mask(data, mask)
    count = _count(data, inmask, dim, True)
    sample_mean = sum(data, dim, keepdim=True, dtype=dtype, mask=inmask) / count
    x = data - sample_mean
    total = sum(x * x.conj(), dim, keepdim=keepdim, dtype=compute, mask=inmask)
    if not keepdim:
        count = count.reshape(total.shape)
    if correction != 0:
        real = compute if not compute.is_complex else (
            torcia.float32 if compute is torcia.complex64 else torcia.float64)
        count = (count.to(real) - correction).clamp(min=0)
    out = (total / count).to(dtype)
    return out.sqrt() if take_sqrt else out


def var(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None,
        mask=None):
    """The variance of the kept elements (divided by ``count - correction``, 1 by default).

    Examples
    --------
    >>> import torcia
    >>> torcia.masked.var(torcia.tensor([1.0, 9.0, 3.0]), mask=torcia.tensor([True, False, True]))
    tensor(2.)
    """
    return _std_var(input, dim, unbiased, correction, keepdim, dtype, mask, False)


def std(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None,
        mask=None):
    """The standard deviation of the kept elements.

    Examples
    --------
    >>> import torcia
    >>> torcia.masked.std(torcia.tensor([1.0, 9.0, 3.0]), mask=torcia.tensor([True, False, True]))
    tensor(1.4142)
    """
    return _std_var(input, dim, unbiased, correction, keepdim, dtype, mask, True)


_CPP_TYPE = {"int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char",
             "uint8": "Byte", "bool": "Bool"}


def _normalization(op, input, dim, dtype, mask, fn, kernel="softmax"):
    data = _data(input)
    dtype = data.dtype if dtype is None else dtype
    if not (dtype.is_floating_point or dtype.is_complex):
        raise NotImplementedError(f'"{kernel}_lastdim_kernel_impl" not implemented for '
                                  f"'{_CPP_TYPE.get(dtype.name, dtype.name)}'")
    d = _canonical_dim(dim, data.ndim)[0]
    return fn(_combine(op, input, mask), d, dtype=dtype)


def softmax(input, dim, *, dtype=None, mask=None):
    """Softmax along ``dim`` over the kept elements (masked-out ones get 0; a slice with
    nothing kept is NaN, as PyTorch's).

    Examples
    --------
    >>> import torcia
    >>> torcia.masked.softmax(torcia.tensor([0.0, 5.0, 0.0]), 0,
    ...                       mask=torcia.tensor([True, False, True]))
    tensor([0.5000, 0.0000, 0.5000])
    """
    return _normalization("amax", input, dim, dtype, mask, torcia.softmax)


def log_softmax(input, dim, *, dtype=None, mask=None):
    """Log-softmax along ``dim`` over the kept elements (masked-out ones get -inf).

    Examples
    --------
    >>> import torcia
    >>> torcia.masked.log_softmax(torcia.tensor([0.0, 5.0, 0.0]), 0,
    ...                           mask=torcia.tensor([True, False, True]))
    tensor([-0.6931,    -inf, -0.6931])
    """
    return _normalization("amax", input, dim, dtype, mask, torcia.log_softmax, "log_softmax")


def softmin(input, dim, *, dtype=None, mask=None):
    """Softmin along ``dim`` over the kept elements.

    Examples
    --------
    >>> import torcia
    >>> torcia.masked.softmin(torcia.tensor([0.0, -5.0, 0.0]), 0,
    ...                       mask=torcia.tensor([True, False, True]))
    tensor([0.5000, 0.0000, 0.5000])
    """
    return _normalization("amin", input, dim, dtype, mask,
                          lambda x, d, dtype: torcia.softmax(-x, d, dtype=dtype))


def normalize(input, ord, dim, *, eps=1e-12, dtype=None, mask=None):
    """The kept elements divided by their ``ord``-norm along ``dim`` (at least ``eps``);
    masked-out elements are 0.

    Examples
    --------
    >>> import torcia
    >>> torcia.masked.normalize(torcia.tensor([3.0, 9.0, 4.0]), 2.0, 0,
    ...                         mask=torcia.tensor([True, False, True]))
    tensor([0.6000, 0.0000, 0.8000])
    """
    data = _data(input)
    dtype = data.dtype if dtype is None else dtype
    nrm = norm(input, ord, dim, keepdim=True, dtype=dtype, mask=mask)
    denom = torcia.maximum(nrm, nrm.new_full([], eps))
    return _combine("sum", input, mask) / denom
