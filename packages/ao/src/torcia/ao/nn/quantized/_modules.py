"""Quantized modules (``torch.ao.nn.quantized``): they take and return quantized tensors,
hold int8 weights with a scale per output channel and the output's scale and zero
point, and run the quantized ops (``torcia/ao/_ops.py``) through dispatch."""

from __future__ import annotations

import numpy as np

import torcia
from torcia import nn
from torcia.ao._qtensor import (
    QTensor,
    per_channel_affine_float_qparams,
    per_tensor_affine,
    per_tensor_symmetric,
    qint8,
    quantize_per_tensor,
    quint8,
)
from torcia.ao.nn import intrinsic
from torcia.ao.nn import qat as nnqat
from torcia.ao.nn.intrinsic import qat as nniqat
from torcia.library import Tensor, call, tensor_of


def weight_params(weight: Tensor, observer) -> tuple[Tensor, Tensor]:
    """``weight`` quantized by what ``observer`` (a weight observer or fake quantizer)
    makes of it: int8 values and a float32 scale per output channel (axis 0)."""
    weight = weight.detach()
    observer(weight)
    scale, zero = observer.calculate_qparams()
    if zero.abs().max().item() != 0:
        raise ValueError("quantized weights must be symmetric (zero point 0): use a "
                         "per_tensor_symmetric or per_channel_symmetric weight observer")
    if getattr(observer, "dtype", qint8) is not qint8:
        raise ValueError(f"quantized weights must be qint8, the observer makes "
                         f"{observer.dtype}")
    out_channels = weight.shape[0]
    scales = scale.to(torcia.float32).reshape(-1).expand(out_channels).contiguous()
    qmin, qmax = observer.quant_min, observer.quant_max
    ints = call("quantize_per_channel",
                (weight, scales.to(torcia.float64), torcia.zeros(out_channels,
                                                                  dtype=torcia.int64)),
                {"axis": 0, "qmin": qmin, "qmax": qmax, "dtype": "qint8"})
    return ints, scales


def output_params(mod) -> tuple[float, int]:
    """The output's scale and zero point from ``mod``'s activation observer."""
    obs = getattr(mod, "activation_post_process", None)
    if obs is None:
        raise RuntimeError(f"{type(mod).__name__} has no activation_post_process: prepare() "
                           "the model (with a qconfig) and calibrate it before convert()")
    scale, zero = obs.calculate_qparams()
    return float(scale.item()), int(zero.item())


def _weight_observer(mod):
    fq = getattr(mod, "weight_fake_quant", None)
    if fq is not None:
        return fq
    if getattr(mod, "qconfig", None) is None:
        raise RuntimeError(f"{type(mod).__name__} has no qconfig: give it one (or its "
                           "parent) before quantizing")
    return mod.qconfig.weight()


def _check_quantized(x, where: str) -> QTensor:
    if not isinstance(x, QTensor):
        raise RuntimeError(f"{where} expects a quantized tensor (from a QuantStub or "
                           f"another quantized module), got a {type(x).__name__}: is a "
                           "QuantStub missing before it?")
    if x._axis is not None:
        raise RuntimeError(f"{where} expects a per-tensor quantized input")
    return x


def _averaged(x, fn, what):
    """``fn`` (an average: linear, so it commutes with the affine map) of the integers less
    the zero point, the zero point added back before rounding half to even, the quantization
    parameters kept, as torch averages the integers; averaging the dequantized floats
    instead lands a sum on a half step a rounding error off, to the other side."""
    x = _check_quantized(x, what)
    info = torcia.iinfo(x._int.dtype)
    zero_point = int(x._zero_point)
    out = x._int.to(torcia.float64)
    if zero_point:  # the ops of a zero point 0 change nothing (a ReLU's output): skipped
        out = fn(out - zero_point) + zero_point
    else:
        out = fn(out)
    return QTensor(out.round().clamp(info.min, info.max).to(x._int.dtype), x.dtype, x._scale,
                   x._zero_point)


def max_pooled2d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    """2-d max pooling of a quantized (C, H, W) or (N, C, H, W) tensor, on its integers (the
    quantization parameters kept); ``stride`` None or empty: ``kernel_size``."""
    x = _check_quantized(x, "quantized max_pool2d")
    if x.dim() not in (3, 4):
        raise ValueError(f"quantized max_pool2d expects a 3-D or 4-D input, got {x.dim()}-D")
    kernel = pair(kernel_size)
    out = call("quantized_max_pool2d", (x._int,),
               {"kernel_size": kernel, "stride": pair(stride) if stride else kernel,
                "padding": pair(padding), "dilation": pair(dilation),
                "ceil_mode": bool(ceil_mode)})
    return QTensor(out, x._dtype, x._scale, x._zero_point)


def frozen(module, weight: Tensor, name: str = "weight") -> Tensor:
    """``weight`` as the kernels get it: a read-only copy, made again whenever the buffer is
    another tensor or torcia wrote into it (its version counter moved), so that a native
    kernel may keep what it prepares from the copy (oneDNN's packed filters) while it lives,
    without comparing the weights on every call. Like the weights PyTorch packs, it does
    not follow writes into the buffer's array from outside torcia (``numpy()``). ``name``
    tells a module's weights apart (a recurrent layer has two per layer and direction)."""
    data = weight.__torcia_data__
    version = weight.__torcia_version__[0]
    copies = module.__dict__.setdefault("_frozen", {})
    seen = copies.get(name)
    if seen is not None and seen[0] is data and seen[1] == version:
        return seen[2]
    if not isinstance(data, np.ndarray):
        return weight
    copy = np.array(data)
    copy.flags.writeable = False
    copies[name] = (data, version, tensor_of(copy, weight.device))
    return copies[name][2]


class Quantize(nn.Module):
    """Quantize a float tensor at a fixed scale and zero point (what a QuantStub becomes).

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.quantized import Quantize
    >>> Quantize(0.5, 2, torcia.quint8)(torcia.tensor([1.0])).int_repr().tolist()
    [4]
    """

    def __init__(self, scale, zero_point, dtype, factory_kwargs=None):
        super().__init__()
        self.register_buffer("scale", torcia.tensor([float(scale)]))
        self.register_buffer("zero_point", torcia.tensor([int(zero_point)], dtype=torcia.int64))
        self.dtype = dtype

    def forward(self, X):
        b = self._buffers  # not Module.__getattr__: microseconds a lookup
        return quantize_per_tensor(X, b["scale"].item(), b["zero_point"].item(), self.dtype)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        scale, zero = output_params(mod)
        return cls(scale, zero, mod.activation_post_process.dtype)

    def extra_repr(self):
        return f"scale={self.scale}, zero_point={self.zero_point}, dtype={self.dtype}"


class DeQuantize(nn.Module):
    """Quantized tensor in, float tensor out (what a DeQuantStub becomes).

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.quantized import DeQuantize
    >>> q = torcia.quantize_per_tensor(torcia.tensor([1.5]), 0.5, 0, torcia.quint8)
    >>> DeQuantize()(q).tolist()
    [1.5]
    """

    def forward(self, Xq):
        return Xq.dequantize() if isinstance(Xq, QTensor) else Xq

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        return cls()


class Linear(nn.Module):
    """A quantized Linear layer (``torch.ao.nn.quantized.Linear``): uint8 in, uint8
    out at ``scale``/``zero_point``, int8 weights with a scale per output channel, a
    float bias.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.quantized import Linear
    >>> m = Linear(4, 2)
    >>> x = torcia.quantize_per_tensor(torcia.randn(3, 4), 0.05, 128, torcia.quint8)
    >>> m(x).dtype, m(x).shape
    (torcia.quint8, torcia.Size([3, 2]))
    """

    _FLOAT_MODULE = (nn.Linear, nnqat.Linear)
    _relu = False

    def __init__(self, in_features, out_features, bias_=True, dtype=qint8):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.scale, self.zero_point = 1.0, 0
        self.register_buffer("weight_int8", torcia.zeros(out_features, in_features,
                                                         dtype=torcia.int8))
        self.register_buffer("weight_scales", torcia.ones(out_features))
        self.register_buffer("bias_", torcia.zeros(out_features) if bias_ else None)

    def weight(self) -> QTensor:
        """The int8 weight as a quantized tensor (per channel)."""
        return QTensor(self.weight_int8, qint8, self.weight_scales.to(torcia.float64),
                       torcia.zeros(self.out_features, dtype=torcia.int64), 0)

    def bias(self):
        return self.bias_

    def set_weight_bias(self, w: Tensor, b) -> None:
        """Quantize float weights per output channel (symmetric int8) and keep ``b``."""
        from torcia.ao.quantization.observer import default_per_channel_weight_observer

        self.weight_int8, self.weight_scales = weight_params(
            w, default_per_channel_weight_observer())
        self.bias_ = None if b is None else b.detach().to(torcia.float32)

    def forward(self, x):
        x = _check_quantized(x, type(self).__name__)
        b = self._buffers  # not Module.__getattr__: microseconds a lookup
        out = call("quantized_linear", (x._int, b["weight_int8"], b["weight_scales"],
                                        b["bias_"]),
                   {"x_scale": float(x._scale), "x_zero_point": int(x._zero_point),
                    "out_scale": self.scale, "out_zero_point": self.zero_point,
                    "relu": self._relu})
        return QTensor(out, quint8, self.scale, self.zero_point)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        """The quantized layer of a calibrated float (or QAT) one: its weight through the
        QConfig's weight observer, its output parameters from its activation observer."""
        linear = mod[0] if isinstance(mod, intrinsic._FusedModule) else mod
        if linear is not mod:
            linear.qconfig = mod.qconfig
        weight, bias = mod.folded() if isinstance(mod, nniqat.LinearBn1d) \
            else (linear.weight, linear.bias)
        q = cls(linear.in_features, linear.out_features, bias is not None)
        q.weight_int8, q.weight_scales = weight_params(weight, _weight_observer(linear))
        q.bias_ = None if bias is None else bias.detach().to(torcia.float32)
        q.scale, q.zero_point = output_params(mod)
        return q

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"scale={self.scale}, zero_point={self.zero_point}, qscheme="
                "torcia.per_channel_affine")


def ntuple(v, n: int) -> tuple:
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


def pair(v) -> tuple:
    return ntuple(v, 2)


class _ConvNd(nn.Module):
    """What the quantized convolutions share: int8 weights with a scale per output
    channel, a float bias, the output's scale and zero point, zero padding."""

    _ND = 2
    _FLOAT_MODULE: tuple = ()
    _relu = False

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 dilation=1, groups=1, bias=True, padding_mode="zeros", device=None,
                 dtype=None):
        super().__init__()
        n = self._ND
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride = ntuple(kernel_size, n), ntuple(stride, n)
        self.padding, self.dilation, self.groups = ntuple(padding, n), ntuple(dilation, n), \
            groups
        if padding_mode != "zeros":
            raise NotImplementedError(f"quantized {type(self).__name__} supports zero padding "
                                      f"only, got padding_mode={padding_mode!r}")
        if in_channels % groups or out_channels % groups:
            raise ValueError("in_channels and out_channels must be divisible by groups")
        self.padding_mode = padding_mode
        self.scale, self.zero_point = 1.0, 0
        self.register_buffer("weight_int8", torcia.zeros(*self._weight_shape(),
                                                         dtype=torcia.int8))
        self.register_buffer("weight_scales", torcia.ones(out_channels))
        self.register_buffer("bias_", torcia.zeros(out_channels) if bias else None)

    def _weight_shape(self) -> tuple:
        return (self.out_channels, self.in_channels // self.groups, *self.kernel_size)

    def weight(self) -> QTensor:
        """The int8 weight as a quantized tensor (per output channel)."""
        return QTensor(self.weight_int8, qint8, self.weight_scales.to(torcia.float64),
                       torcia.zeros(self.out_channels, dtype=torcia.int64), 0)

    def bias(self):
        return self.bias_

    def _params(self, x: QTensor) -> dict:
        return {"x_scale": float(x._scale), "x_zero_point": int(x._zero_point),
                "stride": self.stride, "padding": self.padding, "dilation": self.dilation,
                "groups": self.groups, "out_scale": self.scale,
                "out_zero_point": self.zero_point}

    def _run(self, xi: Tensor, x: QTensor) -> Tensor:
        b = self._buffers
        return call("quantized_conv", (xi, b["weight_int8"], b["weight_scales"], b["bias_"]),
                    {**self._params(x), "relu": self._relu})

    def forward(self, x):
        if x.__class__ is not QTensor or x._axis is not None:
            x = _check_quantized(x, type(self).__name__)
        if x._int.dim() != self._ND + 2:
            raise ValueError(f"Input shape must be `(N, C, {', '.join('DHW'[-self._ND:])})`!"
                             f" got a {x.dim()}-d input")
        return QTensor(self._run(x._int, x), quint8, self.scale, self.zero_point)

    @staticmethod
    def _float_parts(mod):
        """The float convolution inside ``mod`` and its (weight, bias): a QAT ConvBn's
        BatchNorm folded into the weight first."""
        if isinstance(mod, nniqat._ConvBnNd):
            return mod, *mod.folded()
        conv = mod[0] if isinstance(mod, intrinsic._FusedModule) else mod
        if conv is not mod:
            conv.qconfig = mod.qconfig
        return conv, conv.weight, conv.bias

    @classmethod
    def _quantized_weight(cls, conv, weight):
        return weight_params(weight, _weight_observer(conv))

    @classmethod
    def _from_conv(cls, conv, bias):
        return cls(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride,
                   conv.padding, conv.dilation, conv.groups, bias is not None)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        """The quantized convolution of a calibrated float, fused or QAT one: its weight
        through the QConfig's weight observer, its output parameters from its activation
        observer."""
        conv, weight, bias = cls._float_parts(mod)
        if isinstance(conv.padding, str):
            raise NotImplementedError(f"quantized {cls.__name__} needs numeric padding, got "
                                      f"padding={conv.padding!r}")
        q = cls._from_conv(conv, bias)
        q.weight_int8, q.weight_scales = cls._quantized_weight(conv, weight)
        q.bias_ = None if bias is None else bias.detach().to(torcia.float32)
        q.scale, q.zero_point = cls._output_params(mod)
        return q

    @staticmethod
    def _output_params(mod) -> tuple[float, int]:
        return output_params(mod)

    def extra_repr(self):
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, scale={self.scale}, zero_point={self.zero_point}, "
                f"padding={self.padding}")


class Conv1d(_ConvNd):
    """A quantized Conv1d (``torch.ao.nn.quantized.Conv1d``): uint8 (N, C, L) in and out,
    int8 weights per output channel, zero padding with the input's zero point. It runs
    as a 2-d convolution of height 1, on the same kernel as :class:`Conv2d`.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.quantized import Conv1d
    >>> m = Conv1d(2, 3, 3, stride=2, padding=1)
    >>> x = torcia.quantize_per_tensor(torcia.rand(1, 2, 9), 0.01, 0, torcia.quint8)
    >>> m(x).shape, m(x).dtype
    (torcia.Size([1, 3, 5]), torcia.quint8)
    """

    _ND = 1
    _FLOAT_MODULE = (nn.Conv1d, nnqat.Conv1d)

    def _run(self, xi, x):
        params = self._params(x)
        params.update(stride=(1, *self.stride), padding=((0, 0), (self.padding[0],) * 2),
                      dilation=(1, *self.dilation), relu=self._relu)
        out = call("quantized_conv2d", (xi.unsqueeze(2),
                                        frozen(self, self.weight_int8).unsqueeze(2),
                                        self.weight_scales, self.bias_), params)
        return out.squeeze(2)


class Conv2d(_ConvNd):
    """A quantized Conv2d (``torch.ao.nn.quantized.Conv2d``): uint8 in and out, int8
    weights per output channel, zero padding with the input's zero point.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.quantized import Conv2d
    >>> m = Conv2d(1, 2, 3, padding=1)
    >>> x = torcia.quantize_per_tensor(torcia.rand(1, 1, 4, 4), 0.01, 0, torcia.quint8)
    >>> m(x).shape
    torcia.Size([1, 2, 4, 4])
    """

    _FLOAT_MODULE = (nn.Conv2d, nnqat.Conv2d)

    def _run(self, xi, x):
        # a quantized model's hot path: the parameters that depend on the module alone are
        # made once (again when one of them is set anew), the buffers read from their dict
        # (Module.__getattr__ costs microseconds a lookup)
        key = (self.stride, self.padding, self.dilation, self.groups, self.scale,
               self.zero_point, self._relu)
        kept = self.__dict__.get("_call_params")
        if kept is None or kept[0] != key:
            made = self._params(x)
            made.update(padding=tuple((p, p) for p in self.padding), relu=self._relu)
            kept = self.__dict__["_call_params"] = (key, made)
        params = kept[1].copy()
        params["x_scale"] = float(x._scale)
        params["x_zero_point"] = int(x._zero_point)
        b = self._buffers
        return call("quantized_conv2d", (xi, frozen(self, b["weight_int8"]),
                                         b["weight_scales"], b["bias_"]), params)


class Conv3d(_ConvNd):
    """A quantized Conv3d (``torch.ao.nn.quantized.Conv3d``): uint8 (N, C, D, H, W) in
    and out, int8 weights per output channel, zero padding with the input's zero point.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.quantized import Conv3d
    >>> m = Conv3d(1, 2, (1, 3, 3), padding=(0, 1, 1))
    >>> x = torcia.quantize_per_tensor(torcia.rand(1, 1, 2, 4, 4), 0.01, 0, torcia.quint8)
    >>> m(x).shape
    torcia.Size([1, 2, 2, 4, 4])
    """

    _ND = 3
    _FLOAT_MODULE = (nn.Conv3d, nnqat.Conv3d)


class _ConvTransposeNd(_ConvNd):
    """The quantized transposed convolutions: weights (in, out / groups, *kernel), int8
    at one scale for the whole tensor (as PyTorch's, whose per-channel observers refuse
    transposed convolutions)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        self.output_padding = ntuple(output_padding, self._ND)
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, device, dtype)

    def _weight_shape(self) -> tuple:
        return (self.in_channels, self.out_channels // self.groups, *self.kernel_size)

    def weight(self) -> QTensor:
        """The int8 weight as a quantized tensor (one scale)."""
        return QTensor(self.weight_int8, qint8, float(self.weight_scales[0]), 0)

    def _run(self, xi, x):
        params = self._params(x)
        params["output_padding"] = self.output_padding
        return call("quantized_conv_transpose", (xi, self.weight_int8, self.weight_scales,
                                                 self.bias_), params)

    @staticmethod
    def _float_parts(mod):
        return mod, mod.weight, mod.bias

    @classmethod
    def _quantized_weight(cls, conv, weight):
        observer = _weight_observer(conv)
        scheme = getattr(observer, "qscheme", per_tensor_affine)
        if scheme not in (per_tensor_affine, per_tensor_symmetric):
            raise AssertionError("Per channel weight observer is not supported yet for "
                                 f"ConvTranspose{cls._ND}d.")
        ints, scales = weight_params(weight, observer)
        return ints, scales[:1].expand(conv.out_channels).contiguous()

    @classmethod
    def _from_conv(cls, conv, bias):
        return cls(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride,
                   conv.padding, conv.output_padding, conv.groups, bias is not None,
                   conv.dilation)

    def extra_repr(self):
        return super().extra_repr() + f", output_padding={self.output_padding}"


class ConvTranspose1d(_ConvTransposeNd):
    """A quantized ConvTranspose1d (``torch.ao.nn.quantized.ConvTranspose1d``): uint8
    (N, C, L) in and out, int8 weights at one scale.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.quantized import ConvTranspose1d
    >>> m = ConvTranspose1d(2, 3, 3, stride=2)
    >>> x = torcia.quantize_per_tensor(torcia.rand(1, 2, 4), 0.01, 0, torcia.quint8)
    >>> m(x).shape
    torcia.Size([1, 3, 9])
    """

    _ND = 1
    _FLOAT_MODULE = (nn.ConvTranspose1d,)


class ConvTranspose2d(_ConvTransposeNd):
    """A quantized ConvTranspose2d (``torch.ao.nn.quantized.ConvTranspose2d``): uint8
    (N, C, H, W) in and out, int8 weights at one scale.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.quantized import ConvTranspose2d
    >>> m = ConvTranspose2d(2, 3, 2, stride=2)
    >>> x = torcia.quantize_per_tensor(torcia.rand(1, 2, 3, 3), 0.01, 0, torcia.quint8)
    >>> m(x).shape
    torcia.Size([1, 3, 6, 6])
    """

    _ND = 2
    _FLOAT_MODULE = (nn.ConvTranspose2d,)


class ConvTranspose3d(_ConvTransposeNd):
    """A quantized ConvTranspose3d (``torch.ao.nn.quantized.ConvTranspose3d``): uint8
    (N, C, D, H, W) in and out, int8 weights at one scale.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.quantized import ConvTranspose3d
    >>> m = ConvTranspose3d(2, 3, (1, 2, 2), stride=(1, 2, 2))
    >>> x = torcia.quantize_per_tensor(torcia.rand(1, 2, 2, 3, 3), 0.01, 0, torcia.quint8)
    >>> m(x).shape
    torcia.Size([1, 3, 2, 6, 6])
    """

    _ND = 3
    _FLOAT_MODULE = (nn.ConvTranspose3d,)


def _row_qparams_weight(weight: Tensor, observer) -> tuple[Tensor, Tensor, Tensor]:
    """``weight`` (rows, dim) as uint8 with a float scale and zero point per row, from a
    ``per_channel_affine_float_qparams`` observer (PyTorch's embedding scheme)."""
    if observer.dtype is not quint8 or observer.qscheme is not per_channel_affine_float_qparams:
        raise AssertionError("Embedding quantization is only supported with "
                             "float_qparams_weight_only_qconfig.")
    weight = weight.detach().to(torcia.float32)
    observer(weight)
    scales, zeros = observer.calculate_qparams()
    scales, zeros = scales.to(torcia.float32), zeros.to(torcia.float32)
    ints = call("quantize_per_channel", (weight, scales, zeros),
                {"axis": 0, "qmin": 0, "qmax": 255, "dtype": "quint8"})
    return ints, scales, zeros


class Embedding(nn.Module):
    """A quantized Embedding (``torch.ao.nn.quantized.Embedding``): uint8 rows, each
    with a float scale and zero point (``per_channel_affine_float_qparams``); indices
    in, the float32 rows out.

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> from torcia.ao import quantization as tq
    >>> from torcia.ao.nn.quantized import Embedding
    >>> emb = nn.Embedding(10, 4)
    >>> emb.qconfig = tq.float_qparams_weight_only_qconfig
    >>> q = Embedding.from_float(emb)
    >>> idx = torcia.tensor([[1, 2], [9, 0]])
    >>> q(idx).shape, bool((q(idx) - emb(idx)).abs().max() < 0.02)
    (torcia.Size([2, 2, 4]), True)
    """

    _FLOAT_MODULE = (nn.Embedding,)

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None,
                 dtype=quint8):
        super().__init__()
        if dtype is not quint8:
            raise NotImplementedError(f"quantized {type(self).__name__} supports quint8 "
                                      f"weights, got {dtype}")
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.dtype = dtype
        self.register_buffer("weight_uint8", torcia.zeros(num_embeddings, embedding_dim,
                                                          dtype=torcia.uint8))
        self.register_buffer("weight_scales", torcia.ones(num_embeddings))
        self.register_buffer("weight_zero_points", torcia.zeros(num_embeddings))
        if _weight is not None:
            from torcia.ao.quantization.observer import default_float_qparams_observer

            self.set_float_weight(_weight, default_float_qparams_observer())

    def set_float_weight(self, weight: Tensor, observer) -> None:
        """Quantize float ``weight`` (num_embeddings, embedding_dim) row by row, with the
        scale and zero point ``observer`` (a float-qparams observer) gives each row."""
        self.weight_uint8, self.weight_scales, self.weight_zero_points = \
            _row_qparams_weight(weight, observer)

    def _table(self) -> tuple:
        return self.weight_uint8, self.weight_scales, self.weight_zero_points

    def forward(self, indices):
        return call("embedding_byte", (*self._table(), indices), {})

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        """The quantized embedding of a float one whose qconfig is
        :data:`~torcia.ao.quantization.float_qparams_weight_only_qconfig`, or of a QAT
        one (through the parameters its weight's fake quantizer learned)."""
        qconfig = getattr(mod, "qconfig", None)
        if qconfig is None:
            raise AssertionError("Embedding input float module must have qconfig defined")
        q = cls(mod.num_embeddings, mod.embedding_dim)
        q.set_float_weight(mod.weight, _weight_observer(mod))
        return q

    def extra_repr(self):
        return (f"num_embeddings={self.num_embeddings}, embedding_dim={self.embedding_dim}, "
                f"dtype={self.dtype}, qscheme=torcia.per_channel_affine_float_qparams")


class EmbeddingBag(Embedding):
    """A quantized EmbeddingBag (``torch.ao.nn.quantized.EmbeddingBag``): the rows of
    :class:`Embedding` summed over each bag. As PyTorch's, it sums whatever ``mode`` the
    float module had (``mode`` is kept for ``repr`` only); ``per_sample_weights``
    weights the rows.

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> from torcia.ao import quantization as tq
    >>> from torcia.ao.nn.quantized import EmbeddingBag
    >>> bag = nn.EmbeddingBag(10, 4, mode="sum")
    >>> bag.qconfig = tq.float_qparams_weight_only_qconfig
    >>> q = EmbeddingBag.from_float(bag)
    >>> idx, offsets = torcia.tensor([1, 2, 4, 5, 4]), torcia.tensor([0, 2])
    >>> q(idx, offsets).shape, bool((q(idx, offsets) - bag(idx, offsets)).abs().max() < 0.05)
    (torcia.Size([2, 4]), True)
    """

    _FLOAT_MODULE = (nn.EmbeddingBag,)

    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, mode="sum", sparse=False, _weight=None,
                 include_last_offset=False, dtype=quint8):
        super().__init__(num_embeddings, embedding_dim, _weight=_weight, dtype=dtype)
        self.mode, self.include_last_offset = mode, include_last_offset
        self.pruned_weights = False

    def forward(self, indices, offsets=None, per_sample_weights=None,
                compressed_indices_mapping=None):
        if compressed_indices_mapping is not None:
            raise NotImplementedError("compressed_indices_mapping is for pruned weights, "
                                      "which torcia's quantized EmbeddingBag does not hold")
        return call("embedding_bag_byte", (*self._table(), indices, offsets,
                                           per_sample_weights),
                    {"include_last_offset": self.include_last_offset})

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        q = super().from_float(mod)
        q.mode, q.include_last_offset = mod.mode, mod.include_last_offset
        return q


class _QuantizedNorm:
    """A normalization on quantized tensors (PyTorch's quantized LayerNorm, GroupNorm,
    InstanceNorm): its float module's forward on the dequantized input, quantized at
    ``scale``/``zero_point`` (buffers, as PyTorch's)."""

    _QNAME = ""

    def _quantized_params(self, weight, bias, scale, zero_point) -> None:
        self.weight, self.bias = weight, bias
        self.register_buffer("scale", torcia.tensor(float(scale)))
        self.register_buffer("zero_point", torcia.tensor(int(zero_point)))

    def forward(self, input):
        x = _check_quantized(input, self._QNAME)
        return quantize_per_tensor(super().forward(x.dequantize()), float(self.scale),
                                   int(self.zero_point), quint8)

    def _get_name(self):
        return self._QNAME


class LayerNorm(_QuantizedNorm, nn.LayerNorm):
    """A quantized LayerNorm (``torch.ao.nn.quantized.LayerNorm``): the float
    normalization of the dequantized input, quantized at ``scale``/``zero_point``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.quantized import LayerNorm
    >>> gamma, beta = torcia.nn.Parameter(torcia.ones(4)), torcia.nn.Parameter(torcia.zeros(4))
    >>> m = LayerNorm(4, gamma, beta, 0.02, 128)
    >>> x = torcia.quantize_per_tensor(torcia.tensor([[0.0, 1.0, 2.0, 3.0]]), 0.1, 0,
    ...                                torcia.quint8)
    >>> m(x).int_repr().tolist()
    [[61, 106, 150, 195]]
    """

    _QNAME = "QuantizedLayerNorm"

    def __init__(self, normalized_shape, weight, bias, scale, zero_point, eps=1e-5,
                 elementwise_affine=True, device=None, dtype=None):
        super().__init__(normalized_shape, eps=eps, elementwise_affine=elementwise_affine)
        self._quantized_params(weight, bias, scale, zero_point)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        scale, zero = output_params(mod)
        return cls(mod.normalized_shape, mod.weight, mod.bias, scale, zero, mod.eps,
                   mod.elementwise_affine)

    @classmethod
    def from_reference(cls, mod, scale, zero_point):
        return cls(mod.normalized_shape, mod.weight, mod.bias, float(scale),
                   int(zero_point), mod.eps, mod.elementwise_affine)


class GroupNorm(_QuantizedNorm, nn.GroupNorm):
    """A quantized GroupNorm (``torch.ao.nn.quantized.GroupNorm``), as
    :class:`LayerNorm` over groups of channels.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.quantized import GroupNorm
    >>> m = GroupNorm(2, 4, torcia.nn.Parameter(torcia.ones(4)),
    ...               torcia.nn.Parameter(torcia.zeros(4)), 0.05, 128)
    >>> x = torcia.quantize_per_tensor(torcia.randn(2, 4, 3), 0.05, 128, torcia.quint8)
    >>> m(x).shape, round(m(x).q_scale(), 6)
    (torcia.Size([2, 4, 3]), 0.05)
    """

    _QNAME = "QuantizedGroupNorm"

    def __init__(self, num_groups, num_channels, weight, bias, scale, zero_point, eps=1e-5,
                 affine=True, device=None, dtype=None):
        super().__init__(num_groups, num_channels, eps, affine)
        self._quantized_params(weight, bias, scale, zero_point)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        scale, zero = output_params(mod)
        return cls(mod.num_groups, mod.num_channels, mod.weight, mod.bias, scale, zero,
                   mod.eps, mod.affine)


class _InstanceNorm(_QuantizedNorm):
    _QNAME = "QuantizedInstanceNorm"

    def __init__(self, num_features, weight, bias, scale, zero_point, eps=1e-5,
                 momentum=0.1, affine=False, track_running_stats=False, device=None,
                 dtype=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)
        self._quantized_params(weight, bias, scale, zero_point)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        scale, zero = output_params(mod)
        return cls(mod.num_features, mod.weight, mod.bias, scale, zero, mod.eps)


class InstanceNorm1d(_InstanceNorm, nn.InstanceNorm1d):
    """A quantized InstanceNorm1d (``torch.ao.nn.quantized.InstanceNorm1d``).

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.quantized import InstanceNorm1d
    >>> m = InstanceNorm1d(3, None, None, 0.05, 128)
    >>> x = torcia.quantize_per_tensor(torcia.randn(2, 3, 5), 0.05, 128, torcia.quint8)
    >>> m(x).shape
    torcia.Size([2, 3, 5])
    """

    _QNAME = "QuantizedInstanceNorm1d"


class InstanceNorm2d(_InstanceNorm, nn.InstanceNorm2d):
    """A quantized InstanceNorm2d (``torch.ao.nn.quantized.InstanceNorm2d``).

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.quantized import InstanceNorm2d
    >>> m = InstanceNorm2d(3, None, None, 0.05, 128)
    >>> x = torcia.quantize_per_tensor(torcia.randn(2, 3, 4, 4), 0.05, 128, torcia.quint8)
    >>> m(x).shape
    torcia.Size([2, 3, 4, 4])
    """

    _QNAME = "QuantizedInstanceNorm2d"


class InstanceNorm3d(_InstanceNorm, nn.InstanceNorm3d):
    """A quantized InstanceNorm3d (``torch.ao.nn.quantized.InstanceNorm3d``).

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.quantized import InstanceNorm3d
    >>> m = InstanceNorm3d(3, None, None, 0.05, 128)
    >>> x = torcia.quantize_per_tensor(torcia.randn(1, 3, 2, 4, 4), 0.05, 128,
    ...                                torcia.quint8)
    >>> m(x).shape
    torcia.Size([1, 3, 2, 4, 4])
    """

    _QNAME = "QuantizedInstanceNorm3d"


class _Requantizing(nn.Module):
    """A float op between quantized tensors: dequantize, run ``fn``, quantize at the
    module's output parameters (what PyTorch's quantized activations compute)."""

    def __init__(self, scale=1.0, zero_point=0):
        super().__init__()
        self.scale, self.zero_point = float(scale), int(zero_point)

    def _float(self, x):
        raise NotImplementedError

    def forward(self, x):
        if not isinstance(x, QTensor):
            return self._float(x)
        return quantize_per_tensor(self._float(x.dequantize()), self.scale, self.zero_point,
                                   quint8)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        scale, zero = output_params(mod)
        q = cls(scale, zero)
        q._float_module = mod
        return q


class ReLU6(_Requantizing):
    """Quantized ReLU6 (``torch.ao.nn.quantized.ReLU6``)."""

    def _float(self, x):
        return x.clamp(0, 6)


class Hardswish(_Requantizing):
    """Quantized Hardswish."""

    def _float(self, x):
        return nn.functional.hardswish(x)


class Sigmoid(_Requantizing):
    """Quantized Sigmoid."""

    def _float(self, x):
        return x.sigmoid()


class LeakyReLU(_Requantizing):
    """Quantized LeakyReLU."""

    def __init__(self, scale=1.0, zero_point=0, negative_slope=0.01):
        super().__init__(scale, zero_point)
        self.negative_slope = negative_slope

    def _float(self, x):
        return nn.functional.leaky_relu(x, self.negative_slope)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        q = super().from_float(mod)
        q.negative_slope = mod.negative_slope
        return q


class ELU(_Requantizing):
    """Quantized ELU."""

    def __init__(self, scale=1.0, zero_point=0, alpha=1.0):
        super().__init__(scale, zero_point)
        self.alpha = alpha

    def _float(self, x):
        return nn.functional.elu(x, self.alpha)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        q = super().from_float(mod)
        q.alpha = mod.alpha
        return q


class BatchNorm2d(_Requantizing):
    """Quantized BatchNorm2d in eval mode: its affine map on the dequantized values."""

    _BATCH_NORM = nn.BatchNorm2d

    def __init__(self, num_features, eps=1e-5, momentum=0.1, scale=1.0, zero_point=0):
        super().__init__(scale, zero_point)
        self.bn = self._BATCH_NORM(num_features, eps=eps, momentum=momentum).eval()

    def _float(self, x):
        return self.bn(x)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        scale, zero = output_params(mod)
        bn = mod[0] if isinstance(mod, intrinsic._FusedModule) else mod
        q = cls(bn.num_features, bn.eps, bn.momentum, scale, zero)
        q.bn.load_state_dict(bn.state_dict(), strict=False)
        return q


class BatchNorm3d(BatchNorm2d):
    """Quantized BatchNorm3d in eval mode (``torch.ao.nn.quantized.BatchNorm3d``).

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.quantized import BatchNorm3d
    >>> m = BatchNorm3d(2, scale=0.05, zero_point=128)
    >>> x = torcia.quantize_per_tensor(torcia.randn(1, 2, 2, 3, 3), 0.05, 128, torcia.quint8)
    >>> m(x).shape
    torcia.Size([1, 2, 2, 3, 3])
    """

    _BATCH_NORM = nn.BatchNorm3d


class PReLU(nn.Module):
    """A quantized PReLU (``torch.ao.nn.quantized.PReLU``): its slope a quint8 tensor,
    the output at ``output_scale``/``output_zero_point``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.quantized import PReLU
    >>> m = PReLU(0.1, 100)
    >>> m.set_weight(torcia.quantize_per_tensor(torcia.tensor([0.5]), 0.01, 0,
    ...                                         torcia.quint8))
    >>> x = torcia.quantize_per_tensor(torcia.tensor([-2.0, 3.0]), 0.1, 100, torcia.quint8)
    >>> m(x).dequantize().tolist()
    [-1.0, 3.0]
    """

    def __init__(self, output_scale: float, output_zero_point: int, num_parameters: int = 1):
        super().__init__()
        self.num_parameters = num_parameters
        self.scale, self.zero_point = float(output_scale), int(output_zero_point)
        self.set_weight(quantize_per_tensor(torcia.full((num_parameters,), 0.25), 1.0, 0,
                                            quint8))

    def set_weight(self, w: QTensor) -> None:
        self.weight = w

    def forward(self, input):
        x = _check_quantized(input, "QuantizedPReLU")
        out = nn.functional.prelu(x.dequantize(), self.weight.dequantize())
        return quantize_per_tensor(out, self.scale, self.zero_point, quint8)

    def _get_name(self):
        return "QuantizedPReLU"

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        """Quantized PReLU of a calibrated float one: its slope quantized as quint8 at
        the parameters of the qconfig's weight observer (PyTorch warns when that
        observer is not quint8; so does this)."""
        import warnings

        scale, zero = output_params(mod)
        q = cls(scale, zero, mod.num_parameters)
        weight = mod.weight.detach().to(torcia.float32)
        observer = mod.qconfig.weight()
        observer(weight)
        if observer.dtype is not quint8:
            warnings.warn(f"PReLU's weight observer should have dtype quint8 but got "
                          f"{observer.dtype}", stacklevel=2)
        w_scale, w_zero = observer.calculate_qparams()
        q.set_weight(quantize_per_tensor(weight, float(w_scale.reshape(-1)[0]),
                                         int(w_zero.reshape(-1)[0]), quint8))
        return q


class Softmax(nn.Module):
    """A quantized Softmax (``torch.ao.nn.quantized.Softmax``): the softmax of the
    dequantized input along ``dim``, quantized at ``scale``/``zero_point``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.quantized import Softmax
    >>> x = torcia.quantize_per_tensor(torcia.tensor([[0.0, 0.0]]), 0.1, 0, torcia.quint8)
    >>> Softmax(dim=1, scale=1 / 256, zero_point=0)(x).dequantize().tolist()
    [[0.5, 0.5]]
    """

    def __init__(self, dim=None, scale=1.0, zero_point=0):
        super().__init__()
        self.dim, self.scale, self.zero_point = dim, float(scale), int(zero_point)

    def forward(self, input):
        x = _check_quantized(input, "QuantizedSoftmax")
        dim = self.dim
        if dim is None:  # PyTorch's implicit choice, without its deprecation warning
            dim = 0 if x.dim() in (0, 1, 3) else 1
        out = nn.functional.softmax(x.dequantize(), dim)
        return quantize_per_tensor(out, self.scale, self.zero_point, quint8)

    def _get_name(self):
        return "QuantizedSoftmax"

    @staticmethod
    def from_float(mod, use_precomputed_fake_quant=False):
        scale, zero = output_params(mod)
        return Softmax(mod.dim, scale, zero)


class _FixedRangeSigmoid(nn.Sigmoid):
    # nn.Sigmoid that also takes quantized tensors, as torch's plain nn.Sigmoid does: the
    # output at the fixed parameters of torch's quantized sigmoid. convert swaps an
    # nn.Sigmoid for it (torcia's float modules take float tensors only) and it prints as
    # the float module, which torch's convert leaves in place; being no nn.Sigmoid by type,
    # prepare leaves it unobserved
    def forward(self, input):
        return input.sigmoid()

    def _get_name(self):
        return "Sigmoid"

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        return cls()


class _FixedRangeTanh(nn.Tanh):
    def forward(self, input):
        return input.tanh()

    def _get_name(self):
        return "Tanh"

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        return cls()


class _FixedRangeHardsigmoid(nn.Hardsigmoid):
    def forward(self, input):
        if isinstance(input, QTensor):
            return input.hardsigmoid()
        return super().forward(input)

    def _get_name(self):
        return "Hardsigmoid"

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        return cls(mod.inplace)


_AVERAGES = (nn.AvgPool1d, nn.AvgPool2d, nn.AvgPool3d, nn.AdaptiveAvgPool1d,
             nn.AdaptiveAvgPool2d, nn.AdaptiveAvgPool3d)


class QuantizedPassthrough(nn.Module):
    """A float module that works on quantized tensors as they are (ReLU, max pooling,
    flattening, dropout in eval), or with their quantization parameters kept (average
    pooling): convert wraps these where torch's quantized tensors run them natively."""

    def __init__(self, module):
        super().__init__()
        self.module = module

    def forward(self, x):
        m = self._modules["module"]  # not Module.__getattr__: microseconds a lookup
        if not isinstance(x, QTensor):
            return m(x)
        if isinstance(m, nn.ReLU):
            return x.relu()
        if isinstance(m, (nn.Dropout, nn.Identity)):
            return x
        if isinstance(m, nn.Flatten):
            return x.flatten(m.start_dim, m.end_dim)
        if isinstance(m, nn.MaxPool2d) and not m.return_indices:
            return max_pooled2d(x, m.kernel_size, m.stride, m.padding, m.dilation,
                                m.ceil_mode)
        if isinstance(m, _AVERAGES):
            return _averaged(x, m, type(m).__name__)
        return quantize_per_tensor(m(x.dequantize()), float(x._scale), int(x._zero_point),
                                   x._dtype)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        return cls(mod)

    def extra_repr(self):
        return "works on quantized tensors"


class MaxPool2d(nn.MaxPool2d):
    """``torch.ao.nn.quantized.MaxPool2d``, PyTorch's ``nn.MaxPool2d`` itself: float
    tensors pool as they are, quantized ones pool their integers (the parameters kept).

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.quantized import MaxPool2d
    >>> x = torcia.quantize_per_tensor(torcia.arange(16.0).reshape(1, 1, 4, 4), 0.5, 3,
    ...                                torcia.quint8)
    >>> MaxPool2d(2)(x).dequantize().tolist()
    [[[[5.0, 7.0], [13.0, 15.0]]]]
    """

    def forward(self, input):
        if not isinstance(input, QTensor):
            return super().forward(input)
        if self.return_indices:
            raise NotImplementedError("quantized max_pool2d: return_indices is not "
                                      "supported for quantized inputs")
        return max_pooled2d(input, self.kernel_size, self.stride, self.padding,
                            self.dilation, self.ceil_mode)

    def _get_name(self):
        return "MaxPool2d"


class FloatFunctional(nn.Module):
    """Arithmetic that quantization can see (``torch.ao.nn.quantized.FloatFunctional``):
    ``add``, ``mul``, ``cat``, ``add_relu``, ``add_scalar``, ``mul_scalar``, whose
    outputs pass its ``activation_post_process``; convert makes it a
    :class:`QFunctional`.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.quantized import FloatFunctional
    >>> FloatFunctional().add_relu(torcia.tensor([1.0]), torcia.tensor([-3.0])).tolist()
    [0.0]
    """

    def __init__(self):
        super().__init__()
        self.activation_post_process = nn.Identity()

    def forward(self, x):
        raise RuntimeError("FloatFunctional is not intended to use the 'forward'. Please "
                           "use the underlying operation")

    def add(self, x, y):
        return self.activation_post_process(x + y)

    def add_scalar(self, x, y):
        return x + y

    def mul(self, x, y):
        return self.activation_post_process(x * y)

    def mul_scalar(self, x, y):
        return x * y

    def cat(self, x, dim=0):
        return self.activation_post_process(torcia.cat(x, dim=dim))

    def add_relu(self, x, y):
        return self.activation_post_process(nn.functional.relu(x + y))

    def matmul(self, x, y):
        return self.activation_post_process(torcia.matmul(x, y))


FXFloatFunctional = FloatFunctional


class QFunctional(nn.Module):
    """FloatFunctional's operations on quantized tensors, the output at ``scale`` and
    ``zero_point`` (``torch.ao.nn.quantized.QFunctional``)."""

    def __init__(self):
        super().__init__()
        self.scale, self.zero_point = 1.0, 0

    def forward(self, x):
        raise RuntimeError("Functional is not intended to use the 'forward'. Please use the "
                           "underlying operation")

    def _add(self, x, y, relu):
        out = call("quantized_add", (x._int, y._int),
                   {"a_scale": float(x._scale), "a_zero_point": int(x._zero_point),
                    "b_scale": float(y._scale), "b_zero_point": int(y._zero_point),
                    "out_scale": self.scale, "out_zero_point": self.zero_point,
                    "relu": relu})
        return QTensor(out, quint8, self.scale, self.zero_point)

    def add(self, x, y):
        return self._add(x, y, False)

    def add_relu(self, x, y):
        return self._add(x, y, True)

    def _requant(self, t):
        return quantize_per_tensor(t, self.scale, self.zero_point, quint8)

    def add_scalar(self, x, y):
        """``x + y`` without requantizing (torch's quantized ``add_scalar``, which no
        observer sees): ``y`` becomes ``c = round(y / scale)`` integer steps taken off the
        zero point, the integers kept. Where the shifted zero point leaves the dtype's
        range it stays at the range's nearer end and the scale widens so that the range
        spans the shifted values; the integers are then requantized to it."""
        x._per_tensor("add_scalar")
        qd, scale, zero = x.dtype, float(x._scale), int(x._zero_point)
        steps = round(float(y) / scale)
        shifted = zero - steps
        if qd.qmin <= shifted <= qd.qmax:
            return QTensor(x._int.clone(), qd, scale, shifted)
        span = qd.qmax - qd.qmin
        if shifted < qd.qmin:
            out_scale, out_zero = (qd.qmax - shifted) / span * scale, qd.qmin
        else:
            out_scale, out_zero = (shifted - qd.qmin) / span * scale, qd.qmax
        # float32 arithmetic and round-half-even, as torch's kernel (lrintf)
        ratio = float(np.float32(scale) * (np.float32(1.0) / np.float32(out_scale)))
        steps_from_zero = (x._int.to(torcia.int64) - shifted).to(torcia.float32)
        ints = torcia.round(steps_from_zero * ratio).to(torcia.int64) + out_zero
        return QTensor(ints.clamp(qd.qmin, qd.qmax).to(x._int.dtype), qd, out_scale, out_zero)

    def mul(self, x, y):
        return self._requant(x.dequantize() * y.dequantize())

    def mul_scalar(self, x, y):
        """``x * y`` without requantizing (torch's quantized ``mul_scalar``, which no
        observer sees): the scale becomes ``scale * |y|``, a negative ``y`` mirrors the
        integers and the zero point across the dtype's range, ``y = 0`` gives zeros at
        scale 1."""
        y = float(y)
        if y == 0:
            return quantize_per_tensor(torcia.zeros(x.shape), 1.0, 0, x.dtype)
        if y > 0:
            return QTensor(x._int, x.dtype, float(x._scale) * y, int(x._zero_point))
        lo_hi = x.dtype.qmin + x.dtype.qmax
        return QTensor((lo_hi - x._int.to(torcia.int64)).to(x._int.dtype), x.dtype,
                       float(x._scale) * -y, lo_hi - int(x._zero_point))

    def cat(self, x, dim=0):
        return self._requant(torcia.cat([t.dequantize() for t in x], dim=dim))

    def matmul(self, x, y):
        return self._requant(torcia.matmul(x.dequantize(), y.dequantize()))

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        q = cls()
        q.scale, q.zero_point = output_params(mod)
        return q


class Dropout(nn.Dropout):
    """Dropout on quantized tensors: the identity in inference."""

    def forward(self, input):
        return input

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        return cls(mod.p, mod.inplace)
