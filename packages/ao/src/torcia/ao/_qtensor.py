"""Quantized tensors: integers with their scale and zero point (PyTorch's quantized
``Tensor``), the quantized dtypes and schemes, and the functions that make them.

A :class:`QTensor` holds a torcia Tensor of integers (``int_repr()``) and its
quantization parameters; it is not a :class:`torcia.Tensor` (arithmetic on it raises, as
on PyTorch's quantized tensors, naming the way out: ``dequantize()`` or a quantized
module). Quantizing and dequantizing run the ops torcia-ao defines, through dispatch.
"""

from __future__ import annotations

import torcia
from torcia.ao._ops import choose_qparams
from torcia.library import Tensor, call


class qdtype:
    """A quantized dtype (``torch.qint8``...): its integer range and storage."""

    def __init__(self, name: str, qmin: int, qmax: int, storage):
        self.name = name
        self.qmin = qmin
        self.qmax = qmax
        self.storage = storage  # the torcia dtype of int_repr()
        self.is_floating_point = False
        self.is_signed = qmin < 0

    def __repr__(self):
        return f"torcia.{self.name}"

    def __reduce__(self):
        return (_qdtype_by_name, (self.name,))


class qscheme:
    """A quantization scheme (``torch.per_tensor_affine``...)."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self):
        return f"torcia.{self.name}"

    def __reduce__(self):
        return (_qscheme_by_name, (self.name,))


qint8 = qdtype("qint8", -128, 127, torcia.int8)
quint8 = qdtype("quint8", 0, 255, torcia.uint8)
qint32 = qdtype("qint32", -(2 ** 31), 2 ** 31 - 1, torcia.int32)
quint4x2 = qdtype("quint4x2", 0, 15, torcia.uint8)
QDTYPES = {d.name: d for d in (qint8, quint8, qint32, quint4x2)}

per_tensor_affine = qscheme("per_tensor_affine")
per_channel_affine = qscheme("per_channel_affine")
per_tensor_symmetric = qscheme("per_tensor_symmetric")
per_channel_symmetric = qscheme("per_channel_symmetric")
per_channel_affine_float_qparams = qscheme("per_channel_affine_float_qparams")
QSCHEMES = {s.name: s for s in (per_tensor_affine, per_channel_affine, per_tensor_symmetric,
                                per_channel_symmetric, per_channel_affine_float_qparams)}


def _qdtype_by_name(name):
    return QDTYPES[name]


def _qscheme_by_name(name):
    return QSCHEMES[name]


def reduced_range(dtype: qdtype, reduce_range: bool) -> tuple[int, int]:
    """The dtype's integer range, halved (7 bits) where ``reduce_range``: what x86's
    int8 products need to stay clear of 16-bit overflow on CPUs without VNNI."""
    if not reduce_range:
        return dtype.qmin, dtype.qmax
    return {"quint8": (0, 127), "qint8": (-64, 63)}.get(dtype.name, (dtype.qmin, dtype.qmax))


def _check_qdtype(dtype) -> qdtype:
    if not isinstance(dtype, qdtype):
        raise RuntimeError(f"Expected a quantized dtype (torcia.quint8, torcia.qint8, "
                           f"torcia.qint32), got {dtype}")
    return dtype


class QTensor:
    """A quantized tensor: integers and the affine map back to floats
    (``x ~ (int_repr() - zero_point) * scale``), per tensor or per channel.

    Examples
    --------
    >>> import torcia
    >>> q = torcia.quantize_per_tensor(torcia.tensor([0.0, 0.5, 1.0]), 0.1, 10,
    ...                                torcia.quint8)
    >>> q.int_repr().tolist(), q.q_scale(), q.q_zero_point()
    ([10, 15, 20], 0.1, 10)
    >>> q.dequantize().tolist()
    [0.0, 0.5, 1.0]
    """

    __slots__ = ("_int", "_dtype", "_scale", "_zero_point", "_axis")
    is_quantized = True

    def __init__(self, int_repr: Tensor, dtype: qdtype, scale, zero_point, axis=None):
        self._int = int_repr
        self._dtype = dtype
        self._scale = scale  # a float, or a float64 Tensor per channel
        self._zero_point = zero_point  # an int, or an int64 Tensor per channel
        self._axis = axis  # None: per tensor

    # -- what it is ---------------------------------------------------------------------

    @property
    def dtype(self) -> qdtype:
        return self._dtype

    @property
    def shape(self):
        return self._int.shape

    @property
    def device(self):
        return self._int.device

    @property
    def requires_grad(self) -> bool:
        return False

    def size(self, dim=None):
        return self._int.size() if dim is None else self._int.size(dim)

    def dim(self) -> int:
        return self._int.dim()

    ndim = property(dim)

    def numel(self) -> int:
        return self._int.numel()

    def __len__(self):
        return len(self._int)

    def qscheme(self) -> qscheme:
        """The scheme: per tensor or per channel, affine (or symmetric for int8 weights
        with zero points 0)."""
        if self._axis is None:
            return per_tensor_affine
        return per_channel_affine

    def int_repr(self) -> Tensor:
        """The integers, as a new tensor of uint8 / int8 / int32."""
        return self._int.clone()

    def q_scale(self) -> float:
        self._per_tensor("q_scale")
        return float(self._scale)

    def q_zero_point(self) -> int:
        self._per_tensor("q_zero_point")
        return int(self._zero_point)

    def q_per_channel_scales(self) -> Tensor:
        self._per_channel("q_per_channel_scales")
        return self._scale.clone()

    def q_per_channel_zero_points(self) -> Tensor:
        self._per_channel("q_per_channel_zero_points")
        return self._zero_point.clone()

    def q_per_channel_axis(self) -> int:
        self._per_channel("q_per_channel_axis")
        return self._axis

    def _per_tensor(self, what):
        if self._axis is not None:
            raise RuntimeError(f"Expected quantizer->qscheme() == kPerTensorAffine to be "
                               f"true, but got false. ({what} of a per-channel quantized "
                               "tensor: use q_per_channel_scales())")

    def _per_channel(self, what):
        if self._axis is None:
            raise RuntimeError(f"Expected quantizer->qscheme() == kPerChannelAffine to be "
                               f"true, but got false. ({what} of a per-tensor quantized "
                               "tensor: use q_scale())")

    def dequantize(self) -> Tensor:
        """The float32 values ``(int_repr() - zero_point) * scale``."""
        if self._axis is None:
            return call("dequantize_per_tensor", (self._int,),
                        {"scale": float(self._scale), "zero_point": int(self._zero_point)})
        return call("dequantize_per_channel", (self._int, self._scale, self._zero_point),
                    {"axis": self._axis})

    # -- views of the integers, the parameters kept --------------------------------------

    def _same(self, ints: Tensor) -> QTensor:
        return QTensor(ints, self._dtype, self._scale, self._zero_point, self._axis)

    def _reshaped(self, ints: Tensor, what: str) -> QTensor:
        if self._axis is not None:
            raise RuntimeError(f"{what} of a per-channel quantized tensor is not supported")
        return self._same(ints)

    def reshape(self, *shape):
        return self._reshaped(self._int.reshape(*shape), "reshape")

    def view(self, *shape):
        return self._reshaped(self._int.view(*shape), "view")

    def flatten(self, start_dim=0, end_dim=-1):
        return self._reshaped(self._int.flatten(start_dim, end_dim), "flatten")

    def transpose(self, dim0, dim1):
        return self._reshaped(self._int.transpose(dim0, dim1), "transpose")

    def permute(self, *dims):
        return self._reshaped(self._int.permute(*dims), "permute")

    def squeeze(self, *dims):
        return self._reshaped(self._int.squeeze(*dims), "squeeze")

    def unsqueeze(self, dim):
        return self._reshaped(self._int.unsqueeze(dim), "unsqueeze")

    def __getitem__(self, key):
        return self._reshaped(self._int[key], "indexing")

    def contiguous(self):
        return self._same(self._int.contiguous())

    def clone(self):
        return self._same(self._int.clone())

    def detach(self):
        return self

    def cpu(self):
        return self

    def chunk(self, chunks, dim=0):
        return [self._reshaped(t, "chunk") for t in self._int.chunk(chunks, dim)]

    def repeat(self, *sizes):
        return self._reshaped(self._int.repeat(*sizes), "repeat")

    def flip(self, *dims):
        return self._same(self._int.flip(*dims))

    def mean(self, dim=None, keepdim=False):
        """The mean of the values, quantized at this tensor's scale and zero point (as
        torch's quantized mean)."""
        self._per_tensor("mean")
        values = self.dequantize()
        values = values.mean() if dim is None else values.mean(dim, keepdim=keepdim)
        return self._requantized(values)

    def _requantized(self, values: Tensor) -> QTensor:
        return quantize_per_tensor(values, float(self._scale), int(self._zero_point),
                                   self._dtype)

    def _fixed_range(self, values: Tensor, low: float, high: float) -> QTensor:
        # an output range known in advance ([0, 1] for sigmoid, [-1, 1] for tanh) takes the
        # dtype's whole integer range, as torch's quantized sigmoid and tanh do
        self._per_tensor("a fixed-range activation")
        span = self._dtype.qmax - self._dtype.qmin + 1
        scale = (high - low) / span
        zero = self._dtype.qmin - round(low / scale)
        return quantize_per_tensor(values, scale, zero, self._dtype)

    def sigmoid(self):
        """Sigmoid, its output at the fixed parameters of the range [0, 1] (scale 1/256)."""
        return self._fixed_range(self.dequantize().sigmoid(), 0.0, 1.0)

    def tanh(self):
        """Tanh, its output at the fixed parameters of the range [-1, 1] (scale 2/256)."""
        return self._fixed_range(self.dequantize().tanh(), -1.0, 1.0)

    def relu(self):
        """ReLU in the quantized domain: integers below the zero point become it."""
        self._per_tensor("relu")
        return self._same(self._int.clamp(min=int(self._zero_point)))

    def __add__(self, other):
        raise NotImplementedError(
            "Could not run 'add' with arguments from the 'QuantizedCPU' backend: add "
            "quantized tensors with a FloatFunctional (torcia.ao.nn.quantized."
            "FloatFunctional().add, which quantization replaces with QFunctional), or "
            "dequantize() them")

    __radd__ = __mul__ = __rmul__ = __sub__ = __add__

    def __repr__(self):
        values = repr(self.dequantize())
        body = values[len("tensor("):-1] if values.startswith("tensor(") else values
        if ", dtype=" in body:
            body = body[:body.index(", dtype=")]
        size = tuple(self.shape)
        if self._axis is None:
            params = (f"quantization_scheme=torcia.per_tensor_affine, scale={self.q_scale()}, "
                      f"zero_point={self.q_zero_point()}")
        else:
            params = (f"quantization_scheme=torcia.per_channel_affine,\n       "
                      f"scale={self._scale!r},\n       zero_point={self._zero_point!r}, "
                      f"axis={self._axis}")
        return f"tensor({body}, size={size}, dtype={self._dtype},\n       {params})"


def quantize_per_tensor(input, scale, zero_point, dtype) -> QTensor:
    """Quantize a float tensor with one scale and zero point
    (``torch.quantize_per_tensor``): ``clamp(rint(input / scale) + zero_point)``.

    Examples
    --------
    >>> import torcia
    >>> q = torcia.quantize_per_tensor(torcia.tensor([-1.0, 0.0, 2.0]), 0.5, 0,
    ...                                torcia.qint8)
    >>> q.int_repr().tolist(), q.dtype
    ([-2, 0, 4], torcia.qint8)
    """
    dtype = _check_qdtype(dtype)
    if isinstance(input, (list, tuple)):
        return [quantize_per_tensor(t, s, z, dtype) for t, s, z in
                zip(input, scale, zero_point)]
    scale = float(scale.item() if isinstance(scale, Tensor) else scale)
    zero_point = int(zero_point.item() if isinstance(zero_point, Tensor) else zero_point)
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"Quantize only works on Float Tensor, got {input.dtype}")
    ints = call("quantize_per_tensor", (input,),
                {"scale": scale, "zero_point": zero_point, "qmin": dtype.qmin,
                 "qmax": dtype.qmax, "dtype": dtype.name})
    return QTensor(ints, dtype, scale, zero_point)


def quantize_per_channel(input, scales, zero_points, axis: int, dtype) -> QTensor:
    """Quantize with a scale and zero point per slice along ``axis``
    (``torch.quantize_per_channel``).

    Examples
    --------
    >>> import torcia
    >>> w = torcia.tensor([[1.0, -1.0], [0.2, 0.4]])
    >>> q = torcia.quantize_per_channel(w, torcia.tensor([0.5, 0.1]),
    ...                                 torcia.tensor([0, 0]), 0, torcia.qint8)
    >>> q.int_repr().tolist(), q.q_per_channel_axis()
    ([[2, -2], [2, 4]], 0)
    """
    dtype = _check_qdtype(dtype)
    axis = axis % input.dim()
    scales = torcia.as_tensor(scales, dtype=torcia.float64)
    zero_points = torcia.as_tensor(zero_points, dtype=torcia.int64)
    if scales.numel() != input.shape[axis] or zero_points.numel() != input.shape[axis]:
        raise RuntimeError(f"quantize_per_channel: {scales.numel()} scales and "
                           f"{zero_points.numel()} zero points for {input.shape[axis]} "
                           f"channels along axis {axis}")
    ints = call("quantize_per_channel", (input, scales, zero_points),
                {"axis": axis, "qmin": dtype.qmin, "qmax": dtype.qmax, "dtype": dtype.name})
    return QTensor(ints, dtype, scales, zero_points, axis)


def _joined(join, tensors, dim):
    first = tensors[0]
    if not isinstance(first, QTensor):
        return join(tensors, dim=dim)
    # torch's quantized cat and stack give every input the first one's parameters
    ints = [t._int if (t._scale, t._zero_point, t._dtype) ==
            (first._scale, first._zero_point, first._dtype)
            else first._requantized(t.dequantize())._int for t in tensors]
    return first._same(join(ints, dim=dim))


def cat(tensors, dim=0):
    """``torcia.cat`` of float tensors, or of quantized tensors, which come out at the first
    one's scale and zero point (the others requantized to them, as torch's quantized cat).

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao._qtensor import cat
    >>> a = torcia.quantize_per_tensor(torcia.tensor([1.0]), 0.5, 0, torcia.quint8)
    >>> b = torcia.quantize_per_tensor(torcia.tensor([2.0]), 0.25, 4, torcia.quint8)
    >>> out = cat([a, b])
    >>> out.int_repr().tolist(), out.q_scale()
    ([2, 4], 0.5)
    """
    return _joined(torcia.cat, list(tensors), dim)


def stack(tensors, dim=0):
    """:func:`cat` along a new dimension ``dim``."""
    return _joined(torcia.stack, list(tensors), dim)


def dequantize(tensor):
    """The float values of a quantized tensor (a list of them, element by element);
    a float tensor comes back as it is (``torch.dequantize``).

    Examples
    --------
    >>> import torcia
    >>> q = torcia.quantize_per_tensor(torcia.tensor([1.0]), 0.25, 0, torcia.quint8)
    >>> torcia.dequantize(q).tolist()
    [1.0]
    """
    if isinstance(tensor, (list, tuple)):
        return [dequantize(t) for t in tensor]
    return tensor.dequantize() if isinstance(tensor, QTensor) else tensor


def quantize_per_tensor_dynamic(input, dtype, reduce_range: bool) -> QTensor:
    """Quantize with the scale and zero point the values call for
    (``torch.quantize_per_tensor_dynamic``): their range, 0 included, on the dtype's.

    Examples
    --------
    >>> import torcia
    >>> q = torcia.quantize_per_tensor_dynamic(torcia.tensor([0.0, 2.55]), torcia.quint8,
    ...                                        False)
    >>> q.int_repr().tolist()
    [0, 255]
    """
    dtype = _check_qdtype(dtype)
    qmin, qmax = reduced_range(dtype, reduce_range)
    data = input.detach().numpy()
    lo, hi = (float(data.min()), float(data.max())) if data.size else (0.0, 0.0)
    scale, zero = choose_qparams(lo, hi, qmin, qmax)
    return quantize_per_tensor(input, scale, zero, dtype)

