"""``Identity``, ``Linear`` and ``Bilinear``."""

from __future__ import annotations

import math

from torcia.nn import functional as F
from torcia.nn import init
from torcia.nn.modules._utils import add_weight_and_bias, reset_weight_and_bias, shape_of
from torcia.nn.modules.module import Module

__all__ = ["Bilinear", "Identity", "Linear"]


class Identity(Module):
    """Returns its input; takes and ignores any constructor arguments.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.Identity(54, unused="argument")(torcia.ones(2)).tolist()
    [1.0, 1.0]
    """

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """``y = x @ weight.T + bias`` over the last dimension.

    ``weight`` has shape ``(out_features, in_features)`` and ``bias`` ``(out_features,)``,
    both initialised uniform on ``±1/sqrt(in_features)`` (``kaiming_uniform_`` with
    ``a=sqrt(5)`` for the weight), as in PyTorch.

    Parameters
    ----------
    in_features, out_features : int
        Sizes of each input and output sample.
    bias : bool
        Whether to add a learnable bias. Default: True.

    Examples
    --------
    >>> import torcia
    >>> fc = torcia.nn.Linear(3, 5)
    >>> fc
    Linear(in_features=3, out_features=5, bias=True)
    >>> fc(torcia.randn(4, 3)).shape
    torcia.Size([4, 5])
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None,
                 dtype=None):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        add_weight_and_bias(self, (out_features, in_features), out_features, bias, device,
                            dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        reset_weight_and_bias(self.weight, self.bias)

    def forward(self, input):
        shape = shape_of(input, "linear")
        if not shape or shape[-1] != self.in_features:
            raise RuntimeError(
                f"Linear(in_features={self.in_features}, out_features={self.out_features}): "
                f"expected input with last dimension {self.in_features}, got shape "
                f"{list(shape)}"
            )
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")



class NonDynamicallyQuantizableLinear(Linear):
    """A :class:`Linear` under the name PyTorch gives ``MultiheadAttention.out_proj``.

    PyTorch keeps it apart so its quantization passes skip that layer; torcia has no
    quantization, so it is a plain Linear that code importing the name (and checkpoints
    naming the class) can use.

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn.modules.linear import NonDynamicallyQuantizableLinear
    >>> NonDynamicallyQuantizableLinear(4, 2)(torcia.ones(3, 4)).shape
    torcia.Size([3, 2])
    """


class Bilinear(Module):
    """``y = x1 @ weight @ x2 + bias`` for each output feature.

    ``weight`` has shape ``(out_features, in1_features, in2_features)``; weight and bias are
    initialised uniform on ``±1/sqrt(in1_features)``.

    Examples
    --------
    >>> import torcia
    >>> m = torcia.nn.Bilinear(2, 3, 4)
    >>> m(torcia.ones(5, 2), torcia.ones(5, 3)).shape
    torcia.Size([5, 4])
    """

    def __init__(self, in1_features: int, in2_features: int, out_features: int,
                 bias: bool = True, device=None, dtype=None):
        super().__init__()
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        add_weight_and_bias(self, (out_features, in1_features, in2_features), out_features,
                            bias, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1 / math.sqrt(self.weight.size(1))
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        for name, x, n in (("input1", input1, self.in1_features),
                           ("input2", input2, self.in2_features)):
            if not x.shape or x.shape[-1] != n:
                raise RuntimeError(
                    f"{self!r}: expected {name} with last dimension {n}, got shape "
                    f"{list(x.shape)}"
                )
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
