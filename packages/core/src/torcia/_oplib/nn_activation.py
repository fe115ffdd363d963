"""Activation functions and softmax: the functional forms of the activations declared in
:mod:`torcia._ops.nn_activation` (``torcia.nn.functional.gelu``...), made from their
declarations, and the functions at ``torcia.*`` (``torcia.softmax``, ``torcia.rrelu``...).
"""

from __future__ import annotations

import types
import warnings

from torcia import _dtype as D
from torcia import _tensor
from torcia._autocast import autocast_as
from torcia._oplib._common import _F, _check_tensor, examples_section
from torcia._ops._common import refusal
from torcia._ops.nn_activation import DECLARED as _DECLARED
from torcia._ops.pointwise import where
from torcia._tensor import _wrap_dim, call, inplace


def _runner(op):
    """``run(input, inplace_, **params)``: the declared activation ``op`` of ``input`` (in
    place with ``inplace_``) after its declaration's checks and refusals."""
    name, checks, decomposition = op.name, op.checks, op.decomposition
    # whether each dtype is refused, as dtypes are met: a call pays a dict lookup, and
    # import does not load ml_dtypes for bfloat16's NumPy dtype
    refused = {}
    # what is not refused of integers is PyTorch's composite, computed in their dtype
    # (softsign's 1 + |x| wraps: int8 127 gives -128)
    composite = frozenset(d for d in D.ALL if op.floating_inputs and d.category < 2)

    def run(input, inplace_, **params):
        _check_tensor(input, "input", name)
        if checks is not None:
            checks(input, **params)
        dtype = input.dtype
        if refused.get(dtype) is None:
            refused[dtype] = refusal(op.refuses, dtype.to_numpy()) is not None
        if refused[dtype]:
            raise refusal(op.refuses, dtype.to_numpy())
        if dtype in composite:
            return decomposition(input, **params)
        if inplace_:
            return inplace(lambda t: call(name, (t,), params), input)
        return call(name, (input,), params)

    return run


def _public(op):
    """The functional form of the declared activation ``op``, as ``torch.nn.functional``
    has it: ``input``, the schema's parameters with their defaults (a float one converted
    with ``float``), ``inplace=False`` where the declaration has ``inplace``; its docstring
    the declaration's doc and examples."""
    names = ["input", *op.params, *(["inplace"] if op.inplace else [])]
    given = "".join(f", {p}=float({p})" if isinstance(default, float) else f", {p}={p}"
                    for p, default in op.params.items())
    # written out and compiled, so that the function has the schema's signature (for
    # inspect.signature and for calls by keyword) at the cost of a plain call
    source = (f"def {op.name}({', '.join(names)}):\n"
              f"    return run(input, {'inplace' if op.inplace else 'False'}{given})\n")
    namespace = {"__name__": __name__, "run": _runner(op)}
    exec(source, namespace)
    fn = namespace[op.name]
    fn.__defaults__ = (*op.params.values(), *([False] if op.inplace else []))
    fn.__doc__ = op.doc + examples_section(f"F.{op.name}", op.examples,
                                           ("torcia", "torcia.nn.functional as F"))
    return fn


#: the functional forms made from the declarations of the activations (those of one input:
#: the backward ops take the gradient too), named here for the functions below
_made = types.SimpleNamespace(**{op.name: _public(op) for op in _DECLARED
                                 if len(op.inputs) == 1})
globals().update(vars(_made))
# also at torcia.* (as torch.celu and torch.selu), named here for __all__ below
celu, selu = _made.celu, _made.selu


def relu6(input, inplace=False):
    """``min(max(0, input), 6)``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.relu6(torcia.tensor([-1.0, 3.0, 9.0]))
    tensor([0., 3., 6.])
    """
    return _made.hardtanh(input, 0.0, 6.0, inplace)


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

#: the functional forms here that ``torcia.nn.functional`` re-exports (through
#: :data:`torcia.library.functional`)
FUNCTIONAL = (*vars(_made), "log_softmax", "prelu", "relu6", "softmax", "softmin")

#: the names ``torcia`` exports from here
__all__ = [
    "celu", "celu_", "hardshrink", "log_softmax", "prelu", "rrelu", "rrelu_", "selu", "selu_",
    "softmax", "threshold", "threshold_",
]
