"""Backward formulas of pooling (declared in ``_ops/nn_pool.py``).

avg_pool and avg_pool_backward are each other's adjoints, and max_pool's scatter by indices
and max_pool_backward's gather by them: their rows close over those ops, so any order of
derivative works.
"""

from __future__ import annotations

from torcia.autograd.derivatives import derivative
from torcia.library import call


def _max_pool_grad(grads, x, result):
    """Scatter the gradient to where each window's maximum came from. Only the indices
    are kept (``saved_outputs``), as PyTorch keeps them, so that writing into the pooled
    values in place (a ReLU after pooling) leaves backward valid."""
    g = grads[0]
    if g is None:
        return None
    return call("max_pool_backward", (g, result[1]), {"input_shape": tuple(x.shape[2:])})


@derivative("max_pool", saved_outputs=(1,))
def _(grads, _x, *, result):
    return _max_pool_grad(grads, _x, result)


@derivative("adaptive_max_pool", saved_outputs=(1,))
def _(grads, _x, *, result):
    return _max_pool_grad(grads, _x, result)


@derivative("max_pool_backward")
def _(grad, _g, indices, *, input_shape):
    # the adjoint of a scatter by indices is a gather by the same indices
    n, c = grad.shape[:2]
    flat = grad.reshape(n, c, -1).gather(2, indices.reshape(n, c, -1))
    return flat.reshape(_g.shape), None


def _avg_params(kernel_size, stride, padding, ceil_mode, count_include_pad,
                divisor_override):
    return {"kernel_size": kernel_size, "stride": stride, "padding": padding,
            "ceil_mode": ceil_mode, "count_include_pad": count_include_pad,
            "divisor_override": divisor_override}


@derivative("avg_pool")
def _(grad, _x, *, kernel_size, stride, padding, ceil_mode, count_include_pad,
      divisor_override):
    params = _avg_params(kernel_size, stride, padding, ceil_mode, count_include_pad,
                         divisor_override)
    return call("avg_pool_backward", (grad,), {"input_shape": tuple(_x.shape[2:]), **params})


@derivative("avg_pool_backward")
def _(grad, _g, *, input_shape, kernel_size, stride, padding, ceil_mode, count_include_pad,
      divisor_override):
    params = _avg_params(kernel_size, stride, padding, ceil_mode, count_include_pad,
                         divisor_override)
    return call("avg_pool", (grad,), params)
