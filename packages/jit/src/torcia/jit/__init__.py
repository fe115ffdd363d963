"""torcia.jit: TorchScript's names for the deployment scripts and libraries that use them.

:func:`trace` and :func:`script` compile a module or function into programs of
torcia.export (the compiler's capture, saved with :func:`save` and run by :func:`load`
without the model's source); :func:`freeze` folds parameters into them and
:func:`optimize_for_inference` runs them through torcia.compile's inductor. ``script``
compiles what one traced graph can hold: control flow that depends on tensor values is a
:class:`NotSupportedError` naming its line. The decorators and predicates libraries touch
at import (:func:`ignore`, :func:`unused`, :func:`export`, :func:`interface`,
:func:`is_scripting`, :func:`is_tracing`, :data:`Final`, :mod:`torcia.jit.annotations`)
mark what they decorate and answer as PyTorch's do in eager code.

Examples
--------
>>> import torcia
>>> @torcia.jit.script
... def gelu_tanh(x):
...     return 0.5 * x * (1 + torcia.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))
>>> round(gelu_tanh(torcia.ones(1)).item(), 4)
0.8412
>>> torcia.jit.is_scripting(), torcia.jit.is_tracing()
(False, False)
"""

from __future__ import annotations

import builtins

from torcia.futures import Future
from torcia.jit import annotations
from torcia.jit._compiled import (
    RecursiveScriptModule,
    ScriptFunction,
    ScriptModule,
    TopLevelTracedModule,
    TracedModule,
    TracerWarning,
    TracingCheckError,
    freeze,
    load,
    optimize_for_inference,
    save,
    script,
    trace,
    trace_module,
)
from torcia.jit._extras import (
    ONNXTracedModule,
    RecursiveScriptClass,
    ScriptWarning,
    jit_module_from_flatbuffer,
    last_executed_optimized_graph,
    run_frozen_optimizations,
    save_jit_module_to_flatbuffer,
    script_method,
    set_module,
)
from torcia.jit._frontend import NotSupportedError
from torcia.jit._fusion import (
    enable_onednn_fusion,
    fuser,
    onednn_fusion_enabled,
    optimized_execution,
    set_fusion_strategy,
    strict_fusion,
)
from torcia.jit._markers import (
    Attribute,
    Final,
    _copy_to_script_wrapper,
    _drop,
    _get_overloads,
    _overload,
    _overload_method,
    _unwrap_optional,
    annotate,
    export,
    ignore,
    interface,
    is_scripting,
    is_tracing,
    isinstance,
    script_if_tracing,
    unused,
)
from torcia.jit._unit import CompilationUnit, export_opnames

__all__ = [
    "Attribute", "CompilationUnit", "Error", "Final", "Future", "NotSupportedError",
    "RecursiveScriptModule", "ScriptFunction", "ScriptModule", "TopLevelTracedModule",
    "TracedModule", "TracerWarning", "TracingCheckError", "annotate", "annotations",
    "enable_onednn_fusion", "export", "export_opnames", "fork", "freeze", "ignore", "interface",
    "is_scripting", "is_tracing",
    "isinstance", "load", "onednn_fusion_enabled", "optimize_for_inference", "save", "script",
    "script_if_tracing", "set_fusion_strategy", "strict_fusion", "trace", "trace_module",
    "unused", "wait",
    "ONNXTracedModule", "RecursiveScriptClass", "ScriptWarning", "fuser",
    "jit_module_from_flatbuffer", "last_executed_optimized_graph", "optimized_execution",
    "run_frozen_optimizations", "save_jit_module_to_flatbuffer", "script_method", "set_module",
]

_script_if_tracing = script_if_tracing


class Error(RuntimeError):
    """What a compiled program raises (``torch.jit.Error``).

    Examples
    --------
    >>> import torcia
    >>> issubclass(torcia.jit.Error, RuntimeError)
    True
    """


def fork(func, *args, **kwargs):
    """Start ``func(*args, **kwargs)`` as a task and return a
    :class:`~torcia.futures.Future` of its result
    (``torch.jit.fork``).

    Outside a compiled program PyTorch runs the task at once, in the caller's thread, and
    so does torcia: its error is raised here, and ops it runs inside :func:`trace` are
    captured in order, as the program's own.

    Examples
    --------
    >>> import torcia
    >>> fut = torcia.jit.fork(torcia.add, torcia.ones(2), 1)
    >>> fut.done(), torcia.jit.wait(fut)
    (True, tensor([2., 2.]))
    """
    future = Future()
    future.set_result(func(*args, **kwargs))
    return future


def wait(future):
    """The result of a :func:`fork`'s task, once it has completed (``torch.jit.wait``).

    Examples
    --------
    >>> import torcia
    >>> torcia.jit.wait(torcia.jit.fork(lambda: 3))
    3
    """
    if not builtins.isinstance(future, Future):  # the module's isinstance is TorchScript's
        raise TypeError(f"wait(): expected a torcia.jit.Future, got {type(future).__name__}")
    return future.wait()
