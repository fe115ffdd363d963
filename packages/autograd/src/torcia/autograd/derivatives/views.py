"""Backward formulas of the views (declared in ``_ops/views.py``): ``view``, ``permute``,
``expand``, ``narrow``, ``unfold``, ``diagonal``, ``as_strided``, and of ``copy_slices``, a
write through a view (the movement ops' are in ``derivatives/movement.py``)."""

from __future__ import annotations

import torcia
from torcia.autograd.derivatives import _scatter_back, derivative
from torcia.library import call


@derivative("view")
def _(grad, _x, *, shape):
    return grad.reshape(_x.shape)


@derivative("reshape")
def _(grad, _x, *, shape):
    return grad.reshape(_x.shape)


@derivative("detach_view")
def _(grad, _x):
    return grad


@derivative("permute")
def _(grad, _x, *, dims):
    inverse = [0] * len(dims)
    for i, d in enumerate(dims):
        inverse[d] = i
    return grad.permute(inverse)


@derivative("transpose")
def _(grad, _x, *, dim0, dim1):
    return grad.transpose(dim0, dim1)


@derivative("squeeze")
def _(grad, _x, *, dim=None):
    return grad.reshape(_x.shape)


@derivative("unsqueeze")
def _(grad, _x, *, dim):
    return grad.squeeze(dim)


@derivative("expand")
def _(grad, _x, *, shape):
    return grad  # the engine sums the broadcast dims back


@derivative("narrow")
def _(grad, _x, *, dim, start, length):
    key = (slice(None),) * dim + (slice(start, start + length),)
    return _scatter_back(grad, _x, key)


def _index_map(meta, op, params):
    """Where each element of a view comes from, as flat indices into its base."""
    with torcia.no_grad():
        flat = torcia.arange(meta.numel(), device=meta.device).reshape(meta.shape)
        return call(op, (flat,), params)


def _view_backward_by_index(grad, meta, op, params):
    """Backward of any view op, overlapping windows included: scatter-add by index map."""
    idx = _index_map(meta, op, params).reshape(-1)
    flat = torcia.zeros(meta.numel(), dtype=grad.dtype, device=grad.device)
    flat = call("index_put", (flat, grad.reshape(-1)),
                {"key": (idx.__torcia_data__,), "accumulate": True})
    return flat.reshape(meta.shape)


@derivative("unfold")
def _(grad, _x, *, dimension, size, step):
    return _view_backward_by_index(grad, _x, "unfold",
                                   {"dimension": dimension, "size": size, "step": step})


@derivative("diagonal")
def _(grad, _x, *, offset, dim1, dim2):
    return _view_backward_by_index(grad, _x, "diagonal",
                                   {"offset": offset, "dim1": dim1, "dim2": dim2})


@derivative("as_strided")
def _(grad, _x, *, size, stride, storage_offset):
    return _view_backward_by_index(grad, _x, "as_strided",
                                   {"size": size, "stride": stride,
                                    "storage_offset": storage_offset})


@derivative("copy_slices")
def _(grad, _base, _src, *, index):
    """An in-place write into a view of ``base``: the written region (``index``: flat
    positions in the base, shaped as the view) sends its gradient to the written value,
    the rest to the base's old value."""
    flat = grad.reshape(-1)
    g_src = flat[index]
    keep = torcia.ones(_base.numel(), dtype=torcia.bool, device=grad.device)
    keep[index] = False
    return (flat * keep).reshape(_base.shape), g_src
