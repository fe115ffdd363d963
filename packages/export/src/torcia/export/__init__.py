"""torcia.export: a model as one graph with its signature, saved to one file and run
without the model's Python code (``torch.export``).

:func:`export` runs the module once under torcia-compiler's tracing dispatch mode: every
kernel becomes an op record (the op's name, its constant arguments, the line of the model
that called it), parameters and buffers become named inputs, and tensors the model made
outside the traced ops (an ``arange`` of positions, an all-ones mask) become constants.
Sizes named dynamic through :class:`Dim` become polynomials of those dimensions (see
:mod:`torcia.export._dims` for how they are learnt), checked when the program runs.
What one graph cannot hold is an :class:`ExportError` naming the model's line: Python
reading a tensor's values (``if x.sum() > 0``, ``.item()``: data-dependent control flow),
an op with an argument that cannot be saved (a random generator), a size that does not
follow its dimension.

:meth:`ExportedProgram.module` gives an :class:`~torcia.nn.Module` that runs the program
(one generated function over the kernels, no per-op dispatch; op by op through dispatch
when gradients or a tracing mode need it). :func:`save` writes it to one file, in
torcia's checkpoint format (a JSON description of the graph and the tensors; loading
runs no pickled code), and :func:`load` gives it back in a process that has torcia-export
and the parts defining its ops, not the model's source.

Examples
--------
>>> import torcia
>>> from torcia import nn
>>> model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).eval()
>>> batch = torcia.export.Dim("batch", max=64)
>>> ep = torcia.export.export(model, (torcia.randn(3, 4),), dynamic_shapes=({0: batch},))
>>> [n.op for n in ep.graph.nodes]
['linear', 'relu', 'linear']
>>> x = torcia.randn(10, 4)
>>> torcia.allclose(ep.module()(x), model(x))
True
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import itertools
import json

import numpy as np

import torcia
from torcia import library, nn
from torcia.export._capture import (
    ExportError,
    capture,
    flatten,
    from_tree,
    located,
    register_dataclass,
    resampled,
)
from torcia.export._capture import unflatten as _unflatten
from torcia.export._dims import (
    INT_MAX,
    AdditionalInputs,
    Dim,
    DimInfo,
    ShapesCollection,
    differ,
    dims,
    fit_size,
    fit_values,
    parse,
    step_values,
    summarize,
)
from torcia.export._draft import DraftExportReport, draft_export
from torcia.export._hierarchy import (
    FlatArgsAdapter,
    InterpreterModule,
    ModuleCallEntry,
    ModuleCallSignature,
    UnflattenedModule,
    module_call_graph,
    register_state,
)
from torcia.export._program import (
    ModuleCall,
    Node,
    Program,
    Sym,
    Unencodable,
    decode,
    encode,
    output_values,
    program_from_json,
    program_to_json,
    strip_grad_flags,
    tuples,
)
from torcia.library import Tensor

__all__ = ["AdditionalInputs", "Constraint", "CustomDecompTable", "Dim", "DraftExportReport",
           "ExportBackwardSignature", "ExportError", "ExportGraph", "ExportGraphSignature",
           "ExportedModule", "ExportedProgram", "FlatArgsAdapter", "InputKind", "InputSpec",
           "InterpreterModule", "ModuleCallEntry", "ModuleCallSignature", "Node", "OutputKind",
           "OutputSpec", "ShapesCollection", "UnflattenedModule", "default_decompositions",
           "dims", "draft_export", "export", "load", "named_state", "register_dataclass",
           "register_state", "save", "unflatten"]

#: What a ``dynamic_shapes`` entry constrains a size with (``torch.export.Constraint``).
Constraint = Dim | DimInfo


ExportError.__module__ = "torcia.export"  # where users meet it

FORMAT = "torcia.export"
VERSION = 1


# ---------------------------------------------------------------------------------------
# the signature
# ---------------------------------------------------------------------------------------


class InputKind(enum.Enum):
    """What an input of the graph is (``torch.export.graph_signature.InputKind``)."""

    USER_INPUT = 1
    PARAMETER = 2
    BUFFER = 3
    CONSTANT_TENSOR = 4


class OutputKind(enum.Enum):
    """What an output of the graph is."""

    USER_OUTPUT = 1
    BUFFER_MUTATION = 3


@dataclasses.dataclass
class InputSpec:
    """One input of the graph: its kind, its value's name in the graph (``v3``) and,
    for a parameter, buffer or constant, its name in the state dict (``target``)."""

    kind: InputKind
    arg: str
    target: str | None
    persistent: bool | None = None


@dataclasses.dataclass
class OutputSpec:
    """One output of the graph: a user output, or the new value of a buffer (``target``)
    that the program writes (a BatchNorm's running statistics in training mode)."""

    kind: OutputKind
    arg: str
    target: str | None


@dataclasses.dataclass
class ExportGraphSignature:
    """The inputs and outputs of an exported graph (``torch.export.ExportGraphSignature``).

    Examples
    --------
    >>> import torcia
    >>> ep = torcia.export.export(torcia.nn.Linear(2, 1), (torcia.ones(1, 2),))
    >>> ep.graph_signature.parameters, len(ep.graph_signature.user_inputs)
    (['weight', 'bias'], 1)
    """

    input_specs: list
    output_specs: list

    @property
    def parameters(self) -> list:
        return [s.target for s in self.input_specs if s.kind is InputKind.PARAMETER]

    @property
    def buffers(self) -> list:
        return [s.target for s in self.input_specs if s.kind is InputKind.BUFFER]

    @property
    def lifted_tensor_constants(self) -> list:
        return [s.target for s in self.input_specs if s.kind is InputKind.CONSTANT_TENSOR]

    @property
    def user_inputs(self) -> list:
        return [s.arg for s in self.input_specs if s.kind is InputKind.USER_INPUT]

    @property
    def user_outputs(self) -> list:
        return [s.arg for s in self.output_specs if s.kind is OutputKind.USER_OUTPUT]

    @property
    def inputs_to_parameters(self) -> dict:
        return {s.arg: s.target for s in self.input_specs if s.kind is InputKind.PARAMETER}

    @property
    def inputs_to_buffers(self) -> dict:
        return {s.arg: s.target for s in self.input_specs if s.kind is InputKind.BUFFER}

    @property
    def buffers_to_mutate(self) -> dict:
        return {s.arg: s.target for s in self.output_specs
                if s.kind is OutputKind.BUFFER_MUTATION}

    def __str__(self):
        lines = ["# inputs"]
        for s in self.input_specs:
            lines.append(f"{s.arg}: {s.kind.name}" + (f" target={s.target!r}" if s.target
                                                       else ""))
        lines.append("\n# outputs")
        for s in self.output_specs:
            lines.append(f"{s.arg}: {s.kind.name}" + (f" target={s.target!r}" if s.target
                                                       else ""))
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# the exported program
# ---------------------------------------------------------------------------------------


@dataclasses.dataclass
class _Inputs:
    """What the program's callers must pass: the structure of ``(args, kwargs)``, and for
    each flattened leaf its name, and a tensor's rank, sizes (an int or a dimension's
    index) and dtype, or another value's value."""

    spec: tuple
    names: list
    shapes: list  # per leaf: list of int | ("dim", k), or None for a non-tensor
    dtypes: list  # per leaf: numpy dtype or None
    values: list  # per leaf: the value of a non-tensor, None for a tensor
    dims: list  # DimInfo of the program's dynamic dimensions

    def check(self, leaves: list) -> tuple:
        """Check the guards; return the sizes of the dynamic dimensions."""
        sizes: list = [None] * len(self.dims)
        first: list = [None] * len(self.dims)
        for i, leaf in enumerate(leaves):
            name = self.names[i]
            shape = self.shapes[i]
            if shape is None:
                if isinstance(leaf, Tensor) or not _same_value(leaf, self.values[i]):
                    raise AssertionError(f"Guard failed: {name} == {self.values[i]!r}")
                continue
            if not isinstance(leaf, Tensor):
                raise AssertionError(f"Guard failed: {name} is a Tensor (got "
                                     f"{type(leaf).__name__})")
            got = leaf.__torcia_data__.shape
            if len(got) != len(shape):
                raise AssertionError(f"Guard failed: {name}.dim() == {len(shape)} (got "
                                     f"{len(got)})")
            if leaf.__torcia_data__.dtype != self.dtypes[i]:
                raise AssertionError(
                    f"Guard failed: {name}.dtype == "
                    f"{library.dtype_from_numpy(self.dtypes[i])} (got {leaf.dtype})")
            if leaf.device.type != "cpu":
                raise AssertionError(f"Guard failed: {name}.device == cpu (got "
                                     f"{leaf.device})")
            for axis, (want, n) in enumerate(zip(shape, got)):
                if isinstance(want, int):
                    if n != want:
                        raise AssertionError(f"Guard failed: {name}.size()[{axis}] == {want}"
                                             f" (got {n})")
                    continue
                k = want[1]
                info = self.dims[k]
                if sizes[k] is None:
                    sizes[k] = n
                    first[k] = f"{name}.size()[{axis}]"
                    if n < info.min:
                        raise AssertionError(f"Guard failed: {name}.size()[{axis}] >= "
                                             f"{info.min} (got {n})")
                    if n > info.max:
                        raise AssertionError(f"Guard failed: {name}.size()[{axis}] <= "
                                             f"{info.max} (got {n})")
                elif sizes[k] != n:
                    raise AssertionError(f"Guard failed: {name}.size()[{axis}] == {first[k]}"
                                         f" (got {n} and {sizes[k]})")
        return tuple(sizes)


def _same_value(a, b) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except (TypeError, ValueError):
        return False


class ExportGraph:
    """The graph of an :class:`ExportedProgram`: its ``nodes`` (op records with the
    model's line each came from) and :meth:`print_tabular`.

    Examples
    --------
    >>> import torcia
    >>> ep = torcia.export.export(torcia.nn.ReLU(), (torcia.ones(2),))
    >>> [(n.kind, n.op) for n in ep.graph.nodes]
    [('call', 'relu')]
    """

    def __init__(self, program: Program, names: dict):
        self._program = program
        self._names = names

    @property
    def nodes(self) -> list:
        return list(self._program.nodes)

    def __str__(self):
        return self._program.tabular(self._names)

    def print_tabular(self) -> None:
        """Print the graph as a table (``torch.fx.Graph.print_tabular``)."""
        print(self)


class ExportedProgram:
    """A captured program with its signature and state (``torch.export.ExportedProgram``).

    Call :meth:`module` to run it; :func:`save` writes it to a file. ``state_dict``
    holds the parameters and buffers by their names in the original module,
    ``constants`` the tensors the model made outside the traced ops,
    ``range_constraints`` the range of each dynamic dimension.

    Examples
    --------
    >>> import torcia
    >>> ep = torcia.export.export(torcia.nn.Linear(3, 2), (torcia.ones(4, 3),))
    >>> sorted(ep.state_dict)
    ['bias', 'weight']
    >>> ep.module()(torcia.ones(4, 3)).shape
    torcia.Size([4, 2])
    """

    def __init__(self, program: Program, inputs: _Inputs, state_dict: dict,
                 kinds: dict, example_inputs=None):
        self._program = program
        self._inputs = inputs
        self.state_dict = state_dict  # name -> Tensor (parameters are nn.Parameter)
        self._kinds = kinds  # name -> "parameter" | "buffer"
        self.constants = {name: torcia.from_numpy(arr) for name, arr in
                          program.constants.items()}
        self.example_inputs = example_inputs
        self._value_names = {vid: inputs.names[target] if kind == "user" else target
                             for vid, kind, target in program.inputs}

    @property
    def range_constraints(self) -> dict:
        """Dimension name -> ``(min, max)`` of each dynamic dimension."""
        return {d.name: (d.min, d.max) for d in self._inputs.dims}

    @property
    def graph(self) -> ExportGraph:
        return ExportGraph(self._program, self._value_names)

    @property
    def graph_signature(self) -> ExportGraphSignature:
        kinds = {"user": InputKind.USER_INPUT, "parameter": InputKind.PARAMETER,
                 "buffer": InputKind.BUFFER, "constant": InputKind.CONSTANT_TENSOR}
        specs = []
        for vid, kind, target in self._program.inputs:
            specs.append(InputSpec(kinds[kind], f"v{vid}",
                                   None if kind == "user" else target,
                                   True if kind == "buffer" else None))
        buffers = {vid: target for vid, kind, target in self._program.inputs
                   if kind == "buffer"}
        outs = [OutputSpec(OutputKind.USER_OUTPUT, f"v{v}", None)
                for v in sorted(output_values(self._program.outputs))]
        written = {}
        for node in self._program.nodes:
            if node.kind == "copy_" and node.args[0][1] in buffers:
                written[buffers[node.args[0][1]]] = node.args[1][1]  # the last write wins
        outs += [OutputSpec(OutputKind.BUFFER_MUTATION, f"v{vid}", target)
                 for target, vid in written.items()]
        return ExportGraphSignature(specs, outs)

    @property
    def module_call_graph(self) -> list:
        """A :class:`ModuleCallEntry` for the model (``""``) and each of its submodules, in
        ``named_modules`` order; the model's and those named in
        ``preserve_module_call_signature`` carry their call's signature.

        Examples
        --------
        >>> import torcia
        >>> model = torcia.nn.Sequential(torcia.nn.Linear(2, 2), torcia.nn.ReLU())
        >>> ep = torcia.export.export(model, (torcia.ones(1, 2),),
        ...                           preserve_module_call_signature=("1",))
        >>> [(e.fqn, e.signature is not None) for e in ep.module_call_graph]
        [('', True), ('0', False), ('1', True)]
        """
        return module_call_graph(self)

    def module(self) -> nn.Module:
        """An :class:`~torcia.nn.Module` that runs the program, holding the parameters
        and buffers under their original names (``state_dict()`` keys match the
        exported module's); each call checks the guards (``AssertionError: Guard
        failed: ...``)."""
        return ExportedModule(self)

    def run_decompositions(self, decomp_table=None) -> ExportedProgram:
        """The program in core ops: torcia's graphs are recorded at the kernels, which
        are core ops already, so this is the program itself."""
        return self

    def __call__(self, *args, **kwargs):
        raise RuntimeError("Unable to call ExportedProgram directly. You should use "
                           "`exported_program.module()` instead.")

    def __str__(self):
        ranges = ", ".join(f"{k}: [{lo}, {hi}]" for k, (lo, hi) in
                           self.range_constraints.items())
        return (f"ExportedProgram:\n{self.graph}\n\nGraph signature:\n{self.graph_signature}"
                f"\n\nRange constraints: {{{ranges}}}")


class ExportedModule(nn.Module):
    """The module :meth:`ExportedProgram.module` returns: the program's parameters and
    buffers under their original names, and a ``forward`` that runs the program.

    Examples
    --------
    >>> import torcia
    >>> ep = torcia.export.export(torcia.nn.Linear(2, 2), (torcia.ones(1, 2),))
    >>> m = ep.module()
    >>> sorted(m.state_dict())
    ['bias', 'weight']
    """

    def __init__(self, program: ExportedProgram):
        super().__init__()
        self._exported = program
        register_state(self, program.state_dict, program._kinds)
        self._places = []
        for _, kind, target in program._program.inputs:
            if kind in ("parameter", "buffer"):
                owner, _, leaf = target.rpartition(".")
                self._places.append((self.get_submodule(owner) if owner else self, leaf))
            else:
                self._places.append(None)

    @property
    def exported_program(self) -> ExportedProgram:
        """The program this module runs."""
        return self._exported

    @property
    def code(self) -> str:
        """The program as Python-like source, one line per op
        (``torch.fx.GraphModule.code``)."""
        ep = self._exported
        user = [n for n, s in zip(ep._inputs.names, ep._inputs.shapes) if s is not None]
        return ep._program.code(ep._value_names, user)

    def _check_inputs(self, *args, **kwargs) -> tuple:
        """The inputs' leaves and the sizes of the dynamic dimensions, once the guards hold."""
        ep = self._exported
        leaves: list = []
        spec = flatten((args, kwargs), leaves)
        if spec != ep._inputs.spec:
            raise TypeError("the inputs' structure differs from the exported program's: "
                            f"expected {_describe_spec(ep._inputs.spec)}, got "
                            f"{_describe_spec(spec)}")
        return leaves, ep._inputs.check(leaves)

    def forward(self, *args, **kwargs):
        ep = self._exported
        leaves, sizes = self._check_inputs(*args, **kwargs)
        program = ep._program
        tensors = []
        for (_, kind, target), place in zip(program.inputs, self._places):
            if kind == "user":
                tensors.append(leaves[target])
            elif kind == "constant":
                tensors.append(ep.constants[target])
            else:
                tensors.append(getattr(*place))
        needs_grad = torcia.is_grad_enabled() and any(t.requires_grad for t in tensors)
        if needs_grad or library.active_modes():
            return from_tree(program.interpret(tensors, sizes))
        out = program.run([t.__torcia_data__ for t in tensors], sizes)
        return from_tree(_wrap(out))


def named_state(module: nn.Module) -> tuple[dict, dict]:
    """Every parameter and buffer of ``module`` under every name (a tied weight under
    each, as ``state_dict()`` has them): ``(name -> tensor, name -> "parameter" or
    "buffer")``.

    Examples
    --------
    >>> import torcia
    >>> state, kinds = torcia.export.named_state(torcia.nn.BatchNorm1d(2))
    >>> kinds["weight"], kinds["running_mean"]
    ('parameter', 'buffer')
    """
    state, kinds = {}, {}
    for name, p in module.named_parameters(remove_duplicate=False):
        state.setdefault(name, p)
        kinds.setdefault(name, "parameter")
    for name, b in module.named_buffers(remove_duplicate=False):
        if b is not None:
            state.setdefault(name, b)
            kinds.setdefault(name, "buffer")
    return state, kinds


def _wrap(obj):
    if isinstance(obj, (np.ndarray, np.generic)):
        return torcia.from_numpy(np.asarray(obj))
    if isinstance(obj, tuple):
        return tuple(_wrap(x) for x in obj)
    if isinstance(obj, list):
        return [_wrap(x) for x in obj]
    if isinstance(obj, dict):
        return {k: _wrap(v) for k, v in obj.items()}
    return obj


def _describe_spec(spec) -> str:
    tag = spec[0]
    if tag == "T":
        return "Tensor"
    if tag == "=":
        return "value"
    if tag == "dict":
        return "{" + ", ".join(f"{k!r}: {_describe_spec(s)}" for k, s in spec[1]) + "}"
    if tag == "dataclass":
        name, fields = spec[1]
        return f"{name}(" + ", ".join(f"{k}={_describe_spec(s)}" for k, s in fields) + ")"
    inner = ", ".join(_describe_spec(s) for s in spec[1])
    return f"({inner})" if tag == "tuple" else f"[{inner}]"


def unflatten(module, flat_args_adapter: FlatArgsAdapter | None = None) -> UnflattenedModule:
    """The exported program ``module`` as its model's module hierarchy
    (``torch.export.unflatten``): each submodule an :class:`InterpreterModule` that runs
    the ops its calls ran, called by its parent with the arguments the model passed it.

    Parameters
    ----------
    module : ExportedProgram
        The program (from :func:`export`, or :func:`load`: the model's source is not needed).
    flat_args_adapter : FlatArgsAdapter, optional
        Adapts inputs whose structure differs from the program's.

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> class Net(nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.body = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    ...         self.head = nn.Linear(4, 2)
    ...     def forward(self, x):
    ...         return self.head(self.body(x) + 1)
    >>> net = Net().eval()
    >>> ep = torcia.export.export(net, (torcia.randn(2, 4),),
    ...                           preserve_module_call_signature=("body",))
    >>> m = torcia.export.unflatten(ep)
    >>> type(m.body).__name__, sorted(m.state_dict()) == sorted(net.state_dict())
    ('InterpreterModule', True)
    >>> x = torcia.randn(2, 4)
    >>> torcia.allclose(m.body(x), net.body(x))
    True
    >>> m.body = nn.Identity()  # swapped: the model's call now runs it
    >>> torcia.allclose(m(x), net.head(x + 1))
    True
    """
    if not isinstance(module, ExportedProgram):
        raise TypeError(f"unflatten expects an ExportedProgram, got {type(module).__name__}")
    return UnflattenedModule(module, flat_args_adapter)




class CustomDecompTable(dict):
    """Op name -> the decomposition :meth:`ExportedProgram.run_decompositions` would use
    (``torch.export.CustomDecompTable``): a dict that users edit before passing it.

    Examples
    --------
    >>> import torcia
    >>> table = torcia.export.default_decompositions()
    >>> callable(table["addmm"])
    True
    >>> del table["addmm"]
    >>> "addmm" in table
    False
    """


def default_decompositions() -> CustomDecompTable:
    """Every op that has a decomposition into torcia's primitives, with it
    (``torch.export.default_decompositions``).

    Examples
    --------
    >>> import torcia
    >>> "relu" in torcia.export.default_decompositions()
    True
    """
    return CustomDecompTable({name: rec.decomposition for name, rec in
                              sorted(library.op_records().items())
                              if rec.decomposition is not None})


@dataclasses.dataclass
class ExportBackwardSignature:
    """Which outputs of a joint forward-backward graph are the gradients of which
    parameters and inputs, and which is the loss (``torch.export.ExportBackwardSignature``)."""

    gradients_to_parameters: dict
    gradients_to_user_inputs: dict
    loss_output: str


# ---------------------------------------------------------------------------------------
# export
# ---------------------------------------------------------------------------------------


def _leaf_names(module, args, kwargs, leaves) -> list:
    """A name per flattened input leaf, as the guards name them (``x``, ``args[1]``,
    ``kwargs['mask']``, ``x[0]``)."""
    names: dict = {}

    def walk(value, path):
        if isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                walk(v, f"{path}[{i}]")
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(v, f"{path}[{k!r}]")
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            for f in dataclasses.fields(value):
                walk(getattr(value, f.name), f"{path}.{f.name}")
        else:
            names.setdefault(id(value), path)

    try:
        bound = inspect.signature(module.forward).bind(*args, **kwargs)
        for name, value in bound.arguments.items():
            walk(value, name)
    except (TypeError, ValueError):
        walk(args, "args")
        walk(kwargs, "kwargs")
    return [names.get(id(leaf), f"input {i}") for i, leaf in enumerate(leaves)]


def _state_names(module) -> dict:
    """id(array) -> (kind, name) of every parameter and buffer (first name wins)."""
    found = {}
    for name, p in module.named_parameters(remove_duplicate=False):
        found.setdefault(id(p.__torcia_data__), ("parameter", name, p))
    for name, b in module.named_buffers(remove_duplicate=False):
        if b is not None:
            found.setdefault(id(b.__torcia_data__), ("buffer", name, b))
    return found


class _Tracing:
    """The captures of one export: the base one and those with sizes or values moved."""

    def __init__(self, module, args, kwargs, leaves, spec, state, on_read):
        self.on_read = on_read
        self.module = module
        self.leaves = leaves
        self.spec = spec
        self.state = state
        self.param_ids = set(state)
        # values read as constants must keep their branches: repeat the inputs' values
        self.rng = np.random.default_rng(0) if on_read == "error" else None
        self.buffers = [(b, np.array(b.__torcia_data__)) for kind, _, b in state.values()
                        if kind == "buffer"]
        self.args, self.kwargs = args, kwargs

    def restore(self) -> None:
        # a capture runs the model: a training-mode BatchNorm updated its statistics
        for b, saved in self.buffers:
            b.__torcia_data__[...] = saved

    def base(self):
        try:
            tracer, _ = capture(self.module, self.args, self.kwargs, self.on_read)
        finally:
            self.restore()
        return summarize(tracer, self.param_ids)

    def at(self, where: dict):
        """A capture on new input values, with the sizes ``where`` ((leaf, axis) ->
        size) changed."""
        new = []
        for i, leaf in enumerate(self.leaves):
            if isinstance(leaf, Tensor):
                shape = list(leaf.shape)
                for axis in range(len(shape)):
                    shape[axis] = where.get((i, axis), shape[axis])
                new.append(resampled(leaf, tuple(shape), self.rng))
            else:
                new.append(leaf)
        args, kwargs = _unflatten(self.spec, iter(new))
        try:
            tracer, _ = capture(self.module, args, kwargs, self.on_read)
        finally:
            self.restore()
        return summarize(tracer, self.param_ids)


def _moved(dims_: list, sizes: dict) -> dict:
    """(leaf, axis) -> size for the dimensions in ``sizes`` (index -> size)."""
    return {w: sizes[k] for k, d in enumerate(dims_) if k in sizes for w in d.where}


class _Specialized(Exception):
    """A dynamic dimension the program does not follow; ``dims`` are the indices to blame."""

    def __init__(self, dims_, message):
        super().__init__(message)
        self.dims = dims_


def _constraint_error(info: DimInfo, detail: str) -> ExportError:
    return ExportError(
        f"Constraints violated ({info.name})! The program does not hold for every value of "
        f"{info.name} in [{info.min}, {_bound(info.max)}]: {detail}\nMark the dimension static "
        "(None or Dim.STATIC), narrow its range, or use Dim.AUTO to let torcia.export "
        "decide.")


def _bound(n: int) -> str:
    return "inf" if n >= INT_MAX else str(n)


def _fit(tracing: _Tracing, base, dims_: list):
    """The integers of ``base`` (and its constants' sizes) as ints or :class:`Sym` of the
    dimensions ``dims_``, and the captures made on the way; raises :class:`_Specialized`
    where a dimension does not hold."""
    steps = [step_values(d) for d in dims_]
    captures = {frozenset(): base}
    for k, d in enumerate(dims_):
        a, b, _ = steps[k]
        if b is None:
            raise _Specialized([k], f"its range [{d.min}, {d.max}] leaves no other size "
                                    f"than {a} to try")
        try:
            got = tracing.at(_moved(dims_, {k: b}))
        except Exception as exc:  # noqa: BLE001  (any failure: the model refuses that size)
            raise _Specialized([k], f"with {d.name} = {b} (the example has {a}) the model "
                                    f"fails: {type(exc).__name__}: {exc}") from None
        why = differ(base, got)
        if why is not None:
            raise _Specialized([k], f"with {d.name} = {b} (the example has {a}) {why}")
        captures[frozenset([k])] = got
    n = len(base.ints)
    depends = [frozenset(k for k in range(len(dims_))
                         if captures[frozenset([k])].ints[j] != base.ints[j]) for j in range(n)]
    together = set()
    for s in depends:
        if len(s) > 1:
            together |= s
    for r in range(2, len(together) + 1):
        for corner in itertools.combinations(sorted(together), r):
            sizes = {k: steps[k][1] for k in corner}
            try:
                got = tracing.at(_moved(dims_, sizes))
            except Exception as exc:  # noqa: BLE001
                raise _Specialized(list(corner), f"with {_sizes(dims_, sizes)} the model "
                                                 f"fails: {type(exc).__name__}: {exc}") from None
            why = differ(base, got)
            if why is not None:
                raise _Specialized(list(corner), f"with {_sizes(dims_, sizes)} {why}")
            captures[frozenset(corner)] = got
    base_sizes = [s[0] for s in steps]
    signs = [s[1] - s[0] for s in steps]
    fitted = []
    for j in range(n):
        points = {}
        for key, cap in captures.items():
            if key <= depends[j]:
                points[key] = cap.ints[j]
        fitted.append(fit_values(points, base_sizes, signs, depends[j]))
    check = {k: s[2] for k, s in enumerate(steps) if s[2] is not None}
    if check:
        got, failure = _verify(tracing, base, fitted, depends, dims_, base_sizes, check)
        if failure is not None and len(check) > 1:
            # find the dimensions to blame: each moved alone (the others may be fine)
            alone = [k for k in check if _verify(tracing, base, fitted, depends, dims_,
                                                 base_sizes, {k: check[k]})[1] is not None]
            if alone:
                failure = _Specialized(alone, str(failure))
        if failure is not None:
            raise failure
        captures[frozenset(["check"])] = got
    return fitted, captures, steps


def _verify(tracing, base, fitted, depends, dims_, base_sizes, check):
    """Capture with the sizes ``check`` and compare every fitted integer: returns the
    capture and None, or None and the :class:`_Specialized` that says what went wrong."""
    try:
        got = tracing.at(_moved(dims_, check))
    except Exception as exc:  # noqa: BLE001
        return None, _Specialized(list(check), f"with {_sizes(dims_, check)} the model "
                                               f"fails: {type(exc).__name__}: {exc}")
    why = differ(base, got)
    if why is not None:
        return None, _Specialized(list(check), f"with {_sizes(dims_, check)} {why}")
    values = [check.get(k, base_sizes[k]) for k in range(len(dims_))]
    for j, f in enumerate(fitted):
        want = f.value(values) if isinstance(f, Sym) else f
        if want != got.ints[j]:
            owner = base.owners[j]
            loc = base.tracer.locs.get(id(owner[1]), "") if owner[0] == "node" else \
                base.tracer.input_locs.get(owner[1], "")
            what = f"op {owner[1].op!r}" if owner[0] == "node" else "a tensor's size"
            blame = sorted(depends[j] & set(check)) or list(check)
            return None, _Specialized(blame, located(
                f"a size of {what} is {got.ints[j]} with {_sizes(dims_, check)}, not "
                f"{want} as it would be if it followed "
                f"{', '.join(dims_[k].name for k in blame)} linearly", loc))
    return got, None


def _sizes(dims_, sizes: dict) -> str:
    return ", ".join(f"{dims_[k].name} = {v}" for k, v in sorted(sizes.items()))


def _fit_all(tracing: _Tracing, base, infos: list):
    """Fit with every dynamic dimension; a :data:`Dim.AUTO` one the program does not
    follow becomes static, any other is an error."""
    active = list(infos)
    while True:
        if not active:
            return [], {frozenset(): base}, [], []
        try:
            fitted, captures, steps = _fit(tracing, base, active)
            return fitted, captures, steps, active
        except _Specialized as exc:
            blamed = [active[k] for k in exc.dims]
            strict = [d for d in blamed if d.mode != "auto"]
            if strict:
                raise _constraint_error(strict[0], str(exc)) from None
            active = [d for d in active if d not in blamed]


def _lifted(tracing, base, captures, fitted, dims_, steps):
    """Per lifted-constant input of ``base``: ``("constant", array)`` or, where its size
    follows a dimension, ``("full", value)`` / ``("arange", (start, step))``."""
    out = []
    const_vids = [s[1] for s in base.skeleton if s[0] == "const"]
    offset = 0
    for q, vid in enumerate(const_vids):
        arr = base.consts[q]
        shape_fit = fitted[offset:offset + arr.ndim]
        offset += arr.ndim
        loc = base.tracer.input_locs.get(vid, "")
        arrays = [c.consts[q] for c in captures.values()]
        if not any(isinstance(s, Sym) for s in shape_fit):
            for other in arrays:
                if other.shape != arr.shape or not np.array_equal(
                        other, arr, equal_nan=arr.dtype.kind in "fc"):
                    raise ExportError(located(
                        "torcia.export cannot capture this program: a tensor the model "
                        "computed outside torcia's ops (from the inputs' values, through "
                        "NumPy or Python) is read here; its values change with the inputs, "
                        "so the graph cannot hold it as a constant", loc))
            out.append(("constant", arr))
            continue
        pattern = _pattern(arrays)
        if pattern is None:
            raise ExportError(located(
                f"torcia.export cannot capture this program: a tensor of shape "
                f"{list(arr.shape)} made outside torcia's ops (a factory such as "
                "torcia.tensor, or NumPy) has a size that follows a dynamic dimension, but "
                "is neither filled with one value nor an arange; make it with torcia ops "
                "from the inputs", loc))
        out.append(pattern)
    return out


def _pattern(arrays):
    first = arrays[0]
    if all(a.size and a.dtype == first.dtype for a in arrays):
        value = first.reshape(-1)[0]
        if all(np.all(a == value) for a in arrays):
            return ("full", value.item())
        if all(a.ndim == 1 and a.size >= 2 for a in arrays):
            start, step = first[0], first[1] - first[0]
            if all(np.array_equal(a, start + step * np.arange(a.size, dtype=a.dtype))
                   for a in arrays):
                return ("arange", (start.item(), step.item()))
    return None


def _rebuild_ints(obj, it):
    """``obj`` with its integers replaced by the next values of ``it`` (the order of
    :func:`torcia.export._dims._split`)."""
    if isinstance(obj, (bool, np.bool_)) or obj is None or isinstance(obj, str):
        return obj
    if isinstance(obj, (int, np.integer)):
        return next(it)
    if isinstance(obj, tuple):
        return tuple(_rebuild_ints(x, it) for x in obj)
    if isinstance(obj, list):
        return [_rebuild_ints(x, it) for x in obj]
    if isinstance(obj, slice):
        return slice(*(_rebuild_ints(x, it) for x in (obj.start, obj.stop, obj.step)))
    return obj


def _rebuild_ref(ref, it):
    kind, what = ref[0], ref[1]
    if kind == "v":
        return ("v", what)
    if kind == "l":
        return ("l", [_rebuild_ref(r, it) for r in what])
    return ("c", _rebuild_ints(what, it))


def _check_encodable(node, loc):
    arrays: dict = {}
    for key, ref in [*((f"argument {i}", r) for i, r in enumerate(node.args)),
                     *node.params.items()]:
        try:
            _encode_ref_check(ref, arrays)
        except Unencodable as exc:
            if "Generator" in str(exc):
                why = (f"op {node.op!r} draws random numbers (its {key} is a random "
                       "generator), which a saved program cannot replay; export the model "
                       "in eval mode (model.eval()) so that dropout is off")
            else:
                why = f"op {node.op!r} is not supported: its {key} is {exc}"
            raise ExportError(located(f"torcia.export cannot capture this program: {why}",
                                      loc)) from None


def _encode_ref_check(ref, arrays):
    if ref[0] == "c":
        encode(ref[1], arrays)
    elif ref[0] == "l":
        for r in ref[1]:
            _encode_ref_check(r, arrays)


def export(mod, args, kwargs=None, *, dynamic_shapes=None, strict: bool = False,
           preserve_module_call_signature: tuple = (), on_data_read="error") -> ExportedProgram:
    """Capture ``mod(*args, **kwargs)`` as an :class:`ExportedProgram`
    (``torch.export.export``).

    Parameters
    ----------
    mod : Module
        The model; it runs a few times on inputs like ``args`` (in its current
        train/eval mode; its buffers are left as they were).
    args : tuple
        Example positional inputs.
    kwargs : dict, optional
        Example keyword inputs.
    dynamic_shapes : dict, tuple, list, ShapesCollection or AdditionalInputs, optional
        Per input (by ``forward``'s argument name, or in order), a dict ``{axis: Dim}``
        or a tuple with one :class:`Dim` (or ``None``) per axis; other sizes are static.
        :class:`AdditionalInputs` infers them from more examples, each of which the
        program must then accept.
    strict
        Accepted for PyTorch compatibility; capture is always by running the model.
    preserve_module_call_signature : tuple of str
        Submodules whose call signature :attr:`ExportedProgram.module_call_graph` keeps,
        so that :func:`unflatten`'s module calls them with their original arguments (and
        a replacement module swapped in gets them too).
    on_data_read : "error" or a Warning class
        What Python reading a tensor's values does: torch.export's error (the default),
        or, a torcia extension that :func:`torcia.jit.trace` uses, a warning of that
        class, the values read becoming constants of the program.

    Raises
    ------
    ExportError
        Data-dependent control flow, an op that cannot be saved, a dynamic dimension the
        program does not follow; the message names the line of the model's code.

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> class Net(nn.Module):
    ...     def forward(self, x):
    ...         if x.sum() > 0:
    ...             return x
    ...         return -x
    >>> torcia.export.export(Net(), (torcia.ones(2),))
    Traceback (most recent call last):
    ...
    torcia.export.ExportError: Could not guard on data-dependent expression: ...
    """
    if not isinstance(mod, nn.Module):
        raise ValueError(f"Expected `mod` to be an instance of `torch.nn.Module`, got "
                         f"{type(mod)}.")
    if not isinstance(args, tuple):
        raise ValueError(f"Expecting `args` to be a tuple of example positional inputs, got "
                         f"{type(args)}")
    kwargs = dict(kwargs or {})
    if not isinstance(kwargs, dict):
        raise ValueError(f"Expecting `kwargs` to be a dict, got {type(kwargs)}")
    preserved = _preserved(mod, preserve_module_call_signature)
    verify = None
    if isinstance(dynamic_shapes, AdditionalInputs):
        verify = dynamic_shapes.verify
    if isinstance(dynamic_shapes, (AdditionalInputs, ShapesCollection)):
        dynamic_shapes = dynamic_shapes.dynamic_shapes(mod, args, kwargs)
    leaves: list = []
    spec = flatten((args, kwargs), leaves)
    for leaf in leaves:
        if isinstance(leaf, Tensor) and leaf.device.type != "cpu":
            raise ExportError(f"torcia.export captures on the 'cpu' device only (an input is "
                              f"on {leaf.device})")
    state = _state_names(mod)
    leaves = _distinct(leaves, state)
    args, kwargs = _unflatten(spec, iter(leaves))
    infos = parse(mod, args, kwargs, dynamic_shapes, leaves)
    if on_data_read != "error" and not (isinstance(on_data_read, type)
                                        and issubclass(on_data_read, Warning)):
        raise ValueError(f"on_data_read must be 'error' or a Warning class, got "
                         f"{on_data_read!r}")
    tracing = _Tracing(mod, args, kwargs, leaves, spec, state, on_data_read)
    base = tracing.base()
    same = None
    if on_data_read == "error":
        same = tracing.at({})  # new values, same sizes: what depends on values untraced
        why = differ(base, same)
        if why is not None or same.ints != base.ints:
            raise ExportError("torcia.export cannot capture this program: it changes with "
                              "the inputs' values" + (f" ({why})" if why else ""))
    fitted, captures, steps, active = _fit_all(tracing, base, infos)
    if not active:
        fitted = list(base.ints)
    if same is not None:
        captures[frozenset(["values"])] = same
    lifted = _lifted(tracing, base, captures, fitted, active, steps)
    ep = _build(mod, base, fitted, lifted, active, captures, steps, leaves, spec,
                _leaf_names(mod, args, kwargs, leaves), state, (args, kwargs))
    ep._program.preserved = preserved
    if verify is not None:
        verify(ep)
    return ep


def _distinct(leaves: list, state: dict) -> list:
    """The input tensors, one argument each: a tensor passed again (``mha(x, x, x)``)
    is captured as a copy of itself (a view would alias an input the capture tracks), so
    that the program has an input per argument and a later call with three different
    tensors runs on those three, as PyTorch's does."""
    seen, out = set(), []
    for leaf in leaves:
        if isinstance(leaf, Tensor) and id(leaf.__torcia_data__) not in state:
            key = id(leaf.__torcia_data__)
            if key in seen:
                leaf = leaf.detach().clone().requires_grad_(leaf.requires_grad)
            seen.add(id(leaf.__torcia_data__))
        out.append(leaf)
    return out


def _preserved(mod, fqns) -> list:
    if isinstance(fqns, str):
        fqns = (fqns,)
    known = {name for name, _ in mod.named_modules() if name}
    for fqn in fqns:
        if fqn not in known:
            raise ValueError(f"preserve_module_call_signature names {fqn!r}, which is not a "
                             "submodule of the exported module")
    return list(fqns)


def _module_calls(tracer, offset: int) -> list:
    """The submodule calls the capture saw, their node ranges shifted by ``offset`` (the
    nodes the program puts before the captured ones)."""

    def ref(leaf):
        if isinstance(leaf, Tensor):
            vid = tracer.ids.get(id(leaf.__torcia_data__))
            return ("v", vid) if vid is not None else ("c", None)
        try:
            encode(leaf, {})
        except Unencodable:
            return ("c", None)
        return ("c", leaf)

    calls = []
    for fqn, start, end, args, in_spec, outs, out_spec, depth in tracer.calls:
        if end is None:  # the module raised, and the model caught the error
            continue
        calls.append(ModuleCall(fqn, start + offset, end + offset, [ref(a) for a in args],
                                in_spec, [ref(o) for o in outs], out_spec, depth))
    return calls


def _build(mod, base, fitted, lifted, active, captures, steps, leaves, spec, names, state,
           example):
    tracer = base.tracer
    graph = tracer.graph
    it = iter(fitted)
    nodes, inputs, constants = [], [], {}
    lifted_it = iter(lifted)
    for vid, src in graph.inputs:
        kind = src[0]
        if kind == "arg":
            inputs.append((vid, "user", src[1]))
            continue
        if kind != "tensor":
            raise ExportError("torcia.export: the capture read a gradient (.grad); export "
                              "a forward pass")
        known = state.get(id(src[1].__torcia_data__))
        if known is not None:
            inputs.append((vid, known[0], known[1]))
            continue
        shape = tuple(next(it) for _ in range(src[1].__torcia_data__.ndim))
        how, what = next(lifted_it)
        dtype = src[1].__torcia_data__.dtype
        if how == "constant":
            name = f"c{len(constants)}"
            constants[name] = np.array(what)
            inputs.append((vid, "constant", name))
        elif how == "full":
            nodes.append(Node("full", "full", [], {"shape": ("c", shape),
                                                    "value": ("c", what),
                                                    "dtype": ("c", dtype)}, [vid],
                               loc=tracer.input_locs.get(vid, "")))
        else:
            start, step = what
            nodes.append(Node("arange", "arange", [], {
                "start": ("c", start), "step": ("c", step), "length": ("c", shape[0]),
                "dtype": ("c", dtype)}, [vid], loc=tracer.input_locs.get(vid, "")))
    offset = len(nodes)
    for node in graph.nodes:
        loc = tracer.locs.get(id(node), "")
        if node.kind not in ("call", "cast", "copy_"):
            raise ExportError(located(f"torcia.export cannot capture this program: a "
                                      f"{node.kind} step ({node.op})", loc))
        args = [_rebuild_ref(r, it) for r in node.args]
        params = {k: _rebuild_ref(r, it) for k, r in node.params.items()}
        pnode = Node(node.kind, node.op, args, params, list(node.outs), node.tuple_out, loc)
        _check_encodable(pnode, loc)
        nodes.append(pnode)
    dim_names = [d.name for d in active]
    meta = _fit_meta(graph, captures, steps)
    outputs = strip_grad_flags(graph.outputs)
    program = Program(nodes, inputs, outputs, meta, dim_names, constants,
                      _module_calls(tracer, offset),
                      [name for name, _ in mod.named_modules() if name])
    where = {w: k for k, d in enumerate(active) for w in d.where}
    shapes, dtypes, values = [], [], []
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, Tensor):
            shapes.append([("dim", where[(i, a)]) if (i, a) in where else n
                           for a, n in enumerate(leaf.shape)])
            dtypes.append(leaf.__torcia_data__.dtype)
            values.append(None)
        else:
            try:
                encode(leaf, {})
            except Unencodable:
                raise ExportError(f"torcia.export: the input {names[i]} is a "
                                  f"{type(leaf).__name__}, which a program cannot take "
                                  "(tensors, numbers, strings, None and their tuples, "
                                  "lists and dicts)") from None
            shapes.append(None)
            dtypes.append(None)
            values.append(leaf)
    # every parameter and buffer, read by the forward or not
    state_dict, kinds = named_state(mod)
    inputs_spec = _Inputs(spec, names, shapes, dtypes, values, active)
    return ExportedProgram(program, inputs_spec, state_dict, kinds, example)


def _fit_meta(graph, captures, steps) -> dict:
    """Each value's shape, its sizes fitted like the program's integers where they are
    of that form (the others, such as a strided convolution's output size, are shown as
    unknown: nothing in the program depends on them)."""
    meta = {}
    for vid, (shape, dtype) in graph.meta.items():
        sizes = [fit_size(captures, steps, vid, axis, n) for axis, n in enumerate(shape)]
        meta[vid] = (None if any(d is None for d in sizes) else tuple(sizes), dtype)
    return meta


# ---------------------------------------------------------------------------------------
# save and load
# ---------------------------------------------------------------------------------------


def save(ep: ExportedProgram, f, *, extra_files: dict | None = None,
         opset_version: dict | None = None, pickle_protocol: int = 2) -> None:
    """Write ``ep`` to ``f`` (a path or a binary file), one file holding the graph, its
    signature, the parameters, buffers and constants (``torch.export.save``).

    The file is torcia's checkpoint archive (see :func:`torcia.save`) holding a JSON
    description of the program and its tensors: :func:`load` runs no pickled code.

    Examples
    --------
    >>> import io, torcia
    >>> ep = torcia.export.export(torcia.nn.Linear(2, 1), (torcia.ones(1, 2),))
    >>> buf = io.BytesIO()
    >>> torcia.export.save(ep, buf)
    >>> _ = buf.seek(0)
    >>> torcia.export.load(buf).module()(torcia.ones(1, 2)).shape
    torcia.Size([1, 1])
    """
    if not isinstance(ep, ExportedProgram):
        raise TypeError(f"The 'ep' parameter must be an instance of 'ExportedProgram', got "
                        f"'{type(ep).__name__}' instead.")
    arrays: dict = {}
    program = ep._program
    inputs = ep._inputs
    first: dict = {}
    aliases = {}  # a tied weight's other names -> its first name
    for name, t in ep.state_dict.items():
        if id(t) in first:
            aliases[name] = first[id(t)]
        else:
            first[id(t)] = name
    description = {
        "format": FORMAT, "version": VERSION,
        "program": program_to_json(program, arrays),
        "inputs": {
            "spec": encode(inputs.spec, arrays),
            "names": inputs.names,
            "shapes": [None if s is None else [list(d) if isinstance(d, tuple) else d
                                               for d in s] for s in inputs.shapes],
            "dtypes": [None if d is None else np.dtype(d).str for d in inputs.dtypes],
            "values": [encode(v, arrays) for v in inputs.values],
            "dims": [dataclasses.asdict(d) for d in inputs.dims],
        },
        "kinds": ep._kinds,
        "aliases": aliases,
        "requires_grad": sorted(n for n, t in ep.state_dict.items() if t.requires_grad),
        "ops": sorted({n.op for n in program.nodes if n.kind == "call"}),
        "extra_files": dict(extra_files or {}),
    }
    payload = {
        "description": json.dumps(description),
        "state_dict": {n: torcia.from_numpy(np.ascontiguousarray(t.__torcia_data__))
                       for n, t in ep.state_dict.items() if n not in aliases},
        "constants": {n: torcia.from_numpy(np.ascontiguousarray(a))
                      for n, a in program.constants.items()},
        "arrays": {n: torcia.from_numpy(np.ascontiguousarray(a)) for n, a in arrays.items()},
    }
    torcia.save(payload, f, pickle_protocol=pickle_protocol)


def load(f, *, extra_files: dict | None = None,
         expected_opset_version: dict | None = None) -> ExportedProgram:
    """Read a program :func:`save` wrote (``torch.export.load``); it runs with torcia-export
    and the parts that define its ops, without the model's source.

    ``extra_files``, a dict of names, is filled with the extra files saved with it.

    Examples
    --------
    >>> import io, torcia
    >>> buf = io.BytesIO()
    >>> torcia.export.save(torcia.export.export(torcia.nn.Tanh(), (torcia.zeros(3),)), buf)
    >>> _ = buf.seek(0)
    >>> torcia.export.load(buf).module()(torcia.zeros(3)).tolist()
    [0.0, 0.0, 0.0]
    """
    payload = torcia.load(f, weights_only=True)
    if not isinstance(payload, dict) or "description" not in payload:
        raise RuntimeError("not a program saved by torcia.export.save (no description in "
                           "the archive)")
    description = json.loads(payload["description"])
    if description.get("format") != FORMAT or description.get("version") != VERSION:
        raise RuntimeError(f"not a torcia.export program of version {VERSION} (format "
                           f"{description.get('format')!r}, version "
                           f"{description.get('version')!r})")
    arrays = {n: t.__torcia_data__ for n, t in payload["arrays"].items()}
    constants = {n: t.__torcia_data__ for n, t in payload["constants"].items()}
    program = program_from_json(description["program"], arrays, constants)
    program.kernels()  # a missing op is an error now, naming it
    raw = description["inputs"]
    dims_ = [DimInfo(**d) for d in raw["dims"]]
    for d in dims_:
        d.where = [tuple(w) for w in d.where]
    inputs = _Inputs(
        decode(raw["spec"], arrays), raw["names"],
        [None if s is None else [tuple(d) if isinstance(d, list) else d for d in s]
         for s in raw["shapes"]],
        [None if d is None else np.dtype(d) for d in raw["dtypes"]],
        [decode(v, arrays) for v in raw["values"]], dims_)
    inputs.spec = tuples(inputs.spec)
    state = {}
    grads = set(description["requires_grad"])
    for name, t in payload["state_dict"].items():
        if description["kinds"][name] == "parameter":
            state[name] = nn.Parameter(t, requires_grad=name in grads)
        else:
            state[name] = t
    for alias, name in description["aliases"].items():
        state[alias] = state[name]
    state = {name: state[name] for name in description["kinds"]}  # the saved order
    if extra_files is not None:
        for k in list(extra_files):
            extra_files[k] = description["extra_files"].get(k, "")
    return ExportedProgram(program, inputs, state, description["kinds"])
