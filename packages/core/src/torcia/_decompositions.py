"""Default decompositions: composite ops written with other ops.

An op with a decomposition here is *composite*; every other op is a *primitive*. A device
backend must implement the primitives; where it has no kernel for a composite op, the
dispatcher runs the op's decomposition on tensors instead (PyTorch's
CompositeImplicitAutograd): its ops are dispatched one by one, so autograd records them
and the composite's own derivative (and fused ``*_backward`` op) is not needed.

A decomposition takes the op's inputs (tensors, numbers or None) positionally and its
parameters as keywords, as a kernel does, and returns a tensor (or a tuple of tensors).
It is written with torcia ops only: it runs on any device. Every op's decomposition is
declared with the op, in :mod:`torcia._ops`; this module fills the dispatcher's table
with them and gives them the dispatcher they call ops through (:data:`torcia._opdef.CALL`,
:data:`torcia._opdef.RAN`).
"""

from __future__ import annotations

from torcia import _opdef
from torcia._grad_mode import STATE as _GRAD
from torcia._ops import DECLARED
from torcia._tensor import AUTOGRAD, DECOMPOSITIONS, Tensor, active_modes, call


def ran(op, inputs, params, result):
    """What :func:`torcia._tensor.call` does with a kernel's ``result`` of ``op`` on
    ``inputs``: the dispatch modes' ``on_result`` (forward AD's tangents...) and autograd's
    record. For a decomposition that computes the kernel's result itself (a view through
    as_strided of its detached input), so that the op is seen as the op it is."""
    for mode in active_modes():
        mode.on_result(op, inputs, params, result)
    if _GRAD.enabled and any(isinstance(x, Tensor) and x.requires_grad for x in inputs):
        AUTOGRAD.record(op, inputs, params, result)
    return result


# the declared decompositions (torcia._ops) run ops by name, and stand for one, with these
_opdef.CALL, _opdef.RAN = call, ran
DECOMPOSITIONS.update(
    {name: op.decomposition for name, op in DECLARED.items() if op.decomposition})
