"""Activation functions and softmax at ``torcia.*`` (``torcia.gelu``,
``torcia.softmax``, ``torcia.rrelu``...).
"""

from __future__ import annotations

import warnings

from torcia import _tensor
from torcia._autocast import autocast_as
from torcia._oplib._common import _F, _check_tensor, _to_float
from torcia._oplib.elementwise import where
from torcia._tensor import _wrap_dim, call, inplace

#: the dtype categories (1 integer, 2 floating, 3 complex) of the activations that take
#: more than floating inputs, as PyTorch: hardtanh clamps integers in their dtype, the others
#: compute integers in the default float dtype
_CATEGORIES = {"hardtanh": (1, 2), "silu": (2, 3), "softsign": (1, 2, 3),
               "tanhshrink": (1, 2, 3)}


def _activation(op, input, fn, inplace_, **params):
    _check_tensor(input, "input", fn)
    category = input.dtype.category
    if category == 0 and op == "hardtanh":
        raise RuntimeError(f"Bool inputs not supported for {op}")
    if category not in _CATEGORIES.get(op, (2,)):
        raise RuntimeError(f"\"{fn}\" not implemented for '{_tensor._torch_name(input.dtype)}'")
    if category == 1 and op != "hardtanh" and not inplace_:
        input = _to_float(input)
    if inplace_:
        return inplace(lambda t: call(op, (t,), params), input)
    return call(op, (input,), params)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """``input`` where positive, else ``input * negative_slope``.

    Examples
    --------
    >>> import torcia
    >>> from torcia._oplib.nn_activation import leaky_relu
    >>> leaky_relu(torcia.tensor([-2.0, 3.0]), 0.5)
    tensor([-1.,  3.])
    """
    return _activation("leaky_relu", input, "leaky_relu", inplace,
                       negative_slope=float(negative_slope))


def elu(input, alpha=1.0, inplace=False):
    """``input`` where positive, else ``alpha * (exp(input) - 1)``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.elu(torcia.tensor([-1.0, 2.0]))
    tensor([-0.6321,  2.0000])
    """
    return _activation("elu", input, "elu", inplace, alpha=float(alpha))


def selu(input, inplace=False):
    """``scale * elu(input, alpha)`` with alpha = 1.6733 and scale = 1.0507.

    Examples
    --------
    >>> import torcia
    >>> torcia.selu(torcia.tensor([-1.0, 1.0]))
    tensor([-1.1113,  1.0507])
    """
    return _activation("selu", input, "selu", inplace)


def celu(input, alpha=1.0, inplace=False):
    """``max(0, input) + min(0, alpha * (exp(input / alpha) - 1))``.

    Examples
    --------
    >>> import torcia
    >>> torcia.celu(torcia.tensor([-1.0, 2.0]))
    tensor([-0.6321,  2.0000])
    """
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError")
    return _activation("celu", input, "celu", inplace, alpha=float(alpha))


def gelu(input, approximate="none"):
    """``input * Phi(input)`` (Phi the standard normal CDF); ``approximate="tanh"`` uses
    ``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.gelu(torcia.tensor([-1.0, 0.0, 1.0]))
    tensor([-0.1587,  0.0000,  0.8413])
    >>> F.gelu(torcia.tensor([1.0]), approximate="tanh")
    tensor([0.8412])
    """
    if approximate not in ("none", "tanh"):
        raise RuntimeError(f"approximate argument must be either none or tanh, but got "
                           f"{approximate}")
    return _activation("gelu", input, "gelu", False, approximate=approximate)


def silu(input, inplace=False):
    """``input * sigmoid(input)``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.silu(torcia.tensor([0.0, 1.0]))
    tensor([0.0000, 0.7311])
    """
    return _activation("silu", input, "silu", inplace)


def mish(input, inplace=False):
    """``input * tanh(softplus(input))``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.mish(torcia.tensor([0.0, 1.0]))
    tensor([0.0000, 0.8651])
    """
    return _activation("mish", input, "mish", inplace)


def softplus(input, beta=1.0, threshold=20.0):
    """``log(1 + exp(beta * input)) / beta``, linear where ``beta * input > threshold``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.softplus(torcia.tensor([0.0, 30.0]))
    tensor([ 0.6931, 30.0000])
    """
    return _activation("softplus", input, "softplus", False, beta=float(beta),
                       threshold=float(threshold))


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """``input`` clipped to ``[min_val, max_val]``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.hardtanh(torcia.tensor([-2.0, 0.5, 2.0]))
    tensor([-1.0000,  0.5000,  1.0000])
    """
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    # PyTorch converts the limits to the integer dtype first (truncating), -0.5 passes
    if input._data.dtype.kind == "u" and (int(min_val) < 0 or int(max_val) < 0):
        raise RuntimeError("cannot do hardtanh on an unsigned type with negative limits")
    return _activation("hardtanh", input, "hardtanh", inplace, min_val=float(min_val),
                       max_val=float(max_val))


def relu6(input, inplace=False):
    """``min(max(0, input), 6)``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.relu6(torcia.tensor([-1.0, 3.0, 9.0]))
    tensor([0., 3., 6.])
    """
    return hardtanh(input, 0.0, 6.0, inplace)


def hardswish(input, inplace=False):
    """``input * relu6(input + 3) / 6``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.hardswish(torcia.tensor([0.0, 1.0, 4.0]))
    tensor([0.0000, 0.6667, 4.0000])
    """
    return _activation("hardswish", input, "hardswish", inplace)


def hardsigmoid(input, inplace=False):
    """``relu6(input + 3) / 6``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.hardsigmoid(torcia.tensor([-4.0, 0.0, 1.5]))
    tensor([0.0000, 0.5000, 0.7500])
    """
    return _activation("hardsigmoid", input, "hardsigmoid", inplace)


def logsigmoid(input):
    """``log(sigmoid(input))``, computed without overflow.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.logsigmoid(torcia.tensor([0.0, 2.0]))
    tensor([-0.6931, -0.1269])
    """
    return _activation("logsigmoid", input, "log_sigmoid_forward", False)


def softsign(input):
    """``input / (1 + |input|)``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.softsign(torcia.tensor([-1.0, 3.0]))
    tensor([-0.5000,  0.7500])
    """
    if input._data.dtype.kind in "biu":
        # PyTorch's formula in the integer dtype: 1 + |x| wraps (int8 127 gives -128)
        return input / (input.abs() + 1)
    return _activation("softsign", input, "softsign", False)


def tanhshrink(input):
    """``input - tanh(input)``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.tanhshrink(torcia.tensor([0.0, 1.0]))
    tensor([0.0000, 0.2384])
    """
    return _activation("tanhshrink", input, "tanhshrink", False)


@autocast_as("prelu")
def prelu(input, weight):
    """``input`` where positive, else ``weight * input``; ``weight`` has one element or
    one per channel (dim 1).

    Examples
    --------
    >>> import torcia
    >>> torcia.prelu(torcia.tensor([[-2.0, 3.0]]), torcia.tensor([0.25]))
    tensor([[-0.5000,  3.0000]])
    """
    n = weight.numel()
    if n != 1:
        channels = input.shape[1] if input.ndim >= 2 else input.shape[0] if input.ndim else 1
        if n != channels:
            raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found "
                               f"parameter numbers = {n} and channel size = {channels}.")
        shape = [1] * input.ndim
        shape[1 if input.ndim >= 2 else 0] = n
        weight = weight.reshape(shape)
    elif weight.ndim:
        weight = weight.reshape(())
    return where(input > 0, input, input * weight)


def _softmax_dim(ndim: int) -> int:
    # PyTorch's legacy choice when dim is not given
    return 0 if ndim in (0, 1, 3) else 1


def _softmax(op, input, dim, dtype, name=None):
    _check_tensor(input, "input", name or op)
    if dim is None:
        dim = _softmax_dim(input.ndim)
        warnings.warn(f"Implicit dimension choice for {name or op} has been deprecated. "
                      "Change the call to include dim=X as an argument.", stacklevel=4)
    if dtype is not None:
        input = input.to(dtype)
    elif not input.is_floating_point():
        last = input.ndim <= 1 or _wrap_dim(dim, input.ndim) == input.ndim - 1
        raise NotImplementedError(f"\"{op}{'_lastdim' if last else ''}_kernel_impl\" not "
                                  f"implemented for '{_tensor._torch_name(input.dtype)}'")
    dim = _wrap_dim(dim, input.ndim)
    if input.ndim == 0:
        return call(op, (input.reshape(1),), {"dim": 0}).reshape(())
    return call(op, (input,), {"dim": dim})


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


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    """``torch.rrelu``.

    Examples
    --------
    >>> import torcia
    >>> torcia.rrelu(torcia.tensor([-2.0, 1.0]), 0.5, 0.5)
    tensor([-1.,  1.])
    """
    return _F().rrelu(input, lower, upper, training)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    """``torch.rrelu_``: in place.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([-2.0, 1.0])
    >>> torcia.rrelu_(x, 0.25, 0.25)
    tensor([-0.5000,  1.0000])
    """
    return _F().rrelu_(input, lower, upper, training)


def threshold(input, threshold, value):
    """``torch.threshold``: ``value`` where ``input <= threshold``.

    Examples
    --------
    >>> import torcia
    >>> torcia.threshold(torcia.tensor([0.5, 2.0]), 1.0, -1.0)
    tensor([-1.,  2.])
    """
    return _F().threshold(input, threshold, value)


def threshold_(input, threshold, value):
    """``torch.threshold_``: in place.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([0.5, 2.0])
    >>> torcia.threshold_(x, 1.0, 0.0)
    tensor([0., 2.])
    """
    return _F().threshold_(input, threshold, value)


def hardshrink(input, lambd=0.5):
    """``torch.hardshrink``.

    Examples
    --------
    >>> import torcia
    >>> torcia.hardshrink(torcia.tensor([-1.0, 0.25]))
    tensor([-1.,  0.])
    """
    return _F().hardshrink(input, lambd)


def celu_(input, alpha=1.0):
    """``torch.celu_``: in place.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([-1.0, 1.0])
    >>> torcia.celu_(x)
    tensor([-0.6321,  1.0000])
    """
    return _F().celu_(input, alpha)


def selu_(input):
    """``torch.selu_``: in place.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([0.0, 1.0])
    >>> torcia.selu_(x)
    tensor([0.0000, 1.0507])
    """
    return _F().selu_(input)


def prelu_method(self, weight):
    """``Tensor.prelu(weight)``: :func:`torcia.prelu` of ``self``.

    Examples
    --------
    >>> import torcia
    >>> torcia.tensor([-2.0, 3.0]).prelu(torcia.tensor([0.25]))
    tensor([-0.5000,  3.0000])
    """
    return _F().prelu(self, weight)


#: the functions here that are also Tensor methods, under the same name
METHODS = (
    "softmax", "log_softmax",
)

#: the names ``torcia`` exports from here
__all__ = [
    "celu", "celu_", "hardshrink", "log_softmax", "prelu", "rrelu", "rrelu_", "selu", "selu_",
    "softmax", "threshold", "threshold_",
]
