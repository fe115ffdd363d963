"""``MaskedTensor``: a tensor whose masked-out elements are absent, as
``torch.masked.MaskedTensor``.

Operations run on the data and carry the mask: elementwise ops keep it (two masked
operands must have equal masks, as in PyTorch), reductions keep a result where any input
element was kept, shape ops (``t``, ``reshape``, indexing...) move data and mask alike,
and softmax-like normalizations ignore masked-out elements. Gradients flow through the
data (``mt.grad`` is a MaskedTensor with the same mask).

The operations are methods (``mt.exp()``, ``mt.sum(1)``, ``mt + 1``), the torcia functions
of the same names (``torcia.exp(mt)`` runs ``mt.exp()``, through the ``__torch_function__``
protocol, which importing this module switches on) and the functions of
:mod:`torcia.masked`; an operation with no masked meaning raises an error naming it.

Examples
--------
>>> import torcia
>>> from torcia.masked import masked_tensor
>>> mt = masked_tensor(torcia.tensor([1.0, 2.0, 3.0]), torcia.tensor([True, False, True]))
>>> mt * 2
MaskedTensor(
  [  2.0000,       --,   6.0000]
)
>>> mt.sum()
MaskedTensor(  4.0000, True)
>>> mt.to_tensor(0.0)
tensor([1., 0., 3.])
"""

from __future__ import annotations

import torcia
from torcia import Tensor
from torcia import ops as _oplist
from torcia._wrapped import WrappedTensor, methods_torch_function
from torcia.masked import _ops

__all__ = ["MaskedTensor", "as_masked_tensor", "is_masked_tensor", "masked_tensor"]

_DTYPES = ("float16", "float32", "float64", "bool", "int8", "int16", "int32", "int64")


class MaskedTensor(WrappedTensor):
    """Data and a bool mask of the same shape; see the module docstring.

    Parameters
    ----------
    data : Tensor
        The values (float16/32/64, bool or int8..int64), copied.
    mask : Tensor
        Bool, of ``data``'s shape: True keeps an element.
    requires_grad : bool
        Whether the copied data requires grad.

    Examples
    --------
    >>> import torcia
    >>> mt = torcia.masked.MaskedTensor(torcia.tensor([[1.0, 2.0]]), torcia.tensor([[True, False]]))
    >>> mt.shape, mt.get_mask()
    (torcia.Size([1, 2]), tensor([[ True, False]]))
    """

    __slots__ = ("_masked_data", "_masked_mask")
    __torch_function__ = classmethod(methods_torch_function)

    def __init__(self, data, mask, requires_grad=False):
        if is_masked_tensor(data) or not isinstance(data, Tensor):
            raise TypeError("data must be a Tensor")
        if is_masked_tensor(mask) or not isinstance(mask, Tensor):
            raise TypeError("mask must be a Tensor")
        if mask.dtype is not torcia.bool:
            raise TypeError("mask must have dtype bool.")
        if data.dtype.name not in _DTYPES:
            raise TypeError(f"{data.dtype} is not supported in MaskedTensor.")
        if data.dim() != mask.dim():
            raise ValueError("data.dim() must equal mask.dim()")
        if data.shape != mask.shape:
            raise ValueError("data.size() must equal mask.size()")
        data = data.detach().clone().requires_grad_(True) if requires_grad else data.clone()
        self._set(data, mask.clone())

    def _set(self, data, mask):
        self._masked_data = data
        self._masked_mask = mask
        self._init_tensor_slots(data)

    @classmethod
    def _wrap(cls, data, mask):
        """A MaskedTensor over ``data`` itself (no copy: gradients reach it)."""
        out = object.__new__(cls)
        out._set(data, mask)
        return out

    @property
    def _inner(self) -> Tensor:
        return self._masked_data

    def _no_dense_data(self, op: str) -> str:
        return (f"Could not run '{op}' with a MaskedTensor: it has no masked meaning in "
                "torcia; call it as a MaskedTensor method or a torcia.masked function, or on "
                ".get_data() / .to_tensor(value)")

    # ----- attributes ---------------------------------------------------------------
    def get_data(self) -> Tensor:
        """The data, masked-out elements included."""
        return self._masked_data

    def get_mask(self) -> Tensor:
        """The bool mask (True: kept)."""
        return self._masked_mask

    def to_tensor(self, value) -> Tensor:
        """A dense tensor with ``value`` where elements are masked out."""
        return self._masked_data.masked_fill(~self._masked_mask, value)

    @property
    def shape(self):
        return self._masked_data.shape

    def size(self, dim=None):
        return self._masked_data.size(dim) if dim is not None else self._masked_data.shape

    @property
    def ndim(self) -> int:
        return self._masked_data.ndim

    def dim(self) -> int:
        return self._masked_data.ndim

    def numel(self) -> int:
        return self._masked_data.numel()

    @property
    def grad(self):
        g = self._masked_data.grad
        return None if g is None else MaskedTensor._wrap(g, self._masked_mask)

    @grad.setter
    def grad(self, value):
        self._masked_data.grad = None if value is None else (
            value.get_data() if is_masked_tensor(value) else value)

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Backpropagate from the data (masked-out elements contribute what the data's
        graph gives them; reductions already leave them out)."""
        if is_masked_tensor(gradient):
            gradient = gradient.get_data()
        self._masked_data.backward(gradient, retain_graph, create_graph, inputs)

    def __len__(self):
        return len(self._masked_data)

    def __bool__(self):
        raise RuntimeError("Boolean value of a MaskedTensor is ambiguous")

    def __repr__(self):
        fmt = "{0:8.4f}"
        if self.dim() == 0:
            value = self._masked_data.item()
            text = fmt.format(value) if isinstance(value, float) else str(value)
            if not self._masked_mask.item():
                text = "--"
            return f"MaskedTensor({text}, {self._masked_mask.item()})"
        body = _masked_str(self._masked_data, self._masked_mask, fmt)
        return "MaskedTensor(\n" + "\n".join("  " + line for line in body.split("\n")) + "\n)"

    # ----- copies and moves -------------------------------------------------------------
    def _map(self, fn, mask_fn=None):
        """``fn`` on the data and (``mask_fn`` or ``fn``) on the mask."""
        return MaskedTensor._wrap(fn(self._masked_data), (mask_fn or fn)(self._masked_mask))

    def detach(self):
        return self._map(lambda t: t.detach())

    def clone(self, *, memory_format=None):
        return self._map(lambda t: t.clone())

    def to(self, *args, **kwargs):
        data = self._masked_data.to(*args, **kwargs)
        return MaskedTensor._wrap(data, self._masked_mask.to(data.device))

    def __deepcopy__(self, memo):
        out = MaskedTensor(self._masked_data.detach(), self._masked_mask,
                           requires_grad=self.requires_grad)
        memo[id(self)] = out
        return out

    def __reduce_ex__(self, protocol):
        return (MaskedTensor, (self._masked_data.detach(), self._masked_mask,
                               self.requires_grad))

    # ----- shape ops move data and mask alike ----------------------------------------
    def __getitem__(self, index):
        return self._map(lambda t: t[index])

    def t(self):
        return self._map(lambda t: t.t())

    def transpose(self, dim0, dim1):
        return self._map(lambda t: t.transpose(dim0, dim1))

    def permute(self, *dims):
        return self._map(lambda t: t.permute(*dims))

    def reshape(self, *shape):
        return self._map(lambda t: t.reshape(*shape))

    def view(self, *shape):
        return self._map(lambda t: t.view(*shape))

    def unsqueeze(self, dim):
        return self._map(lambda t: t.unsqueeze(dim))

    def squeeze(self, *dim):
        return self._map(lambda t: t.squeeze(*dim))

    def flatten(self, start_dim=0, end_dim=-1):
        return self._map(lambda t: t.flatten(start_dim, end_dim))

    def expand(self, *sizes):
        return self._map(lambda t: t.expand(*sizes))

    def contiguous(self, memory_format=None):
        return self._map(lambda t: t.contiguous())

    @property
    def T(self):  # noqa: N802 - PyTorch's name
        return self._map(lambda t: t.T)

    @property
    def mT(self):  # noqa: N802 - PyTorch's name
        return self._map(lambda t: t.mT)

    # ----- reductions ---------------------------------------------------------------
    def _reduce(self, name, dim=None, keepdim=False, **kwargs):
        fn = getattr(_ops, name)
        data = fn(self, dim, keepdim=keepdim, **kwargs)
        dims = _ops._canonical_dim(dim, self.ndim)
        mask = self._masked_mask.any(dim=dims, keepdim=keepdim) if dims else self._masked_mask
        return MaskedTensor._wrap(data, mask)

    def sum(self, dim=None, keepdim=False, dtype=None):
        return self._reduce("sum", dim, keepdim, dtype=dtype)

    def mean(self, dim=None, keepdim=False, dtype=None):
        return self._reduce("mean", dim, keepdim, dtype=dtype)

    def prod(self, dim=None, keepdim=False, dtype=None):
        return self._reduce("prod", dim, keepdim, dtype=dtype)

    def amax(self, dim=None, keepdim=False):
        return self._reduce("amax", dim, keepdim)

    def amin(self, dim=None, keepdim=False):
        return self._reduce("amin", dim, keepdim)

    def argmax(self, dim=None, keepdim=False):
        return self._reduce("argmax", dim, keepdim)

    def argmin(self, dim=None, keepdim=False):
        return self._reduce("argmin", dim, keepdim)

    def norm(self, p=2.0, dim=None, keepdim=False, dtype=None):
        data = _ops.norm(self, p, dim, keepdim=keepdim, dtype=dtype)
        dims = _ops._canonical_dim(dim, self.ndim)
        return MaskedTensor._wrap(data, self._masked_mask.any(dim=dims, keepdim=keepdim))

    def var(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
        data = _ops.var(self, dim, unbiased, correction=correction, keepdim=keepdim)
        dims = _ops._canonical_dim(dim, self.ndim)
        return MaskedTensor._wrap(data, self._masked_mask.any(dim=dims, keepdim=keepdim))

    def std(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
        data = _ops.std(self, dim, unbiased, correction=correction, keepdim=keepdim)
        dims = _ops._canonical_dim(dim, self.ndim)
        return MaskedTensor._wrap(data, self._masked_mask.any(dim=dims, keepdim=keepdim))

    def all(self, dim=None, keepdim=False):
        # masked-out elements count as True (the identity of "and")
        data = self._masked_data.bool().masked_fill(~self._masked_mask, True)
        dims = _ops._canonical_dim(dim, self.ndim)
        out = data.all() if dim is None else data.all(dim=dims[0], keepdim=keepdim)
        mask = self._masked_mask.any() if dim is None else self._masked_mask.any(
            dim=dims[0], keepdim=keepdim)
        return MaskedTensor._wrap(out, mask)

    # ----- normalizations keep the mask ------------------------------------------------
    def softmax(self, dim, dtype=None):
        return MaskedTensor._wrap(_ops.softmax(self, dim, dtype=dtype), self._masked_mask)

    def log_softmax(self, dim, dtype=None):
        return MaskedTensor._wrap(_ops.log_softmax(self, dim, dtype=dtype), self._masked_mask)


_ops.MASKED_TYPES.append(MaskedTensor)


def _masked_str(data, mask, fmt):
    if data.dim() == 1:
        items = [d.item() for d in data]
        texts = [fmt.format(v) if isinstance(v, float) else str(v) for v in items]
        hidden = (~mask).tolist()
        width = max((8 if h else len(t)) for t, h in zip(texts, hidden)) if texts else 0
        return "[" + ", ".join("--".rjust(width) if h else t for t, h in zip(texts, hidden)) + "]"
    parts = [_masked_str(d, m, fmt) for d, m in zip(data, mask)]
    parts = ["\n".join("  " + line for line in p.split("\n")) for p in parts]
    return "[\n" + ",\n".join(parts) + "\n]"


# ----- elementwise ops: the data's op, the mask carried -----------------------------------

def _named(ops: tuple) -> tuple:
    """``ops`` and their other names (``arcsin`` for ``asin``)."""
    return ops + tuple(alias for alias, op in _oplist.ALIASES.items() if op in ops)


#: PyTorch's unary MaskedTensor ops torcia's tensors have: the declared ones
#: (torcia.ops.tagged), and these; pow among them as a method of a number exponent
_UNARY = _named(_oplist.tagged("masked", "unary_float", "unary_same", "unary_bool")) + (
    "clamp", "clip", "deg2rad", "logit", "i0", "nan_to_num", "positive", "pow", "rad2deg",
    "round", "sgn", "sinc",
)
#: PyTorch's binary MaskedTensor ops (two MaskedTensors must share their mask): the
#: declared ones, and these
_BINARY = _named(_oplist.tagged("masked", "binary", "binary_float", "compare")) + (
    "divide", "true_divide", "multiply", "subtract", "logaddexp", "logaddexp2",
)
#: the operators of two operands: those of the declared ops (torcia.ops.OPERATORS)
_OPERATORS = {f"__{py}__": op for py, op in _oplist.OPERATORS.items()
              if op not in _oplist.UNARY_FLOAT + _oplist.UNARY_SAME + _oplist.UNARY_BOOL}
_REFLECTED = {"__radd__": "add", "__rsub__": "sub", "__rmul__": "mul",
              "__rtruediv__": "div", "__rpow__": "pow"}


def _binary(name, a, b, float_op=False):
    """``name(a, b)`` where at least one operand is a MaskedTensor."""
    if is_masked_tensor(a) and is_masked_tensor(b) and not torcia.equal(
            a.get_mask(), b.get_mask()):
        raise ValueError("Input masks must match. If you need support for this, please open an "
                         "issue on Github.")
    mask = a.get_mask() if is_masked_tensor(a) else b.get_mask()
    da = a.get_data() if is_masked_tensor(a) else a
    db = b.get_data() if is_masked_tensor(b) else b
    if not isinstance(da, Tensor):
        da = torcia.tensor(da, device=db.device) if not isinstance(db, Tensor) else \
            torcia.full((), da, dtype=db.dtype, device=db.device)
    return MaskedTensor._wrap(getattr(torcia, name)(da, db), mask)


def _unary_method(name):
    def method(self, *args, **kwargs):
        return self._map(lambda t: getattr(t, name)(*args, **kwargs), lambda m: m)
    method.__name__ = name
    method.__doc__ = f"``{name}`` of the data; the mask is kept."
    return method


def _binary_method(name, reflected=False):
    def method(self, other):
        return _binary(name, other, self) if reflected else _binary(name, self, other)
    method.__name__ = name
    method.__doc__ = f"``{name}`` of the data with ``other``'s; the mask is kept."
    return method


for _name in _UNARY:
    setattr(MaskedTensor, _name, _unary_method(_name))
    if _name != "positive" and _name not in _oplist.UNARY_BOOL:  # no bool result in place
        setattr(MaskedTensor, _name + "_",
                lambda self, *a, _n=_name, **k: self._assign(getattr(self, _n)(*a, **k)))
for _name in _BINARY:
    setattr(MaskedTensor, _name, _binary_method(_name))
for _dunder, _name in _OPERATORS.items():
    setattr(MaskedTensor, _dunder, _binary_method(_name))
for _dunder, _name in _REFLECTED.items():
    setattr(MaskedTensor, _dunder, _binary_method(_name, reflected=True))
for _py, _name in _oplist.OPERATORS.items():  # -x, abs(x), ~x
    if _name in _oplist.UNARY_FLOAT + _oplist.UNARY_SAME + _oplist.UNARY_BOOL:
        setattr(MaskedTensor, f"__{_py}__", _unary_method(_name))
# torcia.add(tensor, masked) and the other binary functions land here
MaskedTensor._layout_binary = staticmethod(
    lambda op, a, b, float_op=False: _binary({"div": "div"}.get(op, op), a, b))


def _assign(self, other):
    """In-place ops: this MaskedTensor takes ``other``'s data (and mask)."""
    self._masked_data = other.get_data()
    self._masked_mask = other.get_mask()
    self._vc[0] += 1
    return self


MaskedTensor._assign = _assign


def is_masked_tensor(obj) -> bool:
    """Whether ``obj`` is a :class:`MaskedTensor`.

    Examples
    --------
    >>> import torcia
    >>> torcia.masked.is_masked_tensor(torcia.ones(1))
    False
    """
    return isinstance(obj, MaskedTensor)


def masked_tensor(data, mask, requires_grad=False) -> MaskedTensor:
    """A MaskedTensor of a copy of ``data`` (a new leaf, requiring grad if asked).

    Examples
    --------
    >>> import torcia
    >>> mt = torcia.masked.masked_tensor(torcia.ones(2), torcia.tensor([True, False]),
    ...                                  requires_grad=True)
    >>> mt.sum().backward()
    >>> mt.grad
    MaskedTensor(
      [  1.0000,       --]
    )
    """
    return MaskedTensor(data, mask, requires_grad)


def as_masked_tensor(data, mask) -> MaskedTensor:
    """A MaskedTensor over ``data`` itself, differentiable: gradients reach ``data``.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([1.0, 2.0], requires_grad=True)
    >>> torcia.masked.as_masked_tensor(x, torcia.tensor([True, False])).sum().backward()
    >>> x.grad
    tensor([1., 0.])
    """
    if is_masked_tensor(data) or not isinstance(data, Tensor):
        raise TypeError("data must be a Tensor")
    if mask.shape != data.shape or mask.dtype is not torcia.bool:
        raise ValueError("mask must be a bool tensor of data's size")
    return MaskedTensor._wrap(data, mask)
