"""The reference backend: a kernel for every op in :mod:`torcia.ops`, written against an
array module ``xp``.

These kernels define what each op means. They are plain and obvious rather than fast;
faster backends (torcia-cpu) override some of them and are tested against them. The same
class serves CuPy by setting ``xp`` (torcia-cuda subclasses it).
"""

from __future__ import annotations

import math

import numpy as np

from torcia import ops
from torcia._dtype import FROM_NUMPY
from torcia._kernels_extra import ExtraKernels
from torcia._kernels_fft import FFTKernels
from torcia._kernels_linalg import LinalgKernels, dot_operands, outer_operands
from torcia._kernels_nn import NNKernels
from torcia._kernels_sparse import SparseKernels
from torcia._ops import DECLARED
from torcia._ops._common import BOOL as _BOOL
from torcia._ops._common import COMPLEX as _COMPLEX
from torcia._ops._common import refusal as _refusal
from torcia._tensor import _torch_name
from torcia.backend import Backend
from torcia.plugins import hookimpl

# samples drawn per block for a float32/float16 tensor (8 MiB of float64 at a time)
_DRAW_BLOCK = 1 << 20


def _half(dt) -> bool:
    """Whether ``dt`` is float16 or bfloat16, which compute in float32 (PyTorch's
    accumulate and opmath type); by name, not to load ml_dtypes at import."""
    return dt.itemsize == 2 and (dt.kind == "f" or dt.name == "bfloat16")


# Ops PyTorch has no kernel for on some dtypes, by NumPy kind ("c" complex, "b" bool):
# the error it raises, its message formatted with PyTorch's name of the dtype. NumPy would
# order complex numbers lexicographically and do bool arithmetic in its own way. The
# declared ops' come from their declarations.
_REFUSED = {
    **{name: op.refuses for name, op in DECLARED.items() if op.refuses},
    "kthvalue": {_COMPLEX: (NotImplementedError, '"kthvalue_cpu" not implemented for \'{}\'')},
    "sort": {_COMPLEX: (RuntimeError, "Sort does not support complex dtypes on CPU")},
    "topk": {_COMPLEX: (RuntimeError, "topk does not support complex dtypes on CPU")},
    "clamp": {_COMPLEX: (NotImplementedError, "clamp is not supported for complex types")},
    "round": {_BOOL: (NotImplementedError, '"round_vml_cpu" not implemented for \'{}\'')},
    "dot": {_BOOL: (NotImplementedError, '"dot" not implemented for \'{}\'')},
    "searchsorted": {k: (NotImplementedError, '"searchsorted_out_cpu" not implemented for '
                                              '\'{}\'') for k in (_BOOL, _COMPLEX)},
    **{op: {_BOOL: (NotImplementedError, '"addmm_impl_cpu_" not implemented for \'{}\'')}
       for op in ("matmul", "mm", "bmm", "addmm", "linear")},
}


# inputs PyTorch answers before it looks for the dtype's kernel (a scan of an empty tensor),
# from the declarations
_ANSWERED_EARLY = {name: op.answers_early for name, op in DECLARED.items() if op.answers_early}


def refusal(op: str, dtype) -> Exception | None:
    """PyTorch's error for ``op`` on NumPy ``dtype`` where it has no kernel for it (None
    where it has one): what the reference kernel raises, for a decomposition to raise."""
    return _refusal(_REFUSED.get(op, {}), dtype)


def _refusing(name, kernel, refused):
    """``kernel`` refusing operands of the NumPy kinds in ``refused`` with PyTorch's error.
    The array-module ufuncs get a wrapper of their exact arity, so the check costs a few
    attribute reads a call."""
    early = _ANSWERED_EARLY.get(name)

    def check(x):
        if x.__class__ is not complex and x.dtype.kind in refused and not (
                early is not None and early(x)):
            error, message = refused[x.dtype.kind]
            raise error(message.format(_torch_name(FROM_NUMPY[x.dtype])))

    nin = getattr(kernel, "nin", None)
    if nin == 1:
        def run(a):
            check(a)
            return kernel(a)
    elif nin == 2:
        def run(a, b):
            check(a)
            if hasattr(b, "dtype"):
                check(b)
            return kernel(a, b)
    else:
        def run(a, *rest, **params):
            check(a)
            return kernel(a, *rest, **params)

    run.__name__ = name
    run.__wrapped__ = kernel  # the op's schema is read from the kernel's signature
    run.__doc__ = kernel.__doc__
    return run


#: the kernels of the declared ops (torcia._ops), each a method named as its op
DeclaredKernels = type("DeclaredKernels", (), {
    "__doc__": "The reference kernels of the ops declared in :mod:`torcia._ops`.",
    "__module__": __name__, **{name: op.kernel for name, op in DECLARED.items()}})


class Reference(DeclaredKernels, NNKernels, ExtraKernels, LinalgKernels,
                FFTKernels, SparseKernels):
    """Kernels on ``xp`` arrays. Methods named like ops are kernels; ``table()`` lists them.

    The kernels of the ops declared in :mod:`torcia._ops` (the elementwise ops, the
    reductions and scans, the activations, the special functions) come from their
    declarations through :class:`DeclaredKernels`. Sorting, gathering extras and linear
    algebra live in the :class:`~torcia._kernels_extra.ExtraKernels` mixin, the
    factorizations and solvers ``xp.linalg`` lacks in
    :class:`~torcia._kernels_linalg.LinalgKernels`, the Fourier transforms in
    :class:`~torcia._kernels_fft.FFTKernels`.

    Examples
    --------
    >>> import torcia
    >>> from torcia import library
    >>> kernels = library.ReferenceKernels()
    >>> "add" in kernels.table(), "conv2d" in kernels.table()
    (True, False)
    """

    xp = np

    def table(self) -> dict:
        out = {}
        for name in ops.ALL:
            fn = getattr(self, name, None)
            if fn is not None and callable(fn):
                out[name] = fn
        for name, refused in _REFUSED.items():
            out[name] = _refusing(name, out[name], refused)
        return out

    # ----- complex numbers ----------------------------------------------------------------
    def real(self, a):
        return a.real

    def imag(self, a):
        return a.imag

    def view_as_real(self, a):
        real = a.real.dtype
        return self.xp.expand_dims(a, -1).view(real)

    def view_as_complex(self, a):
        xp = self.xp
        cplx = np.complex128 if a.dtype == np.float64 else np.complex64
        return a.view(cplx)[..., 0] if a.ndim > 1 else xp.squeeze(a.view(cplx), -1)

    def conj(self, a):
        return self.xp.conj(a)

    def angle(self, a):
        xp = self.xp
        out = xp.angle(a)
        if a.dtype.kind != "c":
            # pi for negative numbers only: NumPy's angle(-0.0) is pi (the sign bit), and
            # NaN stays NaN
            out = xp.where(xp.isnan(a), a, xp.where(a < 0, out, 0))
        return out.astype(a.real.dtype, copy=False)

    def complex(self, re, im):
        xp = self.xp
        shape = xp.broadcast_shapes(re.shape, im.shape)
        out = xp.empty(shape, dtype=np.complex128 if re.dtype == np.float64 else np.complex64)
        out.real = re
        out.imag = im
        return out

    def round(self, a, decimals=0):
        return self.xp.round(a, decimals)

    def clamp(self, a, lo, hi):
        xp = self.xp
        if lo is not None:
            a = xp.maximum(a, lo)
        if hi is not None:
            a = xp.minimum(a, hi)
        return a

    def where(self, cond, a, b):
        return self.xp.where(cond, a, b)

    # float16 and bfloat16 compute in float32 and round once, as PyTorch's opmath
    def lerp(self, start, end, weight):
        dt = start.dtype
        if _half(dt):
            start, end = start.astype(np.float32), end.astype(np.float32)
            weight = weight.astype(np.float32) if hasattr(weight, "astype") else weight
        # PyTorch's two-sided form, exact at both ends: from start below a weight of 0.5,
        # from end above
        diff = end - start
        near_start = np.abs(weight) < 0.5
        out = np.where(near_start, start + weight * diff, end - diff * (1 - weight))
        return np.asarray(out).astype(dt, copy=False)

    def addcmul(self, a, t1, t2, value=1):
        dt = a.dtype
        if _half(dt):
            a, t1, t2 = (x.astype(np.float32) for x in (a, t1, t2))
            value = float(value)
        return (a + value * t1 * t2).astype(dt, copy=False)

    def addcdiv(self, a, t1, t2, value=1):
        dt = a.dtype
        if _half(dt):
            a, t1, t2 = (x.astype(np.float32) for x in (a, t1, t2))
            value = float(value)
        return (a + value * t1 / t2).astype(dt, copy=False)

    def cast(self, a, dtype):
        if a.dtype.name == "bfloat16" and np.dtype(dtype).kind in "iu":
            # ml_dtypes saturates (-2 to uint8 is 0); PyTorch converts as from float32,
            # which wraps (254)
            a = a.astype(np.float32)
        return a.astype(dtype)

    def masked_fill(self, a, mask, value):
        return self.xp.where(mask, self.xp.asarray(value, dtype=a.dtype), a)

    def nan_to_num(self, a, nan=0.0, posinf=None, neginf=None):
        if a.dtype.name == "bfloat16":
            # NumPy's nan_to_num knows kinds "f" and "c" only: through float32, whose
            # finfo would give +-inf the wrong (float32) limits
            info = np.finfo(a.dtype)
            return self.xp.nan_to_num(a.astype(np.float32), nan=nan,
                                      posinf=float(info.max) if posinf is None else posinf,
                                      neginf=float(info.min) if neginf is None else neginf
                                      ).astype(a.dtype)
        return self.xp.nan_to_num(a, nan=nan, posinf=posinf, neginf=neginf)

    # ----- views and movement -------------------------------------------------------
    def view(self, a, shape):
        if a.flags.c_contiguous:
            return a.reshape(shape)  # always a view, without copy=False's slower path
        try:
            return a.reshape(shape, copy=False)
        except ValueError as exc:
            if "copy" in str(exc) or "view" in str(exc):
                raise RuntimeError(
                    "view size is not compatible with input tensor's size and stride (at least "
                    "one dimension spans across two contiguous subspaces). Use .reshape(...) "
                    "instead."
                ) from None
            raise

    def reshape(self, a, shape):
        return self.xp.reshape(a, shape)

    def permute(self, a, dims):
        return self.xp.transpose(a, dims)

    def transpose(self, a, dim0, dim1):
        return self.xp.swapaxes(a, dim0, dim1)

    def squeeze(self, a, dim=None):
        xp = self.xp
        if dim is None:
            return xp.squeeze(a)
        dims = tuple(d for d in dim if a.shape[d] == 1)
        return xp.squeeze(a, axis=dims) if dims else a.view()

    def unsqueeze(self, a, dim):
        return self.xp.expand_dims(a, dim)

    def expand(self, a, shape):
        # a writable view (np.broadcast_to's is read-only): PyTorch writes into an expanded
        # tensor whose stride-0 dims have size 1, and refuses the others before any write
        # (torcia._tensor.check_overlap)
        lead = len(shape) - a.ndim
        strides = [0] * lead
        for n, size, stride in zip(a.shape, shape[lead:], a.strides):
            strides.append(stride if n == size else 0)
        if self.xp is np and a.__class__ is np.ndarray and a.flags.c_contiguous:
            # NOTE: as_strided costs 2 us in Python; a strided ndarray over the same buffer
            # is the same view in a quarter of that
            return np.ndarray(shape, a.dtype, a, 0, strides)
        return self.xp.lib.stride_tricks.as_strided(a, shape, strides)

    def narrow(self, a, dim, start, length):
        idx = [slice(None)] * a.ndim
        idx[dim] = slice(start, start + length)
        return a[tuple(idx)]

    def unfold(self, a, dimension, size, step):
        xp = self.xp
        n = (a.shape[dimension] - size) // step + 1
        strides = list(a.strides)
        shape = list(a.shape)
        shape[dimension] = n
        strides[dimension] = a.strides[dimension] * step
        shape.append(size)
        strides.append(a.strides[dimension])
        return xp.lib.stride_tricks.as_strided(a, shape=shape, strides=strides)

    def diagonal(self, a, offset=0, dim1=0, dim2=1):
        d = self.xp.diagonal(a, offset=offset, axis1=dim1, axis2=dim2)
        # NumPy hands out the diagonal read-only, PyTorch's is a writable view; CuPy's
        # arrays are always writable (their flags have no "writeable")
        if not getattr(d.flags, "writeable", True) and a.flags.writeable:
            d.flags.writeable = True
        return d

    def as_strided(self, a, size, stride, storage_offset=0):
        # a is a storage (a tensor that is no view): its memory, in memory order, is the
        # flat array indexed here; the public function checks the bounds
        xp = self.xp
        item = a.itemsize
        if a.flags.c_contiguous or a.flags.f_contiguous:
            flat = a.ravel(order="K")
        else:
            span = 1 + sum((n - 1) * s for n, s in zip(a.shape, a.strides)) // item
            flat = xp.lib.stride_tricks.as_strided(a, shape=(span,), strides=(item,))
        return xp.lib.stride_tricks.as_strided(
            flat[storage_offset:], shape=size, strides=tuple(s * item for s in stride)
        )

    def getitem(self, a, key):
        if key.__class__ is tuple and len(key) == 2 and key[0].__class__ is np.ndarray and (
                key[1] is Ellipsis and a.ndim == 1 and key[0].ndim):
            # one index array into a vector, (array, ...): NumPy's own path for a[array],
            # the same copy at a fifth of the cost
            return a[key[0]]
        return a[key]

    def detach_view(self, a):
        return a

    def contiguous(self, a):
        return self.xp.ascontiguousarray(a)

    def clone(self, a):
        return a.copy()

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

    def gather(self, a, index, dim):
        # the result has the index's shape: take_along_axis would broadcast a smaller index
        # across the dims not gathered
        return a[self._scatter_index(index, dim)]

    def take_along_dim(self, a, indices, dim=None):
        xp = self.xp
        if dim is None:
            return xp.take_along_axis(a.reshape(-1), indices.reshape(-1), axis=0)
        return xp.take_along_axis(a, indices, axis=dim)

    def _scatter_index(self, index, dim):
        xp = self.xp
        # the open grids of indices(shape, sparse=True), which CuPy has no "sparse" for
        n = index.ndim
        grids = [xp.arange(s).reshape((1,) * d + (s,) + (1,) * (n - d - 1))
                 for d, s in enumerate(index.shape)]
        grids[dim] = index
        return tuple(grids)

    def scatter(self, a, index, src, dim):
        out = a.copy()
        if not isinstance(src, self.xp.ndarray):
            out[self._scatter_index(index, dim)] = src
        else:
            out[self._scatter_index(index, dim)] = src[tuple(slice(0, s) for s in index.shape)]
        return out

    def scatter_add(self, a, index, src, dim):
        xp = self.xp
        out = a.copy()
        src = src[tuple(slice(0, s) for s in index.shape)]
        _add_at(xp, out, self._scatter_index(index, dim), src)
        return out

    def index_select(self, a, index, dim):
        return self.xp.take(a, index, axis=dim)

    def index_add(self, a, index, source, dim, alpha=1):
        xp = self.xp
        out = a.copy()
        key = (slice(None),) * dim + (index,)
        _add_at(xp, out, key, source * alpha if alpha != 1 else source)
        return out

    def index_copy(self, a, index, source, dim):
        out = a.copy()
        out[(slice(None),) * dim + (index,)] = source
        return out

    def index_put(self, a, values, key, accumulate=False):
        out = a.copy()
        if accumulate:
            _add_at(self.xp, out, key, values)
        else:
            out[key] = values
        return out

    # ----- linear algebra -----------------------------------------------------------
    # NOTE: ml_dtypes' bfloat16 products come back as float32; PyTorch keeps the dtype
    def matmul(self, a, b):
        xp = self.xp
        if a.ndim > 2 and b.ndim == 2:
            # one GEMM over all rows: NumPy runs a batch against a transposed 2-D operand
            # in a slow loop (30x slower measured for (32, 64, 128) @ (128, 384).T)
            out = xp.matmul(a.reshape(-1, a.shape[-1]), b).reshape(a.shape[:-1] + b.shape[-1:])
        else:
            out = xp.matmul(_blas_ready(xp, a), _blas_ready(xp, b))
        return _keep(out, a)

    mm = bmm = matmul

    def dot(self, a, b):
        dot_operands(a, b)
        return _keep(self.xp.dot(a, b), a)

    def outer(self, a, b):
        outer_operands(a, b)
        return _keep(self.xp.outer(a, b), a)

    def einsum(self, *operands, equation):
        like = operands[0]
        if _half(like.dtype):
            # sums in float32, rounded once (NumPy's einsum refuses ml_dtypes' bfloat16,
            # and sums float16 in float16)
            operands = tuple(o.astype(np.float32) for o in operands)
        # NumPy's path search (contractions through BLAS) costs ~50 us: worth it for more
        # than two operands or large ones (c_einsum's loops took 50 ms for an NTK's
        # 'Naf,Mbf->NMab' of (20, 10, 8778) by (5, 10, 8778), tensordot 3 ms)
        optimize = len(operands) > 2 or max(o.size for o in operands) >= 1 << 14
        return _keep(self.xp.einsum(equation, *operands, optimize=optimize), like)

    def tensordot(self, a, b, dims):
        return _keep(self.xp.tensordot(a, b, axes=dims), a)

    def addmm(self, c, a, b, beta=1, alpha=1):
        prod = _keep(a @ b, a)
        if alpha != 1:
            prod = prod * alpha
        if beta == 0:
            return prod
        return prod + (c if beta == 1 else beta * c)

    # ----- creation -----------------------------------------------------------------
    def zeros(self, shape, dtype):
        return self.xp.zeros(shape, dtype=dtype)

    def ones(self, shape, dtype):
        return self.xp.ones(shape, dtype=dtype)

    def empty(self, shape, dtype):
        return self.xp.empty(shape, dtype=dtype)

    def full(self, shape, fill_value, dtype):
        return self.xp.full(shape, fill_value, dtype=dtype)

    def arange(self, start, end, step, dtype):
        if np.dtype(dtype).kind in "iu":
            n = max(0, math.ceil((end - start) / step))
            return (self.xp.arange(n, dtype=np.int64) * step + start).astype(dtype)
        return self.xp.arange(start, end, step, dtype=np.float64).astype(dtype)

    def linspace(self, start, end, steps, dtype):
        return self.xp.linspace(start, end, steps, dtype=np.float64).astype(dtype)

    def logspace(self, start, end, steps, base, dtype):
        return self.xp.logspace(start, end, steps, base=base, dtype=np.float64).astype(dtype)

    def eye(self, n, m, dtype):
        return self.xp.eye(n, m, dtype=dtype)

    def _host(self, arr):
        return self.xp.asarray(arr)

    def _drawn(self, shape, dtype, draw):
        """``draw(n)``'s float64 samples as an array of ``shape`` in ``dtype``, drawn in
        blocks: a float32 tensor never has a float64 copy of its whole size beside it (a
        GPT-2-sized model's initialisation peaked at twice its size in such copies). The
        values are those of one call, as NumPy's Generator draws element by element."""
        n = math.prod(shape)
        if n <= _DRAW_BLOCK or dtype == np.float64:
            return self._host(draw(shape).astype(dtype, copy=False))
        out = np.empty(n, dtype)
        for start in range(0, n, _DRAW_BLOCK):
            out[start:start + _DRAW_BLOCK] = draw(min(_DRAW_BLOCK, n - start))
        return self._host(out.reshape(shape))

    def rand(self, shape, dtype, rng):
        return self._drawn(shape, dtype, lambda n: rng.random(n, dtype=np.float64))

    def uniform(self, shape, low, high, dtype, rng):
        return self._drawn(shape, dtype, lambda n: rng.uniform(low, high, n))

    def randn(self, shape, dtype, rng):
        return self._drawn(shape, dtype, rng.standard_normal)

    def normal(self, shape, mean, std, dtype, rng):
        return self._drawn(shape, dtype, lambda n: rng.normal(mean, std, n))

    def randint(self, shape, low, high, dtype, rng):
        return self._host(rng.integers(low, high, shape, dtype=np.int64).astype(dtype))

    def randperm(self, n, dtype, rng):
        return self._host(rng.permutation(n).astype(dtype))

    def bernoulli(self, p, rng):
        host = np.asarray(p) if self.xp is np else self.xp.asnumpy(p)
        draw = rng.random(host.shape) < host
        return self._host(draw.astype(host.dtype))

    def dropout_mask(self, shape, p, dtype, rng):
        """Inverted-dropout multiplier: 0 with probability p, 1/(1-p) elsewhere."""
        keep = rng.random(shape) >= p
        return self._host((keep / (1.0 - p)).astype(dtype))

    def multinomial(self, w, num_samples, replacement, rng):
        host = np.asarray(w, dtype=np.float64) if self.xp is np else self.xp.asnumpy(w)
        rows = host.reshape(-1, host.shape[-1])
        out = np.empty((rows.shape[0], num_samples), dtype=np.int64)
        for i, row in enumerate(rows):
            out[i] = rng.choice(row.shape[0], size=num_samples, replace=replacement,
                                p=row / row.sum())
        return self._host(out.reshape(host.shape[:-1] + (num_samples,)))


def _blas_ready(xp, x):
    """``x`` itself when each of its matrices is row- or column-major (BLAS takes it),
    else a contiguous copy: matmul on other strides leaves BLAS for a naive loop."""
    if x.ndim < 3:
        return x
    item = x.itemsize
    s1, s2 = x.strides[-2], x.strides[-1]
    if (s2 == item and s1 >= item * x.shape[-1]) or (s1 == item and s2 >= item * x.shape[-2]):
        return x
    return xp.ascontiguousarray(x)


def _keep(out, like):
    """``out`` in ``like``'s dtype (a no-op unless a library widened it)."""
    return out if out.dtype == like.dtype else out.astype(like.dtype)


def _add_at(xp, out, key, values):
    if xp is np:
        np.add.at(out, key, values)
    else:
        xp.add.at(out, key, values)


# ---------------------------------------------------------------------------------------
# the built-in plugin: core registers its own backend through the same hooks as others
# ---------------------------------------------------------------------------------------


class NumpyPlugin:
    """Core's built-in plugin: the "cpu" device on NumPy, with the reference kernels."""

    @hookimpl
    def torcia_register_backends(self, registry):
        registry.add(Backend("cpu", np, fallback="reference"))

    @hookimpl
    def torcia_register_kernels(self, registry):
        for name, fn in Reference().table().items():
            registry.add(name, "cpu", fn, priority=0)
