"""Backward formulas of the movement ops (declared in ``_ops/movement.py``): ``clone``,
``cat``, ``stack``, ``split``, ``flip``, ``roll``, ``repeat``, ``tril``, ``pad``,
``diag``..."""

from __future__ import annotations

import torcia
from torcia.autograd.derivatives import TABLE as _TABLE
from torcia.autograd.derivatives import derivative
from torcia.library import call


@derivative("contiguous")
def _(grad, _x):
    return grad


@derivative("clone")
def _(grad, _x):
    return grad


@derivative("flip")
def _(grad, _x, *, dims):
    return grad.flip(dims)


@derivative("roll")
def _(grad, _x, *, shifts, dims):
    if dims is None:
        return grad.reshape(-1).roll(-shifts).reshape(_x.shape)
    return grad.roll(tuple(-s for s in shifts), dims)


@derivative("repeat", names={"sizes": "repeats"})
def _(grad, _x, *, sizes):
    extra = len(sizes) - _x.ndim
    shape = (1,) * extra + tuple(_x.shape)
    split = []
    for r, s in zip(sizes, shape):
        split += [r, s]
    g = grad.reshape(split).sum(tuple(range(0, len(split), 2)))
    return g.reshape(_x.shape)


@derivative("tile")
def _(grad, _x, *, dims):
    # tile pads short ``dims`` with leading ones; then it is repeat
    sizes = (1,) * (_x.ndim - len(dims)) + tuple(dims)
    return _TABLE["repeat"].fn(grad, _x, sizes=sizes)


@derivative("tril")
def _(grad, _x, *, diagonal):
    return grad.tril(diagonal)


@derivative("triu")
def _(grad, _x, *, diagonal):
    return grad.triu(diagonal)


@derivative("cat")
def _(grad, *_xs, dim):
    return tuple(grad.split([m.shape[dim] for m in _xs], dim))


@derivative("stack")
def _(grad, *_xs, dim):
    return tuple(grad.unbind(dim))


@derivative("split", names={"sections": "split_size"})
def _(grads, _x, *, sections, dim):
    parts = []
    for g, n in zip(grads, sections):
        if g is None:
            shape = list(_x.shape)
            shape[dim] = n
            g = torcia.zeros(shape, dtype=_x.dtype, device=_x.device)
        parts.append(g)
    return torcia.cat(parts, dim)


def _backward_by_map(grad, meta, op, params):
    """Backward of an op that only moves, repeats or pads elements: run ``op`` on the
    numbers 1..n (0 marks padding) and scatter-add ``grad`` back by that map."""
    with torcia.no_grad():
        ids = torcia.arange(1, meta.numel() + 1, device=meta.device).reshape(meta.shape)
        idx = call(op, (ids,), params).reshape(-1)
    # slot 0 collects the gradient of padding, then is dropped
    flat = torcia.zeros(meta.numel() + 1, dtype=grad.dtype, device=grad.device)
    flat = call("index_put", (flat, grad.reshape(-1)),
                {"key": (idx.__torcia_data__,), "accumulate": True})
    return flat[1:].reshape(meta.shape)


@derivative("repeat_interleave")
def _(grad, _x, *, repeats, dim):
    return _backward_by_map(grad, _x, "repeat_interleave", {"repeats": repeats, "dim": dim})


@derivative("pad")
def _(grad, _x, *, pad, mode, value):
    return _backward_by_map(grad, _x, "pad", {"pad": pad, "mode": mode, "value": 0})


@derivative("diag")
def _(grad, _x, *, diagonal):
    return _backward_by_map(grad, _x, "diag", {"diagonal": diagonal})


@derivative("diag_embed")
def _(grad, _x, *, offset, dim1, dim2):
    return _backward_by_map(grad, _x, "diag_embed", {"offset": offset, "dim1": dim1,
                                                     "dim2": dim2})
