"""torcia-ao's plugin: the quantized ops (``_ops.py``), defined through the hook any
plugin uses, so that dispatch, tracing and device plugins see them as ops."""

from __future__ import annotations

from torcia.ao._ops import OPS
from torcia.library import hookimpl


@hookimpl
def torcia_register_ops(registry):
    for name, (kernel, backward) in OPS.items():
        registry.define(name, kernel, backward=backward, group="quantized",
                        differentiable=backward is not None)
