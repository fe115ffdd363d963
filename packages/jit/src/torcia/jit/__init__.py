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
from torcia.jit._frontend import NotSupportedError
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

__all__ = [
    "Attribute", "Error", "Final", "NotSupportedError", "RecursiveScriptModule",
    "ScriptFunction", "ScriptModule", "TopLevelTracedModule", "TracedModule",
    "TracerWarning", "TracingCheckError", "annotate", "annotations", "export", "freeze",
    "ignore", "interface", "is_scripting", "is_tracing", "isinstance", "load",
    "optimize_for_inference", "save", "script", "script_if_tracing", "trace",
    "trace_module", "unused",
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
