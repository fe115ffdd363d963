"""Folding an eval-mode batch norm into the convolution or linear layer before it."""

from __future__ import annotations

import copy

import torcia
from torcia.nn.parameter import Parameter


def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b,
                         transpose: bool = False):
    """The weight and bias of a convolution equal to ``conv`` followed by an eval-mode
    batch norm with these statistics and affine parameters (None: identity).

    Examples
    --------
    >>> import torcia
    >>> w, b = torcia.nn.utils.fuse_conv_bn_weights(torcia.ones(2, 1, 1, 1), None,
    ...     torcia.zeros(2), torcia.ones(2), 0.0, None, None)
    >>> w.flatten().tolist(), b.tolist()
    ([1.0, 1.0], [0.0, 0.0])
    """
    dtype = conv_w.dtype
    if conv_b is None:
        conv_b = torcia.zeros_like(bn_rm)
    if bn_w is None:
        bn_w = torcia.ones_like(bn_rm)
    if bn_b is None:
        bn_b = torcia.zeros_like(bn_rm)
    scale = bn_w * (bn_rv + bn_eps).rsqrt()
    shape = [1, -1] + [1] * (conv_w.dim() - 2) if transpose else \
        [-1, 1] + [1] * (conv_w.dim() - 2)
    fused_w = (conv_w * scale.reshape(shape)).to(dtype)
    fused_b = ((conv_b - bn_rm) * scale + bn_b).to(dtype)
    return (Parameter(fused_w.detach(), conv_w.requires_grad),
            Parameter(fused_b.detach(), conv_b.requires_grad))


def fuse_conv_bn_eval(conv, bn, transpose: bool = False):
    """A copy of eval-mode ``conv`` with eval-mode ``bn`` folded in.

    Examples
    --------
    >>> import torcia
    >>> conv, bn = torcia.nn.Conv2d(1, 2, 3).eval(), torcia.nn.BatchNorm2d(2).eval()
    >>> fused = torcia.nn.utils.fuse_conv_bn_eval(conv, bn)
    >>> x = torcia.randn(1, 1, 5, 5)
    >>> bool(torcia.allclose(fused(x), bn(conv(x)), atol=1e-6))
    True
    """
    if conv.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    fused = copy.deepcopy(conv)
    fused.weight, fused.bias = fuse_conv_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight,
        bn.bias, transpose)
    return fused


def fuse_linear_bn_weights(linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    """The weight and bias of a linear layer followed by an eval-mode batch norm."""
    if linear_b is None:
        linear_b = torcia.zeros_like(bn_rm)
    scale = bn_w * (bn_rv + bn_eps).rsqrt()
    fused_w = linear_w * scale.unsqueeze(-1)
    fused_b = (linear_b - bn_rm) * scale + bn_b
    return (Parameter(fused_w.detach(), linear_w.requires_grad),
            Parameter(fused_b.detach(), linear_b.requires_grad))


def fuse_linear_bn_eval(linear, bn):
    """A copy of eval-mode ``linear`` with eval-mode ``bn`` (over its outputs) folded in.

    Examples
    --------
    >>> import torcia
    >>> lin, bn = torcia.nn.Linear(3, 2).eval(), torcia.nn.BatchNorm1d(2).eval()
    >>> x = torcia.randn(4, 3)
    >>> bool(torcia.allclose(torcia.nn.utils.fuse_linear_bn_eval(lin, bn)(x), bn(lin(x))))
    True
    """
    if linear.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    if linear.out_features != bn.num_features:
        raise AssertionError("To fuse, linear.out_features must equal bn.num_features")
    fused = copy.deepcopy(linear)
    fused.weight, fused.bias = fuse_linear_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight,
        bn.bias)
    return fused
