"""``torch.jit.CompilationUnit`` (functions compiled from source text) and
``torch.jit.export_opnames`` (the ops a compiled program calls)."""

from __future__ import annotations

import builtins
import itertools
import linecache
import types
import typing

import torcia
from torcia.jit._compiled import RecursiveScriptModule, ScriptFunction, _program_of, script

_UNITS = itertools.count()


class CompilationUnit:
    """Functions compiled from TorchScript-style source (``torch.jit.CompilationUnit``).

    Each top-level ``def`` of the source becomes a :class:`ScriptFunction`, found as an
    attribute of the unit (``cu.foo``). The source runs with ``torcia``, and ``torch``
    as its alias (so TorchScript source written for PyTorch reads as it is), ``Tensor``
    and ``typing``'s names in scope; functions call each other by name.

    Parameters
    ----------
    lang : str, optional
        Source to :meth:`define` at once.

    Examples
    --------
    >>> import torcia
    >>> cu = torcia.jit.CompilationUnit('''
    ... def foo(x):
    ...     return x + 1
    ... def bar(x, y: int):
    ...     return foo(x) * y
    ... ''')
    >>> cu.bar(torcia.ones(2), 3)
    tensor([6., 6.])
    >>> [f.name for f in cu.get_functions()], cu.find_function("baz")
    (['foo', 'bar'], None)
    """

    def __init__(self, lang: str | None = None, _frames_up: int = 0):
        self._functions: dict[str, ScriptFunction] = {}
        self._scope: dict = {name: getattr(typing, name) for name in typing.__all__}
        self._scope.update(torch=torcia, torcia=torcia, Tensor=torcia.Tensor,
                           __name__=f"torcia.jit.CompilationUnit{next(_UNITS)}")
        if lang is not None:
            self.define(lang)

    def define(self, src: str, rcb=None, _frames_up: int = 0) -> None:
        """Compile the functions of ``src`` into this unit (the unit's earlier ones in
        scope)."""
        filename = f"<{self._scope['__name__']}:{len(self._functions)}>"
        # kept where inspect finds it: script() reads the source of what it compiles
        linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
        before = dict(self._scope)
        exec(compile(src, filename, "exec"), self._scope)  # noqa: S102 - the user's source
        for name, value in self._scope.items():
            if builtins.isinstance(value, types.FunctionType) and before.get(name) is not value:
                self._functions[name] = script(value)

    def find_function(self, name: str) -> ScriptFunction | None:
        """The compiled function ``name``, or None."""
        return self._functions.get(name)

    def get_functions(self) -> list:
        """The compiled functions, in the order they were defined."""
        return list(self._functions.values())

    def __getattr__(self, name: str):
        functions = self.__dict__.get("_functions", {})
        if name in functions:
            return functions[name]
        raise AttributeError(f"'CompilationUnit' has no attribute '{name}'")


def export_opnames(m) -> list:
    """The names of the ops a compiled module or function calls, sorted
    (``torch.jit.export_opnames``): what a build for deployment must keep.

    Names are torcia's op records' (those of ``graph.nodes``) in TorchScript's
    ``namespace::name`` form: ``aten::`` for core ops, so the common ones read as
    PyTorch's (``aten::linear``, ``aten::relu``). A scripted module has a program once it
    has run (or been given ``example_inputs``).

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> m = torcia.jit.trace(nn.Sequential(nn.Linear(3, 2), nn.ReLU()), torcia.ones(1, 3))
    >>> torcia.jit.export_opnames(m)
    ['aten::linear', 'aten::relu']
    """
    if not builtins.isinstance(m, (ScriptFunction, RecursiveScriptModule)):
        raise AttributeError(f"'{type(m).__name__}' object has no attribute '_c': "
                             "export_opnames expects a ScriptModule or ScriptFunction")
    # the program's other steps are a dtype conversion and a buffer's update
    names = {"cast": "to", "copy_": "copy_"}
    ops = {n.op if n.kind == "call" else names.get(n.kind) for n in _program_of(m).graph.nodes}
    return sorted(f"aten::{op}" for op in ops if op is not None)
