"""Compiled functions and modules: ``trace``, ``script``, ``save``, ``load``, ``freeze``
and ``optimize_for_inference``, on torcia.export's programs.

A compiled module holds one or more :class:`~torcia.export.ExportedProgram` and runs the
first whose guards its inputs pass. ``trace`` captures once, every input size dynamic
where the program follows it (``Dim.AUTO``) and the values Python reads taken as
constants with a :class:`TracerWarning`, as TorchScript's tracer does. ``script`` reads the
source first (data-dependent control flow is a :class:`NotSupportedError` naming the
line) and captures at the first call of each input signature, with ``is_scripting()``
true. Parameters are shared with the module compiled (or held, for a loaded one), so
``load_state_dict`` and optimizer steps reach the programs.
"""

from __future__ import annotations

import builtins
import functools
import inspect
import json

import torcia
import torcia.export
from torcia import nn
from torcia.export import Dim, ExportError, named_state, passes, register_state
from torcia.jit import _frontend
from torcia.jit._frontend import NotSupportedError
from torcia.jit._markers import FunctionModifiers, capturing, get_torchscript_modifier

#: the extra file of a saved program that says what torcia.jit.load rebuilds
_MARK = "torcia.jit.json"
#: the program a compiled callable ran last, in any of them (last_executed_optimized_graph)
_last_run: list = [None]


class TracerWarning(Warning):
    """Warned where tracing takes a value Python read from a tensor as a constant
    (``torch.jit.TracerWarning``).

    Examples
    --------
    >>> import torcia
    >>> issubclass(torcia.jit.TracerWarning, Warning)
    True
    """


class TracingCheckError(Exception):
    """A traced program gave other outputs than the eager function on ``check_inputs``
    (``torch.jit.TracingCheckError``)."""

    def __init__(self, graph_diff_error, tensor_compare_error, extra_msg=None):
        self.message = "Tracing failed sanity checks!\n"
        if extra_msg is not None:
            self.message += extra_msg + "\n"
        for part in (graph_diff_error, tensor_compare_error):
            if part is not None:
                self.message += part + "\n"
        super().__init__(self.message)


for _cls in (TracerWarning, TracingCheckError):
    _cls.__module__ = "torcia.jit"


def _auto_shapes(value):
    """A ``dynamic_shapes`` entry making every size of every tensor in ``value`` AUTO."""
    if isinstance(value, torcia.Tensor):
        return {axis: Dim.AUTO for axis in range(value.dim())}
    if isinstance(value, (list, tuple)):
        return type(value)(_auto_shapes(v) for v in value)
    if isinstance(value, dict):
        return {k: _auto_shapes(v) for k, v in value.items()}
    return None


def _capture(module, args, kwargs, kind):
    """An :class:`~torcia.export.ExportedProgram` of ``module`` on these inputs, every
    size AUTO; ``kind`` "trace" takes values read as constants, "script" refuses them."""
    bound = inspect.signature(module.forward).bind(*args, **kwargs)
    shapes = {name: _auto_shapes(v) for name, v in bound.arguments.items()}
    with capturing(kind):
        if kind == "trace":
            return torcia.export.export(module, tuple(args), kwargs, dynamic_shapes=shapes,
                                        on_data_read=TracerWarning)
        try:
            return torcia.export.export(module, tuple(args), kwargs, dynamic_shapes=shapes)
        except ExportError as exc:
            raise NotSupportedError(f"torcia.jit.script cannot compile this call: {exc}") \
                from None


class _Function(nn.Module):
    """A function (or a module's method) as a module, for capture: its ``forward`` has
    the function's signature, so the guards name its arguments; tensors it reads from
    its closure become the program's constants."""

    def __init__(self, fn, owner=None):
        super().__init__()
        if owner is not None:
            self.owner = owner  # the method's module: its parameters are the program's
        object.__setattr__(self, "forward", functools.wraps(fn)(
            lambda *args, **kwargs: fn(*args, **kwargs)))


class _Programs:
    """The programs of one compiled callable, and how new ones are made."""

    def __init__(self, make=None, frozen=False, backend=None):
        self.make = make  # (args, kwargs) -> ExportedProgram, or None: fixed programs
        self.frozen = frozen
        self.backend = backend
        self.entries: list = []  # (ExportedProgram, its module)
        self.last = None

    def add(self, ep):
        if self.frozen:
            ep = passes.freeze(ep)
        if self.backend is not None:
            ep = passes.with_backend(ep, self.backend)
        self.entries.append((ep, ep.module()))
        return ep

    def __call__(self, args, kwargs):
        failure = None
        for ep, module in self.entries:
            try:
                out = module(*args, **kwargs)
            except (AssertionError, TypeError) as exc:
                if not str(exc).startswith(("Guard failed", "the inputs' structure")):
                    raise
                failure = exc
                continue
            self.last = _last_run[0] = ep
            return out
        if self.make is None:
            raise failure
        ep = self.add(self.make(args, kwargs))
        self.last = _last_run[0] = ep
        return self.entries[-1][1](*args, **kwargs)

    def current(self, what: str):
        if self.last is None and self.entries:
            self.last = self.entries[-1][0]
        if self.last is None:
            raise RuntimeError(f"{what} has not run yet: torcia.jit.script captures a "
                               "program at the first call of each input signature (pass "
                               "example_inputs to script, or call it once)")
        return self.last


class ScriptFunction:
    """A compiled function: :func:`script` of a function or :func:`trace` of one
    (``torch.jit.ScriptFunction``). ``graph`` and ``code`` show its program (for a
    scripted function, that of the last call's input signature).

    Examples
    --------
    >>> import torcia
    >>> f = torcia.jit.script(lambda x: x + 1)
    >>> type(f).__name__, f(torcia.zeros(1)).tolist()
    ('ScriptFunction', [1.0])
    >>> print(f.code)
    def forward(self, x):
        v1 = torcia.ops.add(x, 1)
        return v1
    <BLANKLINE>
    """

    def __init__(self, fn, programs: _Programs, name: str | None = None):
        if fn is not None:
            functools.update_wrapper(self, fn)
        self._fn = fn
        self._programs = programs
        self._name = name or getattr(fn, "__name__", "forward")

    @property
    def name(self) -> str:
        return self._name

    def __call__(self, *args, **kwargs):
        return self._programs(args, kwargs)

    @property
    def graph(self):
        """The program's graph (:class:`torcia.export.ExportGraph`)."""
        return self._programs.current(self._name).graph

    @property
    def code(self) -> str:
        """The program as Python-like source."""
        return self._programs.current(self._name).module().code

    def save(self, f, _extra_files=None) -> None:
        """Write the program to ``f`` (:func:`torcia.jit.save`)."""
        save(self, f, _extra_files)


class ScriptModule(nn.Module):
    """Base class of compiled modules (``torch.jit.ScriptModule``)."""


class RecursiveScriptModule(ScriptModule):
    """A compiled module (``torch.jit.RecursiveScriptModule``): the parameters and
    buffers of the module it was made from, under the same names, and a ``forward`` that
    runs its programs. ``graph`` and ``code`` show the program last run.

    Examples
    --------
    >>> import torcia
    >>> m = torcia.jit.trace(torcia.nn.Linear(3, 2), torcia.ones(4, 3))
    >>> sorted(m.state_dict()), m(torcia.ones(7, 3)).shape
    (['bias', 'weight'], torcia.Size([7, 2]))
    """

    def __init__(self, programs: _Programs, original_name: str, state: dict, kinds: dict,
                 training: bool = False, original_module: nn.Module | None = None):
        super().__init__()
        self._programs = programs
        self.original_name = original_name
        # not a submodule: its parameters are this module's already
        object.__setattr__(self, "_original_module", original_module)
        register_state(self, state, kinds)
        self.train(training)

    @property
    def original_module(self) -> nn.Module | None:
        """The module this one was compiled from (its parameters are this one's), or
        None for a loaded or frozen one: graph-mode quantization
        (``torcia.ao.quantization.quantize_jit``) transforms it."""
        return self._original_module

    def forward(self, *args, **kwargs):
        return self._programs(args, kwargs)

    @property
    def graph(self):
        """The graph of the program last run (:class:`torcia.export.ExportGraph`)."""
        return self._programs.current(self.original_name).graph

    @property
    def inlined_graph(self):
        return self.graph

    @property
    def code(self) -> str:
        """The program last run as Python-like source."""
        return self._programs.current(self.original_name).module().code

    def save(self, f, _extra_files=None) -> None:
        """Write the module to ``f`` (:func:`torcia.jit.save`)."""
        save(self, f, _extra_files)

    def _replace(self, programs: _Programs) -> RecursiveScriptModule:
        """A module like this one running ``programs`` (state from their first)."""
        ep = programs.entries[0][0] if programs.entries else None
        state = {k: v for k, v in self.state_dict(keep_vars=True).items()} if ep is None \
            else ep.state_dict
        kinds = {k: ("parameter" if isinstance(v, nn.Parameter) else "buffer")
                 for k, v in state.items()} if ep is None else ep._kinds
        return type(self)(programs, self.original_name, state, kinds, self.training)


class TopLevelTracedModule(RecursiveScriptModule):
    """What :func:`trace` returns for a module (``torch.jit.TopLevelTracedModule``)."""


TracedModule = TopLevelTracedModule


# ---------------------------------------------------------------------------------------
# script
# ---------------------------------------------------------------------------------------


def script(obj, optimize=None, _frames_up=0, _rcb=None, example_inputs=None):
    """Compile a function or module (``torch.jit.script``).

    The source is read first: control flow that depends on tensor values (``if
    x.sum() > 0:``) is a :class:`NotSupportedError` naming its line. Each call with a new
    input signature (structure, dtypes, ranks, and sizes the program cannot follow)
    captures a program, with :func:`is_scripting` true while it runs; later calls run the
    program. ``@torcia.jit.export`` methods of a module are compiled the same way.
    Classes are returned as they are.

    Parameters
    ----------
    obj : callable or Module
        What to compile.
    example_inputs : list, optional
        Tuples of inputs to capture programs for now rather than at the first calls.

    Examples
    --------
    >>> import torcia
    >>> @torcia.jit.script
    ... def scale(x, k: float = 2.0):
    ...     return x * k if x.dim() > 1 else x
    >>> scale(torcia.ones(2, 2)).tolist()
    [[2.0, 2.0], [2.0, 2.0]]
    >>> @torcia.jit.script
    ... def relu_if_positive(x):
    ...     if x.sum() > 0:
    ...         return x.relu()
    ...     return x
    Traceback (most recent call last):
    ...
    torcia.jit.NotSupportedError: torcia.jit.script cannot compile relu_if_positive: ...
    """
    if builtins.isinstance(obj, (ScriptFunction, ScriptModule, type)):
        return obj
    if builtins.isinstance(obj, nn.Module):
        return _script_module(obj, example_inputs)
    if not callable(obj):
        raise RuntimeError(f"Type '{type(obj).__name__}' cannot be compiled since it is not "
                           "a function, a class or an nn.Module")
    _frontend.check(obj)
    wrapper = _Function(obj)
    programs = _Programs(lambda a, k: _capture(wrapper, a, k, "script"))
    fn = ScriptFunction(obj, programs)
    for example in example_inputs or ():
        programs.add(programs.make(tuple(example), {}))
    return fn


def _script_module(module: nn.Module, example_inputs) -> RecursiveScriptModule:
    _frontend.check(type(module).forward, owner=module,
                    name=f"{type(module).__qualname__}.forward")
    exported = [n for n in dir(type(module))
                if get_torchscript_modifier(getattr(type(module), n, None))
                == FunctionModifiers.EXPORT]
    for n in exported:
        _frontend.check(getattr(type(module), n), owner=module,
                        name=f"{type(module).__qualname__}.{n}")
    programs = _Programs(lambda a, k: _capture(module, a, k, "script"))
    state, kinds = named_state(module)
    scripted = RecursiveScriptModule(programs, type(module).__name__, state, kinds,
                                     module.training, module)
    for n in exported:
        wrapper = _Function(getattr(module, n), module)
        method = ScriptFunction(getattr(module, n), _Programs(
            functools.partial(lambda w, a, k: _capture(w, a, k, "script"), wrapper)), n)
        object.__setattr__(scripted, n, method)
    for example in example_inputs or ():
        programs.add(programs.make(tuple(example), {}))
    return scripted


# ---------------------------------------------------------------------------------------
# trace
# ---------------------------------------------------------------------------------------


def trace(func, example_inputs=None, optimize=None, check_trace=True, check_inputs=None,
          check_tolerance=1e-5, strict=True, _force_outplace=False, _module_class=None,
          _compilation_unit=None, example_kwarg_inputs=None, _store_inputs=True):
    """Capture ``func`` (a module or function) on example inputs (``torch.jit.trace``).

    The ops the call runs are recorded; every input size the program follows stays
    dynamic (a batch or sequence length), the others are static. Python reading a
    tensor's values takes them as constants of the program, with a
    :class:`TracerWarning` naming the line. :func:`is_tracing` is true while it runs.

    Returns
    -------
    TopLevelTracedModule or ScriptFunction
        The first for a module, the second for a function.

    Examples
    --------
    >>> import torcia
    >>> net = torcia.nn.Sequential(torcia.nn.Linear(4, 3), torcia.nn.ReLU()).eval()
    >>> traced = torcia.jit.trace(net, torcia.randn(2, 4))
    >>> [n.op for n in traced.graph.nodes]
    ['linear', 'relu']
    >>> x = torcia.randn(5, 4)
    >>> torcia.equal(traced(x), net(x))
    True
    """
    if example_inputs is None and example_kwarg_inputs is None:
        raise RuntimeError("example_inputs and example_kwarg_inputs cannot both be None")
    if builtins.isinstance(func, ScriptModule):
        return func
    if builtins.isinstance(example_inputs, torcia.Tensor):
        example_inputs = (example_inputs,)
    args = tuple(example_inputs) if example_inputs is not None else ()
    kwargs = dict(example_kwarg_inputs or {})
    module = func if builtins.isinstance(func, nn.Module) else _Function(func)
    ep = _capture(module, args, kwargs, "trace")
    programs = _Programs()
    programs.add(ep)
    if builtins.isinstance(func, nn.Module):
        traced = TopLevelTracedModule(programs, type(func).__name__, ep.state_dict,
                                      ep._kinds, func.training, func)
    else:
        traced = ScriptFunction(func, programs)
    for inputs in check_inputs or ():
        inputs = (inputs,) if builtins.isinstance(inputs, torcia.Tensor) else tuple(inputs)
        _check(traced, func, inputs, check_tolerance)
    return traced


def trace_module(mod, inputs, **kwargs):
    """Trace ``mod``'s methods: ``inputs`` maps a method's name to its example inputs
    (``torch.jit.trace_module``); ``forward``'s program runs the module.

    Examples
    --------
    >>> import torcia
    >>> m = torcia.jit.trace_module(torcia.nn.Tanh(), {"forward": torcia.zeros(2)})
    >>> m(torcia.zeros(2)).tolist()
    [0.0, 0.0]
    """
    if "forward" not in inputs:
        raise ValueError("trace_module: inputs must name 'forward'")
    traced = trace(mod, inputs["forward"], **kwargs)
    for name, example in inputs.items():
        if name != "forward":
            example = (example,) if builtins.isinstance(example, torcia.Tensor) else example
            method = trace(_Function(getattr(mod, name), mod), tuple(example))
            object.__setattr__(traced, name, ScriptFunction(
                getattr(mod, name), method._programs, name))
    return traced


def _check(traced, func, inputs, tolerance) -> None:
    with torcia.no_grad():
        got, want = traced(*inputs), func(*inputs)
    got_flat = got if builtins.isinstance(got, (tuple, list)) else (got,)
    want_flat = want if builtins.isinstance(want, (tuple, list)) else (want,)
    for g, w in zip(got_flat, want_flat):
        if builtins.isinstance(w, torcia.Tensor) and not torcia.allclose(
                g, w, rtol=tolerance, atol=tolerance):
            raise TracingCheckError(None, "Tensor-valued outputs differ: the traced "
                                    "program gives other values than the Python function "
                                    "on check_inputs (data-dependent control flow?)")


# ---------------------------------------------------------------------------------------
# save, load, freeze
# ---------------------------------------------------------------------------------------


def _program_of(m) -> torcia.export.ExportedProgram:
    if builtins.isinstance(m, (ScriptFunction, RecursiveScriptModule)):
        what = m.name if builtins.isinstance(m, ScriptFunction) else m.original_name
        return m._programs.current(what)
    raise TypeError(f"torcia.jit.save expects a ScriptModule or ScriptFunction (from "
                    f"torcia.jit.script or torcia.jit.trace), got {type(m).__name__}")


def save(m, f, _extra_files=None) -> None:
    """Write a compiled module or function to ``f`` (``torch.jit.save``): its program
    (for a scripted one, that of the last input signature it ran), parameters and
    buffers, in :func:`torcia.export.save`'s format.

    Examples
    --------
    >>> import io, torcia
    >>> m = torcia.jit.trace(torcia.nn.Linear(2, 2), torcia.ones(1, 2))
    >>> buf = io.BytesIO()
    >>> torcia.jit.save(m, buf)
    >>> _ = buf.seek(0)
    >>> loaded = torcia.jit.load(buf)
    >>> torcia.equal(loaded(torcia.ones(3, 2)), m(torcia.ones(3, 2)))
    True
    """
    ep = _program_of(m)
    if builtins.isinstance(m, ScriptFunction):
        mark = {"kind": "function", "name": m.name}
    else:
        mark = {"kind": "module", "name": m.original_name, "training": m.training}
    extra = {str(k): v if builtins.isinstance(v, str) else v.decode()
             for k, v in (_extra_files or {}).items()}
    extra[_MARK] = json.dumps(mark)
    torcia.export.save(ep, f, extra_files=extra)


def load(f, map_location=None, _extra_files=None, _restore_shapes=False):
    """Read what :func:`save` wrote (``torch.jit.load``): a
    :class:`RecursiveScriptModule` (or :class:`ScriptFunction`) that runs without the
    model's source. ``_extra_files`` (a dict of names) is filled with the extra files.

    Examples
    --------
    >>> import io, torcia
    >>> buf = io.BytesIO()
    >>> torcia.jit.save(torcia.jit.trace(torcia.nn.ReLU(), torcia.zeros(2)), buf)
    >>> _ = buf.seek(0)
    >>> torcia.jit.load(buf)(torcia.tensor([-1.0, 1.0])).tolist()
    [0.0, 1.0]
    """
    if map_location is not None and torcia.device(map_location).type != "cpu":
        raise RuntimeError(f"torcia.jit.load runs programs on the cpu only (map_location="
                           f"{map_location!r})")
    names = {_MARK: ""}
    names.update({k: "" for k in (_extra_files or {})})
    ep = torcia.export.load(f, extra_files=names)
    if _extra_files is not None:
        for k in _extra_files:
            _extra_files[k] = names.get(k, "")
    mark = json.loads(names[_MARK]) if names[_MARK] else {"kind": "module",
                                                          "name": "ExportedProgram",
                                                          "training": False}
    programs = _Programs()
    programs.add(ep)
    if mark["kind"] == "function":
        return ScriptFunction(None, programs, mark["name"])
    return RecursiveScriptModule(programs, mark["name"], ep.state_dict, ep._kinds,
                                 mark.get("training", False))


def freeze(mod, preserved_attrs=None, optimize_numerics: bool = True):
    """A compiled module with its parameters and buffers as constants of its programs
    and each convolution's BatchNorm folded into it (``torch.jit.freeze``).

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> net = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.ReLU()).eval()
    >>> frozen = torcia.jit.freeze(torcia.jit.trace(net, torcia.randn(1, 1, 5, 5)))
    >>> [n.op for n in frozen.graph.nodes], len(list(frozen.parameters()))
    (['conv', 'relu'], 0)
    """
    if not builtins.isinstance(mod, RecursiveScriptModule):
        raise RuntimeError("Freezing expects a ScriptModule as input. Please use "
                           "torch.jit.script or torch.jit.trace to script your 'nn.Module'.")
    if mod.training:
        raise RuntimeError("Freezing is currently only implemented for modules in eval "
                           "mode. Please call .eval() on your module before freezing.")
    return _transformed(mod, frozen=True, preserved=tuple(preserved_attrs or ()))


def optimize_for_inference(mod, other_methods=None):
    """:func:`freeze` (where not frozen yet), then run the programs through torcia.compile's
    inductor: elementwise chains fused into generated C++ kernels, specialised to each
    call's sizes (``torch.jit.optimize_for_inference``).

    Examples
    --------
    >>> import torcia
    >>> net = torcia.nn.Sequential(torcia.nn.Linear(4, 4), torcia.nn.GELU()).eval()
    >>> fast = torcia.jit.optimize_for_inference(torcia.jit.trace(net, torcia.randn(2, 4)))
    >>> x = torcia.randn(3, 4)
    >>> torcia.allclose(fast(x), net(x), atol=1e-6)
    True
    """
    if not builtins.isinstance(mod, RecursiveScriptModule):
        raise RuntimeError("optimize_for_inference expects a ScriptModule (from "
                           "torcia.jit.script or torcia.jit.trace)")
    if mod.training:
        mod = mod.eval()
    return _transformed(mod, frozen=True, backend="inductor")


def _transformed(mod, frozen=False, backend=None, preserved=()):
    old = mod._programs
    freezing = frozen and not old.frozen
    programs = _Programs(old.make, frozen=old.frozen or frozen,
                         backend=backend or old.backend)
    for ep, _ in old.entries:
        if freezing:
            ep = passes.freeze(ep, preserved)
        if backend is not None:
            ep = passes.with_backend(ep, backend)
        programs.entries.append((ep, ep.module()))
    out = mod._replace(programs)
    if freezing and not programs.entries:
        # programs captured later are frozen when made: the module holds no parameters
        for name in [n for n, _ in out.named_parameters() if n not in preserved]:
            owner, _, leaf = name.rpartition(".")
            del (out.get_submodule(owner) if owner else out)._parameters[leaf]
    return out
