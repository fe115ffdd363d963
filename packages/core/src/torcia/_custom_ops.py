"""``torch.library.custom_op`` and its registrations, on torcia's op records.

A custom op is an op like any other: a record in :func:`torcia.library.op_records` (group
``"custom"``), a kernel in every device's table, a derivative in the autograd engine's
table and a shape function on the "meta" device, put there by a built-in plugin through
the hooks every plugin uses (``torcia_register_ops``, ``torcia_register_kernels``), or
straight into the built tables for an op defined after they were built.

What PyTorch's API says maps onto those places: the function given to :func:`custom_op`
(or :func:`register_kernel`'s, per device type) is the op's kernel, run on tensors over
the kernel's arrays with autograd off (the op is opaque to autograd, as PyTorch's are);
:func:`register_autograd`'s ``setup_context`` and ``backward`` are its derivative;
:func:`register_fake`'s function is its shape function, run on "meta" tensors. Every
argument of the op's schema is an input of the record, in the schema's order.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Sequence

from torcia import _meta, _oprecords, backend, plugins
from torcia._dtype import dtype, from_numpy_dtype
from torcia._grad_mode import no_grad
from torcia._opdef import OpDef
from torcia._ops import creation
from torcia._tensor import Tensor, call

__all__ = ["CustomOpDef", "OpNamespace", "custom_op", "infer_schema", "register_autograd",
           "register_fake", "register_kernel"]

#: every custom op defined in this process, by qualified name (``"ns::name"``)
_OPS: dict[str, CustomOpDef] = {}


# ---------------------------------------------------------------------------------------
# schemas
# ---------------------------------------------------------------------------------------


class _Arg(typing.NamedTuple):
    name: str
    type: str  # the schema's type: "Tensor", "Tensor?", "int", "float[]", ...
    default: object = inspect.Parameter.empty
    kwarg_only: bool = False
    mutated: bool = False

    @property
    def is_tensor(self) -> bool:
        return self.type in ("Tensor", "Tensor?")


_SCALARS = {int: "int", float: "float", bool: "bool", str: "str"}


def _type_of(annotation, where: str) -> str:
    """The schema type of a Python annotation, as ``torch.library.infer_schema`` reads it."""
    if annotation is Tensor:
        return "Tensor"
    if annotation in _SCALARS:
        return _SCALARS[annotation]
    if annotation is dtype:
        return "ScalarType"
    if annotation is backend.device:
        return "Device"
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType) and type(None) in args and len(args) == 2:
        inner = _type_of(next(a for a in args if a is not type(None)), where)
        return inner if inner.endswith("?") else inner + "?"
    if origin in (list, Sequence):
        if len(args) == 1 and args[0] in (Tensor, *_SCALARS):
            return _type_of(args[0], where) + "[]"
    raise ValueError(f"infer_schema(func): {where} has unsupported type {annotation}. "
                     "The valid types are: Tensor, Tensor | None, int, float, bool, str, "
                     "torch.dtype, torch.device, their Optional forms and sequences of "
                     "Tensor, int, float, bool")


def _returns_of(annotation, where: str) -> int:
    """How many tensors a return annotation declares (0 for None)."""
    if annotation is None or annotation is type(None):
        return 0
    if annotation is Tensor:
        return 1
    if typing.get_origin(annotation) is tuple:
        items = typing.get_args(annotation)
        if items and all(a is Tensor for a in items):
            return len(items)
    raise ValueError(f"infer_schema(func): {where} returns {annotation}, but torcia's custom "
                     "ops return None, a Tensor or a tuple of Tensors")


def infer_schema(prototype_function: Callable, /, *, mutates_args, op_name=None) -> str:
    """The schema of a custom op read from a function's type annotations
    (``torch.library.infer_schema``).

    Examples
    --------
    >>> import torcia
    >>> from torcia.library import infer_schema
    >>> def f(x: torcia.Tensor, scale: float = 2.0) -> torcia.Tensor: ...
    >>> infer_schema(f, mutates_args=())
    '(Tensor x, float scale=2.0) -> Tensor'
    """
    args, returns = _infer(prototype_function, mutates_args)
    text = _schema_text(args, returns)
    return f"{op_name}{text}" if op_name else text


def _infer(fn: Callable, mutates_args) -> tuple[list[_Arg], int]:
    sig = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # an annotation naming what is not importable here
        hints = dict(getattr(fn, "__annotations__", {}))
    mutated = _mutated_names(mutates_args, sig.parameters)
    args = []
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise ValueError(f"infer_schema(func): Parameters of kind {p.kind} are not "
                             f"supported. Got func with signature {sig})")
        if p.name not in hints:
            raise ValueError(f"infer_schema(func): Parameter {p.name} must have a type "
                             f"annotation. Got func with signature {sig})")
        kind = _type_of(hints[p.name], f"Parameter {p.name}")
        args.append(_Arg(p.name, kind, p.default, p.kind is p.KEYWORD_ONLY,
                         mutated is True and kind.startswith("Tensor") or p.name in
                         (mutated if mutated is not True else ())))
    returns = _returns_of(hints.get("return", type(None)), "the function")
    return args, returns


def _mutated_names(mutates_args, parameters) -> set | bool:
    if mutates_args == "unknown":
        return True
    if isinstance(mutates_args, str):
        raise ValueError("mutates_args must be 'unknown' or an iterable of argument names, "
                         f"got the string {mutates_args!r}")
    names = set(mutates_args)
    for name in names:
        if name not in parameters:
            raise ValueError(f"mutates_args contains {name!r}, which is not an argument of "
                             f"the function ({', '.join(parameters)})")
    return names


def _schema_text(args: list[_Arg], returns: int) -> str:
    parts, star = [], False
    for a in args:
        if a.kwarg_only and not star:
            parts.append("*")
            star = True
        kind = a.type.replace("Tensor", "Tensor(a!)", 1) if a.mutated else a.type
        default = "" if a.default is inspect.Parameter.empty else f"={a.default!r}"
        parts.append(f"{kind} {a.name}{default}")
    ret = "()" if returns == 0 else "Tensor" if returns == 1 else \
        "(" + ", ".join(["Tensor"] * returns) + ")"
    return f"({', '.join(parts)}) -> {ret}"


def _split_top(text: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


_LITERALS = {"None": None, "True": True, "False": False}


def _parse_schema(schema: str) -> tuple[list[_Arg], int]:
    """The arguments and the number of returned tensors of ``"(Tensor x, *, int n=1) ->
    (Tensor, Tensor)"``."""
    text = schema.strip()
    head, arrow, ret = text.rpartition("->")
    head, ret = head.strip(), ret.strip()
    if not arrow or not (head.startswith("(") and head.endswith(")")):
        raise ValueError(f"schema {schema!r} is not of the form '(args) -> returns'")
    args, kwarg_only = [], False
    for item in _split_top(head[1:-1]):
        if item == "*":
            kwarg_only = True
            continue
        kind, _, rest = item.rpartition(" ")
        name, eq, default = rest.partition("=")
        if not kind:
            raise ValueError(f"schema {schema!r}: argument {item!r} has no type")
        mutated = "!" in kind
        kind = kind.split("(")[0] + ("?" if kind.endswith("?") else "")
        value = inspect.Parameter.empty
        if eq:
            value = _LITERALS.get(default, None) if default in _LITERALS else (
                _number(default) if default[:1].isdigit() or default[:1] == "-" else
                default.strip("'\""))
        args.append(_Arg(name, kind, value, kwarg_only, mutated))
    items = _split_top(ret[1:-1]) if ret.startswith("(") else [ret]
    if any(i not in ("Tensor",) for i in items if i):
        raise ValueError(f"schema {schema!r}: torcia's custom ops return None, a Tensor or a "
                         "tuple of Tensors")
    return args, len([i for i in items if i])


def _number(text: str):
    try:
        return int(text)
    except ValueError:
        return float(text)


# ---------------------------------------------------------------------------------------
# the op
# ---------------------------------------------------------------------------------------


class _Context:
    """The ``ctx`` that ``setup_context`` fills and ``backward`` reads (the API of
    :class:`torcia.autograd.function.FunctionCtx` that PyTorch's custom ops offer)."""

    def __init__(self, needs_input_grad):
        self.needs_input_grad = needs_input_grad
        self.saved_tensors = ()
        self.materialize_grads = True

    def save_for_backward(self, *tensors):
        self.saved_tensors = tensors

    def set_materialize_grads(self, value: bool):
        self.materialize_grads = bool(value)


class CustomOpDef:
    """A custom op made by :func:`custom_op`: call it as a function; ``register_fake``,
    ``register_autograd`` and ``register_kernel`` add to it (as decorators too).

    Examples
    --------
    >>> import torcia
    >>> from torcia.library import custom_op
    >>> @custom_op("demo::double", mutates_args=())
    ... def double(x: torcia.Tensor) -> torcia.Tensor:
    ...     return x * 2
    >>> double(torcia.ones(2)), double
    (tensor([2., 2.]), <CustomOpDef(demo::double)>)
    """

    def __init__(self, namespace: str, name: str, args: list[_Arg], returns: int,
                 fn: Callable, device_types):
        self._namespace, self._name = namespace, name
        self._args, self._returns = args, returns
        self._init_fn = fn
        self._device_types = None if device_types is None else (
            {device_types} if isinstance(device_types, str) else set(device_types))
        self._kernels: dict[str, Callable] = {}
        self._fake: Callable | None = None
        self._backward: Callable | None = None
        self._setup_context: Callable | None = None
        self._signature = inspect.Signature([inspect.Parameter(
            a.name, inspect.Parameter.KEYWORD_ONLY if a.kwarg_only else
            inspect.Parameter.POSITIONAL_OR_KEYWORD, default=a.default) for a in args])
        self.__name__ = name
        self.__qualname__ = name
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__wrapped__ = fn

    @property
    def _qualname(self) -> str:
        return f"{self._namespace}::{self._name}"

    @property
    def _op(self) -> str:
        """The name of the op's record and kernels."""
        return f"{self._namespace}::{self._name}"

    def __repr__(self):
        return f"<CustomOpDef({self._qualname})>"

    @property
    def default(self) -> CustomOpDef:
        """The op itself: ``torch.ops.<namespace>.<name>.default``, its only overload."""
        return self

    def _schema(self) -> str:
        return _schema_text(self._args, self._returns)

    # ----- calling ---------------------------------------------------------------------

    def __call__(self, *args, **kwargs):
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{self._qualname}{self._schema()}: {exc}") from None
        bound.apply_defaults()
        values = tuple(bound.arguments[a.name] for a in self._args)
        for a, v in zip(self._args, values, strict=True):
            if a.type == "Tensor" and not isinstance(v, Tensor) or (
                    a.type == "Tensor?" and v is not None and not isinstance(v, Tensor)):
                raise TypeError(f"{self._qualname}: argument {a.name!r} must be a Tensor, "
                                f"got {type(v).__name__}")
        if not any(isinstance(v, Tensor) for v in values):
            raise RuntimeError(f"{self._qualname} was called without a tensor argument: "
                               "torcia runs an op on the device of its tensors")
        result = call(self._op, values, {})
        for a, v in zip(self._args, values, strict=True):
            if a.mutated and isinstance(v, Tensor):
                v._vc[0] += 1
        return None if self._returns == 0 else result

    def _run(self, fn: Callable, values):
        """``fn`` called with the op's arguments, in schema order, the keyword-only ones by
        name."""
        args = [v for a, v in zip(self._args, values, strict=True) if not a.kwarg_only]
        kwargs = {a.name: v for a, v in zip(self._args, values, strict=True) if a.kwarg_only}
        return fn(*args, **kwargs)

    def _impl(self, device_type: str) -> Callable:
        fn = self._kernels.get(device_type)
        if fn is not None:
            return fn
        if self._device_types is None or device_type in self._device_types:
            return self._init_fn
        raise NotImplementedError(
            f"{self._qualname} has no kernel for device type {device_type!r}: it was "
            f"defined for {sorted(self._device_types)}; add one with register_kernel")

    def _kernel(self, device_type: str) -> Callable:
        """The kernel of the op on ``device_type``: the implementation run on tensors over
        the arrays it is given, with autograd off, its results handed back as arrays."""
        device = device_type if device_type == "cpu" else None
        tensor_args = [a.is_tensor for a in self._args]

        def kernel(*arrays):
            where = backend.canonical(device or device_type)
            inputs = [Tensor._make(x, where) if is_t and x is not None else x
                      for x, is_t in zip(arrays, tensor_args, strict=True)]
            with no_grad():
                out = self._run(self._impl(device_type), inputs)
            return self._arrays_of(out, inputs)

        kernel.__name__ = f"{self._name}_{device_type}"
        kernel.__qualname__ = kernel.__name__
        return kernel

    def _arrays_of(self, out, inputs):
        outs = out if isinstance(out, tuple) else (out,)
        if self._returns == 0:
            if out is not None:
                raise RuntimeError(f"{self._qualname} returns None by its schema, but its "
                                   f"implementation returned {type(out).__name__}")
            # an op that only writes into its arguments: its result is never read
            first = next(x for x in inputs if isinstance(x, Tensor))
            return first._data[:0] if first.dim() else first._data.reshape(1)[:0]
        if len(outs) != self._returns or not all(isinstance(o, Tensor) for o in outs):
            raise RuntimeError(f"{self._qualname} returns {self._schema().split('-> ')[1]} by "
                               f"its schema, but its implementation returned {out!r:.80}")
        seen = [x._vc for x in inputs if isinstance(x, Tensor)]
        for o in outs:
            # a view shares its base's version counter: an output aliasing an input or
            # another output is one of them, or a view of one
            if any(o._vc is vc for vc in seen):
                raise RuntimeError(
                    f"{self._qualname}: the output of a custom op must not be one of its "
                    "inputs or other outputs, nor a view of one; return a clone of it "
                    "instead (e.g. return x.clone())")
            seen.append(o._vc)
        arrays = tuple(o._data for o in outs)
        return arrays if self._returns > 1 else arrays[0]

    # ----- the registrations -----------------------------------------------------------

    def register_kernel(self, device_types, fn: Callable | None = None):
        """Make ``fn`` the op's implementation on ``device_types`` (a device type or a
        list of them); a decorator when ``fn`` is omitted."""
        def add(fn):
            for d in [device_types] if isinstance(device_types, str) else device_types:
                self._kernels[backend.device(d).type] = fn
            _install(self)
            return fn

        return add if fn is None else add(fn)

    def register_fake(self, fn: Callable | None = None, /, *, _stacklevel: int = 1,
                      allow_override: bool = False):
        """Give the op its fake implementation: a function of the same arguments that
        returns empty tensors of the outputs' shapes and dtypes. It runs on the "meta"
        device (PyTorch runs it on fake tensors under ``torch.compile``)."""
        def add(fn):
            if self._fake is not None and not allow_override:
                raise RuntimeError(f"register_fake(...): the operator {self._qualname} "
                                   "already has a fake impl registered")
            self._fake = fn
            return fn

        return add if fn is None else add(fn)

    def register_autograd(self, backward: Callable, /, *,
                          setup_context: Callable | None = None) -> None:
        """Give the op a derivative: ``setup_context(ctx, inputs, output)`` saves what
        ``backward(ctx, *grads)`` needs (``ctx.save_for_backward``, attributes, and
        ``ctx.needs_input_grad``, ``ctx.set_materialize_grads``); ``backward`` returns
        one gradient per argument of the op (None for those that get none). Here
        ``setup_context`` runs when the backward does, on the inputs and outputs the graph
        kept (the same tensors: an in-place change since is an error of the backward)."""
        if not callable(backward):
            raise TypeError(f"register_autograd: backward must be callable, got "
                            f"{type(backward).__name__}")
        if setup_context is not None and not callable(setup_context):
            raise TypeError("register_autograd: setup_context must be callable")
        self._backward, self._setup_context = backward, setup_context

    # ----- what the op record holds ----------------------------------------------------

    def _shape(self, *metas):
        """The record's shape function: the fake implementation on "meta" tensors."""
        if self._fake is None:
            raise RuntimeError(f"There was no fake impl registered for {self!r}. This is "
                               "necessary for the meta device and torch.compile to work. "
                               f"Please use `{self._name}.register_fake` to add an fake "
                               "impl.")
        inputs = [creation.empty(m.shape, dtype=from_numpy_dtype(m.dtype), device="meta")
                  if isinstance(m, _meta.Meta) else m for m in metas]
        out = self._run(self._fake, inputs)
        outs = out if isinstance(out, tuple) else (out,)
        if self._returns == 0:
            return (0,), next(m.dtype for m in metas if isinstance(m, _meta.Meta))
        pairs = tuple((tuple(o.shape), o._data.dtype) for o in outs)
        return pairs if self._returns > 1 else pairs[0]

    def _derivative(self, grads, *inputs, result, needs_input_grad):
        """The record's backward formula, in the engine's convention."""
        if self._backward is None:
            raise RuntimeError(f"Trying to backward through {self._namespace}."
                               f"{self._name}.default but no autograd formula was "
                               "registered. Please use register_autograd to add one.")
        outputs = result if isinstance(result, tuple) else (result,)
        ctx = _Context(needs_input_grad)
        if self._setup_context is not None:
            self._setup_context(ctx, tuple(inputs), result)
        if ctx.materialize_grads:
            grads = [creation.zeros_like(o) if g is None else g
                     for g, o in zip(grads, outputs, strict=True)]
        got = self._backward(ctx, *grads)
        got = got if isinstance(got, tuple) else (got,)
        if len(got) != len(self._args):
            raise RuntimeError(f"{self._qualname}: the backward given to register_autograd "
                               f"returned {len(got)} gradient(s); expected one per argument "
                               f"({len(self._args)}), None for those that get none")
        return got


# ---------------------------------------------------------------------------------------
# the built-in plugin that puts custom ops into the tables
# ---------------------------------------------------------------------------------------


def _record(op: CustomOpDef) -> OpDef:
    return OpDef(name=op._op, group="custom", inputs=tuple(a.name for a in op._args),
                 kernel=op._kernel("cpu"), shape=op._shape,
                 backward=op._derivative if op._returns else None,
                 differentiable=op._returns > 0,
                 doc=(op.__doc__ or f"The custom op {op._qualname}").strip())


class _CustomOpsPlugin:
    """Registers every custom op, through the hooks a plugin uses."""

    @plugins.hookimpl
    def torcia_register_ops(self, registry):
        for op in list(_OPS.values()):
            registry.add(op._op, _record(op))

    @plugins.hookimpl
    def torcia_register_kernels(self, registry):
        for op in list(_OPS.values()):
            _add_kernels(registry, op)


def _add_kernels(registry, op: CustomOpDef) -> None:
    for device_type in registry.backends:
        if device_type == "meta":
            registry.add(op._op, "meta", _meta.meta_kernel(op._op, op._shape, None))
        else:
            registry.add(op._op, device_type, op._kernel(device_type))


_plugin = _CustomOpsPlugin()

def _install(op: CustomOpDef) -> None:
    """Put ``op`` into the tables already built (those built later get it from the
    plugin's hooks)."""
    if not any(p is _plugin for _, p in plugins._state.builtins):
        plugins.register_builtin("custom_ops", _plugin)
    if backend._kernels_built.is_set():
        registry = backend.KernelRegistry(backend.backends.build())
        registry.current_plugin = "custom_ops"
        _add_kernels(registry, op)
    _oprecords.custom_op_added(op._op, _record(op))


# ---------------------------------------------------------------------------------------
# torch.library's functions
# ---------------------------------------------------------------------------------------


def _split_name(qualname: str) -> tuple[str, str]:
    if not isinstance(qualname, str) or "::" not in qualname:
        raise ValueError(f"Expected there to be a namespace in {qualname}, i.e. The operator "
                         "name should look something like ns::foo")
    namespace, _, name = qualname.partition("::")
    if not namespace.isidentifier() or not name.isidentifier() or "." in name:
        raise ValueError(f"custom_op: {qualname!r} is not 'namespace::name' with both parts "
                         "Python identifiers")
    return namespace, name


def custom_op(name: str, fn: Callable | None = None, /, *, mutates_args,
              device_types=None, schema: str | None = None):
    """Make ``fn`` a custom op named ``name`` (``"namespace::op"``), as
    ``torch.library.custom_op``: one op for dispatch and autograd, whose implementation
    runs with autograd off. Its schema comes from ``fn``'s type annotations, or from
    ``schema`` (``"(Tensor x, float k) -> Tensor"``); ``mutates_args`` names the tensor
    arguments it writes to (``"unknown"``: any of them). A decorator when ``fn`` is
    omitted.

    The op gets a derivative with :func:`register_autograd` (without one, its outputs
    still require grad when an input does, and backward through it raises, as in
    PyTorch), a meta implementation with :func:`register_fake`, and device-specific
    implementations with :func:`register_kernel`.

    Examples
    --------
    >>> import torcia
    >>> from torcia.library import custom_op
    >>> @custom_op("demo::scaled_sin", mutates_args=())
    ... def scaled_sin(x: torcia.Tensor, k: float) -> torcia.Tensor:
    ...     return x.sin() * k
    >>> def setup(ctx, inputs, output):
    ...     ctx.save_for_backward(inputs[0])
    ...     ctx.k = inputs[1]
    >>> def backward(ctx, grad):
    ...     x, = ctx.saved_tensors
    ...     return grad * x.cos() * ctx.k, None
    >>> scaled_sin.register_autograd(backward, setup_context=setup)
    >>> @scaled_sin.register_fake
    ... def _(x, k):
    ...     return torcia.empty_like(x)
    >>> x = torcia.zeros(3, requires_grad=True)
    >>> scaled_sin(x, 2.0).sum().backward()
    >>> x.grad, scaled_sin(torcia.empty(4, 5, device="meta"), 1.0).shape
    (tensor([2., 2., 2.]), torcia.Size([4, 5]))
    """
    namespace, short = _split_name(name)

    def define(fn):
        if schema is None:
            args, returns = _infer(fn, mutates_args)
        else:
            args, returns = _parse_schema(schema)
            named = mutates_args if mutates_args == "unknown" else set(mutates_args)
            args = [a._replace(mutated=a.mutated or (a.is_tensor and (
                named == "unknown" or a.name in named))) for a in args]
        if not any(a.is_tensor for a in args):
            raise ValueError(f"custom_op {name!r}: torcia's ops take at least one Tensor "
                             "argument (an op runs on the device of its tensors)")
        if any(a.type == "Tensor[]" or a.type == "Tensor[]?" for a in args):
            raise ValueError(f"custom_op {name!r}: a list of tensors as one argument is not "
                             "supported here; pass the tensors as separate arguments")
        if name in _OPS:
            raise RuntimeError(f"custom_op: the operator {name} was already defined in this "
                               "process")
        op = CustomOpDef(namespace, short, args, returns, fn, device_types)
        _OPS[name] = op
        _install(op)
        return op

    return define if fn is None else define(fn)


class OpNamespace:
    """``torch.ops.<namespace>``: the custom ops defined in ``namespace``, by name.

    Examples
    --------
    >>> import torcia
    >>> from torcia.library import OpNamespace, custom_op
    >>> @custom_op("demo_ns::plus_one", mutates_args=())
    ... def plus_one(x: torcia.Tensor) -> torcia.Tensor:
    ...     return x + 1
    >>> OpNamespace("demo_ns").plus_one.default(torcia.zeros(1))
    tensor([1.])
    """

    def __init__(self, name: str):
        self.name = name

    def __getattr__(self, op: str) -> CustomOpDef:
        found = _OPS.get(f"{self.name}::{op}")
        if found is None:
            raise AttributeError(f"'_OpNamespace' '{self.name}' object has no attribute "
                                 f"'{op}': no custom op {self.name}::{op} is defined")
        return found

    def __repr__(self):
        return f"<torch.ops.{self.name}>"


def _find(op) -> CustomOpDef:
    if isinstance(op, CustomOpDef):
        return op
    if isinstance(op, str):
        _split_name(op)
        if op in _OPS:
            return _OPS[op]
        raise ValueError(f"no custom op named {op!r} is defined (define it with "
                         "torch.library.custom_op first)")
    raise TypeError(f"expected a custom op or its name 'ns::op', got {type(op).__name__}")


def register_fake(op, fn: Callable | None = None, /, *, lib=None, _stacklevel: int = 1,
                  allow_override: bool = False):
    """:meth:`CustomOpDef.register_fake` of the op ``op`` (the op or its name), as
    ``torch.library.register_fake``; a decorator when ``fn`` is omitted."""
    return _find(op).register_fake(fn, allow_override=allow_override)


def register_autograd(op, backward: Callable, /, *, setup_context: Callable | None = None,
                      lib=None) -> None:
    """:meth:`CustomOpDef.register_autograd` of the op ``op`` (the op or its name), as
    ``torch.library.register_autograd``."""
    _find(op).register_autograd(backward, setup_context=setup_context)


def register_kernel(op, device_types, fn: Callable | None = None, /, *, lib=None):
    """:meth:`CustomOpDef.register_kernel` of the op ``op`` (the op or its name), as
    ``torch.library.register_kernel``; a decorator when ``fn`` is omitted."""
    return _find(op).register_kernel(device_types, fn)
