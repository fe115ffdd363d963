"""Activation modules; each calls its ``torcia.nn.functional`` counterpart."""

from __future__ import annotations

import warnings

from torcia import empty
from torcia.nn import functional as F
from torcia.nn import init
from torcia.nn.modules.module import Module
from torcia.nn.parameter import Parameter

__all__ = ["CELU", "ELU", "GELU", "GLU", "Hardshrink", "Hardsigmoid", "Hardswish", "Hardtanh",
           "LeakyReLU", "LogSigmoid", "LogSoftmax", "Mish", "PReLU", "ReLU", "ReLU6", "SELU",
           "SiLU", "Sigmoid", "Softmax", "Softmin", "Softplus", "Softshrink", "Softsign",
           "Tanh", "Tanhshrink", "Threshold"]


class _Inplace(Module):
    """An activation whose only option is ``inplace``."""

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class ReLU(_Inplace):
    """``max(0, x)`` elementwise.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.ReLU()(torcia.tensor([-1.0, 2.0]))
    tensor([0., 2.])
    """

    def forward(self, input):
        return F.relu(input, inplace=self.inplace)


class SELU(_Inplace):
    """``scale * (max(0, x) + min(0, alpha * (exp(x) - 1)))`` with the self-normalising
    constants alpha ≈ 1.6733, scale ≈ 1.0507.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.SELU()(torcia.tensor([0.0, 1.0]))
    tensor([0.0000, 1.0507])
    """

    def forward(self, input):
        return F.selu(input, self.inplace)


class SiLU(_Inplace):
    """``x * sigmoid(x)`` (swish).

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.SiLU()(torcia.tensor([0.0]))
    tensor([0.])
    """

    def forward(self, input):
        return F.silu(input, inplace=self.inplace)


class Mish(_Inplace):
    """``x * tanh(softplus(x))``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.Mish()(torcia.tensor([0.0]))
    tensor([0.])
    """

    def forward(self, input):
        return F.mish(input, inplace=self.inplace)


class Hardswish(Module):
    """``x * relu6(x + 3) / 6``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.Hardswish()(torcia.tensor([-4.0, 0.0, 4.0]))
    tensor([-0., 0., 4.])
    """

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.hardswish(input, self.inplace)


class Hardtanh(Module):
    """Clamp to ``[min_val, max_val]``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.Hardtanh()(torcia.tensor([-2.0, 0.5, 2.0]))
    tensor([-1.0000,  0.5000,  1.0000])
    """

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):
        super().__init__()
        if max_val <= min_val:
            raise ValueError(f"max_val ({max_val}) must be greater than min_val ({min_val})")
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self) -> str:
        inplace = ", inplace=True" if self.inplace else ""
        return f"min_val={self.min_val}, max_val={self.max_val}{inplace}"


class ReLU6(Hardtanh):
    """``min(max(0, x), 6)``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.ReLU6()(torcia.tensor([-1.0, 3.0, 9.0]))
    tensor([0., 3., 6.])
    """

    def __init__(self, inplace: bool = False):
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class LeakyReLU(Module):
    """``x`` for positive ``x``, ``negative_slope * x`` otherwise.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.LeakyReLU(0.1)(torcia.tensor([-10.0, 1.0]))
    tensor([-1.,  1.])
    """

    def __init__(self, negative_slope: float = 1e-2, inplace: bool = False):
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        inplace = ", inplace=True" if self.inplace else ""
        return f"negative_slope={self.negative_slope}{inplace}"


class PReLU(Module):
    """Leaky ReLU with a learnt slope: one (``num_parameters=1``) or one per channel,
    starting at ``init``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.PReLU()(torcia.tensor([-4.0, 1.0])).tolist()
    [-1.0, 1.0]
    """

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(empty(num_parameters, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.constant_(self.weight, self.init)

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class ELU(Module):
    """``x`` for positive ``x``, ``alpha * (exp(x) - 1)`` otherwise.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.ELU()(torcia.tensor([0.0, 2.0]))
    tensor([0., 2.])
    """

    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input):
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        inplace = ", inplace=True" if self.inplace else ""
        return f"alpha={self.alpha}{inplace}"


class GELU(Module):
    """``x * Phi(x)`` with Phi the standard normal CDF; ``approximate="tanh"`` uses the
    tanh formula.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.GELU()(torcia.tensor([0.0]))
    tensor([0.])
    """

    def __init__(self, approximate: str = "none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"approximate argument must be either none or tanh, got "
                             f"{approximate!r}")
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Sigmoid(Module):
    """``1 / (1 + exp(-x))``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.Sigmoid()(torcia.tensor([0.0]))
    tensor([0.5000])
    """

    def forward(self, input):
        return F.sigmoid(input)


class Tanh(Module):
    """``tanh(x)``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.Tanh()(torcia.tensor([0.0]))
    tensor([0.])
    """

    def forward(self, input):
        return F.tanh(input)


class Softplus(Module):
    """``log(1 + exp(beta * x)) / beta``, linear above ``threshold`` for stability.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.Softplus()(torcia.tensor([0.0, 30.0]))
    tensor([ 0.6931, 30.0000])
    """

    def __init__(self, beta: float = 1.0, threshold: float = 20.0):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


def _implicit_dim(name: str, ndim: int) -> int:
    warnings.warn(
        f"Implicit dimension choice for {name} has been deprecated. Change the call to "
        "include dim=X as an argument.",
        stacklevel=3,
    )
    return 0 if ndim in (0, 1, 3) else 1


class Softmax(Module):
    """``exp(x) / sum(exp(x))`` along ``dim``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.Softmax(dim=-1)(torcia.tensor([[0.0, 0.0]]))
    tensor([[0.5000, 0.5000]])
    """

    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        dim = self.dim if self.dim is not None else _implicit_dim("softmax", input.dim())
        return F.softmax(input, dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Module):
    """``log(softmax(x))`` along ``dim``, computed stably.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.LogSoftmax(dim=1)(torcia.tensor([[0.0, 0.0]]))
    tensor([[-0.6931, -0.6931]])
    """

    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        dim = self.dim if self.dim is not None else _implicit_dim("log_softmax", input.dim())
        return F.log_softmax(input, dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Threshold(Module):
    """``x`` where ``x > threshold``, ``value`` elsewhere.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.Threshold(0.5, -1.0)(torcia.tensor([0.2, 0.9]))
    tensor([-1.0000,  0.9000])
    """

    def __init__(self, threshold: float, value: float, inplace: bool = False):
        super().__init__()
        self.threshold = threshold
        self.value = value
        self.inplace = inplace

    def forward(self, input):
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self) -> str:
        inplace = ", inplace=True" if self.inplace else ""
        return f"threshold={self.threshold}, value={self.value}{inplace}"


class Hardsigmoid(Module):
    """``relu6(x + 3) / 6``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.Hardsigmoid()(torcia.tensor([-3.0, 0.0, 3.0]))
    tensor([0.0000, 0.5000, 1.0000])
    """

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.hardsigmoid(input, self.inplace)


class CELU(Module):
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.CELU(2.0)(torcia.tensor([1.0]))
    tensor([1.])
    """

    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input):
        return F.celu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        inplace = ", inplace=True" if self.inplace else ""
        return f"alpha={self.alpha}{inplace}"


class LogSigmoid(Module):
    """``log(sigmoid(x))``, computed stably.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.LogSigmoid()(torcia.tensor([0.0]))
    tensor([-0.6931])
    """

    def forward(self, input):
        return F.logsigmoid(input)


class Softsign(Module):
    """``x / (1 + |x|)``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.Softsign()(torcia.tensor([1.0, -3.0]))
    tensor([ 0.5000, -0.7500])
    """

    def forward(self, input):
        return F.softsign(input)


class Tanhshrink(Module):
    """``x - tanh(x)``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.Tanhshrink()(torcia.tensor([0.0]))
    tensor([0.])
    """

    def forward(self, input):
        return F.tanhshrink(input)


class GLU(Module):
    """Gated linear unit: the first half of ``dim`` times the sigmoid of the second half.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.GLU()(torcia.tensor([[2.0, 0.0]]))
    tensor([[1.]])
    """

    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.glu(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmin(Module):
    """``softmax(-x)`` along ``dim``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.Softmin(dim=0)(torcia.tensor([0.0, 0.0]))
    tensor([0.5000, 0.5000])
    """

    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        dim = self.dim if self.dim is not None else _implicit_dim("softmin", input.dim())
        return F.softmin(input, dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class _Shrink(Module):
    def __init__(self, lambd: float = 0.5):
        super().__init__()
        self.lambd = lambd

    def extra_repr(self) -> str:
        return f"{self.lambd}"


class Hardshrink(_Shrink):
    """``x`` where ``|x| > lambd``, 0 elsewhere.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.Hardshrink()(torcia.tensor([0.2, -1.0]))
    tensor([ 0., -1.])
    """

    def forward(self, input):
        return F.hardshrink(input, self.lambd)


class Softshrink(_Shrink):
    """``x - lambd * sign(x)`` where ``|x| > lambd``, 0 elsewhere.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.Softshrink()(torcia.tensor([0.2, -1.0]))
    tensor([ 0.0000, -0.5000])
    """

    def forward(self, input):
        return F.softshrink(input, self.lambd)


# PyTorch defines MultiheadAttention in its activation module; code imports it from there
from torcia.nn.modules.transformer import MultiheadAttention  # noqa: E402,F401


class RReLU(Module):
    """Randomised leaky ReLU: negative slopes drawn from ``U(lower, upper)`` in training,
    their mean in evaluation.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.RReLU(0.1, 0.3).eval()(torcia.tensor([-1.0, 2.0]))
    tensor([-0.2000,  2.0000])
    """

    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3, inplace: bool = False):
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input):
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"lower={self.lower}, upper={self.upper}{', inplace=True' if self.inplace else ''}"


class Softmax2d(Module):
    """Softmax over the channels of ``(N, C, H, W)`` or ``(C, H, W)`` inputs.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.Softmax2d()(torcia.zeros(1, 2, 1, 1)).flatten()
    tensor([0.5000, 0.5000])
    """

    def forward(self, input):
        if input.dim() not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.dim()}D "
                             "instead")
        return F.softmax(input, -3)
