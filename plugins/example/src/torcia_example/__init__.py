"""An example torcia plugin: the ``"example"`` device.

The device keeps its arrays in NumPy like ``"cpu"``, but in memory of its own: moving a
tensor there or back copies it, as a transfer to a real accelerator would. It has kernels for
three ops only, enough to show the two hooks every device plugin implements::

    >>> import torcia
    >>> x = torcia.tensor([1.0, -2.0], device="example")
    >>> (x * 3).relu()
    tensor([3., 0.], device='example:0')
"""

from __future__ import annotations

import numpy as np

import torcia
from torcia.backend import Backend

DEVICE = "example"


def _copy(array, index=None):
    # NOTE: a copy, not a view: tensors on two devices must never share memory
    return np.array(array, copy=True)


def _relu(a):
    return np.maximum(a, 0).astype(a.dtype, copy=False)


#: op name -> kernel; a kernel takes arrays positionally and the op's parameters as keywords.
KERNELS = {"add": np.add, "mul": np.multiply, "relu": _relu}


@torcia.hookimpl
def torcia_register_backends(registry):
    registry.add(Backend(DEVICE, np, to_host=_copy, from_host=_copy))


@torcia.hookimpl
def torcia_register_kernels(registry):
    for op, kernel in KERNELS.items():
        registry.add(op, DEVICE, kernel, priority=10)
