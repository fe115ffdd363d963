"""Recurrent layers: RNN, LSTM, GRU and their cells, with PyTorch's weight layout.

Each layer and direction holds ``weight_ih_l{k}[_reverse]`` (gates x input),
``weight_hh_l{k}[_reverse]``, ``bias_ih_l{k}``, ``bias_hh_l{k}`` (and ``weight_hr_l{k}``
for an LSTM with ``proj_size``), gates stacked in PyTorch's order (LSTM: i, f, g, o;
GRU: r, z, n), so state dicts map key for key. The input projection of a whole sequence
is one matrix product; only the recurrent part steps through time.
"""

from __future__ import annotations

import math

import torcia
from torcia.library import call
from torcia.nn import functional as F
from torcia.nn import init
from torcia.nn.modules.module import Module
from torcia.nn.parameter import Parameter
from torcia.nn.utils.rnn import PackedSequence, pad_packed_sequence


def _lstm_step(x_gates, h, c, w_hh_t, w_hr):
    """One step; ``x_gates`` holds the input projection and both biases."""
    # two recorded ops a step (product, fused cell) instead of a dozen elementwise ones
    h, c, _ = call("lstm_cell", (torcia.addmm(x_gates, h, w_hh_t), c), {})
    if w_hr is not None:
        h = F.linear(h, w_hr)
    return h, c


def _gru_step(x_gates, h, w_hh, b_hh):
    hr, hz, hn = F.linear(h, w_hh, b_hh).chunk(3, -1)
    xr, xz, xn = x_gates.chunk(3, -1)
    r = (xr + hr).sigmoid()
    z = (xz + hz).sigmoid()
    n = (xn + r * hn).tanh()
    return (1 - z) * n + z * h


def _rnn_step(x_gates, h, w_hh, b_hh, nonlinearity):
    pre = x_gates + F.linear(h, w_hh, b_hh)
    return pre.tanh() if nonlinearity == "tanh" else pre.relu()


class RNNBase(Module):
    """The shared machinery of :class:`RNN`, :class:`LSTM` and :class:`GRU`.

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> rnn = nn.RNNBase('GRU', input_size=3, hidden_size=4, num_layers=2)
    >>> output, h = rnn(torcia.zeros(5, 1, 3))
    >>> output.shape, h.shape
    (torcia.Size([5, 1, 4]), torcia.Size([2, 1, 4]))
    """

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, proj_size=0,
                 device=None, dtype=None):
        super().__init__()
        if not isinstance(hidden_size, int) or hidden_size <= 0:
            raise ValueError(f"hidden_size must be a positive integer, got {hidden_size!r}")
        if num_layers <= 0:
            raise ValueError(f"num_layers must be greater than or equal to 1, got {num_layers}")
        if not 0 <= dropout <= 1:
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable "
                             "projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if proj_size and mode != "LSTM":
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        gates = {"LSTM": 4, "GRU": 3}.get(mode, 1)
        directions = 2 if bidirectional else 1
        real_hidden = proj_size or hidden_size
        kw = {"device": device, "dtype": dtype}
        self._flat_weights_names = []
        for layer in range(num_layers):
            for direction in range(directions):
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                layer_in = input_size if layer == 0 else real_hidden * directions
                names = [("weight_ih", (gates * hidden_size, layer_in)),
                         ("weight_hh", (gates * hidden_size, real_hidden))]
                if bias:
                    names += [("bias_ih", (gates * hidden_size,)),
                              ("bias_hh", (gates * hidden_size,))]
                if proj_size:
                    names.append(("weight_hr", (proj_size, hidden_size)))
                for name, shape in names:
                    self.register_parameter(name + suffix, Parameter(torcia.empty(shape, **kw)))
                    self._flat_weights_names.append(name + suffix)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Every weight uniform in [-1/sqrt(hidden_size), 1/sqrt(hidden_size)]."""
        bound = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -bound, bound)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s

    def _weights(self, layer, direction):
        suffix = f"_l{layer}" + ("_reverse" if direction else "")
        get = lambda name: getattr(self, name + suffix, None)  # noqa: E731
        return (get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh"),
                get("weight_hr"))

    # ----- forward ------------------------------------------------------------------
    def flatten_parameters(self) -> None:
        """Kept for PyTorch code that calls it after ``.to()`` or under ``DataParallel``.

        PyTorch repacks the weights into one cuDNN buffer here; torcia's RNN kernels read
        the per-layer parameters directly, so there is nothing to repack and the call
        leaves the module unchanged.
        """
        return None

    def forward(self, input, hx=None):
        packed = isinstance(input, PackedSequence)
        if packed:
            sorted_indices, unsorted = input.sorted_indices, input.unsorted_indices
            x, lengths = pad_packed_sequence(input, batch_first=False)
            if sorted_indices is not None:
                x = x.index_select(1, sorted_indices)
                lengths = lengths[sorted_indices]
            batched = True
        else:
            x = input
            lengths = None
            sorted_indices = unsorted = None
            batched = x.ndim == 3
            if x.ndim not in (2, 3):
                raise ValueError(f"{self.mode}: Expected input to be 2D or 3D, got "
                                 f"{x.ndim}D instead")
            if not batched:
                x = x.unsqueeze(1)
            elif self.batch_first:
                x = x.transpose(0, 1)
        if x.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {x.shape[-1]}")
        h0, c0 = self._initial_state(hx, x, batched, sorted_indices)
        out, h_n, c_n = self._run(x, h0, c0, lengths)
        if unsorted is not None:
            h_n = h_n.index_select(1, unsorted)
            if c_n is not None:
                c_n = c_n.index_select(1, unsorted)
        if packed:
            from torcia.nn.utils.rnn import pack_padded_sequence

            out = pack_padded_sequence(out, lengths, enforce_sorted=True)
            out = PackedSequence(out.data, out.batch_sizes, sorted_indices, unsorted)
        elif not batched:
            out = out.squeeze(1)
            h_n = h_n.squeeze(1)
            c_n = c_n.squeeze(1) if c_n is not None else None
        elif self.batch_first:
            out = out.transpose(0, 1)
        return (out, (h_n, c_n)) if self.mode == "LSTM" else (out, h_n)

    def _initial_state(self, hx, x, batched, sorted_indices):
        directions = 2 if self.bidirectional else 1
        batch = x.shape[1]
        h_size = self.proj_size or self.hidden_size
        shape_h = (self.num_layers * directions, batch, h_size)
        shape_c = (self.num_layers * directions, batch, self.hidden_size)
        if hx is None:
            h0 = torcia.zeros(shape_h, dtype=x.dtype, device=x.device)
            c0 = torcia.zeros(shape_c, dtype=x.dtype, device=x.device) if self.mode == "LSTM" \
                else None
            return h0, c0
        h0, c0 = hx if self.mode == "LSTM" else (hx, None)
        if not batched:
            h0 = h0.unsqueeze(1)
            c0 = c0.unsqueeze(1) if c0 is not None else None
        for t, want, name in ((h0, shape_h, "hidden"), (c0, shape_c, "cell")):
            if t is not None and tuple(t.shape) != want:
                raise RuntimeError(f"Expected {name} size {want}, got {list(t.shape)}")
        if sorted_indices is not None:
            h0 = h0.index_select(1, sorted_indices)
            c0 = c0.index_select(1, sorted_indices) if c0 is not None else None
        return h0, c0

    def _run(self, x, h0, c0, lengths):
        directions = 2 if self.bidirectional else 1
        h_last, c_last = [], []
        layer_input = x
        for layer in range(self.num_layers):
            outs = []
            for direction in range(directions):
                k = layer * directions + direction
                out, h, c = self._direction(layer_input, h0[k], None if c0 is None else c0[k],
                                            self._weights(layer, direction), direction == 1,
                                            lengths)
                outs.append(out)
                h_last.append(h)
                c_last.append(c)
            layer_input = outs[0] if directions == 1 else torcia.cat(outs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                layer_input = F.dropout(layer_input, self.dropout, training=True)
        h_n = torcia.stack(h_last)
        c_n = torcia.stack(c_last) if c0 is not None else None
        return layer_input, h_n, c_n

    def _direction(self, x, h, c, weights, reverse, lengths):
        """One layer in one direction over x (L, N, in); returns (outputs, h_n, c_n)."""
        w_ih, w_hh, b_ih, b_hh, w_hr = weights
        steps = x.shape[0]
        if reverse:
            x = _reverse_padded(x, lengths)
        if self.mode == "LSTM" and b_hh is not None:
            # the recurrent bias joins the projection's, not every step's product
            b_ih = b_ih + b_hh
        x_gates = F.linear(x, w_ih, b_ih)  # the whole sequence in one product
        if self.mode == "LSTM":
            # row-major once: BLAS runs the small per-step products ~1.5x slower on a
            # transposed operand
            w_hh_t = w_hh.t().contiguous()
            if w_hr is None and lengths is None and steps:
                # one recorded op for the whole sequence: its backward makes one weight
                # gradient product rather than one a step
                out, cs, _ = call("lstm_layer", (x_gates, h, c, w_hh_t), {})
                if reverse:
                    out = _reverse_padded(out, lengths)
                    return out, out[0], cs[-1]
                return out, out[-1], cs[-1]
        # unbound once: one backward node for all steps
        x_gates = x_gates.unbind(0)
        mask = None
        if lengths is not None:
            mask = (torcia.arange(steps).unsqueeze(1) < lengths.unsqueeze(0)).unsqueeze(-1)
            mask = mask.to(x.dtype)
        outs = []
        for t in range(steps):
            if self.mode == "LSTM":
                h_new, c_new = _lstm_step(x_gates[t], h, c, w_hh_t, w_hr)
            elif self.mode == "GRU":
                h_new, c_new = _gru_step(x_gates[t], h, w_hh, b_hh), None
            else:
                nonlinearity = "tanh" if self.mode == "RNN_TANH" else "relu"
                h_new, c_new = _rnn_step(x_gates[t], h, w_hh, b_hh, nonlinearity), None
            if mask is not None:
                # finished sequences keep their state; their outputs are zero
                m = mask[t]
                h = h_new * m + h * (1 - m)
                c = c_new * m + c * (1 - m) if c_new is not None else None
                outs.append(h_new * m)
            else:
                h, c = h_new, c_new
                outs.append(h)
        out = torcia.stack(outs)
        if reverse:
            out = _reverse_padded(out, lengths)
        return out, h, c


def _reverse_padded(x, lengths):
    """Reverse each sequence of ``x`` (L, N, ...) within its length (all of L when None)."""
    if lengths is None:
        return x.flip((0,))
    steps = x.shape[0]
    t = torcia.arange(steps).unsqueeze(1)
    idx = torcia.where(t < lengths.unsqueeze(0), lengths.unsqueeze(0) - 1 - t, t)
    idx = idx.unsqueeze(-1).expand(steps, x.shape[1], x.shape[2])
    return x.gather(0, idx)


class RNN(RNNBase):
    """Elman RNN: ``h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)`` (or relu).

    Examples
    --------
    >>> import torcia
    >>> rnn = torcia.nn.RNN(4, 8, num_layers=2)
    >>> out, h = rnn(torcia.randn(5, 3, 4))
    >>> out.shape, h.shape
    (torcia.Size([5, 3, 8]), torcia.Size([2, 3, 8]))
    """

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or "
                             "'relu'.")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size,
                         hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def extra_repr(self) -> str:
        s = super().extra_repr()
        return s if self.nonlinearity == "tanh" else s + ", nonlinearity='relu'"


class LSTM(RNNBase):
    """Long short-term memory; returns ``output, (h_n, c_n)``.

    Examples
    --------
    >>> import torcia
    >>> lstm = torcia.nn.LSTM(4, 8, batch_first=True, bidirectional=True)
    >>> out, (h, c) = lstm(torcia.randn(3, 5, 4))
    >>> out.shape, h.shape
    (torcia.Size([3, 5, 16]), torcia.Size([2, 3, 8]))
    """

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, proj_size, device, dtype)


class GRU(RNNBase):
    """Gated recurrent unit; returns ``output, h_n``.

    Examples
    --------
    >>> import torcia
    >>> out, h = torcia.nn.GRU(4, 6)(torcia.randn(5, 2, 4))
    >>> h.shape
    torcia.Size([1, 2, 6])
    """

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, device=device, dtype=dtype)


class RNNCellBase(Module):
    """The shared machinery of :class:`RNNCell`, :class:`LSTMCell` and :class:`GRUCell`:
    ``gates`` blocks of ``hidden_size`` rows in ``weight_ih`` and ``weight_hh``.

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> cell = nn.GRUCell(3, 4)
    >>> isinstance(cell, nn.RNNCellBase), cell.weight_ih.shape
    (True, torcia.Size([12, 3]))
    >>> cell(torcia.zeros(2, 3)).shape
    torcia.Size([2, 4])
    """

    def __init__(self, input_size, hidden_size, bias, gates, device=None, dtype=None):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        kw = {"device": device, "dtype": dtype}
        self.weight_ih = Parameter(torcia.empty(gates * hidden_size, input_size, **kw))
        self.weight_hh = Parameter(torcia.empty(gates * hidden_size, hidden_size, **kw))
        if bias:
            self.bias_ih = Parameter(torcia.empty(gates * hidden_size, **kw))
            self.bias_hh = Parameter(torcia.empty(gates * hidden_size, **kw))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        bound = 1.0 / math.sqrt(hidden_size)
        for weight in self.parameters():
            init.uniform_(weight, -bound, bound)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if not self.bias:
            s += ", bias=False"
        return s

    def _prepare(self, input, hx, name):
        if input.ndim not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.ndim}D instead")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.shape[-1]} "
                               f"expected {self.input_size}")
        batched = input.ndim == 2
        x = input if batched else input.unsqueeze(0)
        return x, batched

    def _zeros(self, x):
        return torcia.zeros(x.shape[0], self.hidden_size, dtype=x.dtype, device=x.device)


class RNNCell(RNNCellBase):
    """One Elman step: ``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (or relu).

    Examples
    --------
    >>> import torcia
    >>> _ = torcia.manual_seed(0)
    >>> cell = torcia.nn.RNNCell(4, 3)
    >>> h = cell(torcia.randn(2, 4))
    >>> h.shape
    torcia.Size([2, 3])
    """

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        x, batched = self._prepare(input, hx, "RNNCell")
        h = self._zeros(x) if hx is None else (hx if batched else hx.unsqueeze(0))
        out = _rnn_step(F.linear(x, self.weight_ih, self.bias_ih), h, self.weight_hh,
                        self.bias_hh, self.nonlinearity)
        return out if batched else out.squeeze(0)


class LSTMCell(RNNCellBase):
    """One LSTM step; returns ``(h', c')``.

    Examples
    --------
    >>> import torcia
    >>> _ = torcia.manual_seed(0)
    >>> cell = torcia.nn.LSTMCell(4, 3)
    >>> h, c = cell(torcia.randn(2, 4))
    >>> h.shape, c.shape
    (torcia.Size([2, 3]), torcia.Size([2, 3]))
    """

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):
        x, batched = self._prepare(input, hx, "LSTMCell")
        if hx is None:
            h = c = self._zeros(x)
        else:
            h, c = hx if batched else (hx[0].unsqueeze(0), hx[1].unsqueeze(0))
        bias = self.bias_ih if self.bias_hh is None else self.bias_ih + self.bias_hh
        h, c = _lstm_step(F.linear(x, self.weight_ih, bias), h, c, self.weight_hh.t(), None)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    """One GRU step; returns ``h'``.

    Examples
    --------
    >>> import torcia
    >>> _ = torcia.manual_seed(0)
    >>> cell = torcia.nn.GRUCell(4, 3)
    >>> cell(torcia.randn(2, 4), torcia.zeros(2, 3)).shape
    torcia.Size([2, 3])
    """

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):
        x, batched = self._prepare(input, hx, "GRUCell")
        h = self._zeros(x) if hx is None else (hx if batched else hx.unsqueeze(0))
        out = _gru_step(F.linear(x, self.weight_ih, self.bias_ih), h, self.weight_hh,
                        self.bias_hh)
        return out if batched else out.squeeze(0)
