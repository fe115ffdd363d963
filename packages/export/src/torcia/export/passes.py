"""Transformations of exported programs, for the deployment paths built on them.

:func:`freeze` turns parameters and buffers into constants of the program and folds each
convolution's BatchNorm into its weights (``torch.jit.freeze``'s work); :func:`with_backend`
runs a program through a ``torcia.compile`` backend (the inductor's fusion), specialised to
the sizes of each call. Both return a new :class:`~torcia.export.ExportedProgram`; the
original is left as it was.

Examples
--------
>>> import torcia
>>> from torcia import nn
>>> from torcia.export import passes
>>> model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU()).eval()
>>> ep = torcia.export.export(model, (torcia.randn(1, 3, 8, 8),))
>>> frozen = passes.freeze(ep)
>>> [n.op for n in frozen.graph.nodes], frozen.graph_signature.parameters
(['conv', 'relu'], [])
"""

from __future__ import annotations

import dataclasses

import numpy as np

import torcia.compiler
from torcia.export import ExportedProgram
from torcia.export._program import Program, output_values

__all__ = ["Rewriter", "freeze", "with_backend"]


def _copy(ep: ExportedProgram, program: Program, state_dict: dict, kinds: dict):
    return ExportedProgram(program, ep._inputs, state_dict, kinds, ep.example_inputs)


def freeze(ep: ExportedProgram, preserved_attrs=()) -> ExportedProgram:
    """``ep`` with its parameters and buffers (but those it writes, and
    ``preserved_attrs``) as constants, and every BatchNorm in eval mode that directly
    follows a convolution folded into the convolution's weight and bias.

    Examples
    --------
    >>> import torcia
    >>> from torcia.export import passes
    >>> ep = torcia.export.export(torcia.nn.Linear(2, 2), (torcia.ones(1, 2),))
    >>> passes.freeze(ep).graph_signature.lifted_tensor_constants
    ['weight', 'bias']
    """
    program = ep._program
    written = {n.args[0][1] for n in program.nodes if n.kind == "copy_"}
    keep = set(preserved_attrs)
    constants = dict(program.constants)
    inputs, state_dict, kinds = [], {}, {}
    for vid, kind, target in program.inputs:
        if kind in ("parameter", "buffer") and vid not in written and target not in keep:
            constants[target] = np.array(ep.state_dict[target].__torcia_data__)
            inputs.append((vid, "constant", target))
        else:
            inputs.append((vid, kind, target))
            if kind in ("parameter", "buffer"):
                state_dict[target] = ep.state_dict[target]
                kinds[target] = kind
    frozen = dataclasses.replace(
        program, nodes=[dataclasses.replace(n, args=list(n.args), outs=list(n.outs))
                        for n in program.nodes],
        inputs=inputs, constants=constants, meta=dict(program.meta), backend=None, _cache={})
    _fold_batch_norm(frozen)
    used = {v for n in frozen.nodes for v in n.value_args()} | output_values(frozen.outputs)
    frozen.inputs = [i for i in frozen.inputs if i[0] in used or i[1] == "user"]
    live = {target for _, kind, target in frozen.inputs if kind == "constant"}
    frozen.constants = {k: v for k, v in frozen.constants.items() if k in live}
    return _copy(ep, frozen, state_dict, kinds)


def _fold_batch_norm(program: Program) -> None:
    """conv -> batch_norm (eval) with constant weights: one conv with scaled weights."""
    const = {vid: target for vid, kind, target in program.inputs if kind == "constant"}
    readers: dict = {}
    for node in program.nodes:
        for v in node.value_args():
            readers[v] = readers.get(v, 0) + 1
    outputs = output_values(program.outputs)
    made = {o: node for node in program.nodes for o in node.outs}
    drop = []
    for bn in program.nodes:
        if bn.kind != "call" or bn.op != "batch_norm" or bn.params["training"][1]:
            continue
        x = bn.args[0]
        conv = made.get(x[1]) if x[0] == "v" else None
        refs = bn.args[1:5]
        if conv is None or conv.op != "conv" or readers.get(x[1]) != 1 or x[1] in outputs \
                or any(r[0] != "v" or r[1] not in const for r in refs):
            continue
        if any(readers.get(o, 0) or o in outputs for o in bn.outs[1:]):
            continue  # the batch statistics are read: keep the op
        w_ref, b_ref = conv.args[1], conv.args[2] if len(conv.args) > 2 else ("c", None)
        if w_ref[0] != "v" or w_ref[1] not in const or (
                b_ref[0] == "v" and b_ref[1] not in const):
            continue
        gamma, beta, mean, var = (program.constants[const[r[1]]] for r in refs)
        eps = bn.params["eps"][1]
        weight = program.constants[const[w_ref[1]]]
        bias = program.constants[const[b_ref[1]]] if b_ref[0] == "v" else np.zeros_like(mean)
        scale = gamma / np.sqrt(var.astype(np.float64) + eps)
        new_w = (weight * scale.reshape(-1, *([1] * (weight.ndim - 1)))).astype(weight.dtype)
        new_b = ((bias - mean) * scale + beta).astype(weight.dtype)
        top = max([vid for vid, _, _ in program.inputs] +
                  [o for n in program.nodes for o in n.outs]) + 1
        name_w, name_b = f"folded{top}.weight", f"folded{top}.bias"
        program.constants[name_w], program.constants[name_b] = new_w, new_b
        program.inputs += [(top, "constant", name_w), (top + 1, "constant", name_b)]
        conv.args = [conv.args[0], ("v", top), ("v", top + 1), *conv.args[3:]]
        conv.outs = [bn.outs[0]]
        program.meta[bn.outs[0]] = program.meta.get(bn.outs[0], (None, new_w.dtype))
        drop.append(bn)
    program.nodes = [n for n in program.nodes if all(n is not d for d in drop)]


def with_backend(ep: ExportedProgram, backend="inductor") -> ExportedProgram:
    """``ep`` run through a ``torcia.compile`` backend (a registered name or a callable
    ``backend(graph, example_inputs) -> graph``): each binding of its dynamic sizes is
    optimised once, for the shapes of the first call that has it.

    Examples
    --------
    >>> import torcia
    >>> from torcia.export import passes
    >>> ep = torcia.export.export(torcia.nn.GELU(), (torcia.zeros(4),))
    >>> passes.with_backend(ep, "eager").module()(torcia.zeros(4)).tolist()
    [0.0, 0.0, 0.0, 0.0]
    """
    fn = torcia.compiler.backends.get(backend) if isinstance(backend, str) else backend
    program = dataclasses.replace(ep._program, backend=fn, _cache={})
    return _copy(ep, program, ep.state_dict, ep._kinds)


class Rewriter:
    """Edit an exported program's graph: its :attr:`nodes` (a list of
    :class:`torcia.export.Node`, which the caller replaces, inserts into or removes from),
    new values (:meth:`value`), constant tensors (:meth:`constant`), then
    :meth:`program` for the new :class:`~torcia.export.ExportedProgram` (the original is
    left as it was). What torcia-ao's ``prepare_pt2e``/``convert_pt2e`` are built on.

    Examples
    --------
    >>> import torcia
    >>> from torcia.export import Node, passes
    >>> ep = torcia.export.export(torcia.nn.ReLU(), (torcia.ones(2),))
    >>> edit = passes.Rewriter(ep)
    >>> relu = edit.nodes[0]
    >>> two = edit.constant("two", torcia.tensor(2.0))
    >>> doubled = edit.value()
    >>> edit.nodes.append(Node("call", "mul", [("v", relu.outs[0]), ("v", two)], {},
    ...                        [doubled]))
    >>> edit.outputs = ("v", doubled)
    >>> edit.program().module()(torcia.tensor([-1.0, 3.0])).tolist()
    [0.0, 6.0]
    """

    def __init__(self, ep: ExportedProgram):
        self._ep = ep
        program = ep._program
        self.nodes = [dataclasses.replace(n, args=list(n.args), params=dict(n.params),
                                          outs=list(n.outs)) for n in program.nodes]
        self.inputs = list(program.inputs)
        self.outputs = program.outputs
        self.constants = dict(program.constants)
        self.meta = dict(program.meta)
        used = [vid for vid, _, _ in program.inputs] + [o for n in program.nodes for o in n.outs]
        self._next = max(used, default=-1) + 1

    def value(self) -> int:
        """A new value id."""
        self._next += 1
        return self._next - 1

    def constant(self, name: str, tensor) -> int:
        """A constant input holding ``tensor`` (saved with the program); its value id."""
        vid = self.value()
        self.constants[name] = np.array(tensor.detach().numpy())
        self.inputs.append((vid, "constant", name))
        self.meta[vid] = (tuple(tensor.shape), self.constants[name].dtype)
        return vid

    def input_of(self, vid: int):
        """``(kind, target)`` of the graph input ``vid`` ("parameter"/"buffer" and its
        name, "constant", "user"), or None where ``vid`` is made by a node."""
        for v, kind, target in self.inputs:
            if v == vid:
                return kind, target
        return None

    def array_of(self, vid: int) -> np.ndarray:
        """The array of a parameter, buffer or constant input."""
        kind, target = self.input_of(vid)
        if kind == "constant":
            return self.constants[target]
        return self._ep.state_dict[target].detach().numpy()

    def program(self) -> ExportedProgram:
        read = {v for n in self.nodes for v in n.value_args()} | output_values(self.outputs)
        inputs = [i for i in self.inputs if i[0] in read or i[1] in ("user", "parameter",
                                                                         "buffer")]
        live = {target for _, kind, target in inputs if kind == "constant"}
        program = dataclasses.replace(
            self._ep._program, nodes=list(self.nodes), inputs=inputs, outputs=self.outputs,
            constants={k: v for k, v in self.constants.items() if k in live},
            meta=self.meta, backend=None, _cache={})
        return _copy(self._ep, program, self._ep.state_dict, self._ep._kinds)
