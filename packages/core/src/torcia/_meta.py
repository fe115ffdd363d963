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
from torcia._ops._common import first_shape, floating_dtype
from torcia._ops._common import real_dtype as _real
from torcia._ops._common import reduced as _reduced
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


def addmm(c, a, b, **params):
    shape, dtype = matmul(a, b)
    return np.broadcast_shapes(c.shape, shape), dtype


def dot(a, b, **params):
    return (), a.dtype


def outer(a, b, **params):
    return (a.shape[0], b.shape[0]), a.dtype


def batch_of_matrices(drop: int, real: bool = False):
    """A linear-algebra result over the batch dims: ``drop`` trailing dims removed."""
    def shape_fn(a, *rest, **params):
        return a.shape[:len(a.shape) - drop], _real(a.dtype) if real else a.dtype

    return shape_fn


def slogdet(a, **params):
    batch = a.shape[:-2]
    return (batch, a.dtype), (batch, _real(a.dtype))


def eigh(a, **params):
    return (a.shape[:-1], _real(a.dtype)), (a.shape, a.dtype)


def vector_norm(x, ord=2.0, dim=None, keepdim=False, **params):
    return _reduced(x.shape, dim, keepdim), _real(floating_dtype(x.dtype))


def matrix_norm(x, ord="fro", dim=(-2, -1), keepdim=False, **params):
    return _reduced(x.shape, dim, keepdim), _real(floating_dtype(x.dtype))





def _batch(*xs) -> tuple:
    """The broadcast batch dims (all but the last two) of several matrices."""
    return tuple(np.broadcast_shapes(*(x.shape[:-2] for x in xs)))


def einsum(*operands, equation, **params):
    """The output of ``equation`` (explicit ``->`` or implicit, with ``...``)."""
    eq = equation.replace(" ", "")
    inputs, arrow, output = eq.partition("->")
    terms = inputs.split(",")
    if len(terms) != len(operands):
        raise ValueError(f"einsum(): {len(terms)} operands in the equation but "
                         f"{len(operands)} given")
    sizes, ellipsis = {}, []
    for term, x in zip(terms, operands):
        letters = term.replace("...", "")
        if "..." in term:
            if x.ndim < len(letters):
                raise RuntimeError(f"einsum(): the number of subscripts in the equation "
                                   f"({len(letters)}) is more than the number of dimensions "
                                   f"({x.ndim}) for operand {len(ellipsis)}")
            head = term.index("...")
            n_ell = x.ndim - len(letters)
            ellipsis.append(x.shape[head:head + n_ell])
            dims = x.shape[:head] + x.shape[head + n_ell:]
        else:
            if x.ndim != len(letters):
                raise RuntimeError(f"einsum(): the number of subscripts in the equation "
                                   f"({len(letters)}) does not match the number of "
                                   f"dimensions ({x.ndim}) for operand {terms.index(term)}"
                                   " and no ellipsis was given")
            dims = x.shape
        for letter, n in zip(letters, dims):
            seen = sizes.get(letter, 1)
            if seen != n and 1 not in (seen, n):
                raise RuntimeError(f"einsum(): operands do not broadcast with remapped "
                                   f"shapes (original->remapped): subscript {letter} has "
                                   f"sizes {seen} and {n}")
            sizes[letter] = max(seen, n) if letter in sizes else n
    batch = tuple(np.broadcast_shapes(*ellipsis)) if ellipsis else ()
    if not arrow:
        counts = inputs.replace("...", "").replace(",", "")
        output = ("..." if ellipsis else "") + "".join(
            sorted(c for c in set(counts) if counts.count(c) == 1))
    head, _, tail = output.partition("...")
    shape = tuple(sizes[c] for c in head) + (batch if "..." in output else ()) + tuple(
        sizes[c] for c in tail)
    return shape, np.result_type(*(x.dtype for x in operands[:1]))


def tensordot(a, b, dims, **params):
    if isinstance(dims, int):
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        da, db = ([d] if isinstance(d, int) else list(d) for d in dims)
    da, db = {d % max(a.ndim, 1) for d in da}, {d % max(b.ndim, 1) for d in db}
    return (tuple(n for i, n in enumerate(a.shape) if i not in da)
            + tuple(n for i, n in enumerate(b.shape) if i not in db)), a.dtype


def _complex(dtype) -> np.dtype:
    return np.result_type(dtype, np.complex64)


def linalg_eig(a, **params):
    return (a.shape[:-1], _complex(a.dtype)), (a.shape, _complex(a.dtype))


def linalg_eigvals(a, **params):
    return a.shape[:-1], _complex(a.dtype)


def linalg_geqrf(a, **params):
    return (a.shape, a.dtype), (a.shape[:-2] + (min(a.shape[-2:]),), a.dtype)


def linalg_lu_factor(a, **params):
    """``(LU, pivots, info)`` as LAPACK's getrf: int32 pivots and info."""
    return ((a.shape, a.dtype), (a.shape[:-2] + (min(a.shape[-2:]),), np.dtype(np.int32)),
            (a.shape[:-2], np.dtype(np.int32)))


def linalg_lu_permutation(pivots, m=0, dtype=None, **params):
    return pivots.shape[:-1] + (m, m), np.dtype(dtype)


def linalg_ldl_factor(a, hermitian=False, **params):
    return ((a.shape, a.dtype), (a.shape[:-1], np.dtype(np.int32)),
            (a.shape[:-2], np.dtype(np.int32)))


def linalg_ldl_solve(ld, pivots, b, hermitian=False, **params):
    return _batch(ld, b) + b.shape[-2:], np.result_type(ld.dtype, b.dtype)


def linalg_solve(a, b, left=True, **params):
    """NumPy's rule (the kernel's): ``b`` is a vector only when it is 1-D."""
    if b.ndim == 1:
        return a.shape[:-2] + b.shape, np.result_type(a.dtype, b.dtype)
    return _batch(a, b) + b.shape[-2:], np.result_type(a.dtype, b.dtype)


def linalg_solve_triangular(a, b, upper=False, left=True, unitriangular=False, **params):
    return _batch(a, b) + b.shape[-2:], np.result_type(a.dtype, b.dtype)


def linalg_pinv(a, rtol=None, hermitian=False, **params):
    return a.shape[:-2] + a.shape[:-3:-1], a.dtype


def linalg_qr(a, mode="reduced", **params):
    m, n = a.shape[-2:]
    k, batch = min(m, n), a.shape[:-2]
    if mode == "r":
        return ((0,), a.dtype), (batch + (k, n), a.dtype)
    q = m if mode == "complete" else k
    return (batch + (m, q), a.dtype), (batch + (q, n), a.dtype)


def linalg_svd(a, full_matrices=True, **params):
    m, n = a.shape[-2:]
    k, batch = min(m, n), a.shape[:-2]
    return ((batch + (m, m if full_matrices else k), a.dtype), (batch + (k,), _real(a.dtype)),
            (batch + (n if full_matrices else k, n), a.dtype))


def linalg_lstsq(a, b, rcond=None, driver="gelsy", **params):
    """``(solution, residuals, rank, singular_values)``. The residuals exist only when every
    matrix has full rank, which a meta tensor cannot tell: with ``m > n`` and a driver
    other than gelsy the shape depends on the values."""
    m, n = a.shape[-2:]
    if driver != "gelsy" and m > n:
        raise NotImplementedError(
            f"linalg_lstsq: with driver {driver!r} and more rows than columns the "
            "residuals' shape depends on the rank of the matrices, which a meta tensor "
            "does not have; use driver='gelsy'")
    batch = _batch(a, b)
    real = _real(a.dtype)
    singular = batch + (min(m, n),) if driver in ("gelsd", "gelss") else (0,)
    return ((batch + (n, b.shape[-1]), a.dtype), ((0,), real), (batch, np.dtype(np.int64)),
            (singular, real))


def linalg_norm(a, ord=None, dim=None, keepdim=False, **params):
    if dim is not None and len(dim) == 2:
        return matrix_norm(a, dim=dim, keepdim=keepdim)
    return vector_norm(a, dim=dim, keepdim=keepdim)


SHAPES = {}
SHAPES.update({name: op.shape for name, op in DECLARED.items() if op.shape is not None})
SHAPES.update({
    "dot": dot, "outer": outer, "linalg_det": batch_of_matrices(2),
    "linalg_eigvalsh": batch_of_matrices(1, real=True), "linalg_slogdet": slogdet,
    "linalg_eigh": eigh,
    "linalg_vector_norm": vector_norm, "linalg_matrix_norm": matrix_norm,
    "einsum": einsum, "tensordot": tensordot,
    "linalg_eig": linalg_eig, "linalg_eigvals": linalg_eigvals,
    "linalg_geqrf": linalg_geqrf, "linalg_lu_factor": linalg_lu_factor,
    "linalg_lu_permutation": linalg_lu_permutation, "linalg_ldl_factor": linalg_ldl_factor,
    "linalg_ldl_solve": linalg_ldl_solve, "linalg_solve": linalg_solve,
    "linalg_solve_triangular": linalg_solve_triangular, "linalg_pinv": linalg_pinv,
    "linalg_qr": linalg_qr, "linalg_svd": linalg_svd, "linalg_lstsq": linalg_lstsq,
    "linalg_norm": linalg_norm,
})
for _name in ("linalg_inv", "linalg_matrix_exp", "linalg_cholesky"):
    SHAPES[_name] = first_shape
SHAPES.update({"matmul": matmul, "mm": matmul, "bmm": matmul,
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
