"""Backward formulas of the LSTM cell and layer (declared in ``_ops/nn_rnn.py``)."""

from __future__ import annotations

import torcia
from torcia.autograd.derivatives import _differentiable_formulas, derivative
from torcia.library import call


@derivative("lstm_cell", differentiable_outputs=(True, True, False))
def _(grads, gates, c, *, result):
    gh, gc, _ = grads
    if not _differentiable_formulas():
        _, c_new, act = result
        return call("lstm_cell_backward", (gh, gc, act, c, c_new), {})
    return _lstm_cell_grads(gh, gc, gates, c)


def _lstm_cell_grads(gh, gc, gates, c):
    """lstm_cell's (grad_gates, grad_c) in differentiable ops, for higher orders."""
    i, f, g, o = gates.chunk(4, -1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    tc = (f * c + i * g).tanh()
    dc = gc if gc is not None else torcia.zeros_like(tc)
    if gh is not None:
        dc = dc + gh * o * (1 - tc * tc)
        go = gh * tc * o * (1 - o)
    else:
        go = torcia.zeros_like(tc)
    g_gates = torcia.cat([dc * g * i * (1 - i), dc * c * f * (1 - f), dc * i * (1 - g * g), go],
                         -1)
    return g_gates, dc * f


@derivative("lstm_layer", differentiable_outputs=(True, True, False))
def _(grads, x_gates, h0, c0, w_hh_t, *, result):
    g_out, g_cs, _ = grads
    out, cs, acts = result
    if not _differentiable_formulas():
        return call("lstm_layer_backward", (g_out, g_cs, acts, cs, out, h0, c0, w_hh_t), {})
    # higher orders: back through time in differentiable ops, from the recomputed gates
    h_prev = torcia.cat([h0.unsqueeze(0), out[:-1]])
    dh, dc = torcia.zeros_like(h0), torcia.zeros_like(c0)
    g_steps = []
    for t in range(x_gates.shape[0] - 1, -1, -1):
        gh = dh if g_out is None else dh + g_out[t]
        gc = dc if g_cs is None else dc + g_cs[t]
        gates = x_gates[t] + h_prev[t] @ w_hh_t
        g_gates, dc = _lstm_cell_grads(gh, gc, gates, c0 if t == 0 else cs[t - 1])
        g_steps.append(g_gates)
        dh = g_gates @ w_hh_t.mT
    g_gates = torcia.stack(g_steps[::-1])
    g_w = h_prev.reshape(-1, h0.shape[-1]).mT @ g_gates.reshape(-1, g_gates.shape[-1])
    return g_gates, dh, dc, g_w
