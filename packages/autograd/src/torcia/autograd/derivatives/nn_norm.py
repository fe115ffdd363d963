"""Backward formulas of batch, layer and RMS norm (declared in ``_ops/nn_norm.py``)."""

from __future__ import annotations

from torcia.autograd.derivatives import _INPUT_WEIGHT_BIAS, _differentiable_formulas, derivative
from torcia.library import call


def _normalized(x, dims, eps):
    """(x - mean) / sqrt(var + eps) over ``dims``, recomputed with ops so that second
    derivatives flow through the statistics."""
    mean = x.mean(dims, keepdim=True)
    centred = x - mean
    invstd = ((centred * centred).mean(dims, keepdim=True) + eps).rsqrt()
    return centred * invstd, invstd


def _norm_input_grad(gxhat, xhat, invstd, dims):
    """The gradient through (x - mean(x)) * invstd(x), given the one for its output."""
    return invstd * (gxhat - gxhat.mean(dims, keepdim=True)
                     - xhat * (gxhat * xhat).mean(dims, keepdim=True))


@derivative("batch_norm", names=_INPUT_WEIGHT_BIAS)
def _(grads, x, weight, _bias, running_mean, running_var, *, training, eps,
      needs_input_grad):
    g = grads[0]
    if g is None:
        return None, None, None, None, None
    if not _differentiable_formulas():
        # first order only: one fused kernel (it recomputes the batch statistics: saving
        # the outputs would forbid an in-place ReLU on the normalised values)
        gx, gw, gb = call("batch_norm_backward", (g, x, weight, running_mean, running_var),
                          {"training": training, "eps": eps})
        return (gx if needs_input_grad[0] else None, gw if needs_input_grad[1] else None,
                gb if needs_input_grad[2] else None, None, None)
    dims = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    if training:
        xhat, invstd = _normalized(x, dims, eps)
    else:
        invstd = (running_var + eps).rsqrt().reshape(shape)
        xhat = (x - running_mean.reshape(shape)) * invstd
    gxhat = g if weight is None else g * weight.reshape(shape)
    gx = gw = gb = None
    if needs_input_grad[0]:
        gx = _norm_input_grad(gxhat, xhat, invstd, dims) if training else gxhat * invstd
    if needs_input_grad[1]:
        gw = (g * xhat).sum(dims)
    if needs_input_grad[2]:
        gb = g.sum(dims)
    return gx, gw, gb, None, None


@derivative("layer_norm", names=_INPUT_WEIGHT_BIAS)
def _(grad, x, weight, _bias, *, normalized_ndim, eps, needs_input_grad):
    if not _differentiable_formulas():
        gx, gw, gb = call("layer_norm_backward", (grad, x, weight),
                          {"normalized_ndim": normalized_ndim, "eps": eps})
        return (gx if needs_input_grad[0] else None, gw if needs_input_grad[1] else None,
                gb if needs_input_grad[2] else None)
    dims = tuple(range(x.ndim - normalized_ndim, x.ndim))
    lead = tuple(range(x.ndim - normalized_ndim))
    xhat, invstd = _normalized(x, dims, eps)
    gxhat = grad if weight is None else grad * weight
    gx = _norm_input_grad(gxhat, xhat, invstd, dims) if needs_input_grad[0] else None
    gw = (grad * xhat).sum(lead) if needs_input_grad[1] and lead else (
        grad * xhat if needs_input_grad[1] else None)
    gb = (grad.sum(lead) if lead else grad) if needs_input_grad[2] else None
    return gx, gw, gb


@derivative("rms_norm", names=_INPUT_WEIGHT_BIAS)
def _(grad, x, weight, *, normalized_ndim, eps, needs_input_grad):
    if not _differentiable_formulas():
        gx, gw = call("rms_norm_backward", (grad, x, weight),
                      {"normalized_ndim": normalized_ndim, "eps": eps})
        return gx if needs_input_grad[0] else None, gw if needs_input_grad[1] else None
    dims = tuple(range(x.ndim - normalized_ndim, x.ndim))
    lead = tuple(range(x.ndim - normalized_ndim))
    invrms = ((x * x).mean(dims, keepdim=True) + eps).rsqrt()
    xhat = x * invrms
    gx = gw = None
    if needs_input_grad[0]:
        gxhat = grad if weight is None else grad * weight
        gx = invrms * (gxhat - xhat * (gxhat * xhat).mean(dims, keepdim=True))
    if needs_input_grad[1]:
        gw = (grad * xhat).sum(lead) if lead else grad * xhat
    return gx, gw
