"""The "meta" device: tensors with a shape and a dtype but no data.

A meta tensor holds a zero-strided NumPy stand-in (one element, broadcast to the shape),
so it costs no memory however large it is. An op on meta tensors runs the shape function
of its record (:attr:`torcia.library.OpDef.shape`): every built-in op has one but those of
:data:`DATA_DEPENDENT` (``nonzero``, ``unique``, ``masked_select``, ``bincount``), whose
output shape depends on the values and which raise :class:`NotImplementedError` on this
device, as on PyTorch's. A plugin's op defined without ``shape=`` runs its reference
kernel on the stand-ins (their values are zeros), which gives the shape and dtype at the
cost of computing on zeros.

Examples
--------
>>> import torcia
>>> (torcia.empty(3, 4, device="meta") @ torcia.empty(4, 5, device="meta")).shape
torcia.Size([3, 5])
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from torcia import ops
from torcia._ops import DECLARED
from torcia.backend import Backend
from torcia.plugins import hookimpl


def stand_in(shape, dtype) -> np.ndarray:
    """A writable zero-strided array of ``shape`` and ``dtype`` holding one element."""
    one = np.zeros(1, dtype=dtype)
    return np.lib.stride_tricks.as_strided(one, shape=tuple(shape), strides=(0,) * len(shape),
                                           writeable=True)


def _to_host(arr):
    raise NotImplementedError(
        "Cannot copy out of meta tensor; no data! Create a tensor on another device "
        "(e.g. torcia.empty_like(t, device='cpu')) to hold values"
    )


def _from_host(arr, index=None):
    return stand_in(arr.shape, arr.dtype)


class Meta:
    """The shape and dtype of one input of a shape function (None for an absent one)."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)


# ----- shape functions of the built-in groups ---------------------------------------------
# Each receives one Meta (or Python scalar, or None) per input and the op's parameters, and
# returns (shape, numpy dtype), or a tuple of those for several outputs. The dispatch path
# has already promoted the inputs, so an elementwise result keeps the promoted dtype.


SHAPES = {name: op.shape for name, op in DECLARED.items() if op.shape is not None}


def _meta_of(x):
    if isinstance(x, np.ndarray):
        return Meta(x.shape, x.dtype)
    if isinstance(x, (list, tuple)):
        return type(x)(_meta_of(v) for v in x)
    return x


def _stand_ins(result):
    # (shape, dtype) for one output; a tuple of such pairs for several
    if len(result) == 2 and not isinstance(result[1], tuple):
        return stand_in(result[0], result[1])
    return tuple(stand_in(s, d) for s, d in result)


#: Built-in ops whose output shape depends on the input's values, so no shape function can
#: exist; on the meta device they raise, as on PyTorch's, rather than compute on stand-ins
#: (whose zeros would give a wrong shape). The value says why.
DATA_DEPENDENT = {
    "nonzero": "the number of nonzero elements",
    "unique": "the number of distinct values",
    "masked_select": "the number of True elements of the mask",
    "bincount": "the largest value of the input",
}


def _data_dependent(op: str):
    def kernel(*args, **params):
        raise NotImplementedError(
            f"{op}: cannot run on the meta device: the shape of its output depends on "
            f"{DATA_DEPENDENT[op]}, and a meta tensor has no values. Run it on a device "
            "with data (e.g. 'cpu')")

    return kernel


def meta_kernel(op: str, shape_fn, reference):
    """The meta kernel of ``op``: its shape function, else its reference kernel on the
    stand-ins; the result is a stand-in again. An op of :data:`DATA_DEPENDENT` raises
    :class:`NotImplementedError`."""
    if op in DATA_DEPENDENT and shape_fn is None:
        kernel = _data_dependent(op)
    elif shape_fn is not None:
        def kernel(*args, **params):
            return _stand_ins(shape_fn(*(_meta_of(a) for a in args), **params))
    elif reference is not None:
        def kernel(*args, **params):
            out = reference(*args, **params)
            if isinstance(out, tuple):
                return tuple(stand_in(o.shape, o.dtype) for o in out)
            out = np.asarray(out)
            return stand_in(out.shape, out.dtype)
    else:
        return None
    kernel.shape_function = shape_fn  # None: the reference kernel runs on stand-ins
    kernel.__name__ = f"{op}_meta"
    return kernel


#: What returns the op records ({name: OpDef}) the meta device has kernels for:
#: torcia._oprecords's op_records, added when it loads (import torcia loads it, before the
#: plugins register their kernels).
RECORD_SOURCES: list[Callable[[], dict]] = []


class MetaPlugin:
    """Core's built-in "meta" device: shapes and dtypes without data."""

    @hookimpl
    def torcia_register_backends(self, registry):
        registry.add(Backend("meta", np, to_host=_to_host, from_host=_from_host))

    @hookimpl
    def torcia_register_kernels(self, registry):
        for records in RECORD_SOURCES:
            for name, record in records().items():
                kernel = meta_kernel(name, record.shape, record.kernel)
                if kernel is not None:
                    registry.add(name, "meta", kernel, priority=0)


#: Built-in ops without a shape function: those of :data:`DATA_DEPENDENT`, which raise on
#: the meta device. The test of the meta device holds this list to what is missing, so it
#: only shrinks; an op added without a shape function would run its reference kernel on
#: the stand-ins.
WITHOUT_SHAPE = frozenset(n for n in ops.ALL if n not in SHAPES)
