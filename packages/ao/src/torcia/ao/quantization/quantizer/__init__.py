"""Quantizers of the export flow (``torch.ao.quantization.quantizer``): which ops of an
exported graph :func:`~torcia.ao.quantization.quantize_pt2e.prepare_pt2e` quantizes, and
how."""

from __future__ import annotations

import dataclasses

from torcia.ao._qtensor import per_channel_symmetric, qint8
from torcia.ao.quantization.observer import HistogramObserver, PerChannelMinMaxObserver

__all__ = ["QuantizationConfig", "Quantizer", "X86InductorQuantizer",
           "get_default_x86_inductor_quantization_config"]


@dataclasses.dataclass
class QuantizationConfig:
    """Observer factories for a quantized op's input activation and its weight."""

    input_activation: object
    weight: object
    is_qat: bool = False


def get_default_x86_inductor_quantization_config(is_qat: bool = False,
                                                 is_dynamic: bool = False,
                                                 reduce_range: bool = False):
    """PyTorch's x86 pt2e default: a histogram of the activations on uint8 (0..255), int8
    weights symmetric per output channel.

    Examples
    --------
    >>> from torcia.ao.quantization.quantizer import (
    ...     get_default_x86_inductor_quantization_config)
    >>> config = get_default_x86_inductor_quantization_config()
    >>> type(config.input_activation()).__name__, config.weight().dtype
    ('HistogramObserver', torcia.qint8)
    """
    if is_dynamic:
        raise NotImplementedError("dynamic quantization in the export flow: use "
                                  "quantize_dynamic or quantize_ on the model")
    return QuantizationConfig(
        HistogramObserver.with_args(eps=2 ** -12, reduce_range=reduce_range),
        PerChannelMinMaxObserver.with_args(dtype=qint8, qscheme=per_channel_symmetric,
                                           eps=2 ** -12), is_qat)


class Quantizer:
    """Base of quantizers: :meth:`annotate` says which graph nodes to quantize."""

    def annotate(self, nodes: list) -> dict:
        """Node index -> :class:`QuantizationConfig` for each node to quantize."""
        raise NotImplementedError


class X86InductorQuantizer(Quantizer):
    """The x86 quantizer (``torch.ao.quantization.quantizer.x86_inductor_quantizer``):
    linear layers and 2-D convolutions with constant (parameter) weights.

    Examples
    --------
    >>> from torcia.ao.quantization.quantizer import X86InductorQuantizer
    >>> X86InductorQuantizer().set_global(None).global_config is None
    True
    """

    def __init__(self):
        self.global_config = None
        self.module_type_configs: dict = {}

    def set_global(self, quantization_config):
        self.global_config = quantization_config
        return self

    def annotate(self, nodes: list) -> dict:
        if self.global_config is None:
            return {}
        found = {}
        for i, node in enumerate(nodes):
            if node.kind != "call" or node.op not in ("linear", "conv"):
                continue
            if node.op == "conv" and (node.params.get("groups", ("c", 1))[1] != 1):
                continue  # grouped convolutions stay float
            weight = node.args[1] if len(node.args) > 1 else None
            if weight is None or weight[0] != "v" or node.args[0][0] != "v":
                continue
            found[i] = self.global_config
        return found
