"""Backward formulas of convolutions and pooling (declared in ``_ops/nn_conv.py`` and
``_ops/nn_pool.py``)."""

from __future__ import annotations

from torcia.autograd.derivatives import _INPUT_WEIGHT_BIAS, _c, derivative
from torcia.library import call

# The window ops (conv, conv_transpose, conv_weight; avg_pool and avg_pool_backward; im2col
# and col2im) are each other's adjoints, so their rows close over those ops and any order of
# derivative works. conv, conv_transpose and conv_weight are bilinear: the gradient for one
# operand is the adjoint with the other conjugated (PyTorch's convention for complex).


def _conv_params(stride, padding, dilation, groups):
    return {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}


def _conv_input_grad(grad, weight, input_shape, stride, padding, dilation, groups):
    """conv's gradient for its input: conv_transpose with the output padding that gives
    back the input's size (the rows and columns the strides skipped)."""
    out_pad = tuple(
        i - ((o - 1) * s - lo - hi + d * (k - 1) + 1)
        for i, o, s, (lo, hi), d, k in zip(input_shape[2:], grad.shape[2:], stride, padding,
                                           dilation, weight.shape[2:])
    )
    return call("conv_transpose", (grad, weight, None),
                {**_conv_params(stride, padding, dilation, groups),
                 "output_padding": out_pad})


def _crop_to(t, shape):
    """``t`` narrowed to ``shape`` in its spatial dims (a conv may see more positions
    than a conv_transpose's input had)."""
    for d in range(2, t.ndim):
        if t.shape[d] != shape[d]:
            t = t.narrow(d, 0, shape[d])
    return t


@derivative("conv", names=_INPUT_WEIGHT_BIAS)
def _(grad, x, w, _b, *, stride, padding, dilation, groups, needs_input_grad):
    params = _conv_params(stride, padding, dilation, groups)
    gx = _conv_input_grad(grad, _c(w), x.shape, stride, padding, dilation,
                          groups) if needs_input_grad[0] else None
    gw = call("conv_weight", (_c(x), grad), {"weight_shape": tuple(w.shape),
                                             **params}) if needs_input_grad[1] else None
    gb = grad.sum((0,) + tuple(range(2, grad.ndim))) if needs_input_grad[2] else None
    return gx, gw, gb


@derivative("conv_transpose", names=_INPUT_WEIGHT_BIAS)
def _(grad, x, w, _b, *, stride, padding, output_padding, dilation, groups,
      needs_input_grad):
    params = _conv_params(stride, padding, dilation, groups)
    gx = _crop_to(call("conv", (grad, _c(w), None), params),
                  x.shape) if needs_input_grad[0] else None
    gw = call("conv_weight", (grad, _c(x)), {"weight_shape": tuple(w.shape),
                                             **params}) if needs_input_grad[1] else None
    gb = grad.sum((0,) + tuple(range(2, grad.ndim))) if needs_input_grad[2] else None
    return gx, gw, gb


@derivative("conv_weight")
def _(grad, x, g, *, weight_shape, stride, padding, dilation, groups, needs_input_grad):
    # conv_weight is bilinear in (x, g): each gradient is conv's other derivative with
    # ``grad`` as the weight
    params = _conv_params(stride, padding, dilation, groups)
    gx = _conv_input_grad(_c(g), grad, x.shape, stride, padding, dilation,
                          groups) if needs_input_grad[0] else None
    gg = _crop_to(call("conv", (_c(x), grad, None), params), g.shape) if needs_input_grad[1] \
        else None
    return gx, gg


@derivative("im2col")
def _(grad, _x, *, kernel_size, dilation, padding, stride):
    return call("col2im", (grad,), {"output_size": tuple(_x.shape[2:]),
                                    "kernel_size": kernel_size, "dilation": dilation,
                                    "padding": padding, "stride": stride})


@derivative("col2im")
def _(grad, _cols, *, output_size, kernel_size, dilation, padding, stride):
    return call("im2col", (grad,), {"kernel_size": kernel_size, "dilation": dilation,
                                    "padding": padding, "stride": stride})


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
