"""The movement ops, each declared once: schema, reference kernel, meta shape,
decomposition and autocast policy. :data:`torcia.ops.MOVEMENT` (``contiguous``, ``clone``,
``cat``, ``flip``, ``repeat``, ``pad``, ``diag``...: copies of their input, but ``split``'s
pieces, views as PyTorch's); the views are :mod:`torcia._ops.views`'s, the indexing ops of
``MOVEMENT`` (``gather``, ``scatter``, ``index_select``...) :mod:`torcia._ops.indexing`'s.

A kernel is a method of the reference backend (``self.xp`` the array module, NumPy or CuPy).
A public function (at the end of this module: ``cat``, ``split``, ``flip``, ``tril``,
``pad``..., with the pixel and channel shuffles built on them) checks the arguments and
calls the op by name. A decomposition is written with Tensor methods, the public functions
(:data:`torcia._opdef.PUBLIC`) and :data:`torcia._opdef.CALL` (an op by name): it runs on
any device, and this module is below the Tensor class. Their derivatives are
torcia-autograd's.
"""

from __future__ import annotations

import builtins
import itertools
import math

import numpy as np

from torcia import _opdef
from torcia._opdef import define
from torcia._ops._common import (
    autocast_as,
    dense,
    dim_tuple,
    first_shape,
    functional,
    promoted,
    random_floats,
    with_size,
    wrap_dim,
)
from torcia._ops._common import where as _where
from torcia._ops.views import (
    along,
    copied,
    diagonal_shape,
    shape_arg,
    sliced,
    squeeze,
    view_call,
)

# ----- reference kernels -----------------------------------------------------------------


def clone_strides(shape, strides) -> tuple:
    """The strides (in elements) of PyTorch's clone of a tensor of ``shape`` and
    ``strides``: the same where they are dense and non-overlapping, else dense strides in
    the same order of dims, fastest first (a dim of stride 0 keeps its place, equal
    strides put the larger dim outside)."""
    if dense(shape, strides):
        return tuple(strides)
    order = list(range(len(shape) - 1, -1, -1))  # fastest first; C order where undecided

    def outer(d0, d1):  # 1: d0 belongs outside d1, -1: inside, 0: undecided
        s0, s1 = strides[d0], strides[d1]
        if s0 == 0 or s1 == 0:
            return 0
        if s0 != s1:
            return -1 if s0 < s1 else 1
        return 1 if shape[d0] > shape[d1] else 0

    for i in range(1, len(order)):  # an insertion sort that stops at the first "inside"
        j = i
        for k in range(i - 1, -1, -1):
            found = outer(order[k], order[j])
            if found > 0:
                order[k], order[j] = order[j], order[k]
                j = k
            elif found < 0:
                break
    out, step = [0] * len(shape), 1
    for d in order:
        out[d] = step
        step *= shape[d]
    return tuple(out)


class Kernels:
    """The reference kernels of the movement ops (see the module's doc)."""

    def contiguous(self, a):
        return self.xp.ascontiguousarray(a)

    def clone(self, a):
        # PyTorch's preserve_format: a transposed or permuted tensor's clone is laid out as
        # it is (x.t().clone() is not contiguous), in fresh dense memory
        if a.flags.c_contiguous or not a.size:
            return a.copy()
        xp = self.xp
        item = a.itemsize
        strides = clone_strides(a.shape, tuple(s // item for s in a.strides))
        out = xp.lib.stride_tricks.as_strided(xp.empty(a.size, a.dtype), a.shape,
                                              tuple(s * item for s in strides))
        out[...] = a
        return out

    def flip(self, a, dims):
        # NumPy's flip is a view; PyTorch's copies (x.flip(0).mul_(2) leaves x alone)
        return self.xp.flip(a, axis=dims).copy()

    def roll(self, a, shifts, dims):
        return self.xp.roll(a, shifts, axis=dims)

    def repeat(self, a, sizes):
        xp = self.xp
        extra = len(sizes) - a.ndim
        return xp.tile(a.reshape((1,) * extra + a.shape), sizes)

    def tile(self, a, dims):
        return self.xp.tile(a, dims)

    def repeat_interleave(self, a, repeats, dim=None):
        if dim is None:
            return self.xp.repeat(a.reshape(-1), repeats)
        return self.xp.repeat(a, repeats, axis=dim)

    def tril(self, a, diagonal=0):
        return self.xp.tril(a, diagonal)

    def triu(self, a, diagonal=0):
        return self.xp.triu(a, diagonal)

    def cat(self, *arrays, dim=0):
        return self.xp.concatenate(arrays, axis=dim)

    def stack(self, *arrays, dim=0):
        return self.xp.stack(arrays, axis=dim)

    def split(self, a, sections, dim=0):
        # sections: a list of sizes; returns a tuple of views
        xp = self.xp
        bounds = list(np.cumsum(sections)[:-1])
        return tuple(xp.split(a, bounds, axis=dim))

    def pad(self, a, pad, mode="constant", value=0.0):
        xp = self.xp
        widths = [(0, 0)] * a.ndim
        crop = [slice(None)] * a.ndim
        for i in range(len(pad) // 2):
            d = a.ndim - 1 - i
            lo, hi = pad[2 * i], pad[2 * i + 1]
            # negative padding crops (constant mode only, checked by F.pad)
            crop[d] = slice(-lo if lo < 0 else 0, a.shape[d] + hi if hi < 0 else None)
            widths[d] = (max(lo, 0), max(hi, 0))
        a = a[tuple(crop)]
        if mode == "constant":
            return xp.pad(a, widths, mode="constant", constant_values=value)
        np_mode = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode]
        return xp.pad(a, widths, mode=np_mode)

    def diag(self, a, diagonal=0):
        xp = self.xp
        if a.ndim == 1:
            return xp.diag(a, diagonal)
        return xp.diagonal(a, offset=diagonal).copy()

    def diag_embed(self, a, offset=0, dim1=-2, dim2=-1):
        xp = self.xp
        n = a.shape[-1] + abs(offset)
        out = xp.zeros(a.shape[:-1] + (n, n), dtype=a.dtype)
        i = xp.arange(a.shape[-1])
        rows, cols = (i, i + offset) if offset >= 0 else (i - offset, i)
        out[..., rows, cols] = a
        return xp.moveaxis(out, (-2, -1), (dim1, dim2))


# ----- meta shapes -----------------------------------------------------------------------


def _joined(*xs, dim=0, stacked=False):
    shapes = [x.shape for x in xs]
    dtype = np.result_type(*(x.dtype for x in xs))
    if stacked:
        shape = list(shapes[0])
        shape.insert(dim, len(xs))
        return tuple(shape), dtype
    shape = list(shapes[0])
    shape[dim] = sum(s[dim] for s in shapes)
    return tuple(shape), dtype


def _stacked(*xs, dim=0, **params):
    return _joined(*xs, dim=dim, stacked=True)


def _repeat_shape(x, sizes, **params):
    shape = (1,) * (len(sizes) - x.ndim) + x.shape
    return tuple(n * r for n, r in zip(shape, sizes)), x.dtype


def _tile_shape(x, dims, **params):
    dims = (1,) * (x.ndim - len(dims)) + tuple(dims)
    return _repeat_shape(x, dims)


def _pad_shape(x, pad, mode="constant", value=0.0, **params):
    shape = list(x.shape)
    for i in range(len(pad) // 2):
        shape[-1 - i] += pad[2 * i] + pad[2 * i + 1]
    return tuple(shape), x.dtype


def _diag_shape(x, diagonal=0, **params):
    if x.ndim == 1:
        n = x.shape[0] + abs(diagonal)
        return (n, n), x.dtype
    return diagonal_shape(x, diagonal, 0, 1)


def _diag_embed_shape(x, offset=0, dim1=-2, dim2=-1, **params):
    n = x.shape[-1] + abs(offset)
    ndim = x.ndim + 1
    dims = {dim1 % ndim: n, dim2 % ndim: n}
    rest = iter(x.shape[:-1])
    return tuple(dims[i] if i in dims else next(rest) for i in range(ndim)), x.dtype


def _repeat_interleave_shape(x, repeats, dim=None, **params):
    """An int ``repeats`` only: with a tensor of counts the length depends on their values,
    and PyTorch's meta device refuses it the same way."""
    if isinstance(repeats, np.ndarray):
        raise RuntimeError("cannot repeat_interleave a meta tensor with a tensor of repeats: "
                           "the output's length depends on their values; pass an int")
    if dim is None:
        return (math.prod(x.shape) * repeats,), x.dtype
    return with_size(x.shape, dim, x.shape[dim] * repeats), x.dtype


def _split_shape(x, sections, dim=0, **params):
    return tuple((with_size(x.shape, dim, n), x.dtype) for n in sections)


# ----- decompositions ---------------------------------------------------------------------


def _zero(a):
    """A 0-dim zero of ``a``'s dtype on its device (a Python 0 would promote a bool)."""
    return a.new_zeros(())


def _triangle(a, diagonal, lower):
    rows, cols = a.shape[-2:]
    offset = (_opdef.PUBLIC.arange(cols, device=a.device).unsqueeze(0)
              - _opdef.PUBLIC.arange(rows, device=a.device).unsqueeze(1))
    keep = offset <= diagonal if lower else offset >= diagonal
    return _where(keep, a, _zero(a))


def lower_triangle(a, diagonal=0):
    return _triangle(a, diagonal, lower=True)


def upper_triangle(a, diagonal=0):
    return _triangle(a, diagonal, lower=False)


def slices_along(a, sections, dim=0):
    bounds = itertools.accumulate(sections, initial=0)
    return tuple(along(a, dim, slice(lo, lo + n)) for lo, n in zip(bounds, sections))


def reversed_along(a, dims):
    key = [slice(None)] * a.ndim
    for d in dims:
        key[d % a.ndim] = slice(None, None, -1)
    return sliced(a, tuple(key)).clone()  # a copy, as PyTorch's


def repeated(a, sizes):
    sizes = tuple(sizes)
    shape = (1,) * (len(sizes) - a.ndim) + tuple(a.shape)
    # each dim n as (1, n) expanded to (r, n), then (r * n)
    spread = a.reshape(tuple(x for n in shape for x in (1, n)))
    out = spread.expand(tuple(x for r, n in zip(sizes, shape) for x in (r, n)))
    out = out.reshape(tuple(r * n for r, n in zip(sizes, shape)))
    # a copy even where nothing repeats
    return out if any(r != 1 for r in sizes) else out.clone()


def diagonal_matrix(a, diagonal=0):
    if a.ndim == 2:
        return _opdef.CALL("diagonal", (a,), {"offset": diagonal, "dim1": 0, "dim2": 1}).clone()
    # a square matrix with a on the diagonal: row r holds a[r] where diagonal >= 0, column c
    # holds a[c] below it
    n = a.shape[0] + abs(diagonal)
    padded = _opdef.PUBLIC.cat([a, a.new_zeros(abs(diagonal))])
    values = padded.reshape((n, 1) if diagonal >= 0 else (1, n))
    offset = (_opdef.PUBLIC.arange(n, device=a.device).unsqueeze(0)
              - _opdef.PUBLIC.arange(n, device=a.device).unsqueeze(1))
    return _where(offset == diagonal, values, _zero(a))


def tiled(a, dims):
    dims = tuple(dims)
    return a.repeat(*((1,) * (a.ndim - len(dims)) + dims))


def unsqueezed_cat(*tensors, dim=0):
    if dim < 0:
        dim += tensors[0].ndim + 1
    return _opdef.PUBLIC.cat([t.unsqueeze(dim) for t in tensors], dim)


def rolled(a, shifts, dims):
    shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
    if dims is None or (not isinstance(dims, int) and len(dims) == 0):
        return rolled(a.flatten(), shifts, (0,)).reshape(a.shape)
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    out = a.clone()
    for shift, dim in zip(shifts, dims):
        n = out.shape[dim]
        shift = shift % n if n else 0
        if shift:
            out = _opdef.PUBLIC.cat(
                [out.narrow(dim, n - shift, shift), out.narrow(dim, 0, n - shift)], dim)
    return out


def same_dtype_cast(a):
    return _opdef.CALL("cast", (a,), {"dtype": a.dtype.to_numpy()})  # a copy, in any dtype


def contiguous_copy(a):
    # torcia.contiguous calls the op for a non-contiguous tensor only: a contiguous copy
    return copied("contiguous", a, {}, a.shape)


def embedded_diagonals(a, offset=0, dim1=-2, dim2=-1):
    # as diag's: row r holds a[r] where offset >= 0, column c holds a[c] below it
    n = a.shape[-1] + abs(offset)
    lead = tuple(a.shape[:-1])
    padded = _opdef.PUBLIC.cat([a, _opdef.PUBLIC.zeros(lead + (abs(offset),), dtype=a.dtype,
                                                       device=a.device)], -1)
    values = padded.unsqueeze(-1 if offset >= 0 else -2)
    place = (_opdef.PUBLIC.arange(n, device=a.device).unsqueeze(0)
             - _opdef.PUBLIC.arange(n, device=a.device).unsqueeze(1))
    out = _where(place == offset, values, _zero(a))
    return out.movedim((-2, -1), (dim1, dim2))


def repeated_by_index(a, repeats, dim=None):
    if dim is None:
        a, dim = a.reshape(-1), 0
    dim %= a.ndim
    n = a.shape[dim]
    if isinstance(repeats, (int, np.integer)):
        counts = np.full(n, int(repeats))
    else:  # an array of the device's (or one count for all)
        counts = np.broadcast_to(np.asarray(repeats.tolist(), dtype=np.int64), (n,))
    index = _opdef.PUBLIC.tensor(np.repeat(np.arange(n), counts), device=a.device)
    return a.index_select(dim, index)


def padded(a, pad, mode="constant", value=0.0):
    fresh = False  # whether a is memory of its own yet (a crop alone is a view)
    for i in range(len(pad) // 2):
        d, lo, hi = a.ndim - 1 - i, pad[2 * i], pad[2 * i + 1]
        n = a.shape[d]
        if mode != "constant":
            # NumPy's own rule picks the source of each padded position
            source = np.pad(np.arange(n), (lo, hi), mode={
                "reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode])
            a, fresh = a.index_select(d, _opdef.PUBLIC.tensor(source, device=a.device)), True
            continue
        # negative padding crops
        a = a.narrow(d, max(-lo, 0), n - max(-lo, 0) - max(-hi, 0))
        shape = list(a.shape)
        fills = []
        for width in (lo, hi):
            shape[d] = max(width, 0)
            fills.append(_opdef.PUBLIC.full(tuple(shape), value, dtype=a.dtype, device=a.device))
        if lo > 0 or hi > 0:
            a, fresh = _opdef.PUBLIC.cat([fills[0], a, fills[1]], d), True
    return a if fresh else a.clone()


def _a_move(schema, kernel, **declared):
    return define(schema, kernel, group="movement", **declared)


def _pad_samples(rng):
    return [((random_floats(rng, 3, 4),), {"pad": (1, 2), "mode": "constant", "value": 0.5}),
            ((random_floats(rng, 1, 3, 4),), {"pad": (1, 1), "mode": "reflect", "value": 0.0})]


#: the movement ops, in the order of torcia.ops.MOVEMENT
DECLARED = (
    _a_move("contiguous(Tensor x) -> Tensor", Kernels.contiguous, shape=first_shape,
            decomposition=contiguous_copy),
    _a_move("clone(Tensor x) -> Tensor", Kernels.clone, shape=first_shape,
            decomposition=same_dtype_cast),
    _a_move("flip(Tensor x, *, dims=None) -> Tensor", Kernels.flip, shape=first_shape,
            decomposition=reversed_along),
    _a_move("roll(Tensor x, *, shifts=None, dims=None) -> Tensor", Kernels.roll,
            shape=first_shape, decomposition=rolled),
    _a_move("repeat(Tensor x, *, sizes=None) -> Tensor", Kernels.repeat, shape=_repeat_shape,
            decomposition=repeated),
    _a_move("tile(Tensor x, *, dims=None) -> Tensor", Kernels.tile, shape=_tile_shape,
            decomposition=tiled),
    _a_move("repeat_interleave(Tensor x, *, repeats=None, dim=None) -> Tensor",
            Kernels.repeat_interleave, shape=_repeat_interleave_shape,
            decomposition=repeated_by_index,
            samples=lambda rng: [((random_floats(rng, 3, 4),), {"repeats": 2, "dim": 1})]),
    _a_move("tril(Tensor x, *, diagonal=0) -> Tensor", Kernels.tril, shape=first_shape,
            decomposition=lower_triangle, inplace=True,
            inplace_example=("[[1, 2], [3, 4]]", "", "tensor([[1, 0],\n        [3, 4]])")),
    _a_move("triu(Tensor x, *, diagonal=0) -> Tensor", Kernels.triu, shape=first_shape,
            decomposition=upper_triangle, inplace=True,
            inplace_example=("[[1, 2], [3, 4]]", "", "tensor([[1, 2],\n        [0, 4]])")),
    _a_move("cat(Tensor[] *xs, *, dim=0) -> Tensor", Kernels.cat, shape=_joined,
            autocast={"cpu": "promote", "cuda": "promote"}),
    _a_move("stack(Tensor[] *xs, *, dim=0) -> Tensor", Kernels.stack, shape=_stacked,
            decomposition=unsqueezed_cat, autocast={"cpu": "promote", "cuda": "promote"}),
    _a_move("split(Tensor x, *, sections=None, dim=0) -> Tensor[]", Kernels.split,
            shape=_split_shape, decomposition=slices_along),
    _a_move("pad(Tensor x, *, pad=None, mode='constant', value=0.0) -> Tensor", Kernels.pad,
            shape=_pad_shape, decomposition=padded, samples=_pad_samples),
    _a_move("diag(Tensor x, *, diagonal=0) -> Tensor", Kernels.diag, shape=_diag_shape,
            decomposition=diagonal_matrix),
    _a_move("diag_embed(Tensor x, *, offset=0, dim1=-2, dim2=-1) -> Tensor", Kernels.diag_embed,
            shape=_diag_embed_shape, decomposition=embedded_diagonals),
)


# ----- public functions (torcia.cat, torcia.split, torcia.flip...) ----------------------


def flip(input, dims):
    """Reverse the order along ``dims``.

    Examples
    --------
    >>> import torcia
    >>> torcia.flip(torcia.tensor([[1, 2], [3, 4]]), dims=(0,))
    tensor([[3, 4],
            [1, 2]])
    """
    d = dim_tuple(dims if not isinstance(dims, int) else (dims,), input.ndim)
    return _opdef.CALL("flip", (input,), {"dims": d or ()})


def roll(input, shifts, dims=None):
    """Shift elements circularly by ``shifts`` along ``dims`` (flattened when None).

    Examples
    --------
    >>> import torcia
    >>> torcia.roll(torcia.tensor([1, 2, 3, 4]), 1)
    tensor([4, 1, 2, 3])
    """
    if dims is None:
        return _opdef.CALL("roll", (input,), {"shifts": shifts, "dims": None})
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, "
                           f"dims:{len(dims)}")
    return _opdef.CALL("roll", (input,), {"shifts": shifts,
                                          "dims": tuple(wrap_dim(d, input.ndim) for d in dims)})


def tile(input, dims):
    """Repeat ``input`` ``dims`` times per dimension (an int counts for the last one).

    Examples
    --------
    >>> import torcia
    >>> torcia.tile(torcia.tensor([1, 2]), (2, 2))
    tensor([[1, 2, 1, 2],
            [1, 2, 1, 2]])
    """
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    if len(dims) < input.ndim:
        dims = (1,) * (input.ndim - len(dims)) + dims
    return _opdef.PUBLIC.repeat(input, dims)


def diag(input, diagonal=0):
    """A 1-D input as the ``diagonal``-th diagonal of a square matrix; a 2-D input's
    ``diagonal``-th diagonal as 1-D.

    Examples
    --------
    >>> import torcia
    >>> torcia.diag(torcia.tensor([1, 2]))
    tensor([[1, 0],
            [0, 2]])
    """
    if input.ndim not in (1, 2):
        raise RuntimeError("diag(): Supports 1D or 2D tensors. Got " + f"{input.ndim}D")
    return _opdef.CALL("diag", (input,), {"diagonal": int(diagonal)})


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """Put the last dim of ``input`` on the ``offset`` diagonals of new 2-D planes
    spanning dims ``dim1`` and ``dim2`` of the result.

    Examples
    --------
    >>> import torcia
    >>> torcia.diag_embed(torcia.tensor([[1, 2], [3, 4]]))
    tensor([[[1, 0],
             [0, 2]],
    <BLANKLINE>
            [[3, 0],
             [0, 4]]])
    """
    n = input.ndim + 1
    d1, d2 = wrap_dim(dim1, n), wrap_dim(dim2, n)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return _opdef.CALL("diag_embed", (input,), {"offset": int(offset), "dim1": d1, "dim2": d2})


def tril(input, diagonal=0):
    """The lower triangle (below ``diagonal``) of the last two dims; the rest zero.

    Examples
    --------
    >>> import torcia
    >>> torcia.tril(torcia.ones(3, 3))
    tensor([[1., 0., 0.],
            [1., 1., 0.],
            [1., 1., 1.]])
    """
    if input.ndim < 2:
        raise RuntimeError("tril: input tensor must have at least 2 dimensions")
    return _opdef.CALL("tril", (input,), {"diagonal": int(diagonal)})


def triu(input, diagonal=0):
    """The upper triangle (above ``diagonal``) of the last two dims; the rest zero.

    Examples
    --------
    >>> import torcia
    >>> torcia.triu(torcia.ones(3, 3), diagonal=1)
    tensor([[0., 1., 1.],
            [0., 0., 1.],
            [0., 0., 0.]])
    """
    if input.ndim < 2:
        raise RuntimeError("triu: input tensor must have at least 2 dimensions")
    return _opdef.CALL("triu", (input,), {"diagonal": int(diagonal)})


def pad(input, pad, mode="constant", value=None):
    """Pad ``input`` as ``torch.nn.functional.pad``: ``pad`` lists (left, right) amounts
    from the last dim backwards; ``mode`` is "constant" (with ``value``, negative amounts
    crop), "reflect", "replicate" or "circular".

    Examples
    --------
    >>> import torcia
    >>> from torcia._ops.movement import pad
    >>> pad(torcia.tensor([[1, 2]]), (1, 0), value=9)
    tensor([[9, 1, 2]])
    """
    pad = tuple(int(p) for p in pad)
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) // 2 > input.ndim:
        raise RuntimeError(f"Padding length should be less than or equal to two times the "
                           f"input dimension but got padding length {len(pad)} and input of "
                           f"dimension {input.ndim}")
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if mode != "constant":
        if value not in (None, 0):
            raise RuntimeError(f"Padding mode \"{mode}\" doesn't take in value argument")
        for i in range(len(pad) // 2):
            d = input.ndim - 1 - i
            size, lo, hi = input.shape[d], pad[2 * i], pad[2 * i + 1]
            too_big = (lo >= size or hi >= size) if mode == "reflect" else (
                (lo > size or hi > size) if mode == "circular" else size == 0)
            if too_big or min(lo, hi) < 0:
                raise RuntimeError(
                    f"Argument #4: Padding size should be less than the corresponding input "
                    f"dimension, but got: padding ({lo}, {hi}) at dimension {d} of input "
                    f"{list(input.shape)}")
    else:
        for i in range(len(pad) // 2):
            # negative amounts crop first (PyTorch narrows by them), and no crop may pass
            # the dim's size
            size = input.shape[input.ndim - 1 - i] + min(pad[2 * i], 0)
            if size < 0 or size + min(pad[2 * i + 1], 0) < 0:
                raise RuntimeError("narrow(): length must be non-negative.")
    params = {"pad": pad, "mode": mode, "value": 0 if value is None else value}
    if mode in _PAD_AUTOCAST:
        return _PAD_AUTOCAST[mode](input, params)
    return _opdef.CALL("pad", (input,), params)


def _pad(input, params):
    return _opdef.CALL("pad", (input,), params)


# PyTorch's autocast runs reflection and replication padding in float32, constant and
# circular padding (composites there) in the input's dtype
_PAD_AUTOCAST = {"reflect": autocast_as("reflection_pad")(_pad),
                 "replicate": autocast_as("replication_pad")(_pad)}


def contiguous(input, memory_format=None):
    """``input`` itself when C-contiguous, else a contiguous copy.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.arange(6).reshape(2, 3).t()
    >>> x.is_contiguous(), torcia.contiguous(x).is_contiguous()
    (False, True)
    """
    if input.is_contiguous():
        return input
    return _opdef.CALL("contiguous", (input,), {})


def clone(input, *, memory_format=None):
    """A copy with its own storage (gradients flow back to ``input``).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([1, 2])
    >>> y = torcia.clone(x)
    >>> y[0] = 7
    >>> x, y
    (tensor([1, 2]), tensor([7, 2]))
    """
    return _opdef.CALL("clone", (input,), {})


def cat(tensors, dim=0):
    """Concatenate along an existing ``dim``.

    Examples
    --------
    >>> import torcia
    >>> torcia.cat([torcia.zeros(1, 2), torcia.ones(2, 2)]).shape
    torcia.Size([3, 2])
    """
    tensors = promoted(tensors, "cat")
    n = tensors[0]._data.ndim
    if dim.__class__ is int and -n <= dim < n:
        try:
            return _opdef.CALL("cat", tuple(tensors), {"dim": dim % n})
        except ValueError:
            pass  # the array module refused: find PyTorch's reason below
    # legacy: 1-D empty tensors are skipped whatever the others' shapes
    kept = [t for t in tensors if t._data.shape != (0,)] or tensors[:1]
    ref = kept[0]._data.shape
    if not ref:
        raise RuntimeError("zero-dimensional tensor (at position 0) cannot be concatenated")
    n = len(ref)
    d = dim if dim.__class__ is int and 0 <= dim < n else wrap_dim(dim, n)
    rest = ref[:d] + ref[d + 1:]
    for i, t in enumerate(kept):
        shape = t._data.shape
        if shape[:d] + shape[d + 1:] != rest or len(shape) != n:
            _cat_mismatch(ref, shape, d, i)
    return _opdef.CALL("cat", tuple(kept), {"dim": d})


def _cat_mismatch(ref, shape, d, i):
    if len(shape) != len(ref):
        raise RuntimeError(
            f"Tensors must have same number of dimensions: got {len(ref)} and {len(shape)}")
    for j in range(len(ref)):
        if j != d and shape[j] != ref[j]:
            raise RuntimeError(
                f"Sizes of tensors must match except in dimension {d}. Expected size "
                f"{ref[j]} but got size {shape[j]} for tensor number {i} in the list.")


concat = concatenate = cat


def stack(tensors, dim=0):
    """Join along a new ``dim``; all tensors must have the same shape.

    Examples
    --------
    >>> import torcia
    >>> torcia.stack([torcia.tensor([1, 2]), torcia.tensor([3, 4])], dim=1)
    tensor([[1, 3],
            [2, 4]])
    """
    tensors = promoted(tensors, "stack")
    ref = tensors[0]
    for i, t in enumerate(tensors):
        if t.shape != ref.shape:
            raise RuntimeError(
                f"stack expects each tensor to be equal size, but got {list(ref.shape)} at entry "
                f"0 and {list(t.shape)} at entry {i}")
    return _opdef.CALL("stack", tuple(tensors), {"dim": wrap_dim(dim, ref.ndim + 1)})


def hstack(tensors):
    """Concatenate ``tensors`` along their second dimension (the first for 1-D ones).

    Examples
    --------
    >>> import torcia
    >>> torcia.hstack([torcia.tensor([1, 2]), torcia.tensor([3])])
    tensor([1, 2, 3])
    >>> torcia.hstack([torcia.ones(2, 1), torcia.zeros(2, 2)])
    tensor([[1., 0., 0.],
            [1., 0., 0.]])
    """
    return cat(tensors, 0 if tensors[0].ndim == 1 else 1)


def vstack(tensors):
    """Concatenate ``tensors`` along their first dimension (1-D ones as rows).

    Examples
    --------
    >>> import torcia
    >>> torcia.vstack([torcia.tensor([1, 2]), torcia.tensor([3, 4])])
    tensor([[1, 2],
            [3, 4]])
    """
    return cat([t.reshape(1, -1) if t.ndim < 2 else t for t in tensors], 0)


def split(tensor, split_size_or_sections, dim=0):
    """Split into chunks of a size (the last may be smaller) or of the listed sizes.

    Examples
    --------
    >>> import torcia
    >>> torcia.split(torcia.arange(5), 2)
    (tensor([0, 1]), tensor([2, 3]), tensor([4]))
    >>> torcia.split(torcia.arange(5), [1, 4])
    (tensor([0]), tensor([1, 2, 3, 4]))
    """
    d = wrap_dim(dim, tensor.ndim)
    size = tensor.shape[d]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step <= 0 and size:
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got "
                               f"dimension size of {size}")
        sections = [step] * (size // step) + ([size % step] if size % step else []) if step else [0]
    else:
        sections = [int(s) for s in split_size_or_sections]
        if builtins.sum(sections) != size:
            raise RuntimeError(
                f"split_with_sizes expects split_sizes to sum exactly to {size} (input tensor's "
                f"size at dimension {d}), but got split_sizes={sections}")
    if len(sections) == 1:
        return (view_call("view", tensor, {"shape": tuple(tensor.shape)}),)
    outs = _opdef.CALL("split", (tensor,), {"sections": tuple(sections), "dim": d})
    for o in outs:
        o._vc = tensor._vc
        o._base = tensor._base if tensor._base is not None else tensor
    return outs


def chunk(input, chunks, dim=0):
    """Split into ``chunks`` pieces of equal size (the last may be smaller).

    Examples
    --------
    >>> import torcia
    >>> torcia.chunk(torcia.arange(5), 2)
    (tensor([0, 1, 2]), tensor([3, 4]))
    """
    if chunks <= 0:
        raise RuntimeError("chunk expects `chunks` to be greater than 0, got: " + str(chunks))
    size = input.shape[wrap_dim(dim, input.ndim)]
    step = -(-size // chunks) if size else 1
    return split(input, step, dim)


def unbind(input, dim=0):
    """The slices along ``dim``, each without that dim.

    Examples
    --------
    >>> import torcia
    >>> torcia.unbind(torcia.tensor([[1, 2], [3, 4]]), dim=1)
    (tensor([1, 3]), tensor([2, 4]))
    """
    d = wrap_dim(dim, input.ndim)
    if input.shape[d] == 0:
        return ()
    # one split node: its backward concatenates the slices' gradients once, where a select
    # per slice would scatter each into a zero tensor of the input's size
    return tuple(squeeze(t, d) for t in split(input, 1, d))


def fliplr(input):
    """``input`` reversed along its second dimension (left-right).

    Examples
    --------
    >>> import torcia
    >>> torcia.fliplr(torcia.tensor([[1, 2], [3, 4]]))
    tensor([[2, 1],
            [4, 3]])
    """
    return flip(input, (1,))


def flipud(input):
    """``input`` reversed along its first dimension (up-down).

    Examples
    --------
    >>> import torcia
    >>> torcia.flipud(torcia.tensor([[1, 2], [3, 4]]))
    tensor([[3, 4],
            [1, 2]])
    """
    return flip(input, (0,))


def repeat(input, *sizes):
    """Tile ``input`` ``sizes`` times along each dim (PyTorch's ``Tensor.repeat``).

    Examples
    --------
    >>> import torcia
    >>> torcia.repeat(torcia.tensor([1, 2]), 2, 2)
    tensor([[1, 2, 1, 2],
            [1, 2, 1, 2]])
    """
    sizes = shape_arg(sizes)
    if len(sizes) < input.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number "
                           "of dimensions of tensor")
    return _opdef.CALL("repeat", (input,), {"sizes": sizes})


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Repeat each element ``repeats`` times (along ``dim``, or of the flattened input).

    Examples
    --------
    >>> import torcia
    >>> torcia.repeat_interleave(torcia.tensor([1, 2]), 2)
    tensor([1, 1, 2, 2])
    >>> torcia.repeat_interleave(torcia.tensor([[1, 2], [3, 4]]), torcia.tensor([1, 2]), dim=0)
    tensor([[1, 2],
            [3, 4],
            [3, 4]])
    """
    if repeats is None:
        # repeat_interleave(repeats): each index i repeated repeats[i] times
        input, repeats = _opdef.PUBLIC.arange(input.shape[0], device=input.device), input
    if isinstance(repeats, _opdef.PUBLIC.Tensor):
        rep = repeats._data
    else:
        rep = int(repeats)
    d = None if dim is None else wrap_dim(dim, input.ndim)
    if d is not None and not input.ndim:
        # PyTorch reads the size of dim 0, which a 0-dim tensor lacks
        raise IndexError("Dimension out of range (expected to be in range of [-1, 0], but got "
                         "1)")
    if output_size is not None and isinstance(repeats, _opdef.PUBLIC.Tensor) and "meta" in (
            input.device.type, repeats.device.type):
        return _meta_repeated(input, repeats, d, int(output_size))
    out = _opdef.CALL("repeat_interleave", (input,), {"repeats": rep, "dim": d})
    length = out.shape[0 if d is None else d]
    if output_size is not None and output_size != length:
        if isinstance(rep, int):
            raise RuntimeError(f"repeat_interleave: Invalid output_size, expected {length} "
                               f"but got {output_size}")
        raise RuntimeError("allocated size does not match required size")
    return out


def _meta_repeated(input, repeats, d, output_size):
    """repeat_interleave's result where the repeats' values cannot be read (the meta
    device) but the caller gave its length, as PyTorch's meta kernel takes it."""
    along = input.numel() if d is None else input.shape[d]
    if repeats.ndim > 1 or (repeats.ndim == 1 and repeats.shape[0] not in (1, along)):
        raise RuntimeError("repeats must have the same size as input along dim, but got "
                           f"repeats.size(0) = {repeats.shape[0] if repeats.ndim else 1} "
                           f"and input.size({0 if d is None else d}) = {along}")
    shape = [input.numel()] if d is None else list(input.shape)
    shape[0 if d is None else d] = output_size
    return _opdef.PUBLIC.empty(shape, dtype=input.dtype, device="meta")


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
    return cat(cols, 1)


def dstack(tensors):
    """Concatenate along the third dimension after :func:`atleast_3d`.

    Examples
    --------
    >>> import torcia
    >>> torcia.dstack([torcia.tensor([1, 2]), torcia.tensor([3, 4])])
    tensor([[[1, 3],
             [2, 4]]])
    """
    return cat([atleast_3d(t) for t in tensors], 2)


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


def diagflat(input, offset=0):
    """A matrix with the flattened ``input`` on diagonal ``offset``.

    Examples
    --------
    >>> import torcia
    >>> torcia.diagflat(torcia.tensor([1, 2]))
    tensor([[1, 0],
            [0, 2]])
    """
    return diag(input.reshape(-1), offset)


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
    return split(input, list(split_sizes), dim)


# constant_pad_nd's argument is named ``pad`` too, as PyTorch's
_pad_fn = pad


def constant_pad_nd(input, pad, value=0):
    """Pad with ``value`` (``F.pad``'s constant mode).

    Examples
    --------
    >>> import torcia
    >>> torcia.constant_pad_nd(torcia.tensor([1, 2]), (1, 2), value=9)
    tensor([9, 1, 2, 9, 9])
    """
    return _pad_fn(input, pad, "constant", value)


def pixel_shuffle(input, upscale_factor):
    """(*, C * r * r, H, W) -> (*, C, H * r, W * r): channels moved into space.

    Examples
    --------
    >>> import torcia
    >>> torcia.pixel_shuffle(torcia.arange(4.0).reshape(1, 4, 1, 1), 2)[0, 0]
    tensor([[0., 1.],
            [2., 3.]])
    """
    r = int(upscale_factor)
    if input.ndim < 3:
        raise RuntimeError(f"pixel_shuffle expects input to have at least 3 dimensions, but "
                           f"got input with {input.ndim} dimension(s)")
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be "
                           f"divisible by the square of upscale_factor, but input.size(-3)={c}"
                           f" is not divisible by {r * r}")
    k = len(lead)
    x = input.reshape(*lead, c // (r * r), r, r, h, w)
    x = x.permute(*range(k), k, k + 3, k + 1, k + 4, k + 2)
    return x.reshape(*lead, c // (r * r), h * r, w * r)


def pixel_unshuffle(input, downscale_factor):
    """(*, C, H * r, W * r) -> (*, C * r * r, H, W): the inverse of pixel_shuffle.

    Examples
    --------
    >>> import torcia
    >>> torcia.pixel_unshuffle(torcia.zeros(1, 1, 4, 6), 2).shape
    torcia.Size([1, 4, 2, 3])
    """
    r = int(downscale_factor)
    if input.ndim < 3:
        raise RuntimeError(f"pixel_unshuffle expects input to have at least 3 dimensions, "
                           f"but got input with {input.ndim} dimension(s)")
    *lead, c, h, w = input.shape
    if h % r or w % r:
        raise RuntimeError(f"pixel_unshuffle expects height and width to be divisible by "
                           f"downscale_factor, but got input of size {list(input.shape)} "
                           f"and downscale_factor={r}")
    k = len(lead)
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    x = x.permute(*range(k), k, k + 2, k + 4, k + 1, k + 3)
    return x.reshape(*lead, c * r * r, h // r, w // r)


def channel_shuffle(input, groups):
    """``torch.channel_shuffle``.

    Examples
    --------
    >>> import torcia
    >>> torcia.channel_shuffle(torcia.arange(4.0).reshape(1, 4, 1), 2).flatten()
    tensor([0., 2., 1., 3.])
    """
    return functional().channel_shuffle(input, groups)


#: the functions here that are also Tensor methods, under the same name (``pad`` is
#: torcia.library's, for torcia.nn.functional, and stft's)
METHODS = ("flip", "roll", "tile", "diag", "diag_embed", "tril", "triu", "contiguous", "clone",
           "split", "chunk", "unbind", "fliplr", "flipud", "repeat", "repeat_interleave")

#: ... and those with an in-place ``name_`` method (declared ``inplace``: computed out of
#: place, then written back)
INPLACE = tuple(d.name for d in DECLARED if d.inplace)

#: Tensor methods set only where ``torcia.linalg``'s, ``torcia.special``'s or the class's
#: own have not set them
FALLBACK_METHODS = ("rot90", "diagflat", "split_with_sizes")

#: the names ``torcia`` exports from here
__all__ = ["atleast_1d", "atleast_2d", "atleast_3d", "cat", "channel_shuffle", "chunk", "clone",
           "column_stack", "concat", "concatenate", "constant_pad_nd", "contiguous", "diag",
           "diag_embed", "diagflat", "dstack", "flip", "fliplr", "flipud", "hstack",
           "pixel_shuffle", "pixel_unshuffle", "repeat", "repeat_interleave", "roll", "rot90",
           "split", "split_with_sizes", "stack", "tile", "tril", "triu", "unbind", "vstack"]

#: the functional forms here that ``torcia.nn.functional`` re-exports (through
#: :data:`torcia.library.functional`)
FUNCTIONAL = ("pixel_shuffle", "pixel_unshuffle")
