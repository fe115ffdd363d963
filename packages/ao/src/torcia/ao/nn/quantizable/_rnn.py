"""The quantizable LSTM (``torch.ao.nn.quantizable.LSTM``, ``LSTMCell``): the recurrence
spelled out in Linear layers and FloatFunctional arithmetic, so that ``prepare`` can put an
observer after each step and ``convert`` can make each step a quantized module."""

from __future__ import annotations

import numbers
import warnings

import torcia
from torcia import nn
from torcia.ao._qtensor import QTensor, cat, quantize_per_tensor, quint8, stack
from torcia.ao.nn.quantized._modules import FloatFunctional

_GATES = ("input", "forget", "cell", "output")


class _FixedRangeSigmoid(nn.Sigmoid):
    # nn.Sigmoid that also takes quantized tensors, giving them the fixed output parameters
    # of torch's quantized sigmoid; being no nn.Sigmoid by type, prepare leaves it unobserved
    def forward(self, input):
        return input.sigmoid()

    def _get_name(self):
        return "Sigmoid"


class _FixedRangeTanh(nn.Tanh):
    def forward(self, input):
        return input.tanh()

    def _get_name(self):
        return "Tanh"


def _is_quantized(x) -> bool:
    return isinstance(x, QTensor)


class LSTMCell(nn.Module):
    """A quantizable LSTM cell (``torch.ao.nn.quantizable.LSTMCell``): ``nn.LSTMCell``'s
    computation as ``igates`` and ``hgates`` (Linear layers), their sum (``gates``, a
    FloatFunctional), the gate activations and the FloatFunctional products and sum of the
    cell update, each of which quantization observes and then quantizes.

    ``split_gates=True`` keeps a Linear layer (and sum) per gate instead of one of four
    times the hidden size that is then chunked.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.quantizable import LSTMCell
    >>> cell = LSTMCell(10, 20)
    >>> hx, cx = cell(torcia.randn(3, 10))
    >>> tuple(hx.shape), tuple(cx.shape)
    ((3, 20), (3, 20))
    """

    _FLOAT_MODULE = nn.LSTMCell

    def __init__(self, input_dim: int, hidden_dim: int, bias: bool = True, device=None,
                 dtype=None, *, split_gates=False):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.input_size = input_dim
        self.hidden_size = hidden_dim
        self.bias = bias
        self.split_gates = split_gates
        if split_gates:
            self.igates = nn.ModuleDict({g: nn.Linear(input_dim, hidden_dim, bias=bias, **kw)
                                         for g in _GATES})
            self.hgates = nn.ModuleDict({g: nn.Linear(hidden_dim, hidden_dim, bias=bias, **kw)
                                         for g in _GATES})
            self.gates = nn.ModuleDict({g: FloatFunctional() for g in _GATES})
        else:
            self.igates = nn.Linear(input_dim, 4 * hidden_dim, bias=bias, **kw)
            self.hgates = nn.Linear(hidden_dim, 4 * hidden_dim, bias=bias, **kw)
            self.gates = FloatFunctional()
        self.input_gate = _FixedRangeSigmoid()
        self.forget_gate = _FixedRangeSigmoid()
        self.cell_gate = _FixedRangeTanh()
        self.output_gate = _FixedRangeSigmoid()
        self.fgate_cx = FloatFunctional()
        self.igate_cgate = FloatFunctional()
        self.fgate_cx_igate_cgate = FloatFunctional()
        self.ogate_cy = FloatFunctional()
        self.initial_hidden_state_qparams = (1.0, 0)
        self.initial_cell_state_qparams = (1.0, 0)
        self.hidden_state_dtype = quint8
        self.cell_state_dtype = quint8

    def forward(self, x, hidden=None):
        if hidden is None or hidden[0] is None or hidden[1] is None:
            hidden = self.initialize_hidden(x.shape[0], _is_quantized(x))
        hx, cx = hidden
        if self.split_gates:
            i, f, g, o = (self.gates[k].add(self.igates[k](x), self.hgates[k](hx))
                          for k in _GATES)
        else:
            i, f, g, o = self.gates.add(self.igates(x), self.hgates(hx)).chunk(4, 1)
        i, f = self.input_gate(i), self.forget_gate(f)
        g, o = self.cell_gate(g), self.output_gate(o)
        cy = self.fgate_cx_igate_cgate.add(self.fgate_cx.mul(f, cx), self.igate_cgate.mul(i, g))
        hy = self.ogate_cy.mul(o, cy.tanh())
        return hy, cy

    def initialize_hidden(self, batch_size: int, is_quantized: bool = False):
        """Zero hidden and cell states, quantized at ``initial_*_state_qparams`` where the
        input is quantized."""
        h = torcia.zeros(batch_size, self.hidden_size)
        c = torcia.zeros(batch_size, self.hidden_size)
        if is_quantized:
            h = quantize_per_tensor(h, *self.initial_hidden_state_qparams,
                                    self.hidden_state_dtype)
            c = quantize_per_tensor(c, *self.initial_cell_state_qparams,
                                    self.cell_state_dtype)
        return h, c

    def _get_name(self):
        return "QuantizableLSTMCell"

    @classmethod
    def from_params(cls, wi, wh, bi=None, bh=None, split_gates=False):
        """A cell with input weights ``wi`` (4 * hidden, input), hidden weights ``wh``
        (4 * hidden, hidden) and biases ``bi``, ``bh`` (both or neither)."""
        if (bi is None) != (bh is None):
            raise AssertionError("bi and bh must both be None or both have values")
        cell = cls(wi.shape[1], wh.shape[1], bias=bi is not None, split_gates=split_gates)
        for w, b, linears in ((wi, bi, cell.igates), (wh, bh, cell.hgates)):
            if split_gates:
                parts = zip(linears.values(), w.chunk(4, 0),
                            b.chunk(4, 0) if b is not None else (None,) * 4)
            else:
                parts = ((linears, w, b),)
            for linear, weight, bias in parts:
                linear.weight = nn.Parameter(weight.detach())
                if bias is not None:
                    linear.bias = nn.Parameter(bias.detach())
        return cell

    @classmethod
    def from_float(cls, other, use_precomputed_fake_quant=False, split_gates=False):
        """The quantizable cell of an ``nn.LSTMCell`` with a qconfig, its weights taken."""
        if type(other) is not cls._FLOAT_MODULE:
            raise AssertionError(f"Expected module type {cls._FLOAT_MODULE}, got "
                                 f"{type(other)}")
        if not hasattr(other, "qconfig"):
            raise AssertionError("The float module must have 'qconfig'")
        observed = cls.from_params(other.weight_ih, other.weight_hh, other.bias_ih,
                                   other.bias_hh, split_gates=split_gates)
        observed.qconfig = other.qconfig
        for linears in (observed.igates, observed.hgates):
            linears.qconfig = other.qconfig
            if split_gates:
                for linear in linears.values():
                    linear.qconfig = other.qconfig
        return observed


class _LSTMSingleLayer(nn.Module):
    """One direction of one layer: the cell run along the sequence (dimension 0)."""

    def __init__(self, input_dim, hidden_dim, bias=True, device=None, dtype=None, *,
                 split_gates=False):
        super().__init__()
        self.cell = LSTMCell(input_dim, hidden_dim, bias=bias, device=device, dtype=dtype,
                             split_gates=split_gates)

    def forward(self, x, hidden=None):
        outputs = []
        for step in range(x.shape[0]):
            hidden = self.cell(x[step], hidden)
            outputs.append(hidden[0])
        return stack(outputs, 0), hidden

    @classmethod
    def from_params(cls, *args, **kwargs):
        cell = LSTMCell.from_params(*args, **kwargs)
        layer = cls(cell.input_size, cell.hidden_size, cell.bias,
                    split_gates=cell.split_gates)
        layer.cell = cell
        return layer


def _direction(state, index):
    return None if state is None else state[index]


class _LSTMLayer(nn.Module):
    """One layer, in one or both directions."""

    def __init__(self, input_dim, hidden_dim, bias=True, batch_first=False,
                 bidirectional=False, device=None, dtype=None, *, split_gates=False):
        super().__init__()
        self.batch_first = batch_first
        self.bidirectional = bidirectional
        kw = {"bias": bias, "device": device, "dtype": dtype, "split_gates": split_gates}
        self.layer_fw = _LSTMSingleLayer(input_dim, hidden_dim, **kw)
        if bidirectional:
            self.layer_bw = _LSTMSingleLayer(input_dim, hidden_dim, **kw)

    def forward(self, x, hidden=None):
        if self.batch_first:
            x = x.transpose(0, 1)
        hx, cx = (None, None) if hidden is None else hidden
        if not self.bidirectional:
            hidden_fw = None if hx is None and cx is None else (hx, cx)
            result, (h, c) = self.layer_fw(x, hidden_fw)
        else:
            # the states of both directions come stacked along a first dimension of 2
            hidden_fw = None if hx is None and cx is None else (
                _direction(hx, 0), _direction(cx, 0))
            hidden_bw = None if hx is None or cx is None else (hx[1], cx[1])
            result_fw, hidden_fw = self.layer_fw(x, hidden_fw)
            result_bw, hidden_bw = self.layer_bw(x.flip(0), hidden_bw)
            result = cat([result_fw, result_bw.flip(0)], result_fw.dim() - 1)
            h = stack([hidden_fw[0], hidden_bw[0]], 0)
            c = stack([hidden_fw[1], hidden_bw[1]], 0)
        if self.batch_first:
            result = result.transpose(0, 1)
        return result, (h, c)

    @classmethod
    def from_float(cls, other, layer_idx=0, qconfig=None, **kwargs):
        """Layer ``layer_idx`` of the float ``nn.LSTM`` ``other`` (keyword arguments
        override its settings); there is no float layer class to convert from."""
        if not hasattr(other, "qconfig") and qconfig is None:
            raise AssertionError("other must have qconfig or qconfig must be provided")
        settings = {k: kwargs.get(k, getattr(other, k)) for k in
                    ("input_size", "hidden_size", "bias", "batch_first", "bidirectional")}
        split_gates = kwargs.get("split_gates", False)
        layer = cls(settings["input_size"], settings["hidden_size"], settings["bias"],
                    settings["batch_first"], settings["bidirectional"],
                    split_gates=split_gates)
        layer.qconfig = getattr(other, "qconfig", qconfig)
        suffixes = ("", "_reverse") if other.bidirectional else ("",)
        for suffix, name in zip(suffixes, ("layer_fw", "layer_bw")):
            params = [getattr(other, f"{kind}_l{layer_idx}{suffix}", None)
                      for kind in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
            setattr(layer, name, _LSTMSingleLayer.from_params(*params,
                                                              split_gates=split_gates))
        return layer


class LSTM(nn.Module):
    """A quantizable LSTM (``torch.ao.nn.quantizable.LSTM``): ``nn.LSTM`` as a stack of
    layers of :class:`LSTMCell` (``layers``), which quantization can observe and convert.
    Eager static quantization makes an ``nn.LSTM`` one of these in ``prepare`` (through
    ``from_float``, the custom module mapping ``float_to_observed_custom_module_class``)
    and a :class:`torcia.ao.nn.quantized.LSTM` in ``convert``. ``dropout`` is ignored, with
    a warning, as in PyTorch.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.nn.quantizable import LSTM
    >>> rnn = LSTM(10, 20, 2)
    >>> output, (hn, cn) = rnn(torcia.randn(5, 3, 10))
    >>> tuple(output.shape), tuple(hn.shape), tuple(cn.shape)
    ((5, 3, 20), (2, 3, 20), (2, 3, 20))
    """

    _FLOAT_MODULE = nn.LSTM

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, device=None, dtype=None, *,
                 split_gates: bool = False):
        super().__init__()
        if (not isinstance(dropout, numbers.Number) or isinstance(dropout, bool)
                or not 0 <= dropout <= 1):
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        # inference is what it is made for; training is asked for explicitly
        self.training = False
        if dropout > 0:
            warnings.warn("dropout option for quantizable LSTM is ignored. If you are "
                          "training, please, use nn.LSTM version followed by `prepare` step.",
                          stacklevel=2)
            if num_layers == 1:
                warnings.warn("dropout option adds dropout after all but last recurrent "
                              "layer, so non-zero dropout expects num_layers greater than 1, "
                              f"but got dropout={dropout} and num_layers={num_layers}",
                              stacklevel=2)
        kw = {"batch_first": False, "bidirectional": bidirectional, "device": device,
              "dtype": dtype, "split_gates": split_gates}
        self.layers = nn.ModuleList(
            [_LSTMLayer(input_size if i == 0 else hidden_size, hidden_size, bias, **kw)
             for i in range(num_layers)])

    def forward(self, x, hidden=None):
        if self.batch_first:
            x = x.transpose(0, 1)
        batch = x.size(1)
        directions = 2 if self.bidirectional else 1
        if hidden is None:
            zeros = torcia.zeros(directions, batch, self.hidden_size)
            if directions == 1:
                zeros = zeros.squeeze(0)
            if _is_quantized(x):
                zeros = quantize_per_tensor(zeros, 1.0, 0, x.dtype)
            states = [(zeros, zeros)] * self.num_layers
        elif isinstance(hidden[0], (torcia.Tensor, QTensor)):
            hx, cx = (t.reshape(self.num_layers, directions, batch, self.hidden_size)
                      for t in hidden)
            states = [(hx[i].squeeze(0), cx[i].squeeze(0)) for i in range(self.num_layers)]
        else:
            states = hidden
        hs, cs = [], []
        for layer, state in zip(self.layers, states):
            x, (h, c) = layer(x, state)
            hs.append(h)
            cs.append(c)
        h, c = stack(hs), stack(cs)
        h = h.reshape(-1, h.shape[-2], h.shape[-1])
        c = c.reshape(-1, c.shape[-2], c.shape[-1])
        if self.batch_first:
            x = x.transpose(0, 1)
        return x, (h, c)

    def _get_name(self):
        return "QuantizableLSTM"

    @classmethod
    def from_float(cls, other, qconfig=None, split_gates=False):
        """The observed LSTM of a float ``nn.LSTM`` with a qconfig: its weights in the
        layers' cells, prepared (observers in place; fake quantizers where ``other`` is
        training)."""
        if not isinstance(other, cls._FLOAT_MODULE):
            raise AssertionError(f"Expected module type {cls._FLOAT_MODULE}, got "
                                 f"{type(other)}")
        if not hasattr(other, "qconfig") and not qconfig:
            raise AssertionError("other must have qconfig or qconfig must be provided")
        observed = cls(other.input_size, other.hidden_size, other.num_layers, other.bias,
                       other.batch_first, other.dropout, other.bidirectional,
                       split_gates=split_gates)
        observed.qconfig = getattr(other, "qconfig", qconfig)
        for i in range(other.num_layers):
            observed.layers[i] = _LSTMLayer.from_float(other, i, qconfig, batch_first=False,
                                                       split_gates=split_gates)
        # torcia.ao.quantization imports the quantized modules, which import this one
        quantization = torcia.ao.quantization
        if other.training:
            return quantization.prepare_qat(observed.train(), inplace=True)
        return quantization.prepare(observed.eval(), inplace=True)

    @classmethod
    def from_observed(cls, other):
        raise NotImplementedError("It looks like you are trying to convert a non-quantizable "
                                  "LSTM module. Please, see the examples on quantizable LSTMs.")
