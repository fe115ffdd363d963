"""torcia-onnx's plugin: the "onnx" exporter, through torcia-nn's exporter hook."""

from torcia.plugins import hookimpl


def _export(model, args, path, **options):
    """:func:`torcia.onnx.export`, whose module (and onnx's import, about 0.7 s) loads with
    the first export rather than with the registry."""
    from torcia.onnx import export

    return export(model, args, path, **options)


@hookimpl
def torcia_register_exporters(registry):
    registry.add("onnx", _export)
