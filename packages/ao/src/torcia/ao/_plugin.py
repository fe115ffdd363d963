"""torcia-ao's plugin: the quantized ops (``_ops.py``), defined through the hook any
plugin uses, so that dispatch, tracing and device plugins see them as ops; and torch's
top-level names of quantized tensors (``torch.qint8``, ``torch.quantize_per_tensor``...),
lent to core's namespace, and ``torch.ops.quantized`` to its compat runner's."""

from __future__ import annotations

from types import SimpleNamespace

from torcia.ao._ops import OPS, SHAPES
from torcia.library import hookimpl

#: the names ``torcia.<name>`` shows (core's ``_QUANTIZATION`` looks them up)
TOP_LEVEL = ("quantize_per_tensor", "quantize_per_channel", "quantize_per_tensor_dynamic",
             "dequantize", "qint8", "quint8", "qint32", "quint4x2", "per_tensor_affine",
             "per_channel_affine", "per_tensor_symmetric", "per_channel_symmetric",
             "per_channel_affine_float_qparams", "qscheme")


@hookimpl
def torcia_register_ops(registry):
    for name, (kernel, backward) in OPS.items():
        registry.define(name, kernel, backward=backward, shape=SHAPES[name],
                        group="quantized", differentiable=backward is not None)


@hookimpl
def torcia_register_names(registry):
    # imported here, when a lent name is first looked up: the plugin itself loads with
    # every torcia session, the quantization modules (and torcia-nn) only when wanted
    from torcia.ao import quantization
    from torcia.ao.ops import quantized

    for name in TOP_LEVEL:
        registry.add(f"torcia.{name}", getattr(quantization, name))
    # torch.ops.quantized: a namespace, not the module (a module attribute of a compat
    # module is imported under its torch name, which is no module)
    registry.add("torcia.compat.ops.quantized", SimpleNamespace(
        **{name: getattr(quantized, name) for name in quantized.__all__}))
