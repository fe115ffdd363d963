"""More of PyTorch's names at ``torch`` and on ``torch.Tensor``: the in-place view ops
(``t_``, ``transpose_``...), ``resize_``, ``index_reduce``, strided and permuted empty
tensors, ``frombuffer``, ``gradient``, ``histogramdd``, the RNN cells and whole-sequence
RNN functions (``torch.lstm``...), ``convolution``, SyncBatchNorm's ``batch_norm_*``
statistics, the legacy sparse products (``hspmm``, ``sspaddmm``...) and small tensor
queries (``is_neg``, ``dim_order``, ``is_set_to``...).

Every differentiable function here is written with differentiable torcia ops, so
gradients come from the ops it uses.
"""

from __future__ import annotations

import builtins
import functools
import operator
import warnings

import numpy as np

from torcia import _creation as C
from torcia import _dtype as D
from torcia import _ops, _ops_complex, _ops_nn, _storage, linalg
from torcia._grad_mode import STATE as _GRAD
from torcia._grad_mode import no_grad as _no_grad
from torcia._tensor import AUTOCAST, AUTOGRAD, Tensor, _torch_name, inplace
from torcia.amp import autocast_as, op_policy

# ---------------------------------------------------------------------------------------
# in-place view ops: the tensor itself becomes the view
# ---------------------------------------------------------------------------------------


def _inplace_view(self, view_fn, *args):
    """Make ``self`` the view ``view_fn(self, *args)``, as PyTorch's ``t_`` and friends: same
    storage, new shape and strides, and (when recording) the view's node as history."""
    recording = self._requires_grad and _GRAD.enabled
    if recording:
        AUTOGRAD.engine.check_inplace(self)
    out = view_fn(self, *args)
    if self._base is None:
        # self becomes a view of its old memory (which stays its storage, for
        # storage_offset and as_strided)
        self._base = _storage.holder(self)
    self._data = out._data
    if recording:
        self.grad_fn = out.grad_fn
        self._out_nr = out._out_nr
    self._vc[0] += 1
    return self


def t_(self):
    """In-place :meth:`Tensor.t`: ``self`` becomes its transpose (a 2-D or smaller tensor).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.zeros(2, 3)
    >>> x.t_().shape
    torcia.Size([3, 2])
    """
    return _inplace_view(self, _ops.t)


def transpose_(self, dim0, dim1):
    """In-place :meth:`Tensor.transpose`: ``self`` swaps dimensions ``dim0`` and ``dim1``."""
    return _inplace_view(self, _ops.transpose, dim0, dim1)


def swapaxes_(self, axis0, axis1):
    """In-place :meth:`Tensor.swapaxes` (:meth:`transpose_`)."""
    return _inplace_view(self, _ops.transpose, axis0, axis1)


def swapdims_(self, dim0, dim1):
    """In-place :meth:`Tensor.swapdims` (:meth:`transpose_`)."""
    return _inplace_view(self, _ops.transpose, dim0, dim1)


def squeeze_(self, dim=None):
    """In-place :meth:`Tensor.squeeze`: drops the size-1 dimensions (or ``dim``)."""
    if dim is None:
        return _inplace_view(self, _ops.squeeze)
    return _inplace_view(self, _ops.squeeze, dim)


def unsqueeze_(self, dim):
    """In-place :meth:`Tensor.unsqueeze`: inserts a size-1 dimension at ``dim``."""
    return _inplace_view(self, _ops.unsqueeze, dim)


def as_strided_(self, size, stride, storage_offset=None):
    """In-place :meth:`Tensor.as_strided`: ``self`` takes the given size and strides."""
    return _inplace_view(self, _ops.as_strided, tuple(size), tuple(stride), storage_offset)


# ---------------------------------------------------------------------------------------
# resizing
# ---------------------------------------------------------------------------------------


def _size_arg(sizes):
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    shape = tuple(int(s) for s in sizes)
    if any(s < 0 for s in shape):
        raise RuntimeError(f"Trying to create tensor with negative dimension "
                           f"{min(shape)}: {list(shape)}")
    return shape


def resize_(self, *sizes, memory_format=None):
    """Give ``self`` the shape ``sizes`` in place, as PyTorch: the elements keep their
    memory order; a smaller size keeps the same memory, a larger one reallocates (the
    new elements are zeros here, uninitialised in PyTorch).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.arange(6.0)
    >>> x.resize_(2, 2)
    tensor([[0., 1.],
            [2., 3.]])
    """
    if self._requires_grad:
        raise RuntimeError("cannot resize variables that require grad")
    shape = _size_arg(sizes)
    if shape == tuple(self._data.shape):
        return self
    n = functools.reduce(operator.mul, shape, 1)
    arr = self._data
    flat = arr.reshape(-1) if arr.flags.c_contiguous else arr.ravel(order="K")
    if n <= flat.size:
        self._data = flat[:n].reshape(shape)
    else:
        grown = self._device.backend.xp.zeros(n, dtype=arr.dtype)
        grown[:flat.size] = flat
        self._data = grown.reshape(shape)
    return self


def resize_as_(self, the_template, memory_format=None):
    """``self.resize_(the_template.shape)``."""
    return resize_(self, tuple(the_template.shape))


def resize(self, *sizes):
    """PyTorch's deprecated out-of-place resize: a reshape to ``sizes``, which must hold
    as many elements as ``self`` (differentiable).

    Examples
    --------
    >>> import warnings
    >>> import torcia
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter('ignore')
    ...     y = torcia.arange(6).resize(2, 3)
    >>> y
    tensor([[0, 1, 2],
            [3, 4, 5]])
    """
    warnings.warn("non-inplace resize is deprecated", stacklevel=2)
    shape = _size_arg(sizes)
    n = functools.reduce(operator.mul, shape, 1)
    if n != self.numel():
        raise RuntimeError(
            f"requested resize to {'x'.join(map(str, shape))} ({n} elements in total), but "
            f"the given tensor has a size of {'x'.join(map(str, self.shape))} "
            f"({self.numel()} elements). autograd's resize can only change the shape of a "
            "given tensor, while preserving the number of elements. ")
    return self.reshape(shape)


def resize_as(self, tensor):
    """PyTorch's deprecated out-of-place ``resize_as``: :meth:`resize` to
    ``tensor.shape``.

    Examples
    --------
    >>> import warnings
    >>> import torcia
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter('ignore')
    ...     y = torcia.arange(4).resize_as(torcia.zeros(2, 2))
    >>> y
    tensor([[0, 1],
            [2, 3]])
    """
    warnings.warn("non-inplace resize_as is deprecated", stacklevel=2)
    return self.reshape(tuple(tensor.shape)) if tensor.numel() == self.numel() else \
        resize(self, tuple(tensor.shape))


# ---------------------------------------------------------------------------------------
# in-place forms PyTorch has at top level or as methods
# ---------------------------------------------------------------------------------------


def _top_inplace(name):
    def fn(input, *args, **kwargs):
        return getattr(input, name)(*args, **kwargs)

    fn.__name__ = name
    fn.__doc__ = (f"``input.{name}(...)``, as PyTorch's ``torch.{name}``."
                  + _ops._inplace_example(name[:-1], function=True))
    return fn


_TOP_INPLACE = ("addmv_", "i0_", "logit_", "sinc_", "xlogy_")
for _name in _TOP_INPLACE:
    globals()[_name] = _top_inplace(_name)


def addmm_(self, mat1, mat2, *, beta=1, alpha=1):
    """In-place :meth:`Tensor.addmm`: ``self = beta * self + alpha * (mat1 @ mat2)``."""
    return inplace(_ops.addmm, self, mat1, mat2, beta=beta, alpha=alpha)


def conj_physical_(self):
    """In-place :func:`torcia.conj_physical` (a no-op on real tensors)."""
    return inplace(_ops_complex.conj_physical, self)


def float_power_(self, exponent):
    """In-place :func:`torcia.float_power`; ``self`` must be float64 (complex128 for a
    complex result), the dtype the operation computes in."""
    want = D.complex128 if (self.is_complex() or (isinstance(exponent, Tensor)
                                                   and exponent.is_complex())
                            or isinstance(exponent, complex)) else D.float64
    if self.dtype is not want:
        raise RuntimeError(f"the base given to float_power_ has dtype "
                           f"{_torch_name(self.dtype)} but the operation's result "
                           f"requires dtype {_torch_name(want)}")
    return inplace(_ops.float_power, self, exponent)


def dropout_(input, p=0.5, train=True):
    """In-place :func:`torcia.dropout` (``torch.dropout_(input, p, train)``)."""
    return inplace(_ops_nn.dropout, input, p, train)


def alpha_dropout_(input, p=0.5, train=False):
    """In-place :func:`torcia.alpha_dropout`."""
    return inplace(_ops_nn.alpha_dropout, input, p, train)


def feature_alpha_dropout_(input, p=0.5, train=False):
    """In-place :func:`torcia.feature_alpha_dropout`."""
    return inplace(_ops_nn.feature_alpha_dropout, input, p, train)


def feature_dropout(input, p=0.5, train=True):
    """Dropout of whole feature maps: each ``(sample, channel)`` slice of ``input``
    (at least 2-D: ``N x C x ...``) is zeroed with probability ``p`` and the rest scaled
    by ``1 / (1 - p)``.

    Examples
    --------
    >>> import torcia
    >>> torcia.feature_dropout(torcia.ones(2, 3, 4), 0.5, False).sum().item()
    24.0
    """
    if p < 0 or p > 1:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not train or p == 0:
        return input
    if input.ndim < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    if p == 1:
        return input * C.zeros_like(input)
    noise = C.empty(*input.shape[:2], *([1] * (input.ndim - 2)), dtype=input.dtype,
                    device=input.device).bernoulli_(1 - p)
    return input * (noise / (1 - p))


def feature_dropout_(input, p=0.5, train=True):
    """In-place :func:`feature_dropout`."""
    return inplace(feature_dropout, input, p, train)


# ---------------------------------------------------------------------------------------
# indexing and construction
# ---------------------------------------------------------------------------------------

_INDEX_REDUCE = ("prod", "mean", "amax", "amin")


def index_reduce(input, dim, index, source, reduce, *, include_self=True):  # noqa: A002
    """Reduce the slices of ``source`` into ``input`` at ``index`` along ``dim`` with
    ``reduce`` ("prod", "mean", "amax" or "amin"); ``include_self=False`` leaves the
    indexed values of ``input`` out of the reduction.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.ones(3)
    >>> torcia.index_reduce(x, 0, torcia.tensor([0, 0, 2]), torcia.tensor([2.0, 3.0, 4.0]),
    ...                     "prod")
    tensor([6., 1., 4.])
    """
    if reduce not in _INDEX_REDUCE:
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or "
                           f"amin but got {reduce}.")
    if index.ndim > 1:
        raise IndexError("index_reduce_(): Index is supposed to be a vector")
    if index.dtype not in (D.int64, D.int32):
        raise IndexError(f"index_reduce_(): Expected dtype int32/int64 for index but got: "
                         f"{index.dtype}")
    d = dim % max(input.ndim, 1)
    src = source if source.ndim else source.reshape(1)
    if index.numel() != (src.shape[d] if src.ndim else 1):
        raise IndexError(f"index_reduce_(): Number of indices ({index.numel()}) should be "
                         f"equal to source.size(dim) ({src.shape[d]})")
    if input.ndim == 0:
        return input.reshape(1).scatter_reduce(0, index.reshape(-1).long(), src, reduce,
                                               include_self=include_self).reshape(())
    shape = [1] * input.ndim
    shape[d] = -1
    idx = index.reshape(-1).long().reshape(shape).expand(*src.shape)
    return input.scatter_reduce(d, idx, src, reduce, include_self=include_self)


def nonzero_static(input, *, size, fill_value=-1):
    """The indices of the nonzero elements (as :func:`torcia.nonzero`), cut or padded with
    ``fill_value`` rows to exactly ``size`` rows.

    Examples
    --------
    >>> import torcia
    >>> torcia.nonzero_static(torcia.tensor([0, 3, 0, 5]), size=3)
    tensor([[ 1],
            [ 3],
            [-1]])
    """
    if size < 0:
        raise RuntimeError(f"nonzero_static: 'size' must be an non-negative integer, got "
                           f"{size}")
    nz = input.nonzero()
    n = nz.shape[0]
    if n >= size:
        return nz[:size]
    pad = C.full((size - n, input.ndim), fill_value, dtype=D.int64, device=input.device)
    return _ops.cat([nz, pad], 0)


def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad=False,
                  pin_memory=False):
    """An uninitialised tensor of ``size`` with the given ``stride`` (in elements), laid on
    a buffer just long enough for it.

    Examples
    --------
    >>> import torcia
    >>> torcia.empty_strided((2, 3), (1, 2)).stride()
    (1, 2)
    """
    size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
    if len(size) != len(stride):
        raise RuntimeError(f"mismatch in length of strides and shape: {len(size)} and "
                           f"{len(stride)}")
    n = 0 if 0 in size else 1 + sum((s - 1) * st for s, st in zip(size, stride))
    buf = C.empty(n, dtype=dtype, device=device)
    item = buf._data.itemsize
    arr = buf._device.backend.xp.lib.stride_tricks.as_strided(
        buf._data, size, tuple(s * item for s in stride))
    out = Tensor._make(arr, buf._device)
    return out.requires_grad_() if requires_grad else out


def new_empty_strided(self, size, stride, *, dtype=None, device=None, requires_grad=False,
                      layout=None, pin_memory=False):
    """:func:`torcia.empty_strided` with ``self``'s dtype and device unless given.

    Examples
    --------
    >>> import torcia
    >>> y = torcia.tensor([1.0], dtype=torcia.float64).new_empty_strided((2, 3), (1, 2))
    >>> y.shape, y.stride(), y.dtype
    (torcia.Size([2, 3]), (1, 2), torcia.float64)
    """
    return empty_strided(size, stride, dtype=dtype or self.dtype,
                         device=device or self.device, requires_grad=requires_grad)


def empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None,
                   requires_grad=False, pin_memory=False):
    """An uninitialised tensor of ``size`` whose dimensions are laid out in memory in the
    order ``physical_layout`` (outermost first).

    Examples
    --------
    >>> import torcia
    >>> torcia.empty_permuted((2, 3, 4), (0, 2, 1)).stride()
    (12, 1, 3)
    """
    size, perm = tuple(int(s) for s in size), tuple(int(p) for p in physical_layout)
    if len(size) != len(perm):
        raise RuntimeError(f"Number of dimensions in size does not match the length of the "
                           f"physical_layout; i.e. len(size) = {len(size)} is not equal to "
                           f"len(physical_layout) = {len(perm)}")
    if sorted(perm) != list(range(len(size))):
        raise RuntimeError(f"Dimension {perm} is not a permutation of the dimensions")
    inverse = [0] * len(perm)
    for i, p in enumerate(perm):
        inverse[p] = i
    buf = C.empty(*[size[p] for p in perm], dtype=dtype, device=device)
    out = Tensor._make(buf._data.transpose(inverse), buf._device)
    return out.requires_grad_() if requires_grad else out


def as_strided_scatter(input, src, size, stride, storage_offset=None):
    """A copy of ``input`` with ``src`` written into its ``as_strided(size, stride,
    storage_offset)`` view (differentiable in both).

    Examples
    --------
    >>> import torcia
    >>> torcia.as_strided_scatter(torcia.zeros(4), torcia.tensor([1.0, 2.0]), (2,), (2,))
    tensor([1., 0., 2., 0.])
    """
    out = input.clone()
    out.as_strided(tuple(size), tuple(stride), storage_offset or 0).copy_(src)
    return out


def frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False):
    """A 1-D tensor over the bytes of a Python buffer (``bytearray``, ``memoryview``,
    ``array.array``...), sharing its memory, from byte ``offset`` on, ``count`` elements
    (all by default). A read-only buffer is copied, with PyTorch's warning.

    Examples
    --------
    >>> import torcia
    >>> torcia.frombuffer(bytearray([1, 0, 2, 0]), dtype=torcia.int16)
    tensor([1, 2], dtype=torcia.int16)
    """
    view = memoryview(buffer)
    nbytes = view.nbytes
    item = dtype.to_numpy().itemsize
    if nbytes <= 0:
        raise ValueError(f"both buffer length ({nbytes}) and count ({count}) must not be 0")
    if offset < 0 or offset >= nbytes:
        raise ValueError(f"offset ({offset} bytes) must be non-negative and no greater than "
                         f"buffer length ({nbytes} bytes) minus 1")
    if count <= 0 and (nbytes - offset) % item:
        raise ValueError(f"buffer length ({nbytes - offset} bytes) after offset ({offset} "
                         f"bytes) must be a multiple of element size ({item})")
    if count > 0 and count * item > nbytes - offset:
        raise ValueError(f"requested buffer length ({count} * {item} bytes) after offset "
                         f"({offset} bytes) must not be greater than actual buffer length "
                         f"({nbytes} bytes)")
    arr = np.frombuffer(buffer, dtype=dtype.to_numpy(), count=count, offset=offset)
    if not arr.flags.writeable:
        warnings.warn("The given buffer is not writable: torcia copies it, since tensors "
                      "are writable.", UserWarning, stacklevel=2)
        arr = arr.copy()
    out = C.from_numpy(arr)
    return out.requires_grad_() if requires_grad else out


def from_file(filename, shared=None, size=0, *, dtype=None, layout=None, device=None,
              pin_memory=False, requires_grad=False):
    """A 1-D tensor of ``size`` elements read from ``filename``; with ``shared=True`` the
    tensor maps the file, so writes to either are seen by the other.

    Examples
    --------
    >>> import os, tempfile, torcia
    >>> path = os.path.join(tempfile.mkdtemp(), "x.bin")
    >>> torcia.tensor([1.0, 2.0]).numpy().tofile(path)
    >>> torcia.from_file(path, size=2)
    tensor([1., 2.])
    """
    dt = (dtype or D.get_default_dtype()).to_numpy()
    if shared:
        arr = np.memmap(filename, dtype=dt, mode="r+", shape=(size,))
    else:
        arr = np.fromfile(filename, dtype=dt, count=size)
        if arr.size < size:
            raise RuntimeError(f"unexpected EOF, expected {size - arr.size} more bytes. The "
                               "file might be corrupted.")
    out = C.from_numpy(np.asarray(arr) if not shared else arr)
    if device is not None:
        out = out.to(device)
    return out.requires_grad_() if requires_grad else out


# ---------------------------------------------------------------------------------------
# numerical analysis and statistics
# ---------------------------------------------------------------------------------------


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
    return _ops.cat([first, inner, last], d)


_Histogramdd = _ops._return_type("histogramdd", ("hist", "bin_edges"))


def histogramdd(input, bins=10, *, range=None, weight=None, density=False):  # noqa: A002
    """The histogram of the points in ``input`` (``... x D``: the last dimension holds
    each point's coordinates): ``bins`` is a number of equal bins per dimension, a list of
    them, or a list of 1-D tensors of bin edges; ``range`` is ``[lo0, hi0, lo1, hi1...]``.
    Returns ``(hist, bin_edges)``, ``bin_edges`` a list of one tensor per dimension.

    Examples
    --------
    >>> import torcia
    >>> pts = torcia.tensor([[0.0, 0.0], [1.0, 1.0], [1.0, 0.0]])
    >>> torcia.histogramdd(pts, bins=[2, 2]).hist
    tensor([[1., 0.],
            [1., 1.]])
    """
    if not input.is_floating_point():
        raise RuntimeError(f"torch.histogramdd: input tensor and bins tensors should have "
                           f"the same dtype, but got input {input.dtype}")
    pts = input.detach().cpu().numpy()
    ndim = pts.shape[-1]
    pts = pts.reshape(-1, ndim)
    if isinstance(bins, Tensor):
        bins = bins.tolist()
    if isinstance(bins, (list, tuple)):
        bins = [b.detach().cpu().numpy() if isinstance(b, Tensor) else int(b) for b in bins]
    ranges = None
    if range is not None:
        r = list(range)
        if len(r) != 2 * ndim:
            raise RuntimeError(f"torch.histogramdd: for a {ndim}-dimensional histogram, range "
                               f"should have {2 * ndim} elements, but got {len(r)}")
        ranges = [(r[2 * k], r[2 * k + 1]) for k in builtins.range(ndim)]
    w = None if weight is None else weight.detach().cpu().numpy().reshape(-1)
    hist, edges = np.histogramdd(pts, bins, range=ranges, weights=w, density=density)
    dt = pts.dtype
    return _Histogramdd(C.tensor(hist.astype(dt), device=input.device),
                        [C.tensor(e.astype(dt), device=input.device) for e in edges])


def nuclear_norm(input, dim=None, keepdim=False, *, dtype=None):
    """The nuclear norm (sum of singular values) of a matrix, or of the matrices spanned
    by the two dimensions ``dim``; differentiable.

    Examples
    --------
    >>> import torcia
    >>> torcia.nuclear_norm(torcia.tensor([[3.0, 0.0], [0.0, -4.0]]))
    tensor(7.)
    """
    if isinstance(dim, bool):
        dim, keepdim = None, dim
    if dim is None:
        if input.ndim != 2:
            raise RuntimeError(f"Expected a tensor with 2 dimensions, but got a tensor with "
                               f"{input.ndim} dimension{'s' if input.ndim != 1 else ''} "
                               "instead.")
        dim = (-2, -1)
    return linalg.matrix_norm(input, "nuc", dim=tuple(dim), keepdim=keepdim, dtype=dtype)


def cond(pred, true_fn, false_fn, operands=()):
    """``true_fn(*operands)`` if ``pred`` else ``false_fn(*operands)``; ``pred`` is a bool
    or a one-element tensor (run eagerly: torcia has no graph capture to keep both).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([1.0, -2.0])
    >>> torcia.cond(x.sum() > 0, lambda v: v.cos(), lambda v: v.sin(), (x,))
    tensor([ 0.8415, -0.9093])
    """
    if isinstance(pred, Tensor):
        if pred.numel() != 1:
            raise RuntimeError(f"Expected pred to be bool or single-element tensor, but got "
                               f"a tensor of shape {list(pred.shape)}.")
        pred = bool(pred.item())
    elif not isinstance(pred, (bool, int)):
        raise RuntimeError(f"Expected pred to be bool or tensor, but got {pred}.")
    if not isinstance(operands, (tuple, list)):
        raise RuntimeError(f"Expect operands to be a tuple of possibly nested dict/list/tuple "
                           f"that only consists of tensor leaves, but got {operands}.")
    if not callable(true_fn) or not callable(false_fn):
        raise RuntimeError("Expect both branches to be callable.")
    return true_fn(*operands) if pred else false_fn(*operands)


# ---------------------------------------------------------------------------------------
# recurrent cells and whole-sequence RNNs (PyTorch's _VF functions)
# ---------------------------------------------------------------------------------------


def _listed_where_listed(name):
    """Autocast for a composite op that PyTorch lists on some devices only: where the
    region's device lists ``name``, the op is one op for autocast (:func:`autocast_as`);
    elsewhere its inner ops meet autocast one by one, as PyTorch's composite kernels."""
    def decorate(fn):
        listed = autocast_as(name)(fn)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            region = AUTOCAST.region
            if AUTOCAST.enabled and region is not None and op_policy(region.device_type, name):
                return listed(*args, **kwargs)
            return fn(*args, **kwargs)

        return wrapper

    return decorate


def _lin(x, w, b):
    out = _ops.matmul(x, w.transpose(-1, -2))
    return out if b is None else out + b


@_listed_where_listed("rnn_tanh_cell")
def rnn_tanh_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One Elman RNN step: ``tanh(input @ w_ih.T + b_ih + hx @ w_hh.T + b_hh)``.

    Examples
    --------
    >>> import torcia
    >>> torcia.rnn_tanh_cell(torcia.ones(1, 2), torcia.zeros(1, 1), torcia.ones(1, 2),
    ...                      torcia.ones(1, 1)).shape
    torcia.Size([1, 1])
    """
    return (_lin(input, w_ih, b_ih) + _lin(hx, w_hh, b_hh)).tanh()


@_listed_where_listed("rnn_relu_cell")
def rnn_relu_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One Elman RNN step with ReLU: ``relu(input @ w_ih.T + b_ih + hx @ w_hh.T + b_hh)``.

    Examples
    --------
    >>> import torcia
    >>> w_ih, w_hh = torcia.eye(2), torcia.eye(2)
    >>> torcia.rnn_relu_cell(torcia.tensor([[1.0, -2.0]]), torcia.zeros(1, 2), w_ih, w_hh)
    tensor([[1., 0.]])
    """
    return _ops.relu(_lin(input, w_ih, b_ih) + _lin(hx, w_hh, b_hh))


@_listed_where_listed("lstm_cell")
def lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One LSTM step: ``hx`` is ``(h, c)``, gates ordered input, forget, cell, output as
    PyTorch's; returns ``(h', c')``.

    Examples
    --------
    >>> import torcia
    >>> h, c = torcia.lstm_cell(torcia.ones(1, 2), (torcia.zeros(1, 1), torcia.zeros(1, 1)),
    ...                         torcia.ones(4, 2), torcia.ones(4, 1))
    >>> h.shape, c.shape
    (torcia.Size([1, 1]), torcia.Size([1, 1]))
    """
    h, c = hx[0], hx[1]
    gates = _lin(input, w_ih, b_ih) + _lin(h, w_hh, b_hh)
    i, f, g, o = gates.chunk(4, -1)
    cy = f.sigmoid() * c + i.sigmoid() * g.tanh()
    return o.sigmoid() * cy.tanh(), cy


@_listed_where_listed("gru_cell")
def gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One GRU step, PyTorch's formulation: ``r`` and ``z`` gates, ``n = tanh(i_n + r *
    h_n)``, ``h' = (1 - z) * n + z * h``.

    Examples
    --------
    >>> import torcia
    >>> torcia.gru_cell(torcia.ones(1, 2), torcia.zeros(1, 1), torcia.ones(3, 2),
    ...                 torcia.ones(3, 1)).shape
    torcia.Size([1, 1])
    """
    i_r, i_z, i_n = _lin(input, w_ih, b_ih).chunk(3, -1)
    h_r, h_z, h_n = _lin(hx, w_hh, b_hh).chunk(3, -1)
    r = (i_r + h_r).sigmoid()
    z = (i_z + h_z).sigmoid()
    n = (i_n + r * h_n).tanh()
    return n + z * (hx - n)


def _run_rnn(step, n_state, input, batch_sizes, hx, params, has_biases, num_layers,
             dropout, train, bidirectional, batch_first):
    """The layers and directions of an RNN over a padded (``batch_sizes`` None) or packed
    sequence; ``step(x, state, weights) -> state`` with ``state[0]`` the output."""
    num_dir = 2 if bidirectional else 1
    per = 4 if has_biases else 2
    groups = num_layers * num_dir
    if len(params) not in (groups * per, groups * (per + 1)):
        raise RuntimeError(f"rnn: expected {groups * per} parameters ({num_layers} layers, "
                           f"{num_dir} directions, biases={bool(has_biases)}), got "
                           f"{len(params)}")
    per = len(params) // groups
    states = list(hx) if isinstance(hx, (tuple, list)) else [hx]
    if len(states) != n_state:
        raise RuntimeError(f"rnn: expected {n_state} hidden state tensors, got {len(states)}")
    if batch_sizes is None:
        x = input.transpose(0, 1) if batch_first else input
        if x.ndim != 3:
            raise RuntimeError(f"input must have 3 dimensions, got {input.ndim}")
        sizes = [x.shape[1]] * x.shape[0]
        steps_in = list(x.unbind(0))
    else:
        sizes = [int(b) for b in batch_sizes.tolist()]
        steps_in = list(input.split(sizes, 0))
    finals = [[] for _ in range(n_state)]
    for layer in range(num_layers):
        outs = []
        for direction in range(num_dir):
            k = layer * num_dir + direction
            w = params[k * per:(k + 1) * per]
            state = [s[k] for s in states]
            ys = [None] * len(sizes)
            order = range(len(sizes)) if direction == 0 else reversed(range(len(sizes)))
            for t in order:
                bt = sizes[t]
                full = state[0].shape[0]
                new = step(steps_in[t], [s[:bt] for s in state], w)
                state = [ns if bt == full else _ops.cat([ns, s[bt:]], 0)
                         for ns, s in zip(new, state)]
                ys[t] = new[0]
            for j in range(n_state):
                finals[j].append(state[j])
            outs.append(ys)
        steps_in = [o[0] if num_dir == 1 else _ops.cat([o[0], o[1]], -1)
                    for o in zip(*outs)]
        if dropout and train and layer < num_layers - 1:
            steps_in = list(_ops_nn.dropout(_ops.cat(steps_in, 0), dropout, True).split(
                sizes, 0))
    if batch_sizes is None:
        output = _ops.stack(steps_in, 0)
        output = output.transpose(0, 1) if batch_first else output
    else:
        output = _ops.cat(steps_in, 0)
    return (output, *(_ops.stack(f, 0) for f in finals))


def _weights(w):
    # w_ih, w_hh, then the biases (when present), then an LSTM's projection weight
    w_ih, w_hh = w[0], w[1]
    b_ih, b_hh = (w[2], w[3]) if len(w) >= 4 else (None, None)
    w_hr = w[-1] if len(w) in (3, 5) else None
    return w_ih, w_hh, b_ih, b_hh, w_hr


def _lstm_step(x, state, w):
    w_ih, w_hh, b_ih, b_hh, w_hr = _weights(w)
    h, c = lstm_cell(x, state, w_ih, w_hh, b_ih, b_hh)
    return [h if w_hr is None else _lin(h, w_hr, None), c]


def _gru_step(x, state, w):
    w_ih, w_hh, b_ih, b_hh, _ = _weights(w)
    return [gru_cell(x, state[0], w_ih, w_hh, b_ih, b_hh)]


def _tanh_step(x, state, w):
    w_ih, w_hh, b_ih, b_hh, _ = _weights(w)
    return [rnn_tanh_cell(x, state[0], w_ih, w_hh, b_ih, b_hh)]


def _relu_step(x, state, w):
    w_ih, w_hh, b_ih, b_hh, _ = _weights(w)
    return [rnn_relu_cell(x, state[0], w_ih, w_hh, b_ih, b_hh)]


def _sequence_fn(name, step, n_state, doc):
    def fn(input, *args):
        # PyTorch's two overloads: (input, hx, params, has_biases, num_layers, dropout,
        # train, bidirectional, batch_first) for padded input, and (data, batch_sizes, hx,
        # params, has_biases, num_layers, dropout, train, bidirectional) for packed input,
        # told apart by where the parameter list is
        if len(args) == 8 and isinstance(args[1], (list, tuple)):
            hx, params, has_biases, num_layers, dropout, train, bidir, batch_first = args
            return _run_rnn(step, n_state, input, None, hx, params, has_biases, num_layers,
                            dropout, train, bidir, batch_first)
        if len(args) == 8 and isinstance(args[0], Tensor):
            batch_sizes, hx, params, has_biases, num_layers, dropout, train, bidir = args
            return _run_rnn(step, n_state, input, batch_sizes, hx, params, has_biases,
                            num_layers, dropout, train, bidir, False)
        raise TypeError(f"{name}() expects (input, hx, params, has_biases, num_layers, "
                        "dropout, train, bidirectional, batch_first) or (data, batch_sizes, "
                        "hx, params, has_biases, num_layers, dropout, train, bidirectional)")

    fn.__name__ = name
    fn.__doc__ = doc
    return fn


lstm = _sequence_fn("lstm", _lstm_step, 2, """A multi-layer LSTM over a whole sequence, as
    ``torch.lstm``: ``hx`` is ``(h0, c0)``, ``params`` the flat weight list of
    :class:`torcia.nn.LSTM` (``w_ih, w_hh[, b_ih, b_hh][, w_hr]`` per layer and direction);
    returns ``(output, h_n, c_n)``. A packed sequence is given as ``(data, batch_sizes,
    hx, params, ...)``.

    Examples
    --------
    >>> import torcia
    >>> w = [torcia.ones(4, 2), torcia.ones(4, 1)]
    >>> out, h, c = torcia.lstm(torcia.ones(5, 3, 2), (torcia.zeros(1, 3, 1),
    ...                         torcia.zeros(1, 3, 1)), w, False, 1, 0.0, False, False, False)
    >>> out.shape, h.shape
    (torcia.Size([5, 3, 1]), torcia.Size([1, 3, 1]))
    """)
gru = _sequence_fn("gru", _gru_step, 1, """A multi-layer GRU over a whole sequence, as
    ``torch.gru``; returns ``(output, h_n)``. Arguments as :func:`torcia.lstm`, with one
    hidden state tensor.""")
rnn_tanh = _sequence_fn("rnn_tanh", _tanh_step, 1, """A multi-layer Elman RNN (tanh) over a
    whole sequence, as ``torch.rnn_tanh``; returns ``(output, h_n)``.""")
rnn_relu = _sequence_fn("rnn_relu", _relu_step, 1, """A multi-layer Elman RNN (ReLU) over a
    whole sequence, as ``torch.rnn_relu``; returns ``(output, h_n)``.""")


# ---------------------------------------------------------------------------------------
# convolution entry points
# ---------------------------------------------------------------------------------------


def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding,
                groups):
    """PyTorch's generic convolution: 1-, 2- or 3-D by ``weight``'s rank, transposed or
    not; the arguments are all positional, as ``torch.convolution``'s.

    Examples
    --------
    >>> import torcia
    >>> torcia.convolution(torcia.ones(1, 1, 4), torcia.ones(1, 1, 2), None, [1], [0], [1],
    ...                    False, [0], 1)
    tensor([[[2., 2., 2.]]])
    """
    n = weight.ndim - 2
    if n not in (1, 2, 3):
        raise RuntimeError(f"convolution: expected a 3-D, 4-D or 5-D weight, got "
                           f"{weight.ndim}-D")
    if transposed:
        fn = getattr(_ops_nn, f"conv_transpose{n}d")
        return fn(input, weight, bias, stride, padding, output_padding, groups, dilation)
    return getattr(_ops_nn, f"conv{n}d")(input, weight, bias, stride, padding, dilation,
                                         groups)


@autocast_as("conv_tbc")
def conv_tbc(input, weight, bias, pad=0):
    """1-D convolution over a ``(time, batch, channels)`` input with a ``(kernel,
    in_channels, out_channels)`` weight, ``pad`` zeros at each end of time.

    Examples
    --------
    >>> import torcia
    >>> torcia.conv_tbc(torcia.ones(4, 1, 1), torcia.ones(2, 1, 1), torcia.zeros(1)).shape
    torcia.Size([3, 1, 1])
    """
    if input.ndim != 3:
        raise RuntimeError("Input must have 3 dims: time, batch, in_channel")
    if weight.ndim != 3:
        raise RuntimeError("Weight tensor must have 3 dims: kernel_width, in_channels, "
                           "out_channels.")
    if bias.ndim != 1:
        raise RuntimeError("Bias must be 1-D")
    if input.shape[2] != weight.shape[1]:
        raise RuntimeError("Input dim 2 (input channels) is not == dim 1 in the weight tensor")
    out = _ops_nn.conv1d(input.permute(1, 2, 0), weight.permute(2, 1, 0), bias, 1, pad)
    return out.permute(2, 0, 1)


# ---------------------------------------------------------------------------------------
# SyncBatchNorm's statistics (PyTorch's batch_norm_* functions)
# ---------------------------------------------------------------------------------------


def _reduce_dims(x):
    return [d for d in range(x.ndim) if d != 1]


def _per_channel(v, x):
    return v.reshape(1, -1, *([1] * (x.ndim - 2)))


def batch_norm_stats(input, eps):
    """Per-channel mean and inverse standard deviation ``1 / sqrt(var + eps)`` (biased
    variance) of an ``N x C x ...`` input: the local step of SyncBatchNorm.

    Examples
    --------
    >>> import torcia
    >>> torcia.batch_norm_stats(torcia.tensor([[1.0], [3.0]]), 0.0)
    (tensor([2.]), tensor([1.]))
    """
    dims = _reduce_dims(input)
    mean = input.mean(dims)
    var = input.var(dims, correction=0)
    return mean, (var + eps).rsqrt()


def batch_norm_elemt(input, weight, bias, mean, invstd, eps):
    """``(input - mean) * invstd * weight + bias`` per channel (dimension 1).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1.0, 4.0], [3.0, 8.0]])
    >>> mean, invstd = torcia.tensor([2.0, 6.0]), torcia.tensor([1.0, 0.5])
    >>> torcia.batch_norm_elemt(x, torcia.ones(2), torcia.zeros(2), mean, invstd, 1e-5)
    tensor([[-1., -1.],
            [ 1.,  1.]])
    """
    out = (input - _per_channel(mean, input)) * _per_channel(invstd, input)
    if weight is not None:
        out = out * _per_channel(weight, input)
    if bias is not None:
        out = out + _per_channel(bias, input)
    return out


def batch_norm_gather_stats_with_counts(input, mean, invstd, running_mean, running_var,
                                        momentum, eps, counts):
    """Combine per-process statistics (rows of ``mean`` and ``invstd``, each from
    ``counts`` elements) into global ones, updating the running statistics in place
    (unbiased variance, as batch norm); returns ``(mean, invstd)``.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1.0, 4.0], [3.0, 8.0]])
    >>> mean, invstd = torcia.batch_norm_stats(x, 1e-5)
    >>> torcia.batch_norm_gather_stats_with_counts(x, mean.unsqueeze(0), invstd.unsqueeze(0),
    ...                                            None, None, 0.1, 1e-5, torcia.tensor([2.0]))
    (tensor([2., 6.]), tensor([1.0000, 0.5000]))
    """
    counts = counts.to(mean.dtype).reshape(-1, 1)
    n = counts.sum()
    g_mean = (mean * counts).sum(0) / n
    var_each = invstd.pow(-2) - eps
    var = ((var_each + (mean - g_mean) ** 2) * counts).sum(0) / n
    if running_mean is not None:
        with _no_grad():
            running_mean.mul_(1 - momentum).add_(g_mean.to(running_mean.dtype) * momentum)
    if running_var is not None:
        with _no_grad():
            unbiased = var * (n / (n - 1))
            running_var.mul_(1 - momentum).add_(unbiased.to(running_var.dtype) * momentum)
    return g_mean, (var + eps).rsqrt()


def batch_norm_gather_stats(input, mean, invstd, running_mean, running_var, momentum, eps,
                            count):
    """:func:`batch_norm_gather_stats_with_counts` with every process counting ``count``
    elements.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1.0, 4.0], [3.0, 8.0]])
    >>> mean, invstd = torcia.batch_norm_stats(x, 1e-5)
    >>> torcia.batch_norm_gather_stats(x, mean.unsqueeze(0), invstd.unsqueeze(0), None, None, 0.1,
    ...                                1e-5, 2)
    (tensor([2., 6.]), tensor([1.0000, 0.5000]))
    """
    counts = C.full((mean.shape[0],), float(count), dtype=mean.dtype, device=mean.device)
    return batch_norm_gather_stats_with_counts(input, mean, invstd, running_mean,
                                               running_var, momentum, eps, counts)


def batch_norm_update_stats(input, running_mean, running_var, momentum):
    """Per-channel mean and biased variance of ``input``; the running statistics move
    toward them by ``momentum`` (the variance unbiased), in place.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1.0, 4.0], [3.0, 8.0]])
    >>> running_mean, running_var = torcia.zeros(2), torcia.ones(2)
    >>> torcia.batch_norm_update_stats(x, running_mean, running_var, 0.5)
    (tensor([2., 6.]), tensor([1., 4.]))
    >>> running_mean, running_var
    (tensor([1., 3.]), tensor([1.5000, 4.5000]))
    """
    dims = _reduce_dims(input)
    mean = input.mean(dims)
    var = input.var(dims, correction=0)
    n = input.numel() // input.shape[1]
    with _no_grad():
        if running_mean is not None:
            running_mean.mul_(1 - momentum).add_(mean * momentum)
        if running_var is not None:
            running_var.mul_(1 - momentum).add_(var * (n / max(n - 1, 1)) * momentum)
    return mean, var


def batch_norm_backward_reduce(grad_out, input, mean, invstd, weight, input_g, weight_g,
                               bias_g):
    """The per-channel sums SyncBatchNorm's backward all-reduces: ``(sum_dy, sum_dy_xmu,
    grad_weight, grad_bias)``; the gradients asked for by ``weight_g``/``bias_g`` (None
    otherwise) and the sums only when ``input_g``."""
    dims = _reduce_dims(input)
    sum_dy = grad_out.sum(dims)
    sum_dy_xmu = (grad_out * (input - _per_channel(mean, input))).sum(dims)
    grad_weight = sum_dy_xmu * invstd if weight_g else None
    grad_bias = sum_dy if bias_g else None
    if not input_g:
        sum_dy = sum_dy_xmu = None
    return sum_dy, sum_dy_xmu, grad_weight, grad_bias


def batch_norm_backward_elemt(grad_out, input, mean, invstd, weight, sum_dy, sum_dy_xmu,
                              count):
    """The input gradient of batch norm from the all-reduced sums (``count``: elements
    per process, summed to the global count)."""
    n = count.sum().item() if isinstance(count, Tensor) else float(count)
    mean_dy = _per_channel(sum_dy / n, input)
    mean_dy_xmu = _per_channel(sum_dy_xmu / n, input)
    inv = _per_channel(invstd, input)
    xmu = input - _per_channel(mean, input)
    out = (grad_out - mean_dy - xmu * inv * inv * mean_dy_xmu) * inv
    return out if weight is None else out * _per_channel(weight, input)


# ---------------------------------------------------------------------------------------
# legacy sparse products (torch.hspmm, sspaddmm...) on torcia.sparse's COO tensors
# ---------------------------------------------------------------------------------------


def _sparse():
    # torcia.sparse imports this module (for its layout), so it is reached at call time
    from torcia import sparse

    return sparse


def dsmm(input, mat2):
    """``sparse @ dense`` as a dense tensor (``torcia.sparse.mm``).

    Examples
    --------
    >>> import torcia
    >>> sparse = torcia.tensor([[0.0, 2.0], [1.0, 0.0]]).to_sparse()
    >>> torcia.dsmm(sparse, torcia.tensor([[1.0], [3.0]]))
    tensor([[6.],
            [1.]])
    """
    return _sparse().mm(input, mat2)


def hspmm(mat1, mat2):
    """``sparse @ dense`` as a hybrid sparse tensor: one sparse dimension (the rows of
    ``mat1`` that hold entries) and a dense one.

    Examples
    --------
    >>> import torcia
    >>> s = torcia.sparse_coo_tensor([[0, 1], [1, 0]], [2.0, 3.0], (3, 2))
    >>> torcia.hspmm(s, torcia.ones(2, 2)).indices()
    tensor([[0, 1]])
    """
    sp = _sparse()
    dense = sp.mm(mat1, mat2)
    rows = C.tensor(np.unique(mat1._indices_t.cpu().numpy()[0]) if mat1._nnz()
                    else np.zeros(0, dtype=np.int64), device=dense.device)
    return sp.SparseCooTensor(rows.reshape(1, -1), dense.index_select(0, rows),
                              dense.shape, is_coalesced=True)


hsmm = hspmm


def sspaddmm(input, mat1, mat2, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat1 @ mat2)`` as a sparse tensor (``input`` and ``mat1``
    sparse, ``mat2`` dense): ``input``'s entries followed by every entry of the product's
    rows that ``mat1`` touches, not coalesced (as PyTorch).

    Examples
    --------
    >>> import torcia
    >>> sparse = torcia.tensor([[0.0, 2.0], [1.0, 0.0]]).to_sparse()
    >>> torcia.sspaddmm(sparse, sparse, torcia.eye(2), beta=1.0, alpha=1.0).to_dense()
    tensor([[0., 4.],
            [2., 0.]])
    """
    sp = _sparse()
    prod = hspmm(mat1, mat2)
    rows = prod._indices_t[0]
    k = mat2.shape[1]
    r = rows.reshape(-1, 1).expand(rows.shape[0], k).reshape(-1)
    c = C.arange(k, device=rows.device).repeat(rows.shape[0])
    idx = _ops.cat([input._indices_t, _ops.stack([r, c], 0)], 1)
    vals = _ops.cat([input._values_t * beta, prod._values_t.reshape(-1) * alpha], 0)
    return sp.SparseCooTensor(idx, vals, input.shape)


def saddmm(input, mat1, mat2, *, beta=1, alpha=1):
    """PyTorch's older name of :func:`sspaddmm`.

    Examples
    --------
    >>> import torcia
    >>> sparse = torcia.tensor([[0.0, 2.0], [1.0, 0.0]]).to_sparse()
    >>> torcia.saddmm(sparse, sparse, torcia.eye(2)).to_dense()
    tensor([[0., 4.],
            [2., 0.]])
    """
    return sspaddmm(input, mat1, mat2, beta=beta, alpha=alpha)


def smm(input, mat2):
    """``sparse @ dense`` as a sparse tensor (:func:`sspaddmm` onto an empty sparse).

    Examples
    --------
    >>> import torcia
    >>> sparse = torcia.tensor([[0.0, 2.0], [1.0, 0.0]]).to_sparse()
    >>> torcia.smm(sparse, torcia.tensor([[1.0], [3.0]])).to_dense()
    tensor([[6.],
            [1.]])
    """
    sp = _sparse()
    empty = sp.SparseCooTensor(C.zeros(2, 0, dtype=D.int64, device=mat2.device),
                               C.zeros(0, dtype=mat2.dtype, device=mat2.device),
                               (input.shape[0], mat2.shape[1]))
    return sspaddmm(empty, input, mat2)


# ---------------------------------------------------------------------------------------
# tensor queries and small methods
# ---------------------------------------------------------------------------------------


def is_conj(input) -> bool:
    """Whether ``input`` is a lazily conjugated view: never in torcia, whose
    :func:`torcia.conj` returns a conjugated copy.

    Examples
    --------
    >>> import torcia
    >>> torcia.is_conj(torcia.tensor([1 + 2j]).conj())
    False
    """
    return input.is_conj()


def is_neg(input) -> bool:
    """Whether ``input`` is a lazily negated view: never in torcia (negation is computed
    at once), so False.

    Examples
    --------
    >>> import torcia
    >>> torcia.is_neg(-torcia.tensor([1.0]))
    False
    """
    return False


def dim_order(self, *, ambiguity_check=False):
    """The dimensions from outermost to innermost in memory (by decreasing stride).

    Examples
    --------
    >>> import torcia
    >>> torcia.zeros(2, 3).t().dim_order()
    (1, 0)
    """
    strides = self.stride()
    order = sorted(range(self.ndim), key=lambda d: (-strides[d], d))
    if ambiguity_check:
        shape = self.shape
        if any(shape[d] == 1 for d in range(self.ndim)) or len(set(strides)) < len(strides):
            raise RuntimeError("The tensor does not have unique dim order, or cannot map to "
                               "exact one of the given memory formats.")
    return tuple(order)


def is_set_to(self, tensor) -> bool:
    """Whether ``self`` and ``tensor`` view the same memory with the same size, strides
    and device.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.arange(4)
    >>> x.is_set_to(x.view(4)), x.is_set_to(x.clone())
    (True, False)
    """
    return (self._device == tensor._device and self.data_ptr() == tensor.data_ptr()
            and self.shape == tensor.shape and self.stride() == tensor.stride()
            and self.dtype is tensor.dtype)


def map_(self, tensor, callable):  # noqa: A002 - PyTorch's argument name
    """Apply ``callable(a, b)`` to each element ``a`` of ``self`` and ``b`` of ``tensor``
    (broadcast to ``self``), writing the results into ``self`` (CPU tensors, as
    PyTorch).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([1.0, 2.0])
    >>> x.map_(torcia.tensor([10.0, 20.0]), lambda a, b: a + b)
    tensor([11., 22.])
    """
    return _map(self, [tensor], callable)


def map2_(self, x, y, callable):  # noqa: A002 - PyTorch's argument name
    """Apply ``callable(a, b, c)`` elementwise over ``self``, ``x`` and ``y`` into
    ``self``.

    Examples
    --------
    >>> import torcia
    >>> a = torcia.tensor([1.0, 2.0])
    >>> a.map2_(torcia.tensor([10.0, 20.0]), torcia.tensor([3.0, 4.0]), lambda a, b, c: a + b * c)
    tensor([31., 82.])
    """
    return _map(self, [x, y], callable)


def _map(self, others, fn):
    if self._device.type != "cpu":
        raise RuntimeError("map_ is only implemented on CPU tensors")
    if self._requires_grad and _GRAD.enabled:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place "
                           "operation.")
    arrays = [np.broadcast_to(o.detach().cpu().numpy(), self.shape) for o in others]
    out = self._data
    for pos in np.ndindex(*out.shape):
        out[pos] = fn(out[pos].item(), *(a[pos].item() for a in arrays))
    self._vc[0] += 1
    return self


def module_load(self, other, assign=False):
    """What ``nn.Module.load_state_dict`` stores for parameter ``self`` given ``other``:
    ``other`` detached when ``assign``, else ``self`` with ``other`` copied in.

    Examples
    --------
    >>> import torcia
    >>> weight = torcia.zeros(2)
    >>> weight.module_load(torcia.tensor([1.0, 2.0])) is weight, weight
    (False, tensor([1., 2.]))
    """
    if assign:
        return other.detach()
    with _no_grad():
        return self.copy_(other).detach()


def as_subclass(self, cls):
    """A tensor of class ``cls`` (a subclass of :class:`torcia.Tensor`) sharing ``self``'s
    data and attached to its graph (an alias: gradients flow back to ``self``).

    Examples
    --------
    >>> import torcia
    >>> class Mine(torcia.Tensor):
    ...     pass
    >>> type(torcia.ones(2).as_subclass(Mine)).__name__
    'Mine'
    """
    if not (isinstance(cls, type) and issubclass(cls, Tensor)):
        raise TypeError(f"as_subclass: expected a subclass of torcia.Tensor, got {cls!r}")
    alias = _ops.view(self, tuple(self.shape))
    out = object.__new__(cls)
    for slot in Tensor.__slots__:
        if slot not in ("__weakref__", "__dict__"):
            setattr(out, slot, getattr(alias, slot))
    return out


def cfloat(self):
    """``self.to(torcia.cfloat)`` (complex64).

    Examples
    --------
    >>> import torcia
    >>> torcia.tensor([1.0, 2.0]).cfloat()
    tensor([1.+0.j, 2.+0.j])
    """
    return self.to(D.complex64)


def cdouble(self):
    """``self.to(torcia.cdouble)`` (complex128).

    Examples
    --------
    >>> import torcia
    >>> torcia.tensor([1.0, 2.0]).cdouble()
    tensor([1.+0.j, 2.+0.j], dtype=torcia.complex128)
    """
    return self.to(D.complex128)


def sparse_dim(self) -> int:
    """The number of sparse dimensions: 0 for a dense tensor.

    Examples
    --------
    >>> import torcia
    >>> torcia.zeros(2, 3).sparse_dim()
    0
    """
    return 0


def dense_dim(self) -> int:
    """The number of dense dimensions: all of a dense tensor's.

    Examples
    --------
    >>> import torcia
    >>> torcia.zeros(2, 3).dense_dim()
    2
    """
    return self.ndim


def sparse_mask(self, mask):
    """The elements of dense ``self`` at the entries of the sparse ``mask``, as a sparse
    tensor with ``mask``'s indices (differentiable in ``self``).

    Examples
    --------
    >>> import torcia
    >>> m = torcia.sparse_coo_tensor([[0, 1], [1, 0]], [1.0, 1.0], (2, 2))
    >>> torcia.tensor([[1.0, 2.0], [3.0, 4.0]]).sparse_mask(m).to_dense()
    tensor([[0., 2.],
            [3., 0.]])
    """
    sp = _sparse()
    if not isinstance(mask, sp.SparseCooTensor):
        raise RuntimeError("sparse_mask expects mask to be sparse")
    if tuple(mask.shape) != tuple(self.shape):
        raise RuntimeError(f"sparse_mask(): operands have incompatible sizes; self has size "
                           f"{list(self.shape)} but mask has size {list(mask.shape)}")
    idx = mask._indices_t
    values = self[tuple(idx[d] for d in range(idx.shape[0]))]
    return sp.SparseCooTensor(idx, values, self.shape, is_coalesced=mask.is_coalesced())


def init_num_threads() -> None:
    """Pass the thread count set by :func:`torcia.set_num_threads` on to the kernels of the
    calling thread (native plugins keep it per thread).

    Examples
    --------
    >>> import torcia
    >>> torcia.init_num_threads()
    >>> torcia.get_num_threads() >= 1
    True
    """
    import torcia

    torcia.set_num_threads(torcia.get_num_threads())


# ---------------------------------------------------------------------------------------
# process-wide defaults and errors
# ---------------------------------------------------------------------------------------


def set_default_device(device) -> None:
    """The device that factory functions (``torcia.tensor``, ``zeros``, ``arange``,
    ``randn``...) use when given none; None restores the CPU. Ops on existing tensors
    keep their inputs' device.

    Examples
    --------
    >>> import torcia
    >>> torcia.set_default_device("meta")
    >>> torcia.zeros(2).device
    device(type='meta')
    >>> torcia.set_default_device(None)
    """
    from torcia._tensor import DEFAULT_DEVICE
    from torcia.backend import CPU, canonical

    DEFAULT_DEVICE[0] = CPU if device is None else canonical(device)


def get_default_device():
    """The device factory functions use when given none (see :func:`set_default_device`).

    Examples
    --------
    >>> import torcia
    >>> torcia.get_default_device()
    device(type='cpu')
    """
    from torcia._tensor import DEFAULT_DEVICE

    return DEFAULT_DEVICE[0]


def set_default_tensor_type(t) -> None:
    """PyTorch's older way to set the default floating dtype (and device): ``t`` is a
    legacy type (``torcia.DoubleTensor``, ``torcia.cuda.FloatTensor``) or its name.

    Examples
    --------
    >>> import torcia
    >>> torcia.set_default_tensor_type(torcia.DoubleTensor)
    >>> torcia.zeros(1).dtype
    torcia.float64
    >>> torcia.set_default_tensor_type("torch.FloatTensor")
    """
    from torcia._legacy import CPU_TYPES, CUDA_TYPES

    if isinstance(t, str):
        parts = t.split(".")
        table = CUDA_TYPES if "cuda" in parts[:-1] else CPU_TYPES
        if parts[0] not in ("torch", "torcia") or parts[-1] not in table:
            raise TypeError(f"invalid type: '{t}'")
        t = table[parts[-1]]
    dt = getattr(t, "dtype", None)
    if not isinstance(dt, D.dtype) or not isinstance(getattr(t, "device_type", None), str):
        raise TypeError(f"invalid type: '{t}'")
    if not dt.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    D.set_default_dtype(dt)
    set_default_device(t.device_type)


class layout(str):  # noqa: N801 - PyTorch's name
    """A tensor memory layout: :data:`torcia.strided` (dense), :data:`torcia.sparse_coo`,
    :data:`torcia.sparse_csr` or :data:`torcia.sparse_csc` (the block layouts
    :data:`torcia.sparse_bsr` and :data:`torcia.sparse_bsc` are named, and refused by the
    conversions). Equal to its name string (``"torcia.strided"``).

    Examples
    --------
    >>> import torcia
    >>> torcia.zeros(1).layout is torcia.strided, isinstance(torcia.strided, torcia.layout)
    (True, True)
    """

    __slots__ = ()

    def __repr__(self):
        return str.__str__(self)


strided = layout("torcia.strided")
sparse_coo = layout("torcia.sparse_coo")
sparse_csr = layout("torcia.sparse_csr")
sparse_csc = layout("torcia.sparse_csc")
sparse_bsr = layout("torcia.sparse_bsr")
sparse_bsc = layout("torcia.sparse_bsc")
jagged = layout("torcia.jagged")


class memory_format(str):  # noqa: N801 - PyTorch's name
    """How a dense tensor asks to be laid out (``memory_format=`` of ``contiguous``,
    ``empty_like``, ``to``...): :data:`torcia.contiguous_format`,
    :data:`torcia.channels_last`, :data:`torcia.channels_last_3d` or
    :data:`torcia.preserve_format`.

    Examples
    --------
    >>> import torcia
    >>> torcia.channels_last
    torcia.channels_last
    """

    __slots__ = ()

    def __repr__(self):
        return str.__str__(self)


contiguous_format = memory_format("torcia.contiguous_format")
channels_last = memory_format("torcia.channels_last")
channels_last_3d = memory_format("torcia.channels_last_3d")
preserve_format = memory_format("torcia.preserve_format")


def embedding_renorm_(weight, indices, max_norm, norm_type):
    """Rescale, in place, the rows of ``weight`` named in ``indices`` whose ``norm_type``
    norm exceeds ``max_norm`` to norm ``max_norm`` (as ``nn.Embedding(max_norm=...)``);
    not recorded by autograd.

    Examples
    --------
    >>> import torcia
    >>> w = torcia.tensor([[3.0, 4.0], [0.3, 0.4]])
    >>> torcia.embedding_renorm_(w, torcia.tensor([0, 1]), 1.0, 2.0)
    tensor([[0.6000, 0.8000],
            [0.3000, 0.4000]])
    """
    if weight.ndim != 2:
        raise RuntimeError(f"embedding_renorm_(): expected weight to be a 2-D tensor, got "
                           f"{weight.ndim}-D")
    if indices.dtype not in (D.int64, D.int32):
        raise RuntimeError(f"embedding_renorm_(): Expected dtype int32/int64 for indices but "
                           f"got: {indices.dtype}")
    with _no_grad():
        rows = C.tensor(np.unique(indices.cpu().numpy().reshape(-1)), device=weight.device)
        picked = weight.index_select(0, rows)
        norms = linalg.vector_norm(picked, norm_type, dim=1)
        scale = _ops.where(norms > max_norm, max_norm / (norms + 1e-7),
                           C.ones_like(norms))
        weight.index_copy_(0, rows, picked * scale.unsqueeze(1))
    return weight


class Stream:
    """A device-generic stream, as ``torch.Stream``. The CPU runs each op to completion
    before the next starts, so a CPU stream is always idle (``query()`` is True) and
    waiting on it returns at once; ``Stream(device="cuda")`` gives the CUDA plugin's
    stream (:func:`torcia.cuda.Stream`).

    Examples
    --------
    >>> import torcia
    >>> s = torcia.Stream()
    >>> s.query(), s.device_type
    (True, 'cpu')
    """

    def __new__(cls, device=None, *, priority=0, **kwargs):
        from torcia.backend import canonical

        dev = canonical(device) if device is not None else get_default_device()
        if dev.type == "cuda":
            from torcia import cuda

            return cuda.Stream(dev, priority)
        if dev.type not in ("cpu", "meta"):
            raise RuntimeError(f"torcia.Stream: no stream for device type {dev.type!r}")
        self = object.__new__(cls)
        self.device = dev
        self.device_type = dev.type
        self.device_index = -1 if dev.index is None else dev.index
        self.stream_id = 0
        self.priority = priority
        return self

    def query(self) -> bool:
        """Whether all work on the stream is done: always, on the CPU."""
        return True

    def synchronize(self) -> None:
        """Wait for the stream's work: none is pending on the CPU."""

    def wait_event(self, event) -> None:
        """Make later work wait for ``event``: CPU events complete when recorded."""

    def wait_stream(self, stream) -> None:
        """Make later work wait for ``stream``'s current work (done at once on the CPU)."""

    def record_event(self, event=None):
        """Record ``event`` (a new one by default) on this stream; returns it."""
        event = Event(self.device) if event is None else event
        event.record(self)
        return event

    def __eq__(self, other):
        return isinstance(other, Stream) and (self.device, self.stream_id) == (
            other.device, other.stream_id)

    def __hash__(self):
        return hash((self.device_type, self.device_index, self.stream_id))

    def __repr__(self):
        return (f"torcia.Stream device_type={self.device_type}, "
                f"device_index={self.device_index}, stream_id={self.stream_id}")


class Event:
    """A device-generic event, as ``torch.Event``: on the CPU an event completes when it
    is recorded, and with ``enable_timing=True`` it keeps the time it was recorded, for
    :meth:`elapsed_time` (milliseconds).

    Examples
    --------
    >>> import torcia
    >>> a, b = torcia.Event(enable_timing=True), torcia.Event(enable_timing=True)
    >>> a.record(); b.record()
    >>> a.elapsed_time(b) >= 0.0
    True
    """

    def __init__(self, device=None, *, enable_timing=False, blocking=False, interprocess=False):
        from torcia.backend import canonical

        self.device = canonical(device) if device is not None else get_default_device()
        if self.device.type not in ("cpu", "meta"):
            raise RuntimeError(f"torcia.Event: use the {self.device.type} plugin's events "
                               f"(torcia.{self.device.type}.Event) for that device")
        self.device_type = self.device.type
        self.enable_timing = enable_timing
        self._time = None

    def record(self, stream=None) -> None:
        """Mark the point reached on ``stream``: now, on the CPU."""
        import time

        self._time = time.perf_counter()

    def query(self) -> bool:
        """Whether the work before the record is done: always, on the CPU."""
        return True

    def synchronize(self) -> None:
        """Wait until the event completes (it has, on the CPU)."""

    def wait(self, stream=None) -> None:
        """Make ``stream`` wait for this event (nothing to wait for on the CPU)."""

    def elapsed_time(self, end_event) -> float:
        """Milliseconds from this event's record to ``end_event``'s."""
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        if self._time is None or end_event._time is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        return (end_event._time - self._time) * 1000.0

    def __repr__(self):
        return f"torcia.Event device_type={self.device_type}"


def get_device_module(device=None):
    """The module of a device type's services: ``torcia.cuda`` for "cuda", ``torcia.cpu``
    for "cpu"; without ``device``, the current accelerator's (CUDA when available) or the
    CPU's.

    Examples
    --------
    >>> import torcia
    >>> torcia.get_device_module("cpu").device_count()
    1
    """
    import importlib

    from torcia.backend import device as _device

    if device is None:
        from torcia import cuda

        name = "cuda" if cuda.is_available() else "cpu"
    else:
        name = device if isinstance(device, str) else _device(device).type
        name = name.split(":")[0]
    if name not in ("cpu", "cuda"):
        raise RuntimeError(f"Device '{name}' does not have a corresponding module registered "
                           f"as 'torcia.{name}'.")
    return importlib.import_module(f"torcia.{name}")


def is_anomaly_enabled() -> bool:
    """Whether autograd's anomaly detection is on (``torcia.autograd.set_detect_anomaly``);
    False while no autograd engine is loaded.

    Examples
    --------
    >>> import torcia
    >>> torcia.is_anomaly_enabled()
    False
    """
    engine = AUTOGRAD.engine
    return bool(engine is not None and engine.ANOMALY.enabled)


def is_anomaly_check_nan_enabled() -> bool:
    """Whether anomaly detection also checks backward results for NaN (the default when
    it is on).

    Examples
    --------
    >>> import torcia
    >>> torcia.set_anomaly_enabled(True, check_nan=False)
    >>> torcia.is_anomaly_enabled(), torcia.is_anomaly_check_nan_enabled()
    (True, False)
    >>> torcia.set_anomaly_enabled(False)
    """
    engine = AUTOGRAD.engine
    return bool(engine is not None and engine.ANOMALY.enabled and engine.ANOMALY.check_nan)


def set_anomaly_enabled(enabled: bool, check_nan: bool = True) -> None:
    """Turn autograd's anomaly detection on or off (the function form of
    ``torcia.autograd.set_detect_anomaly``); needs torcia-autograd.

    Examples
    --------
    >>> import torcia
    >>> torcia.set_anomaly_enabled(True)
    >>> torcia.is_anomaly_enabled()
    True
    >>> torcia.set_anomaly_enabled(False)
    >>> torcia.is_anomaly_enabled()
    False
    """
    from torcia._tensor import load_autograd

    anomaly = load_autograd().ANOMALY
    anomaly.enabled = bool(enabled)
    anomaly.check_nan = bool(check_nan)


class OutOfMemoryError(RuntimeError):
    """A device ran out of memory (PyTorch's ``torch.OutOfMemoryError``, also
    ``torch.cuda.OutOfMemoryError``).

    Examples
    --------
    >>> import torcia
    >>> issubclass(torcia.OutOfMemoryError, RuntimeError)
    True
    """


class AcceleratorError(RuntimeError):
    """An accelerator reported an error (PyTorch's ``torch.AcceleratorError``).

    Examples
    --------
    >>> import torcia
    >>> issubclass(torcia.AcceleratorError, RuntimeError)
    True
    """


def _name(self):
    """The tensor's name: None, as in PyTorch (a name only Python-side code sets).

    Examples
    --------
    >>> import torcia
    >>> torcia.zeros(2).name is None
    True
    """
    return None


def _volatile(self):
    """Removed in PyTorch 0.4: always False, with PyTorch's warning.

    Examples
    --------
    >>> import warnings
    >>> import torcia
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter('ignore')
    ...     volatile = torcia.zeros(2).volatile
    >>> volatile
    False
    """
    warnings.warn("volatile was removed (Variable.volatile is always False)", UserWarning,
                  stacklevel=2)
    return False


#: Tensor methods defined here (name -> function)
METHODS = {
    "t_": t_, "transpose_": transpose_, "swapaxes_": swapaxes_, "swapdims_": swapdims_,
    "squeeze_": squeeze_, "unsqueeze_": unsqueeze_, "as_strided_": as_strided_,
    "resize_": resize_, "resize_as_": resize_as_, "resize": resize, "resize_as": resize_as,
    "addmm_": addmm_, "conj_physical_": conj_physical_, "float_power_": float_power_,
    "index_reduce": index_reduce,
    "index_reduce_": lambda self, *a, **k: inplace(index_reduce, self, *a, **k),
    "nonzero_static": nonzero_static, "new_empty_strided": new_empty_strided,
    "as_strided_scatter": as_strided_scatter, "is_neg": is_neg, "dim_order": dim_order,
    "is_set_to": is_set_to, "map_": map_, "map2_": map2_, "module_load": module_load,
    "as_subclass": as_subclass, "cfloat": cfloat, "cdouble": cdouble,
    "sparse_dim": sparse_dim, "dense_dim": dense_dim, "sparse_mask": sparse_mask,
    "name": property(_name), "volatile": property(_volatile),
}
METHODS["index_reduce_"].__name__ = "index_reduce_"
METHODS["index_reduce_"].__doc__ = "In-place :meth:`Tensor.index_reduce`."

__all__ = [
    *_TOP_INPLACE, "as_strided_", "conj_physical_", "dropout_", "alpha_dropout_",
    "feature_alpha_dropout_", "feature_dropout", "feature_dropout_",
    "index_reduce", "nonzero_static", "empty_strided", "empty_permuted",
    "as_strided_scatter", "frombuffer", "from_file", "gradient", "histogramdd",
    "nuclear_norm", "cond", "rnn_tanh_cell", "rnn_relu_cell", "lstm_cell", "gru_cell", "lstm",
    "gru", "rnn_tanh", "rnn_relu", "convolution", "conv_tbc", "batch_norm_stats",
    "batch_norm_elemt", "batch_norm_gather_stats", "batch_norm_gather_stats_with_counts",
    "batch_norm_update_stats", "batch_norm_backward_reduce", "batch_norm_backward_elemt",
    "dsmm", "hspmm", "hsmm", "sspaddmm", "saddmm", "smm", "is_conj", "is_neg",
    "init_num_threads", "set_default_device", "get_default_device", "set_default_tensor_type",
    "OutOfMemoryError", "AcceleratorError", "layout", "strided", "sparse_coo", "sparse_csr",
    "sparse_csc", "sparse_bsr", "sparse_bsc", "jagged",
    "memory_format", "contiguous_format", "channels_last", "channels_last_3d",
    "preserve_format", "embedding_renorm_", "Stream", "Event", "get_device_module",
    "is_anomaly_enabled", "is_anomaly_check_nan_enabled", "set_anomaly_enabled",
]
