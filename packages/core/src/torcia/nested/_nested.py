"""Jagged nested tensors: the components' rows concatenated (``values``) with the
``offsets`` where each component starts; see :mod:`torcia.nested`."""

from __future__ import annotations

import itertools
import math
import weakref

import numpy as np

import torcia
from torcia import Tensor
from torcia import ops as _oplist
from torcia._oplib.runtime import jagged, strided
from torcia._wrapped import WrappedTensor, methods_torch_function

_counter = itertools.count(1)
#: one symbolic ragged size per offsets tensor (by identity: tensors compare elementwise),
#: dropped with it: tensors sharing offsets share it
_RAGGED: dict = {}


class RaggedSize:
    """The size of a ragged dimension: it differs from component to component; it prints
    as PyTorch's symbolic ``j1`` and equals only itself (tensors that share offsets share
    it).

    Examples
    --------
    >>> import torcia
    >>> nt = torcia.nested.nested_tensor([torcia.ones(1), torcia.ones(3)], layout=torcia.jagged)
    >>> j = nt.shape[1]
    >>> j == (nt + 1).shape[1], j == 3
    (True, False)
    """

    __slots__ = ("name", "__weakref__")

    def __init__(self):
        self.name = f"j{next(_counter)}"

    def __repr__(self):
        return self.name

    __str__ = __repr__


def _ragged_of(offsets: Tensor) -> RaggedSize:
    key = id(offsets)
    entry = _RAGGED.get(key)
    if entry is None or entry[0]() is not offsets:
        entry = _RAGGED[key] = (weakref.ref(offsets, lambda _, k=key: _RAGGED.pop(k, None)),
                                RaggedSize())
    return entry[1]


class NestedTensor(WrappedTensor):
    """A batch of tensors of different lengths in one dimension (``layout`` jagged): the
    rows of the components concatenated in ``values`` and the ``offsets`` where each
    component starts.

    The ragged dimension is dimension 1, or another after ``transpose`` (attention's
    ``(B, heads, j, head_dim)``); ``values`` keeps the ragged rows first and the other
    dimensions in the order the nested tensor shows them.

    Examples
    --------
    >>> import torcia
    >>> nt = torcia.nested.nested_tensor_from_jagged(torcia.arange(10.0).reshape(5, 2),
    ...                                              torcia.tensor([0, 2, 5]))
    >>> [t.shape for t in nt.unbind()]
    [torcia.Size([2, 2]), torcia.Size([3, 2])]
    >>> nt.sum(1)
    tensor([[ 2.,  4.],
            [18., 21.]])
    """

    __slots__ = ("_values_t", "_offsets_t", "_ragged_idx", "_layout")
    #: ``torcia.exp(nt)`` runs ``nt.exp()`` (the ``__torch_function__`` protocol)
    __torch_function__ = classmethod(methods_torch_function)

    is_nested = True

    def __init__(self, values: Tensor, offsets: Tensor, ragged_idx: int = 1, layout=jagged):
        self._values_t = values
        self._offsets_t = offsets
        self._ragged_idx = ragged_idx
        self._layout = layout
        self._init_tensor_slots(values)

    def _like(self, values, ragged_idx=None):
        return NestedTensor(values, self._offsets_t,
                            self._ragged_idx if ragged_idx is None else ragged_idx,
                            self._layout)

    @property
    def _inner(self) -> Tensor:
        return self._values_t

    def _no_dense_data(self, op: str) -> str:
        return (f"Could not run '{op}' with a nested tensor: torcia has no jagged kernel of it; "
                "call the method form on the nested tensor, use its values(), or pad it with "
                "torcia.nested.to_padded_tensor")

    # ----- structure ----------------------------------------------------------------
    @property
    def layout(self):
        return self._layout

    def values(self) -> Tensor:
        """The components' rows concatenated: ``(sum of lengths, *other dims)``."""
        return self._values_t

    def offsets(self) -> Tensor:
        """Where each component's rows start in :meth:`values` (and the end), int64."""
        return self._offsets_t

    def lengths(self):
        """None: the components are contiguous in :meth:`values` (PyTorch's convention)."""
        return None

    def _lengths(self) -> np.ndarray:
        return np.diff(self._offsets_t.cpu().numpy())

    @property
    def shape(self):
        inner = list(self._values_t.shape[1:])
        inner.insert(self._ragged_idx - 1, _ragged_of(self._offsets_t))
        return torcia.Size([self._offsets_t.shape[0] - 1, *inner])

    def size(self, dim=None):
        shape = self.shape
        return shape if dim is None else shape[dim]

    @property
    def ndim(self) -> int:
        return self._values_t.ndim + 1

    def dim(self) -> int:
        return self._values_t.ndim + 1

    def numel(self) -> int:
        return self._values_t.numel()

    def is_contiguous(self, memory_format=None) -> bool:
        return True

    def __len__(self):
        return self._offsets_t.shape[0] - 1

    def _values_dim(self, dim: int) -> int:
        """The dim of ``values`` holding the nested tensor's ``dim`` (batch and ragged:
        no single one)."""
        dim = dim % self.ndim
        if dim == 0:
            raise RuntimeError("the batch dimension of a nested tensor has no single dim in "
                               "its values")
        if dim == self._ragged_idx:
            return 0
        return dim if dim < self._ragged_idx else dim - 1

    def unbind(self, dim=0):
        """The components (views of the values)."""
        if dim != 0:
            raise RuntimeError("unbind(): nested tensors can only be unbound along dim 0")
        bounds = self._offsets_t.tolist()
        comps = [self._values_t[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
        if self._ragged_idx != 1:
            # the ragged rows first in values, in place ragged_idx - 1 in each component
            comps = [c.movedim(0, self._ragged_idx - 1) for c in comps]
        return tuple(comps)

    def to_padded_tensor(self, padding, output_size=None):
        return to_padded_tensor(self, padding, output_size)

    def __repr__(self):
        size = tuple(self.shape)
        return (f"NestedTensor(size={size}, offsets={self._offsets_t!r}, "
                f"contiguous=True)").replace("'", "")

    # ----- autograd and moves -------------------------------------------------------
    @property
    def grad(self):
        g = self._values_t.grad
        return None if g is None else self._like(g)

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        if isinstance(gradient, NestedTensor):
            gradient = gradient._values_t
        self._values_t.backward(gradient, retain_graph, create_graph, inputs)

    def detach(self):
        return self._like(self._values_t.detach())

    def clone(self, *, memory_format=None):
        return self._like(self._values_t.clone())

    def to(self, *args, **kwargs):
        values = self._values_t.to(*args, **kwargs)
        return NestedTensor(values, self._offsets_t.to(values.device), self._ragged_idx,
                            self._layout)

    def contiguous(self, memory_format=None):
        return self

    def __matmul__(self, other):
        """A nested tensor times a dense matrix (or vector) on its last dimension."""
        if self._ragged_idx == self.ndim - 1:
            raise RuntimeError("matmul of a nested tensor over its ragged dimension is not "
                               "supported")
        return self._like(self._values_t @ other)

    matmul = __matmul__

    # ----- shape ops ------------------------------------------------------------------
    def transpose(self, dim0, dim1):
        """Swap two dimensions other than the batch's (the ragged one may move)."""
        n = self.ndim
        dim0, dim1 = dim0 % n, dim1 % n
        if 0 in (dim0, dim1):
            raise RuntimeError("Transposing the batch dimension of a nested tensor is not "
                               "supported")
        order = list(range(n))
        order[dim0], order[dim1] = order[dim1], order[dim0]
        return self._permuted(order)

    def permute(self, *dims):
        dims = tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], (list, tuple)) else dims
        dims = [d % self.ndim for d in dims]
        if dims[0] != 0:
            raise RuntimeError("Permuting the batch dimension of a nested tensor is not "
                               "supported")
        return self._permuted(dims)

    def _permuted(self, order):
        """The nested tensor whose dim ``k`` is this one's ``order[k]``."""
        new_ragged = order.index(self._ragged_idx)
        regular = [d for d in order[1:] if d != self._ragged_idx]
        values = self._values_t.permute(0, *(self._values_dim(d) for d in regular))
        return self._like(values, new_ragged)

    def unflatten(self, dim, sizes):
        """Split a regular dimension into ``sizes``."""
        vd = self._values_dim(dim)
        if vd == 0:
            raise RuntimeError("unflatten(): the ragged dimension of a nested tensor cannot "
                               "be split")
        shift = len(sizes) - 1 if dim % self.ndim < self._ragged_idx else 0
        return self._like(self._values_t.unflatten(vd, sizes), self._ragged_idx + shift)

    def reshape(self, *shape):
        """A new shape that keeps the batch and the ragged dimension (give them as -1 or
        as this tensor's sizes) and reshapes the others."""
        shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (list, tuple)) \
            else shape
        if self._ragged_idx != 1 or len(shape) < 2:
            raise RuntimeError("reshape of a nested tensor keeps the batch and the ragged "
                               "dimension 1 first")
        if shape[0] not in (-1, len(self)) or not (shape[1] == -1 or
                                                    shape[1] is self.shape[1]):
            raise RuntimeError(f"reshape of a nested tensor of size {tuple(self.shape)} to "
                               f"{shape}: the batch and ragged dimensions must stay")
        return self._like(self._values_t.reshape(self._values_t.shape[0], *shape[2:]))

    view = reshape

    def unsqueeze(self, dim):
        dim = dim % (self.ndim + 1)
        if dim == 0:
            raise RuntimeError("unsqueeze(0) of a nested tensor is not supported")
        vd = dim if dim <= self._ragged_idx else dim - 1
        ragged = self._ragged_idx + (1 if dim <= self._ragged_idx else 0)
        return self._like(self._values_t.unsqueeze(vd), ragged)

    # ----- reductions and normalizations -------------------------------------------------
    def _batch_rows(self) -> Tensor:
        """The component each row of the values belongs to."""
        lengths = torcia.tensor(self._lengths(), device=self._values_t.device)
        return torcia.repeat_interleave(torcia.arange(len(self), device=lengths.device),
                                        lengths)

    def sum(self, dim=None, keepdim=False, dtype=None):
        """Over regular dimensions (a nested tensor), or over the ragged one (dense: one
        row per component)."""
        return self._reduce(dim, keepdim, dtype, mean=False)

    def mean(self, dim=None, keepdim=False, dtype=None):
        return self._reduce(dim, keepdim, dtype, mean=True)

    def _reduce(self, dim, keepdim, dtype, mean):
        values = self._values_t if dtype is None else self._values_t.to(dtype)
        if dim is None:
            raise RuntimeError("reducing a nested tensor over all dims is not supported; "
                               "reduce over the values")
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        dims = sorted({d % self.ndim for d in dims})
        if self._ragged_idx in dims:
            if len(dims) != 1 or self._ragged_idx != 1 or keepdim:
                raise RuntimeError("reducing over the ragged dimension of a nested tensor is "
                                   "supported alone, with ragged dimension 1 and "
                                   "keepdim=False")
            total = torcia.zeros(len(self), *values.shape[1:], dtype=values.dtype,
                                 device=values.device).index_add(0, self._batch_rows(), values)
            if mean:
                lengths = torcia.tensor(self._lengths(), dtype=values.dtype,
                                        device=values.device)
                total = total / lengths.reshape(-1, *([1] * (values.ndim - 1)))
            return total
        vdims = [self._values_dim(d) for d in dims]
        out = values.mean(vdims, keepdim=keepdim) if mean else values.sum(vdims,
                                                                          keepdim=keepdim)
        ragged = self._ragged_idx - (0 if keepdim else sum(d < self._ragged_idx for d in dims))
        return self._like(out, ragged)

    def softmax(self, dim, dtype=None):
        return self._like(self._values_t.softmax(self._regular(dim, "softmax"), dtype=dtype))

    def log_softmax(self, dim, dtype=None):
        return self._like(self._values_t.log_softmax(self._regular(dim, "log_softmax"),
                                                     dtype=dtype))

    def _regular(self, dim, what):
        vd = self._values_dim(dim)
        if vd == 0:
            raise RuntimeError(f"{what}() over the ragged dimension of a nested tensor is not "
                               "supported")
        return vd


# ----- elementwise ops ----------------------------------------------------------------------

#: the unary ops of a NestedTensor: the declared ones (torcia.ops.tagged), and these
_UNARY = _oplist.tagged("nested", "unary_float", "unary_same", "unary_bool") + ("round", "sgn")


def _unary(name):
    def method(self, *args, **kwargs):
        return self._like(getattr(self._values_t, name)(*args, **kwargs))
    method.__name__ = name
    method.__doc__ = f"``{name}`` of every element."
    return method


for _name in _UNARY:
    setattr(NestedTensor, _name, _unary(_name))


def _silu(self):
    """``silu`` of every element (what ``nn.functional.silu(nt)`` runs)."""
    v = self._values_t
    return self._like(v * v.sigmoid())


NestedTensor.silu = _silu


def _operand_values(nt: NestedTensor, other):
    """``other`` as an operand of ``nt``'s values: the values of a nested tensor of the
    same structure, a number, or a dense tensor broadcast over the regular dims (or given
    per component, ``(B, 1, ...)``)."""
    if isinstance(other, NestedTensor):
        if other._offsets_t is not nt._offsets_t and not torcia.equal(other._offsets_t,
                                                                      nt._offsets_t):
            raise RuntimeError(f"cannot call binary pointwise function with inputs of shapes "
                               f"{tuple(nt.shape)} and {tuple(other.shape)}")
        if other._ragged_idx != nt._ragged_idx:
            raise RuntimeError("binary pointwise functions of nested tensors need their ragged "
                               "dimension in the same place")
        return other._values_t
    if not isinstance(other, Tensor) or other.ndim < nt.ndim - 1:
        return other
    if other.ndim == nt.ndim and other.shape[0] == len(nt) and other.shape[
            nt._ragged_idx] == 1 and nt._ragged_idx == 1:
        # one value per component: repeated over its rows
        return other.squeeze(1)[nt._batch_rows()]
    raise RuntimeError(f"cannot broadcast a dense tensor of shape {tuple(other.shape)} over a "
                       f"nested tensor of shape {tuple(nt.shape)}")


def _binary(op, a, b, float_op=False):
    fn = getattr(torcia, op)
    if isinstance(a, NestedTensor):
        return a._like(fn(a._values_t, _operand_values(a, b)))
    return b._like(fn(_operand_values(b, a), b._values_t))


NestedTensor._layout_binary = staticmethod(_binary)
for _dunder, _op, _reflected in (("__add__", "add", False), ("__radd__", "add", True),
                                 ("__sub__", "sub", False), ("__rsub__", "sub", True),
                                 ("__mul__", "mul", False), ("__rmul__", "mul", True),
                                 ("__truediv__", "div", False), ("__rtruediv__", "div", True),
                                 ("__pow__", "pow", False)):
    setattr(NestedTensor, _dunder,
            (lambda op: lambda self, other: _binary(op, other, self))(_op) if _reflected else
            (lambda op: lambda self, other: _binary(op, self, other))(_op))
for _name in _oplist.tagged("nested", "binary", "binary_float"):
    setattr(NestedTensor, _name, (lambda op: lambda self, other: _binary(op, self, other))(_name))
NestedTensor.__neg__ = _unary("neg")


# ----- construction -----------------------------------------------------------------------


def _layout_arg(layout):
    if layout not in (None, strided, jagged):
        raise RuntimeError(f"nested tensors take layout torcia.strided or torcia.jagged, got "
                           f"{layout}")
    return strided if layout is None else layout


def _from_components(tensors, layout, copy):
    tensors = [t if isinstance(t, Tensor) else torcia.tensor(t) for t in tensors]
    if not tensors:
        raise RuntimeError("nested tensors need at least one component")
    ndim = tensors[0].ndim
    if ndim == 0 or any(t.ndim != ndim for t in tensors):
        raise RuntimeError("All Tensors given to nested_tensor must have the same dim, at "
                           "least 1")
    rest = tuple(tensors[0].shape[1:])
    if any(tuple(t.shape[1:]) != rest for t in tensors):
        raise RuntimeError("torcia's nested tensors are jagged: components may differ in "
                           f"their first dimension only, got shapes "
                           f"{[tuple(t.shape) for t in tensors]}")
    lengths = [t.shape[0] for t in tensors]
    offsets = torcia.tensor(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
                            device=tensors[0].device)
    values = torcia.cat([t.detach() if copy else t for t in tensors], 0)
    return NestedTensor(values, offsets, 1, layout)


def nested_tensor(tensor_list, *, dtype=None, layout=None, device=None, requires_grad=False,
                  pin_memory=False):
    """A nested tensor of copies of ``tensor_list`` (tensors, or lists of numbers), a new
    leaf.

    Examples
    --------
    >>> import torcia
    >>> nt = torcia.nested.nested_tensor([[1.0, 2.0], [3.0]], layout=torcia.jagged)
    >>> nt.shape, nt.values()
    (torcia.Size([2, j...]), tensor([1., 2., 3.]))
    """
    nt = _from_components(tensor_list, _layout_arg(layout), copy=True)
    values = nt._values_t
    if dtype is not None or device is not None:
        values = values.to(device=device, dtype=dtype)
    nt = NestedTensor(values.clone(), nt._offsets_t.to(values.device), 1, nt._layout)
    return nt.requires_grad_() if requires_grad else nt


def as_nested_tensor(ts, dtype=None, device=None, layout=None):
    """A nested tensor of ``ts`` (a list of tensors, or a dense tensor whose rows are the
    components), differentiable: gradients reach ``ts``.

    Examples
    --------
    >>> import torcia
    >>> a = torcia.ones(2, 3, requires_grad=True)
    >>> nt = torcia.nested.as_nested_tensor([a, torcia.ones(1, 3)], layout=torcia.jagged)
    >>> nt.sum(1).sum().backward()
    >>> a.grad.sum().item()
    6.0
    """
    if isinstance(ts, Tensor) and not isinstance(ts, NestedTensor):
        ts = list(ts.unbind(0))
    nt = _from_components(ts, _layout_arg(layout), copy=False)
    if dtype is not None or device is not None:
        nt = nt.to(device=device, dtype=dtype)
    return nt


def nested_tensor_from_jagged(values, offsets=None, lengths=None, jagged_dim=None,
                              min_seqlen=None, max_seqlen=None):
    """A jagged nested tensor over ``values`` (no copy) split at ``offsets`` (or after
    ``lengths``).

    Examples
    --------
    >>> import torcia
    >>> torcia.nested.nested_tensor_from_jagged(torcia.ones(5, 2), lengths=torcia.tensor([2, 3]))
    NestedTensor(size=(2, j..., 2), offsets=tensor([0, 2, 5]), contiguous=True)
    """
    if jagged_dim not in (None, 1):
        raise RuntimeError("nested_tensor_from_jagged(): jagged_dim other than 1 is not "
                           "supported by torcia")
    if offsets is None:
        if lengths is None:
            raise RuntimeError("nested_tensor_from_jagged(): At least one of offsets or lengths "
                               "is required.")
        offsets = torcia.cat([torcia.zeros(1, dtype=torcia.int64, device=lengths.device),
                              lengths.long().cumsum(0)])
    offsets = offsets.long()
    host = offsets.cpu().numpy()
    if host[0] != 0 or np.any(np.diff(host) < 0) or host[-1] > values.shape[0]:
        raise RuntimeError(f"offsets must start at 0, not decrease and end within the "
                           f"{values.shape[0]} rows of values, got {host.tolist()}")
    if host[-1] != values.shape[0]:
        values = values[: int(host[-1])]
    return NestedTensor(values, offsets, 1, jagged)


def narrow(tensor, dim, start, length, layout=strided):
    """A nested tensor of ``tensor[b, start[b] : start[b] + length[b]]`` for each batch
    entry ``b`` (``dim`` 1, jagged layout; the rows are gathered, not viewed).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.arange(12.0).reshape(2, 6)
    >>> nt = torcia.nested.narrow(x, 1, torcia.tensor([0, 3]), torcia.tensor([2, 3]),
    ...                           layout=torcia.jagged)
    >>> [t.tolist() for t in nt.unbind()]
    [[0.0, 1.0], [9.0, 10.0, 11.0]]
    """
    if layout is not jagged:
        raise RuntimeError("torcia.nested.narrow() supports layout=torcia.jagged only")
    if dim != 1:
        raise RuntimeError("torcia.nested.narrow(): only dim=1 is supported for the jagged "
                           "layout")
    b = tensor.shape[0]
    starts = np.broadcast_to(np.asarray(start.tolist() if isinstance(start, Tensor) else start),
                             (b,))
    lengths = np.broadcast_to(np.asarray(length.tolist() if isinstance(length, Tensor)
                                         else length), (b,))
    if np.any(starts < 0) or np.any(starts + lengths > tensor.shape[1]):
        raise RuntimeError("narrow(): start + length exceeds the dimension's size")
    batch = np.repeat(np.arange(b), lengths)
    pos = np.concatenate([np.arange(s, s + n) for s, n in zip(starts, lengths)]) \
        if len(batch) else np.zeros(0, dtype=np.int64)
    dev = tensor.device
    values = tensor[torcia.tensor(batch, device=dev), torcia.tensor(pos, device=dev)]
    offsets = torcia.tensor(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
                            device=dev)
    return NestedTensor(values, offsets, 1, jagged)


def masked_select(tensor, mask):
    """A jagged nested tensor of each batch row's elements where ``mask`` is True.

    Examples
    --------
    >>> import torcia
    >>> nt = torcia.nested.masked_select(torcia.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]),
    ...                                  torcia.tensor([[True, False, True], [False, False, True]]))
    >>> [t.tolist() for t in nt.unbind()]
    [[1.0, 3.0], [6.0]]
    """
    if tensor.ndim != mask.ndim:
        raise RuntimeError(f"Mask dimension is too small to apply to the tensor: got "
                           f"{mask.ndim}-D mask for {tensor.ndim}-D tensor")
    mask = mask.broadcast_to(tensor.shape)
    values = tensor[mask]
    counts = mask.reshape(tensor.shape[0], -1).sum(1).cpu().numpy()
    offsets = torcia.tensor(np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
                            device=tensor.device)
    return NestedTensor(values, offsets, 1, jagged)


def to_padded_tensor(input, padding, output_size=None):
    """The dense ``(B, max length, ...)`` tensor of a nested tensor, ``padding`` after each
    component (differentiable in the values).

    Examples
    --------
    >>> import torcia
    >>> nt = torcia.nested.nested_tensor([[1.0], [2.0, 3.0]], layout=torcia.jagged)
    >>> torcia.nested.to_padded_tensor(nt, -1.0)
    tensor([[ 1., -1.],
            [ 2.,  3.]])
    """
    if not isinstance(input, NestedTensor):
        raise RuntimeError("to_padded_tensor(): expected a nested tensor")
    lengths = input._lengths()
    b = len(input)
    longest = int(lengths.max()) if len(lengths) else 0
    values = input._values_t
    dev = values.device
    if output_size is not None:
        output_size = tuple(output_size)
        if output_size[0] != b or output_size[input._ragged_idx] < longest:
            raise RuntimeError(f"to_padded_tensor(): output_size {output_size} is smaller than "
                               f"the nested tensor's {tuple(input.shape)}")
        longest = output_size[input._ragged_idx]
    out = torcia.full((b, longest, *values.shape[1:]), padding, dtype=values.dtype, device=dev)
    batch = torcia.tensor(np.repeat(np.arange(b), lengths), device=dev)
    pos = torcia.tensor(np.concatenate([np.arange(n) for n in lengths]) if b else
                        np.zeros(0, np.int64), device=dev)
    out = torcia.index_put(out, (batch, pos), values)
    if input._ragged_idx != 1:
        out = out.movedim(1, input._ragged_idx)
    if output_size is not None and tuple(out.shape) != output_size:
        full = torcia.full(output_size, padding, dtype=out.dtype, device=dev)
        out = torcia.index_put(full, _grid_of(out.shape, dev), out)
    return out


def _grid_of(shape, device):
    """Index tensors addressing every element of ``shape`` (broadcast against each
    other)."""
    grids = []
    for i, n in enumerate(shape):
        view = [1] * len(shape)
        view[i] = n
        grids.append(torcia.arange(n, device=device).reshape(view))
    return tuple(grids)


# ----- attention ------------------------------------------------------------------------------


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """Attention over nested ``(B, heads, j, head_dim)`` tensors, sequence by sequence:
    each query attends to its own sequence's keys only (causally with ``is_causal``).
    :func:`torcia.nn.functional.scaled_dot_product_attention` calls it for nested inputs.

    Examples
    --------
    >>> import torcia
    >>> q = torcia.nested.nested_tensor([torcia.randn(2, 8), torcia.randn(5, 8)],
    ...                                 layout=torcia.jagged).unflatten(-1, (2, 4))
    >>> q = q.transpose(1, 2)  # (B, heads, j, head_dim)
    >>> out = torcia.nested.scaled_dot_product_attention(q, q, q)
    >>> tuple(out.shape[:2]), [t.shape for t in out.transpose(1, 2).unbind()]
    ((2, 2), [torcia.Size([2, 2, 4]), torcia.Size([5, 2, 4])])
    """
    if attn_mask is not None:
        raise RuntimeError("scaled_dot_product_attention(): attn_mask is not supported for "
                           "nested tensors (the sequences' lengths mask them)")
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, NestedTensor) or t._ragged_idx != 2 or t.ndim != 4:
            raise RuntimeError(f"scaled_dot_product_attention(): {name} must be a nested "
                               "tensor of shape (B, heads, j, head_dim)")
    lq, lk = query._lengths(), key._lengths()
    if len(lq) != len(lk) or not np.array_equal(np.diff(key._offsets_t.cpu().numpy()),
                                                np.diff(value._offsets_t.cpu().numpy())):
        raise RuntimeError("scaled_dot_product_attention(): key and value need the same "
                           "sequence lengths, and as many sequences as query")
    q = to_padded_tensor(query, 0.0)  # (B, H, Lq, D)
    k = to_padded_tensor(key, 0.0)
    v = to_padded_tensor(value, 0.0)
    dev = q.device
    kq = torcia.arange(q.shape[2], device=dev)
    kk = torcia.arange(k.shape[2], device=dev)
    allowed = kk.reshape(1, 1, -1) < torcia.tensor(lk, device=dev).reshape(-1, 1, 1)
    if is_causal:
        allowed = allowed & (kk.reshape(1, 1, -1) <= kq.reshape(1, -1, 1))
    # a padding query row attends to key 0 (its output is dropped): no row without keys
    allowed = allowed | ((kk == 0).reshape(1, 1, -1) & (kq.reshape(1, -1, 1) >= torcia.tensor(
        lq, device=dev).reshape(-1, 1, 1)))
    if enable_gqa and k.shape[1] != q.shape[1]:
        k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
        v = v.repeat_interleave(q.shape[1] // v.shape[1], dim=1)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = (q @ k.transpose(-2, -1)) * scale
    weights = torcia.softmax(scores.masked_fill(~allowed.unsqueeze(1), float("-inf")), -1)
    if dropout_p > 0:
        weights = torcia.dropout(weights, dropout_p, True)
    out = (weights @ v).transpose(1, 2)  # (B, Lq, H, Dv)
    batch = torcia.tensor(np.repeat(np.arange(len(lq)), lq), device=dev)
    pos = torcia.tensor(np.concatenate([np.arange(n) for n in lq]) if len(lq) else
                        np.zeros(0, np.int64), device=dev)
    return NestedTensor(out[batch, pos], query._offsets_t, 2, query._layout)

