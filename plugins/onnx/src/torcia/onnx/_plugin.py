"""torcia-onnx's plugin: the "onnx" exporter, through torcia-nn's exporter hook."""

from torcia.plugins import hookimpl


@hookimpl
def torcia_register_exporters(registry):
    from torcia.onnx import export

    registry.add("onnx", export)
