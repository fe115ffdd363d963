"""Model exporters found by format name, filled by ``torcia_register_exporters``.

torcia-nn ships none itself; torcia-onnx registers "onnx".

Examples
--------
>>> import torcia
>>> "onnx" in torcia.nn.exporters.names() or True
True
"""

from __future__ import annotations

from torcia import plugins

REGISTRY = plugins.Registry("exporter", "torcia_register_exporters")


def names() -> list[str]:
    """The formats :func:`torcia.nn.export` can write (each from a plugin).

    Examples
    --------
    >>> from torcia.nn import exporters
    >>> isinstance(exporters.names(), list)
    True
    """
    return REGISTRY.names()


def export(model, args, path, format="onnx", **options):
    """Write ``model``, traced on the example ``args``, to ``path`` in ``format``."""
    return REGISTRY.get(format)(model, args, path, **options)
