"""The products of :data:`torcia.ops.LINALG`, each declared once: schema, reference kernel,
meta shape, decomposition, autocast policy and refused dtypes. ``matmul`` (NumPy's rules:
vectors, matrices, broadcast batches) is the primitive; ``mm``, ``bmm``, ``dot``,
``outer``, ``addmm`` (``beta * c + alpha * a @ b``), ``tensordot`` (over ``dims=``) and
``einsum`` (``equation=``) decompose into it. A product keeps its first operand's dtype
(the public functions have checked that the operands agree). The solvers, factorizations
and norms are in :mod:`torcia._ops.linalg_solves`, ``linalg_factorizations`` and
``linalg_functions``. The products' public functions are in :mod:`torcia._oplib.linalg`,
their derivatives torcia-autograd's.
"""

from __future__ import annotations

import math
import string

import numpy as np

from torcia._opdef import define
from torcia._ops._common import BOOL, HALF, low_precision, no_kernel, op, refuse

# ----- operands PyTorch refuses ----------------------------------------------------------


def outer_operands(a, b) -> None:
    """Refuse what is not a vector: PyTorch's ``outer`` takes 1-D operands only, where
    NumPy's flattens anything (the reference kernel, the public function and the
    decomposition all check, so that every device refuses alike)."""
    for which, x in (("self", a), ("vec2", b)):
        if x.ndim != 1:
            raise RuntimeError(f"outer: Expected 1-D argument {which}, but got {x.ndim}-D")


def dot_operands(a, b) -> None:
    """Refuse what is not two vectors of one length: PyTorch's ``dot`` takes those only,
    where NumPy's multiplies matrices (checked where ``outer_operands`` is, for the same
    reason)."""
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {a.ndim}D and {b.ndim}D tensors")
    if a.shape[0] != b.shape[0]:
        n, m = a.shape[0], b.shape[0]
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{n}] and src [{m}] to "
                           f"have the same number of elements, but got {n} and {m} elements "
                           f"respectively")


_MATMUL = {BOOL: no_kernel("addmm_impl_cpu_")}
_DOT = {BOOL: no_kernel("dot")}

# ----- reference kernels -----------------------------------------------------------------


class Kernels:
    """The reference kernels (``self.xp`` the array module). NumPy's products of ml_dtypes'
    bfloat16 come back as float32; PyTorch keeps the dtype."""

    def matmul(self, a, b):
        xp = self.xp
        if a.ndim > 2 and b.ndim == 2:
            # one GEMM over all rows: NumPy runs a batch against a transposed 2-D operand
            # in a slow loop (30x slower measured for (32, 64, 128) @ (128, 384).T)
            out = xp.matmul(a.reshape(-1, a.shape[-1]), b).reshape(a.shape[:-1] + b.shape[-1:])
        else:
            out = xp.matmul(_blas_ready(xp, a), _blas_ready(xp, b))
        return _keep(out, a)

    def dot(self, a, b):
        dot_operands(a, b)
        return _keep(self.xp.dot(a, b), a)

    def outer(self, a, b):
        outer_operands(a, b)
        return _keep(self.xp.outer(a, b), a)

    def einsum(self, *operands, equation):
        like = operands[0]
        if low_precision(like):
            # sums in float32, rounded once (NumPy's einsum refuses ml_dtypes' bfloat16,
            # and sums float16 in float16)
            operands = tuple(o.astype(np.float32) for o in operands)
        # NumPy's path search (contractions through BLAS) costs ~50 us: worth it for more
        # than two operands or large ones (c_einsum's loops took 50 ms for an NTK's
        # 'Naf,Mbf->NMab' of (20, 10, 8778) by (5, 10, 8778), tensordot 3 ms)
        optimize = len(operands) > 2 or max(o.size for o in operands) >= 1 << 14
        return _keep(self.xp.einsum(equation, *operands, optimize=optimize), like)

    def tensordot(self, a, b, dims):
        return _keep(self.xp.tensordot(a, b, axes=dims), a)

    def addmm(self, c, a, b, beta=1, alpha=1):
        prod = _keep(a @ b, a)
        if alpha != 1:
            prod = prod * alpha
        if beta == 0:
            return prod
        return prod + (c if beta == 1 else beta * c)


def _blas_ready(xp, x):
    """``x`` itself when each of its matrices is row- or column-major (BLAS takes it),
    else a contiguous copy: matmul on other strides leaves BLAS for a naive loop."""
    if x.ndim < 3:
        return x
    item = x.itemsize
    s1, s2 = x.strides[-2], x.strides[-1]
    if (s2 == item and s1 >= item * x.shape[-1]) or (s1 == item and s2 >= item * x.shape[-2]):
        return x
    return xp.ascontiguousarray(x)


def _keep(out, like):
    """``out`` in ``like``'s dtype (a no-op unless a library widened it)."""
    return out if out.dtype == like.dtype else out.astype(like.dtype)


# ----- meta shapes -----------------------------------------------------------------------


def matmul_shape(a, b, **params):
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


def _addmm_shape(c, a, b, **params):
    shape, dtype = matmul_shape(a, b)
    return np.broadcast_shapes(c.shape, shape), dtype


def _dot_shape(a, b, **params):
    return (), a.dtype


def _outer_shape(a, b, **params):
    return (a.shape[0], b.shape[0]), a.dtype


def _einsum_shape(*operands, equation, **params):
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


def _tensordot_shape(a, b, dims, **params):
    if isinstance(dims, int):
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        da, db = ([d] if isinstance(d, int) else list(d) for d in dims)
    da, db = {d % max(a.ndim, 1) for d in da}, {d % max(b.ndim, 1) for d in db}
    return (tuple(n for i, n in enumerate(a.shape) if i not in da)
            + tuple(n for i, n in enumerate(b.shape) if i not in db)), a.dtype


# ----- decompositions (tensors): each product one matmul ---------------------------------


def mm(a, b):
    return a.matmul(b)


def dot(a, b):
    dot_operands(a, b)
    refuse(_DOT, a)
    return a.matmul(b)


def outer(a, b):
    outer_operands(a, b)
    return a.unsqueeze(1) * b.unsqueeze(0)


def addmm(c, a, b, beta=1, alpha=1):
    prod = a.matmul(b)
    if alpha != 1:
        prod = prod * alpha
    if beta == 0:  # c is ignored, NaN included, as in PyTorch
        return prod
    return prod + (c if beta == 1 else c * beta)


def _axes(ndim, axes):
    return [d % ndim for d in ((axes,) if isinstance(axes, int) else axes)]


def tensordot(a, b, dims=2):
    # NumPy's steps: the contracted dims moved together, the product one matmul
    if isinstance(dims, int):
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        da, db = _axes(a.ndim, dims[0]), _axes(b.ndim, dims[1])
    free_a = [d for d in range(a.ndim) if d not in da]
    free_b = [d for d in range(b.ndim) if d not in db]
    k = math.prod(a.shape[d] for d in da)
    left = a.permute(*free_a, *da).reshape(-1, k)
    right = b.permute(*db, *free_b).reshape(k, -1)
    return left.matmul(right).reshape(tuple(a.shape[d] for d in free_a)
                                      + tuple(b.shape[d] for d in free_b))


# einsum: one contraction of two operands at a time, each one matmul


def _einsum_prepared(x, labels, keep):
    """Operand ``x`` of subscripts ``labels``: a repeated label's diagonal taken, the
    labels that are not in ``keep`` summed out."""
    for label in labels:
        while labels.count(label) > 1:
            i = labels.index(label)
            j = labels.index(label, i + 1)
            x = op("diagonal", x, offset=0, dim1=i, dim2=j)
            labels = labels[:i] + labels[i + 1:j] + labels[j + 1:] + label
    drop = tuple(i for i, c in enumerate(labels) if c not in keep)
    if drop:
        x = x.sum(drop)
        labels = "".join(c for c in labels if c in keep)
    return x, labels


def _contract(x, lx, y, ly, keep):
    """x (labels lx) times y (labels ly), summed over the shared labels not in ``keep``:
    one batched matmul, (batch, x's own, y's own) in the result."""
    size = {c: n for labels, t in ((lx, x), (ly, y)) for c, n in zip(labels, t.shape) if n != 1}
    x = x.expand(tuple(size.get(c, 1) for c in lx))
    y = y.expand(tuple(size.get(c, 1) for c in ly))
    batch = [c for c in lx if c in ly and c in keep]
    summed = [c for c in lx if c in ly and c not in keep]
    own_x = [c for c in lx if c not in ly]
    own_y = [c for c in ly if c not in lx]

    def count(labels):
        return math.prod(size.get(c, 1) for c in labels)

    xm = x.permute(*(lx.index(c) for c in batch + own_x + summed)).reshape(
        count(batch), count(own_x), count(summed))
    ym = y.permute(*(ly.index(c) for c in batch + summed + own_y)).reshape(
        count(batch), count(summed), count(own_y))
    labels = batch + own_x + own_y
    return xm.matmul(ym).reshape(tuple(size.get(c, 1) for c in labels)), "".join(labels)


def einsum(*operands, equation):
    if operands[0].dtype in HALF:  # sums in float32, rounded once, as the reference kernel
        return einsum(*(o.float() for o in operands), equation=equation).to(operands[0].dtype)
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    # the ellipsis as letters of its own, right-aligned as it broadcasts
    spare = [c for c in string.ascii_letters if c not in equation]
    rank = max((o.ndim - len(t) + 3 for t, o in zip(terms, operands) if "..." in t), default=0)
    ellipsis = "".join(spare[:rank])
    terms = [t.replace("...", ellipsis[rank - (o.ndim - len(t) + 3):]) if "..." in t else t
             for t, o in zip(terms, operands)]
    if arrow:
        out = rhs.replace("...", ellipsis)
    else:  # NumPy's implicit output: the labels used once, in alphabetical order
        joined = "".join(terms)
        out = ellipsis + "".join(sorted(c for c in set(joined)
                                        if joined.count(c) == 1 and c not in ellipsis))
    parts = []
    for i, (t, o) in enumerate(zip(terms, operands)):
        others = set(out).union(*(terms[:i] + terms[i + 1:]))
        parts.append(_einsum_prepared(o, t, others))
    x, labels = parts[0]
    for i, (y, ly) in enumerate(parts[1:], 1):
        keep = set(out).union(*(p[1] for p in parts[i + 1:]))
        x, labels = _contract(x, labels, y, ly, keep)
    x = x.permute(*(labels.index(c) for c in out))
    # memory of its own (one operand's transposition or diagonal is a view)
    return x if len(parts) > 1 else x.clone()


# ----- the declarations ------------------------------------------------------------------


def _product(schema, kernel, shape, **fields):
    return define(schema, kernel, shape=shape, group="linalg", **fields)


#: PyTorch runs the matrix products in the low-precision dtype under autocast
_LOWER = {"cpu": "lower", "cuda": "lower"}

#: in the order of :data:`torcia.ops.LINALG`
DECLARED = (
    _product("matmul(Tensor a, Tensor b) -> Tensor", Kernels.matmul, matmul_shape,
             autocast=_LOWER, refuses=_MATMUL),
    _product("mm(Tensor a, Tensor b) -> Tensor", Kernels.matmul, matmul_shape,
             decomposition=mm, autocast=_LOWER, refuses=_MATMUL),
    _product("bmm(Tensor a, Tensor b) -> Tensor", Kernels.matmul, matmul_shape,
             decomposition=mm, autocast=_LOWER, refuses=_MATMUL),
    _product("dot(Tensor a, Tensor b) -> Tensor", Kernels.dot, _dot_shape, decomposition=dot,
             autocast={"cuda": "promote"}, refuses=_DOT),
    _product("outer(Tensor a, Tensor b) -> Tensor", Kernels.outer, _outer_shape,
             decomposition=outer),
    _product("einsum(Tensor *operands, *, str equation=None) -> Tensor", Kernels.einsum,
             _einsum_shape, decomposition=einsum, autocast=_LOWER),
    # dims=None as the records have always read it: the kernel takes dims without a default,
    # and the public function always passes them
    _product("tensordot(Tensor a, Tensor b, *, int[]? dims=None) -> Tensor", Kernels.tensordot,
             _tensordot_shape, decomposition=tensordot,
             autocast={"cpu": "lower", "cuda": "promote"}),
    _product("addmm(Tensor c, Tensor a, Tensor b, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
             Kernels.addmm, _addmm_shape, decomposition=addmm, autocast=_LOWER,
             refuses=_MATMUL),
)
