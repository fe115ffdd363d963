"""Backward formulas of the convolutions (declared in ``_ops/nn_conv.py``)."""

from __future__ import annotations

from torcia.autograd.derivatives import _INPUT_WEIGHT_BIAS, _c, derivative
from torcia.library import call

# The window ops (conv, conv_transpose, conv_weight; im2col and col2im) are each other's
# adjoints, so their rows close over those ops and any order of derivative works. conv,
# conv_transpose and conv_weight are bilinear: the gradient for one operand is the adjoint
# with the other conjugated (PyTorch's convention for complex).


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
