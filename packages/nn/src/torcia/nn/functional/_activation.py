"""Activations defined here (the others are core ops re-exported by
:mod:`torcia.nn.functional`): ``relu``, ``threshold``, ``glu``, ``rrelu``, the in-place
forms, ``gumbel_softmax``."""

from __future__ import annotations

import torcia
from torcia.autograd import Function
from torcia.library import Tensor, inplace
from torcia.library.functional import celu, elu, hardtanh, leaky_relu, selu, softmax


def relu(input, inplace=False):
    """``max(input, 0)``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.relu(torcia.tensor([-1.0, 2.0]))
    tensor([0., 2.])
    """
    return input.relu_() if inplace else torcia.relu(input)


def relu_(input):
    """In-place :func:`relu`.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.tensor([-1.0, 0.5, 2.0])
    >>> F.relu_(x)
    tensor([0.0000, 0.5000, 2.0000])
    >>> x
    tensor([0.0000, 0.5000, 2.0000])
    """
    return input.relu_()


def sigmoid(input):
    """``1 / (1 + exp(-input))``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.sigmoid(torcia.tensor([0.0, 2.0]))
    tensor([0.5000, 0.8808])
    """
    return torcia.sigmoid(input)


def tanh(input):
    """Hyperbolic tangent.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.tanh(torcia.tensor([0.0, 1.0]))
    tensor([0.0000, 0.7616])
    """
    return torcia.tanh(input)


def threshold(input, threshold, value, inplace=False):
    """``input`` where greater than ``threshold``, else ``value``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.threshold(torcia.tensor([0.1, 0.5, 2.0]), 0.3, -1.0)
    tensor([-1.0000,  0.5000,  2.0000])
    """
    # "input <= threshold" replaced, so NaN (never <=) passes as PyTorch's
    out = torcia.where(input <= threshold, torcia.full_like(input, value), input)
    return _maybe_inplace(input, out, inplace)


def hardshrink(input, lambd=0.5):
    """``input`` where ``|input| > lambd``, else 0.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.hardshrink(torcia.tensor([-1.0, 0.2, 0.7]))
    tensor([-1.0000,  0.0000,  0.7000])
    """
    # a +0 inside [-lambd, lambd] (a product with the mask gave -0 for negatives), as PyTorch
    return torcia.where(input.abs() <= lambd, torcia.zeros_like(input), input)


def softshrink(input, lambd=0.5):
    """``input`` moved ``lambd`` towards 0, and 0 within ``[-lambd, lambd]``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.softshrink(torcia.tensor([-1.0, 0.2, 0.75]))
    tensor([-0.5000,  0.0000,  0.2500])
    """
    name = _type_name(input)
    if not input.is_floating_point():
        raise NotImplementedError(f"\"softshrink_check\" not implemented for '{name}'")
    top = torcia.finfo(input.dtype).max
    if not 0 <= lambd <= top:
        raise RuntimeError(f"lambda must be in range [0, {top:g}] for input dtype {name}, "
                           f"but found {lambd:g}")
    # NaN is no nearer 0 than lambd, so it passes through: input - lambd * sign(nan) is NaN
    return torcia.where(input.abs() <= lambd, torcia.zeros_like(input),
                        input - lambd * input.sign())


def _type_name(t) -> str:
    """PyTorch's name of ``t``'s scalar type in its kernels' errors: 'Float', 'Half'..."""
    return t.type().rsplit(".", 1)[1].removesuffix("Tensor")


def glu(input, dim=-1):
    """Gated linear unit: the first half of ``dim`` times the sigmoid of the second.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.glu(torcia.tensor([[1.0, 2.0, 0.0, 0.0]]))
    tensor([[0.5000, 1.0000]])
    """
    n = input.shape[dim]
    if n % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {dim} is size {n}")
    a, b = input.split(n // 2, dim)
    if input.dtype in (torcia.float16, torcia.bfloat16):
        return _HalfGlu.apply(a, b)
    return a * b.sigmoid()


class _HalfGlu(Function):
    """glu of float16/bfloat16 halves as PyTorch's kernels round it (composed of half
    ops, a quarter of the results and a third of the gradients were a step off): the
    forward in float32, rounded once; the backward from the sigmoid rounded to the dtype,
    ``s * g`` for the first half and ``(1 - s) s a g`` in float32 for the second, each
    rounded once."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        ctx.save_for_forward(a, b)
        return (a.float() * b.float().sigmoid()).to(a.dtype)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        s = b.sigmoid().float()
        g = grad.float()
        return (s * g).to(grad.dtype), ((1 - s) * s * a.float() * g).to(grad.dtype)

    @staticmethod
    def jvp(ctx, t_a, t_b):
        # PyTorch has no forward-mode glu for half floats either
        raise NotImplementedError(
            f"\"glu_jvp_cpu\" not implemented for '{_type_name(ctx.saved_tensors[0])}'")


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Randomized leaky ReLU: the negative slope is drawn from U(lower, upper) per
    element in training, and is ``(lower + upper) / 2`` in evaluation.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.rrelu(torcia.tensor([-3.0, 1.0]), lower=0.25, upper=0.25)
    tensor([-0.7500,  1.0000])
    """
    if not training:
        return leaky_relu(input, (lower + upper) / 2, inplace)
    with torcia.no_grad():
        slope = torcia.empty_like(input).uniform_(lower, upper) if hasattr(
            Tensor, "uniform_") else torcia.rand_like(input) * (upper - lower) + lower
    out = torcia.where(input >= 0, input, input * slope)
    return _maybe_inplace(input, out, inplace)


def elu_(input, alpha=1.0):
    """In-place :func:`elu`.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.tensor([-1.0, 2.0])
    >>> F.elu_(x) is x
    True
    >>> x
    tensor([-0.6321,  2.0000])
    """
    return elu(input, alpha, inplace=True)


def celu_(input, alpha=1.0):
    """In-place :func:`celu`.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.tensor([-1.0, 2.0])
    >>> F.celu_(x, alpha=2.0)
    tensor([-0.7869,  2.0000])
    """
    return celu(input, alpha, inplace=True)


def selu_(input):
    """In-place :func:`selu`.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.tensor([-1.0, 1.0])
    >>> F.selu_(x)
    tensor([-1.1113,  1.0507])
    """
    return selu(input, inplace=True)


def leaky_relu_(input, negative_slope=0.01):
    """In-place :func:`leaky_relu`.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.tensor([-2.0, 3.0])
    >>> F.leaky_relu_(x, negative_slope=0.5)
    tensor([-1.,  3.])
    """
    return leaky_relu(input, negative_slope, inplace=True)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    """In-place :func:`hardtanh`.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.tensor([-3.0, 0.5, 3.0])
    >>> F.hardtanh_(x)
    tensor([-1.0000,  0.5000,  1.0000])
    """
    return hardtanh(input, min_val, max_val, inplace=True)


def threshold_(input, threshold_, value):
    """In-place :func:`threshold`.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.tensor([0.1, 2.0])
    >>> F.threshold_(x, 1.0, 0.0)
    tensor([0., 2.])
    """
    return threshold(input, threshold_, value, inplace=True)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    """In-place :func:`rrelu`.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> x = torcia.tensor([-4.0, 1.0])
    >>> F.rrelu_(x, lower=0.5, upper=0.5)
    tensor([-2.,  1.])
    """
    return rrelu(input, lower, upper, training, inplace=True)


def gumbel_softmax(logits, tau=1, hard=False, eps=1e-10, dim=-1):
    """A sample of the Gumbel-softmax (relaxed categorical) distribution over ``dim``:
    ``softmax((logits + g) / tau)`` with standard Gumbel noise ``g``; ``hard`` returns
    one-hot vectors whose gradient is the soft sample's (straight-through).

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.gumbel_softmax(torcia.zeros(2, 3), hard=True).sum(-1)
    tensor([1., 1.])
    """
    with torcia.no_grad():
        u = torcia.rand(logits.shape, dtype=logits.dtype, device=logits.device)
        gumbels = -(-(u.clamp(min=eps)).log()).log()
    soft = softmax((logits + gumbels) / tau, dim)
    if not hard:
        return soft
    index = soft.argmax(dim, keepdim=True)
    one = torcia.zeros_like(soft).scatter(dim, index, 1.0)
    return one - soft.detach() + soft


def _maybe_inplace(input, out, inplace_):
    return inplace(lambda t: out, input) if inplace_ else out
