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
from torcia.library import alias as make_alias


class FunctionCtx:
    """The ``ctx`` of a custom Function: what ``forward`` leaves for ``backward``.

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
    >>> x = torcia.tensor([1.0, 2.0], requires_grad=True)
    >>> Cube.apply(x).sum().backward()
    >>> x.grad
    tensor([ 3., 12.])
    """

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
        self._versions = tuple(t.__torcia_version__[0] if t is not None else None for t in tensors)
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
            if t is not None and t.__torcia_version__[0] != v:
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
                    alias = make_alias(o)
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
                if id(a) in ctx.dirty and a.__torcia_requires_grad__ and a.grad_fn is None:
                    raise RuntimeError("a leaf Variable that requires grad has been used in an "
                                       "in-place operation.")
            next_functions = tuple(engine._edge(a) if need else engine.NO_EDGE
                                   for a, need in zip(args, ctx.needs_input_grad))
            metas = tuple((a.__torcia_data__.shape, a.dtype, a.__torcia_device__)
                          if isinstance(a, Tensor) else None for a in args)
            node = BackwardCFunction.__new__(BackwardCFunction)
            _Node.__init__(node, cls.__name__, None, None, (), {}, next_functions, metas,
                           len(outs))
            node.ctx = ctx
            node.fn_cls = cls
            node.output_metas = tuple(
                (o.__torcia_data__.shape, o.dtype, o.__torcia_device__)
                if isinstance(o, Tensor) else None for o in outs)
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
    recording, and a double backward that reaches it raises.

    Examples
    --------
    >>> import torcia
    >>> from torcia.autograd.function import once_differentiable
    >>> class Double(torcia.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         return x * 2
    ...     @staticmethod
    ...     @once_differentiable
    ...     def backward(ctx, grad):
    ...         return grad * 2
    >>> x = torcia.tensor([1.0, 3.0], requires_grad=True)
    >>> y = Double.apply(x)
    >>> (g,) = torcia.autograd.grad((y * y).sum(), x, create_graph=True)
    >>> g
    tensor([ 8., 24.], grad_fn=<OnceDifferentiableBackward0>)
    >>> try:
    ...     g.sum().backward()
    ... except RuntimeError as error:
    ...     print(error)
    trying to differentiate twice a function that was marked with @once_differentiable
    """

    @functools.wraps(fn)
    def wrapper(ctx, *grads):
        wanted = _GRAD.enabled and any(isinstance(g, Tensor) and g.__torcia_requires_grad__
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


# ---------------------------------------------------------------------------------------
# the legacy nested-input Function
# ---------------------------------------------------------------------------------------


def _iter_tensors(obj, keep_none=False):
    if isinstance(obj, Tensor) or (keep_none and obj is None):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            yield from _iter_tensors(o, keep_none)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _iter_tensors(o, keep_none)


def _unflatten(flat, proto):
    """``proto``'s nesting of lists and tuples with its tensors replaced, in order, by
    the entries of ``flat``."""
    it = iter(flat)

    def build(obj):
        if isinstance(obj, Tensor):
            return next(it)
        if isinstance(obj, (list, tuple)):
            return type(obj)(build(o) for o in obj)
        return obj

    return build(proto)


class NestedIOFunction(Function):
    """A custom Function of the old (instance) style whose inputs and outputs may be
    nested lists and tuples of tensors, kept for backward compatibility as in PyTorch.

    Subclass it with ``forward_extended(self, *inputs)`` and ``backward_extended(self,
    *grad_outputs)`` (instance methods, nested as the inputs and outputs are), then call an
    instance on the inputs. ``save_for_backward``, ``saved_tensors``, ``mark_dirty`` and
    ``mark_non_differentiable`` take and give nested structures too. An instance is used
    once. New code should use :class:`Function`.

    Examples
    --------
    >>> import torcia
    >>> from torcia.autograd import NestedIOFunction
    >>> class MulAdd(NestedIOFunction):
    ...     def forward_extended(self, pair):
    ...         a, b = pair
    ...         self.save_for_backward(pair)
    ...         return a * b, a + b
    ...     def backward_extended(self, g_mul, g_add):
    ...         ((a, b),) = self.saved_tensors
    ...         return g_mul * b + g_add, g_mul * a + g_add
    >>> a = torcia.tensor([2.0], requires_grad=True)
    >>> b = torcia.tensor([3.0], requires_grad=True)
    >>> prod, total = MulAdd()((a, b))
    >>> (prod + total).backward()
    >>> a.grad, b.grad
    (tensor([4.]), tensor([3.]))
    """

    def __call__(self, *inputs):
        outer = self
        nested_output = []

        class _Run(Function):
            @staticmethod
            def forward(ctx, *flat_in):
                outer._ctx = ctx
                result = outer.forward_extended(*_unflatten(flat_in, inputs))
                nested_output.append(result)
                return tuple(_iter_tensors(result))

            @staticmethod
            def backward(ctx, *grads):
                result = outer.backward_extended(*_unflatten(grads, nested_output[0]))
                result = result if isinstance(result, tuple) else (result,)
                return tuple(_iter_tensors(result, keep_none=True))

        _Run.__name__ = _Run.__qualname__ = type(self).__name__
        flat_out = _Run.apply(*_iter_tensors(inputs))
        flat_out = flat_out if isinstance(flat_out, tuple) else (flat_out,)
        return _unflatten(flat_out, nested_output[0])

    def forward_extended(self, *inputs):
        """The forward computation, on nested inputs; subclasses define it."""
        raise NotImplementedError("subclasses of NestedIOFunction must define "
                                  "forward_extended")

    def backward_extended(self, *grad_outputs):
        """The gradients of the inputs, nested as they are; subclasses define it."""
        raise NotImplementedError("subclasses of NestedIOFunction must define "
                                  "backward_extended")

    def save_for_backward(self, *args) -> None:
        """Keep (nested) tensors for :meth:`backward_extended`."""
        self._to_save_nested = args
        self._ctx.save_for_backward(*_iter_tensors(args))

    @property
    def saved_tensors(self):
        """What :meth:`save_for_backward` kept, nested as it was given."""
        return _unflatten(self._ctx.saved_tensors, self._to_save_nested)

    def mark_dirty(self, *args, **kwargs) -> None:
        """Inputs (nested) that :meth:`forward_extended` modified in place."""
        self._ctx.mark_dirty(*_iter_tensors((args, kwargs)))

    def mark_non_differentiable(self, *args, **kwargs) -> None:
        """Outputs (nested) that never need a gradient."""
        self._ctx.mark_non_differentiable(*_iter_tensors((args, kwargs)))
