"""Argument helpers shared by the layers."""

from __future__ import annotations

import math

from torcia import Tensor, empty
from torcia.nn import init
from torcia.nn.parameter import Parameter


def _ntuple(n: int, name: str):
    def parse(x):
        if isinstance(x, (tuple, list)):
            return tuple(x)
        return (x,) * n

    parse.__name__ = name
    return parse


_single = _ntuple(1, "_single")
_pair = _ntuple(2, "_pair")
_triple = _ntuple(3, "_triple")


def _reverse_repeat_tuple(t, n: int) -> tuple:
    """``(a, b)`` -> ``(b, b, a, a)`` for n=2: the last dimension first, as ``F.pad`` takes
    paddings."""
    return tuple(x for x in reversed(t) for _ in range(n))


def shape_of(input, function: str):
    """``input.shape``, or PyTorch's TypeError when ``input`` is not a tensor."""
    try:
        return input.shape
    except AttributeError:
        raise TypeError(f"{function}(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}") from None


def shape_error(module, expected: str, input: Tensor) -> RuntimeError:
    """The error for a bad input shape: names the layer, what it expects and what it got."""
    return RuntimeError(f"{module!r}: expected {expected}, got shape {list(input.shape)}")



def reset_weight_and_bias(weight: Tensor, bias: Tensor | None) -> None:
    """PyTorch's default for Linear and convolutions: ``kaiming_uniform_(a=sqrt(5))`` for
    the weight, which is U(±1/sqrt(fan_in)), and the same bound for the bias."""
    init.kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in, _ = init._calculate_fan_in_and_fan_out(weight)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        init.uniform_(bias, -bound, bound)


def add_weight_and_bias(module, weight_shape: tuple, bias_size: int, bias: bool, device,
                        dtype) -> None:
    """Register an uninitialised ``weight`` of ``weight_shape`` and ``bias`` of
    ``(bias_size,)``, or ``bias = None`` when it is turned off."""
    module.weight = Parameter(empty(weight_shape, device=device, dtype=dtype))
    if bias:
        module.bias = Parameter(empty(bias_size, device=device, dtype=dtype))
    else:
        module.register_parameter("bias", None)
