"""The softmax family and the normalisations of :data:`torcia.ops.NN` with their fused
backward ops, each declared once: schema, reference kernel, meta shape, decomposition,
autocast policy.

A kernel here is written as a method of the reference backend: ``self.xp`` is the array
module (NumPy, or CuPy for torcia-cuda's subclass); arrays come positionally, parameters
as keywords, and a multi-output op returns a tuple. A decomposition is written with Tensor
methods only (it runs on any device, and this module is below the Tensor class). The
public functions of softmax (with softmin) and of the normalisations are written below,
beside their declarations, with what is built on them (group and instance norm, the
synchronised batch-norm pieces): ``torcia`` exports ``__all__`` and ``TOP_LEVEL``
(PyTorch's argument orders), Tensor has ``METHODS`` (``softmax``, ``log_softmax``) and
:data:`torcia.library.functional` the ``FUNCTIONAL`` forms. They reach dispatch
late-bound (:data:`torcia._opdef.CALL`, :data:`torcia._opdef.PUBLIC`). The derivatives are
torcia-autograd's; the ``*_backward`` ops are fused first derivatives (higher orders go
through differentiable ops, so they have no derivative row).
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from torcia import _dtype as D
from torcia import _opdef
from torcia._grad_mode import no_grad
from torcia._opdef import define
from torcia._ops._common import (
    HALF,
    THREADS,
    autocast_as,
    check_tensor,
    first_shape,
    floating_dtype,
    grad_like,
    in_float32,
    low_precision,
    opmath,
    opmath_kernel,
    widened,
    wrap_dim,
)

# ----- reference kernels -----------------------------------------------------------------


def _half_log_softmax(xp, a, dim):
    """log_softmax of a float16/bfloat16 array as PyTorch's CPU kernels compute it: in
    float32, rounded once, except that along the last dim the kernel keeps each row's sum
    of exponentials, and then its log, in a buffer of the input's dtype, so both are rounded
    there too (either way, 0 of 280,000 elements differ from torch 2.13's; per-step
    rounding put 20-35% a step off, float32 throughout 6% along the last dim)."""
    x = a.astype(np.float32)
    shifted = x - x.max(axis=dim, keepdims=True)
    total = xp.exp(shifted).sum(axis=dim, keepdims=True)
    if dim % a.ndim == a.ndim - 1:
        log_total = xp.log(total.astype(a.dtype).astype(np.float32))
        log_total = log_total.astype(a.dtype).astype(np.float32)
    else:
        log_total = xp.log(total)
    return (shifted - log_total).astype(a.dtype)


def _half_layer_norm_backward(xp, g, x, weight, normalized_ndim, eps):
    """layer_norm_backward of float16/bfloat16 (and a weight of the dtype, or none) as
    PyTorch's CPU kernel computes it. Its forward saves each row's mean and 1/std in the
    dtype, so they are rounded; a row's input gradient is computed from them in float32
    and rounded once; the weight's and bias's gradients are added a row at a time into
    buffers of the dtype, rounded at every row, a buffer for each thread's share of the
    rows (``at::parallel_for``'s: the thread count's equal parts), the buffers then added in
    float32. At torcia's thread count the bits are PyTorch's at its own (in float32
    throughout, 35% of input gradients and 90% of weight gradients were a step off)."""
    f32 = np.float32
    shape = x.shape[x.ndim - normalized_ndim:]
    if x.size == 0:
        return xp.zeros_like(x), xp.zeros(shape, x.dtype), xp.zeros(shape, x.dtype)
    n = math.prod(shape)
    rows = x.size // n
    xs, gs = x.reshape(rows, n).astype(f32), g.reshape(rows, n).astype(f32)
    w = xp.ones(n, f32) if weight is None else weight.reshape(n).astype(f32)
    mean = xs.mean(axis=1, keepdims=True)
    var = ((xs - mean) ** 2).mean(axis=1, keepdims=True)
    mean = mean.astype(x.dtype).astype(f32)
    rstd = (1 / xp.sqrt(var + eps)).astype(x.dtype).astype(f32)
    ds = (gs * xs * w).sum(axis=1, keepdims=True)
    db = (gs * w).sum(axis=1, keepdims=True)
    scale = f32(1) / f32(n)
    b = (db * mean - ds) * rstd * rstd * rstd * scale
    c = -b * mean - db * rstd * scale
    gx = (rstd * gs * w + b * xs + c).astype(x.dtype).reshape(x.shape)
    terms = gs * (rstd * xs + -rstd * mean)
    gw, gb = xp.zeros(n, f32), xp.zeros(n, f32)
    share = -(-rows // min(THREADS[0], rows))
    for start in range(0, rows, share):
        bw, bb = xp.zeros(n, x.dtype), xp.zeros(n, x.dtype)
        for i in range(start, min(rows, start + share)):
            bw = (bw.astype(f32) + terms[i]).astype(x.dtype)
            bb = (bb.astype(f32) + gs[i]).astype(x.dtype)
        gw += bw.astype(f32)
        gb += bb.astype(f32)
    return gx, gw.astype(x.dtype).reshape(shape), gb.astype(x.dtype).reshape(shape)


def _batch_norm_grads(g, x, weight, mean, invstd, training):
    """batch_norm's (grad_input, grad_weight, grad_bias) from the statistics used."""
    shape = (1, -1) + (1,) * (x.ndim - 2)
    axes = (0,) + tuple(range(2, x.ndim))
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


class Kernels:
    """The reference kernels, methods of the reference backend (see the module's doc)."""

    @opmath_kernel
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
        if low_precision(a):
            return _half_log_softmax(xp, a, dim)
        shifted = a - a.max(axis=dim, keepdims=True)
        return shifted - xp.log(xp.exp(shifted).sum(axis=dim, keepdims=True))

    @opmath_kernel
    def softmax_backward(self, g, y, dim):
        """softmax_backward(g, y, dim): y * (g - sum(g * y, dim)) for y = softmax(x)
        (first order)."""
        gy = g * y
        gy -= y * gy.sum(axis=dim, keepdims=True)
        return gy

    @opmath_kernel
    def log_softmax_backward(self, g, y, dim):
        """log_softmax_backward(g, y, dim): g - exp(y) * sum(g, dim) for
        y = log_softmax(x) (first order)."""
        return g - self.xp.exp(y) * g.sum(axis=dim, keepdims=True)

    def batch_norm(self, x, weight, bias, running_mean, running_var, training, eps):
        """batch_norm(x (N, C, *), weight, bias, running_mean, running_var) ->
        (out, mean, var): normalised per channel with the batch statistics (training)
        or the running ones; ``mean`` and the biased ``var`` are the statistics used."""
        xp = self.xp
        shape = (1, -1) + (1,) * (x.ndim - 2)
        # float16 and bfloat16 in float32, rounded once, as PyTorch's CPU kernel; the
        # statistics in the dtype they would have had
        half = x.dtype if low_precision(x) else None
        if half is not None:
            stat = x.dtype if training else running_mean.dtype
            x, weight, bias, running_mean, running_var = in_float32(
                x, weight, bias, running_mean, running_var)
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
        if half is not None and training:
            # PyTorch normalises with the batch's mean and 1/std as it saves them, in the
            # dtype (in float32 throughout, 40% of float16 results were off)
            centred = x - mean.astype(half).astype(np.float32).reshape(shape)
            scale = scale.astype(half).astype(np.float32)
        if weight is not None:
            scale = scale * weight
        out = centred * scale.reshape(shape).astype(x.dtype, copy=False)
        if bias is not None:
            out += bias.reshape(shape)
        if half is None:
            return out, mean, var
        return out.astype(half), mean.astype(stat), var.astype(stat)

    def batch_norm_backward(self, g, x, weight, running_mean, running_var, training, eps):
        """batch_norm_backward(g, x, weight, running_mean, running_var) -> (grad_input,
        grad_weight, grad_bias) of ``batch_norm``: batch statistics recomputed in
        training, the running ones otherwise (first order: second derivatives go through
        differentiable ops). Float16 and bfloat16 in float32, rounded once, from the batch
        statistics rounded to the dtype, in which PyTorch's forward saves them (per step
        in the dtype, 60-100% of gradients were a step off; in float32 from unrounded
        statistics, 27%)."""
        xp = self.xp
        axes = (0,) + tuple(range(2, x.ndim))
        half = x.dtype if low_precision(x) else None
        if half is not None:
            g, x, weight, running_mean, running_var = in_float32(
                g, x, weight, running_mean, running_var)
        if training:
            mean = x.mean(axis=axes)
            var = x.var(axis=axes)
        else:
            mean, var = running_mean, running_var
        invstd = (1 / xp.sqrt(var + eps)).astype(x.dtype, copy=False)
        if half is not None and training:
            mean, invstd = (a.astype(half).astype(np.float32) for a in (mean, invstd))
        grads = _batch_norm_grads(g, x, weight, mean, invstd, training)
        return grads if half is None else tuple(a.astype(half) for a in grads)

    def layer_norm_backward(self, g, x, weight, normalized_ndim, eps):
        """layer_norm_backward(g, x, weight) -> (grad_input, grad_weight, grad_bias) of
        ``layer_norm`` (first order)."""
        if low_precision(x) and (weight is None or weight.dtype == x.dtype):
            return _half_layer_norm_backward(self.xp, g, x, weight, normalized_ndim, eps)
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
        """rms_norm(x, weight) -> out: x * rsqrt(mean(x^2) + eps) over the last
        ``normalized_ndim`` dims, then scaled elementwise, in the order of operations of
        PyTorch's (composite) rms_norm; float16 and bfloat16 in float32, rounded once."""
        if low_precision(x):
            return self.rms_norm(*in_float32(x, weight), normalized_ndim, eps).astype(x.dtype)
        out = x * _inverse_rms(self.xp, x, normalized_ndim, eps)
        if weight is not None:
            out *= weight
        return out

    @opmath_kernel
    def rms_norm_backward(self, g, x, weight, normalized_ndim, eps):
        """rms_norm_backward(g, x, weight) -> (grad_input, grad_weight) of ``rms_norm``
        (first order), as PyTorch's autograd computes it through the composite's ops:
        with r = rsqrt(mean(x^2) + eps) and gxhat = g weight, grad_input is
        gxhat r + (-sum(gxhat x) r^3 / 2) / n * 2x; float16 and bfloat16 in float32,
        rounded once."""
        axes = tuple(range(x.ndim - normalized_ndim, x.ndim))
        lead = tuple(range(x.ndim - normalized_ndim))
        n = math.prod(x.shape[x.ndim - normalized_ndim:])
        r = _inverse_rms(self.xp, x, normalized_ndim, eps)
        gxhat = g if weight is None else g * weight
        gw = (g * (x * r)).sum(axis=lead)
        gr = (-0.5 * (gxhat * x).sum(axis=axes, keepdims=True)) * (r * r * r)
        return gxhat * r + (gr / n) * (2 * x), gw


def _inverse_rms(xp, x, normalized_ndim, eps):
    """rsqrt(mean(x^2) + eps) over the last ``normalized_ndim`` dims, as PyTorch's rsqrt:
    the square root, then its reciprocal, each rounded."""
    axes = tuple(range(x.ndim - normalized_ndim, x.ndim))
    return 1 / xp.sqrt((x * x).mean(axis=axes, keepdims=True) + eps)


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


def exp_normalised(a, dim):
    e = (a - a.amax(dim, keepdim=True)).exp()
    return e / e.sum(dim, keepdim=True)


def minus_log_sum_exp(a, dim):
    shifted = a - a.amax(dim, keepdim=True)
    return shifted - shifted.exp().sum(dim, keepdim=True).log()


def softmax_backward(g, y, dim):
    return y * (g - (g * y).sum(dim, keepdim=True))


def log_softmax_backward(g, y, dim):
    return g - y.exp() * g.sum(dim, keepdim=True)


def per_channel_normalised(x, weight, bias, running_mean, running_var, training, eps):
    if x.dtype in HALF:
        # in float32, rounded once; the statistics in the dtype they would have had
        out, mean, var = per_channel_normalised(
            *map(widened, (x, weight, bias, running_mean, running_var)), training, eps)
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
def normalised_over_last_dims(x, weight, bias, normalized_ndim, eps):
    dims = tuple(range(x.ndim - normalized_ndim, x.ndim))
    centred = x - x.mean(dims, keepdim=True)
    out = centred / ((centred * centred).mean(dims, keepdim=True) + eps).sqrt()
    if weight is not None:
        out = out * weight
    return out if bias is None else out + bias


@opmath
def divided_by_rms(x, weight, normalized_ndim, eps):
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
           shape=first_shape, decomposition=exp_normalised, autocast={"cuda": "float32"},
           group="nn"),
    define("log_softmax(Tensor x, *, int dim=None) -> Tensor", Kernels.log_softmax,
           shape=first_shape, decomposition=minus_log_sum_exp, autocast={"cuda": "float32"},
           group="nn"),
    define("softmax_backward(Tensor g, Tensor y, int dim) -> Tensor", Kernels.softmax_backward,
           shape=grad_like, decomposition=softmax_backward, group="nn"),
    define("log_softmax_backward(Tensor g, Tensor y, int dim) -> Tensor",
           Kernels.log_softmax_backward, shape=grad_like, decomposition=log_softmax_backward,
           group="nn"),
    define("batch_norm(Tensor x, Tensor? weight, Tensor? bias, Tensor? running_mean, "
           "Tensor? running_var, *, bool training=None, float eps=None) "
           "-> (Tensor, Tensor, Tensor)", Kernels.batch_norm,
           shape=_batch_norm_shape, decomposition=per_channel_normalised, group="nn"),
    define("batch_norm_backward(Tensor g, Tensor x, Tensor? weight, Tensor? running_mean, "
           "Tensor? running_var, bool training, float eps) -> (Tensor, Tensor, Tensor)",
           Kernels.batch_norm_backward, shape=_batch_norm_backward_shape,
           decomposition=batch_norm_backward, group="nn"),
    define("layer_norm(Tensor x, Tensor? weight, Tensor? bias, *, int normalized_ndim=None, "
           "float eps=None) -> Tensor", Kernels.layer_norm, shape=_layer_norm_shape,
           decomposition=normalised_over_last_dims, autocast={"cuda": "float32"},
           group="nn"),
    define("layer_norm_backward(Tensor g, Tensor x, Tensor? weight, int normalized_ndim, "
           "float eps) -> (Tensor, Tensor, Tensor)", Kernels.layer_norm_backward,
           shape=_layer_norm_backward_shape, decomposition=layer_norm_backward, group="nn"),
    define("rms_norm(Tensor x, Tensor? weight, *, int normalized_ndim=None, float eps=None) "
           "-> Tensor", Kernels.rms_norm, shape=first_shape, decomposition=divided_by_rms,
           autocast={"cuda": "float32"}, floating_inputs=True, group="nn"),
    define("rms_norm_backward(Tensor g, Tensor x, Tensor? weight, int normalized_ndim, "
           "float eps) -> (Tensor, Tensor)", Kernels.rms_norm_backward,
           shape=_rms_norm_backward_shape, decomposition=rms_norm_backward, group="nn"),
)


# ----- public functions (torcia.rms_norm, functional.batch_norm...): checks, then the ops --


def _softmax_dim(ndim: int) -> int:
    # PyTorch's legacy choice when dim is not given
    return 0 if ndim in (0, 1, 3) else 1


def _softmax(op, input, dim, dtype, name=None):
    check_tensor(input, "input", name or op)
    if dim is None:
        dim = _softmax_dim(input.ndim)
        warnings.warn(f"Implicit dimension choice for {name or op} has been deprecated. "
                      "Change the call to include dim=X as an argument.", stacklevel=4)
    if dtype is not None:
        input = input.to(dtype)
    elif not input.is_floating_point():
        last = input.ndim <= 1 or wrap_dim(dim, input.ndim) == input.ndim - 1
        raise NotImplementedError(f"\"{op}{'_lastdim' if last else ''}_kernel_impl\" not "
                                  f"implemented for '{D.torch_type_name(input.dtype)}'")
    dim = wrap_dim(dim, input.ndim)
    if input.ndim == 0:
        return _opdef.CALL(op, (input.reshape(1),), {"dim": 0}).reshape(())
    return _opdef.CALL(op, (input,), {"dim": dim})


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """``exp(input)`` normalised to sum to 1 along ``dim``; ``dtype`` casts first.

    Examples
    --------
    >>> import torcia
    >>> torcia.softmax(torcia.tensor([0.0, 0.0]), dim=0)
    tensor([0.5000, 0.5000])
    """
    return _softmax("softmax", input, dim, dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    """``input - logsumexp(input, dim)``, computed stably; ``dtype`` casts first.

    Examples
    --------
    >>> import torcia
    >>> torcia.log_softmax(torcia.tensor([0.0, 0.0]), dim=0).exp()
    tensor([0.5000, 0.5000])
    """
    return _softmax("log_softmax", input, dim, dtype)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """``softmax(-input, dim)``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.softmin(torcia.tensor([1.0, 1.0, 2.0]), dim=0)
    tensor([0.4223, 0.4223, 0.1554])
    """
    return _softmax("softmax", -input, dim, dtype, name="softmin")


def _check_channel_param(t, name, c):
    if t is not None and (t.ndim != 1 or t.shape[0] != c):
        raise RuntimeError(f"running_mean should contain {c} elements not {t.numel()}"
                           if name == "running_mean" else
                           f"Expected {name} to have {c} elements, but got {name} of size "
                           f"{list(t.shape)}")


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-05):
    """Normalise each channel (dim 1) of ``input`` with the batch statistics (training)
    or the running ones, then scale by ``weight`` and shift by ``bias``. In training,
    ``running_mean`` and ``running_var`` (unbiased variance) move towards the batch
    statistics by ``momentum``, in place.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1.0], [3.0]])
    >>> rm, rv = torcia.zeros(1), torcia.ones(1)
    >>> from torcia._ops.nn_norm import batch_norm
    >>> batch_norm(x, rm, rv, training=True, eps=0.0)
    tensor([[-1.],
            [ 1.]])
    >>> rm, rv
    (tensor([0.2000]), tensor([1.1000]))
    """
    check_tensor(input, "input", "batch_norm")
    if input.ndim < 2:
        raise ValueError(f"expected 2D or 3D input (got {input.ndim}D input)")
    if eps < 0:
        raise ValueError(f"batch_norm eps must be non-negative, but got {float(eps)}")
    if not input.is_floating_point():
        raise NotImplementedError(f"\"batch_norm\" not implemented for "
                                  f"'{D.torch_type_name(input.dtype)}'")
    c = input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        _check_channel_param(t, name, c)
    if training:
        count = input.numel() // c if c else 0
        if count == 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got "
                             f"input size {list(input.shape)}")
        if count == 0:
            # an empty batch has no statistics: PyTorch returns it (scaled and shifted,
            # so that weight and bias get their zero gradients) and leaves the running
            # statistics as they are
            shape = (1, c) + (1,) * (input.ndim - 2)
            out = input.clone()
            if weight is not None:
                out = out * weight.reshape(shape)
            if bias is not None:
                out = out + bias.reshape(shape)
            return out
    elif running_mean is None or running_var is None:
        raise RuntimeError("running_mean and running_var must be defined in evaluation mode")
    _check_param_dtypes(input, weight, bias, running_mean, running_var)
    stats = (None, None) if training else (running_mean, running_var)
    out, mean, var = _opdef.CALL("batch_norm", (input, weight, bias) + stats,
                                 {"training": bool(training), "eps": float(eps)})
    if out.dtype is not input.dtype:
        # half input with float32 statistics (PyTorch's mixed kernel): the input's dtype
        out = out.to(input.dtype)
    if training and (running_mean is not None or running_var is not None):
        n = input.numel() // c
        with no_grad():
            if running_mean is not None:
                running_mean.mul_(1 - momentum).add_(mean.detach().to(running_mean.dtype)
                                                     * momentum)
            if running_var is not None:
                unbiased = var.detach() * (n / (n - 1))
                running_var.mul_(1 - momentum).add_(unbiased.to(running_var.dtype) * momentum)
    return out


def _torch_batch_norm(input, weight, bias, running_mean, running_var, training, momentum,
                      eps, cudnn_enabled=True):
    """``torch.batch_norm``'s argument order for :func:`batch_norm`.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1.0], [3.0]])
    >>> torcia.batch_norm(x, None, None, None, None, True, 0.1, 1e-5)
    tensor([[-1.0000],
            [ 1.0000]])
    """
    return batch_norm(input, running_mean, running_var, weight, bias, training, momentum,
                      eps)


def _no_complex(input, kernel):
    """Refuse complex input as torch 2.13 does: the kernels' variance squares the values
    (not their moduli), and their gradient formulas are real ones."""
    if input.is_complex():
        raise NotImplementedError(f"\"{kernel}\" not implemented for "
                                  f"'{D.torch_type_name(input.dtype)}'")


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05):
    """Normalise ``input`` over its last ``len(normalized_shape)`` dims (mean 0, biased
    variance 1), then scale by ``weight`` and shift by ``bias`` (elementwise).

    Examples
    --------
    >>> import torcia
    >>> torcia.layer_norm(torcia.tensor([[1.0, 3.0]]), (2,), eps=0.0)
    tensor([[-1.,  1.]])
    """
    check_tensor(input, "input", "layer_norm")
    _no_complex(input, "LayerNormKernelImpl")
    shape = (int(normalized_shape),) if isinstance(normalized_shape, numbers.Integral) \
        else tuple(int(s) for s in normalized_shape)
    k = len(shape)
    if k == 0 or tuple(input.shape[input.ndim - k:]) != shape or input.ndim < k:
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape "
                           f"[*, {', '.join(map(str, shape))}], but got input of size"
                           f"{list(input.shape)}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != shape:
            raise RuntimeError(f"Expected {name} to be of same shape as normalized_shape, "
                               f"but got {name} of shape {list(t.shape)} and "
                               f"normalized_shape = {list(shape)}")
    return _opdef.CALL("layer_norm", (input, weight, bias),
                       {"normalized_ndim": k, "eps": float(eps)})


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """Divide ``input`` by its root mean square over its last ``len(normalized_shape)``
    dims (``x / sqrt(mean(x**2) + eps)``), then scale by ``weight`` (elementwise).

    ``eps`` defaults to the machine epsilon of the dtype it is computed in, as PyTorch's
    does: float64's for float64 input, float32's otherwise (float16 and bfloat16 are
    computed in float32).

    Examples
    --------
    >>> import torcia
    >>> torcia.rms_norm(torcia.tensor([[3.0, 4.0]]), (2,), eps=0.0) ** 2
    tensor([[0.7200, 1.2800]])
    """
    check_tensor(input, "input", "rms_norm")
    shape = (int(normalized_shape),) if isinstance(normalized_shape, numbers.Integral) \
        else tuple(int(s) for s in normalized_shape)
    k = len(shape)
    if k == 0 or input.ndim < k or tuple(input.shape[input.ndim - k:]) != shape:
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape "
                           f"[*, {', '.join(map(str, shape))}], but got input of size"
                           f"{list(input.shape)}")
    if weight is not None and tuple(weight.shape) != shape:
        raise RuntimeError(f"Expected weight to be of same shape as normalized_shape, but got "
                           f"weight of shape {list(weight.shape)} and normalized_shape = "
                           f"{list(shape)}")
    if input.is_complex():
        # PyTorch's composite formula, which squares x (not |x|), in the input's precision
        eps = float(np.finfo(input.dtype.np).eps) if eps is None else float(eps)
        dims = tuple(range(input.ndim - k, input.ndim))
        out = input * (input.pow(2).mean(dims, keepdim=True) + eps).rsqrt()
        return out if weight is None else out * weight
    if not input.is_floating_point():
        raise RuntimeError(f"rms_norm: expected a floating-point input, got {input.dtype}")
    if eps is None:
        # the epsilon of the dtype PyTorch computes in: float32's for float16 and bfloat16
        eps = float(np.finfo(np.float64 if input.dtype is D.float64 else np.float32).eps)
    return _opdef.CALL("rms_norm", (input, weight), {"normalized_ndim": k, "eps": float(eps)})


def _torch_layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05,
                      cudnn_enable=True):
    """``torch.layer_norm``: :func:`layer_norm` with the unused ``cudnn_enable``.

    Examples
    --------
    >>> import torcia
    >>> torcia.layer_norm(torcia.tensor([[1.0, 3.0]]), (2,))
    tensor([[-1.0000,  1.0000]])
    """
    return layer_norm(input, normalized_shape, weight, bias, eps)


@autocast_as("group_norm")
def group_norm(input, num_groups, weight=None, bias=None, eps=1e-05):
    """Normalise each of ``num_groups`` groups of channels of ``input`` ``(N, C, *)`` over
    its channels and positions, then scale and shift per channel.

    Examples
    --------
    >>> import torcia
    >>> torcia.group_norm(torcia.tensor([[1.0, 3.0]]), 1, eps=0.0)
    tensor([[-1.,  1.]])
    """
    check_tensor(input, "input", "group_norm")
    _no_complex(input, "GroupNormKernelImpl")
    if input.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received "
                           f"{input.ndim}")
    n, c = input.shape[:2]
    if c % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by "
                           f"num_groups, but got input of shape {list(input.shape)} and "
                           f"num_groups={num_groups}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and (t.ndim != 1 or t.shape[0] != c):
            raise RuntimeError(f"Expected {name} to be a vector of size equal to the number "
                               f"of channels in input, but got {name} of shape "
                               f"{list(t.shape)} and input of shape {list(input.shape)}")
    if input.dtype in HALF:
        # in float32, rounded once, as PyTorch's kernel (29% of results were a step off)
        return group_norm(input.float(), num_groups, *map(widened, (weight, bias)),
                          eps).to(input.dtype)
    grouped = input.reshape(n, num_groups, -1)
    out = _opdef.CALL("layer_norm", (grouped, None, None),
                      {"normalized_ndim": 1, "eps": float(eps)})
    out = out.reshape(input.shape)
    shape = (1, c) + (1,) * (input.ndim - 2)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


def _torch_group_norm(input, num_groups, weight=None, bias=None, eps=1e-05,
                      cudnn_enabled=True):
    """``torch.group_norm``: :func:`group_norm` with the unused ``cudnn_enabled``.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1.0, 3.0, 5.0, 7.0]]).reshape(1, 4, 1)
    >>> torcia.group_norm(x, 2).flatten()
    tensor([-1.0000,  1.0000, -1.0000,  1.0000])
    """
    return group_norm(input, num_groups, weight, bias, eps)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-05):
    """Normalise each channel of each sample of ``input`` ``(N, C, *)`` over its positions;
    with running statistics, they are updated from the per-instance means and variances
    averaged over the batch, and used when ``use_input_stats`` is False.

    Examples
    --------
    >>> import torcia
    >>> from torcia._ops.nn_norm import instance_norm
    >>> instance_norm(torcia.tensor([[[1.0, 3.0]]]), eps=0.0)
    tensor([[[-1.,  1.]]])
    """
    check_tensor(input, "input", "instance_norm")
    if input.ndim < 3:
        raise ValueError(f"expected 3D or higher input (got {input.ndim}D input)")
    n, c = input.shape[:2]
    # an instance is a channel of a batch of one: batch_norm over (1, N*C, *)
    rm = running_mean.repeat(n) if running_mean is not None else None
    rv = running_var.repeat(n) if running_var is not None else None
    w = weight.repeat(n) if weight is not None else None
    b = bias.repeat(n) if bias is not None else None
    flat = input.reshape((1, n * c) + tuple(input.shape[2:]))
    out = batch_norm(flat, rm, rv, w, b, use_input_stats, momentum, eps)
    if use_input_stats:
        with no_grad():
            if running_mean is not None:
                running_mean.copy_(rm.reshape(n, c).mean(0))
            if running_var is not None:
                running_var.copy_(rv.reshape(n, c).mean(0))
    return out.reshape(input.shape)


def _reduce_dims(x):
    return [d for d in range(x.ndim) if d != 1]


def _per_channel(v, x):
    return v.reshape(1, -1, *([1] * (x.ndim - 2)))


def _check_param_dtypes(input, *params):
    """PyTorch's CPU rule for batch_norm's parameters (weight, bias, running_mean,
    running_var): all of the input's dtype, or, for a half-precision input, all float32
    (its mixed-precision kernel); the first one given decides which is meant."""
    params = [p for p in params if p is not None]
    if not params:
        return
    if params[0].dtype is not input.dtype:
        if any(p.dtype is not D.float32 for p in params):
            raise RuntimeError("mixed dtype (CPU): expect parameter to have scalar type of "
                               "Float")
        if input.dtype not in (D.float16, D.bfloat16):
            raise RuntimeError("mixed dtype (CPU): all inputs must share same datatype.")
        return
    for p in params:
        if p.dtype is not input.dtype:
            raise RuntimeError(f"expected scalar type {D.torch_type_name(input.dtype)} but "
                               f"found {D.torch_type_name(p.dtype)}")


def batch_norm_stats(input, eps):
    """Per-channel mean and inverse standard deviation ``1 / sqrt(var + eps)`` (biased
    variance) of an ``N x C x ...`` input: the local step of SyncBatchNorm.

    Examples
    --------
    >>> import torcia
    >>> torcia.batch_norm_stats(torcia.tensor([[1.0], [3.0]]), 0.0)
    (tensor([2.]), tensor([1.]))
    """
    dims = _reduce_dims(input)
    mean = input.mean(dims)
    var = input.var(dims, correction=0)
    return mean, (var + eps).rsqrt()


def batch_norm_elemt(input, weight, bias, mean, invstd, eps):
    """``(input - mean) * invstd * weight + bias`` per channel (dimension 1).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1.0, 4.0], [3.0, 8.0]])
    >>> mean, invstd = torcia.tensor([2.0, 6.0]), torcia.tensor([1.0, 0.5])
    >>> torcia.batch_norm_elemt(x, torcia.ones(2), torcia.zeros(2), mean, invstd, 1e-5)
    tensor([[-1., -1.],
            [ 1.,  1.]])
    """
    out = (input - _per_channel(mean, input)) * _per_channel(invstd, input)
    if weight is not None:
        out = out * _per_channel(weight, input)
    if bias is not None:
        out = out + _per_channel(bias, input)
    return out


def batch_norm_gather_stats_with_counts(input, mean, invstd, running_mean, running_var,
                                        momentum, eps, counts):
    """Combine per-process statistics (rows of ``mean`` and ``invstd``, each from
    ``counts`` elements) into global ones, updating the running statistics in place
    (unbiased variance, as batch norm); returns ``(mean, invstd)``.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1.0, 4.0], [3.0, 8.0]])
    >>> mean, invstd = torcia.batch_norm_stats(x, 1e-5)
    >>> torcia.batch_norm_gather_stats_with_counts(x, mean.unsqueeze(0), invstd.unsqueeze(0),
    ...                                            None, None, 0.1, 1e-5, torcia.tensor([2.0]))
    (tensor([2., 6.]), tensor([1.0000, 0.5000]))
    """
    counts = counts.to(mean.dtype).reshape(-1, 1)
    n = counts.sum()
    g_mean = (mean * counts).sum(0) / n
    var_each = invstd.pow(-2) - eps
    var = ((var_each + (mean - g_mean) ** 2) * counts).sum(0) / n
    if running_mean is not None:
        with no_grad():
            running_mean.mul_(1 - momentum).add_(g_mean.to(running_mean.dtype) * momentum)
    if running_var is not None:
        with no_grad():
            unbiased = var * (n / (n - 1))
            running_var.mul_(1 - momentum).add_(unbiased.to(running_var.dtype) * momentum)
    return g_mean, (var + eps).rsqrt()


def batch_norm_gather_stats(input, mean, invstd, running_mean, running_var, momentum, eps,
                            count):
    """:func:`batch_norm_gather_stats_with_counts` with every process counting ``count``
    elements.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1.0, 4.0], [3.0, 8.0]])
    >>> mean, invstd = torcia.batch_norm_stats(x, 1e-5)
    >>> torcia.batch_norm_gather_stats(x, mean.unsqueeze(0), invstd.unsqueeze(0), None, None, 0.1,
    ...                                1e-5, 2)
    (tensor([2., 6.]), tensor([1.0000, 0.5000]))
    """
    counts = _opdef.PUBLIC.full((mean.shape[0],), float(count), dtype=mean.dtype,
                                device=mean.device)
    return batch_norm_gather_stats_with_counts(input, mean, invstd, running_mean,
                                               running_var, momentum, eps, counts)


def batch_norm_update_stats(input, running_mean, running_var, momentum):
    """Per-channel mean and biased variance of ``input``; the running statistics move
    toward them by ``momentum`` (the variance unbiased), in place.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1.0, 4.0], [3.0, 8.0]])
    >>> running_mean, running_var = torcia.zeros(2), torcia.ones(2)
    >>> torcia.batch_norm_update_stats(x, running_mean, running_var, 0.5)
    (tensor([2., 6.]), tensor([1., 4.]))
    >>> running_mean, running_var
    (tensor([1., 3.]), tensor([1.5000, 4.5000]))
    """
    dims = _reduce_dims(input)
    mean = input.mean(dims)
    var = input.var(dims, correction=0)
    n = input.numel() // input.shape[1]
    with no_grad():
        if running_mean is not None:
            running_mean.mul_(1 - momentum).add_(mean * momentum)
        if running_var is not None:
            running_var.mul_(1 - momentum).add_(var * (n / max(n - 1, 1)) * momentum)
    return mean, var


def batch_norm_backward_reduce(grad_out, input, mean, invstd, weight, input_g, weight_g,
                               bias_g):
    """The per-channel sums SyncBatchNorm's backward all-reduces: ``(sum_dy, sum_dy_xmu,
    grad_weight, grad_bias)``; the gradients asked for by ``weight_g``/``bias_g`` (None
    otherwise) and the sums only when ``input_g``."""
    dims = _reduce_dims(input)
    sum_dy = grad_out.sum(dims)
    sum_dy_xmu = (grad_out * (input - _per_channel(mean, input))).sum(dims)
    grad_weight = sum_dy_xmu * invstd if weight_g else None
    grad_bias = sum_dy if bias_g else None
    if not input_g:
        sum_dy = sum_dy_xmu = None
    return sum_dy, sum_dy_xmu, grad_weight, grad_bias


def batch_norm_backward_elemt(grad_out, input, mean, invstd, weight, sum_dy, sum_dy_xmu,
                              count):
    """The input gradient of batch norm from the all-reduced sums (``count``: elements
    per process, summed to the global count)."""
    # a 0-dim tensor rather than a Python number, so that meta tensors and vmap run it
    n = count.sum() if isinstance(count, _opdef.PUBLIC.Tensor) else float(count)
    mean_dy = _per_channel(sum_dy / n, input)
    mean_dy_xmu = _per_channel(sum_dy_xmu / n, input)
    inv = _per_channel(invstd, input)
    xmu = input - _per_channel(mean, input)
    out = (grad_out - mean_dy - xmu * inv * inv * mean_dy_xmu) * inv
    return out if weight is None else out * _per_channel(weight, input)


#: PyTorch's top-level names here whose signatures differ from ``torch.nn.functional``'s
TOP_LEVEL = {"batch_norm": _torch_batch_norm, "layer_norm": _torch_layer_norm,
             "group_norm": _torch_group_norm}

#: the functions here that are also Tensor methods, under the same name
METHODS = (
    "softmax", "log_softmax",
)

#: the functional forms here that ``torcia.nn.functional`` re-exports (through
#: :data:`torcia.library.functional`)
FUNCTIONAL = ("batch_norm", "group_norm", "instance_norm", "layer_norm", "log_softmax",
              "rms_norm", "softmax", "softmin")

#: the names ``torcia`` exports from here
__all__ = [
    "batch_norm_backward_elemt", "batch_norm_backward_reduce", "batch_norm_elemt",
    "batch_norm_gather_stats", "batch_norm_gather_stats_with_counts", "batch_norm_stats",
    "batch_norm_update_stats", "instance_norm", "log_softmax", "rms_norm", "softmax",
]
