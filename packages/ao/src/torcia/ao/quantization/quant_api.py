"""torchao's ``quantize_(model, config)``: the Linear layers of a model rewritten in place
for one weight (and activation) scheme, on the same kernels as the eager flow.

- :class:`Int8DynamicActivationInt8WeightConfig`: int8 weights symmetric per output
  channel, activations quantized on each call to int8, symmetric per row (per token);
  the product in integers (MKL's int8 GEMM through torcia-cpu).
- :class:`Int8WeightOnlyConfig`: int8 weights per output channel, dequantized as they
  are used; activations stay float (a quarter of the weight memory).
- :class:`Int4WeightOnlyConfig`: 4-bit weights in groups of ``group_size`` along the
  input features, each group its scale and zero point (an eighth of the memory).
"""

from __future__ import annotations

import dataclasses

import numpy as np

import torcia
from torcia import nn
from torcia.ao._ops import pack_int4
from torcia.library import call

__all__ = ["Int4WeightOnlyConfig", "Int8DynamicActivationInt8WeightConfig",
           "Int8WeightOnlyConfig", "QuantizedLinear", "quantize_"]


@dataclasses.dataclass
class Int8DynamicActivationInt8WeightConfig:
    """int8 weights (symmetric, per output channel) and int8 activations quantized per
    row at run time (``torchao.quantization.Int8DynamicActivationInt8WeightConfig``).

    Examples
    --------
    >>> from torcia.ao.quantization import Int8DynamicActivationInt8WeightConfig
    >>> Int8DynamicActivationInt8WeightConfig().act_mapping_type
    'symmetric'
    """

    act_mapping_type: str = "symmetric"
    weight_only_decode: bool = False
    layout: object = None


@dataclasses.dataclass
class Int8WeightOnlyConfig:
    """int8 weights (symmetric, per output channel), float activations
    (``torchao.quantization.Int8WeightOnlyConfig``).

    Examples
    --------
    >>> from torcia.ao.quantization import Int8WeightOnlyConfig
    >>> Int8WeightOnlyConfig().group_size is None
    True
    """

    group_size: int | None = None


@dataclasses.dataclass
class Int4WeightOnlyConfig:
    """4-bit weights in groups along the input features, a scale and zero point per group
    (``torchao.quantization.Int4WeightOnlyConfig``).

    Examples
    --------
    >>> from torcia.ao.quantization import Int4WeightOnlyConfig
    >>> Int4WeightOnlyConfig(group_size=64).group_size
    64
    """

    group_size: int = 128
    layout: object = None
    use_hqq: bool = False


def _per_channel_int8(weight: np.ndarray):
    amax = np.abs(weight).max(axis=1)
    scales = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
    q = np.clip(np.rint(weight / scales[:, None]), -127, 127).astype(np.int8)
    return q, scales


def _group_int4(weight: np.ndarray, group: int):
    n, k = weight.shape
    groups = -(-k // group)
    padded = np.zeros((n, groups * group), np.float32)
    padded[:, :k] = weight
    blocks = padded.reshape(n, groups, group)
    lo, hi = blocks.min(axis=2), blocks.max(axis=2)
    scales = np.where(hi > lo, (hi - lo) / 15.0, 1.0).astype(np.float32)
    zeros = np.clip(np.rint(-lo / scales), 0, 15).astype(np.float32)
    q = np.clip(np.rint(blocks / scales[:, :, None]) + zeros[:, :, None], 0, 15)
    return pack_int4(q.reshape(n, -1)[:, :k].astype(np.uint8)), scales, zeros


class QuantizedLinear(nn.Module):
    """A Linear layer as :func:`quantize_` rewrites it: float in and out, its weight
    quantized by ``config``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.quantization import QuantizedLinear, Int8WeightOnlyConfig
    >>> _ = torcia.manual_seed(0)
    >>> lin = torcia.nn.Linear(32, 8)
    >>> q = QuantizedLinear(lin, Int8WeightOnlyConfig())
    >>> x = torcia.randn(2, 32)
    >>> bool((q(x) - lin(x)).abs().max() < 0.01)
    True
    """

    def __init__(self, linear: nn.Linear, config):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.config = config
        weight = linear.weight.detach().numpy().astype(np.float32)
        self.register_buffer("bias", None if linear.bias is None
                             else linear.bias.detach().to(torcia.float32))
        if isinstance(config, Int4WeightOnlyConfig):
            packed, scales, zeros = _group_int4(weight, config.group_size)
            self.register_buffer("weight_packed", torcia.from_numpy(packed))
            self.register_buffer("weight_scales", torcia.from_numpy(scales))
            self.register_buffer("weight_zeros", torcia.from_numpy(zeros))
        else:
            q, scales = _per_channel_int8(weight)
            self.register_buffer("weight_int8", torcia.from_numpy(q))
            self.register_buffer("weight_scales", torcia.from_numpy(scales))

    def forward(self, x):
        config = self.config
        if isinstance(config, Int4WeightOnlyConfig):
            return call("linear_weight_int4", (x, self.weight_packed, self.weight_scales,
                                               self.weight_zeros, self.bias),
                        {"group_size": config.group_size})
        if isinstance(config, Int8WeightOnlyConfig):
            return call("linear_weight_int8", (x, self.weight_int8, self.weight_scales,
                                               self.bias), {})
        return call("linear_dynamic", (x, self.weight_int8, self.weight_scales, self.bias),
                    {"per_row": True, "reduce_range": False})

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"config={type(self.config).__name__}")


_CONFIGS = (Int8DynamicActivationInt8WeightConfig, Int8WeightOnlyConfig, Int4WeightOnlyConfig)


def _is_linear(module, fqn):
    return isinstance(module, nn.Linear)


def quantize_(model, config, filter_fn=None, device=None):
    """Rewrite, in place, every Linear layer of ``model`` that ``filter_fn(module,
    name)`` accepts (by default every ``nn.Linear``) as a :class:`QuantizedLinear` of
    ``config`` (``torchao.quantization.quantize_``).

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> from torcia.ao.quantization import quantize_, Int8DynamicActivationInt8WeightConfig
    >>> model = nn.Sequential(nn.Linear(16, 16), nn.GELU(), nn.Linear(16, 4))
    >>> quantize_(model, Int8DynamicActivationInt8WeightConfig())
    >>> type(model[0]).__name__, model(torcia.randn(2, 16)).shape
    ('QuantizedLinear', torcia.Size([2, 4]))
    """
    if not isinstance(config, _CONFIGS):
        raise TypeError(f"quantize_: config must be one of "
                        f"{', '.join(c.__name__ for c in _CONFIGS)}, got "
                        f"{type(config).__name__}")
    accept = filter_fn or _is_linear

    def walk(module, prefix):
        for name, child in list(module.named_children()):
            fqn = f"{prefix}.{name}" if prefix else name
            if isinstance(child, nn.Linear) and accept(child, fqn):
                module._modules[name] = QuantizedLinear(child, config)
            else:
                walk(child, fqn)

    if isinstance(model, nn.Linear) and accept(model, ""):
        raise ValueError("quantize_ rewrites the Linear layers inside a model; wrap a single "
                         "Linear in a module (nn.Sequential) first")
    walk(model, "")
