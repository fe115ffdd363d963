"""Tensor methods and operators, attached to :class:`torcia.Tensor` at import.

Functions of :mod:`torcia._oplib` listed in ``METHODS`` become methods as they are (their
first argument is the tensor); in-place ``name_`` variants run the out-of-place op and
write its result back (see :func:`torcia._tensor.inplace`).
"""

from __future__ import annotations

import numpy as np

from torcia import _creation as C
from torcia import _dtype as D
from torcia import _legacy, _oplib, _shared_memory, _storage, linalg, special
from torcia import ops as _oplist
from torcia._grad_mode import STATE
from torcia._oplib import properties
from torcia._oplib._common import _inplace_example
from torcia._ops import creation, indexing, nn_activation, pointwise, random, unary
from torcia._ops._common import readable_value
from torcia._tensor import (
    AUTOGRAD,
    Tensor,
    _as_operand,
    active_modes,
    binary,
    binary_inplace,
    canonical_device,
    check_overlap,
    inplace,
    load_autograd,
    scaled_inplace,
)
from torcia.backend import CPU, _cuda_backend, _cuda_runtime
from torcia.random import rng_of


def parse_to(*args, **kwargs):
    """The arguments of ``Tensor.to`` and ``Module.to`` read once, as PyTorch reads them.

    Returns ``(device, dtype, non_blocking, copy)``; ``to(other_tensor)`` takes the
    other tensor's device and dtype. Unknown keywords raise a TypeError naming them.

    Examples
    --------
    >>> import torcia
    >>> from torcia.library import parse_to
    >>> parse_to("cpu", torcia.float64)
    ('cpu', torcia.float64, False, False)
    """
    device = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    non_blocking = bool(kwargs.pop("non_blocking", False))
    copy = bool(kwargs.pop("copy", False))
    kwargs.pop("memory_format", None)
    if kwargs:
        raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
    positional_bools = []
    for a in args:
        if isinstance(a, D.dtype):
            dtype = a
        elif isinstance(a, Tensor):
            device, dtype = a.device, a.dtype
        elif isinstance(a, bool):
            positional_bools.append(a)
        elif a is not None:
            device = a
    if positional_bools:
        non_blocking = positional_bools[0]
        if len(positional_bools) > 1:
            copy = positional_bools[1]
    return device, dtype, non_blocking, copy


#: The in-place methods of the op families: ``name_`` for each name of their ``INPLACE``
INPLACE = tuple(n for family in _oplib.FAMILIES for n in getattr(family, "INPLACE", ()))
#: ... and the methods whose function has another name at top level
FALLBACK_METHOD_FUNCTIONS = {
    "where": indexing.where_method, "cauchy_": random.cauchy_, "geometric_": random.geometric_,
    "log_normal_": random.log_normal_, "hardshrink": nn_activation.hardshrink,
    "prelu": nn_activation.prelu_method, "new": _legacy.new,
}


def _make_inplace(fn):
    def method(self, *args, **kwargs):
        return inplace(fn, self, *args, **kwargs)

    method.__name__ = fn.__name__ + "_"
    method.__doc__ = (f"In-place version of :meth:`Tensor.{fn.__name__}`."
                      + _inplace_example(fn.__name__))
    return method


# each op family says which of its functions are methods (``METHODS``, ``INPLACE``) and
# which are methods only where nothing else set them (``FALLBACK_*``, applied below)
for _family in _oplib.FAMILIES:
    for _name in getattr(_family, "METHODS", ()):
        setattr(Tensor, _name, getattr(_family, _name))
    for _name in getattr(_family, "INPLACE", ()):
        setattr(Tensor, _name + "_", _make_inplace(getattr(_family, _name)))


def masked_fill_(self, mask, value):
    """In-place :meth:`Tensor.masked_fill`. A 0-dim ``value`` outside the graph is read as
    a number, as PyTorch reads it (so it may be an element of ``self``)."""
    if isinstance(value, Tensor) and not value._requires_grad and not value.ndim:
        number = readable_value(value)
        value = value if number is None else number
    return inplace(_oplib.masked_fill, self, mask, value)


masked_fill_.__doc__ += _inplace_example("masked_fill")
Tensor.masked_fill_ = masked_fill_
for _name, _fn in _storage.METHODS.items():
    setattr(Tensor, _name, _fn)
Tensor.is_distributed = _oplib.is_distributed
Tensor.const_data_ptr = Tensor.data_ptr
Tensor.name = property(properties._name)
Tensor.volatile = property(properties._volatile)
for _name, _fn in linalg.METHODS.items():
    setattr(Tensor, _name, _fn)
for _name, _fn in special.METHODS.items():
    setattr(Tensor, _name, _fn)
    setattr(Tensor, _name + "_", _make_inplace(_fn))
for _family in _oplib.FAMILIES:
    for _name in getattr(_family, "FALLBACK_METHODS", ()):
        if not hasattr(Tensor, _name):
            setattr(Tensor, _name, getattr(_family, _name))
    for _name in getattr(_family, "FALLBACK_INPLACE", ()):
        if not hasattr(Tensor, _name + "_"):
            setattr(Tensor, _name + "_", _make_inplace(getattr(_family, _name)))
for _name, _fn in FALLBACK_METHOD_FUNCTIONS.items():
    if not hasattr(Tensor, _name):
        setattr(Tensor, _name, _fn)


# ----- operators ------------------------------------------------------------------------

#: the declared op each Python operator runs (its declaration's ``operator``: ``%`` runs
#: remainder), keyed by the operator's special method's name without the underscores
_RUNS = _oplist.OPERATORS


def _forward(py, float_op=False):
    op = _RUNS[py]

    def method(self, other):
        return binary(op, self, other, float_op)

    return method


def _reflected(py, float_op=False):
    op = _RUNS[py]

    def method(self, other):
        return binary(op, other, self, float_op)

    return method


def _comparison(op):
    def method(self, other):
        if other.__class__ in _PLAIN or _comparable(other):
            return binary(op, self, other)
        # an operand no comparison takes: Python's answer, as PyTorch's (``t == "a"`` is
        # False, ``t < "a"`` a TypeError)
        return NotImplemented

    return method


def _iter(self):
    if self._data.ndim == 0:
        raise TypeError("iteration over a 0-d tensor")
    return iter(_oplib.unbind(self, 0))


Tensor.__iter__ = _iter
Tensor.__add__ = Tensor.__radd__ = _forward("add")
Tensor.__sub__ = lambda self, other: _oplib.sub(self, other)
Tensor.__rsub__ = lambda self, other: _oplib.sub(other, self)
Tensor.__mul__ = Tensor.__rmul__ = _forward("mul")
Tensor.__truediv__ = _forward("truediv", True)


def _rtruediv(self, other):
    # PyTorch's: a number over a tensor is the tensor's reciprocal times the number, two
    # roundings where one division has one (0.37 / x in float32: 27% of the quotients a
    # unit in the last place apart)
    if other.__class__ in (int, float, bool, complex):
        return _oplib.reciprocal(self) * other
    return binary("div", other, self, True)


Tensor.__rtruediv__ = _rtruediv
Tensor.__floordiv__ = lambda self, other: _oplib.div(self, other, rounding_mode="floor")
Tensor.__rfloordiv__ = lambda self, other: _oplib.div(other, self, rounding_mode="floor")
Tensor.__mod__ = _forward("mod")
Tensor.__rmod__ = _reflected("mod")
Tensor.__pow__ = _forward("pow")
Tensor.__rpow__ = _reflected("pow")
Tensor.__matmul__ = lambda self, other: _oplib.matmul(self, other)
Tensor.__rmatmul__ = lambda self, other: _oplib.matmul(pointwise.tensor_arg(other), self)
Tensor.__neg__ = lambda self: _oplib.neg(self)
Tensor.__pos__ = lambda self: unary.positive(self)
Tensor.__abs__ = lambda self: _oplib.abs(self)
def _invert(self):
    if self.dtype is D.bool_:
        return _oplib.logical_not(self)
    if self.dtype.category >= 2:
        raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type "
                        "tensors")
    return _oplib.bitwise_not(self)


def _bitwise(py, logical):
    """``&``, ``|`` or ``^``: the bitwise op it runs, or on two bools the ``logical`` op (a
    graph's consumers know these: ONNX's And, Or, Xor)."""
    bitwise = _RUNS[py]

    def method(self, other):
        other_bool = other.dtype is D.bool_ if isinstance(other, Tensor) else \
            isinstance(other, bool)
        if self.dtype is D.bool_ and other_bool:
            return binary(logical, self, other)
        # a float operand: the kernel refuses it, as PyTorch's ("bitwise_and_cpu" not
        # implemented for 'Float')
        return binary(bitwise, self, other)

    return method


Tensor.__invert__ = _invert
Tensor.__and__ = Tensor.__rand__ = _bitwise("and", "logical_and")
Tensor.__or__ = Tensor.__ror__ = _bitwise("or", "logical_or")
Tensor.__xor__ = Tensor.__rxor__ = _bitwise("xor", "logical_xor")
Tensor.__lshift__ = lambda self, other: _oplib.bitwise_left_shift(self, other)
Tensor.__rshift__ = lambda self, other: _oplib.bitwise_right_shift(self, other)
Tensor.__rlshift__ = lambda self, other: _oplib.bitwise_left_shift(
    _as_operand(other, self), self)
Tensor.__rrshift__ = lambda self, other: _oplib.bitwise_right_shift(
    _as_operand(other, self), self)
for _py, _op in _RUNS.items():
    if _op in _oplist.COMPARE:
        setattr(Tensor, f"__{_py}__", _comparison(_op))
Tensor.__hash__ = lambda self: id(self)
Tensor.__getitem__ = lambda self, key: _oplib.getitem(self, key)
Tensor.__setitem__ = lambda self, key, value: _oplib.setitem(self, key, value)


#: the operands most comparisons take, found without ``_comparable``'s isinstance walk
_PLAIN = (Tensor, int, float)


def _comparable(other):
    return isinstance(other, (Tensor, int, float, complex, bool, np.ndarray, np.generic, list,
                              tuple))


def _iop(op):
    def method(self, other):
        return inplace(op, self, other)

    return method


def _binary_iop(py, op_fn, float_op=False):
    op = _RUNS[py]

    def method(self, other):
        return binary_inplace(op, op_fn, self, other, float_op)

    return method


Tensor.__iadd__ = _binary_iop("add", _forward("add"))
Tensor.__isub__ = _binary_iop("sub", _oplib.sub)
Tensor.__imul__ = _binary_iop("mul", _forward("mul"))
Tensor.__itruediv__ = _binary_iop("truediv", _forward("truediv", True), True)


def _make_binary_inplace(py, float_op=False):
    """``Tensor.add_`` (``sub_``, ``mul_``, ``div_``): its ``_make_inplace`` method, which
    takes :func:`binary_inplace` (``a += b``'s) for a lone operand and
    :func:`scaled_inplace` for add's and sub's ``alpha=``."""
    op = _RUNS[py]
    fn = getattr(_oplib, op)
    takes_alpha = op in ("add", "sub")

    def method(self, *args, **kwargs):
        if len(args) == 1:
            if not kwargs:
                return binary_inplace(op, fn, self, args[0], float_op)
            if takes_alpha and len(kwargs) == 1 and "alpha" in kwargs:
                return scaled_inplace(op, fn, self, args[0], kwargs["alpha"])
        return inplace(fn, self, *args, **kwargs)

    generic = _make_inplace(fn)
    method.__name__, method.__doc__ = generic.__name__, generic.__doc__
    return method


Tensor.add_ = _make_binary_inplace("add")
Tensor.sub_ = _make_binary_inplace("sub")
Tensor.mul_ = _make_binary_inplace("mul")
Tensor.div_ = _make_binary_inplace("truediv", True)
Tensor.__ifloordiv__ = _iop(lambda s, o: _oplib.div(s, o, rounding_mode="floor"))
Tensor.__imod__ = _iop(_forward("mod"))
Tensor.__ipow__ = _iop(_forward("pow"))
Tensor.__imatmul__ = _iop(_oplib.matmul)
Tensor.__iand__ = _iop(Tensor.__and__)
Tensor.__ior__ = _iop(Tensor.__or__)
Tensor.__ixor__ = _iop(Tensor.__xor__)
Tensor.__ilshift__ = _iop(Tensor.__lshift__)
Tensor.__irshift__ = _iop(Tensor.__rshift__)


# ----- conversion -----------------------------------------------------------------------


def to(self, *args, **kwargs):
    """Convert dtype and/or device: ``to(dtype)``, ``to(device)``, ``to(device, dtype)``,
    ``to(other_tensor)``. Returns ``self`` when nothing changes.

    Examples
    --------
    >>> import torcia
    >>> torcia.tensor([1, 2]).to(torcia.float64).dtype
    torcia.float64
    """
    device, dtype, _, copy = parse_to(*args, **kwargs)
    out = self
    if device is not None:
        dev = canonical_device(device)
        if dev is not self._device:
            out = _transfer(out, dev)
    if dtype is not None and out.dtype is not dtype:
        out = _oplib.to_dtype(out, C._dtype_arg(dtype))
    if copy and out is self:
        out = _oplib.clone(self)
    return out


def _transfer(t: Tensor, dev) -> Tensor:
    """Copy to another device; recorded for autograd as an op of its own."""
    src_backend = t._device.backend
    dst_backend = dev.backend
    host = src_backend.to_host(t._data)
    arr = dst_backend.from_host(host, dev.index)
    out = Tensor._make(arr, dev)
    for mode in active_modes():
        mode.on_result("to_device", (t,), {"device": t._device}, out)
    if t._requires_grad and AUTOGRAD.engine is not None:
        if STATE.enabled:
            AUTOGRAD.engine.record_transfer(t, out)
    return out


Tensor.to = to
Tensor.cpu = lambda self, memory_format=None: self.to("cpu")
Tensor.cuda = lambda self, device=None, non_blocking=False, memory_format=None: self.to(
    "cuda" if device is None else (f"cuda:{device}" if isinstance(device, int) else device))
Tensor.float = lambda self, memory_format=None: self.to(D.float32)
Tensor.double = lambda self, memory_format=None: self.to(D.float64)
Tensor.half = lambda self, memory_format=None: self.to(D.float16)
Tensor.bfloat16 = lambda self, memory_format=None: self.to(D.bfloat16)
Tensor.long = lambda self, memory_format=None: self.to(D.int64)
Tensor.int = lambda self, memory_format=None: self.to(D.int32)
Tensor.short = lambda self, memory_format=None: self.to(D.int16)
Tensor.char = lambda self, memory_format=None: self.to(D.int8)
Tensor.byte = lambda self, memory_format=None: self.to(D.uint8)
Tensor.bool = lambda self, memory_format=None: self.to(D.bool_)
Tensor.type_as = lambda self, other: self.to(other.dtype)
Tensor.view_as = lambda self, other: _oplib.view(self, other.shape)
Tensor.reshape_as = lambda self, other: _oplib.reshape(self, other.shape)


def _pin_memory(self, device=None):
    """A copy of this CPU tensor in page-locked (pinned) host memory, from which copies
    to the GPU run asynchronously (``.to("cuda", non_blocking=True)``). Needs CUDA, as
    in PyTorch."""
    if self.device.type != "cpu":
        raise RuntimeError(f"cannot pin a tensor on {self.device}: only dense CPU tensors "
                           "can be pinned")
    pinned = _cuda_runtime().pin(self._data)
    if not self.requires_grad:
        return Tensor._make(pinned, self._device)
    out = self.clone()  # the graph's copy, then its storage swapped for the pinned one
    out._data = pinned
    return out


def _is_pinned(self, device=None):
    if self.device.type != "cpu":
        return False
    b = _cuda_backend()
    return b is not None and bool(b.is_available()) and b.runtime.is_pinned(self._data)


Tensor.pin_memory = _pin_memory
Tensor.is_pinned = _is_pinned
Tensor.share_memory_ = _shared_memory.share_memory_
Tensor.T = property(lambda self: _oplib.permute(self, tuple(reversed(range(self.ndim)))))
Tensor.mT = property(lambda self: _oplib.transpose(self, -2, -1))
Tensor.mH = property(lambda self: _oplib.conj(_oplib.transpose(self, -2, -1)))
Tensor.H = property(lambda self: _oplib.conj(_oplib.t(self)))
Tensor.adjoint = lambda self: _oplib.conj(_oplib.transpose(self, -2, -1))


def _set_part(part):
    def setter(self, value):
        getattr(_oplib, part)(self).copy_(value)

    return setter


# x.real and x.imag are views (writable: x.imag = 0 writes into x)
Tensor.real = property(_oplib.real, _set_part("real"))
Tensor.imag = property(_oplib.imag, _set_part("imag"))


def _type(self, dtype=None, non_blocking=False):
    if dtype is None:
        cuda = "cuda." if self.device.type == "cuda" else ""
        return f"torcia.{cuda}{_TYPE_NAMES[self.dtype.name]}Tensor"
    if isinstance(dtype, str):
        # "torch.FloatTensor" / "torcia.cuda.LongTensor": PyTorch's type strings
        *prefix, name = dtype.split(".")
        names = {f"{v}Tensor": k for k, v in _TYPE_NAMES.items()}
        if name not in names or prefix[:1] not in (["torch"], ["torcia"]):
            raise ValueError(f"invalid type: '{dtype}'")
        device = "cuda" if prefix[1:] == ["cuda"] else "cpu"
        return self.to(device=device, dtype=getattr(D, names[name].replace("bool", "bool_")))
    if hasattr(dtype, "device_type"):  # a legacy type such as torcia.LongTensor
        return self.to(device=dtype.device_type, dtype=dtype.dtype)
    return self.to(dtype)


_TYPE_NAMES = D._TYPE_NAMES
Tensor.type = _type


# ----- new_* ----------------------------------------------------------------------------


def _new_kw(self, dtype, device):
    return {"dtype": dtype or self.dtype, "device": device or self.device}


Tensor.new_zeros = lambda self, *size, dtype=None, device=None, requires_grad=False: \
    creation.zeros(*size, requires_grad=requires_grad, **_new_kw(self, dtype, device))
Tensor.new_ones = lambda self, *size, dtype=None, device=None, requires_grad=False: \
    creation.ones(*size, requires_grad=requires_grad, **_new_kw(self, dtype, device))
Tensor.new_empty = lambda self, *size, dtype=None, device=None, requires_grad=False: \
    creation.empty(*size, requires_grad=requires_grad, **_new_kw(self, dtype, device))
Tensor.new_full = lambda self, size, fill_value, dtype=None, device=None, requires_grad=False: \
    creation.full(size, fill_value, requires_grad=requires_grad, **_new_kw(self, dtype, device))
Tensor.new_tensor = lambda self, data, dtype=None, device=None, requires_grad=False: C.tensor(
    data, requires_grad=requires_grad, **_new_kw(self, dtype, device))


# ----- in-place fills (what nn.init uses) ----------------------------------------------


def _all_true(t):
    return creation.ones(t.shape, dtype=D.bool_, device=t.device)


def fill_(self, value):
    """Fill with ``value`` in place (the old value gets a zero gradient)."""
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError("fill_ only supports 0-dimension value tensor but got tensor with "
                               f"{value.ndim} dimensions.")
        number = None if value._requires_grad else readable_value(value)
        if number is None:
            # in the graph (its gradient is the sum of the filled tensor's), or without a
            # number to read (meta, batched by vmap): a tensor operand of masked_fill
            return inplace(lambda s, v: _oplib.masked_fill(s, _all_true(s), v), self, value)
        value = number
    return inplace(lambda s: _oplib.masked_fill(s, _all_true(s), value) if s._requires_grad
                   else creation.full_like(s, value), self)


def zero_(self):
    """Fill with zeros in place."""
    return fill_(self, 0)


def copy_(self, src, non_blocking=False):
    """Copy ``src`` (broadcast, cast, moved across devices) into ``self`` in place;
    gradients flow to ``src``."""
    if not isinstance(src, Tensor):
        src = C.tensor(src)
    if src.device is not self._device:
        src = src.to(self._device)
    if src.dtype is not self.dtype:
        src = _oplib.to_dtype(src, self.dtype)
    return inplace(lambda s, o: _oplib.where(_all_true(s), o, s) if (
        o._requires_grad or s._requires_grad) else _oplib.expand(o, s.shape), self, src)


def uniform_(self, a=0.0, b=1.0, *, generator=None, **kw):
    """Fill in place with samples uniform on [a, b) (``from``/``to`` accepted too)."""
    a, b = kw.get("from", a), kw.get("to", b)
    kernel = random.drawing(self._device, "uniform")
    dtype, rng = self.dtype.to_numpy(), rng_of(generator)
    return _fill_drawn(self, lambda shape: kernel(shape, float(a), float(b), dtype, rng))


def normal_(self, mean=0.0, std=1.0, *, generator=None):
    """Fill in place with normal samples."""
    kernel = random.drawing(self._device, "normal")
    dtype, rng = self.dtype.to_numpy(), rng_of(generator)
    return _fill_drawn(self, lambda shape: kernel(shape, float(mean), float(std), dtype, rng))


def bernoulli_(self, p=0.5, *, generator=None):
    """Fill in place with 0/1 draws of probability ``p`` (a number or tensor)."""
    p = p.numpy() if isinstance(p, Tensor) else p
    return _fill_from(self, rng_of(generator).random(tuple(self.shape)) < p)


def random_(self, a=0, b=None, *, generator=None, **kw):
    """Fill in place with integers uniform on [a, b) (or [0, a) with one argument)."""
    a, b = kw.get("from", a), kw.get("to", b)
    if b is None:
        a, b = (0, a) if a else (0, 2 ** 24)
    return _fill_from(self, rng_of(generator).integers(a, b, tuple(self.shape)))


def exponential_(self, lambd=1.0, *, generator=None):
    """Fill in place with exponential samples of rate ``lambd``."""
    return _fill_from(self, rng_of(generator).exponential(1.0 / lambd, tuple(self.shape)))


# elements a large contiguous CPU tensor is filled with per draw: a weight initialised in
# place has one block of samples beside it, not a copy of its size
_FILL_BLOCK = 1 << 20


def _fill_drawn(self, draw) -> Tensor:
    """Fill ``self`` in place with ``draw(shape)``'s samples: in blocks of its memory order
    where that is its logical order, which gives the same values (the streams draw element
    by element)."""
    data = self._data
    if self._device is not CPU or data.size <= _FILL_BLOCK or not data.flags.c_contiguous:
        return _fill_from(self, draw(tuple(self.shape)))
    _check_fill(self)
    flat = data.reshape(-1)
    for start in range(0, flat.size, _FILL_BLOCK):
        flat[start:start + _FILL_BLOCK] = draw((min(_FILL_BLOCK, flat.size - start),))
    self._vc[0] += 1
    return self


def _check_fill(self) -> None:
    if self._requires_grad and self.grad_fn is None and STATE.enabled:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place "
                           "operation.")
    check_overlap(self)


def _fill_from(self, arr) -> Tensor:
    """Overwrite ``self``'s data in place with samples, host arrays or the device's own
    (not recorded for autograd)."""
    _check_fill(self)
    if isinstance(arr, np.ndarray) or self._device is CPU:
        arr = D.convert(np.asarray(arr), self.dtype.to_numpy(), copy=False)
        if self._device is not CPU:
            arr = self._device.backend.from_host(arr, self._device.index)
    self._data[...] = arr
    self._vc[0] += 1
    return self


Tensor.fill_ = fill_
Tensor.zero_ = zero_
Tensor.copy_ = copy_
Tensor.uniform_ = uniform_
Tensor.normal_ = normal_
Tensor.bernoulli_ = bernoulli_
Tensor.random_ = random_
Tensor.exponential_ = exponential_


def bernoulli(self, p=None, *, generator=None):
    return random.bernoulli(self, p, generator=generator)


Tensor.bernoulli = bernoulli
Tensor.multinomial = lambda self, num_samples, replacement=False, *, generator=None: \
    random.multinomial(self, num_samples, replacement, generator=generator)


# ----- autograd-facing methods (the engine does the work) --------------------------------


def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
    """Compute gradients of this tensor w.r.t. graph leaves (needs torcia-autograd)."""
    (AUTOGRAD.engine or load_autograd()).backward(self, gradient, retain_graph, create_graph,
                                                  inputs)


def register_hook(self, hook):
    """Register ``hook(grad) -> Tensor or None`` called when this tensor's gradient is
    computed; returns a handle with ``remove()``."""
    return load_autograd().register_hook(self, hook)


def register_post_accumulate_grad_hook(self, hook):
    """Register ``hook(tensor)`` called after a gradient is accumulated into this leaf's
    ``.grad``; returns a handle with ``remove()``."""
    return load_autograd().register_post_accumulate_grad_hook(self, hook)


def retain_grad(self):
    """Keep ``.grad`` for this non-leaf tensor after backward."""
    load_autograd().retain_grad(self)


def detach_(self):
    """Detach from the graph in place (makes this tensor a leaf)."""
    self.grad_fn = None
    self._requires_grad = False
    return self


Tensor.backward = backward
Tensor.register_hook = register_hook
Tensor.register_post_accumulate_grad_hook = register_post_accumulate_grad_hook
Tensor.retain_grad = retain_grad
Tensor.detach_ = detach_
Tensor.retains_grad = property(lambda self: self._retains_grad)
Tensor.output_nr = property(lambda self: self._out_nr)


def apply_(self, fn):
    """Apply a Python function to every element in place (CPU tensors only, slow)."""
    if self._device is not CPU:
        raise TypeError("apply_ is only implemented on CPU tensors")
    flat = self._data.reshape(-1)
    for i, v in enumerate(flat.tolist()):
        flat[i] = fn(v)
    self._vc[0] += 1
    return self


Tensor.apply_ = apply_
Tensor.get_device = lambda self: -1 if self._device is CPU else self._device.index
Tensor.is_shared = _shared_memory.is_shared
Tensor.is_sparse = False
Tensor.is_sparse_csr = False
Tensor.is_quantized = False
Tensor.is_mkldnn = False
Tensor.is_nested = False


def _on(device_type):
    return property(lambda self: self._device.type == device_type,
                    doc=f"Whether the tensor is on a {device_type!r} device.")


# PyTorch's device predicates; a plugin's device answers for its own type name
for _name in ("cpu", "meta", "xpu", "mps", "ipu", "hpu", "mtia", "maia", "vulkan", "xla"):
    setattr(Tensor, f"is_{_name}", _on(_name))
del _name
Tensor.layout = _oplib.strided
Tensor.names = property(lambda self: (None,) * self.ndim)


def _add_inplace_example(fn, name, function):
    if callable(fn) and ">>>" not in (fn.__doc__ or ""):
        example = _inplace_example(name[:-1], function=function)
        if example:
            fn.__doc__ = (fn.__doc__ or "").rstrip() + example


# the in-place forms written by hand (fill_, transpose_, dropout_...) take their example from
# the table the generated ones use, where their docstrings have none
for _name, _fn in list(vars(Tensor).items()):
    if _name.endswith("_") and not _name.startswith("_"):
        _add_inplace_example(_fn, _name, function=False)
for _module in _oplib.FAMILIES:
    for _name, _fn in list(vars(_module).items()):
        if _name.endswith("_") and not _name.startswith("_"):
            _add_inplace_example(_fn, _name, function=True)
del _name, _fn, _module


# The docstrings of the members bound above as lambdas and properties, and the examples of
# those written without one; the docs tests run the examples.
_MEMBER_DOCS = {
    "cuda": """A copy on the CUDA device ``device`` (the current one by default); needs torcia-cuda
and a GPU.""",
    "cpu": """A copy on the CPU, or ``self`` if it is already there.

>>> torcia.tensor([1, 2]).cpu().device
device(type='cpu')""",
    "float": """``self.to(torcia.float32)``.

>>> torcia.tensor([1, 2]).float()
tensor([1., 2.])""",
    "double": """``self.to(torcia.float64)``.

>>> torcia.tensor([1, 2]).double()
tensor([1., 2.], dtype=torcia.float64)""",
    "half": """``self.to(torcia.float16)``.

>>> torcia.tensor([1, 2]).half()
tensor([1., 2.], dtype=torcia.float16)""",
    "bfloat16": """``self.to(torcia.bfloat16)``.

>>> torcia.tensor([1, 2]).bfloat16()
tensor([1., 2.], dtype=torcia.bfloat16)""",
    "long": """``self.to(torcia.int64)``.

>>> torcia.tensor([1.5, -2.5]).long()
tensor([ 1, -2])""",
    "int": """``self.to(torcia.int32)``.

>>> torcia.tensor([1.5, -2.5]).int()
tensor([ 1, -2], dtype=torcia.int32)""",
    "short": """``self.to(torcia.int16)``.

>>> torcia.tensor([1.5, -2.5]).short()
tensor([ 1, -2], dtype=torcia.int16)""",
    "char": """``self.to(torcia.int8)``.

>>> torcia.tensor([1.5, -2.5]).char()
tensor([ 1, -2], dtype=torcia.int8)""",
    "byte": """``self.to(torcia.uint8)``.

>>> torcia.tensor([1.5, 2.5]).byte()
tensor([1, 2], dtype=torcia.uint8)""",
    "bool": """``self.to(torcia.bool)``.

>>> torcia.tensor([0, 2]).bool()
tensor([False,  True])""",
    "type_as": """``self`` cast to ``other``'s dtype.

>>> torcia.tensor([1, 2]).type_as(torcia.tensor([0.5]))
tensor([1., 2.])""",
    "view_as": """A view of ``self`` with ``other``'s shape.

>>> torcia.arange(4).view_as(torcia.zeros(2, 2))
tensor([[0, 1],
        [2, 3]])""",
    "reshape_as": """``self`` reshaped to ``other``'s shape.

>>> torcia.arange(4).reshape_as(torcia.zeros(2, 2))
tensor([[0, 1],
        [2, 3]])""",
    "is_pinned": """Whether the tensor is in pinned (page-locked) host memory, see
:meth:`pin_memory`.

>>> torcia.tensor([1.0]).is_pinned()
False""",
    "share_memory_": """Move the tensor's memory (its base's, for a view; its views follow) into
shared memory, in place, and return ``self``: processes of :mod:`torcia.multiprocessing`
given the tensor then read and write the same memory. A no-op where it is shared already,
and for CUDA tensors.

>>> x = torcia.tensor([1.0, 2.0])
>>> x.share_memory_() is x, x.is_shared()
(True, True)""",
    "T": """The tensor with its dimensions reversed.

>>> torcia.tensor([[1, 2], [3, 4]]).T
tensor([[1, 3],
        [2, 4]])""",
    "mT": """The tensor with its last two dimensions swapped (a batch of transposed matrices).

>>> torcia.zeros(5, 2, 3).mT.shape
torcia.Size([5, 3, 2])""",
    "mH": """The conjugate transpose of the last two dimensions.

>>> torcia.tensor([[1 + 1j, 2j]]).mH
tensor([[1.-1.j],
        [0.-2.j]])""",
    "H": """The conjugate transpose of a matrix (at most 2-D).

>>> torcia.tensor([[1 + 1j, 2j]]).H
tensor([[1.-1.j],
        [0.-2.j]])""",
    "adjoint": """The conjugate transpose of the last two dimensions, as :attr:`mH`.

>>> torcia.tensor([[1 + 1j, 2j]]).adjoint()
tensor([[1.-1.j],
        [0.-2.j]])""",
    "type": """With no argument, the type name of the tensor (``'torcia.FloatTensor'``...);
otherwise ``self`` cast to ``dtype``, a dtype or such a name.

>>> x = torcia.tensor([1, 2])
>>> x.type()
'torcia.LongTensor'
>>> x.type(torcia.float64)
tensor([1., 2.], dtype=torcia.float64)""",
    "new_zeros": """A tensor of zeros of ``size``, with ``self``'s dtype and device unless given.

>>> torcia.tensor([1.0], dtype=torcia.float64).new_zeros(2, 3)
tensor([[0., 0., 0.],
        [0., 0., 0.]], dtype=torcia.float64)""",
    "new_ones": """A tensor of ones of ``size``, with ``self``'s dtype and device unless given.

>>> torcia.tensor([1, 2]).new_ones(3)
tensor([1, 1, 1])""",
    "new_empty": """An uninitialised tensor of ``size``, with ``self``'s dtype and device unless
given.

>>> torcia.tensor([1, 2]).new_empty(2, 3).shape
torcia.Size([2, 3])""",
    "new_full": """A tensor of ``size`` filled with ``fill_value``, with ``self``'s dtype and device
unless given.

>>> torcia.tensor([1.0]).new_full((2,), 7)
tensor([7., 7.])""",
    "new_tensor": """A tensor of ``data``, with ``self``'s dtype and device unless given.

>>> torcia.tensor([1.0], dtype=torcia.float64).new_tensor([1, 2])
tensor([1., 2.], dtype=torcia.float64)""",
    "uniform_": """>>> x = torcia.empty(100)
>>> bool(((x.uniform_(-1, 1) >= -1) & (x < 1)).all())
True""",
    "normal_": """>>> _ = torcia.manual_seed(0)
>>> x = torcia.empty(10000).normal_(mean=3.0, std=0.1)
>>> round(x.mean().item(), 1)
3.0""",
    "bernoulli_": """>>> x = torcia.empty(5).bernoulli_(1.0)
>>> x
tensor([1., 1., 1., 1., 1.])""",
    "random_": """>>> x = torcia.empty(100, dtype=torcia.int64).random_(0, 4)
>>> bool(((x >= 0) & (x < 4)).all())
True""",
    "exponential_": """>>> x = torcia.empty(100).exponential_(2.0)
>>> bool((x >= 0).all())
True""",
    "bernoulli": """0/1 draws with the probabilities in ``self`` (or ``p``), of ``self``'s shape.

>>> torcia.tensor([0.0, 1.0, 1.0]).bernoulli()
tensor([0., 1., 1.])""",
    "multinomial": """``num_samples`` indices drawn from the probabilities in each row of ``self``,
as :func:`torcia.multinomial`.

>>> torcia.tensor([0.0, 0.0, 1.0]).multinomial(2, replacement=True)
tensor([2, 2])""",
    "backward": """>>> x = torcia.tensor([1.0, 2.0], requires_grad=True)
>>> (x * x).sum().backward()
>>> x.grad
tensor([2., 4.])""",
    "register_hook": """>>> x = torcia.tensor([1.0, 2.0], requires_grad=True)
>>> handle = x.register_hook(lambda grad: grad * 10)
>>> (x * 3).sum().backward()
>>> x.grad
tensor([30., 30.])
>>> handle.remove()""",
    "register_post_accumulate_grad_hook": """>>> x = torcia.tensor([1.0], requires_grad=True)
>>> seen = []
>>> handle = x.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.item()))
>>> (x * 2).sum().backward()
>>> seen
[2.0]""",
    "retain_grad": """>>> x = torcia.tensor([1.0, 2.0], requires_grad=True)
>>> y = x * 2
>>> y.retain_grad()
>>> y.sum().backward()
>>> y.grad
tensor([1., 1.])""",
    "retains_grad": """Whether this non-leaf tensor keeps its ``.grad`` after backward (see
:meth:`retain_grad`).

>>> y = torcia.tensor([1.0], requires_grad=True) * 2
>>> y.retains_grad
False
>>> y.retain_grad()
>>> y.retains_grad
True""",
    "output_nr": """Which output of the operation that made this tensor it is (0 for a leaf).

>>> a, b = torcia.tensor([1.0, 2.0], requires_grad=True).unbind()
>>> (a.output_nr, b.output_nr)
(0, 0)""",
    "apply_": """>>> torcia.tensor([1.0, 2.0]).apply_(lambda v: v * 10)
tensor([10., 20.])""",
    "is_shared": """Whether the tensor is in memory other processes can map: after
:meth:`share_memory_`, or when received from another process through
:mod:`torcia.multiprocessing` (CUDA tensors: always).

>>> torcia.tensor([1.0]).is_shared()
False""",
    "get_device": """The device index: -1 on the CPU.

>>> torcia.tensor([1.0]).get_device()
-1""",
    "names": """The dimension names: None for each dimension (torcia has no named tensors).

>>> torcia.zeros(2, 3).names
(None, None)""",
    "is_cpu": """Whether the tensor is on a 'cpu' device.

>>> torcia.tensor([1.0]).is_cpu
True""",
    "is_xpu": """Whether the tensor is on a 'xpu' device.

>>> torcia.tensor([1.0]).is_xpu
False""",
    "is_mps": """Whether the tensor is on a 'mps' device.

>>> torcia.tensor([1.0]).is_mps
False""",
    "is_ipu": """Whether the tensor is on a 'ipu' device.

>>> torcia.tensor([1.0]).is_ipu
False""",
    "is_hpu": """Whether the tensor is on a 'hpu' device.

>>> torcia.tensor([1.0]).is_hpu
False""",
    "is_mtia": """Whether the tensor is on a 'mtia' device.

>>> torcia.tensor([1.0]).is_mtia
False""",
    "is_maia": """Whether the tensor is on a 'maia' device.

>>> torcia.tensor([1.0]).is_maia
False""",
    "is_vulkan": """Whether the tensor is on a 'vulkan' device.

>>> torcia.tensor([1.0]).is_vulkan
False""",
    "is_xla": """Whether the tensor is on a 'xla' device.

>>> torcia.tensor([1.0]).is_xla
False""",
}


def _document(name, text):
    member = vars(Tensor)[name]
    fn = member.fget if isinstance(member, property) else member
    # an entry is a summary, an example, or a summary and an example after a blank line
    summary, _, example = ("", "", text) if text.startswith(">>>") else text.partition("\n\n")
    doc = summary or (fn.__doc__ or member.__doc__ or "").rstrip()
    if example:
        doc += "\n\nExamples\n--------\n>>> import torcia\n" + example + "\n"
    fn.__doc__ = doc
    if isinstance(member, property):
        setattr(Tensor, name, property(member.fget, member.fset, member.fdel, doc))


for _name, _text in _MEMBER_DOCS.items():
    _document(_name, _text)
del _name, _text
