"""The recurrent ops of :data:`torcia.ops.NN`, each declared once: schema, reference
kernel, meta shape, decomposition, autocast policy. ``lstm_cell`` is one LSTM step from its
gate pre-activations, ``lstm_layer`` a whole one-direction layer over a sequence, and
``lstm_cell_backward`` and ``lstm_layer_backward`` their fused first derivatives (higher
orders go through differentiable ops, so the ``*_backward`` ops have no derivative row).
The activated gates (``act``, ``acts``) are the backward's workspace, not differentiated.

A kernel is a method of the reference backend (``self.xp`` the array module, NumPy or
CuPy; ``self.sigmoid`` and ``self.matmul`` its kernels, which a faster backend may
override): torcia-cpu has native kernels of all four and is tested against these. A
decomposition is written with Tensor methods, running ``lstm_cell`` and its backward
through :func:`torcia._ops._common.op` (this module is below the Tensor class).

The public functions at ``torcia.*`` are written below: the cells (``lstm_cell``,
``gru_cell``, ``rnn_tanh_cell``, ``rnn_relu_cell``) and the whole-sequence ``lstm``,
``gru``, ``rnn_tanh`` and ``rnn_relu``, built from products and elementwise ops (the
declared ops above are torcia-nn's fused LSTM path); they reach the public functions and
autocast late-bound (:data:`torcia._opdef.PUBLIC`, :data:`torcia._opdef.AUTOCAST_AS`).
``torcia`` exports ``__all__``. The derivatives are torcia-autograd's.
"""

from __future__ import annotations

import numpy as np

from torcia import _opdef
from torcia._opdef import define
from torcia._ops._common import autocast_as, op, random_floats

# ----- reference kernels -----------------------------------------------------------------


class Kernels:
    """The reference kernels of the recurrent ops (see the module's doc)."""

    def lstm_cell(self, gates, c):
        """lstm_cell(gates (*, 4H), c (*, H)) -> (h, c', act): one LSTM step from its gate
        pre-activations (i, f, g, o): c' = sigmoid(f) c + sigmoid(i) tanh(g),
        h = sigmoid(o) tanh(c'); ``act`` holds the activated gates, for the backward."""
        hidden = gates.shape[-1] // 4
        act = self.sigmoid(gates)  # one pass for all four; g's quarter is redone with tanh
        act[..., 2 * hidden:3 * hidden] = self.xp.tanh(gates[..., 2 * hidden:3 * hidden])
        i, f, g, o = _quarters(act)
        c_new = f * c + i * g
        return o * self.xp.tanh(c_new), c_new, act

    def lstm_cell_backward(self, gh, gc, act, c, c_new):
        """lstm_cell_backward(gh, gc, act, c, c') -> (grad_gates, grad_c) of ``lstm_cell``
        (first order) from its saved outputs; ``gh`` or ``gc`` may be None (no gradient
        reached that output)."""
        xp = self.xp
        i, f, g, o = _quarters(act)
        hidden = c_new.shape[-1]
        tc = xp.tanh(c_new)
        dc = xp.zeros_like(c_new) if gc is None else gc
        out = xp.empty(c_new.shape[:-1] + act.shape[-1:], dtype=act.dtype)
        if gh is None:
            out[..., 3 * hidden:] = 0
        else:
            gho = gh * o
            dc = dc + gho * (1 - tc * tc)
            out[..., 3 * hidden:] = gho * tc * (1 - o)
        out[..., :hidden] = dc * g * i * (1 - i)
        out[..., hidden:2 * hidden] = dc * c * f * (1 - f)
        out[..., 2 * hidden:3 * hidden] = dc * i * (1 - g * g)
        return out, dc * f

    def lstm_layer(self, x_gates, h0, c0, w_hh_t):
        """lstm_layer(x_gates (L, N, 4H), h0 (N, H), c0 (N, H), w_hh_t (H, 4H)) ->
        (out (L, N, H), cs (L, N, H), acts (L, N, 4H)): a one-direction LSTM layer over a
        whole sequence; ``x_gates`` holds the input projection with both biases, ``cs``
        every step's cell state and ``acts`` its activated gates, for the backward."""
        steps = x_gates.shape[0]
        out = self.xp.empty(x_gates.shape[:-1] + h0.shape[-1:], dtype=x_gates.dtype)
        cs = self.xp.empty_like(out)
        acts = self.xp.empty_like(x_gates)
        h, c = h0, c0
        for t in range(steps):
            # self.matmul, not @: a backend's matmul may pick its threads per product
            h, c, acts[t] = self.lstm_cell(x_gates[t] + self.matmul(h, w_hh_t), c)
            out[t], cs[t] = h, c
        return out, cs, acts

    def lstm_layer_backward(self, g_out, g_cs, acts, cs, out, h0, c0, w_hh_t):
        """lstm_layer_backward(g_out, g_cs, acts, cs, out, h0, c0, w_hh_t) ->
        (grad_x_gates, grad_h0, grad_c0, grad_w_hh_t) of ``lstm_layer`` (first order),
        back through time; ``g_out`` or ``g_cs`` may be None. The recurrent weight's
        gradient is one product over all steps rather than one a step."""
        xp = self.xp
        steps = acts.shape[0]
        g_gates = xp.empty_like(acts)
        dh = xp.zeros_like(h0)
        dc = xp.zeros_like(c0)
        w_t = w_hh_t.T
        for t in range(steps - 1, -1, -1):
            gh = dh if g_out is None else dh + g_out[t]
            gc = dc if g_cs is None else dc + g_cs[t]
            g_gates[t], dc = self.lstm_cell_backward(gh, gc, acts[t],
                                                     c0 if t == 0 else cs[t - 1], cs[t])
            dh = self.matmul(g_gates[t], w_t)
        hidden = h0.shape[-1]
        h_prev = xp.concatenate([h0[None], out[:-1]]).reshape(-1, hidden)
        g_w = self.matmul(h_prev.T, g_gates.reshape(-1, g_gates.shape[-1]))
        return g_gates, dh, dc, g_w


def _quarters(act):
    """The four gates of an LSTM's (*, 4H) array, as views."""
    hidden = act.shape[-1] // 4
    return tuple(act[..., k * hidden:(k + 1) * hidden] for k in range(4))


# ----- decompositions --------------------------------------------------------------------


def lstm_step_from_gates(gates, c):
    i, f, g, o = gates.chunk(4, -1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    c_new = f * c + i * g
    # the activated gates are the backward's workspace, not differentiated (as the kernel's)
    return o * c_new.tanh(), c_new, _opdef.PUBLIC.cat([i, f, g, o], -1).detach()


def lstm_cell_backward(gh, gc, act, c, c_new):
    i, f, g, o = act.chunk(4, -1)
    tc = c_new.tanh()
    dc = c_new.new_zeros(c_new.shape) if gc is None else gc
    if gh is None:
        go = act.new_zeros(o.shape)
    else:
        gho = gh * o
        dc = dc + gho * (1 - tc * tc)
        go = gho * tc * (1 - o)
    parts = [dc * g * i * (1 - i), dc * c * f * (1 - f), dc * i * (1 - g * g), go]
    return _opdef.PUBLIC.cat([p.to(act.dtype) for p in parts], -1), dc * f


def lstm_layer(x_gates, h0, c0, w_hh_t):
    h, c = h0, c0
    outs, cells, acts = [], [], []
    for t in range(x_gates.shape[0]):
        h, c, act = op("lstm_cell", x_gates[t] + h.matmul(w_hh_t), c)
        outs.append(h)
        cells.append(c)
        acts.append(act)
    stack = _opdef.PUBLIC.stack
    # the activated gates are the backward's workspace, not differentiated (as the kernel's)
    return stack(outs), stack(cells), stack(acts).detach()


def lstm_layer_backward(g_out, g_cs, acts, cs, out, h0, c0, w_hh_t):
    # back through time; the recurrent weight's gradient is one product over all steps
    dh = h0.new_zeros(h0.shape)
    dc = c0.new_zeros(c0.shape)
    steps = []
    for t in range(acts.shape[0] - 1, -1, -1):
        gh = dh if g_out is None else dh + g_out[t]
        gc = dc if g_cs is None else dc + g_cs[t]
        g_gates, dc = op("lstm_cell_backward", gh, gc, acts[t], c0 if t == 0 else cs[t - 1],
                         cs[t])
        steps.append(g_gates)
        dh = g_gates.matmul(w_hh_t.transpose(0, 1))
    g_gates = _opdef.PUBLIC.stack(steps[::-1])
    h_prev = _opdef.PUBLIC.cat([h0.unsqueeze(0), out[:-1]]).reshape(-1, h0.shape[-1])
    g_w = h_prev.transpose(0, 1).matmul(g_gates.reshape(-1, g_gates.shape[-1]))
    return g_gates, dh, dc, g_w


# ----- shapes ----------------------------------------------------------------------------


def _lstm_cell_shape(gates, c, **params):
    """``(h, c', act)`` of one LSTM step: ``gates`` is (*, 4H), ``c`` (*, H)."""
    dtype = np.result_type(gates.dtype, c.dtype)
    state = tuple(np.broadcast_shapes(gates.shape[:-1] + (gates.shape[-1] // 4,), c.shape))
    return (state, dtype), (state, dtype), (gates.shape, gates.dtype)


def _lstm_cell_backward_shape(gh, gc, act, c, c_new, **params):
    """``(grad_gates, grad_c)``; ``gh`` or ``gc`` may be absent."""
    return (c_new.shape[:-1] + act.shape[-1:], act.dtype), (
        tuple(np.broadcast_shapes(c_new.shape, c.shape)), np.result_type(act.dtype, c.dtype))


def _lstm_layer_shape(x_gates, h0, c0, w_hh_t, **params):
    """``(out, cs, acts)`` of a layer over ``x_gates`` (L, N, 4H)."""
    state = x_gates.shape[:-1] + h0.shape[-1:]
    return (state, x_gates.dtype), (state, x_gates.dtype), (x_gates.shape, x_gates.dtype)


def _lstm_layer_backward_shape(g_out, g_cs, acts, cs, out, h0, c0, w_hh_t, **params):
    dtype = np.result_type(acts.dtype, w_hh_t.dtype)
    return ((acts.shape, acts.dtype), (h0.shape, dtype),
            (c0.shape, np.result_type(c0.dtype, dtype)),
            (w_hh_t.shape, np.result_type(h0.dtype, acts.dtype)))


# ----- the declarations ------------------------------------------------------------------

#: in :data:`torcia.ops.NN`'s order; PyTorch runs lstm_cell in the low-precision dtype
#: under CUDA autocast
DECLARED = (
    define("lstm_cell(Tensor gates, Tensor c) -> (Tensor, Tensor, Tensor)", Kernels.lstm_cell,
           shape=_lstm_cell_shape, decomposition=lstm_step_from_gates, autocast={"cuda": "lower"},
           group="nn"),
    define("lstm_cell_backward(Tensor? gh, Tensor? gc, Tensor act, Tensor c, Tensor c_new) "
           "-> (Tensor, Tensor)", Kernels.lstm_cell_backward,
           shape=_lstm_cell_backward_shape, decomposition=lstm_cell_backward, group="nn"),
    define("lstm_layer(Tensor x_gates, Tensor h0, Tensor c0, Tensor w_hh_t) "
           "-> (Tensor, Tensor, Tensor)", Kernels.lstm_layer, shape=_lstm_layer_shape,
           decomposition=lstm_layer, group="nn",
           samples=lambda rng: [(tuple(random_floats(rng, *shape)
                                       for shape in ((3, 2, 8), (2, 2), (2, 2), (2, 8))), {})]),
    define("lstm_layer_backward(Tensor? g_out, Tensor? g_cs, Tensor acts, Tensor cs, "
           "Tensor out, Tensor h0, Tensor c0, Tensor w_hh_t) -> (Tensor, Tensor, Tensor, Tensor)",
           Kernels.lstm_layer_backward, shape=_lstm_layer_backward_shape,
           decomposition=lstm_layer_backward, group="nn"),
)


# ----- public functions (torcia.lstm_cell, torcia.gru...): built from other ops ---------


def _lin(x, w, b):
    out = _opdef.PUBLIC.matmul(x, w.transpose(-1, -2))
    return out if b is None else out + b


@autocast_as("rnn_tanh_cell", where_listed=True)
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


@autocast_as("rnn_relu_cell", where_listed=True)
def rnn_relu_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One Elman RNN step with ReLU: ``relu(input @ w_ih.T + b_ih + hx @ w_hh.T + b_hh)``.

    Examples
    --------
    >>> import torcia
    >>> w_ih, w_hh = torcia.eye(2), torcia.eye(2)
    >>> torcia.rnn_relu_cell(torcia.tensor([[1.0, -2.0]]), torcia.zeros(1, 2), w_ih, w_hh)
    tensor([[1., 0.]])
    """
    return _opdef.PUBLIC.relu(_lin(input, w_ih, b_ih) + _lin(hx, w_hh, b_hh))


@autocast_as("lstm_cell", where_listed=True)
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


@autocast_as("gru_cell", where_listed=True)
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
                state = [ns if bt == full else _opdef.PUBLIC.cat([ns, s[bt:]], 0)
                         for ns, s in zip(new, state)]
                ys[t] = new[0]
            for j in range(n_state):
                finals[j].append(state[j])
            outs.append(ys)
        steps_in = [o[0] if num_dir == 1 else _opdef.PUBLIC.cat([o[0], o[1]], -1)
                    for o in zip(*outs)]
        if dropout and train and layer < num_layers - 1:
            steps_in = list(_opdef.PUBLIC.dropout(_opdef.PUBLIC.cat(steps_in, 0), dropout,
                                                   True).split(sizes, 0))
    if batch_sizes is None:
        output = _opdef.PUBLIC.stack(steps_in, 0)
        output = output.transpose(0, 1) if batch_first else output
    else:
        output = _opdef.PUBLIC.cat(steps_in, 0)
    return (output, *(_opdef.PUBLIC.stack(f, 0) for f in finals))


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
        if len(args) == 8 and isinstance(args[0], _opdef.PUBLIC.Tensor):
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


#: the names ``torcia`` exports from here
__all__ = [
    "gru", "gru_cell", "lstm", "lstm_cell", "rnn_relu", "rnn_relu_cell", "rnn_tanh",
    "rnn_tanh_cell",
]
