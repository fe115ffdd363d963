"""An exported program back in its model's module hierarchy (``torch.export.unflatten``).

The capture notes each call of a submodule: which of the program's nodes it ran, its
arguments and its outputs (:class:`~torcia.export._program.ModuleCall`). :func:`unflatten`
gives each submodule an :class:`InterpreterModule` holding the parameters and buffers
under it and, for each call, the nodes it ran; a module runs its own nodes and calls its
children with the arguments the model passed them, so a child can be called alone or
replaced by another module taking the same arguments.

A call runs as its own module only when its nodes read nothing but its tensor arguments,
the parameters and buffers under it and the program's constants, and nothing computed
inside it is used after it but its outputs (a submodule that reads a keyword argument, a
tensor of its parent's, or a value it does not return stays part of its parent's nodes).
"""

from __future__ import annotations

import abc
import dataclasses
import threading

import torcia
from torcia import nn
from torcia.export._capture import flatten, from_tree
from torcia.export._capture import unflatten as unflatten_leaves
from torcia.export._program import has_sym, output_values, rebuild, run_nodes


@dataclasses.dataclass
class ModuleCallSignature:
    """How a module was called in an exported program (``torch.export.ModuleCallSignature``):
    the program's values it took (``inputs``) and gave back (``outputs``), named as the
    graph names them (``"v3"``), and the structures ``in_spec`` of its ``(args, kwargs)``
    and ``out_spec`` of its result."""

    inputs: list
    outputs: list
    in_spec: tuple
    out_spec: tuple
    forward_arg_names: list | None = None


@dataclasses.dataclass
class ModuleCallEntry:
    """One module of the exported model in :attr:`ExportedProgram.module_call_graph`: its
    name (``""`` for the model) and, for the model and each module named in
    ``preserve_module_call_signature``, the :class:`ModuleCallSignature` of its call."""

    fqn: str
    signature: ModuleCallSignature | None = None


class FlatArgsAdapter(abc.ABC):
    """Adapts the inputs of an :class:`UnflattenedModule` call whose structure differs from
    the exported program's (``torch.export.unflatten.FlatArgsAdapter``).

    Examples
    --------
    >>> import torcia
    >>> class DropExtra(torcia.export.FlatArgsAdapter):
    ...     def adapt(self, target_spec, input_spec, input_args, metadata=None, obj=None):
    ...         return input_args[:1]
    >>> ep = torcia.export.export(torcia.nn.ReLU(), (torcia.ones(2),))
    >>> m = torcia.export.unflatten(ep, DropExtra())
    >>> m(torcia.tensor([-1.0, 2.0]), torcia.ones(3))
    tensor([0., 2.])
    """

    @abc.abstractmethod
    def adapt(self, target_spec, input_spec, input_args: list, metadata: dict | None = None,
              obj=None) -> list:
        """The flat inputs of the program's structure ``target_spec`` from the call's
        ``input_args``, whose structure is ``input_spec``."""


@dataclasses.dataclass
class _Run:
    """What one call of a module runs: its items (lists of nodes, and calls of modules
    under it: ``(relative name, ModuleCall)``), where its inputs come from, and its result."""

    items: list
    args: list  # per argument leaf: a ref (("v", id) for a value it reads)
    in_spec: tuple
    outs: list
    out_spec: tuple
    state: dict  # value id -> the parameter's or buffer's name under the module
    constants: dict  # value id -> the program's constant's name
    dynamic: bool  # whether its nodes' sizes follow the program's dynamic dimensions


class _Active(threading.local):
    sizes = None  # the dynamic sizes of the UnflattenedModule call running in this thread
    counts = None  # id(module) -> how many of its calls that call has run


_active = _Active()


class InterpreterModule(nn.Module):
    """A submodule of an :class:`UnflattenedModule`: its parameters and buffers, and the
    nodes each of its calls in the program ran (``torch.export.unflatten.InterpreterModule``).

    Called inside its :class:`UnflattenedModule`'s call, the k-th call runs what the
    program's k-th call of the module ran; called alone, the first.
    """

    def __init__(self):
        super().__init__()
        self._runs: list = []

    def forward(self, *args, **kwargs):
        if not self._runs:
            raise RuntimeError("this submodule has no call of its own in the exported program: "
                               "it was not called, or its ops read tensors other than its "
                               "arguments and its parameters, so they run in its parent's")
        counts = _active.counts
        k = 0
        if counts is not None:
            k = counts.get(id(self), 0)
            counts[id(self)] = k + 1
        run = self._runs[min(k, len(self._runs) - 1)]
        sizes = _active.sizes
        if run.dynamic and sizes is None:
            raise RuntimeError("this module's ops have sizes that follow the program's "
                               "dynamic dimensions: call it inside its UnflattenedModule")
        leaves: list = []
        spec = flatten((args, kwargs), leaves)
        if spec != run.in_spec:
            raise TypeError("the arguments' structure differs from the module's call in "
                            f"the exported program: expected {run.in_spec}, got {spec}")
        env = {ref[1]: leaf for ref, leaf in zip(run.args, leaves)
               if ref[0] == "v" and ref[1] is not None}
        for vid, name in run.state.items():
            env[vid] = _state(self, name)
        owner = self._unflattened
        for vid, name in run.constants.items():
            env[vid] = owner.constants[name]
        _execute(self, run.items, env, sizes)
        return from_tree(unflatten_leaves(run.out_spec, iter(
            [env.get(ref[1]) if ref[0] == "v" else ref[1] for ref in run.outs])))


class UnflattenedModule(nn.Module):
    """An exported program as its model's module hierarchy (what :func:`unflatten` returns):
    the submodules are :class:`InterpreterModule`\\ s (or modules swapped in for them),
    ``forward`` checks the program's guards and runs the program, calling them.

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> model = nn.Sequential(nn.Linear(3, 4), nn.ReLU()).eval()
    >>> ep = torcia.export.export(model, (torcia.randn(2, 3),))
    >>> m = torcia.export.unflatten(ep)
    >>> [name for name, _ in m.named_children()]
    ['0', '1']
    >>> x = torcia.randn(2, 3)
    >>> torcia.equal(m(x), model(x))
    True
    """

    def __init__(self, program, flat_args_adapter: FlatArgsAdapter | None = None):
        super().__init__()
        self._exported = program
        self.adapter = flat_args_adapter
        self.constants = dict(program.constants)
        prog = program._program
        for fqn in prog.module_names:
            owner, _, leaf = fqn.rpartition(".")
            parent = self.get_submodule(owner) if owner else self
            parent.add_module(leaf, InterpreterModule())
        register_state(self, program.state_dict, program._kinds, InterpreterModule)
        for m in self.modules():
            if isinstance(m, InterpreterModule):
                object.__setattr__(m, "_unflattened", self)
        self._items = _plan(self, prog)
        # the state its own items read: a swapped-in submodule holds its own
        self._reads = {vid for item in self._items for vid in (
            [v for node in item for v in node.value_args()] if isinstance(item, list) else
            [ref[1] for ref in item[1].args if ref[0] == "v"])}

    @property
    def exported_program(self):
        """The program this module runs."""
        return self._exported

    def forward(self, *args, **kwargs):
        ep = self._exported
        prog = ep._program
        leaves: list = []
        spec = flatten((args, kwargs), leaves)
        if spec != ep._inputs.spec and self.adapter is not None:
            leaves = list(self.adapter.adapt(target_spec=ep._inputs.spec, input_spec=spec,
                                             input_args=leaves))
        elif spec != ep._inputs.spec:
            raise TypeError("the inputs' structure differs from the exported program's: "
                            f"expected {ep._inputs.spec}, got {spec} (pass a "
                            "FlatArgsAdapter to unflatten to adapt them)")
        sizes = ep._inputs.check(leaves)
        env = {}
        for vid, kind, target in prog.inputs:
            if kind == "user":
                env[vid] = leaves[target]
            elif vid not in self._reads:
                continue
            elif kind == "constant":
                env[vid] = self.constants[target]
            else:
                env[vid] = _state(self, target)
        outer = (_active.sizes, _active.counts)
        _active.sizes, _active.counts = sizes, {}
        try:
            _execute(self, self._items, env, sizes)
        finally:
            _active.sizes, _active.counts = outer
        return from_tree(rebuild(prog.outputs, env.__getitem__))


def _state(module, name: str):
    """The parameter or buffer of ``module`` at dotted ``name``."""
    owner, _, leaf = name.rpartition(".")
    return getattr(module.get_submodule(owner) if owner else module, leaf)


def register_state(module: nn.Module, state: dict, kinds: dict, empty=nn.Module) -> None:
    """Register ``state`` (dotted name -> tensor, as :func:`torcia.export.named_state` gives) on
    ``module``, making submodules of class ``empty`` along the names where ``module`` has
    none: the same tensor objects, so a tied weight stays one parameter.

    Examples
    --------
    >>> import torcia
    >>> m = torcia.nn.Module()
    >>> torcia.export.register_state(m, {"fc.weight": torcia.nn.Parameter(torcia.ones(2))},
    ...                              {"fc.weight": "parameter"})
    >>> sorted(m.state_dict())
    ['fc.weight']
    """
    for name, t in state.items():
        owner, _, leaf = name.rpartition(".")
        mod = module
        for part in owner.split(".") if owner else ():
            if part not in mod._modules:
                mod.add_module(part, empty())
            mod = mod._modules[part]
        if kinds[name] == "parameter":
            mod.register_parameter(leaf, t if isinstance(t, nn.Parameter)
                                   else nn.Parameter(t, requires_grad=t.requires_grad))
        else:
            mod.register_buffer(leaf, t)


def _execute(module, items: list, env: dict, sizes) -> None:
    for item in items:
        if isinstance(item, list):
            run_nodes(item, env, sizes)
            continue
        name, call = item
        values = [env.get(ref[1]) if ref[0] == "v" else ref[1] for ref in call.args]
        args, kwargs = unflatten_leaves(call.in_spec, iter(values))
        out = module.get_submodule(name)(*args, **kwargs)
        leaves: list = []
        spec = flatten(out, leaves)
        if spec != call.out_spec:
            raise TypeError(f"submodule {name!r} returned a result of structure {spec}; the "
                            f"exported program's call of it returned {call.out_spec}")
        for ref, leaf in zip(call.outs, leaves):
            if ref[0] == "v" and ref[1] is not None:
                env[ref[1]] = leaf


def _plan(root, prog) -> list:
    """The items of the model's own call, registering each callable submodule call's run
    on its :class:`InterpreterModule`."""
    nodes, calls = prog.nodes, prog.calls
    inputs = {vid: (kind, target) for vid, kind, target in prog.inputs}
    made = {}  # value id -> index of the node that made it
    last_read = {}  # value id -> index of the last node reading it
    for i, node in enumerate(nodes):
        for vid in node.value_args():
            last_read[vid] = i
        for vid in node.outs:
            made.setdefault(vid, i)
    for vid in output_values(prog.outputs):
        last_read[vid] = len(nodes)
    children: dict = {-1: []}  # call index (-1: the model's own) -> its direct sub-calls
    stack = [-1]
    for k, call in enumerate(calls):
        del stack[call.depth + 1:]
        children[stack[-1]].append(k)
        children[k] = []
        stack.append(k)

    def run_of(k):
        """The call's run if it can run as its module's own, else None."""
        call = calls[k]
        prefix = call.fqn + "."
        args = {ref[1] for ref in call.args if ref[0] == "v" and ref[1] is not None}
        state, constants = {}, {}
        for i in range(call.start, call.end):
            for vid in nodes[i].value_args():
                if call.start <= made.get(vid, -1) < call.end or vid in args:
                    continue
                kind, target = inputs.get(vid, (None, None))
                if kind in ("parameter", "buffer") and target.startswith(prefix):
                    state[vid] = target[len(prefix):]
                elif kind == "constant":
                    constants[vid] = target
                else:
                    return None
            for vid in nodes[i].outs:
                if last_read.get(vid, -1) >= call.end and ("v", vid) not in call.outs:
                    return None
        items = items_of(k, call.start, call.end, call.fqn)
        dynamic = any(has_sym(r) for i in range(call.start, call.end)
                      for r in [*nodes[i].args, *nodes[i].params.values()])
        return _Run(items, call.args, call.in_spec, call.outs, call.out_spec, state,
                    constants, dynamic)

    def callable_under(k):
        found = []
        for c in children[k]:
            found += [c] if runs[c] is not None else callable_under(c)
        return found

    def items_of(k, start, end, fqn):
        items, i = [], start
        for c in callable_under(k):
            if calls[c].start > i:
                items.append(nodes[i:calls[c].start])
            name = calls[c].fqn[len(fqn) + 1:] if fqn else calls[c].fqn
            items.append((name, calls[c]))
            i = calls[c].end
        if end > i:
            items.append(nodes[i:end])
        return items

    runs: dict = {}
    for k in sorted(range(len(calls)), key=lambda k: -calls[k].depth):  # innermost first
        runs[k] = run_of(k)
    for k, run in enumerate(runs[k] for k in range(len(calls))):
        if run is not None:
            root.get_submodule(calls[k].fqn)._runs.append(run)
    return items_of(-1, 0, len(nodes), "")


def module_call_graph(program) -> list:
    """The entries of :attr:`ExportedProgram.module_call_graph`."""
    prog = program._program

    def names(refs):
        return [f"v{r[1]}" for r in refs if r[0] == "v" and r[1] is not None]

    user = [f"v{vid}" for vid, kind, _ in prog.inputs if kind == "user"]
    outs = [f"v{v}" for v in sorted(output_values(prog.outputs))]
    out_spec = flatten(from_tree(rebuild(prog.outputs, lambda vid: torcia.empty(0))), [])
    entries = [ModuleCallEntry("", ModuleCallSignature(user, outs, program._inputs.spec,
                                                       out_spec, list(program._inputs.names)))]
    first = {}
    for call in prog.calls:
        first.setdefault(call.fqn, call)
    for fqn in prog.module_names:
        call = first.get(fqn) if fqn in prog.preserved else None
        entries.append(ModuleCallEntry(fqn, None if call is None else ModuleCallSignature(
            names(call.args), names(call.outs), call.in_spec, call.out_spec)))
    return entries
