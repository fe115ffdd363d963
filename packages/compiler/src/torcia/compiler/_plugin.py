"""torcia-compiler's built-in plugin: the "eager" and "inductor" backends, registered
through the hook a third-party backend uses."""

from __future__ import annotations

from torcia.compiler import compile, hookimpl
from torcia.compiler.inductor import inductor


def eager(graph, example_inputs, **options):
    """Replay the captured graph as it is (``torch.compile(backend="eager")``)."""
    return graph


@hookimpl
def torcia_register_compile_backends(registry):
    registry.add("eager", eager)
    registry.add("inductor", inductor)


@hookimpl
def torcia_register_names(registry):
    registry.add("torcia.compile", compile)  # torch.compile's place, in core's namespace
