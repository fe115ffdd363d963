"""The op records and the fallbacks, below :mod:`torcia.library`, which publishes them.

- **Op records** (:class:`~torcia.library.OpDef`, :func:`op_records`, :func:`get_op`,
  :func:`primitives`): the built-in records derived from the op lists of :mod:`torcia.ops`,
  the NumPy reference kernels and the derivative table of the autograd engine, then those
  of the ops plugins define (:data:`plugin_ops`, filled through ``torcia_register_ops``).
- **Fallbacks** (:func:`fallback`, :func:`device_ops`, :func:`host_fallback`): what runs an
  op a device has no kernel of its own for.

The tables below fill in from here as this module loads (``import torcia`` loads it): the
meta device's record source, the autograd modes' registration, and the steps the
dispatcher runs around the plugins' kernels when it builds a kernel table (the kernels of
the ops plugins define first, the fallbacks last). A custom op, defined in
``torcia._custom_ops`` above, joins the records through :func:`custom_op_added`.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from torcia import _autograd_mode, _meta, _opdef, ops
from torcia import backend as _backend
from torcia._decompositions import DECOMPOSITIONS
from torcia._numpy_backend import Reference as ReferenceKernels
from torcia._opdef import OpDef
from torcia._ops import DECLARED as _DECLARED
from torcia._tensor import AUTOGRAD as _AUTOGRAD
from torcia._tensor import load_autograd as _load_autograd
from torcia.backend import FALLBACK_PROVIDER, get_backend
from torcia.plugins import Registry

_V = TypeVar("_V")

# ---------------------------------------------------------------------------------------
# op records
# ---------------------------------------------------------------------------------------


_ARITY = {"unary_float": ("input",), "unary_same": ("input",), "unary_bool": ("input",),
          "binary": ("input", "other"), "binary_float": ("input", "other"),
          "compare": ("input", "other")}


def op_groups() -> dict[str, tuple[str, ...]]:
    """Group name -> op names, read from the upper-case tuples of :mod:`torcia.ops`."""
    groups = {}
    for name, value in vars(ops).items():
        if (name.isupper() and name != "ALL" and isinstance(value, tuple) and value
                and all(isinstance(v, str) for v in value)):
            groups[name.lower()] = value
    return groups


def _signature(fn, group: str) -> tuple[tuple, dict]:
    if group in _ARITY:
        # the kernel names its inputs a, b, or is a ufunc (whose out=, where=... are
        # NumPy's): the inputs are the family's, the parameters a Python kernel's own but
        # out=, the in-place ops' destination (torcia_register_kernels), no op parameter
        inner = inspect.unwrap(fn)
        own = inspect.isfunction(inner) or inspect.ismethod(inner)
        params = _signature(fn, "")[1] if own else {}
        params.pop("out", None)
        return _ARITY[group], params
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # a NumPy ufunc
        return _ARITY.get(group, ()), {}
    inputs, params = [], {}
    for p in sig.parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            inputs.append("*" + p.name)
        elif p.kind is p.VAR_KEYWORD:
            continue
        elif p.default is p.empty and p.kind is not p.KEYWORD_ONLY:
            inputs.append(p.name)
        else:
            params[p.name] = None if p.default is p.empty else p.default
    return tuple(inputs), params


def _schema_from_formula(formula, inputs, params):
    """The inputs and parameters an op's backward formula names: its positional
    parameters after the gradient are the op's inputs, its keyword-only ones (but
    ``result`` and ``needs_input_grad``) the op's parameters, with the kernel's defaults.
    The kernel alone cannot tell a tensor input from a parameter without a default."""
    try:
        sig = inspect.signature(formula)
    except (TypeError, ValueError):
        return inputs, params
    found_inputs, found_params = [], {}
    for p in list(sig.parameters.values())[1:]:
        if p.kind is p.VAR_POSITIONAL:
            found_inputs.append("*" + p.name.lstrip("_"))
        elif p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            found_inputs.append(p.name.lstrip("_"))
        elif p.kind is p.KEYWORD_ONLY and p.name not in ("result", "needs_input_grad"):
            found_params[p.name] = params.get(p.name)
    if len(found_inputs) > len(inputs) + len(params) or not found_inputs:
        return inputs, params
    # the kernel's other arguments are parameters the formula does not need
    named = {n.lstrip("*") for n in found_inputs}
    kernel_args = [n for n in inputs if not n.startswith("*")] + list(params)
    for offset, name in enumerate(kernel_args):
        if offset >= len(found_inputs) and name not in named and name not in found_params:
            found_params[name] = params.get(name)
    return tuple(found_inputs), found_params


class _Records:
    def __init__(self):
        self.lock = threading.Lock()
        self.builtin: dict[str, OpDef] | None = None
        self.derivatives: set[str] = set()  # plugin ops whose formula the engine has
        self.with_engine = False  # whether ``builtin`` has the engine's formulas


_records = _Records()


def _build_builtin() -> dict[str, OpDef]:
    reference = ReferenceKernels().table()
    engine = _AUTOGRAD.engine
    records = {}
    for group, names in op_groups().items():
        if group == "not_differentiable":
            continue
        for name in names:
            if name in records:
                continue
            kernel = reference.get(name)
            declared = _DECLARED.get(name)
            if declared is not None:  # its schema says
                inputs, params = declared.inputs, dict(declared.params)
            else:
                inputs, params = _signature(kernel, group)
            differentiable = name not in ops.NOT_DIFFERENTIABLE
            backward = engine.derivative(name) if engine is not None and differentiable \
                else None
            # the forward formula comes from autograd's one forward table (an engine
            # without forward mode has none)
            forward = getattr(engine, "forward_derivative", None)
            jvp = forward(name) if forward is not None and backward is not None else None
            if backward is not None and group not in _ARITY and declared is None:
                inputs, params = _schema_from_formula(backward, inputs, params)
            doc = (getattr(kernel, "__doc__", None) or "").strip() if kernel is not None else ""
            fn = getattr(_opdef.PUBLIC, name, None)
            if callable(fn) and getattr(fn, "__doc__", None):
                doc = fn.__doc__.strip()
            records[name] = OpDef(
                name=name, group=group, inputs=inputs, params=params, kernel=kernel,
                shape=_meta.SHAPES.get(name),
                primitive=name not in DECOMPOSITIONS,
                decomposition=DECOMPOSITIONS.get(name),
                backward=backward, jvp=jvp, differentiable=differentiable,
                random=declared is not None and declared.random, doc=doc,
                samples=declared.samples if declared is not None else None,
                draws=declared.draws if declared is not None else None,
            )
    return records


class OpRegistry(Registry):
    """What ``torcia_register_ops`` fills: ``registry.define(name, kernel, ...)``."""

    def define(self, name: str, kernel: Callable, *, backward: Callable | None = None,
               shape: Callable | None = None, jvp: Callable | None = None,
               differentiable: bool | None = None, group: str = "plugin",
               doc: str | None = None, random: bool = False,
               samples: Callable | None = None, draws: Callable | None = None) -> OpDef:
        """Define the op ``name``.

        Parameters
        ----------
        name : str
            A new op name (a built-in one cannot be redefined; override its kernel through
            ``torcia_register_kernels`` instead), or its schema, as core declares its own
            ops (``torcia._opdef.define``): ``"softclip(Tensor x, *, float limit=1.0) ->
            Tensor"``; the arguments before ``*`` are the op's inputs, those after it its
            parameters with their defaults. Without a schema they are read from the
            kernel's signature (those with a default are parameters).
        kernel : callable
            The reference kernel on NumPy arrays: the tensor inputs positionally, the
            parameters as keywords (with their defaults); it runs on "cpu", and on other
            devices through :func:`host_fallback` until a plugin registers a kernel there.
        backward : callable, optional
            The backward formula, in the convention of ``torcia.autograd.derivatives``:
            ``backward(grad, *inputs, **params)`` returning one gradient per input. Its
            parameters after ``grad`` are the op's inputs, by position, then any of the
            kernel's parameters it needs, by name, declared positionally or keyword-only
            as you like (``def backward(grad, x, limit)`` and ``def backward(grad, x, *,
            limit)`` both receive the call's ``limit``), and the keywords ``result`` (the
            output) and ``needs_input_grad``. A parameter that is none of these, or fewer
            inputs than the op has, is a ``TypeError`` here, when the op is defined.
        shape : callable, optional
            ``shape(*input_metas, **params) -> (shape, numpy dtype)`` for the "meta"
            device; without it the meta device runs ``kernel`` on zero stand-ins.
        jvp : callable, optional
            The forward-mode formula, in the convention of
            ``torcia.autograd.forward_derivatives``: ``jvp(tangents, *inputs, result=...,
            **params)`` (one tangent or None per input) returning the output's tangent;
            without it, forward mode transposes ``backward``. It receives ``result`` and
            every parameter of the kernel by name: a ``jvp`` that cannot take one is a
            ``TypeError`` here.
        differentiable : bool, optional
            Whether the op has gradients; by default, whether ``backward`` is given.
        group : str
            The op's kind, as the groups of :mod:`torcia.ops`.
        doc : str, optional
            What it computes; the kernel's docstring by default.
        random : bool
            Whether the kernel draws from the random generator it is given as the
            parameter ``rng`` (a ``numpy.random.Generator``; keyword-only in the schema,
            or with a default in the kernel's signature): the op is not pure, so vmap
            batches its draws as its ``randomness`` says and the compiler never folds or
            reuses it (:attr:`OpDef.random`).
        samples : callable, optional
            ``samples(rng) -> [(args, params), ...]``: calls of ``kernel`` on host arrays
            drawn from the generator ``rng``, which ``pytest --torcia-device NAME`` (the
            device conformance kit) runs the op on, on the device against ``kernel``. An
            op whose inputs are plain tensors gets generated ones without it; one taking
            indices, windows or sequences needs its own to be checked at all.
        draws : callable, optional
            For a random op: ``draws(values, *args, **params) -> str | None``, what is
            wrong with ``values`` (the result of ``kernel(*args, **params)`` on a device,
            as a host array) as a draw of that call, or None when the op could have drawn
            them. The conformance kit checks a device's draws with it; without it, only
            their shape and dtype.
        """
        schema = None
        if "(" in name:
            name, *schema = _opdef.parse_schema(name)
        if name in ops.ALL:
            raise ValueError(f"op {name!r} is a built-in op; register a kernel for it with "
                             "torcia_register_kernels instead of defining it again")
        if not callable(kernel):
            raise TypeError(f"the kernel of op {name!r} must be callable, got "
                            f"{type(kernel).__name__}")
        if samples is not None and not callable(samples):
            raise TypeError(f"the samples of op {name!r} must be callable (samples(rng) -> "
                            f"[(args, params), ...]), got {type(samples).__name__}")
        if draws is not None and not callable(draws):
            raise TypeError(f"the draws of op {name!r} must be callable (draws(values, *args, "
                            f"**params) -> str | None), got {type(draws).__name__}")
        if draws is not None and not random:
            raise TypeError(f"op {name!r} gives draws= but is not declared random=True: only "
                            "a random op's values are checked by what they may be")
        inputs, params = schema if schema is not None else _signature(kernel, group)
        if random and "rng" not in params:
            raise TypeError(f"op {name!r} is declared random but its kernel takes no "
                            "parameter 'rng' (the generator it draws from)")
        if backward is not None:
            backward = _backward_as_declared(name, backward, inputs, params)
        if jvp is not None:
            _check_jvp(name, jvp, inputs, params)
        record = OpDef(
            name=name, group=group, inputs=inputs, params=params, kernel=kernel,
            backward=backward, jvp=jvp, shape=shape,
            differentiable=backward is not None if differentiable is None else differentiable,
            doc=(doc if doc is not None else (kernel.__doc__ or "")).strip(), random=random,
            samples=samples, draws=draws,
        )
        self.add(name, record)
        return record


#: What a formula may take by name besides the op's parameters.
_FORMULA_KEYWORDS = ("result", "needs_input_grad")


def _formula_parameters(name: str, what: str, fn: Callable):
    try:
        return list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        raise TypeError(f"the {what} of op {name!r} must be a Python function whose "
                        "parameters can be read") from None


def _backward_as_declared(name: str, fn: Callable, inputs: tuple, params: dict) -> Callable:
    """``fn`` in the engine's convention (the op's parameters keyword-only), whichever way
    it declares them; a ``TypeError`` naming what does not fit. The engine passes the
    inputs positionally and, by name, the keyword-only parameters a formula declares: a
    parameter declared positionally would keep its default, a silently wrong gradient."""
    declared = _formula_parameters(name, "backward", fn)[1:]
    count = sum(1 for i in inputs if not i.startswith("*"))
    variadic = any(i.startswith("*") for i in inputs)
    kinds = inspect.Parameter
    positional = [p for p in declared if p.kind in (kinds.POSITIONAL_ONLY,
                                                    kinds.POSITIONAL_OR_KEYWORD)]
    takes_rest = any(p.kind is kinds.VAR_POSITIONAL for p in declared)
    takes_all = any(p.kind is kinds.VAR_KEYWORD for p in declared)
    if len(positional) < count and not takes_rest:
        raise TypeError(
            f"the backward of op {name!r} takes {len(positional)} input(s) after the "
            f"gradient, but the op has {count} ({', '.join(inputs)})")
    moved = positional[count:] if not variadic else []
    keywords = [p for p in declared if p.kind is kinds.KEYWORD_ONLY]
    for p in moved + keywords:
        if p.name not in params and p.name not in _FORMULA_KEYWORDS:
            raise TypeError(
                f"the backward of op {name!r} has a parameter {p.name!r}, which is neither "
                f"an input ({', '.join(inputs) or 'none'}) nor a parameter "
                f"({', '.join(params) or 'none'}) of its kernel")
    if not moved and not takes_all:
        return fn
    # the engine's convention: inputs positional, the op's parameters keyword-only
    wanted = [p.name for p in moved] + [p.name for p in keywords]
    if takes_all:
        wanted += [k for k in params if k not in wanted]
    ahead = [p.name for p in moved]
    first = _formula_parameters(name, "backward", fn)[0]

    def backward(grad, *args, **kwargs):
        return fn(grad, *args, *(kwargs.pop(k) for k in ahead), **kwargs)

    backward.__signature__ = inspect.Signature(
        [first.replace(kind=kinds.POSITIONAL_OR_KEYWORD)]
        + [p.replace(kind=kinds.POSITIONAL_OR_KEYWORD, default=kinds.empty)
           for p in positional[:count]]
        + [p for p in declared if p.kind is kinds.VAR_POSITIONAL]
        + [kinds(k, kinds.KEYWORD_ONLY, default=params.get(k)) for k in wanted
           if k not in _FORMULA_KEYWORDS]
        + [kinds(k, kinds.KEYWORD_ONLY) for k in wanted if k in _FORMULA_KEYWORDS])
    backward.__name__ = getattr(fn, "__name__", "backward")
    backward.__qualname__ = getattr(fn, "__qualname__", backward.__name__)
    backward.__doc__ = fn.__doc__
    backward.__wrapped__ = fn
    return backward


def _check_jvp(name: str, fn: Callable, inputs: tuple, params: dict) -> None:
    """A ``TypeError`` now for a forward formula the engine could not call."""
    declared = _formula_parameters(name, "jvp", fn)[1:]
    kinds = inspect.Parameter
    if any(p.kind is kinds.VAR_KEYWORD for p in declared):
        return
    by_keyword = {p.name for p in declared if p.kind in (kinds.POSITIONAL_OR_KEYWORD,
                                                        kinds.KEYWORD_ONLY)}
    missing = [k for k in ("result", *params) if k not in by_keyword]
    if missing:
        raise TypeError(f"the jvp of op {name!r} is called with the keyword(s) "
                        f"{', '.join(missing)}, which it does not take")


#: The ops plugins define through ``torcia_register_ops``.
plugin_ops = OpRegistry("op", "torcia_register_ops")


def _install_derivatives(engine) -> None:
    """Give the engine the formulas of the ops plugins define (once each)."""
    for name, record in plugin_ops.build().items():
        if engine.derivative(name) is None and name not in _records.derivatives:
            engine.define_derivative(name, record.backward)
            define_jvp = getattr(engine, "define_forward_derivative", None)
            if record.jvp is not None and define_jvp is not None:
                define_jvp(name, record.jvp)
            _records.derivatives.add(name)


def _plugin_op_kernels(registry) -> None:
    """Put the reference kernels of the ops plugins define in every backend's table:
    on "cpu" as they are, elsewhere through the host fallback (at priority -10, so that
    a device plugin's own kernel wins); the "meta" device gets its own from the record."""
    for name, record in plugin_ops.build().items():
        for device_type in registry.backends:
            if device_type == "cpu":
                registry.current_plugin = None
                registry.add(name, "cpu", record.kernel, priority=0)
            elif device_type != "meta":
                registry.current_plugin = FALLBACK_PROVIDER
                registry.add(name, device_type, host_fallback(name, device_type,
                                                              record.kernel), priority=-10)
    registry.current_plugin = None
    if _AUTOGRAD.engine is not None:
        _install_derivatives(_AUTOGRAD.engine)


def op_records() -> dict[str, OpDef]:
    """Every op: the built-in ones, derived from :mod:`torcia.ops`, the reference kernels
    and the derivative table, then those defined by plugins.

    Examples
    --------
    >>> from torcia import library
    >>> "matmul" in library.op_records()
    True
    """
    built = _records.builtin
    if built is None or (not _records.with_engine and _AUTOGRAD.engine is not None):
        with _records.lock:
            if _AUTOGRAD.engine is None:
                try:
                    _load_autograd()
                except RuntimeError:
                    pass  # without autograd the records have no backward formulas
            _records.builtin = built = _build_builtin()
            _records.with_engine = _AUTOGRAD.engine is not None
    extra = plugin_ops.build()
    if not extra:
        return built
    return {**built, **extra}


def primitives() -> list[str]:
    """The names of the primitive ops: what a device backend must implement (every other
    built-in op has a default decomposition into these).

    Examples
    --------
    >>> import torcia
    >>> from torcia import library
    >>> "add" in library.primitives(), "addcmul" in library.primitives()
    (True, False)
    """
    return sorted(n for n, r in op_records().items() if r.primitive and n in ops.ALL)


_meta.RECORD_SOURCES.append(op_records)


def get_op(name: str) -> OpDef:
    """The record of one op, or a KeyError listing close names.

    Examples
    --------
    >>> import torcia.library
    >>> torcia.library.get_op("add").name
    'add'
    """
    records = op_records()
    try:
        return records[name]
    except KeyError:
        raise KeyError(_opdef.no_op(name, records)) from None


def op_table(table: str, entries: Mapping[str, _V], *,
             optional: Iterable[str] = ()) -> dict[str, _V]:
    """The table ``entries`` (op name -> what a part keeps for the op: a batching rule, a
    C++ expression, an ONNX converter) with each name resolved to its op record: how a
    part builds a table of its own keyed by the ops, at the moment it builds it. A name
    no record has (a misspelt op, or one renamed or removed since the table was written)
    is a KeyError naming ``table`` and the op, rather than an entry nothing ever reads.

    ``optional`` names the ops of the table that a plugin defines (torcia-ao's quantized
    ops in the ONNX exporter's converters): each is left out while no installed plugin
    defines it.

    Examples
    --------
    >>> from torcia import library
    >>> library.op_table("my rules", {"exp": "e^x", "quantize_per_tensor": "q"},
    ...                  optional=["quantize_per_tensor"])["exp"]
    'e^x'
    >>> library.op_table("my rules", {"expo": "e^x"})
    Traceback (most recent call last):
    ...
    KeyError: "my rules: no op named 'expo'; similar: exp, exp2, expand, expm1"
    """
    records = op_records()
    optional = frozenset(optional)
    resolved = {}
    for name, value in entries.items():
        record = records.get(name)
        if record is not None:
            resolved[record.name] = value
        elif name not in optional:
            raise KeyError(f"{table}: {_opdef.no_op(name, records)}")
    return resolved


def _derivatives_for(mode) -> None:
    if plugin_ops._entries is not None:
        _install_derivatives(mode)


_autograd_mode.ON_REGISTER.append(_derivatives_for)


def custom_op_added(name: str, record: OpDef) -> None:
    """Called by ``torcia._custom_ops`` with each custom op defined: one defined after the
    op records were built joins them (those built later get it from the custom ops'
    plugin), and the engine gets its derivative."""
    if plugin_ops._entries is not None:
        plugin_ops.current_plugin = "custom_ops"
        plugin_ops.add(name, record)
        plugin_ops.current_plugin = None
    if _AUTOGRAD.engine is not None:
        _install_derivatives(_AUTOGRAD.engine)



# ---------------------------------------------------------------------------------------
# fallbacks: what runs an op a device has no kernel of its own for
# ---------------------------------------------------------------------------------------
#
# A device declares its fallback when it registers its backend (``Backend(fallback=...)``)
# and registers kernels for the ops it implements; once every plugin has registered its
# kernels, ``_install_fallbacks`` gives each "host" or "reference" device the fallback's
# kernel for every op it lacks. A kernel that covers only some inputs (dtypes, ranks) hands
# the others to ``fallback(op, device_type, itself)``: the one way back, for every device.


@functools.cache
def _reference_table() -> dict[str, Callable]:
    return ReferenceKernels().table()


def _install_fallbacks(registry) -> None:
    """Give each "host" or "reference" device the kernels of its declared fallback for
    the built-in ops no plugin registered a kernel for."""
    registry.current_plugin = FALLBACK_PROVIDER
    for backend in registry.backends.values():
        if backend.fallback == "host":
            table = {op: host_fallback(op, backend.name, fn)
                     for op, fn in _reference_table().items()}
        elif backend.fallback == "reference":
            ref = ReferenceKernels()
            ref.xp = backend.xp
            table = ref.table()
        else:
            continue
        for op, fn in table.items():
            if op not in backend.kernels:
                registry.add(op, backend.name, fn, priority=_FALLBACK_PRIORITY)
        if backend.fallback == "reference":
            # the ops and helpers the reference kernels are written with (the products of
            # a convolution, the cell an LSTM layer steps, ``logsumexp_rows``) run the
            # device's own kernels: an instance attribute shadows the method for the calls
            # ``self.op(...)``, the fallback keeps the method
            for op, fn in list(backend.kernels.items()):
                method = getattr(ReferenceKernels, op, None)
                if callable(method) and getattr(fn, "__self__", None) is not ref:
                    table.setdefault(op, method.__get__(ref))
                    setattr(ref, op, fn)
        backend._fallbacks = table
    registry.current_plugin = None


#: Below every kernel a plugin registers.
_FALLBACK_PRIORITY = -(2 ** 31)


def fallback(op: str, device_type: str, kernel: Callable | None = None) -> Callable:
    """What runs ``op`` on ``device_type`` where ``kernel`` does not: the one fallback of
    device plugins.

    A device declares its fallback with its backend, ``Backend(..., fallback=...)``, and
    registers kernels for the ops it implements; every other op runs through the fallback:
    ``"reference"``, the reference kernel on the device's array module (its inner ops on
    the device's kernels); ``"host"``, the reference kernel on the host with the arrays
    copied there and back (PyTorch's boxed CPU fallback); ``"decompose"``, a composite
    op's decomposition into primitives. A kernel that covers only some inputs (dtypes,
    ranks) hands the others on with ``library.fallback(op, device_type, itself)(...)``.

    Parameters
    ----------
    op : str
        The op's name.
    device_type : str
        The device, e.g. ``"cpu"``.
    kernel : callable, optional
        The kernel that hands the call on: for an op without a reference kernel (an
        optimizer's multi-tensor step), the kernel registered below it runs.

    Returns
    -------
    callable
        A kernel: arrays of the device positionally, the op's parameters as keywords.

    Raises
    ------
    NotImplementedError
        When nothing but ``kernel`` runs ``op`` on the device.

    Examples
    --------
    >>> import numpy as np
    >>> from torcia import library
    >>> library.fallback("exp", "cpu")(np.zeros(2))
    array([1., 1.])
    """
    backend = get_backend(device_type)
    found = backend._fallbacks.get(op)
    if found is not None:
        return found
    ranked = backend._ranked.get(op, ())
    for i, entry in enumerate(ranked[:-1]):
        if kernel is not None and entry[2] == kernel:  # bound methods compare equal only
            return ranked[i + 1][2]
    record = op_records().get(op)
    if record is not None and record.decomposition is not None:
        raise NotImplementedError(
            f"op {op!r} on device type {device_type!r} runs through its decomposition, on "
            "tensors: call the op (torcia.library.call) instead of a kernel")
    raise NotImplementedError(
        f"op {op!r} has no fallback on device type {device_type!r}: the device declares "
        f"fallback={backend.fallback!r} and no other kernel is registered for it")


def device_ops(device_type: str) -> dict[str, str]:
    """How ``device_type`` runs each op: ``"native"`` (a kernel a plugin registered for
    it), ``"fallback"`` (its declared fallback), ``"decomposed"`` (a composite op through
    its decomposition into primitives) or ``"missing"`` (not at all).

    Examples
    --------
    >>> from torcia import library
    >>> library.device_ops("cpu")["matmul"]
    'native'
    """
    backend = get_backend(device_type)
    kernels, providers = backend.kernels, backend.kernel_providers
    out = {}
    for op, record in op_records().items():
        if op in kernels:
            out[op] = "fallback" if providers.get(op) == FALLBACK_PROVIDER else "native"
        elif record.decomposition is not None:
            out[op] = "decomposed"
        else:
            out[op] = "missing"
    return out


def host_fallback(op: str, device_type: str, kernel: Callable | None = None) -> Callable:
    """A kernel for ``device_type`` that runs ``op``'s reference kernel on the host.

    The arrays of the device are copied to host memory, the NumPy reference kernel runs,
    and its result is copied back. A device that declares ``Backend(fallback="host")``
    gets it for every op it has no kernel for; a device plugin may also register it for
    single ops. ``kernel`` replaces the reference kernel (an op a plugin defines).

    Examples
    --------
    >>> from torcia import library
    >>> kernel = library.host_fallback("erfinv", "cpu")
    >>> import numpy as np
    >>> float(kernel(np.array([0.0]))[0])
    0.0
    """
    fn = kernel
    if fn is None:
        try:
            fn = _reference_table()[op]
        except KeyError:
            raise KeyError(f"op {op!r} has no reference kernel to fall back to") from None

    def to_host(backend, x):
        if isinstance(x, (list, tuple)):
            return type(x)(to_host(backend, v) for v in x)
        if backend.xp is not None and isinstance(x, getattr(backend.xp, "ndarray", ())):
            return backend.to_host(x)
        return x

    def fallback(*args, **params):
        backend = get_backend(device_type)
        out = fn(*(to_host(backend, a) for a in args), **params)
        if isinstance(out, tuple):
            return tuple(backend.from_host(o) for o in out)
        return backend.from_host(out)

    fallback.__name__ = f"{op}_host_fallback"
    fallback.__qualname__ = fallback.__name__
    return fallback


_backend.BEFORE_PLUGIN_KERNELS.append(_plugin_op_kernels)
_backend.AFTER_PLUGIN_KERNELS.append(_install_fallbacks)
