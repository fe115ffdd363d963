"""The rest of ``torch.jit``'s public names: what deployment code and exporters reach for
besides trace/script/save/load."""

from __future__ import annotations

import builtins
import warnings

from torcia import nn
from torcia.jit import _compiled
from torcia.jit._compiled import RecursiveScriptModule, load, save, trace


class ScriptWarning(Warning):
    """A warning about compiled code (``torch.jit.ScriptWarning``).

    Examples
    --------
    >>> import torcia
    >>> issubclass(torcia.jit.ScriptWarning, Warning)
    True
    """


ScriptWarning.__module__ = "torcia.jit"


class RecursiveScriptClass:
    """An instance of a compiled class (``torch.jit.RecursiveScriptClass``). torcia's
    :func:`~torcia.jit.script` returns classes as they are, so this wraps an instance of
    one: attributes read and written, and its methods called, on the instance.

    Examples
    --------
    >>> import torcia
    >>> class Pair:
    ...     def __init__(self):
    ...         self.a = 1
    >>> p = torcia.jit.RecursiveScriptClass(Pair())
    >>> p.a = 3
    >>> p.a, p._c.a
    (3, 3)
    """

    def __init__(self, cpp_class):
        object.__setattr__(self, "_c", cpp_class)

    def __getattr__(self, name):
        return getattr(object.__getattribute__(self, "_c"), name)

    def __setattr__(self, name, value):
        setattr(self._c, name, value)

    def forward_magic_method(self, method_name, *args, **kwargs):
        """Call the instance's ``method_name`` (``__len__``, ``__iter__``...)."""
        method = getattr(self._c, method_name, None)
        if method is None:
            raise TypeError(f"{type(self._c).__name__} has no {method_name}")
        return method(*args, **kwargs)

    def __len__(self):
        return self.forward_magic_method("__len__")

    def __iter__(self):
        return self.forward_magic_method("__iter__")

    def __contains__(self, item):
        return self.forward_magic_method("__contains__", item)

    def __getstate__(self):
        raise RuntimeError("ScriptClasses cannot be pickled")


class ONNXTracedModule(nn.Module):
    """Trace ``inner`` at each call and return ``(graph, outputs)``
    (``torch.jit.ONNXTracedModule``, what exporters call to get a graph): the graph is
    the :func:`~torcia.jit.trace` program's (:class:`torcia.export.ExportGraph`).

    Examples
    --------
    >>> import torcia
    >>> graph, out = torcia.jit.ONNXTracedModule(torcia.nn.ReLU())(torcia.tensor([-1.0, 2.0]))
    >>> [n.op for n in graph.nodes], out.tolist()
    (['relu'], [0.0, 2.0])
    """

    def __init__(self, inner, strict=True, force_outplace=False, return_inputs=False,
                 return_inputs_states=False):
        super().__init__()
        self.inner = inner
        self.strict = strict
        self._force_outplace = force_outplace
        self._return_inputs = return_inputs
        self._return_inputs_states = return_inputs_states

    def forward(self, *args):
        traced = trace(self.inner, args, strict=self.strict)
        outs = traced(*args)
        if self._return_inputs:
            return traced.graph, outs, args
        return traced.graph, outs


def last_executed_optimized_graph():
    """The graph of the program a compiled module or function ran last
    (``torch.jit.last_executed_optimized_graph``), None before any ran.

    Examples
    --------
    >>> import torcia
    >>> relu = torcia.jit.trace(torcia.nn.ReLU(), torcia.zeros(2))
    >>> _ = relu(torcia.ones(2))
    >>> [n.op for n in torcia.jit.last_executed_optimized_graph().nodes]
    ['relu']
    """
    ep = _compiled._last_run[0]
    return None if ep is None else ep.graph


def run_frozen_optimizations(mod, optimize_numerics: bool = True,
                             preserved_methods=None) -> None:
    """Run the frozen-graph optimizations on a frozen module, in place
    (``torch.jit.run_frozen_optimizations``). PyTorch's :func:`~torcia.jit.freeze` runs
    them itself, and so does torcia's (each convolution's eval-mode BatchNorm folded into
    it, parameters as constants, programs captured later frozen when made), so a frozen
    module is left as it is; a module that is not compiled is refused.

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> net = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2)).eval()
    >>> frozen = torcia.jit.freeze(torcia.jit.trace(net, torcia.randn(1, 1, 5, 5)))
    >>> torcia.jit.run_frozen_optimizations(frozen)
    >>> [n.op for n in frozen.graph.nodes]
    ['conv']
    """
    if not builtins.isinstance(mod, RecursiveScriptModule):
        raise RuntimeError("run_frozen_optimizations expects a frozen ScriptModule (from "
                           "torcia.jit.freeze)")


def save_jit_module_to_flatbuffer(m, f, _extra_files=None) -> None:
    """Write a compiled module (``torch.jit.save_jit_module_to_flatbuffer``): torcia
    writes :func:`~torcia.jit.save`'s format, which :func:`jit_module_from_flatbuffer`
    and :func:`~torcia.jit.load` read.

    Examples
    --------
    >>> import io, torcia
    >>> buf = io.BytesIO()
    >>> torcia.jit.save_jit_module_to_flatbuffer(torcia.jit.trace(torcia.nn.Tanh(),
    ...                                                           torcia.zeros(1)), buf)
    >>> _ = buf.seek(0)
    >>> torcia.jit.jit_module_from_flatbuffer(buf)(torcia.zeros(1)).tolist()
    [0.0]
    """
    save(m, f, _extra_files)


def jit_module_from_flatbuffer(f):
    """Read what :func:`save_jit_module_to_flatbuffer` wrote
    (``torch.jit.jit_module_from_flatbuffer``)."""
    return load(f)


def script_method(fn):
    """Mark a method of a ``ScriptModule`` subclass to compile (``torch.jit.script_method``,
    deprecated in PyTorch, which warns so too): torcia compiles a module's ``forward`` when
    it is scripted, so the method is returned as it is.

    Examples
    --------
    >>> import warnings, torcia
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     f = torcia.jit.script_method(lambda self, x: x)
    >>> f(None, 3)
    3
    """
    warnings.warn("`torch.jit.script_method` is deprecated. Please switch to `torch.compile` "
                  "or `torch.export`.", stacklevel=2)
    return fn


def set_module(obj, mod) -> None:
    """Set ``obj.__module__`` to ``mod``, for nicer printing (``torch.jit.set_module``).

    Examples
    --------
    >>> import torcia
    >>> def f():
    ...     pass
    >>> torcia.jit.set_module(f, "my.module")
    >>> f.__module__
    'my.module'
    """
    if not builtins.isinstance(mod, str):
        raise TypeError("The mod argument should be a string")
    obj.__module__ = mod
