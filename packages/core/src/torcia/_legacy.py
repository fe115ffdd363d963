"""PyTorch's legacy tensor types: ``torcia.FloatTensor(2, 3)``, ``torcia.LongTensor(data)``,
``isinstance(x, torcia.FloatTensor)``, and the legacy constructor method ``Tensor.new``.

Each type is a constructor for its dtype (sizes give an uninitialised tensor, data is
converted) and an ``isinstance`` check on dtype and device, as in PyTorch; tensors are all
of class :class:`torcia.Tensor`.
"""

from __future__ import annotations

import numpy as np

from torcia import _dtype as D
from torcia._size import Size
from torcia._tensor import FACTORIES as _FACTORIES
from torcia._tensor import Tensor


def legacy_new(dtype, args, device_=None):
    """PyTorch's legacy constructor ``torch.Tensor(*sizes)`` / ``torch.Tensor(data)`` (and
    ``torch.FloatTensor`` ...): sizes give an uninitialised tensor, data is converted."""
    if not args or all(isinstance(a, (int, np.integer)) and not isinstance(a, bool)
                           for a in args):
        return _FACTORIES.empty(*[int(a) for a in args] or [0], dtype=dtype, device=device_)
    if len(args) > 1:
        raise TypeError(f"new() received an invalid combination of arguments: expected sizes "
                        f"(ints) or one sequence of data, got "
                        f"({', '.join(type(a).__name__ for a in args)})")
    data = args[0]
    if isinstance(data, Size):
        return _FACTORIES.empty(*data, dtype=dtype, device=device_)
    if isinstance(data, Tensor):
        if data.dtype is not dtype:
            raise TypeError(f"expected a {dtype} tensor (got {data.dtype}); convert it with "
                            f".to({dtype})")
        return data
    if isinstance(data, (int, float, bool, np.generic)):
        raise TypeError(f"new(): data must be a sequence (got {type(data).__name__})")
    return _FACTORIES.tensor(data, dtype=dtype, device=device_)


_FACTORIES.legacy = legacy_new


class _LegacyTensorType(type):
    """The metaclass: calling a type builds a tensor, ``isinstance`` checks the dtype."""

    def __call__(cls, *args, device=None):
        dev = device if device is not None else cls.device_type
        return legacy_new(cls.dtype, args, None if dev == "cpu" else dev)

    def __instancecheck__(cls, obj):
        return (isinstance(obj, Tensor) and obj.dtype is cls.dtype
                and obj.device.type == cls.device_type)

    def __repr__(cls):
        return f"<class 'torcia.{'cuda.' if cls.device_type == 'cuda' else ''}{cls.__name__}'>"


_TYPES = {
    "FloatTensor": D.float32, "DoubleTensor": D.float64, "HalfTensor": D.float16,
    "BFloat16Tensor": D.bfloat16, "ByteTensor": D.uint8, "CharTensor": D.int8,
    "ShortTensor": D.int16, "IntTensor": D.int32, "LongTensor": D.int64,
    "BoolTensor": D.bool_,
}


def _make(name, dtype, device_type):
    doc = (f"Legacy constructor of {dtype} tensors on {device_type!r}: "
           f"``{name}(*sizes)`` (uninitialised) or ``{name}(data)``.")
    if device_type == "cpu":
        doc += (f"\n\nExamples\n--------\n>>> import torcia\n>>> torcia.{name}(2, 3).shape\n"
                f"torcia.Size([2, 3])\n>>> torcia.{name}([1, 0]).dtype\n{dtype}\n"
                f">>> isinstance(torcia.zeros(2, dtype={dtype}), torcia.{name})\nTrue\n")
    else:
        # building one needs a GPU; the isinstance check does not
        doc += (f"\n\nExamples\n--------\n>>> import torcia\n>>> torcia.cuda.{name}.dtype\n"
                f"{dtype}\n>>> isinstance(torcia.zeros(2, dtype={dtype}), torcia.cuda.{name})\n"
                "False\n")
    return _LegacyTensorType(name, (), {"dtype": dtype, "device_type": device_type,
                                        "__doc__": doc, "__module__": "torcia"})


CPU_TYPES = {name: _make(name, dt, "cpu") for name, dt in _TYPES.items()}
CUDA_TYPES = {name: _make(name, dt, "cuda") for name, dt in _TYPES.items()}


def new(self, *args, **kwargs):
    """``self.new(...)``: PyTorch's legacy constructor with ``self``'s dtype and device.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([1.0], dtype=torcia.float64)
    >>> x.new([1, 2]), x.new(2, 3).shape
    (tensor([1., 2.], dtype=torcia.float64), torcia.Size([2, 3]))
    """
    return legacy_new(self.dtype, args, kwargs.get("device", self.device))
