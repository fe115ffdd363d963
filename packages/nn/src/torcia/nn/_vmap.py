"""vmap's batching: a dispatch mode and one batching rule per op.

Inside ``vmap`` a batched tensor is a plain :class:`torcia.Tensor` whose array is a
:class:`BatchedArray`: the physical array, with the mapped dim first, and the vmap level
it belongs to. The array reports the *logical* shape (the physical one without the mapped
dim), so Python code above the kernels, shape checks included, sees per-sample shapes.
:class:`VmapMode`, a ``torcia.library.DispatchMode``, wraps every kernel: when one of a
kernel's arrays is batched, the op's batching rule runs the kernel once on the physical
arrays (a convolution over the samples folded into its batch, a matmul with the mapped
dim as a batch dim...). An op without a rule runs once per sample (a loop at the kernel,
not the function), with a one-time performance warning naming the op, as PyTorch does.

Nesting: each ``vmap`` call is a level; an array batched at several levels is a
``BatchedArray`` of a ``BatchedArray``, the innermost ``vmap`` (highest level) outside.
A rule unwraps its own level and calls the kernel again through the dispatcher, which
then handles the lower levels, as functorch's levels do.
"""

from __future__ import annotations

import math
import threading
import types
import warnings

import torcia
from torcia import library

__all__ = ["RULES", "BatchedArray", "VmapMode", "rule_kinds"]


class BatchedArray:
    """The array of a batched tensor: ``value`` holds the samples along dim 0."""

    __slots__ = ("value", "level")

    def __init__(self, value, level: int):
        self.value = value
        self.level = level

    @property
    def shape(self) -> tuple:
        return tuple(self.value.shape[1:])

    @property
    def ndim(self) -> int:
        return self.value.ndim - 1

    @property
    def dtype(self):
        return self.value.dtype

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def flags(self):
        return self.value.flags

    @property
    def strides(self) -> tuple:
        """Each sample's strides (the mapped dim's dropped): the layout checks of in-place
        writes and views see one sample's."""
        return tuple(self.value.strides[1:])

    @property
    def itemsize(self) -> int:
        return self.value.itemsize

    @property
    def data(self):
        """The first sample's first element's address under ``ptr`` (as CuPy's arrays):
        a view's storage offset is its distance from its base's, the same in every
        sample."""
        inner = self.value
        iface = getattr(inner, "__array_interface__", None)
        return types.SimpleNamespace(ptr=iface["data"][0] if iface is not None
                                     else inner.data.ptr)

    @property
    def batch_size(self) -> int:
        return self.value.shape[0]

    def astype(self, dtype, copy=True):
        return BatchedArray(self.value.astype(dtype, copy=copy), self.level)

    def copy(self):
        return BatchedArray(self.value.copy(), self.level)

    def reshape(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return BatchedArray(self.value.reshape((self.batch_size,) + tuple(shape)), self.level)

    def transpose(self, *axes):
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        if not axes:
            axes = tuple(reversed(range(self.ndim)))
        return BatchedArray(self.value.transpose((0,) + tuple(a + 1 for a in axes)),
                            self.level)

    def __getitem__(self, key):
        if not isinstance(key, tuple):
            key = (key,)
        return BatchedArray(self.value[(slice(None),) + key], self.level)

    def __setitem__(self, key, other):
        if key is not Ellipsis and key != (Ellipsis,):
            raise RuntimeError("vmap: indexed assignment into a batched array is not "
                               "supported; use an out-of-place op (index_put, scatter)")
        if isinstance(other, BatchedArray) and other.level == self.level:
            self.value[...] = other.value
        else:
            self.value[...] = other

    # NOTE: Python-level checks on arrays (a target's bounds, a mask's dtype) run on
    # batched arrays too; they see every sample at once
    def _binop(self, other, fn):
        mine = self.value
        if isinstance(other, BatchedArray) and other.level == self.level:
            top = max(self.ndim, other.ndim)
            return BatchedArray(fn(_pad_front(mine, top - self.ndim),
                                   _pad_front(other.value, top - other.ndim)), self.level)
        if hasattr(other, "ndim") and other.ndim > self.ndim:
            mine = _pad_front(mine, other.ndim - self.ndim)
        return BatchedArray(fn(mine, other), self.level)

    def __lt__(self, other):
        return self._binop(other, lambda a, b: a < b)

    def __le__(self, other):
        return self._binop(other, lambda a, b: a <= b)

    def __gt__(self, other):
        return self._binop(other, lambda a, b: a > b)

    def __ge__(self, other):
        return self._binop(other, lambda a, b: a >= b)

    def __eq__(self, other):
        return self._binop(other, lambda a, b: a == b)

    def __ne__(self, other):
        return self._binop(other, lambda a, b: a != b)

    def __and__(self, other):
        return self._binop(other, lambda a, b: a & b)

    def __or__(self, other):
        return self._binop(other, lambda a, b: a | b)

    def __invert__(self):
        return BatchedArray(~self.value, self.level)

    __hash__ = None

    def any(self):
        return bool(self.value.any())

    def all(self):
        return bool(self.value.all())

    def min(self):
        return self.value.min()

    def max(self):
        return self.value.max()

    def item(self):
        self.__bool__()

    def view(self, dtype):
        """Each sample's bytes as ``dtype`` (``Tensor.view(dtype)``): the physical array's
        view, whose last dim is the samples' (a sample of no dims has none to resize)."""
        out = self.value.view(dtype)
        if out.shape[0] != self.value.shape[0]:
            raise ValueError("Changing the dtype of a 0d array is only supported if the "
                             "itemsize is unchanged")
        return BatchedArray(out, self.level)

    def __len__(self):
        return self.shape[0]

    def __array__(self, *args, **kwargs):
        raise RuntimeError(
            "vmap: a batched tensor's values were read as one plain array (an in-place "
            "write of a batched value into an unbatched tensor, .item(), .numpy(), "
            "data-dependent Python control flow, or an op that reads its arrays outside "
            "its kernel). This is not possible inside vmap; make the tensor written to "
            "batched too, or move the read out of the vmapped function.")

    def __array_function__(self, func, types, args, kwargs):
        if func.__name__ in ("shares_memory", "may_share_memory"):
            return func(*(_physical(a) for a in args), **kwargs)
        self.__array__()
        return NotImplemented

    def __bool__(self):
        raise RuntimeError("vmap: It looks like you're attempting to use a Tensor in some "
                           "data-dependent control flow. We don't support that yet, please "
                           "shout over at https://github.com/pytorch/functorch/issues/257 .")

    def __repr__(self):
        return f"BatchedArray(level={self.level}, value={self.value!r})"


def _physical(a):
    """The innermost array of ``a`` (its storage, for memory-sharing questions)."""
    while isinstance(a, BatchedArray):
        a = a.value
    return a


def _expand_dim(a, axis: int, n: int):
    """``a`` with a new dim of size ``n`` at ``axis`` (a broadcast view)."""
    if isinstance(a, BatchedArray):
        return BatchedArray(_expand_dim(a.value, axis + 1, n), a.level)
    shape = tuple(a.shape)
    inserted = a.reshape(shape[:axis] + (1,) + shape[axis:])
    target = shape[:axis] + (n,) + shape[axis:]
    return _broadcast_to(inserted, target)


def _broadcast_to(a, shape):
    if isinstance(a, BatchedArray):
        return BatchedArray(_broadcast_to(a.value, (a.batch_size,) + tuple(shape)), a.level)
    xp = _xp_of(a)
    return xp.broadcast_to(a, tuple(shape))


def _xp_of(a):
    module = type(a).__module__.split(".")[0]
    if module == "cupy":
        import importlib

        return importlib.import_module("cupy")
    import numpy

    return numpy


def _stack(items, axis: int = 0):
    """``stack`` of arrays some of which may be batched at lower levels."""
    batched = [i for i in items if isinstance(i, BatchedArray)]
    if not batched:
        xp = _xp_of(items[0]) if items else None
        import numpy

        return (xp or numpy).stack([(xp or numpy).asarray(i) for i in items], axis=axis)
    level = max(b.level for b in batched)
    n = next(b.batch_size for b in batched if b.level == level)
    values = [i.value if isinstance(i, BatchedArray) and i.level == level
              else _expand_dim(_as_array(i), 0, n) for i in items]
    return BatchedArray(_stack(values, axis + 1), level)


def _as_array(a):
    if isinstance(a, BatchedArray) or hasattr(a, "shape"):
        return a
    import numpy

    return numpy.asarray(a)


# ---------------------------------------------------------------------------------------
# levels and the mode
# ---------------------------------------------------------------------------------------


class _Levels(threading.local):
    def __init__(self):
        self.depth = 0
        self.mode = None
        self.randomness: list = []  # per level: "error", "different" or "same"
        self.sizes: list = []  # per level: the batch size
        self.draws = None  # (state before, state after) of each default-generator draw


LEVELS = _Levels()
_warned_ops: set = set()


class VmapMode(library.DispatchMode):
    """The dispatch mode ``vmap`` enters (once per thread, however deep the nesting):
    every kernel is wrapped so that batched arrays go through their op's batching rule."""

    order = library.ModeOrder.VMAP

    def around_kernel(self, op, kernel, device):
        def batched_kernel(*args, **params):
            return dispatch(op, kernel, device, args, params)

        return batched_kernel


class _Ctx:
    """What a rule gets: the batch size, the op's kernel at the lower levels
    (:meth:`inner`), and other ops' kernels (:meth:`run`)."""

    __slots__ = ("op", "kernel", "device", "size", "level")

    def __init__(self, op, kernel, device, size, level):
        self.op, self.kernel, self.device, self.size = op, kernel, device, size
        self.level = level

    def inner(self, *args, **params):
        return dispatch(self.op, self.kernel, self.device, args, params)

    def run(self, op, *args, **params):
        kernels = self.device.kernels
        if kernels is None:
            kernels = self.device.backend.kernels
        return dispatch(op, kernels[op], self.device, args, params)

    @property
    def xp(self):
        return self.device.backend.xp


def dispatch(op, kernel, device, args, params):
    """Run ``kernel`` on ``args``; the rule of the highest batched level among them
    handles that level and calls back here for the lower ones."""
    rule = RULES.get(op)
    if rule is not None and rule[1] is _random:
        # before the level search: a draw with no batched argument is batched too
        return _random(op, kernel, args, params)
    level = -1
    for a in args:
        if a.__class__ is BatchedArray and a.level > level:
            level = a.level
    key = params.get(_KEYED[op]) if op in _KEYED else None
    if key is not None:
        for k in key if isinstance(key, tuple) else (key,):
            if k.__class__ is BatchedArray and k.level > level:
                level = k.level
    if level < 0:
        return kernel(*args, **params)
    vals, bats = [], []
    size = None
    for a in args:
        if a.__class__ is BatchedArray and a.level == level:
            vals.append(a.value)
            bats.append(True)
            size = a.value.shape[0]
        else:
            vals.append(a)
            bats.append(False)
    if key is not None:
        for k in key if isinstance(key, tuple) else (key,):
            if k.__class__ is BatchedArray and k.level == level:
                size = k.value.shape[0]
    ctx = _Ctx(op, kernel, device, size, level)
    out = NotImplemented
    if rule is not None:
        out = rule[1](ctx, vals, bats, params)
    if out is NotImplemented:
        out = _loop(ctx, vals, bats, params, level)
    if isinstance(out, tuple):
        return tuple(BatchedArray(o, level) for o in out)
    return BatchedArray(out, level)


# ops with arrays inside a parameter (index arrays, repeat counts): the parameter's name
_KEYED = {"getitem": "key", "index_put": "key", "repeat_interleave": "repeats"}


def _loop(ctx, vals, bats, params, level):
    """The fallback: the kernel once per sample, the results stacked."""
    if ctx.op not in _warned_ops:
        _warned_ops.add(ctx.op)
        warnings.warn(
            f"There is a performance drop because we have not yet implemented the batching "
            f"rule for {ctx.op}. It runs once per sample in vmap (see "
            f"torcia.func's list of ops with batching rules).", UserWarning, stacklevel=4)
    key = params.get(_KEYED[ctx.op]) if ctx.op in _KEYED else None
    results = []
    for b in range(ctx.size):
        if key is not None:
            params = {**params, _KEYED[ctx.op]: _key_sample(key, level, b)}
        results.append(ctx.inner(*[v[b] if bat else v for v, bat in zip(vals, bats)],
                                 **params))
    if isinstance(results[0], tuple):
        return tuple(_stack_samples([r[k] for r in results]) for k in range(len(results[0])))
    return _stack_samples(results)


def _stack_samples(results):
    """The per-sample results as one batch; samples of different shapes (a length that
    depends on each sample's values) refused as torch's stack refuses them."""
    first = tuple(getattr(results[0], "shape", ()))
    for i, r in enumerate(results[1:], 1):
        if tuple(getattr(r, "shape", ())) != first:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got "
                               f"{list(first)} at entry 0 and "
                               f"{list(getattr(r, 'shape', ()))} at entry {i}")
    return _stack(results)


def _key_sample(key, level, b):
    if not isinstance(key, tuple):
        return _key_sample((key,), level, b)[0]
    return tuple(k.value[b] if k.__class__ is BatchedArray and k.level == level else k
                 for k in key)


# ---------------------------------------------------------------------------------------
# random ops
# ---------------------------------------------------------------------------------------

RANDOMNESS_ERROR = ("vmap: called random operation while in randomness error mode. Please "
                    "either use the 'same' or 'different' randomness flags on vmap or "
                    "perform the randomness operation out of vmap")


def _random(op, kernel, args, params):
    """A random op under vmap, per level's ``randomness`` (see :func:`_draw`). Draws from
    the default generator are logged so that vmap can tell whether the function drew
    outside dispatch too (see ``torcia.nn._func``)."""
    rng = params.get("rng")
    log = LEVELS.draws
    if log is not None and rng is torcia.random.default_generator.rng:
        before = rng.bit_generator.state
        out = _draw(kernel, args, params, LEVELS.depth - 1)
        log.append((before, rng.bit_generator.state))
        return out
    return _draw(kernel, args, params, LEVELS.depth - 1)


def _draw(kernel, args, params, level):
    """The draw at ``level`` and below: "error" raises PyTorch's error, "same" draws once
    for every sample (the result broadcasts), "different" draws one sample's worth per
    sample in the same kernel call (the batch dims lead the shape, or the probabilities
    get one row per sample)."""
    if level < 0:
        return kernel(*args, **params)
    how = LEVELS.randomness[level]
    if how == "error":
        raise RuntimeError(RANDOMNESS_ERROR)
    mine = [a.__class__ is BatchedArray and a.level == level for a in args]
    if how == "same":
        if any(mine):
            raise RuntimeError("Vmap does not currently support same randomness with a "
                               "batched tensor input. Please file an issue with functorch")
        return _draw(kernel, args, params, level - 1)
    size = LEVELS.sizes[level]
    if args:
        args = tuple(a.value if m else _expand_dim(a, 0, size) for a, m in zip(args, mine))
    elif "shape" in params:
        params = {**params, "shape": (size,) + tuple(params["shape"])}
    else:
        # a draw of no shape to lead with the samples (randperm's n): one draw per sample
        return BatchedArray(_stack([_draw(kernel, args, params, level - 1)
                                    for _ in range(size)]), level)
    return BatchedArray(_draw(kernel, args, params, level - 1), level)


# ---------------------------------------------------------------------------------------
# helpers for rules
# ---------------------------------------------------------------------------------------


def _lndim(v, bat) -> int:
    """The logical ndim of an argument (-1 for a non-array)."""
    if not hasattr(v, "ndim"):
        return -1
    return v.ndim - 1 if bat else v.ndim


def _pad_front(v, n: int):
    """A batched physical array with ``n`` size-1 dims after the batch dim."""
    if n <= 0:
        return v
    shape = tuple(v.shape)
    return v.reshape(shape[:1] + (1,) * n + shape[1:])


def _full(v, bat, size):
    """A batched physical array: ``v`` itself, or ``v`` broadcast over the samples (a
    number, or None, stays as it is)."""
    return v if bat or not hasattr(v, "shape") else _expand_dim(v, 0, size)


def _wrap(d, ndim: int) -> int:
    n = max(ndim, 1)
    if not -n <= d < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, "
                         f"{n - 1}], but got {d})")
    return d % n


def _shift(dim, ndim: int):
    """A logical dim (int, tuple or list) as the physical one."""
    if isinstance(dim, (tuple, list)):
        return type(dim)(_wrap(d, ndim) + 1 for d in dim)
    return _wrap(dim, ndim) + 1


def _plain(vals) -> bool:
    return not any(isinstance(v, BatchedArray) for v in vals)


def _merge(v, a: int, b: int):
    """Physical dims ``a`` and ``a + 1`` merged (``b`` = a+1)."""
    shape = tuple(v.shape)
    return v.reshape(shape[:a] + (shape[a] * shape[b],) + shape[b + 1:])


def _split(v, a: int, n: int):
    """Physical dim ``a`` split into ``(n, rest)``."""
    shape = tuple(v.shape)
    return v.reshape(shape[:a] + (n, shape[a] // n) + shape[a + 1:])


def _swap01(v):
    axes = list(range(v.ndim))
    axes[0], axes[1] = 1, 0
    return v.transpose(tuple(axes))


# ---------------------------------------------------------------------------------------
# generic rules, derived from the op records
# ---------------------------------------------------------------------------------------


def _elementwise(ctx, vals, bats, params):
    """Broadcasting ops: batched arguments get size-1 dims after the batch dim up to the
    highest logical ndim, so NumPy's right-aligned broadcasting keeps samples apart."""
    top = max(_lndim(v, b) for v, b in zip(vals, bats))
    vals = [_pad_front(v, top - _lndim(v, b)) if b else v for v, b in zip(vals, bats)]
    return ctx.inner(*vals, **params)


def _reduction(ctx, vals, bats, params):
    """Ops with a ``dim`` parameter on their first input (reductions, scans, softmax):
    the dim moves past the batch dim; ``dim=None`` (every element) flattens each sample."""
    (x,), rest = vals[:1], vals[1:]
    if any(bats[1:]) or not bats[0]:
        return NotImplemented
    ndim = x.ndim - 1
    dim = params.get("dim")
    if dim is None and "dim" in params:
        keepdim = params.get("keepdim", False)
        flat = x.reshape((ctx.size, -1))
        out = ctx.inner(flat, *rest, **{**params, "dim": 1 if ctx.op in _INT_DIM else (1,)})
        if keepdim:
            shape = (ctx.size,) + (1,) * ndim
            out = (tuple(o.reshape(shape) for o in out) if isinstance(out, tuple)
                   else out.reshape(shape))
        return out
    if dim is None:
        return NotImplemented
    return ctx.inner(x, *rest, **{**params, "dim": _shift(dim, ndim)})


# ops whose kernel takes one int dim
_INT_DIM = {"max_dim", "min_dim", "median_dim", "mode_dim", "argmax", "argmin", "softmax",
            "log_softmax", "cumsum", "cumprod", "cummax", "cummin", "logcumsumexp", "kthvalue"}


def _positional_dim(ctx, vals, bats, params):
    """``softmax_backward(g, y, dim)`` and friends: two samples-aligned arrays and a dim."""
    g, y = vals[:2]
    if any(bats[2:]):
        return NotImplemented
    ndim = max(_lndim(g, bats[0]), _lndim(y, bats[1]))
    full = (_full(g, bats[0], ctx.size), _full(y, bats[1], ctx.size))
    if "dim" in params:
        return ctx.inner(*full, **{**params, "dim": _wrap(params["dim"], ndim) + 1})
    return ctx.inner(*full, _wrap(vals[2], ndim) + 1, **params)


def _view_rule(ctx, vals, bats, params):
    (x,) = vals
    ndim = x.ndim - 1
    op = ctx.op
    p = dict(params)
    if op in ("view", "reshape"):
        p["shape"] = (ctx.size,) + tuple(params["shape"])
        if op == "view":
            # the physical array need not be viewable where the logical one is (in_dims
            # moved its mapped dim first): reshape copies only then
            return ctx.run("reshape", x, **p)
    elif op == "permute":
        p["dims"] = (0,) + tuple(_wrap(d, ndim) + 1 for d in params["dims"])
    elif op == "transpose":
        p["dim0"], p["dim1"] = _shift(params["dim0"], ndim), _shift(params["dim1"], ndim)
    elif op == "squeeze":
        dim = params["dim"]
        if dim is None:
            dim = tuple(d for d in range(ndim) if x.shape[d + 1] == 1)
        p["dim"] = _shift(tuple(dim) if isinstance(dim, (tuple, list)) else (dim,), ndim)
    elif op == "unsqueeze":
        p["dim"] = _wrap(params["dim"], ndim + 1) + 1
    elif op == "expand":
        shape = tuple(params["shape"])
        x = _pad_front(x, len(shape) - ndim)
        p["shape"] = (ctx.size,) + tuple(x.shape[1 + i] if s == -1 else s
                                         for i, s in enumerate(shape))
    elif op == "narrow":
        p["dim"] = _shift(params["dim"], ndim)
    elif op == "unfold":
        p["dimension"] = _shift(params["dimension"], ndim)
    elif op == "diagonal":
        p["dim1"], p["dim2"] = _shift(params["dim1"], ndim), _shift(params["dim2"], ndim)
    elif op == "getitem":
        key = _batched_key(_unwrap_key(params["key"], ctx), ctx, bats[0])
        if key is None:
            return NotImplemented
        p["key"] = key
    elif op in ("flip",):
        p["dims"] = _shift(tuple(params["dims"]), ndim)
    elif op == "roll":
        if params["dims"] is None:
            return NotImplemented
        p["dims"] = _shift(tuple(params["dims"]), ndim)
    elif op in ("repeat", "tile"):
        key = "sizes" if op == "repeat" else "dims"
        sizes = tuple(params[key])
        x = _pad_front(x, len(sizes) - ndim)
        p[key] = (1,) * (x.ndim - len(sizes)) + sizes
    elif op == "split":
        p["dim"] = _shift(params["dim"], ndim)
    return ctx.inner(x, **p)


def _batched_key(key, ctx=None, x_batched=True):
    """An index key with the samples' dim in front, or None where NumPy would move the
    advanced-index dims elsewhere (several advanced indices, or one beside a None). A
    batched index array (of this level: already unwrapped by the caller) must come first:
    it picks per sample, beside an ``arange`` over the samples when ``x`` is batched."""
    key = key if isinstance(key, tuple) else (key,)
    advanced = [k for k in key if hasattr(k, "ndim") or isinstance(k, (list, bool))]
    mine = [i for i, k in enumerate(key) if isinstance(k, _Mine)]
    if mine:
        if mine != [0] or len(advanced) > 1 or any(k is None for k in key):
            return None
        idx = key[0].value
        if not x_batched:
            return (idx,) + key[1:]
        rows = ctx.xp.arange(ctx.size).reshape((ctx.size,) + (1,) * (idx.ndim - 1))
        return (rows, idx) + key[1:]
    if any(isinstance(k, BatchedArray) for k in advanced) or len(advanced) > 1:
        return None
    if advanced and any(k is None for k in key):
        return None
    return (slice(None),) + key


class _Mine:
    """A batched index array of the level being handled, marked inside a key."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def _unwrap_key(key, ctx):
    """The key with this level's batched index arrays marked (see :class:`_Mine`)."""
    key = key if isinstance(key, tuple) else (key,)
    return tuple(_Mine(k.value) if k.__class__ is BatchedArray and k.level == ctx.level
                 else k for k in key)


def _index_put(ctx, vals, bats, params):
    """``x[key] = values`` (the backward of indexing): both broadcast over the samples."""
    x, values = vals
    key = _batched_key(_unwrap_key(params["key"], ctx), ctx)
    if key is None:
        return NotImplemented
    xs = _full(x, bats[0], ctx.size).copy()
    if bats[1]:
        target = ctx.run("getitem", xs, key=key).ndim - 1
        values = _pad_front(values, target - _lndim(values, True))
    return ctx.inner(xs, values, **{**params, "key": key})


def _as_strided(ctx, vals, bats, params):
    """Each sample is a storage of its own (a batched tensor is no view): its offset and
    strides address the sample's memory from its first element, as PyTorch's rule does
    for a tensor passed to vmap. One strided view of the physical array, the mapped dim's
    stride in front, so that writes through it reach the samples."""
    (x,) = vals
    item = x.itemsize
    bstride = x.strides[0] // item
    span = 1 + sum((n - 1) * abs(st) for n, st in zip(x.shape[1:], x.strides[1:])) // item
    if ctx.size > 1 and 0 < bstride < span or bstride < 0:
        # one sample's storage would hold others' elements
        raise RuntimeError("vmap: Calling Tensor.as_strided is not supported unless the batch "
                           "dims being vmapped over are at the front of the tensor (in memory "
                           "layout)")
    return ctx.inner(x, size=(ctx.size,) + tuple(params["size"]),
                     stride=(bstride,) + tuple(params["stride"]),
                     storage_offset=params.get("storage_offset", 0))


_VIEW_OPS = ("view", "reshape", "permute", "transpose", "squeeze", "unsqueeze", "expand",
             "narrow", "unfold", "diagonal", "getitem", "flip", "roll", "repeat", "tile",
             "split")


def _identity_like(ctx, vals, bats, params):
    """Ops that act on each element or on the trailing dims only (tril, contiguous)."""
    return ctx.inner(*vals, **params)


def _concat(ctx, vals, bats, params):
    """cat/stack: every input batched (the unbatched ones broadcast), dim shifted."""
    ndim = max(_lndim(v, b) for v, b in zip(vals, bats))
    dim = params["dim"]
    if ctx.op == "cat":
        if ndim == 0:
            return NotImplemented
        # PyTorch's cat skips 1-D empty tensors of other shapes
        vals = [v for v, b in zip(vals, bats) if not (_lndim(v, b) == 1 and v.shape[-1] == 0
                                                       and ndim > 1)] or vals
        dim = _wrap(dim, ndim) + 1
    else:
        dim = _wrap(dim, ndim + 1) + 1
    full = [_full(v, b, ctx.size) for v, b in zip(vals, bats)]
    return ctx.inner(*full, **{**params, "dim": dim})


def _indexed(ctx, vals, bats, params):
    """gather/scatter/take_along_dim and index_select/add/copy: the arrays broadcast over
    the samples, ``dim`` shifted (index_* with an unbatched index only)."""
    op = ctx.op
    if params.get("dim") is None:
        return NotImplemented
    ndim = _lndim(vals[0], bats[0])
    if op.startswith("index_"):
        if bats[1]:
            return NotImplemented
        vals = [v if i == 1 else _full(v, b, ctx.size) for i, (v, b) in
                enumerate(zip(vals, bats))]
    else:
        vals = [_full(v, b, ctx.size) for v, b in zip(vals, bats)]
    if op in ("scatter", "scatter_add", "scatter_reduce", "index_add", "index_copy"):
        vals[0] = vals[0].copy()  # the kernel may write into its first argument
    return ctx.inner(*vals, **{**params, "dim": _shift(params["dim"], ndim)})


# ---------------------------------------------------------------------------------------
# hand-written rules
# ---------------------------------------------------------------------------------------


def _matmul(ctx, vals, bats, params):
    """Vectors become matrices (their extra dim dropped after), batched operands get
    size-1 dims up to the other's rank, and the samples ride as a matmul batch dim."""
    a, b = vals
    ba, bb = bats
    la, lb = _lndim(a, ba), _lndim(b, bb)
    if la == 0 or lb == 0:
        return NotImplemented
    row = col = False
    if ba and la == 1:
        a = a.reshape((ctx.size, 1) + tuple(a.shape[1:]))
        la, row = 2, True
    if lb == 1 and (bb or row):
        b = b.reshape(tuple(b.shape) + (1,))
        lb, col = 2, True
    top = max(la, lb)
    if ba:
        a = _pad_front(a, top - la)
    if bb:
        b = _pad_front(b, top - lb)
    out = ctx.run("matmul", a, b) if ctx.op != "matmul" else ctx.inner(a, b)
    if row or col:
        shape = list(out.shape)
        if col:
            shape.pop(-1)
        if row:
            shape.pop(-1 if col else -2)
        out = out.reshape(tuple(shape))
    return out


def _dot(ctx, vals, bats, params):
    """dot and outer through elementwise products (no conjugation, as PyTorch's dot)."""
    a, b = (_full(v, bat, ctx.size) for v, bat in zip(vals, bats))
    if ctx.op == "dot":
        prod = ctx.run("mul", a, b)
        # an integer dot stays in its dtype, where sum would widen it to int64
        return ctx.run("sum", prod, dim=(1,), keepdim=False,
                       dtype=prod.dtype if prod.dtype.kind in "biu" else None)
    return ctx.run("mul", a.reshape(tuple(a.shape) + (1,)),
                   b.reshape((ctx.size, 1) + tuple(b.shape[1:])))


def _addmm(ctx, vals, bats, params):
    """One addmm over the samples, so that it rounds as the op does (scaled and added in
    its kernel, in float32 for half floats): addmm's matrices or baddbmm's batches, of one
    rank, broadcast over the sample dim; the input gains size-1 dims up to that rank."""
    c, a, b = vals
    if not (bats[1] or bats[2]):
        # the product carries the samples, also where beta is 0 and the input is ignored
        a = _expand_dim(a, 0, ctx.size)
    rank = _lndim(b, bats[2])
    cc = _pad_front(c, rank - _lndim(c, True)) if bats[0] else c
    return ctx.run("addmm", cc, a, b, beta=params.get("beta", 1), alpha=params.get("alpha", 1))


def _einsum(ctx, vals, bats, params):
    equation = params["equation"].replace(" ", "")
    if "..." in equation or "->" not in equation:
        return NotImplemented
    lhs, rhs = equation.split("->")
    terms = lhs.split(",")
    free = next(c for c in "ZYXWVUTSRQPONMLKJIHGFEDCBAzyxwvutsrqponmlkjihgfedcba"
                if c not in equation)
    terms = [free + t if bat else t for t, bat in zip(terms, bats)]
    return ctx.inner(*vals, equation=",".join(terms) + "->" + free + rhs)


def _linear(ctx, vals, bats, params):
    x, w, b = vals
    bx, bw, bb = bats
    if not (bw or bb):
        if _lndim(x, True) == 1:
            return ctx.inner(x, w, b)
        lead = tuple(x.shape[:-1])
        out = ctx.inner(x.reshape((-1, x.shape[-1])), w, b)
        return out.reshape(lead + (out.shape[-1],))
    # per-sample weights (ensembles): x @ w^T + b with the samples as the batch dim
    wt = _full(w, bw, ctx.size)
    wt = wt.transpose((0, 2, 1))
    if bx:
        lead = tuple(x.shape[1:-1])
        xm = x.reshape((ctx.size, -1, x.shape[-1]))
    else:
        lead = tuple(x.shape[:-1])
        xm = x.reshape((1, -1, x.shape[-1]))
    out = ctx.run("matmul", xm, wt)
    if b is not None:
        bias = _full(b, bb, ctx.size)
        out = ctx.run("add", out, bias.reshape((ctx.size, 1, -1)))
    return out.reshape((ctx.size,) + lead + (out.shape[-1],))


def _spatial(params) -> int:
    for key in ("stride", "kernel_size", "padding"):
        if params.get(key) is not None:
            return len(params[key])
    return -1


def _conv(ctx, vals, bats, params):
    """Samples folded into the convolution's batch (batched input only), or into its
    groups (batched weight: per-sample weights and their gradients)."""
    x, w, b = vals
    bx, bw, bb = bats
    nd = _spatial(params)
    if _lndim(x, bx) != nd + 2:
        return NotImplemented
    n = ctx.size
    if not (bw or bb):
        out = ctx.inner(_merge(x, 0, 1), w, b, **params)
        return _split(out, 0, n)
    groups = params["groups"]
    xs = _full(x, bx, n)  # (B, N, C, *sp)
    xg = _merge(_swap01(xs), 1, 2)  # (N, B*C, *sp)
    wg = _merge(_full(w, bw, n), 0, 1)  # (B*O, ...) or (B*Cin, ...) for the transpose
    bg = None if b is None else _merge(_full(b, bb, n), 0, 1)
    out = ctx.inner(xg, wg, bg,
                    **{**params, "groups": groups * n})
    return _swap01(_split(out, 1, n))  # (N, B*O, *) -> (B, N, O, *)


def _conv_weight(ctx, vals, bats, params):
    """The per-sample weight gradient: the samples become groups."""
    x, g = vals
    nd = _spatial(params)
    if _lndim(x, bats[0]) != nd + 2:
        return NotImplemented
    n = ctx.size
    xg = _merge(_swap01(_full(x, bats[0], n)), 1, 2)
    gg = _merge(_swap01(_full(g, bats[1], n)), 1, 2)
    shape = tuple(params["weight_shape"])
    out = ctx.inner(xg, gg, **{**params, "weight_shape": (n * shape[0],) + shape[1:],
                               "groups": params["groups"] * n})
    return out.reshape((n,) + shape)


def _fold_first(ctx, vals, bats, params, nd=None):
    """Pooling and friends: samples folded into the op's batch dim N of (N, C, *sp);
    every array argument is batched (an unbatched one is broadcast)."""
    nd = _spatial(params) if nd is None else nd
    arrays = [i for i, v in enumerate(vals) if hasattr(v, "ndim")]
    if any(_lndim(vals[i], bats[i]) != nd + 2 for i in arrays):
        return NotImplemented
    n = ctx.size
    vals = [_merge(_full(v, bats[i], n), 0, 1) if i in arrays else v
            for i, v in enumerate(vals)]
    out = ctx.inner(*vals, **params)
    if isinstance(out, tuple):
        return tuple(_split(o, 0, n) for o in out)
    return _split(out, 0, n)


def _pool(ctx, vals, bats, params):
    return _fold_first(ctx, vals, bats, params)


def _pool_backward(ctx, vals, bats, params):
    """max/avg_pool_backward: ``input_shape`` is the spatial shape, unchanged."""
    return _fold_first(ctx, vals, bats, params, nd=len(params["input_shape"]))


def _adaptive(ctx, vals, bats, params):
    return _fold_first(ctx, vals, bats, params, nd=len(params["output_size"]))


def _per_sample_loss(ctx, losses, counts, reduction):
    """Per-sample 'none' losses (B, N) reduced as ``reduction``."""
    if reduction == "sum":
        return losses.sum(axis=1)
    return (losses.sum(axis=1) / counts).astype(losses.dtype, copy=False)


def _class_loss(ctx, vals, bats, params):
    """cross_entropy and nll_loss: the samples folded into N with ``reduction='none'``,
    then reduced per sample (the mean over the targets' weights, as PyTorch's)."""
    x, target, weight = vals
    if bats[2] or not _plain(vals) or params.get("label_smoothing") and weight is not None:
        return NotImplemented
    n = ctx.size
    xp = ctx.xp
    lx = _lndim(x, bats[0])
    if lx != 2 or _lndim(target, bats[1]) != 1 or target.dtype.kind not in "iu":
        return NotImplemented
    xs, ts = _full(x, bats[0], n), _full(target, bats[1], n)
    rows = xs.shape[1]
    losses = ctx.inner(xs.reshape((n * rows, -1)), ts.reshape(-1), weight,
                       **{**params, "reduction": "none"}).reshape((n, rows))
    reduction = params["reduction"]
    if reduction == "none":
        return losses
    keep = ts != params["ignore_index"]
    safe = xp.where(keep, ts, 0)
    w = keep.astype(xs.dtype) if weight is None else weight[safe] * keep
    return _per_sample_loss(ctx, losses, w.sum(axis=1), reduction)


def _cross_entropy_backward(ctx, vals, bats, params):
    g, x, target, weight = vals
    if bats[3] or not _plain(vals):
        return NotImplemented
    n = ctx.size
    xp = ctx.xp
    if _lndim(x, bats[1]) != 2 or _lndim(target, bats[2]) != 1:
        return NotImplemented
    xs, ts = _full(x, bats[1], n), _full(target, bats[2], n)
    rows = xs.shape[1]
    reduction = params["reduction"]
    gs = _full(g, bats[0], n)
    if reduction == "none":
        per_row = gs
    else:
        keep = ts != params["ignore_index"]
        if reduction == "mean":
            safe = xp.where(keep, ts, 0)
            w = keep.astype(xs.dtype) if weight is None else weight[safe] * keep
            scale = gs / w.sum(axis=1)
        else:
            scale = gs
        per_row = xp.broadcast_to(scale.reshape((n, 1)), (n, rows))
    out = ctx.inner(xp.ascontiguousarray(per_row).reshape(-1).astype(xs.dtype, copy=False),
                    xs.reshape((n * rows, -1)), ts.reshape(-1), weight,
                    **{**params, "reduction": "none"})
    return out.reshape(xs.shape)


def _embedding(ctx, vals, bats, params):
    weight, indices = vals
    if not bats[0]:
        return ctx.inner(weight, indices, **params)
    if not _plain(vals):
        return NotImplemented
    n, v = ctx.size, weight.shape[1]
    idx = _full(indices, bats[1], n)
    offsets = (ctx.xp.arange(n) * v).reshape((n,) + (1,) * (idx.ndim - 1))
    return ctx.inner(weight.reshape((n * v, -1)), idx + offsets, **params)


def _embedding_backward(ctx, vals, bats, params):
    g, indices = vals
    if not _plain(vals):
        return NotImplemented
    n, v = ctx.size, params["num_weights"]
    gs, idx = _full(g, bats[0], n), _full(indices, bats[1], n)
    offsets = (ctx.xp.arange(n) * v).reshape((n,) + (1,) * (idx.ndim - 1))
    pad = params.get("padding_idx")
    flat = idx + offsets
    if pad is not None:
        # the padding row of every sample gets no gradient
        flat = ctx.xp.where(idx == pad, -1, flat)
    out = ctx.inner(gs, flat, **{**params, "num_weights": n * v,
                                 "padding_idx": None if pad is None else -1})
    return out.reshape((n, v, -1))


def _half(x) -> bool:
    """float16 or bfloat16 (NumPy's kind "V"): what the norms' kernels compute in float32."""
    return x.dtype.itemsize == 2 and x.dtype.kind in "fV"


def _in_float32(rule):
    """``rule`` with half-precision arrays in float32 and its result rounded back once,
    where per-sample affine parameters split the kernel (which rounds once) into several
    ops."""
    def run(ctx, vals, bats, params):
        if not (_half(vals[0]) and any(bats[1:])):
            return rule(ctx, vals, bats, params)
        dtype = vals[0].dtype
        vals = [v if v is None else v.astype("float32") for v in vals]
        return rule(ctx, vals, bats, params).astype(dtype)

    return run


@_in_float32
def _layer_norm(ctx, vals, bats, params):
    x, weight, bias = vals
    if bats[1] or bats[2]:
        # per-sample affine parameters: normalise, then scale and shift with broadcasting
        out = ctx.inner(_full(x, bats[0], ctx.size), None, None, **params)
        if weight is not None:
            out = _elementwise(_Ctx("mul", _kernel(ctx, "mul"), ctx.device, ctx.size, ctx.level),
                               [out, weight], [True, bats[1]], {})
        if bias is not None:
            out = _elementwise(_Ctx("add", _kernel(ctx, "add"), ctx.device, ctx.size, ctx.level),
                               [out, bias], [True, bats[2]], {})
        return out
    return ctx.inner(x, weight, bias, **params)


@_in_float32
def _rms_norm(ctx, vals, bats, params):
    x, weight = vals
    if bats[1]:
        # a per-sample weight: normalise, then scale with broadcasting
        out = ctx.inner(_full(x, bats[0], ctx.size), None, **params)
        return _elementwise(_Ctx("mul", _kernel(ctx, "mul"), ctx.device, ctx.size, ctx.level),
                            [out, weight], [True, bats[1]], {})
    return ctx.inner(x, weight, **params)


def _kernel(ctx, op):
    kernels = ctx.device.kernels
    if kernels is None:
        kernels = ctx.device.backend.kernels
    return kernels[op]


def _layer_norm_backward(ctx, vals, bats, params):
    """(grad_input, grad_weight, grad_bias): the input gradient is per row already;
    the parameter gradients are summed over each sample's rows only."""
    g, x, weight = vals
    if bats[2] or not _plain(vals):
        return NotImplemented
    n = ctx.size
    normalized_ndim, eps = params["normalized_ndim"], params["eps"]
    gs, xs = _full(g, bats[0], n), _full(x, bats[1], n)
    gx, _, _ = ctx.inner(gs, xs, weight, **params)
    axes = tuple(range(xs.ndim - normalized_ndim, xs.ndim))
    lead = tuple(range(1, xs.ndim - normalized_ndim))
    centred = xs - xs.mean(axis=axes, keepdims=True)
    invstd = 1 / ctx.xp.sqrt((centred * centred).mean(axis=axes, keepdims=True) + eps)
    gw = (gs * centred * invstd).sum(axis=lead).astype(xs.dtype, copy=False)
    gb = gs.sum(axis=lead)
    return gx, gw, gb


def _rms_norm_backward(ctx, vals, bats, params):
    """(grad_input, grad_weight): as layer norm's, without the centring."""
    g, x, weight = vals
    if bats[2] or not _plain(vals):
        return NotImplemented
    n = ctx.size
    gs, xs = _full(g, bats[0], n), _full(x, bats[1], n)
    gx, _ = ctx.inner(gs, xs, weight, **params)
    axes = tuple(range(xs.ndim - params["normalized_ndim"], xs.ndim))
    lead = tuple(range(1, xs.ndim - params["normalized_ndim"]))
    invrms = 1 / ctx.xp.sqrt((xs * xs).mean(axis=axes, keepdims=True) + params["eps"])
    gw = (gs * xs * invrms).sum(axis=lead).astype(xs.dtype, copy=False)
    return gx, gw


def _channels(v, bat, n):
    """A per-channel array (C,) or None as (B*C,): the samples folded into the channels."""
    return None if v is None else _merge(_full(v, bat, n), 0, 1)


def _batch_norm(ctx, vals, bats, params):
    """Per-sample statistics (training) or per-sample affine parameters: the samples
    folded into the channels, (B, N, C, *) -> (N, B*C, *), the running statistics tiled."""
    x, weight, bias, rmean, rvar = vals
    if not _plain(vals) or _lndim(x, bats[0]) < 2:
        return NotImplemented
    n = ctx.size
    xs = _merge(_swap01(_full(x, bats[0], n)), 1, 2)
    out, mean, var = ctx.inner(xs, *(_channels(v, b, n) for v, b in zip(vals[1:], bats[1:])),
                               **params)
    return (_swap01(_split(out, 1, n)), mean.reshape((n, -1)), var.reshape((n, -1)))


def _batch_norm_backward(ctx, vals, bats, params):
    """(grad_input, grad_weight, grad_bias) with the samples folded into the channels, so
    the parameter gradients come out per sample."""
    g, x, weight, rmean, rvar = vals[:5]
    if any(bats[5:]) or not _plain(vals):
        return NotImplemented
    n = ctx.size
    gs = _merge(_swap01(_full(g, bats[0], n)), 1, 2)
    xs = _merge(_swap01(_full(x, bats[1], n)), 1, 2)
    rest = [_channels(v, b, n) for v, b in zip(vals[2:5], bats[2:5])]
    gx, gw, gb = ctx.inner(gs, xs, *rest, *vals[5:], **params)
    return _swap01(_split(gx, 1, n)), gw.reshape((n, -1)), gb.reshape((n, -1))


def _time_major(v, bat, n):
    """(L, N, F) per sample as (L, B*N, F): the samples folded into the batch."""
    return _merge(_swap01(_full(v, bat, n)), 1, 2)


def _batch_major(v, n):
    """(B*N, F) as (B, N, F)."""
    return _split(v, 0, n)


def _flash_attention(ctx, vals, bats, params):
    """Attention (or its backward) for every sample at once: the op takes any leading
    dims, and the samples are one more, unbatched operands broadcast over them. A batched
    mask (the last value) gets size-1 dims after its samples' dim to line up with the
    scores; an unbatched one broadcasts as it is."""
    if not _plain(vals):
        return NotImplemented
    n = ctx.size
    *tensors, mask = vals
    tensors = [_full(t, b, n) for t, b in zip(tensors, bats)]
    if mask is not None and bats[-1]:
        # the scores have the dims of q (the backward's second operand)
        ndim = tensors[1 if ctx.op == "flash_attention_backward" else 0].ndim
        shape = tuple(mask.shape)
        mask = mask.reshape(shape[:1] + (1,) * (ndim - len(shape)) + shape[1:])
    return ctx.inner(*tensors, mask, **params)


def _lstm_layer(ctx, vals, bats, params):
    """A whole LSTM layer for every sample at once: the samples folded into its batch
    (a shared recurrent weight only)."""
    x_gates, h0, c0, w = vals
    if bats[3] or _lndim(x_gates, bats[0]) != 3 or not _plain(vals):
        return NotImplemented
    n = ctx.size
    outs = ctx.inner(_time_major(x_gates, bats[0], n), _merge(_full(h0, bats[1], n), 0, 1),
                     _merge(_full(c0, bats[2], n), 0, 1), w, **params)
    return tuple(_swap01(_split(o, 1, n)) for o in outs)


def _lstm_layer_backward(ctx, vals, bats, params):
    """Back through time for every sample at once; the recurrent weight's gradient is
    then summed per sample (one product per sample over its steps)."""
    g_out, g_cs, acts, cs, out, h0, c0, w = vals
    if bats[7] or not _plain(vals) or _lndim(acts, bats[2]) != 3:
        return NotImplemented
    n = ctx.size
    folded = [None if v is None else _time_major(v, b, n)
              for v, b in zip(vals[:5], bats[:5])]
    h0s, c0s = _merge(_full(h0, bats[5], n), 0, 1), _merge(_full(c0, bats[6], n), 0, 1)
    g_gates, dh, dc, _ = ctx.inner(*folded, h0s, c0s, w, **params)
    xp = ctx.xp
    outs = _swap01(_split(folded[4], 1, n))  # (B, L, N, H)
    h_prev = xp.concatenate([_batch_major(h0s, n)[:, None], outs[:, :-1]], axis=1)
    gg = _swap01(_split(g_gates, 1, n))  # (B, L, N, 4H)
    g_w = xp.einsum("blnh,blng->bhg", h_prev, gg).astype(gg.dtype, copy=False)
    return gg, _batch_major(dh, n), _batch_major(dc, n), g_w


# ---------------------------------------------------------------------------------------
# the table
# ---------------------------------------------------------------------------------------

_ELEMENTWISE_GROUPS = ("unary_float", "unary_same", "unary_bool", "binary", "binary_float",
                       "compare", "special_unary", "special_binary")
_ELEMENTWISE_OPS = ("real", "imag", "conj", "angle", "complex", "view_as_real",
                    "view_as_complex", "round", "clamp", "where", "lerp", "addcmul", "addcdiv",
                    "cast", "masked_fill", "nan_to_num", "polygamma", "leaky_relu", "elu",
                    "selu", "celu", "gelu", "silu", "mish", "softplus", "hardtanh",
                    "hardswish", "hardsigmoid", "logsigmoid", "softsign", "tanhshrink",
                    "gelu_backward", "silu_backward", "activation_backward", "contiguous",
                    "clone", "detach_view")
_DIM_OPS = ("sum", "mean", "prod", "amax", "amin", "var", "std", "norm", "logsumexp", "all",
            "any", "nansum", "count_nonzero", "max_dim", "min_dim", "median_dim", "mode_dim",
            "argmax", "argmin", "cumsum", "cumprod", "cummax", "cummin", "logcumsumexp",
            "softmax", "log_softmax", "sort", "linalg_vector_norm")
_TRAILING_OPS = ("tril", "triu")


def _build() -> dict:
    """op -> (kind, rule): the generic rules for the ops whose record's group says how
    they treat dims, then the hand-written ones, each op name resolved to its record
    (``library.op_table``: a name that is no op is an error naming it)."""
    table = {}
    records = library.op_records()
    for name, record in records.items():
        if record.group in _ELEMENTWISE_GROUPS:
            table[name] = ("elementwise", _elementwise)
    for name in _ELEMENTWISE_OPS:
        table[name] = ("elementwise", _elementwise)
    for name in _DIM_OPS:
        table[name] = ("dim", _reduction)
    for name in _VIEW_OPS:
        table[name] = ("view", _view_rule)
    for name in _TRAILING_OPS:
        table[name] = ("elementwise", _identity_like)
    for name, record in records.items():
        if record.random:  # its kernel takes the generator (``rng``)
            table[name] = ("random", _random)
    table.update({
        "as_strided": ("view", _as_strided),
        "softmax_backward": ("dim", _positional_dim),
        "log_softmax_backward": ("dim", _positional_dim),
        "cat": ("movement", _concat), "stack": ("movement", _concat),
        "index_put": ("movement", _index_put),
        "gather": ("movement", _indexed), "scatter": ("movement", _indexed),
        "scatter_add": ("movement", _indexed), "take_along_dim": ("movement", _indexed),
        "index_select": ("movement", _indexed), "index_add": ("movement", _indexed),
        "index_copy": ("movement", _indexed),
        "matmul": ("linear algebra", _matmul), "mm": ("linear algebra", _matmul),
        "bmm": ("linear algebra", _matmul), "dot": ("linear algebra", _dot),
        "outer": ("linear algebra", _dot), "addmm": ("linear algebra", _addmm),
        "einsum": ("linear algebra", _einsum), "linear": ("nn", _linear),
        "conv": ("nn", _conv), "conv_transpose": ("nn", _conv),
        "conv_weight": ("nn", _conv_weight),
        "max_pool": ("nn", _pool), "avg_pool": ("nn", _pool),
        "max_pool_backward": ("nn", _pool_backward),
        "avg_pool_backward": ("nn", _pool_backward),
        "adaptive_max_pool": ("nn", _adaptive),
        "cross_entropy": ("nn", _class_loss), "nll_loss": ("nn", _class_loss),
        "cross_entropy_backward": ("nn", _cross_entropy_backward),
        "embedding": ("nn", _embedding), "embedding_backward": ("nn", _embedding_backward),
        "layer_norm": ("nn", _layer_norm), "layer_norm_backward": ("nn", _layer_norm_backward),
        "rms_norm": ("nn", _rms_norm), "rms_norm_backward": ("nn", _rms_norm_backward),
        "batch_norm": ("nn", _batch_norm), "batch_norm_backward": ("nn", _batch_norm_backward),
        "lstm_layer": ("nn", _lstm_layer), "lstm_layer_backward": ("nn", _lstm_layer_backward),
        "flash_attention": ("nn", _flash_attention),
        "flash_attention_backward": ("nn", _flash_attention),
    })
    # the op tables dispatch reads beside the rules, resolved with them: a stale name in
    # any of the three is an error at the first vmap, not an op that silently loses its rule
    library.op_table("torcia.nn._vmap._KEYED", _KEYED)
    library.op_table("torcia.nn._vmap._INT_DIM", dict.fromkeys(_INT_DIM))
    return library.op_table("torcia.nn._vmap.RULES", table)


class _Rules(dict):
    """The rule table, built from the op records on first use."""

    def _fill(self):
        if not dict.__len__(self):
            self.update(_build())

    def get(self, key, default=None):
        self._fill()
        return dict.get(self, key, default)

    def __getitem__(self, key):
        self._fill()
        return dict.__getitem__(self, key)

    def __iter__(self):
        self._fill()
        return dict.__iter__(self)

    def __len__(self):
        self._fill()
        return dict.__len__(self)

    def items(self):
        self._fill()
        return dict.items(self)


#: op name -> (kind, rule) for every op with a native batching rule
RULES = _Rules()


def rule_kinds() -> dict[str, list[str]]:
    """Kind of rule -> the ops that have one, sorted: the coverage list of the docs."""
    kinds: dict[str, list[str]] = {}
    for name, (kind, _) in RULES.items():
        kinds.setdefault(kind, []).append(name)
    return {k: sorted(v) for k, v in sorted(kinds.items())}


_KIND_TITLE = {"elementwise": "Elementwise", "dim": "Along a dim", "view": "Views and indexing",
               "movement": "Concatenation and indexed ops", "linear algebra": "Products",
               "nn": "Neural-network ops", "random": "Random sampling"}

_KIND_TEXT = {
    "elementwise": "Elementwise and broadcasting ops (derived from the op records' groups): "
                   "batched arguments get size-1 dims after the mapped dim, so broadcasting "
                   "keeps the samples apart.",
    "dim": "Ops with a ``dim`` (reductions, scans, softmax): the dim moves past the mapped "
           "dim; ``dim=None`` reduces each sample.",
    "view": "Views, reshapes and indexing: the shape, dims or index key get the mapped dim "
            "in front (a batched index array picks per sample).",
    "movement": "Concatenation and indexed reads and writes: unbatched arguments broadcast "
                "over the samples, ``dim`` shifted.",
    "linear algebra": "Products: the samples ride as a batch dim of one matmul (vectors "
                      "become matrices), einsum gets a fresh letter.",
    "nn": "Hand-written: convolutions fold the samples into their batch, or into their "
          "groups for per-sample weights and weight gradients; pooling and LSTM layers "
          "fold them into the batch; losses reduce per sample; embeddings offset "
          "per-sample tables; batch and layer norm keep per-sample statistics.",
    "random": "Random ops, run before the mapped dims are looked at (a draw has no batched "
              "argument): ``randomness=\"different\"`` draws every sample's numbers in one "
              "call, ``\"same\"`` draws once and broadcasts, ``\"error\"`` raises.",
}


def coverage_rst() -> str:
    """The docs page listing the ops with native batching rules (``docs/vmap_coverage.rst``,
    written by ``tools/gen_vmap_coverage.py``)."""
    # torcia's own ops only: the page must not depend on which plugins (with ops of their
    # own, such as the example plugin's logcosh) happen to be installed
    plugin_defined = set(library.plugin_ops.build())
    records = [n for n in library.op_records() if n not in plugin_defined]
    kinds = {kind: [n for n in names if n not in plugin_defined]
             for kind, names in rule_kinds().items()}
    total = sum(len(v) for v in kinds.values())
    missing = sorted(n for n in records if n not in RULES)
    lines = [
        "vmap batching rules",
        "===================",
        "",
        f"``torcia.func.vmap`` runs {total} of torcia's {len(records)} ops once for the whole "
        "batch, through a batching rule; the other ops run once per sample (still correct, "
        "with a one-time performance warning naming the op, as PyTorch's). Generated by "
        "``python tools/gen_vmap_coverage.py`` from the rule table; a test checks it is "
        "current.",
        "",
    ]
    for kind, names in kinds.items():
        title = f"{_KIND_TITLE[kind]} ({len(names)})"
        lines += [title, "-" * len(title), "", _KIND_TEXT[kind], "",
                  ", ".join(f"``{n}``" for n in names), ""]
    title = f"Per-sample loop ({len(missing)})"
    lines += [title, "-" * len(title), "",
              "Ops without a rule yet (data-dependent shapes and the random ops that "
              "draw outside dispatch among them):", "", ", ".join(f"``{n}``" for n in missing), ""]
    return "\n".join(lines)
