"""Folding a batch norm (in eval mode) into the convolution or linear layer before it."""

from __future__ import annotations

import copy

import torcia
from torcia.nn.parameter import Parameter

__all__ = ["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval",
           "fuse_linear_bn_weights"]


def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, transpose=False):
    """The weight and bias of one convolution equal to ``conv`` followed by an eval-mode
    batch norm with running mean ``bn_rm``, variance ``bn_rv`` and affine ``bn_w``/``bn_b``
    (ones and zeros when ``None``).

    Returns
    -------
    tuple of Parameter
        ``(fused_weight, fused_bias)``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn.utils.fusion import fuse_conv_bn_weights
    >>> w, b = fuse_conv_bn_weights(torcia.ones(2, 1, 1, 1), None, torcia.zeros(2),
    ...                             torcia.full((2,), 4.0), 0.0, None, None)
    >>> w.flatten().tolist(), b.tolist()
    ([0.5, 0.5], [0.0, 0.0])
    """
    dtype = conv_w.dtype
    if conv_b is None:
        conv_b = torcia.zeros_like(bn_rm)
    if bn_w is None:
        bn_w = torcia.ones_like(bn_rm)
    if bn_b is None:
        bn_b = torcia.zeros_like(bn_rm)
    with torcia.no_grad():
        scale = bn_w * torcia.rsqrt(bn_rv + bn_eps)
        shape = [1, -1] + [1] * (conv_w.ndim - 2) if transpose else \
            [-1] + [1] * (conv_w.ndim - 1)
        weight = (conv_w * scale.reshape(shape)).to(dtype)
        bias = ((conv_b - bn_rm) * scale + bn_b).to(dtype)
    return (Parameter(weight, conv_w.requires_grad), Parameter(bias, conv_b.requires_grad))


def fuse_conv_bn_eval(conv, bn, transpose: bool = False):
    """A copy of ``conv`` that also does what the eval-mode ``bn`` after it does.

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn.utils.fusion import fuse_conv_bn_eval
    >>> conv, bn = torcia.nn.Conv2d(3, 4, 3).eval(), torcia.nn.BatchNorm2d(4).eval()
    >>> x = torcia.randn(1, 3, 5, 5)
    >>> torcia.allclose(fuse_conv_bn_eval(conv, bn)(x), bn(conv(x)), atol=1e-6)
    True
    """
    if conv.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    fused = copy.deepcopy(conv)
    if bn.running_mean is None or bn.running_var is None:
        raise AssertionError("batch norm needs running statistics to be fused")
    fused.weight, fused.bias = fuse_conv_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias,
        transpose)
    return fused


def fuse_linear_bn_weights(linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    """The weight and bias of one linear layer equal to ``linear`` followed by an eval-mode
    batch norm.

    Returns
    -------
    tuple of Parameter
        ``(fused_weight, fused_bias)``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn.utils.fusion import fuse_linear_bn_weights
    >>> w, b = fuse_linear_bn_weights(torcia.eye(2), torcia.ones(2), torcia.zeros(2),
    ...                               torcia.ones(2), 0.0, torcia.full((2,), 2.0), torcia.zeros(2))
    >>> w.tolist(), b.tolist()
    ([[2.0, 0.0], [0.0, 2.0]], [2.0, 2.0])
    """
    if linear_b is None:
        linear_b = torcia.zeros_like(bn_rm)
    with torcia.no_grad():
        scale = bn_w * torcia.rsqrt(bn_rv + bn_eps)
        weight = linear_w * scale.unsqueeze(-1)
        bias = (linear_b - bn_rm) * scale + bn_b
    return (Parameter(weight, linear_w.requires_grad), Parameter(bias, linear_b.requires_grad))


def fuse_linear_bn_eval(linear, bn):
    """A copy of ``linear`` that also does what the eval-mode ``bn`` after it does.

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn.utils.fusion import fuse_linear_bn_eval
    >>> lin, bn = torcia.nn.Linear(3, 4).eval(), torcia.nn.BatchNorm1d(4).eval()
    >>> x = torcia.randn(2, 3)
    >>> torcia.allclose(fuse_linear_bn_eval(lin, bn)(x), bn(lin(x)), atol=1e-6)
    True
    """
    if linear.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    if linear.out_features != bn.num_features and bn.num_features != 1:
        raise AssertionError("To fuse, linear.out_features must equal bn.num_features or "
                             "bn.num_features must equal 1")
    if bn.running_mean is None or bn.running_var is None:
        raise AssertionError("batch norm needs running statistics to be fused")
    fused = copy.deepcopy(linear)
    fused.weight, fused.bias = fuse_linear_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias)
    return fused
