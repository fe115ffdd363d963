"""Forward-mode automatic differentiation: dual tensors carry a tangent through every op.

Inside ``with dual_level():``, :func:`make_dual` pairs a tensor with a tangent; each op
on a dual tensor computes its output's tangent from :mod:`torcia.autograd.forward_derivatives`
as it runs, and :func:`unpack_dual` reads it back. One level at a time, as in PyTorch.

How it joins the ops: a level is a dispatch mode (``torcia.library.DispatchMode``), whose
``on_result`` gives each op's outputs their tangents whatever the grad mode: tangents flow
under ``torcia.no_grad()`` as in PyTorch, and so through the backward pass of a reverse
transform, which makes forward-over-reverse (``jacfwd(jacrev(f))``) work. Reverse-mode
recording is independent of it: a dual tensor requires grad exactly when its primal does.
Custom ``Function``s take part through their ``jvp`` method.
"""

from __future__ import annotations

import weakref
from collections import namedtuple

import torcia
from torcia import library, no_grad
from torcia import ops as _oplist
from torcia.autograd import derivatives as _derivs
from torcia.autograd import forward_derivatives as _fwd
from torcia.library import Tensor, disabled_torch_function_impl

__all__ = ["UnpackedDualTensor", "dual_level", "enter_dual_level", "exit_dual_level",
           "make_dual", "unpack_dual"]

#: where forward AD sits among the modes: after autocast has chosen dtypes, so tangents
#: are computed from the values the kernels really saw
FORWARD_AD_ORDER = 120


class _State:
    level = None  # the current level number, or None outside dual_level
    next_level = 0
    # id(tensor) -> [weakref to it, tangent]
    duals: dict = {}
    mode = None  # the level's dispatch mode


STATE = _State()


class _Dual(Tensor):
    """A tensor with a tangent at the current level (the class is set back on exit): a
    marker that makes "has a tangent?" one class test."""

    __slots__ = ()
    __torch_function__ = disabled_torch_function_impl  # ops see a plain tensor


def _forget(key):
    def drop(_ref):
        STATE.duals.pop(key, None)
    return drop


def _mark(t: Tensor, tangent: Tensor) -> None:
    key = id(t)
    STATE.duals[key] = [weakref.ref(t, _forget(key)), tangent]
    t.__class__ = _Dual


def _differentiable(x: Tensor) -> bool:
    return x.is_floating_point() or x.is_complex()


def _as_tangent(t: Tensor, like: Tensor) -> Tensor:
    """``t`` detached, in ``like``'s dtype. A real output's tangent is the real part of a
    complex one: the tangent of ``Re`` of the output (a cast would discard it silently)."""
    t = t.detach()
    if t.is_complex() and not like.is_complex():
        t = t.real
    return t.to(like.dtype)


def _tangent(x):
    entry = STATE.duals.get(id(x)) if x.__class__ is _Dual else None
    return entry[1] if entry is not None else None


def _plain(x: Tensor) -> Tensor:
    """``x`` without its tangent, keeping its history (an alias on the same node)."""
    if x.grad_fn is None and x._requires_grad:
        # a leaf: gradients must reach its own accumulator
        return x
    alias = Tensor._make(x._data, x._device)
    alias._vc = x._vc
    if x._requires_grad:
        alias._requires_grad = True
        alias.grad_fn = x.grad_fn
        alias._out_nr = x._out_nr
    return alias


class _ForwardMode(library.DispatchMode):
    """The dispatch mode of a forward-AD level: gives each op's outputs their tangents."""

    order = FORWARD_AD_ORDER

    def __init__(self):
        self.busy = False  # computing a tangent: its own ops carry none

    def on_result(self, op, inputs, params, result):
        if self.busy or not STATE.duals:
            return
        tangents = None
        for i, x in enumerate(inputs):
            if x.__class__ is _Dual:
                if tangents is None:
                    tangents = [None] * len(inputs)
                tangents[i] = _tangent(x)
        if tangents is None:
            return
        propagate(op, inputs, params, result, tangents)

    def on_inplace(self, target, out):
        if not self.busy and (target.__class__ is _Dual or out.__class__ is _Dual):
            rebase_inplace(target, out)


def propagate(op: str, inputs: tuple, params: dict, out, tangents) -> None:
    """Give the outputs of ``op`` their tangents, from the inputs' ``tangents``."""
    entry = _derivs.TABLE.get(op)
    if entry is None:
        if op in _oplist.NOT_DIFFERENTIABLE:
            return
        raise RuntimeError(f"Trying to use forward AD with {op} that does not support it "
                           "because it has no derivative formula")
    if entry.fn is None:
        return
    plain = tuple(_plain(x) if x.__class__ is _Dual else x for x in inputs)
    mode = STATE.mode
    mode.busy = True
    try:
        with no_grad():
            found = _fwd.output_tangents(op, plain, tangents, params, out)
    finally:
        mode.busy = False
    outs = out if isinstance(out, tuple) else (out,)
    found = found if isinstance(found, tuple) else (found,)
    for o, t in zip(outs, found):
        if t is not None and isinstance(o, Tensor) and _differentiable(o):
            if t.shape != o.shape:
                t = t.expand(o.shape)
            _mark(o, _as_tangent(t, o))


def share_tangent(src: Tensor, alias: Tensor) -> None:
    """Give ``alias`` (another tensor on ``src``'s data) ``src``'s tangent, if any."""
    tangent = _tangent(src)
    if tangent is not None:
        _mark(alias, tangent)


def detach_keeping_tangent(t: Tensor) -> Tensor:
    """``t.detach()``, still dual where ``t`` is: the gradients ``autograd.grad`` returns
    keep the tangents their formulas computed (forward-over-reverse reads them)."""
    out = t.detach()
    tangent = _tangent(t)
    if tangent is not None:
        _mark(out, tangent)
    return out


def tangents_of(args):
    """For a custom Function: the tangent of each argument (zeros for tensors without one,
    None for the rest), or None when no argument is dual."""
    if not STATE.duals or not any(a.__class__ is _Dual for a in args):
        return None
    out = []
    for a in args:
        if not isinstance(a, Tensor):
            out.append(None)
            continue
        t = _tangent(a)
        out.append(t if t is not None else torcia.zeros(a.shape, dtype=a.dtype, device=a.device))
    return out


def give_tangents(outputs, tangents) -> None:
    """Attach a custom Function's ``jvp`` results to its outputs."""
    for o, t in zip(outputs, tangents):
        if o is not None and t is not None and _differentiable(o):
            if tuple(t.shape) != tuple(o.shape):
                raise RuntimeError(f"jvp returned a tangent of shape {list(t.shape)} for an "
                                   f"output of shape {list(o.shape)}")
            _mark(o, _as_tangent(t, o))


def rebase_inplace(t: Tensor, out: Tensor) -> None:
    """An in-place op wrote ``out`` into ``t``: ``t`` takes ``out``'s tangent (and the
    base of a view the matching part of it)."""
    tangent = _tangent(out)
    if tangent is None:
        return
    _mark(t, tangent)
    base = t._base
    if base is not None:
        # the write lands in the base too: so does the tangent
        from torcia.autograd.engine import _view_index

        flat = _view_index(base, t)
        old = _tangent(base)
        STATE.mode.busy = True
        try:
            with no_grad():
                new = (torcia.zeros(base.shape, dtype=base.dtype) if old is None
                       else old.clone()).reshape(-1)
                new[Tensor._make(flat, base._device)] = tangent.to(base.dtype)
        finally:
            STATE.mode.busy = False
        _mark(base, new.reshape(base.shape))


def enter_dual_level() -> int:
    """Open a forward-AD level (prefer ``with dual_level():``).

    Examples
    --------
    >>> import torcia
    >>> import torcia.autograd.forward_ad as fwAD
    >>> level = fwAD.enter_dual_level()
    >>> dual = fwAD.make_dual(torcia.tensor(2.0), torcia.tensor(1.0))
    >>> fwAD.unpack_dual(dual * dual).tangent
    tensor(4.)
    >>> fwAD.exit_dual_level()
    """
    if STATE.level is not None:
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    STATE.level = STATE.next_level
    STATE.next_level += 1
    STATE.mode = _ForwardMode()
    STATE.mode.__enter__()
    _derivs.FORWARD_LEVEL_OPEN[0] = True
    return STATE.level


def exit_dual_level(*, level: int | None = None) -> None:
    """Close the level: every dual tensor loses its tangent.

    Examples
    --------
    >>> import torcia
    >>> import torcia.autograd.forward_ad as fwAD
    >>> level = fwAD.enter_dual_level()
    >>> x = fwAD.make_dual(torcia.tensor([1.0, 2.0]), torcia.tensor([1.0, 0.0]))
    >>> fwAD.unpack_dual(x * x).tangent
    tensor([2., 0.])
    >>> fwAD.exit_dual_level()
    >>> fwAD.unpack_dual(x).tangent is None
    True
    """
    if STATE.level is None or (level is not None and level != STATE.level):
        raise RuntimeError("Trying to exit a forward AD level that was not the last one "
                           "that was created. This is not supported.")
    for ref, _tangent_value in list(STATE.duals.values()):
        t = ref()
        if t is not None:
            t.__class__ = Tensor
    STATE.duals.clear()
    STATE.level = None
    STATE.mode.__exit__(None, None, None)
    STATE.mode = None
    _derivs.FORWARD_LEVEL_OPEN[0] = False


class dual_level:
    """Context manager for a forward-AD level: dual tensors made inside lose their tangents
    on exit.

    Examples
    --------
    >>> import torcia
    >>> import torcia.autograd.forward_ad as fwAD
    >>> x = torcia.tensor([0.0, 1.0])
    >>> with fwAD.dual_level():
    ...     y = fwAD.make_dual(x, torcia.ones(2)).sin() * 2
    ...     fwAD.unpack_dual(y).tangent
    tensor([2.0000, 1.0806])
    """

    def __enter__(self):
        return enter_dual_level()

    def __exit__(self, *exc):
        exit_dual_level()
        return False


UnpackedDualTensor = namedtuple("UnpackedDualTensor", ["primal", "tangent"])
UnpackedDualTensor.__doc__ = """A dual tensor split into its value and its tangent
(``None`` when it has none)."""


def make_dual(tensor: Tensor, tangent: Tensor, *, level: int | None = None) -> Tensor:
    """A view of ``tensor`` whose tangent (forward gradient) is ``tangent``.

    Parameters
    ----------
    tensor : Tensor
        The primal value (floating point or complex).
    tangent : Tensor
        Same shape; the direction to differentiate along.
    level : int, optional
        Must be the current level when given.

    Returns
    -------
    Tensor
        The dual tensor; gradients still flow back to ``tensor`` when it requires grad.

    Examples
    --------
    >>> import torcia
    >>> import torcia.autograd.forward_ad as fwAD
    >>> with fwAD.dual_level():
    ...     d = fwAD.make_dual(torcia.tensor([3.0]), torcia.tensor([1.0]))
    ...     fwAD.unpack_dual(d * d).tangent
    tensor([6.])
    """
    if STATE.level is None:
        raise RuntimeError("make_dual must be called within a forward AD level context "
                           "(with torcia.autograd.forward_ad.dual_level():)")
    if level is not None and level != STATE.level:
        raise RuntimeError(f"make_dual got level {level}, but the current level is "
                           f"{STATE.level}")
    if not isinstance(tensor, Tensor) or not isinstance(tangent, Tensor):
        raise TypeError("make_dual expects two tensors")
    if not _differentiable(tensor):
        raise ValueError("Expected primal to be floating point or complex, but got: "
                         f"{tensor.dtype}")
    if not _differentiable(tangent):
        raise ValueError("Expected tangent to be floating point or complex, but got: "
                         f"{tangent.dtype}")
    if tuple(tangent.shape) != tuple(tensor.shape):
        raise RuntimeError(
            "Trying to set a forward gradient that has a different size than that of the "
            f"original Tensor, this is not supported. Tensor is of size {list(tensor.shape)} "
            f"while the given forward gradient is of size {list(tangent.shape)}.")
    if tensor.device != tangent.device:
        raise RuntimeError("Expected tangent to be on the same device as the primal, got "
                           f"{tangent.device} and {tensor.device}")
    if tensor._requires_grad:
        # a recorded view, so backward reaches ``tensor``
        STATE.mode.busy = True
        try:
            dual = (_plain(tensor) if tensor.__class__ is _Dual else tensor).view_as(tensor)
        finally:
            STATE.mode.busy = False
    else:
        dual = Tensor._make(tensor._data, tensor._device)
        dual._vc = tensor._vc
    _mark(dual, tangent.detach().to(tensor.dtype))
    return dual


def unpack_dual(tensor: Tensor, *, level: int | None = None) -> UnpackedDualTensor:
    """``(primal, tangent)`` of a dual tensor; the tangent is ``None`` for a tensor without
    one (or outside a level).

    Examples
    --------
    >>> import torcia
    >>> import torcia.autograd.forward_ad as fwAD
    >>> with fwAD.dual_level():
    ...     fwAD.unpack_dual(torcia.ones(1)).tangent is None
    True
    """
    tangent = _tangent(tensor) if isinstance(tensor, Tensor) else None
    if tangent is None:
        return UnpackedDualTensor(tensor, None)
    return UnpackedDualTensor(_plain(tensor), tangent)
