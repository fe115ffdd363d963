"""The "meta" device: tensors with a shape and a dtype but no data.

A meta tensor holds a zero-strided NumPy stand-in (one element, broadcast to the shape),
so it costs no memory however large it is. An op on meta tensors runs the shape function
of its record (:attr:`torcia.library.OpDef.shape`) where it has one: the elementwise
groups, the matrix products, ``linear`` and ops defined by plugins with ``shape=``.
Any other op runs its reference kernel on the stand-ins (their values are zeros), which
gives the right shape and dtype at the cost of computing on zeros.

Examples
--------
>>> import torcia
>>> (torcia.empty(3, 4, device="meta") @ torcia.empty(4, 5, device="meta")).shape
torcia.Size([3, 5])
"""

from __future__ import annotations

import numpy as np

from torcia import ops
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


def _shape_of(x):
    return x.shape if isinstance(x, Meta) else ()


def _dtype_of(*xs):
    arrays = [x.dtype for x in xs if isinstance(x, Meta)]
    return arrays[0] if arrays else np.dtype(np.float32)


def same_shape(x, *rest, **params):
    """One input, dtype kept: ``neg``, ``exp`` on a float input..."""
    return x.shape, x.dtype


def bool_result(x, *rest, **params):
    return np.broadcast_shapes(*(_shape_of(v) for v in (x, *rest))), np.dtype(bool)


def broadcast(*xs, **params):
    """Several inputs broadcast together; the first tensor's (promoted) dtype."""
    return np.broadcast_shapes(*(_shape_of(x) for x in xs)), _dtype_of(*xs)


def matmul(a, b, **params):
    """``matmul`` with NumPy's rules: vectors, matrices and broadcast batches."""
    sa, sb = a.shape, b.shape
    if not sa or not sb:
        raise RuntimeError("both arguments to matmul need to be at least 1D, but they are "
                           f"{len(sa)}D and {len(sb)}D")
    ka = sa[-1]
    kb = sb[-2] if len(sb) > 1 else sb[0]
    if ka != kb:
        left = sa if len(sa) > 1 else (1,) + sa
        right = sb if len(sb) > 1 else sb + (1,)
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({left[-2]}x{left[-1]} "
                           f"and {right[-2]}x{right[-1]})")
    batch = np.broadcast_shapes(sa[:-2], sb[:-2])
    rows = sa[-2:-1]
    cols = sb[-1:] if len(sb) > 1 else ()
    return tuple(batch) + rows + cols, np.result_type(a.dtype, b.dtype)


def linear(x, w, b=None, **params):
    shape, dtype = matmul(x, Meta(w.shape[::-1], w.dtype))
    return shape, dtype


def addmm(c, a, b, **params):
    shape, dtype = matmul(a, b)
    return np.broadcast_shapes(c.shape, shape), dtype


def created(*args, shape, dtype, **params):
    """A creation op's output: ``shape`` and ``dtype`` are parameters."""
    return tuple(shape), np.dtype(dtype)


SHAPES = {}
for _name in ops.UNARY_FLOAT + ops.UNARY_SAME:
    SHAPES[_name] = same_shape
for _name in ops.UNARY_BOOL + ops.COMPARE:
    SHAPES[_name] = bool_result
for _name in ops.BINARY + ops.BINARY_FLOAT:
    SHAPES[_name] = broadcast
for _name in ("zeros", "ones", "empty", "full", "rand", "uniform", "randn", "normal",
              "randint"):
    SHAPES[_name] = created
SHAPES.update({"matmul": matmul, "mm": matmul, "bmm": matmul, "linear": linear,
               "addmm": addmm})


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


def meta_kernel(op: str, shape_fn, reference):
    """The meta kernel of ``op``: its shape function, else its reference kernel on the
    stand-ins; the result is a stand-in again."""
    if shape_fn is not None:
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
    kernel.__name__ = f"{op}_meta"
    return kernel


class MetaPlugin:
    """Core's built-in "meta" device: shapes and dtypes without data."""

    @hookimpl
    def torcia_register_backends(self, registry):
        registry.add(Backend("meta", np, to_host=_to_host, from_host=_from_host))

    @hookimpl
    def torcia_register_kernels(self, registry):
        from torcia import library

        for name, record in library.op_records().items():
            kernel = meta_kernel(name, record.shape, record.kernel)
            if kernel is not None:
                registry.add(name, "meta", kernel, priority=0)
