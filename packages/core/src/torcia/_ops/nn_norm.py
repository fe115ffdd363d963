"""The softmax family and the normalisations of :data:`torcia.ops.NN` with their fused
backward ops, each declared once: schema, reference kernel, meta shape, decomposition,
autocast policy.

A kernel here is written as a method of the reference backend: ``self.xp`` is the array
module (NumPy, or CuPy for torcia-cuda's subclass); arrays come positionally, parameters
as keywords, and a multi-output op returns a tuple. A decomposition is written with Tensor
methods only (it runs on any device, and this module is below the Tensor class). Their
public functions are in :mod:`torcia._oplib.nn_activation` (``softmax``, ``log_softmax``)
and :mod:`torcia._oplib.nn_norm`, their derivatives in torcia-autograd; the ``*_backward``
ops are fused first derivatives (higher orders go through differentiable ops, so they have
no derivative row).
"""

from __future__ import annotations

import numpy as np

from torcia._opdef import define
from torcia._ops._common import (
    HALF,
    first_shape,
    floating_dtype,
    grad_like,
    in_float32,
    low_precision,
    opmath,
    widened,
)

# ----- reference kernels -----------------------------------------------------------------


class Kernels:
    """The reference kernels, methods of the reference backend (see the module's doc)."""

    def softmax(self, a, dim):
        """softmax(a, dim): exp(a) normalised along ``dim``."""
        xp = self.xp
        if a.shape[dim] == 0:
            return a.copy()  # nothing to normalise; max would have no identity
        e = xp.exp(a - a.max(axis=dim, keepdims=True))
        e /= e.sum(axis=dim, keepdims=True)
        return e

    def log_softmax(self, a, dim):
        """log_softmax(a, dim): a - logsumexp(a) along ``dim``."""
        xp = self.xp
        if a.shape[dim] == 0:
            return a.copy()
        shifted = a - a.max(axis=dim, keepdims=True)
        return shifted - xp.log(xp.exp(shifted).sum(axis=dim, keepdims=True))

    def softmax_backward(self, g, y, dim):
        """softmax_backward(g, y, dim): y * (g - sum(g * y, dim)) for y = softmax(x)
        (first order)."""
        gy = g * y
        gy -= y * gy.sum(axis=dim, keepdims=True)
        return gy

    def log_softmax_backward(self, g, y, dim):
        """log_softmax_backward(g, y, dim): g - exp(y) * sum(g, dim) for
        y = log_softmax(x) (first order)."""
        return g - self.xp.exp(y) * g.sum(axis=dim, keepdims=True)

    def batch_norm(self, x, weight, bias, running_mean, running_var, training, eps):
        """batch_norm(x (N, C, *), weight, bias, running_mean, running_var) ->
        (out, mean, var): normalised per channel with the batch statistics (training)
        or the running ones; ``mean`` and the biased ``var`` are the statistics used."""
        if low_precision(x):
            # float16 and bfloat16 in float32, rounded once, as PyTorch's CPU kernel; the
            # statistics in the dtype they would have had
            out, mean, var = self.batch_norm(
                *in_float32(x, weight, bias, running_mean, running_var), training, eps)
            stat = x.dtype if training else running_mean.dtype
            return out.astype(x.dtype), mean.astype(stat), var.astype(stat)
        xp = self.xp
        shape = (1, -1) + (1,) * (x.ndim - 2)
        if training:
            axes = (0,) + tuple(range(2, x.ndim))
            mean = x.mean(axis=axes)
            centred = x - mean.reshape(shape)
            var = (centred * centred).mean(axis=axes)
        else:
            # copies: outputs must not alias the running buffers, which training updates
            mean, var = running_mean.copy(), running_var.copy()
            centred = x - mean.reshape(shape)
        scale = 1 / xp.sqrt(var + eps)
        if weight is not None:
            scale = scale * weight
        out = centred * scale.reshape(shape).astype(x.dtype, copy=False)
        if bias is not None:
            out += bias.reshape(shape)
        return out, mean, var

    def batch_norm_backward(self, g, x, weight, running_mean, running_var, training, eps):
        """batch_norm_backward(g, x, weight, running_mean, running_var) -> (grad_input,
        grad_weight, grad_bias) of ``batch_norm``: batch statistics recomputed in
        training, the running ones otherwise (first order: second derivatives go through
        differentiable ops)."""
        xp = self.xp
        shape = (1, -1) + (1,) * (x.ndim - 2)
        axes = (0,) + tuple(range(2, x.ndim))
        if training:
            mean = x.mean(axis=axes)
            var = x.var(axis=axes)
        else:
            mean, var = running_mean, running_var
        invstd = (1 / xp.sqrt(var + eps)).astype(x.dtype, copy=False)
        xhat = (x - mean.reshape(shape)) * invstd.reshape(shape)
        gb = g.sum(axis=axes)
        gw = (g * xhat).sum(axis=axes)
        scale = invstd if weight is None else invstd * weight
        if not training:
            return g * scale.reshape(shape), gw, gb
        n = x.size // x.shape[1]
        xhat *= (gw / n).reshape(shape)
        gx = g - (gb / n).reshape(shape)
        gx -= xhat
        gx *= scale.reshape(shape)
        return gx, gw, gb

    def layer_norm_backward(self, g, x, weight, normalized_ndim, eps):
        """layer_norm_backward(g, x, weight) -> (grad_input, grad_weight, grad_bias) of
        ``layer_norm`` (first order)."""
        xp = self.xp
        axes = tuple(range(x.ndim - normalized_ndim, x.ndim))
        lead = tuple(range(x.ndim - normalized_ndim))
        centred = x - x.mean(axis=axes, keepdims=True)
        invstd = 1 / xp.sqrt((centred * centred).mean(axis=axes, keepdims=True) + eps)
        xhat = centred * invstd
        gb = g.sum(axis=lead)
        gw = (g * xhat).sum(axis=lead)
        gxhat = g if weight is None else g * weight
        gx = gxhat - gxhat.mean(axis=axes, keepdims=True)
        gx -= xhat * (gxhat * xhat).mean(axis=axes, keepdims=True)
        gx *= invstd
        return gx, gw, gb

    def layer_norm(self, x, weight, bias, normalized_ndim, eps):
        """layer_norm(x, weight, bias) -> out: normalised over the last
        ``normalized_ndim`` dims, then scaled and shifted elementwise."""
        if low_precision(x):
            # float16 and bfloat16 in float32, rounded once, as PyTorch's CPU kernel
            return self.layer_norm(*in_float32(x, weight, bias), normalized_ndim,
                                   eps).astype(x.dtype)
        xp = self.xp
        axes = tuple(range(x.ndim - normalized_ndim, x.ndim))
        mean = x.mean(axis=axes, keepdims=True)
        centred = x - mean
        var = (centred * centred).mean(axis=axes, keepdims=True)
        out = centred / xp.sqrt(var + eps)
        if weight is not None:
            out *= weight
        if bias is not None:
            out += bias
        return out

    def rms_norm(self, x, weight, normalized_ndim, eps):
        """rms_norm(x, weight) -> out: divided by the root mean square over the last
        ``normalized_ndim`` dims, then scaled elementwise."""
        if low_precision(x):
            return self.rms_norm(*in_float32(x, weight), normalized_ndim, eps).astype(x.dtype)
        xp = self.xp
        axes = tuple(range(x.ndim - normalized_ndim, x.ndim))
        out = x / xp.sqrt((x * x).mean(axis=axes, keepdims=True) + eps)
        if weight is not None:
            out *= weight
        return out

    def rms_norm_backward(self, g, x, weight, normalized_ndim, eps):
        """rms_norm_backward(g, x, weight) -> (grad_input, grad_weight) of ``rms_norm``
        (first order): with r = 1 / rms(x) and xhat = x r, grad_input is
        r (gxhat - xhat mean(gxhat xhat)), gxhat the gradient scaled by ``weight``."""
        xp = self.xp
        axes = tuple(range(x.ndim - normalized_ndim, x.ndim))
        lead = tuple(range(x.ndim - normalized_ndim))
        invrms = 1 / xp.sqrt((x * x).mean(axis=axes, keepdims=True) + eps)
        xhat = x * invrms
        gw = (g * xhat).sum(axis=lead)
        gxhat = g if weight is None else g * weight
        gx = gxhat - xhat * (gxhat * xhat).mean(axis=axes, keepdims=True)
        gx *= invrms
        return gx, gw


# ----- meta shapes -----------------------------------------------------------------------


def _channels(x, dim=1) -> tuple:
    return (x.shape[dim],) if x.ndim > dim else ()


def _batch_norm_shape(x, weight, bias, running_mean, running_var, training, eps, **params):
    """``(out, mean, var)``: the statistics used, one per channel."""
    stats = x.dtype if training or running_mean is None else running_mean.dtype
    return (x.shape, x.dtype), (_channels(x), stats), (_channels(x), stats)


def _batch_norm_backward_shape(g, x, weight, running_mean, running_var, training, eps,
                               **params):
    dtype = np.result_type(g.dtype, x.dtype)
    return (x.shape, dtype), (_channels(x), dtype), (_channels(x), dtype)


def _layer_norm_shape(x, weight, bias, normalized_ndim, eps, **params):
    return x.shape, floating_dtype(x.dtype)


def _layer_norm_backward_shape(g, x, weight, normalized_ndim, eps, **params):
    dtype = np.result_type(g.dtype, x.dtype)
    normalized = x.shape[x.ndim - normalized_ndim:]
    return (x.shape, dtype), (normalized, dtype), (normalized, dtype)


def _rms_norm_backward_shape(g, x, weight, normalized_ndim, eps, **params):
    dtype = np.result_type(g.dtype, x.dtype)
    return (x.shape, dtype), (x.shape[x.ndim - normalized_ndim:], dtype)


# ----- decompositions --------------------------------------------------------------------


def softmax(a, dim):
    e = (a - a.amax(dim, keepdim=True)).exp()
    return e / e.sum(dim, keepdim=True)


def log_softmax(a, dim):
    shifted = a - a.amax(dim, keepdim=True)
    return shifted - shifted.exp().sum(dim, keepdim=True).log()


def softmax_backward(g, y, dim):
    return y * (g - (g * y).sum(dim, keepdim=True))


def log_softmax_backward(g, y, dim):
    return g - y.exp() * g.sum(dim, keepdim=True)


def batch_norm(x, weight, bias, running_mean, running_var, training, eps):
    if x.dtype in HALF:
        # in float32, rounded once; the statistics in the dtype they would have had
        out, mean, var = batch_norm(*map(widened, (x, weight, bias, running_mean, running_var)),
                                    training, eps)
        stat = x.dtype if training else running_mean.dtype
        return out.to(x.dtype), mean.to(stat), var.to(stat)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    if training:
        axes = (0,) + tuple(range(2, x.ndim))
        mean = x.mean(axes)
        centred = x - mean.reshape(shape)
        var = (centred * centred).mean(axes)
    else:
        # copies: outputs must not alias the running buffers, which training updates
        mean, var = running_mean.clone(), running_var.clone()
        centred = x - mean.reshape(shape)
    scale = (var + eps).sqrt().reciprocal()
    if weight is not None:
        scale = scale * weight
    out = centred * scale.reshape(shape).to(x.dtype)
    # the statistics are saved for backward and the running averages, not differentiated
    # (as the kernel's derivative has it)
    return (out if bias is None else out + bias.reshape(shape)), mean.detach(), var.detach()


def batch_norm_backward(g, x, weight, running_mean, running_var, training, eps):
    shape = (1, -1) + (1,) * (x.ndim - 2)
    axes = (0,) + tuple(range(2, x.ndim))
    if training:
        mean = x.mean(axes)
        centred = x - mean.reshape(shape)
        var = (centred * centred).mean(axes)
    else:
        mean, var = running_mean, running_var
    invstd = (var + eps).sqrt().reciprocal().to(x.dtype)
    xhat = (x - mean.reshape(shape)) * invstd.reshape(shape)
    gb = g.sum(axes)
    gw = (g * xhat).sum(axes)
    scale = invstd if weight is None else invstd * weight
    if not training:
        return g * scale.reshape(shape), gw, gb
    n = x.numel() // x.shape[1]
    gx = (g - (gb / n).reshape(shape)) - xhat * (gw / n).reshape(shape)
    return gx * scale.reshape(shape), gw, gb


@opmath
def layer_norm(x, weight, bias, normalized_ndim, eps):
    dims = tuple(range(x.ndim - normalized_ndim, x.ndim))
    centred = x - x.mean(dims, keepdim=True)
    out = centred / ((centred * centred).mean(dims, keepdim=True) + eps).sqrt()
    if weight is not None:
        out = out * weight
    return out if bias is None else out + bias


@opmath
def rms_norm(x, weight, normalized_ndim, eps):
    dims = tuple(range(x.ndim - normalized_ndim, x.ndim))
    out = x / ((x * x).mean(dims, keepdim=True) + eps).sqrt()
    return out if weight is None else out * weight


def _sum_over(t, dims):
    """``t`` summed over ``dims`` (none: a copy of it)."""
    return t.sum(dims) if dims else t.clone()


def _norm_backward(g, xhat, invstd, weight, axes, centre):
    """The input's gradient of a normalisation of ``axes`` (``centre``: the mean taken
    out, as layer_norm's): invstd (gxhat [- mean(gxhat)] - xhat mean(gxhat xhat))."""
    gxhat = g if weight is None else g * weight
    gx = gxhat - gxhat.mean(axes, keepdim=True) if centre else gxhat
    return (gx - xhat * (gxhat * xhat).mean(axes, keepdim=True)) * invstd


def layer_norm_backward(g, x, weight, normalized_ndim, eps):
    axes = tuple(range(x.ndim - normalized_ndim, x.ndim))
    lead = tuple(range(x.ndim - normalized_ndim))
    centred = x - x.mean(axes, keepdim=True)
    invstd = ((centred * centred).mean(axes, keepdim=True) + eps).sqrt().reciprocal()
    xhat = centred * invstd
    gx = _norm_backward(g, xhat, invstd, weight, axes, centre=True)
    return gx, _sum_over(g * xhat, lead), _sum_over(g, lead)


def rms_norm_backward(g, x, weight, normalized_ndim, eps):
    axes = tuple(range(x.ndim - normalized_ndim, x.ndim))
    lead = tuple(range(x.ndim - normalized_ndim))
    invrms = ((x * x).mean(axes, keepdim=True) + eps).sqrt().reciprocal()
    xhat = x * invrms
    gx = _norm_backward(g, xhat, invrms, weight, axes, centre=False)
    return gx, _sum_over(g * xhat, lead)


# ----- the declarations ------------------------------------------------------------------


#: in :data:`torcia.ops.NN`'s order. The arguments a kernel takes without a default stay
#: inputs of the op's record, as they were before the declaration (``dim`` of the backward
#: ops); the forward ops' parameters are keywords without a default of their own (their
#: public functions pass every one). PyTorch runs softmax, log_softmax, layer_norm and
#: rms_norm in float32 under CUDA autocast.
DECLARED = (
    define("softmax(Tensor x, *, int dim=None) -> Tensor", Kernels.softmax,
           shape=first_shape, decomposition=softmax, autocast={"cuda": "float32"},
           group="nn"),
    define("log_softmax(Tensor x, *, int dim=None) -> Tensor", Kernels.log_softmax,
           shape=first_shape, decomposition=log_softmax, autocast={"cuda": "float32"},
           group="nn"),
    define("softmax_backward(Tensor g, Tensor y, int dim) -> Tensor", Kernels.softmax_backward,
           shape=grad_like, decomposition=softmax_backward, group="nn"),
    define("log_softmax_backward(Tensor g, Tensor y, int dim) -> Tensor",
           Kernels.log_softmax_backward, shape=grad_like, decomposition=log_softmax_backward,
           group="nn"),
    define("batch_norm(Tensor x, Tensor? weight, Tensor? bias, Tensor? running_mean, "
           "Tensor? running_var, *, bool training=None, float eps=None) "
           "-> (Tensor, Tensor, Tensor)", Kernels.batch_norm,
           shape=_batch_norm_shape, decomposition=batch_norm, group="nn"),
    define("batch_norm_backward(Tensor g, Tensor x, Tensor? weight, Tensor? running_mean, "
           "Tensor? running_var, bool training, float eps) -> (Tensor, Tensor, Tensor)",
           Kernels.batch_norm_backward, shape=_batch_norm_backward_shape,
           decomposition=batch_norm_backward, group="nn"),
    define("layer_norm(Tensor x, Tensor? weight, Tensor? bias, *, int normalized_ndim=None, "
           "float eps=None) -> Tensor", Kernels.layer_norm, shape=_layer_norm_shape,
           decomposition=layer_norm, autocast={"cuda": "float32"}, group="nn"),
    define("layer_norm_backward(Tensor g, Tensor x, Tensor? weight, int normalized_ndim, "
           "float eps) -> (Tensor, Tensor, Tensor)", Kernels.layer_norm_backward,
           shape=_layer_norm_backward_shape, decomposition=layer_norm_backward, group="nn"),
    define("rms_norm(Tensor x, Tensor? weight, *, int normalized_ndim=None, float eps=None) "
           "-> Tensor", Kernels.rms_norm, shape=first_shape, decomposition=rms_norm,
           autocast={"cuda": "float32"}, floating_inputs=True, group="nn"),
    define("rms_norm_backward(Tensor g, Tensor x, Tensor? weight, int normalized_ndim, "
           "float eps) -> (Tensor, Tensor)", Kernels.rms_norm_backward,
           shape=_rms_norm_backward_shape, decomposition=rms_norm_backward, group="nn"),
)
