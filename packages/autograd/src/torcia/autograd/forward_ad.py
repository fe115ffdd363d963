"""Forward-mode automatic differentiation: dual tensors carry a tangent through every op.

Inside ``with dual_level():``, :func:`make_dual` pairs a tensor with a tangent; each op
on a dual tensor computes its output's tangent from :mod:`torcia.autograd.forward_derivatives`
as it runs, and :func:`unpack_dual` reads it back. ``dual_level`` opens one level at a time,
as in PyTorch; :class:`nested_dual_level` opens levels inside others, each with its own
tangents, which ``torcia.func.jvp`` uses so that forward mode nests (``jacfwd(jacfwd(f))``):
an inner level's tangents are computed by ops the outer levels see, so they carry the outer
levels' tangents in turn.

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
from torcia.library import Tensor, disabled_torch_function_impl, wrap
from torcia.library import alias as make_alias

__all__ = ["UnpackedDualTensor", "dual_level", "enter_dual_level", "exit_dual_level",
           "is_dual", "make_dual", "map_tangents", "nested_dual_level", "unpack_dual"]


class _Level:
    """One open level: its dispatch mode and the tangents it gave, by tensor."""

    __slots__ = ("index", "mode", "duals")

    def __init__(self, index: int):
        self.index = index
        # id(tensor) -> [weakref to it, tangent]
        self.duals: dict = {}
        self.mode = _ForwardMode(self)


class _State:
    # the open levels, innermost last; a level's tangents are computed by ops that run
    # with that level and those inside it switched off (``ceiling``), so a tangent of an
    # inner level carries the tangents of the outer ones (forward over forward)
    levels: list = []
    ceiling = None  # levels from this position on take no part in the ops running now
    next_level = 0
    public = None  # the level ``dual_level()`` opened (PyTorch allows one)


STATE = _State()


class _Dual(Tensor):
    """A tensor with a tangent at some open level (the class is set back when its last
    level closes): a marker that makes "has a tangent?" one class test."""

    __slots__ = ()
    __torch_function__ = disabled_torch_function_impl  # ops see a plain tensor


def _level_at(level) -> _Level:
    """The open level of number ``level`` (the innermost for None)."""
    if not STATE.levels:
        return None
    if level is None:
        return STATE.levels[-1]
    for lv in STATE.levels:
        if lv.index == level:
            return lv
    return None


def _forget(level, key):
    def drop(_ref):
        level.duals.pop(key, None)
    return drop


def _mark(t: Tensor, tangent: Tensor, level: _Level) -> None:
    key = id(t)
    level.duals[key] = [weakref.ref(t, _forget(level, key)), tangent]
    t.__class__ = _Dual


def _differentiable(x: Tensor) -> bool:
    return x.is_floating_point() or x.is_complex()


def _as_tangent(t: Tensor, like: Tensor) -> Tensor:
    """``t`` in ``like``'s dtype. A real output's tangent is the real part of a complex
    one: the tangent of ``Re`` of the output (a cast would discard it silently)."""
    if t.is_complex() and not like.is_complex():
        t = t.real
    if t.dtype != like.dtype:
        t = t.to(like.dtype)
    return t


def _tangent(x, level: _Level):
    entry = level.duals.get(id(x)) if x.__class__ is _Dual else None
    return entry[1] if entry is not None else None


def _alias(x: Tensor) -> Tensor:
    """Another tensor on ``x``'s data with its history (an alias on the same node)."""
    alias = make_alias(x)
    if x.__torcia_requires_grad__:
        alias.__torcia_requires_grad__ = True
        alias.grad_fn = x.grad_fn
        alias.__torcia_output_nr__ = x.__torcia_output_nr__
    return alias


def _plain(x: Tensor, below: int = 0) -> Tensor:
    """``x`` without its tangents from the level at position ``below`` on, keeping its
    history and the tangents of the levels outside (an alias on the same node)."""
    if x.grad_fn is None and x.__torcia_requires_grad__:
        # a leaf: gradients must reach its own accumulator, so the leaf itself (it can
        # carry no tangent: make_dual gives a leaf's tangent to a view of it)
        return x
    alias = _alias(x)
    for lv in STATE.levels[:below]:
        tangent = _tangent(x, lv)
        if tangent is not None:
            _mark(alias, tangent, lv)
    return alias


class _ForwardMode(library.DispatchMode):
    """The dispatch mode of a forward-AD level: gives each op's outputs their tangents."""

    order = library.ModeOrder.FORWARD_AD

    def __init__(self, level: _Level):
        self.level = level

    def _off(self) -> bool:
        ceiling = STATE.ceiling
        return ceiling is not None and STATE.levels.index(self.level) >= ceiling

    def on_result(self, op, inputs, params, result):
        level = self.level
        if not level.duals or self._off():
            return
        tangents = None
        for i, x in enumerate(inputs):
            if x.__class__ is _Dual:
                t = _tangent(x, level)
                if t is not None:
                    if tangents is None:
                        tangents = [None] * len(inputs)
                    tangents[i] = t
        if tangents is None:
            return
        propagate(op, inputs, params, result, tangents, level)

    def on_inplace(self, target, out):
        if (target.__class__ is _Dual or out.__class__ is _Dual) and not self._off():
            rebase_inplace(target, out, self.level)


class _Computing:
    """Within: ops run for the tangents of ``level`` (theirs and the inner levels' modes
    stay out; the outer levels' modes give these ops' results their tangents)."""

    __slots__ = ("position", "saved")

    def __init__(self, level: _Level):
        self.position = STATE.levels.index(level)

    def __enter__(self):
        self.saved = STATE.ceiling
        if self.saved is None or self.position < self.saved:
            STATE.ceiling = self.position
        return self

    def __exit__(self, *exc):
        STATE.ceiling = self.saved
        return False


def propagate(op: str, inputs: tuple, params: dict, out, tangents, level=None) -> None:
    """Give the outputs of ``op`` their tangents at ``level`` (the innermost when None),
    from the inputs' ``tangents``."""
    level = level or STATE.levels[-1]
    entry = _derivs.TABLE.get(op)
    if entry is None:
        if op in _oplist.NOT_DIFFERENTIABLE:
            return
        raise RuntimeError(f"Trying to use forward AD with {op} that does not support it "
                           "because it has no derivative formula")
    if entry.fn is None:
        return
    below = STATE.levels.index(level)
    plain = tuple(_plain(x, below) if x.__class__ is _Dual else x for x in inputs)
    outs = out if isinstance(out, tuple) else (out,)
    node = None
    if torcia.is_grad_enabled() and any(isinstance(x, Tensor) and x.__torcia_requires_grad__
                                        for x in inputs):
        # the tangents are differentiable in reverse mode (reverse over forward,
        # ``jacrev(jacfwd(f))``), as in PyTorch: the op is recorded first (the
        # dispatcher's record then finds it done), so a formula reading ``result``
        # reaches the op's node
        _engine().record(op, inputs, params, out)
        node = next((o.grad_fn for o in outs if isinstance(o, Tensor)
                     and o.grad_fn is not None), None)
    with _Computing(level):
        found = _fwd.output_tangents(op, plain, tangents, params, out)
        found = found if isinstance(found, tuple) else (found,)
        for o, t in zip(outs, found):
            if t is not None and isinstance(o, Tensor) and _differentiable(o):
                if t.shape != o.shape:
                    t = t.expand(o.shape)
                _mark(o, _as_tangent(t, o), level)
    if node is not None and node.entry.uses_result:
        # the outputs the node saved for its formula (forward over reverse reads their
        # tangents): recorded before the tangents existed
        n = len(node.next_functions)
        for o, alias in zip(outs, node.args[n:]):
            # (a Packed one, which saved-tensor hooks hold, keeps what its hook made)
            if isinstance(alias, Tensor) and isinstance(o, Tensor):
                tangent = _tangent(o, level)
                if tangent is not None:
                    _mark(alias, tangent, level)


def _engine():
    from torcia.autograd import engine

    return engine


def map_tangents(src: Tensor, dst: Tensor, fn=None) -> Tensor:
    """Give ``dst`` the tangents ``src`` has at every open level, each through ``fn``
    (unchanged when None); returns ``dst``. What a transform that makes a new tensor of
    an old one's values (``torcia.func``'s batching, detaching) uses to keep them.

    Examples
    --------
    >>> import torcia
    >>> import torcia.autograd.forward_ad as fwAD
    >>> with fwAD.dual_level():
    ...     x = fwAD.make_dual(torcia.ones(2), torcia.tensor([1.0, 2.0]))
    ...     y = fwAD.map_tangents(x, x.detach(), lambda t: t * 10)
    ...     fwAD.unpack_dual(y).tangent
    tensor([10., 20.])
    """
    if src.__class__ is not _Dual:
        return dst
    for lv in list(STATE.levels):
        tangent = _tangent(src, lv)
        if tangent is not None:
            _mark(dst, tangent if fn is None else fn(tangent), lv)
    return dst


def is_dual(tensor) -> bool:
    """Whether ``tensor`` has a tangent at an open level (of any level: see
    :class:`nested_dual_level`).

    Examples
    --------
    >>> import torcia
    >>> import torcia.autograd.forward_ad as fwAD
    >>> with fwAD.dual_level():
    ...     fwAD.is_dual(fwAD.make_dual(torcia.ones(1), torcia.ones(1)) * 2)
    True
    """
    return tensor.__class__ is _Dual


def share_tangent(src: Tensor, alias: Tensor) -> None:
    """Give ``alias`` (another tensor on ``src``'s data) ``src``'s tangents, if any."""
    map_tangents(src, alias)


def detach_keeping_tangent(t: Tensor) -> Tensor:
    """``t.detach()``, still dual where ``t`` is: the gradients ``autograd.grad`` returns
    keep the tangents their formulas computed (forward-over-reverse reads them)."""
    return map_tangents(t, t.detach())


def tangents_of(args):
    """For a custom Function: the tangent of each argument at the innermost level (zeros
    for tensors without one, None for the rest), or None when no argument has one."""
    level = STATE.levels[-1] if STATE.levels else None
    if level is None or not level.duals or not any(
            a.__class__ is _Dual and _tangent(a, level) is not None for a in args):
        return None
    out = []
    for a in args:
        if not isinstance(a, Tensor):
            out.append(None)
            continue
        t = _tangent(a, level)
        out.append(t if t is not None else torcia.zeros(a.shape, dtype=a.dtype, device=a.device))
    return out


def give_tangents(outputs, tangents) -> None:
    """Attach a custom Function's ``jvp`` results to its outputs (innermost level)."""
    level = STATE.levels[-1]
    for o, t in zip(outputs, tangents):
        if o is not None and t is not None and _differentiable(o):
            if tuple(t.shape) != tuple(o.shape):
                raise RuntimeError(f"jvp returned a tangent of shape {list(t.shape)} for an "
                                   f"output of shape {list(o.shape)}")
            _mark(o, _as_tangent(t, o), level)


def rebase_inplace(t: Tensor, out: Tensor, level=None) -> None:
    """An in-place op wrote ``out`` into ``t``: ``t`` takes ``out``'s tangent (and the
    base of a view the matching part of it)."""
    level = level or STATE.levels[-1]
    tangent = _tangent(out, level)
    if tangent is None:
        return
    _mark(t, tangent, level)
    base = t.__torcia_base__
    if base is not None:
        # the write lands in the base too: so does the tangent
        from torcia.autograd.engine import _view_index

        flat = _view_index(base, t)
        old = _tangent(base, level)
        with _Computing(level), no_grad():
            new = (torcia.zeros(base.shape, dtype=base.dtype) if old is None
                   else old.clone()).reshape(-1)
            new[wrap(flat, base.__torcia_device__)] = tangent.to(base.dtype)
        _mark(base, new.reshape(base.shape), level)


def _open_level() -> int:
    level = _Level(STATE.next_level)
    STATE.next_level += 1
    STATE.levels.append(level)
    level.mode.__enter__()
    _derivs.FORWARD_LEVEL_OPEN[0] = True
    return level.index


def _close_level(index) -> None:
    if not STATE.levels or (index is not None and STATE.levels[-1].index != index):
        raise RuntimeError("Trying to exit a forward AD level that was not the last one "
                           "that was created. This is not supported.")
    level = STATE.levels.pop()
    for ref, _tangent_value in list(level.duals.values()):
        t = ref()
        if t is not None and not any(id(t) in lv.duals for lv in STATE.levels):
            t.__class__ = Tensor
    level.duals.clear()
    level.mode.__exit__(None, None, None)
    if STATE.public == level.index:
        STATE.public = None
    _derivs.FORWARD_LEVEL_OPEN[0] = bool(STATE.levels)


class nested_dual_level:
    """A forward-AD level inside the open ones (torcia-specific): what
    ``torcia.func.jvp`` opens, so that transforms nest (``jacfwd(jacfwd(f))``). Each
    level's tangents are its own; an inner level's tangents carry the outer levels'.
    ``with`` gives the level's number, for ``make_dual(..., level=)`` and
    ``unpack_dual(..., level=)``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.autograd.forward_ad as fwAD
    >>> with fwAD.nested_dual_level() as outer:
    ...     x = fwAD.make_dual(torcia.tensor(3.0), torcia.tensor(1.0), level=outer)
    ...     with fwAD.nested_dual_level() as inner:
    ...         y = fwAD.make_dual(x, torcia.tensor(1.0), level=inner) ** 3
    ...         dy = fwAD.unpack_dual(y, level=inner).tangent       # 3 x^2
    ...     fwAD.unpack_dual(dy, level=outer).tangent               # 6 x
    tensor(18.)
    """

    def __enter__(self):
        self.level = _open_level()
        return self.level

    def __exit__(self, *exc):
        _close_level(self.level)
        return False


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
    if STATE.public is not None:
        # as PyTorch's: torcia.func's transforms nest levels (nested_dual_level)
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    STATE.public = _open_level()
    return STATE.public


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
    if STATE.public is None or (level is not None and level != STATE.public):
        raise RuntimeError("Trying to exit a forward AD level that was not the last one "
                           "that was created. This is not supported.")
    _close_level(STATE.public)


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
        The level whose tangent this is (an open one; the innermost when not given).

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
    lv = _level_at(level)
    if lv is None:
        if not STATE.levels:
            raise RuntimeError("make_dual must be called within a forward AD level context "
                               "(with torcia.autograd.forward_ad.dual_level():)")
        raise RuntimeError(f"make_dual got level {level}, which is not open")
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
    if _tangent(tensor, lv) is not None:
        raise RuntimeError("Making a dual Tensor based on a Tensor that already has a forward "
                           f"gradient at the same level {lv.index} is not supported.")
    position = STATE.levels.index(lv)
    if tensor.__torcia_requires_grad__:
        # a recorded view, so backward reaches ``tensor``; the outer levels' modes give it
        # their tangents
        with _Computing(lv):
            dual = _plain(tensor, position).view_as(tensor)
    else:
        dual = _plain(tensor, position)
    # the tangent itself, as PyTorch keeps it (``unpack_dual(...).tangent is tangent``)
    _mark(dual, tangent, lv)
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
    lv = _level_at(level)
    tangent = _tangent(tensor, lv) if lv is not None and isinstance(tensor, Tensor) else None
    if tangent is None:
        return UnpackedDualTensor(tensor, None)
    return UnpackedDualTensor(_plain(tensor, STATE.levels.index(lv)), tangent)
