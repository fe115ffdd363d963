"""Dynamically quantized modules (``torch.ao.nn.quantized.dynamic``): int8 weights,
float activations quantized at run time (their range measured on each call), float
outputs. What :func:`~torcia.ao.quantization.quantize_dynamic` puts in place of
Linear, LSTM and GRU layers and LSTM, GRU and RNN cells.
"""

from __future__ import annotations

import torcia
from torcia import nn
from torcia.ao import _ops
from torcia.ao._qtensor import QTensor, qint8, quantize_per_tensor, quint8
from torcia.ao.nn import quantized as nnq
from torcia.ao.nn.quantized._modules import frozen, weight_params
from torcia.library import call

__all__ = ["GRU", "GRUCell", "LSTM", "LSTMCell", "Linear", "RNNCell", "Conv1d", "Conv2d",
           "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]


def _weights(weight, dtype, observer):
    """(int8 values, scale per row) for qint8, or the float16 weight."""
    if dtype is torcia.float16:
        return weight.detach().to(torcia.float16), None
    return weight_params(weight, observer)


def _product(x, w, scales, bias, reduce_range, owner, name="weight"):
    """``x @ w.T + bias`` with ``w`` int8 (activations quantized now) or float16; ``bias``
    (N,) or one per output element. An int8 ``w`` goes to the kernel as ``owner``'s frozen
    copy of it (named ``name``), whose packing a native kernel keeps."""
    if scales is None:
        out = nn.functional.linear(x, w.to(x.dtype))
        return out if bias is None else out + bias
    return call("linear_dynamic", (x, frozen(owner, w, name), scales, bias),
                {"per_row": False, "reduce_range": reduce_range})


class Linear(nn.Module):
    """A Linear layer with int8 weights and float activations quantized per call
    (``torch.ao.nn.quantized.dynamic.Linear``); ``dtype=torcia.float16`` keeps float16
    weights instead.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.quantized.dynamic import Linear
    >>> _ = torcia.manual_seed(0)
    >>> float_layer = torcia.nn.Linear(16, 4)
    >>> q = Linear.from_float(float_layer)
    >>> x = torcia.randn(3, 16)
    >>> bool((q(x) - float_layer(x)).abs().max() < 0.05)
    True
    """

    _FLOAT_MODULE = nn.Linear

    def __init__(self, in_features, out_features, bias_=True, dtype=qint8):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.dtype = dtype
        self.reduce_range = True
        self.register_buffer("weight_int8", torcia.zeros(out_features, in_features,
                                                         dtype=torcia.int8))
        self.register_buffer("weight_scales", torcia.ones(out_features))
        self.register_buffer("bias_", torcia.zeros(out_features) if bias_ else None)

    def weight(self):
        if self.weight_scales is None:
            return self.weight_int8
        return QTensor(self.weight_int8, qint8, self.weight_scales.to(torcia.float64),
                       torcia.zeros(self.out_features, dtype=torcia.int64), 0)

    def bias(self):
        return self.bias_

    def forward(self, x):
        return _product(x, self.weight_int8, self.weight_scales, self.bias_,
                        self.reduce_range, self)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        """The dynamic layer of float ``mod``: its weight through the QConfig's weight
        observer (the default: per-tensor symmetric int8)."""
        qconfig = _qconfig(mod)
        observer = qconfig.weight()
        dtype = observer.dtype
        if dtype not in (qint8, torcia.float16):
            raise RuntimeError(f"The only supported dtypes for dynamic quantized linear are "
                               f"qint8 and float16 got: {dtype}")
        q = cls(mod.in_features, mod.out_features, mod.bias is not None, dtype)
        q.weight_int8, q.weight_scales = _weights(mod.weight, dtype, observer)
        q.bias_ = None if mod.bias is None else mod.bias.detach().to(torcia.float32)
        return q

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"dtype={self.dtype}")


def _lstm_step(gx, gh, states):
    h, c, _ = call("lstm_cell", (gx + gh, states[1]), {})
    return h, c


def _gru_step(gx, gh, states):
    h = states[0]
    xr, xz, xn = gx.chunk(3, dim=-1)
    hr, hz, hn = gh.chunk(3, dim=-1)
    r = (xr + hr).sigmoid()
    z = (xz + hz).sigmoid()
    n = (xn + r * hn).tanh()
    return ((1 - z) * n + z * h,)


def _qconfig(mod):
    """``mod``'s QConfig, or the default dynamic one (int8 weights)."""
    # imported here: torcia.ao.quantization imports these modules
    from torcia.ao.quantization.qconfig import default_dynamic_qconfig

    return getattr(mod, "qconfig", None) or default_dynamic_qconfig


def _qconfig_dtype(mod):
    """The weight dtype of ``mod``'s QConfig, refused unless int8 or float16."""
    dtype = _qconfig(mod).weight().dtype
    if dtype not in (qint8, torcia.float16):
        raise RuntimeError(f"Unsupported dtype for dynamic RNN quantization: {dtype}")
    return dtype


def _from_module(cls, mod, dtype):
    # the quantized module of a float one, without the fresh float layer its constructor
    # makes
    q = cls.__new__(cls)
    nn.Module.__init__(q)
    q._load(mod, dtype)
    return q


class _Recurrent(nn.Module):
    """The layers and directions of a dynamically quantized RNN; constructed as PyTorch's
    (sizes and options, ``dtype``), its weights those of a new float layer, quantized."""

    _MODE = ""
    _GATES = 1

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, dtype=qint8):
        super().__init__()
        self._load(self._FLOAT_MODULE(input_size, hidden_size, num_layers=num_layers, bias=bias,
                                      batch_first=batch_first, dropout=dropout,
                                      bidirectional=bidirectional), dtype)

    def _load(self, mod, dtype):
        for attr in ("input_size", "hidden_size", "num_layers", "batch_first",
                     "bidirectional", "dropout"):
            setattr(self, attr, getattr(mod, attr))
        if getattr(mod, "proj_size", 0):
            raise NotImplementedError("dynamic quantization of an LSTM with proj_size")
        self.dtype = dtype
        self.reduce_range = True
        qconfig = _qconfig(mod)
        self.cells = []
        for layer in range(self.num_layers):
            for suffix in ("", "_reverse")[:2 if self.bidirectional else 1]:
                name = f"l{layer}{suffix}"
                cell = {}
                for kind in ("ih", "hh"):
                    w, s = _weights(getattr(mod, f"weight_{kind}_{name}"), dtype,
                                    qconfig.weight())
                    bias = getattr(mod, f"bias_{kind}_{name}", None)
                    self.register_buffer(f"weight_{kind}_{name}", w)
                    self.register_buffer(f"scales_{kind}_{name}", s)
                    self.register_buffer(f"bias_{kind}_{name}",
                                         None if bias is None else bias.detach().clone())
                    cell[kind] = name
                self.cells.append(name)

    def _layer(self, kind, name) -> tuple:
        return tuple(getattr(self, f"{what}_{kind}_{name}") for what in
                     ("weight", "scales", "bias"))

    def _run(self, x, states, name, reverse):
        """One layer and direction over the sequence (T, B, I)."""
        t_len, batch = x.shape[0], x.shape[1]
        w_ih, s_ih, b_ih = self._layer("ih", name)
        w_hh, s_hh, b_hh = self._layer("hh", name)
        fold = self._MODE == "LSTM"
        if fold and b_hh is not None:
            # an LSTM's gates are the sum of the two projections: the hidden bias joins
            # the input projection, made once for all steps, which each step's hidden
            # product then takes as its bias (added in the GEMM's epilogue)
            b_ih = b_hh if b_ih is None else b_ih + b_hh
        gx = _product(x.reshape(t_len * batch, -1), w_ih, s_ih, b_ih, self.reduce_range,
                      self, f"ih_{name}").reshape(t_len, batch, -1)
        outs = [None] * t_len
        steps = range(t_len - 1, -1, -1) if reverse else range(t_len)
        per_step = gx.unbind(0)  # one op rather than an index per step
        for t in steps:
            if fold:
                gates = _product(states[0], w_hh, s_hh, per_step[t], self.reduce_range,
                                 self, f"hh_{name}")
                states = tuple(call("lstm_cell", (gates, states[1]), {})[:2])
            else:
                hidden = _product(states[0], w_hh, s_hh, b_hh, self.reduce_range, self,
                                  f"hh_{name}")
                states = self._step(per_step[t], hidden, states)
            outs[t] = states[0]
        return torcia.stack(outs), states

    def forward(self, input, hx=None):
        batched = input.dim() == 3
        x = input if batched else input.unsqueeze(1)
        if self.batch_first and batched:
            x = x.transpose(0, 1)
        directions = 2 if self.bidirectional else 1
        batch = x.shape[1]
        zeros = torcia.zeros(self.num_layers * directions, batch, self.hidden_size)
        if hx is None:
            hx = (zeros, zeros) if self._MODE == "LSTM" else zeros
        elif not batched:
            hx = tuple(h.unsqueeze(1) for h in hx) if self._MODE == "LSTM" else hx.unsqueeze(1)
        finals = []
        for layer in range(self.num_layers):
            outs = []
            for d in range(directions):
                k = layer * directions + d
                states = tuple(h[k] for h in hx) if self._MODE == "LSTM" else (hx[k],)
                out, states = self._run(x, states, self.cells[k], d == 1)
                outs.append(out)
                finals.append(states)
            x = torcia.cat(outs, dim=2) if directions == 2 else outs[0]
        if self.batch_first and batched:
            x = x.transpose(0, 1)
        if not batched:
            x = x.squeeze(1)
        stacks = [torcia.stack([s[i] for s in finals]) for i in range(len(finals[0]))]
        if not batched:
            stacks = [s.squeeze(1) for s in stacks]
        return x, (tuple(stacks) if self._MODE == "LSTM" else stacks[0])

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        return _from_module(cls, mod, _qconfig_dtype(mod))

    def extra_repr(self):
        return (f"{self.input_size}, {self.hidden_size}, num_layers={self.num_layers}, "
                f"batch_first={self.batch_first}, bidirectional={self.bidirectional}, "
                f"dtype={self.dtype}")


class LSTM(_Recurrent):
    """An LSTM with int8 weights, each step's products on activations quantized per call
    (``torch.ao.nn.quantized.dynamic.LSTM``); the cell update stays float.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.quantized.dynamic import LSTM
    >>> _ = torcia.manual_seed(0)
    >>> lstm = torcia.nn.LSTM(8, 16, batch_first=True)
    >>> out, (h, c) = LSTM.from_float(lstm)(torcia.randn(2, 5, 8))
    >>> out.shape, h.shape
    (torcia.Size([2, 5, 16]), torcia.Size([1, 2, 16]))
    """

    _FLOAT_MODULE = nn.LSTM
    _MODE = "LSTM"


class GRU(_Recurrent):
    """A GRU with int8 weights (``torch.ao.nn.quantized.dynamic.GRU``).

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.quantized.dynamic import GRU
    >>> out, h = GRU.from_float(torcia.nn.GRU(4, 8))(torcia.randn(3, 2, 4))
    >>> out.shape, h.shape
    (torcia.Size([3, 2, 8]), torcia.Size([1, 2, 8]))
    """

    _FLOAT_MODULE = nn.GRU
    _MODE = "GRU"

    def _step(self, gx, gh, states):
        return _gru_step(gx, gh, states)


class _Cell(nn.Module):
    """One step of a dynamically quantized recurrent cell: int8 (or float16) weights, the
    products on activations quantized per call, the update in float. Constructed as
    PyTorch's, its weights those of a new float cell, quantized."""

    def __init__(self, input_size, hidden_size, bias=True, dtype=qint8):
        super().__init__()
        self._load(self._FLOAT_MODULE(input_size, hidden_size, bias=bias), dtype)

    def _load(self, mod, dtype):
        self.input_size, self.hidden_size, self.bias = (mod.input_size, mod.hidden_size,
                                                        mod.bias)
        self.dtype = dtype
        self.reduce_range = True
        qconfig = _qconfig(mod)
        for kind in ("ih", "hh"):
            w, s = _weights(getattr(mod, f"weight_{kind}"), dtype, qconfig.weight())
            bias = getattr(mod, f"bias_{kind}", None)
            self.register_buffer(f"weight_{kind}", w)
            self.register_buffer(f"scales_{kind}", s)
            self.register_buffer(f"bias_{kind}", None if bias is None else bias.detach().clone())

    def _project(self, x, kind):
        return _product(x, getattr(self, f"weight_{kind}"), getattr(self, f"scales_{kind}"),
                        getattr(self, f"bias_{kind}"), self.reduce_range, self, kind)

    def forward(self, input, hx=None):
        # PyTorch's dynamic cells take a batch (batch, input_size) only, and check the
        # sizes with these messages
        if input.dim() != 2:
            raise RuntimeError(f"{type(self).__name__}: expected a 2-D input (batch, "
                               f"input_size), got {input.dim()}-D")
        if input.shape[1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.shape[1]}, "
                               f"expected {self.input_size}")
        lstm = isinstance(self, LSTMCell)
        if hx is None:
            zeros = torcia.zeros(input.shape[0], self.hidden_size, dtype=input.dtype)
            hx = (zeros, zeros) if lstm else zeros
        states = tuple(hx) if lstm else (hx,)
        for label, h in zip(("[0]", "[1]") if lstm else ("",), states):
            if h.dim() != 2 or h.shape[0] != input.shape[0]:
                raise RuntimeError(f"Input batch size {input.shape[0]} doesn't match "
                                   f"hidden{label} batch size {h.shape[0]}")
            if h.shape[1] != self.hidden_size:
                raise RuntimeError(f"hidden{label} has inconsistent hidden_size: got "
                                   f"{h.shape[1]}, expected {self.hidden_size}")
        out = self._step(self._project(input, "ih"), self._project(states[0], "hh"), states)
        return out if lstm else out[0]

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        return _from_module(cls, mod, _qconfig_dtype(mod))

    def extra_repr(self):
        return f"{self.input_size}, {self.hidden_size}, dtype={self.dtype}"


class LSTMCell(_Cell):
    """An LSTM cell with int8 weights (``torch.ao.nn.quantized.dynamic.LSTMCell``).

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.quantized.dynamic import LSTMCell
    >>> h, c = LSTMCell.from_float(torcia.nn.LSTMCell(4, 8))(torcia.randn(3, 4))
    >>> h.shape, c.shape
    (torcia.Size([3, 8]), torcia.Size([3, 8]))
    """

    _FLOAT_MODULE = nn.LSTMCell

    def _step(self, gx, gh, states):
        return _lstm_step(gx, gh, states)


class GRUCell(_Cell):
    """A GRU cell with int8 weights (``torch.ao.nn.quantized.dynamic.GRUCell``).

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.quantized.dynamic import GRUCell
    >>> GRUCell.from_float(torcia.nn.GRUCell(4, 8))(torcia.randn(2, 4)).shape
    torcia.Size([2, 8])
    """

    _FLOAT_MODULE = nn.GRUCell

    def _step(self, gx, gh, states):
        return _gru_step(gx, gh, states)


class RNNCell(_Cell):
    """An Elman RNN cell (``tanh`` or ``relu``) with int8 weights
    (``torch.ao.nn.quantized.dynamic.RNNCell``).

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.quantized.dynamic import RNNCell
    >>> cell = RNNCell.from_float(torcia.nn.RNNCell(4, 8, nonlinearity="relu"))
    >>> bool((cell(torcia.randn(3, 4)) >= 0).all())
    True
    """

    _FLOAT_MODULE = nn.RNNCell

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", dtype=qint8):
        nn.Module.__init__(self)
        self._load(nn.RNNCell(input_size, hidden_size, bias=bias, nonlinearity=nonlinearity),
                   dtype)

    def _load(self, mod, dtype):
        super()._load(mod, dtype)
        self.nonlinearity = mod.nonlinearity
        if self.nonlinearity not in ("tanh", "relu"):
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")

    def _step(self, gx, gh, states):
        h = gx + gh
        return (h.tanh() if self.nonlinearity == "tanh" else h.relu(),)


class _DynamicConv:
    """What makes a quantized convolution dynamic (``torch.ao.nn.quantized.dynamic``'s
    convolutions): a float input, quantized at each call over its own range (FBGEMM's
    parameters, 0..127 with ``reduce_range``); the output requantized at the input's
    scale and zero point, then dequantized, as PyTorch's (the reason PyTorch warns of
    their accuracy: outputs beyond the input's range are clamped to it)."""

    def forward(self, input, reduce_range: bool = True):
        if input.dim() != self._ND + 2:
            raise ValueError(f"Input shape must be `(N, C, {', '.join('DHW'[-self._ND:])})`!")
        lo, hi = (float(v) for v in input.aminmax()) if input.numel() else (0.0, 0.0)
        scale, zero = _ops.choose_qparams(lo, hi, 0, 127 if reduce_range else 255)
        x = quantize_per_tensor(input, scale, zero, quint8)
        return QTensor(self._run(x._int, x), quint8, scale, zero).dequantize()

    def _params(self, x) -> dict:
        return {**super()._params(x), "out_scale": float(x._scale),
                "out_zero_point": int(x._zero_point)}

    @staticmethod
    def _output_params(mod) -> tuple[float, int]:
        return 1.0, 0


def _dynamic_example(name: str, shape: tuple, kernel: str) -> str:
    return f"""A {name} with int8 weights whose float input is quantized at each call
    (``torch.ao.nn.quantized.dynamic.{name}``); float in, float out, the output at the
    input's quantization step and range (as PyTorch's, which warns of its accuracy).

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.quantized.dynamic import {name}
    >>> from torcia.ao.quantization import default_dynamic_qconfig
    >>> _ = torcia.manual_seed(0)
    >>> conv = torcia.nn.{name}(2, 4, {kernel})
    >>> conv.qconfig = default_dynamic_qconfig
    >>> q = {name}.from_float(conv)
    >>> x = torcia.randn{shape}
    >>> q(x).dtype, q(x).shape == conv(x).shape
    (torcia.float32, True)
    """


def _dynamic(static: type, float_module: type, shape: tuple, kernel: str) -> type:
    """The dynamic form of quantized convolution class ``static``."""
    name = static.__name__
    return type(name, (_DynamicConv, static), {
        "__doc__": _dynamic_example(name, shape, kernel), "__module__": __name__,
        "__qualname__": name, "_FLOAT_MODULE": (float_module,)})


Conv1d = _dynamic(nnq.Conv1d, nn.Conv1d, (1, 2, 9), "3")
Conv2d = _dynamic(nnq.Conv2d, nn.Conv2d, (1, 2, 5, 5), "3")
Conv3d = _dynamic(nnq.Conv3d, nn.Conv3d, (1, 2, 3, 4, 4), "(1, 3, 3)")
ConvTranspose1d = _dynamic(nnq.ConvTranspose1d, nn.ConvTranspose1d, (1, 2, 5), "3")
ConvTranspose2d = _dynamic(nnq.ConvTranspose2d, nn.ConvTranspose2d, (1, 2, 4, 4), "2")
ConvTranspose3d = _dynamic(nnq.ConvTranspose3d, nn.ConvTranspose3d, (1, 2, 2, 3, 3),
                           "(1, 2, 2)")
