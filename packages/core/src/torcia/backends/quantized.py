"""``torcia.backends.quantized``: the quantized engine whose operator set quantized modules
follow (``torch.backends.quantized``).

torcia's int8 kernels are one set for every engine (oneDNN's through torcia-cpu's int8
extra, with a NumPy reference); the engine decides, as in PyTorch, which operators exist:
the fusions that only oneDNN implements (a linear layer with LeakyReLU or Tanh, a
convolution with an addition) refuse to run under another engine, with PyTorch's error.

Examples
--------
>>> import torcia
>>> torcia.backends.quantized.engine
'x86'
>>> torcia.backends.quantized.engine = "onednn"
>>> torcia.backends.quantized.engine
'onednn'
>>> torcia.backends.quantized.engine = "x86"
"""

import sys
import types

#: the engines PyTorch 2.13 offers on x86-64 Linux, in its order
supported_engines = ["qnnpack", "onednn", "x86", "fbgemm"]


class _QuantizedModule(types.ModuleType):
    """The module's class: ``engine`` is checked when set, as PyTorch's descriptor is."""

    _engine = "x86"

    @property
    def engine(self) -> str:
        return _QuantizedModule._engine

    @engine.setter
    def engine(self, value: str) -> None:
        if value == "none":
            raise RuntimeError("quantized engine NoQEngine is not supported")
        if value not in supported_engines:
            raise RuntimeError(f"{value} is not a valid value for quantized engine")
        _QuantizedModule._engine = value


sys.modules[__name__].__class__ = _QuantizedModule
