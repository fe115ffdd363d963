"""Recurrent networks at ``torcia.*``: the cells (``lstm_cell``, ``gru_cell``...) and
whole-sequence ``lstm``, ``gru``, ``rnn_tanh``, ``rnn_relu``.
"""

from __future__ import annotations

import functools

from torcia._autocast import autocast_as, op_policy
from torcia._oplib.elementwise import relu
from torcia._oplib.nn import dropout as _dropout
from torcia._ops.linalg import matmul
from torcia._ops.movement import cat, stack
from torcia._tensor import AUTOCAST, Tensor


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
    out = matmul(x, w.transpose(-1, -2))
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
    return relu(_lin(input, w_ih, b_ih) + _lin(hx, w_hh, b_hh))


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
                state = [ns if bt == full else cat([ns, s[bt:]], 0)
                         for ns, s in zip(new, state)]
                ys[t] = new[0]
            for j in range(n_state):
                finals[j].append(state[j])
            outs.append(ys)
        steps_in = [o[0] if num_dir == 1 else cat([o[0], o[1]], -1)
                    for o in zip(*outs)]
        if dropout and train and layer < num_layers - 1:
            steps_in = list(_dropout(cat(steps_in, 0), dropout, True).split(
                sizes, 0))
    if batch_sizes is None:
        output = stack(steps_in, 0)
        output = output.transpose(0, 1) if batch_first else output
    else:
        output = cat(steps_in, 0)
    return (output, *(stack(f, 0) for f in finals))


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


#: the names ``torcia`` exports from here
__all__ = [
    "gru", "gru_cell", "lstm", "lstm_cell", "rnn_relu", "rnn_relu_cell", "rnn_tanh",
    "rnn_tanh_cell",
]
