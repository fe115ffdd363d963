"""What the op families of :mod:`torcia._ops` share: the common shape rules, the kernels
that are one function of the array module, the dtypes an op refuses, the
half-precision wrapper of decompositions, and what the public functions written here
need: dims made non-negative, named-tuple results, autocast, the cast to float, the
check that an argument is a tensor, the call of an op along one dim, torcia-nn's
functional module and the Examples section made from a declaration's examples. Imports
nothing of torcia but dtypes and the plugin registry, so that :mod:`torcia.ops` (below
the Tensor) can read the declarations."""

from __future__ import annotations

import fractions
import functools
import math
import os

import numpy as np

from torcia import _dtype as D
from torcia import _opdef, plugins

#: the dtypes whose decompositions compute in float32 and round once, as the reference
#: kernels (and PyTorch's opmath) do: rounding after each step would drift by several ulps
HALF = (D.float16, D.bfloat16)

#: The threads CPU kernels use, as this list's one element (``torcia.set_num_threads``
#: sets it): reference kernels that round as PyTorch's thread shares do read it here.
THREADS = [os.cpu_count() or 1]


def broadcast_error(a_shape, b_shape):
    """PyTorch's error for two shapes that do not broadcast (None where they do): the
    first dim from the right whose sizes differ with neither 1, numbered from the left of
    the broadcast shape.

    Examples
    --------
    >>> from torcia._ops._common import broadcast_error
    >>> print(broadcast_error((2, 3), (3, 3)))
    The size of tensor a (2) must match the size of tensor b (3) at non-singleton dimension 0
    """
    n = max(len(a_shape), len(b_shape))
    for i in range(1, n + 1):
        x = a_shape[-i] if i <= len(a_shape) else 1
        y = b_shape[-i] if i <= len(b_shape) else 1
        if x != y and x != 1 and y != 1:
            return RuntimeError(f"The size of tensor a ({x}) must match the size of tensor b "
                                f"({y}) at non-singleton dimension {n - i}")
    return None


#: NumPy kinds of :attr:`torcia._opdef.Declaration.refuses`: complex and bool inputs
COMPLEX, BOOL = "c", "b"


def no_kernel(kernel: str) -> tuple:
    """PyTorch's refusal of a dtype its kernel named ``kernel`` has no loop for: an entry
    of :attr:`torcia._opdef.Declaration.refuses`."""
    return NotImplementedError, f'"{kernel}" not implemented for \'{{}}\''


def refusal(refuses: dict, dtype) -> Exception | None:
    """PyTorch's error for NumPy ``dtype`` in ``refuses`` (kind -> (error class, message
    with ``{}`` for PyTorch's name of the dtype)); None where the dtype is not refused."""
    found = refuses.get(np.dtype(dtype).kind)
    if found is None:
        return None
    error, message = found
    return error(message.format(D.torch_type_name(D.FROM_NUMPY[np.dtype(dtype)])))


def refuse(refuses: dict, a) -> None:
    """Raise, in a decomposition, the reference kernel's error where ``refuses`` refuses
    tensor ``a``'s dtype."""
    error = refusal(refuses, a.dtype.to_numpy())
    if error is not None:
        raise error


class ArrayFunction:
    """A reference kernel that is one function of the array module: read from a backend,
    ``backend.<op>`` is ``backend.xp.<attr>`` itself (``np.exp``, or CuPy's for
    torcia-cuda's subclass), so the kernel table holds the ufunc and a call costs no
    Python frame of torcia's."""

    __slots__ = ("attr",)

    def __init__(self, attr: str):
        self.attr = attr

    def __get__(self, backend, owner=None):
        return self if backend is None else getattr(backend.xp, self.attr)

    def __repr__(self):
        return f"ArrayFunction({self.attr!r})"


def first_shape(x, *rest, **params):
    """The first input's shape and dtype: ``x`` with the same shape as ``g`` (backward
    of activations, ``masked_fill``, ``softmax``...)."""
    return x.shape, x.dtype


def broadcast(*xs, **params):
    """Several inputs broadcast together (Python numbers count as 0-dim), in the first
    tensor's dtype (the dispatcher has promoted them; float32 where none is a tensor)."""
    dtypes = [x.dtype for x in xs if hasattr(x, "dtype")]
    return (np.broadcast_shapes(*(getattr(x, "shape", ()) for x in xs)),
            dtypes[0] if dtypes else np.dtype(np.float32))


def bool_like(x, *rest, **params):
    """The broadcast of the inputs (Python numbers count as 0-dim), as bool: the tests
    (``isnan``, ``eq``...)."""
    return np.broadcast_shapes(*(getattr(v, "shape", ()) for v in (x, *rest))), np.dtype(bool)


def real_like(x, **params):
    """The input's shape, in its real dtype: ``abs``, ``real``, ``imag``."""
    return x.shape, real_dtype(x.dtype)


def real_dtype(dtype) -> np.dtype:
    """The real dtype of ``dtype`` (float32 for complex64), ``dtype`` itself if real."""
    return np.empty(0, dtype).real.dtype


def reduced(shape, dim, keepdim) -> tuple:
    """``shape`` reduced over ``dim`` (None: all dims; an int or a sequence)."""
    if dim is None:
        return (1,) * len(shape) if keepdim else ()
    dims = {d % len(shape) for d in ((dim,) if isinstance(dim, int) else dim)} \
        if shape else set()
    return tuple(1 if i in dims else n for i, n in enumerate(shape) if keepdim or i not in dims)


def values_and_indices(x, dim=-1, keepdim=False, **params):
    """The values reduced along ``dim`` and their int64 indices: ``max_dim``,
    ``median_dim``, ``kthvalue``..."""
    shape = reduced(x.shape, dim, keepdim)
    return (shape, x.dtype), (shape, np.dtype(np.int64))


def scan_with_indices(x, dim=0, **params):
    """The input's shape, as values and int64 indices: ``cummax``, ``sort``..."""
    return (x.shape, x.dtype), (x.shape, np.dtype(np.int64))


def dense(shape, strides, itemsize=1) -> bool:
    """Whether elements of ``shape`` at ``strides`` fill a block of memory once each, in
    some order of dims (PyTorch's non-overlapping and dense); strides in units of
    ``itemsize``."""
    step = itemsize
    for stride, n in sorted((s, n) for s, n in zip(strides, shape) if n != 1):
        if stride != step:
            return False
        step *= n
    return True


def with_size(shape, dim, size) -> tuple:
    """``shape`` with ``size`` at ``dim``."""
    shape = list(shape)
    shape[dim] = size
    return tuple(shape)


def grad_like(g, x, *rest, **params):
    """The broadcast of a gradient and an input, in their common dtype (the fused
    ``*_backward`` ops of elementwise functions)."""
    return np.broadcast_shapes(g.shape, x.shape), np.result_type(g.dtype, x.dtype)


def where(condition, a, b):
    """``a`` where ``condition``, else ``b`` (tensors), as ``torcia.where``, for the
    decompositions (this module is below the function)."""
    return a.where(condition, b)


def widened(t):
    """``t`` in float32 where it is a half-precision tensor (the kernels' working dtype),
    anything else as it is."""
    return t.float() if getattr(t, "dtype", None) in HALF else t


def opmath(fn):
    """``fn`` computed in float32 for half-precision tensors, its result rounded back.
    Tensors are told by their torcia dtype (this module is below the Tensor class)."""
    def run(a, *args, **kw):
        if getattr(a, "dtype", None) in HALF:
            return fn(a.float(), *map(widened, args), **kw).to(a.dtype)
        return fn(a, *args, **kw)

    run.__name__ = fn.__name__
    run.__wrapped__ = fn  # its signature and source (the op reference shows the source)
    return run


def low_precision(a) -> bool:
    """float16 or bfloat16 (an array, or a NumPy dtype): kernels that PyTorch runs in
    float32 on the CPU."""
    dtype = getattr(a, "dtype", a)
    return dtype.itemsize == 2 and D.np_floating(dtype)


def fused_multiply_add(x, y, z):
    """``x * y + z`` rounded once, as an FMA instruction computes it (PyTorch's CPU kernels
    fuse lerp, addcmul and add's alpha so): NumPy arrays of one float dtype, broadcast
    together; float16 and bfloat16 as PyTorch's opmath, fused in float32 and then rounded.

    Float32 goes through float64, where its product is exact; the float64 sum rounded
    again to float32 is the single correct rounding but where it fell on a float32
    midpoint: there the sum is rounded to odd first. Float64
    splits its product exactly (Dekker's product and Knuth's sum, the last step rounded
    to odd: Boldo and Melquiond's emulation); elements outside the range where that is
    exact (huge or tiny products, near an overflow) are computed from exact fractions.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.float64(1 + 2 ** -30)
    >>> bool(x * x - 1 == 2 ** -29)  # the product rounded first: its 2 ** -60 lost
    True
    >>> bool(fused_multiply_add(x, x, np.float64(-1)) == 2 ** -29 + 2 ** -60)
    True
    """
    dt = np.result_type(x, y, z)
    if not D.np_floating(dt):
        return x * y + z
    work = np.dtype(np.float32) if dt.itemsize < 4 else dt
    x, y, z = (np.asarray(v, work) for v in (x, y, z))  # a Python number rounded to it
    out = np.empty(np.broadcast_shapes(x.shape, y.shape, z.shape), work)
    # in chunks whose temporaries stay in the cache and below the size that malloc maps
    # fresh pages for (whole arrays of them were 20x slower, most of it first touches)
    if work.itemsize == 4:
        chunk = min(out.size, _CHUNK)
        scratch = (np.empty(chunk), np.empty(chunk), np.empty(chunk, np.int64))
        kernel = functools.partial(_fma32, scratch=scratch)
    else:
        chunk, kernel = _CHUNK // 8, _fma64
    with np.nditer([x, y, z, out], flags=["external_loop", "buffered", "zerosize_ok"],
                   op_flags=[["readonly"]] * 3 + [["writeonly"]], buffersize=chunk) as it:
        for a, b, c, o in it:
            o[...] = kernel(a, b, c)
    return out if work is dt else out.astype(dt)


_CHUNK = 1 << 16


def _fma32(x, y, z, scratch):
    """``fused_multiply_add`` of 1-d float32 arrays, in float64 (``scratch``: two float64
    arrays and an int64 one, at least as long)."""
    n = x.shape[0]
    product, total, bits = (a[:n] for a in scratch)
    with np.errstate(all="ignore"):  # inf * 0 and overflows give NaN and inf silently
        np.multiply(x, y, out=product, dtype=np.float64)
        np.add(product, z, out=total)
        # the float64 sums whose rounding to float32 could differ from the exact sum's
        # fell on a float32 midpoint: the bits float32 drops (29, or more below its
        # normal range) are 1 and then zeros, so the low 28 are zeros (as they are for
        # every sum float32 holds exactly, which these few steps leave as they are)
        np.bitwise_and(total.view(np.int64), _LOW_BITS, out=bits)
        suspect = np.flatnonzero(bits == 0)
        if suspect.size:
            total[suspect] = _odd_sum(product[suspect], z[suspect].astype(np.float64))
    return total


_LOW_BITS = (1 << 28) - 1


def _two_sum(a, b):
    """``a + b`` rounded, and its exact error (Knuth's TwoSum)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _odd_sum(a, b):
    """``a + b`` rounded to odd: where inexact, the neighbour whose last bit is odd."""
    with np.errstate(invalid="ignore", over="ignore"):
        s, e = _two_sum(a, b)
        even = ((s.view(np.int64) & 1) == 0) & (e != 0) & np.isfinite(e)
    if even.any():
        s = np.where(even, np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s)
    return s


_SPLIT = 2.0 ** 27 + 1


def _fma64(x, y, z):
    """``fused_multiply_add`` of 1-d float64 arrays."""
    with np.errstate(all="ignore"):
        p = x * y
        ax, ay, ap = np.abs(x), np.abs(y), np.abs(p)
        # Dekker's split is exact below 2**995, the product's error term above 2**-900
        exact = (ax < 2.0 ** 995) & (ay < 2.0 ** 995) & (np.abs(z) < 2.0 ** 1000) & (
            ap > 2.0 ** -900) & (ap < 2.0 ** 1000)
        c = _SPLIT * x
        xh = c - (c - x)
        c = _SPLIT * y
        yh = c - (c - y)
        xl, yl = x - xh, y - yh
        err = ((xh * yh - p) + xh * yl + xl * yh) + xl * yl
        high, low = _two_sum(z, p)
        out = high + _odd_sum(low, err)
        # a zero or non-finite factor: the product is exact, so is one rounding of the sum
        plain = ~exact & ((x == 0) | (y == 0) | ~np.isfinite(x) | ~np.isfinite(y))
        out = np.where(plain, p + z, out)
        # a finite product beside an infinite or NaN z: z
        out = np.where(~exact & ~plain & ~np.isfinite(z), z, out)
    rest = np.flatnonzero(~exact & ~plain & np.isfinite(z))
    if rest.size:
        out = np.array(out)
        for i in rest:
            out.flat[i] = _exact_fma(float(x.flat[i]), float(y.flat[i]), float(z.flat[i]))
    return out


def _exact_fma(x: float, y: float, z: float) -> float:
    exact = fractions.Fraction(x) * fractions.Fraction(y) + fractions.Fraction(z)
    if exact == 0:  # the product (not zero here) cancelled z: +0, as IEEE's sums
        return 0.0
    try:
        return float(exact)  # rounded correctly (Python's int division)
    except OverflowError:
        return math.inf if exact > 0 else -math.inf


def on_host(xp, a):
    """The array ``a`` of the array module ``xp`` as a NumPy array (a CuPy array copied to
    the host), for the kernels whose routine only NumPy, SciPy or LAPACK has."""
    return np.asarray(a) if xp is np else xp.asnumpy(a)


def in_float32(*arrays):
    """``arrays`` in float32 (None and bool masks as they are)."""
    return tuple(a if a is None or a.dtype == bool else a.astype(np.float32) for a in arrays)


def opmath_kernel(kernel):
    """A reference kernel that computes float16 and bfloat16 arrays in float32 and rounds
    its result once, as PyTorch's CPU kernels do (their "opmath" type; :func:`opmath` does
    the same for a decomposition's tensors): NumPy's half-float ufuncs round after each
    step, which put 25-85% of sigmoid's, GELU's, softmax's... results a step off. Arrays
    among the positional arguments are converted where the first is half-float; the others
    (dims, names) pass as they are.

    Examples
    --------
    >>> import numpy as np
    >>> f = opmath_kernel(lambda self, a: 1 / (1 + np.exp(-a)))
    >>> f(None, np.array([0.3], np.float16)).dtype
    dtype('float16')
    """
    @functools.wraps(kernel)
    def run(self, *args, **params):
        if not (args and hasattr(args[0], "dtype") and low_precision(args[0])):
            return kernel(self, *args, **params)
        dtype = args[0].dtype
        args = tuple(a.astype(np.float32) if hasattr(a, "dtype") and low_precision(a) else a
                     for a in args)
        out = kernel(self, *args, **params)
        if isinstance(out, tuple):  # a backward's gradients, each rounded once
            return tuple(o.astype(dtype) for o in out)
        return out.astype(dtype)

    return run


def op(name, *inputs, **params):
    """The op ``name`` on ``inputs`` (tensors), dispatched as a Tensor method would be: for
    a decomposition here that calls an op without a Tensor method (``i0e``...), this
    package being below the Tensor class (see :data:`torcia._opdef.CALL`)."""
    return _opdef.CALL(name, inputs, params)


def float_like(x, *rest, **params):
    """One input, a float result of its shape (integers give float64; the public
    functions have promoted them to the default dtype)."""
    return x.shape, floating_dtype(x.dtype)


def float_broadcast(*xs, **params):
    """Inputs broadcast together (Python numbers count as 0-dim), a float result."""
    return (np.broadcast_shapes(*(getattr(x, "shape", ()) for x in xs)),
            floating_dtype(np.result_type(*(getattr(x, "dtype", x) for x in xs if x is not None))))


def floating_dtype(dtype) -> np.dtype:
    """NumPy's result dtype of a float function of ``dtype``: integers give float64
    (bfloat16, of NumPy's kind "V", stays)."""
    return dtype if dtype.kind == "c" or D.np_floating(dtype) else np.dtype(np.float64)


def readable_value(t):
    """A one-element tensor's value as a Python number, or None where it holds none to read:
    a meta tensor, or one batched by vmap (whose samples PyTorch's meta and batching
    kernels take as tensors, without reading them)."""
    try:
        return t.item()
    except RuntimeError:
        return None


def wrap_dim(dim, ndim: int) -> int:
    """A dim index made non-negative, or PyTorch's IndexError when it is out of range.

    Examples
    --------
    >>> import torcia.library
    >>> torcia.library.wrap_dim(-1, 3)
    2
    """
    n = max(ndim, 1)
    if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool):
        raise TypeError(f"dim must be an int, got {type(dim).__name__}")
    if dim < -n or dim >= n:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})"
        )
    return dim % n if ndim else 0


def dim_tuple(dim, ndim: int):
    """``dim`` (None, int or sequence) as None or a sorted tuple of non-negative ints."""
    if dim is None:
        return None
    if dim.__class__ is int and -ndim <= dim < ndim:
        return (dim % ndim,)  # one dim in range (most calls); the rest is checked below
    if isinstance(dim, (int, np.integer)):
        dim = (dim,)
    out = tuple(wrap_dim(d, ndim) for d in dim)
    if len(set(out)) != len(out):
        raise RuntimeError(f"dim {list(dim)} appears multiple times in the list of dims")
    if not out or not ndim:
        # a 0-dim tensor's dim 0 (or -1) is all of it: the kernels reduce it as dim=None
        return None
    return tuple(sorted(out))


class ReturnType(tuple):
    """Base of the named results of multi-output ops (``values``/``indices``...)."""

    __slots__ = ()
    _fields: tuple = ()
    _name = ""

    def __new__(cls, *items):
        return tuple.__new__(cls, items)

    def __repr__(self):
        body = ",\n".join(f"{f}={v!r}" for f, v in zip(self._fields, self))
        return f"torcia.return_types.{self._name}(\n{body})"


def return_type(name: str, fields: tuple) -> type:
    """A tuple subclass named like ``torch.return_types.<name>`` with attributes ``fields``.

    Examples
    --------
    >>> import torcia
    >>> r = torcia.max(torcia.tensor([[1, 5], [7, 2]]), dim=1)
    >>> r.values, r.indices
    (tensor([5, 7]), tensor([1, 0]))
    """
    attrs = {"_fields": fields, "_name": name, "__slots__": ()}
    for i, f in enumerate(fields):
        attrs[f] = property(lambda self, i=i: self[i])
    cls = type(name, (ReturnType,), attrs)
    RETURN_TYPES.append(cls)
    return cls


#: every class ``return_type`` made, for torcia.utils.pytree (which makes them nodes)
RETURN_TYPES: list[type] = []


def autocast_as(name, where_listed=False):
    """:func:`torcia._autocast.autocast_as` for a public function written in this package,
    which sits below that module (``where_listed``: its ``autocast_where_listed``): the
    function it makes is made at the first call, from :data:`torcia._opdef.AUTOCAST_AS`
    (:data:`torcia._opdef.AUTOCAST_WHERE_LISTED`)."""
    def decorate(fn):
        _opdef.AUTOCAST_NAMES.add(name)  # known to autocast's lists before the first call
        made = []

        @functools.wraps(fn)
        def run(*args, **kwargs):
            if not made:
                make = _opdef.AUTOCAST_WHERE_LISTED if where_listed else _opdef.AUTOCAST_AS
                made.append(make(name)(fn))
            return made[0](*args, **kwargs)

        return run

    return decorate


def check_tensor(x, name: str, fn: str):
    """``x``, or PyTorch's error where the argument ``name`` of ``fn`` is no tensor."""
    if not isinstance(x, _opdef.PUBLIC.Tensor):
        raise TypeError(f"{fn}(): argument '{name}' (position 1) must be Tensor, not "
                        f"{type(x).__name__}")
    return x


def functional():
    """:mod:`torcia.nn.functional`, lent by torcia-nn: the public functions here that are
    PyTorch's names of its functional forms (``torch.kl_div``...) run those."""
    return plugins.lent("torcia.nn.functional", "torcia-nn")


def to_float(input):
    """``input`` with an integer or bool dtype cast to the default float dtype, as ops that
    compute in floating point take it; float and complex inputs are returned as they are."""
    if input.dtype.category >= 2:
        return input
    return _opdef.CALL("cast", (input,), {"dtype": D.get_default_dtype().to_numpy()})


def operand_as(x, dt):
    """A tensor or Python-number operand of an op computing in ``dt``, converted to it: a
    number as PyTorch's scalars, so -1 bounds a uint8 tensor at 255."""
    if isinstance(x, _opdef.PUBLIC.Tensor):
        return x if x.dtype is dt else _opdef.CALL("cast", (x,), {"dtype": dt.to_numpy()})
    if x is None or dt.category == 3 or x.__class__ is complex:
        return x
    return np.array(x).astype(dt.to_numpy())[()]


def promoted(tensors, op):
    """``tensors`` (a sequence of Tensors, refused otherwise in ``op``'s words) cast to
    their promoted dtype where they do not share one."""
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError(f"{op}(): expected a non-empty list of Tensors")
    first = None
    same = True
    tensor = _opdef.PUBLIC.Tensor
    for t in tensors:
        if not isinstance(t, tensor):
            raise TypeError(f"{op}(): expected a sequence of Tensors, got {type(t).__name__}")
        if first is None:
            first = t._data.dtype
        elif t._data.dtype is not first:
            same = False
    if same:
        return tensors
    dt = tensors[0].dtype
    for t in tensors[1:]:
        dt = D.promote_types(dt, t.dtype)
    return [t if t.dtype is dt else _opdef.CALL("cast", (t,), {"dtype": dt.to_numpy()})
            for t in tensors]


def along_dim(name, inputs, params, view_of=None):
    """The op ``name`` on ``inputs`` along one dim: a 0-dim first input (and 0-dim tensors
    beside it, an index) runs as a 1-element 1-D tensor, and the results come back 0-dim,
    as PyTorch treats a 0-dim tensor's dim 0."""
    if inputs[0]._data.ndim:
        return _opdef.CALL(name, inputs, params, view_of)
    tensor = _opdef.PUBLIC.Tensor
    ones = tuple(x.reshape((1,)) if isinstance(x, tensor) and not x._data.ndim else x
                 for x in inputs)
    out = _opdef.CALL(name, ones, params)
    if isinstance(out, tuple):
        return tuple(o.reshape(()) if o._data.size == 1 else o for o in out)
    return out.reshape(()) if out._data.size == 1 else out


def size_at(input, d) -> int:
    """The size of dim ``d`` (1 for a 0-dim tensor's dim 0)."""
    return input.shape[d] if input.ndim else 1


def examples_section(function: str, examples: tuple, imports: tuple = ("torcia",)) -> str:
    """The Examples section of a public function's docstring, made from a declaration's
    ``examples`` (:attr:`torcia._opdef.Declaration.examples`): ``imports`` (``import``
    statements without the keyword), then calls of ``function``, its name as a user writes
    it (``torcia.special.i0``); "" without examples."""
    if not examples:
        return ""
    lines = [f">>> import {module}\n" for module in imports]
    for *args, result in examples:
        call = ", ".join(f"torcia.tensor({a})" if a.startswith("[") else a for a in args)
        lines.append(f">>> {function}({call})\n{result}\n")
    return "\n\nExamples\n--------\n" + "".join(lines)


def random_floats(rng, *shape):
    """A float32 array of ``shape``, uniform in [-1, 1), drawn from ``rng``: an op's sample
    input (:attr:`torcia._opdef.OpDef.samples`)."""
    return rng.uniform(-1, 1, shape).astype(np.float32)


#: the NumPy dtypes the creation and random ops' samples ask for
FLOAT32, INT64 = np.dtype(np.float32), np.dtype(np.int64)


def keyword_samples(*calls):
    """The ``samples`` of an op without tensor inputs (a creation op): each call's
    parameters (:attr:`torcia._opdef.OpDef.samples`)."""
    return lambda rng: [((), dict(params)) for params in calls]
