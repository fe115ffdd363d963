"""Custom differentiable operations: ``torcia.autograd.Function``."""

from __future__ import annotations

import functools
import weakref

from torcia import no_grad
from torcia.autograd import engine
from torcia.autograd import forward_ad as _forward_ad
from torcia.autograd.derivatives import _reattach
from torcia.autograd.graph import _FREED, SAVED_HOOKS, Packed, _modified_message
from torcia.autograd.graph import Node as _Node
from torcia.library import GRAD_MODE as _GRAD
from torcia.library import Tensor


class FunctionCtx:
    """The ``ctx`` of a custom Function: what ``forward`` leaves for ``backward``."""

    def __init__(self):
        self._saved = ()
        self._versions = ()
        self._output_slots = {}
        self._node = None
        self._released = False
        self.needs_input_grad = ()
        self.non_differentiable = set()
        self.dirty = set()
        self.materialize_grads = True
        self._forward_saved = ()
        self._in_jvp = False

    def save_for_forward(self, *tensors):
        """Keep tensors for ``jvp`` (forward mode), read back through ``saved_tensors``."""
        self._forward_saved = tensors

    def save_for_backward(self, *tensors):
        """Keep tensors for backward; changing them in place before then is an error."""
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError("save_for_backward can only save variables, but argument "
                                f"{len(self._saved)} is of type {type(t).__name__}")
        self._versions = tuple(t._vc[0] if t is not None else None for t in tensors)
        if SAVED_HOOKS:
            pack_hook, unpack_hook, check = SAVED_HOOKS[-1]
            tensors = tuple(None if t is None else Packed(t, pack_hook, unpack_hook, check)
                            for t in tensors)
        self._saved = tensors

    @property
    def saved_tensors(self):
        if self._in_jvp:
            return self._forward_saved
        if self._released:
            raise RuntimeError(_FREED)
        node = self._node() if self._node is not None else None
        if self._saved and any(t.__class__ is Packed for t in self._saved):
            name = node.name() if node is not None else "a custom Function"
            return tuple(t if t is None else t.unpack(v, name)
                         for t, v in zip(self._saved, self._versions))
        for t, v in zip(self._saved, self._versions):
            if t is not None and t._vc[0] != v:
                raise RuntimeError(_modified_message(
                    t, v, node.name() if node is not None else "a custom Function"))
        if not self._output_slots or node is None:
            return self._saved
        saved = list(self._saved)
        for i, k in self._output_slots.items():
            saved[i] = _reattach(saved[i], node, k)
        return tuple(saved)

    def _keep_outputs_weakly(self, outputs):
        """Saved outputs become aliases without ``grad_fn``: the node holds its context,
        and an output holding the node would close a reference cycle. They are seen as
        the node's outputs again when unpacked."""
        saved = list(self._saved)
        for i, t in enumerate(saved):
            for k, o in enumerate(outputs):
                if t is not None and t is o:
                    alias = Tensor._make(o._data, o._device)
                    alias._vc = o._vc
                    saved[i] = alias
                    self._output_slots[i] = k
        self._saved = tuple(saved)

    def mark_non_differentiable(self, *tensors):
        """Outputs that never need a gradient (e.g. indices)."""
        self.non_differentiable.update(id(t) for t in tensors)

    def mark_dirty(self, *tensors):
        """Inputs that forward modified in place."""
        self.dirty.update(id(t) for t in tensors)

    def set_materialize_grads(self, value: bool):
        """Whether ``None`` output gradients reach backward as zeros (default) or None."""
        self.materialize_grads = bool(value)


class BackwardCFunction(_Node):
    """The graph node of one custom Function call."""

    __slots__ = ("ctx", "fn_cls", "output_metas")

    def name(self) -> str:
        return f"{self.fn_cls.__name__}Backward"

    def release(self):
        if self.ctx._saved:
            self.ctx._released = True
            self.ctx._saved = ()
            self.released = True

    def apply(self, grads, create_graph):
        from torcia import zeros

        ctx = self.ctx
        if ctx.materialize_grads:
            grads = [
                g if g is not None else zeros(m[0], dtype=m[1], device=m[2])
                for g, m in zip(grads, self.output_metas)
            ]
        out = self.fn_cls.backward(ctx, *grads)
        if not isinstance(out, tuple):
            out = (out,)
        n = len(self.next_functions)
        if len(out) < n:
            raise RuntimeError(
                f"function {self.name()} returned an incorrect number of gradients "
                f"(expected {n}, got {len(out)})"
            )
        fitted = []
        for i, (g, edge) in enumerate(zip(out[:n], self.next_functions)):
            if g is None or edge[0] is None:
                fitted.append(None)
                continue
            if not isinstance(g, Tensor):
                raise TypeError(f"{self.name()}.backward returned {type(g).__name__} for "
                                f"input {i}, expected a Tensor or None")
            meta = self.metas[i]
            if tuple(g.shape) != tuple(meta[0]):
                raise RuntimeError(
                    f"Function {self.name()} returned an invalid gradient at index {i} - got "
                    f"{list(g.shape)} but expected shape compatible with {list(meta[0])}"
                )
            if g.dtype is not meta[1]:
                # as PyTorch's validate_outputs: the gradient takes its input's dtype (a
                # custom_fwd(cast_inputs=...) forward ran in float32 on a bfloat16 input)
                g = g.to(meta[1])
            fitted.append(g)
        return tuple(fitted)


class Function:
    """Base of custom differentiable operations.

    Subclass it with static ``forward(ctx, *args)`` and ``backward(ctx, *grad_outputs)``
    and call ``MyFunction.apply(*args)``.

    Examples
    --------
    >>> import torcia
    >>> class Cube(torcia.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         ctx.save_for_backward(x)
    ...         return x ** 3
    ...     @staticmethod
    ...     def backward(ctx, grad):
    ...         (x,) = ctx.saved_tensors
    ...         return grad * 3 * x ** 2
    >>> x = torcia.tensor([2.0], requires_grad=True)
    >>> Cube.apply(x).backward(); x.grad
    tensor([12.])
    """

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("a custom Function must implement forward")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("a custom Function must implement backward to be "
                                  "differentiated")

    @staticmethod
    def setup_context(ctx, inputs, output):
        """Override to write ``forward(*args)`` without ``ctx``: called after it with the
        inputs and the output, to save what backward needs."""
        raise NotImplementedError("setup_context is not overridden")

    @staticmethod
    def jvp(ctx, *grad_inputs):
        raise NotImplementedError("You must implement the jvp function for custom "
                                  "autograd.Function to use it with forward mode AD.")

    @classmethod
    def apply(cls, *args, **kwargs):
        ctx = FunctionCtx()
        # ``requires_grad``, not ``_requires_grad``: a dual tensor's real flag
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        recording = _GRAD.enabled and any(ctx.needs_input_grad)
        tangents = _forward_ad.tangents_of(args)
        with no_grad():
            if cls.setup_context is Function.setup_context:
                outputs = cls.forward(ctx, *args, **kwargs)
            else:
                # PyTorch 2's split style: forward without ctx, then setup_context
                outputs = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, outputs)
        single = not isinstance(outputs, tuple)
        outs = (outputs,) if single else outputs
        if recording:
            for a in args:
                if id(a) in ctx.dirty and a._requires_grad and a.grad_fn is None:
                    raise RuntimeError("a leaf Variable that requires grad has been used in an "
                                       "in-place operation.")
            next_functions = tuple(engine._edge(a) if need else engine.NO_EDGE
                                   for a, need in zip(args, ctx.needs_input_grad))
            metas = tuple((a._data.shape, a.dtype, a._device) if isinstance(a, Tensor)
                          else None for a in args)
            node = BackwardCFunction.__new__(BackwardCFunction)
            _Node.__init__(node, cls.__name__, None, None, (), {}, next_functions, metas,
                           len(outs))
            node.ctx = ctx
            node.fn_cls = cls
            node.output_metas = tuple(
                (o._data.shape, o.dtype, o._device) if isinstance(o, Tensor) else None
                for o in outs)
            ctx._node = weakref.ref(node)
            fixed = []
            for o in outs:
                if isinstance(o, Tensor) and any(o is a for a in args) and id(o) not in ctx.dirty:
                    # an input returned as is: the output is a new tensor sharing its data
                    o = o.detach()
                fixed.append(o)
            outs = tuple(fixed)
            ctx._keep_outputs_weakly(outs)
            engine.record_custom(node, [
                o if isinstance(o, Tensor) and id(o) not in ctx.non_differentiable else None
                for o in outs
            ])
        if tangents is not None:
            ctx._in_jvp = True
            try:
                with no_grad():
                    found = cls.jvp(ctx, *tangents)
            finally:
                ctx._in_jvp = False
            found = found if isinstance(found, tuple) else (found,)
            _forward_ad.give_tangents(
                [o if isinstance(o, Tensor) and id(o) not in ctx.non_differentiable else None
                 for o in outs], found)
        return outs[0] if single else outs


class _DelayedError(_Node):
    """Stands where a once-differentiable backward was recorded: raises if reached."""

    __slots__ = ()

    def apply(self, grads, create_graph):
        raise RuntimeError("trying to differentiate twice a function that was marked with "
                           "@once_differentiable")


def once_differentiable(fn):
    """Decorate a ``backward`` that cannot itself be differentiated: it runs without
    recording, and a double backward that reaches it raises."""

    @functools.wraps(fn)
    def wrapper(ctx, *grads):
        wanted = _GRAD.enabled and any(isinstance(g, Tensor) and g._requires_grad
                                       for g in grads)
        with no_grad():
            out = fn(ctx, *grads)
        if wanted:
            outs = out if isinstance(out, tuple) else (out,)
            edges = tuple(engine._edge(g) for g in grads)
            for o in outs:
                if isinstance(o, Tensor):
                    node = _DelayedError("once_differentiable", None, None, (), {}, edges,
                                         None, 1)
                    engine.record_custom(node, [o])
        return out

    return wrapper
