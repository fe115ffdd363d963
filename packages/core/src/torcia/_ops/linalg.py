"""The products of :data:`torcia.ops.LINALG`, each declared once: schema, reference kernel,
meta shape, decomposition, autocast policy and refused dtypes. ``matmul`` (NumPy's rules:
vectors, matrices, broadcast batches) is the primitive; ``mm``, ``bmm``, ``dot``,
``outer``, ``addmm`` (``beta * c + alpha * a @ b``), ``tensordot`` (over ``dims=``) and
``einsum`` (``equation=``) decompose into it. A product keeps its first operand's dtype
(the public functions have checked that the operands agree). The solvers, factorizations
and norms are in :mod:`torcia._ops.linalg_solves`, ``linalg_factorizations`` and
``linalg_functions``. The products' public functions are at the end of this module, next
to their declarations, with the functions at ``torcia.*`` built on them or on
:mod:`torcia.linalg`'s (``addmv``, ``cdist``, ``det``, ``cov``, ``vdot``, the distances
``pairwise_distance`` and ``cosine_similarity``, ``bilinear``...), which
:mod:`torcia._oplib` registers as a family; their derivatives are torcia-autograd's.
"""

from __future__ import annotations

import builtins
import math
import string
from collections.abc import Callable

import numpy as np

from torcia import _dtype as D
from torcia import _opdef
from torcia._dtype import torch_type_name as _torch_name
from torcia._grad_mode import no_grad
from torcia._opdef import define
from torcia._ops import linalg_functions, linalg_solves
from torcia._ops._common import (
    BOOL,
    HALF,
    autocast_as,
    broadcast_error,
    functional,
    low_precision,
    no_kernel,
    op,
    operand_as,
    promoted,
    refuse,
    to_float,
    wrap_dim,
)
from torcia._ops.complex_numbers import complex as _complex_of
from torcia._ops.complex_numbers import conj
from torcia._ops.views import broadcast_tensors

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
        if a.ndim > 2 and b.ndim > 2 and xp is np and D.np_floating(a.dtype) and (
                a.shape[-2] * a.shape[-1] * b.shape[-1] < LOOPED_WORK):
            return _looped_product(a, b)
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
        # overflow warns from NumPy's Python code, outside the modules that
        # torcia's warning filter covers (torcia/__init__.py)
        with np.errstate(all="ignore"):
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
        if low_precision(a):
            # PyTorch scales and adds in float32, where the product was summed, and rounds
            # once (its GEMM's epilogue, and its loop for small batches): rounded to the
            # dtype first, then scaled and added in it, 25-65% of elements differed
            work = self.xp.float32
            out = self.addmm(c.astype(work), a.astype(work), b.astype(work), work(beta),
                             work(alpha))
            return out.astype(a.dtype)
        prod = self.matmul(a, b)
        if alpha != 1:
            prod = prod * alpha
        if beta == 0:
            return prod
        return prod + (c if beta == 1 else beta * c)


#: PyTorch's batched products (bmm, and matmul of two batches) of fewer multiply-adds a
#: matrix than this run its own loop rather than BLAS (bmm_out_or_baddbmm_)
LOOPED_WORK = 400


def _looped_product(a, b):
    """A batched product as PyTorch's loop for small matrices computes it: each element
    summed from zero over the inner dim in order, a product and a sum rounded at each
    step (no fused multiply-add), in float32 for float16 and bfloat16; BLAS's blocked
    sums differ in the last bits of about half the elements."""
    dtype = a.dtype
    work = np.dtype(np.float32) if low_precision(a) else dtype
    a, b = a.astype(work, copy=False), b.astype(work, copy=False)
    out = np.zeros(np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
                   + (a.shape[-2], b.shape[-1]), work)
    for k in range(a.shape[-1]):
        out += a[..., :, k:k + 1] * b[..., k:k + 1, :]
    return out.astype(dtype, copy=False)


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


def matrix_product(a, b):
    return a.matmul(b)


def inner_product(a, b):
    dot_operands(a, b)
    refuse(_DOT, a)
    return a.matmul(b)


def outer_product(a, b):
    outer_operands(a, b)
    return a.unsqueeze(1) * b.unsqueeze(0)


def scaled_product_sum(c, a, b, beta=1, alpha=1):
    prod = a.matmul(b)
    if alpha != 1:
        prod = prod * alpha
    if beta == 0:  # c is ignored, NaN included, as in PyTorch
        return prod
    return prod + (c if beta == 1 else c * beta)


def _axes(ndim, axes):
    return [d % ndim for d in ((axes,) if isinstance(axes, int) else axes)]


def contracted(a, b, dims=2):
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


def einstein_sum(*operands, equation):
    if operands[0].dtype in HALF:  # sums in float32, rounded once, as the reference kernel
        return einstein_sum(*(o.float() for o in operands), equation=equation).to(
            operands[0].dtype)
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
             decomposition=matrix_product, autocast=_LOWER, refuses=_MATMUL),
    _product("bmm(Tensor a, Tensor b) -> Tensor", Kernels.matmul, matmul_shape,
             decomposition=matrix_product, autocast=_LOWER, refuses=_MATMUL),
    _product("dot(Tensor a, Tensor b) -> Tensor", Kernels.dot, _dot_shape,
             decomposition=inner_product, autocast={"cuda": "promote"}, refuses=_DOT),
    _product("outer(Tensor a, Tensor b) -> Tensor", Kernels.outer, _outer_shape,
             decomposition=outer_product),
    _product("einsum(Tensor *operands, *, str equation=None) -> Tensor", Kernels.einsum,
             _einsum_shape, decomposition=einstein_sum, autocast=_LOWER),
    # dims=None as the records have always read it: the kernel takes dims without a default,
    # and the public function always passes them
    _product("tensordot(Tensor a, Tensor b, *, int[]? dims=None) -> Tensor", Kernels.tensordot,
             _tensordot_shape, decomposition=contracted,
             autocast={"cpu": "lower", "cuda": "promote"}),
    _product("addmm(Tensor c, Tensor a, Tensor b, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
             Kernels.addmm, _addmm_shape, decomposition=scaled_product_sum, autocast=_LOWER,
             refuses=_MATMUL),
)


# ----- public functions (torcia.matmul, torcia.addmm, torcia.det...) ---------------------

#: the Tensor class, bound by the first call of ``_call`` (dispatch, then one global): this
#: module is below both, and ``a @ b`` is too hot to look them up at each call (8x8, thread
#: CPU time: 1.78 us so, 1.68 us bound); a first matmul meets _Tensor None and takes the
#: checking path
_Tensor = None


def _bound_call():
    global _Tensor
    _Tensor = _opdef.PUBLIC.Tensor
    return _opdef.CALL


_call = _opdef.bind_on_first_call(globals(), "_call", _bound_call)


def _tensor_operands(name, a, b, second):
    """PyTorch's refusal of a product's operand that is no tensor (``second``: the name of
    its second argument)."""
    tensor = _opdef.PUBLIC.Tensor
    for position, (arg, value) in enumerate((("input", a), (second, b)), 1):
        if not isinstance(value, tensor):
            raise TypeError(f"{name}(): argument '{arg}' (position {position}) must be Tensor, "
                            f"not {type(value).__name__}")


def _matmul_dtype(a, b, name):
    if a._data.dtype != b._data.dtype and not _autocasting(a):
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: "
                           f"{a.dtype.name} != {b.dtype.name}")


def _autocasting(t) -> bool:
    """Whether autocast will give ``t``'s op one dtype (so a mismatch now is fine)."""
    return _opdef.PUBLIC.is_autocast_enabled(t.device.type)


def matmul(input, other):
    """Matrix product with NumPy/PyTorch broadcasting of batch dims.

    Examples
    --------
    >>> import torcia
    >>> (torcia.ones(2, 3) @ torcia.ones(3, 4)).shape
    torcia.Size([2, 4])
    """
    if input.__class__ is _Tensor and other.__class__ is _Tensor and (
            input._data.dtype is other._data.dtype):
        pass  # two dense tensors of one dtype (the common case): nothing to check first
    else:
        _tensor_operands("matmul", input, other, "other")
        if input.is_sparse or other.is_sparse:
            return _sparse_mm(input, other)
        _matmul_dtype(input, other, "matmul")
    try:
        return _call("matmul", (input, other), {})
    except (ValueError, RuntimeError) as exc:
        # the array module refused the shapes (the dispatcher words NumPy's refusal as a
        # broadcast of the whole shapes, where matmul broadcasts batch dims only): say why in
        # PyTorch's words; or a kernel refused something else, which is raised as it is
        refused = exc
    a, b = input._data.shape, other._data.shape
    if not a or not b:
        raise RuntimeError("both arguments to matmul need to be at least 1D, but they are "
                           f"{len(a)}D and {len(b)}D")
    if a[-1] != (b[-2] if len(b) > 1 else b[0]):
        a_shape = "x".join(map(str, a if len(a) > 1 else (1,) + a))
        b_shape = "x".join(map(str, b if len(b) > 1 else b + (1,)))
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({a_shape} and {b_shape})")
    error = broadcast_error(a[:-2], b[:-2])
    if error is not None:
        raise error
    if isinstance(refused, RuntimeError):
        raise refused
    raise RuntimeError(f"matmul: the array module refused shapes {list(a)} and {list(b)}")


#: The products with a sparse operand that mm and matmul hand over: torcia.sparse, the layer
#: built on these ops, registers its ``mm`` here when it loads (import torcia loads it).
SPARSE_PRODUCTS: dict[str, Callable] = {}


def _sparse_mm(a, b):
    return SPARSE_PRODUCTS["mm"](a, b)


def mm(input, mat2):
    """Product of two 2-D matrices (one may be a sparse COO matrix).

    Examples
    --------
    >>> import torcia
    >>> torcia.mm(torcia.tensor([[1.0, 2.0]]), torcia.tensor([[3.0], [4.0]]))
    tensor([[11.]])
    """
    _tensor_operands("mm", input, mat2, "mat2")
    if input.is_sparse or mat2.is_sparse:
        return _sparse_mm(input, mat2)
    _matmul_dtype(input, mat2, "mm")
    if input.ndim != 2 or mat2.ndim != 2:
        raise RuntimeError(f"self must be a matrix (got {input.ndim}-D and {mat2.ndim}-D)")
    if input.shape[1] != mat2.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({input.shape[0]}x"
                           f"{input.shape[1]} and {mat2.shape[0]}x{mat2.shape[1]})")
    return _opdef.CALL("mm", (input, mat2), {})


def bmm(input, mat2):
    """Batched product of two 3-D tensors (b, n, m) @ (b, m, p).

    Examples
    --------
    >>> import torcia
    >>> a = torcia.ones(4, 2, 3)
    >>> torcia.bmm(a, torcia.ones(4, 3, 5)).shape
    torcia.Size([4, 2, 5])
    """
    _tensor_operands("bmm", input, mat2, "mat2")
    _matmul_dtype(input, mat2, "bmm")
    _batch_shapes(input, mat2)
    return _opdef.CALL("bmm", (input, mat2), {})


def _batch_shapes(batch1, batch2):
    """PyTorch's refusal of batches that ``bmm`` cannot multiply."""
    if batch1.ndim != 3 or batch2.ndim != 3:
        raise RuntimeError(f"batch1 must be a 3D tensor (got {batch1.ndim}-D and "
                           f"{batch2.ndim}-D)")
    if batch1.shape[0] != batch2.shape[0] or batch1.shape[2] != batch2.shape[1]:
        raise RuntimeError(
            f"Expected size for first two dimensions of batch2 tensor to be: "
            f"[{batch1.shape[0]}, {batch1.shape[2]}] but got: "
            f"[{batch2.shape[0]}, {batch2.shape[1]}].")


def dot(input, other):
    """Inner product of two 1-D tensors.

    Examples
    --------
    >>> import torcia
    >>> torcia.dot(torcia.tensor([1.0, 2.0]), torcia.tensor([3.0, 4.0]))
    tensor(11.)
    """
    _tensor_operands("dot", input, other, "tensor")
    _matmul_dtype(input, other, "dot")
    dot_operands(input, other)
    return _opdef.CALL("dot", (input, other), {})


def inner(input, other):
    """Sum of products over the last dimension: ``dot`` for vectors, and for N-D inputs a
    result of shape ``input.shape[:-1] + other.shape[:-1]``; a 0-d operand scales.

    Examples
    --------
    >>> import torcia
    >>> torcia.inner(torcia.ones(2, 3), torcia.ones(4, 3)).shape
    torcia.Size([2, 4])
    """
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    if input.ndim == 1 and other.ndim == 1:
        return dot(input, other)
    if input.shape[-1] != other.shape[-1]:
        raise RuntimeError(f"inner() the last dimension must match on both input tensors but "
                           f"got shapes {list(input.shape)} and {list(other.shape)}")
    a = input.reshape(-1, input.shape[-1])
    b = other.reshape(-1, other.shape[-1])
    return (a @ b.mT).reshape(*input.shape[:-1], *other.shape[:-1])


def outer(input, vec2):
    """Outer product of two 1-D tensors.

    Examples
    --------
    >>> import torcia
    >>> torcia.outer(torcia.tensor([1, 2]), torcia.tensor([1, 10, 100]))
    tensor([[  1,  10, 100],
            [  2,  20, 200]])
    """
    for name, v in (("self", input), ("vec2", vec2)):
        if not isinstance(v, _opdef.PUBLIC.Tensor):
            raise TypeError(f"outer(): argument '{name}' must be Tensor, not "
                            f"{type(v).__name__}")
    outer_operands(input, vec2)
    # an elementwise product: its operands promote as mul's
    dt = _opdef.PUBLIC.result_type(input, vec2)
    return _opdef.CALL("outer", (operand_as(input, dt), operand_as(vec2, dt)), {})


ger = outer


def einsum(equation, *operands):
    """Einstein summation, e.g. ``einsum("bij,bjk->bik", a, b)``.

    Examples
    --------
    >>> import torcia
    >>> a = torcia.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> torcia.einsum("ij,j->i", a, torcia.tensor([1.0, 1.0]))
    tensor([3., 7.])
    >>> torcia.einsum("ii", a)
    tensor(5.)
    """
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    operands = promoted(operands, "einsum")
    return _opdef.CALL("einsum", tuple(operands), {"equation": equation.replace(" ", "")})


def tensordot(a, b, dims=2):
    """Contract ``dims`` dimensions (an int, or two lists of dims) of ``a`` and ``b``.

    Examples
    --------
    >>> import torcia
    >>> a = torcia.ones(3, 4, 5)
    >>> torcia.tensordot(a, torcia.ones(4, 5, 2)).shape
    torcia.Size([3, 2])
    >>> torcia.tensordot(a, torcia.ones(5, 3), dims=([0, 2], [1, 0])).shape
    torcia.Size([4])
    """
    if isinstance(dims, _opdef.PUBLIC.Tensor):
        dims = dims.tolist()
    if isinstance(dims, int):
        dims = (tuple(range(a.ndim - dims, a.ndim)), tuple(range(dims)))
    else:
        dims = (tuple(wrap_dim(d, a.ndim) for d in dims[0]),
                tuple(wrap_dim(d, b.ndim) for d in dims[1]))
    if len(dims[0]) == a.ndim and len(dims[1]) == b.ndim:
        return _full_contraction(a, b, dims)
    return _opdef.CALL("tensordot", (a, b), {"dims": dims})


@autocast_as("dot")
def _full_contraction(a, b, dims):
    # PyTorch contracts every dimension through dot, which its CPU autocast leaves alone
    return _opdef.CALL("tensordot", (a, b), {"dims": dims})


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat1 @ mat2)``.

    Examples
    --------
    >>> import torcia
    >>> m = torcia.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> torcia.addmm(torcia.ones(2, 2), m, torcia.eye(2), beta=10)
    tensor([[11., 12.],
            [13., 14.]])
    """
    for name, m in (("mat1", mat1), ("mat2", mat2)):
        if not isinstance(m, _opdef.PUBLIC.Tensor):
            raise TypeError(f"addmm(): argument '{name}' must be Tensor, not {type(m).__name__}")
        if m.ndim != 2:
            raise RuntimeError(f"{name} must be a matrix, got {m.ndim}-D tensor")
    if mat1.shape[1] != mat2.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({mat1.shape[0]}x"
                           f"{mat1.shape[1]} and {mat2.shape[0]}x{mat2.shape[1]})")
    for a, b in ((input, mat2), (mat1, mat2)):
        if a.dtype is not b.dtype and not _autocasting(a):
            raise RuntimeError(f"self and mat2 must have the same dtype, but got "
                               f"{_torch_name(a.dtype)} and {_torch_name(b.dtype)}")
    # the bias must expand to the product's shape (expand's own error otherwise)
    _opdef.PUBLIC.expand(input, mat1.shape[0], mat2.shape[1])
    return _opdef.CALL("addmm", (input, mat1, mat2), {"beta": _gemm_scalar(beta, mat1.dtype),
                                                      "alpha": _gemm_scalar(alpha, mat1.dtype)})


def _gemm_scalar(x, dt):
    """``alpha`` or ``beta`` as PyTorch's products take them: in float32 for float16 and
    bfloat16 (their opmath; 0.3 rounded to float16 first gave 10-20% of results one step
    off), else in the inputs' dtype (an integer product scales by integers: 0.5 is 0)."""
    return operand_as(x, D.float32 if low_precision(dt.to_numpy()) else dt)


def _scaled_sum(input, product, beta, alpha):
    """``beta * input + alpha * product``; with ``beta == 0`` ``input`` is ignored, NaN
    and infinity included, as PyTorch's BLAS-style ops do. beta and alpha take the
    product's dtype (an integer product scales by integers: 0.5 is 0)."""
    beta, alpha = operand_as(beta, product.dtype), operand_as(alpha, product.dtype)
    if alpha != 1:
        product = product * alpha
    if beta == 0:
        if input.requires_grad:
            # still in the graph, with a zero gradient, as PyTorch
            keep = _opdef.PUBLIC.ones(tuple(product.shape), dtype=D.bool_,
                                      device=product.device)
            return _opdef.PUBLIC.where(keep, product, input)
        return product  # the shapes were checked: input broadcasts to the product's
    return (input if beta == 1 else input * beta) + product


def _check_out_shape(input, shape, name):
    try:
        ok = np.broadcast_shapes(tuple(input.shape), shape) == shape
    except ValueError:
        ok = False
    if not ok:
        raise RuntimeError(f"{name}: the input of shape {list(input.shape)} cannot be "
                           f"broadcast to the result's shape {list(shape)}")


@autocast_as("mv")
def mv(input, vec):
    """Matrix-vector product: ``input`` (n, m) times ``vec`` (m,) gives (n,).

    Examples
    --------
    >>> import torcia
    >>> torcia.mv(torcia.tensor([[1.0, 2.0], [3.0, 4.0]]), torcia.tensor([1.0, -1.0]))
    tensor([-1., -1.])
    """
    _tensor_operands("mv", input, vec, "vec")
    _matmul_dtype(input, vec, "mv")
    if input.ndim != 2 or vec.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {input.ndim}, "
                           f"{vec.ndim}")
    if input.shape[1] != vec.shape[0]:
        raise RuntimeError(f"size mismatch, got input ({input.shape[0]}), mat "
                           f"({input.shape[0]}x{input.shape[1]}), vec ({vec.shape[0]})")
    return matmul(input, vec)


@autocast_as("addmv")
def addmv(input, mat, vec, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat @ vec)`` for a matrix ``mat`` (n, m) and a vector
    ``vec`` (m,); ``input`` broadcasts to (n,) and is ignored when ``beta`` is 0.

    Examples
    --------
    >>> import torcia
    >>> torcia.addmv(torcia.ones(2), torcia.eye(2), torcia.tensor([2.0, 3.0]), alpha=2)
    tensor([5., 7.])
    """
    product = mv(mat, vec)
    _check_out_shape(input, tuple(product.shape), "addmv")
    return _scaled_sum(input, product, beta, alpha)


@autocast_as("addr")
def addr(input, vec1, vec2, *, beta=1, alpha=1):
    """``beta * input + alpha * outer(vec1, vec2)``; ``input`` broadcasts to
    (len(vec1), len(vec2)) and is ignored when ``beta`` is 0.

    Examples
    --------
    >>> import torcia
    >>> torcia.addr(torcia.zeros(2, 2), torcia.tensor([1.0, 2.0]), torcia.tensor([3.0, 4.0]))
    tensor([[3., 4.],
            [6., 8.]])
    """
    if vec1.ndim != 1 or vec2.ndim != 1:
        raise RuntimeError(f"addr: Expected 1-D argument vec1, but got {vec1.ndim}-D"
                           if vec1.ndim != 1 else
                           f"addr: Expected 1-D argument vec2, but got {vec2.ndim}-D")
    product = outer(vec1, vec2)
    _check_out_shape(input, tuple(product.shape), "addr")
    # PyTorch's addr (unlike addmm) checks the scalars against the result's dtype
    result_type = _opdef.PUBLIC.result_type
    integral = result_type(input, product).category < 2
    for name, value in (("beta", beta), ("alpha", alpha)):
        if integral and isinstance(value, (float, np.floating)):
            raise RuntimeError(f"For integral input tensors, argument {name} must not be a "
                               "floating point number.")
        if isinstance(value, (bool, np.bool_)) and result_type(input, product) is not D.bool_:
            raise RuntimeError(f"Boolean {name} only supported for Boolean results.")
    dt = product.dtype
    if input.dtype is dt and dt.is_floating_point and input.device.type == "cpu":
        return _addr_as_pytorch(input, vec1, vec2, beta, alpha)
    return _scaled_sum(input, product, beta, alpha)


#: elements a step of PyTorch's AVX2 elementwise loop takes (two vectors)
_LOOP_STEP = {4: 16, 8: 8}


def _addr_as_pytorch(input, vec1, vec2, beta, alpha):
    """``beta * input + (alpha * vec1) * vec2`` elementwise in the order of PyTorch's CPU
    kernel, beta and alpha in the dtype. Its AVX2 loop fuses a float32/float64 step's sums
    into one FMA, ``fma(alpha vec1, vec2, beta input)``; its scalar tail (the elements
    after the last whole step of 16 floats or 8 doubles, along each row, or along all of
    them where a dim is 1) rounds the product first, ``fma(beta, input, (alpha vec1)
    vec2)``; half floats round at each op. Two roundings everywhere differed in 20-30% of
    elements."""
    beta, alpha = operand_as(beta, vec1.dtype), operand_as(alpha, vec1.dtype)
    left = (vec1 * alpha).unsqueeze(1)
    product = left * vec2
    step = _LOOP_STEP.get(product.dtype.itemsize)
    if beta == 0 or step is None or product.numel() == 0:
        return _scaled_sum(input, product, beta, 1)
    public = _opdef.PUBLIC
    n, m = product.shape
    run = m if n > 1 and m > 1 else n * m
    # the loop is vectorised where one operand at most is constant along it (vec1 along a
    # row, vec2 down a column): the input must vary along it too
    shape = tuple(input.shape)
    varies = shape[-1:] == (m,) if m > 1 else shape[-2:-1] == (n,)
    fused = run - run % step if varies else 0
    parts = []
    if fused:
        parts.append(public.addcmul(input * beta if beta != 1 else input, left, vec2))
    if fused < run:
        parts.append(public.addcmul(product, input, public.tensor(beta, dtype=product.dtype)))
    if len(parts) == 1:
        return parts[0] if tuple(parts[0].shape) == (n, m) else parts[0].expand(n, m)
    inside = public.arange(run) < fused
    return public.where(inside.reshape((1, m) if run == m else (n, m)), *parts)


@autocast_as("baddbmm")
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """``beta * input + alpha * bmm(batch1, batch2)``: (b, n, m) and (b, m, p) give
    (b, n, p); ``input`` broadcasts to that shape and is ignored when ``beta`` is 0.

    Examples
    --------
    >>> import torcia
    >>> torcia.baddbmm(torcia.ones(1, 1, 1), torcia.ones(1, 1, 3), torcia.ones(1, 3, 1))
    tensor([[[4.]]])
    """
    _tensor_operands("baddbmm", batch1, batch2, "batch2")
    if batch1.ndim == 3 and batch2.ndim == 3:
        # the input must expand to the result's shape (expand's own error otherwise)
        _opdef.PUBLIC.expand(input, batch1.shape[0], batch1.shape[1], batch2.shape[2])
    autocasting = _autocasting(batch1)
    if input.dtype is not batch1.dtype and not autocasting:
        raise RuntimeError(f"Input dtypes must be the same, got: input "
                           f"{D.cpp_type_name(input.dtype)}, batch1: "
                           f"{D.cpp_type_name(batch1.dtype)}, batch2: "
                           f"{D.cpp_type_name(batch2.dtype)}")
    _batch_shapes(batch1, batch2)
    if batch2.dtype is not batch1.dtype and not autocasting:
        raise RuntimeError(f"expected scalar type {_torch_name(batch1.dtype)} but found "
                           f"{_torch_name(batch2.dtype)}")
    # one op, as PyTorch's: the product scaled and added in its kernel, rounded once
    return _opdef.CALL("addmm", (input, batch1, batch2),
                       {"beta": _gemm_scalar(beta, batch1.dtype),
                        "alpha": _gemm_scalar(alpha, batch1.dtype)})


@autocast_as("addbmm")
def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """``beta * input + alpha * sum_i batch1[i] @ batch2[i]``: the batch of products
    (b, n, m) @ (b, m, p) summed into one (n, p) matrix.

    Examples
    --------
    >>> import torcia
    >>> torcia.addbmm(torcia.zeros(1, 1), torcia.ones(2, 1, 3), torcia.ones(2, 3, 1))
    tensor([[6.]])
    """
    product = bmm(batch1, batch2)
    product = product.sum(0, dtype=product.dtype)  # integers keep their dtype
    _check_out_shape(input, tuple(product.shape), "addbmm")
    return _scaled_sum(input, product, beta, alpha)


@autocast_as("dist")
def dist(input, other, p=2):
    """The ``p``-norm of ``input - other`` (broadcast), as one 0-d tensor.

    Examples
    --------
    >>> import torcia
    >>> torcia.dist(torcia.tensor([0.0, 0.0]), torcia.tensor([3.0, 4.0]))
    tensor(5.)
    """
    return linalg_functions.vector_norm(input - other, float(p))


@autocast_as("cdist")
def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """The ``p``-norm distance between each row of ``x1`` (B, P, M) and each row of
    ``x2`` (B, R, M): a (B, P, R) result; batch dimensions broadcast.

    Computed from the differences for every ``compute_mode``: the matrix-product form that
    PyTorch may use for ``p = 2`` loses accuracy for nearby points.

    Examples
    --------
    >>> import torcia
    >>> torcia.cdist(torcia.tensor([[0.0, 0.0]]), torcia.tensor([[3.0, 4.0], [0.0, 1.0]]))
    tensor([[5., 1.]])
    """
    if compute_mode not in ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                            "donot_use_mm_for_euclid_dist"):
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    for name, x in (("X1", x1), ("X2", x2)):
        if x.ndim < 2:
            raise RuntimeError(f"cdist only supports at least 2D tensors, {name} got: "
                               f"{x.ndim}D")
        if not x.dtype.is_floating_point:
            raise RuntimeError(f"cdist only supports floating-point dtypes, {name} got: "
                               f"{x.dtype.name}")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: "
                           f"{x1.shape[-1]} X2: {x2.shape[-1]}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    diff = _opdef.PUBLIC.unsqueeze(x1, -2) - _opdef.PUBLIC.unsqueeze(x2, -3)
    return linalg_functions.vector_norm(diff, float(p), dim=-1)


def det(input):
    """The determinant of each square matrix (as :func:`torcia.linalg.det`).

    Examples
    --------
    >>> import torcia
    >>> torcia.det(torcia.tensor([[1.0, 2.0], [3.0, 4.0]]))
    tensor(-2.)
    """
    return linalg_solves.det(input)


def slogdet(input):
    """``(sign, logabsdet)`` of the determinant (as :func:`torcia.linalg.slogdet`).

    Examples
    --------
    >>> import torcia
    >>> torcia.slogdet(torcia.tensor([[-2.0, 0.0], [0.0, 3.0]]))
    torcia.return_types.linalg_slogdet(
    sign=tensor(-1.),
    logabsdet=tensor(1.7918))
    """
    return linalg_solves.slogdet(input)


def logdet(input):
    """``log(det(input))``: NaN for a negative determinant, -inf for a zero one.

    Examples
    --------
    >>> import torcia
    >>> torcia.logdet(torcia.eye(2) * 3)
    tensor(2.1972)
    """
    sign, logabs = slogdet(input)
    with np.errstate(divide="ignore", invalid="ignore"):  # log(0) and log(-1) are the point
        return logabs + _opdef.PUBLIC.log(sign)


def inverse(input):
    """The inverse of each square matrix (as :func:`torcia.linalg.inv`).

    Examples
    --------
    >>> import torcia
    >>> torcia.inverse(torcia.tensor([[2.0, 0.0], [0.0, 4.0]]))
    tensor([[0.5000, 0.0000],
            [0.0000, 0.2500]])
    """
    return linalg_solves.inv(input)


def pinverse(input, rcond=1e-15):
    """The pseudo-inverse, singular values below ``rcond * max`` dropped.

    Examples
    --------
    >>> import torcia
    >>> torcia.pinverse(torcia.tensor([[2.0, 0.0], [0.0, 0.0]]))
    tensor([[0.5000, 0.0000],
            [0.0000, 0.0000]])
    """
    return linalg_solves.pinv(input, rtol=rcond)


def cov(input, *, correction=1, fweights=None, aweights=None):
    """Covariance of the rows of ``input`` (variables x observations; a 1-D input is one
    variable), with optional integer frequency and float observation weights, as
    ``numpy.cov``/PyTorch.

    Examples
    --------
    >>> import torcia
    >>> torcia.cov(torcia.tensor([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]]))
    tensor([[ 1., -1.],
            [-1.,  1.]])
    """
    if input.ndim > 2:
        raise ValueError(f"cov(): expected input to have two or fewer dimensions but got an "
                         f"input with {input.ndim} dimensions")
    x = input.reshape(1, -1) if input.ndim < 2 else input
    if x.dtype is D.bool_:
        raise RuntimeError("cov(): bool dtype is not supported for input")
    x = to_float(x)  # complex inputs keep their imaginary part
    n = x.shape[1]
    w = None
    for name, weights in (("fweights", fweights), ("aweights", aweights)):
        if weights is None:
            continue
        if weights.ndim > 1 or weights.numel() != n:
            raise RuntimeError(f"cov(): expected {name} to have one dimension and the same "
                               f"number of elements as the observations ({n}), but got "
                               f"{list(weights.shape)}")
        if name == "fweights" and weights.is_floating_point():
            raise RuntimeError("cov(): expected fweights to have integral dtype")
        if bool((weights < 0).any()):
            raise RuntimeError(f"cov(): {name} cannot be negative")
        weights = weights.to(x.dtype)
        w = weights if w is None else w * weights
    if w is None:
        avg = x.mean(1, keepdim=True)
        norm = n - correction
    else:
        w_sum = w.sum()
        avg = (x * w).sum(1, keepdim=True) / w_sum
        if aweights is None:
            norm = w_sum - correction
        else:
            norm = w_sum - correction * (w * aweights.to(x.dtype)).sum() / w_sum
    xm = x - avg
    weighted = xm if w is None else xm * w
    if isinstance(norm, (int, float)):
        norm = max(norm, 0)
    else:
        norm = norm.clamp(min=0)
    out = (weighted @ xm.mH) / norm  # conjugated: a complex covariance is Hermitian
    # one variable (a 1-D input, or a single row): its variance, 0-d as PyTorch
    return out.reshape(()) if x.shape[0] == 1 else out


def corrcoef(input):
    """Pearson correlation coefficients of the rows of ``input``, clipped to [-1, 1].

    Examples
    --------
    >>> import torcia
    >>> torcia.corrcoef(torcia.tensor([[0.0, 1.0, 2.0], [0.0, 2.0, 4.0]]))
    tensor([[1., 1.],
            [1., 1.]])
    """
    c = cov(input)
    if c.ndim == 0:
        return c / c
    std = c.diagonal().sqrt()
    out = c / std.unsqueeze(1) / std.unsqueeze(0)
    if out.is_complex():
        # clipped part by part, as PyTorch
        return _complex_of(out.real.clamp(-1, 1), out.imag.clamp(-1, 1))
    return out.clamp(-1, 1)


@autocast_as("renorm")
def renorm(input, p, dim, maxnorm):
    """Rescale each slice along ``dim`` whose ``p``-norm exceeds ``maxnorm`` to that norm.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[3.0, 4.0], [0.3, 0.4]])
    >>> torcia.renorm(x, 2, 0, 1.0)
    tensor([[0.6000, 0.8000],
            [0.3000, 0.4000]])
    """
    if input.ndim < 2:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {input.ndim} "
                           "dimensions")
    if p <= 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    if input.dtype.category < 2:
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor "
                           f"as input. Got {_torch_name(input.dtype)}")
    others = tuple(d for d in range(input.ndim) if d != wrap_dim(dim, input.ndim))
    norms = input.abs().pow(p).sum(dim=others, keepdim=True).pow(1.0 / p)
    public = _opdef.PUBLIC
    scale = public.where(norms > maxnorm, maxnorm / (norms + 1e-7), public.ones_like(norms))
    return input * scale


def kron(input, other):
    """The Kronecker product.

    Examples
    --------
    >>> import torcia
    >>> torcia.kron(torcia.eye(2), torcia.ones(1, 2))
    tensor([[1., 1., 0., 0.],
            [0., 0., 1., 1.]])
    """
    nd = max(input.ndim, other.ndim)
    a = input.reshape((1,) * (nd - input.ndim) + tuple(input.shape))
    b = other.reshape((1,) * (nd - other.ndim) + tuple(other.shape))
    a_shape, b_shape = [], []
    for k in range(nd):
        a_shape += [a.shape[k], 1]
        b_shape += [1, b.shape[k]]
    out = a.reshape(a_shape) * b.reshape(b_shape)
    return out.reshape([a.shape[k] * b.shape[k] for k in range(nd)])


def trace(input):
    """The sum of the main diagonal of a matrix.

    Examples
    --------
    >>> import torcia
    >>> torcia.trace(torcia.tensor([[1.0, 2.0], [3.0, 4.0]]))
    tensor(5.)
    """
    if input.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.ndim}")
    return input.diagonal().sum()


@autocast_as("chain_matmul")
def chain_matmul(*matrices):
    """The product of 2-D matrices, left to right (deprecated in PyTorch for
    ``linalg.multi_dot``).

    Examples
    --------
    >>> import torcia
    >>> a = torcia.tensor([[1.0, 2.0]])
    >>> torcia.chain_matmul(a, torcia.eye(2), a.t())
    tensor([[5.]])
    """
    out = matrices[0]
    for m in matrices[1:]:
        out = out @ m
    return out


def block_diag(*tensors):
    """A block-diagonal matrix of the (0-, 1- or 2-D) inputs.

    Examples
    --------
    >>> import torcia
    >>> torcia.block_diag(torcia.tensor([[1, 2]]), torcia.tensor(3))
    tensor([[1, 2, 0],
            [0, 0, 3]])
    """
    public = _opdef.PUBLIC
    if not tensors:
        return public.empty(0, 0)
    mats = [t.reshape(1, -1) if t.ndim < 2 else t for t in tensors]
    if any(m.ndim != 2 for m in mats):
        raise RuntimeError("torcia.block_diag: Input tensors must have 2 or fewer dimensions")
    rows = builtins.sum(m.shape[0] for m in mats)
    cols = builtins.sum(m.shape[1] for m in mats)
    dtype = mats[0].dtype
    for m in mats[1:]:
        dtype = D.promote_types(dtype, m.dtype)
    out = public.zeros(rows, cols, dtype=dtype, device=mats[0].device)
    r = c = 0
    pieces = []
    for m in mats:
        pieces.append((r, c, m))
        r += m.shape[0]
        c += m.shape[1]
    for r, c, m in pieces:
        pad_l, pad_r = c, cols - c - m.shape[1]
        row = public.cat([public.zeros(m.shape[0], pad_l, dtype=dtype, device=m.device),
                          m.to(dtype),
                          public.zeros(m.shape[0], pad_r, dtype=dtype, device=m.device)], 1)
        out = public.cat([out[:r], row, out[r + m.shape[0]:]], 0)
    return out


def pdist(input, p=2.0):
    """The ``p``-norm distances between every pair of rows ``i < j`` of a 2-D ``input``,
    in row-major order of the upper triangle.

    Examples
    --------
    >>> import torcia
    >>> torcia.pdist(torcia.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]]))
    tensor([5.0000, 1.0000, 4.2426])
    """
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    n = input.shape[0]
    rows, cols = np.triu_indices(n, 1)
    tensor = _opdef.PUBLIC.tensor
    diffs = input[tensor(rows, device=input.device)] - input[tensor(cols, device=input.device)]
    if p == 0:
        return (diffs != 0).sum(-1).to(input.dtype)
    if p == math.inf:
        return diffs.abs().amax(-1)
    return diffs.abs().pow(p).sum(-1).pow(1.0 / p)


def norm_except_dim(v, pow=2, dim=0):  # noqa: A002 - PyTorch's argument name
    """The ``pow``-norm of ``v`` over every dimension but ``dim`` (all, for ``dim=-1``).

    Examples
    --------
    >>> import torcia
    >>> torcia.norm_except_dim(torcia.tensor([[3.0, 4.0], [0.0, 1.0]]), dim=0)
    tensor([[5.],
            [1.]])
    """
    if dim == -1:
        return v.norm(pow)
    dims = tuple(d for d in builtins.range(v.ndim) if d != dim)
    return v.abs().pow(pow).sum(dim=dims, keepdim=True).pow(1.0 / pow)


def frobenius_norm(input, dim=(-2, -1), keepdim=False):
    """The Frobenius norm over ``dim``.

    Examples
    --------
    >>> import torcia
    >>> torcia.frobenius_norm(torcia.tensor([[3.0, 0.0], [0.0, 4.0]]))
    tensor(5.)
    """
    return input.abs().pow(2).sum(dim=dim, keepdim=keepdim).sqrt()


def addmm_(self, mat1, mat2, *, beta=1, alpha=1):
    """In-place :meth:`Tensor.addmm`: ``self = beta * self + alpha * (mat1 @ mat2)``."""
    return _opdef.INPLACE(addmm, self, mat1, mat2, beta=beta, alpha=alpha)


def nuclear_norm(input, dim=None, keepdim=False, *, dtype=None):
    """The nuclear norm (sum of singular values) of a matrix, or of the matrices spanned
    by the two dimensions ``dim``; differentiable.

    Examples
    --------
    >>> import torcia
    >>> torcia.nuclear_norm(torcia.tensor([[3.0, 0.0], [0.0, -4.0]]))
    tensor(7.)
    """
    if isinstance(dim, bool):
        dim, keepdim = None, dim
    if dim is None:
        if input.ndim != 2:
            raise RuntimeError(f"Expected a tensor with 2 dimensions, but got a tensor with "
                               f"{input.ndim} dimension{'s' if input.ndim != 1 else ''} "
                               "instead.")
        dim = (-2, -1)
    return linalg_functions.matrix_norm(input, "nuc", dim=tuple(dim), keepdim=keepdim, dtype=dtype)


def cond(pred, true_fn, false_fn, operands=()):
    """``true_fn(*operands)`` if ``pred`` else ``false_fn(*operands)``; ``pred`` is a bool
    or a one-element tensor (run eagerly: torcia has no graph capture to keep both).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([1.0, -2.0])
    >>> torcia.cond(x.sum() > 0, lambda v: v.cos(), lambda v: v.sin(), (x,))
    tensor([ 0.8415, -0.9093])
    """
    if isinstance(pred, _opdef.PUBLIC.Tensor):
        if pred.numel() != 1:
            raise RuntimeError(f"Expected pred to be bool or single-element tensor, but got "
                               f"a tensor of shape {list(pred.shape)}.")
        pred = bool(pred.item())
    elif not isinstance(pred, (bool, int)):
        raise RuntimeError(f"Expected pred to be bool or tensor, but got {pred}.")
    if not isinstance(operands, (tuple, list)):
        raise RuntimeError(f"Expect operands to be a tuple of possibly nested dict/list/tuple "
                           f"that only consists of tensor leaves, but got {operands}.")
    if not callable(true_fn) or not callable(false_fn):
        raise RuntimeError("Expect both branches to be callable.")
    return true_fn(*operands) if pred else false_fn(*operands)


@autocast_as("vdot")
def vdot(input, other):
    """``sum(conj(input) * other)`` of two 1-D tensors of one dtype.

    Examples
    --------
    >>> import torcia
    >>> torcia.vdot(torcia.tensor([1j, 2]), torcia.tensor([1j, 1]))
    tensor(3.+0.j)
    """
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {other.ndim}D "
                           f"tensors")
    if input.dtype is not other.dtype:
        raise RuntimeError(f"dot : expected both vectors to have same dtype, but found "
                           f"{_torch_name(input.dtype)} and {_torch_name(other.dtype)}")
    if input.shape[0] != other.shape[0]:
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{input.shape[0]}] and "
                           f"src [{other.shape[0]}] to have the same number of elements, but "
                           f"got {input.shape[0]} and {other.shape[0]} elements respectively")
    # a dot product in the inputs' dtype (an integer sum would widen to int64)
    return dot(conj(input) if input.dtype.category == 3 else input, other)


@autocast_as("cosine_similarity")
def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """``x1 . x2 / max(||x1|| * ||x2||, eps)`` along ``dim`` (broadcasting).

    Examples
    --------
    >>> import torcia
    >>> torcia.cosine_similarity(torcia.tensor([[1.0, 0.0]]), torcia.tensor([[1.0, 1.0]]))
    tensor([0.7071])
    """
    common = _opdef.PUBLIC.result_type(x1, x2)
    if not common.is_floating_point:
        raise RuntimeError(f"expected common dtype to be floating point, yet common dtype is "
                           f"{_torch_name(common)}")
    x1, x2 = (x if x.is_floating_point() else x.to(common) for x in (x1, x2))
    x1, x2 = broadcast_tensors(x1, x2)
    # PyTorch's order: each divided by its norm (clamped, unrecorded, at eps) first, which
    # keeps the result within [-1, 1] and float16's squares from overflowing
    n1 = linalg_functions.vector_norm(x1, 2, dim=dim, keepdim=True).clone()
    n2 = linalg_functions.vector_norm(x2, 2, dim=dim, keepdim=True).clone()
    with no_grad():
        n1.clamp_(min=eps)
        n2.clamp_(min=eps)
    return ((x1 / n1) * (x2 / n2)).sum(dim)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """The ``p``-norm of ``x1 - x2 + eps`` along the last dim.

    Examples
    --------
    >>> import torcia
    >>> torcia.pairwise_distance(torcia.tensor([[3.0, 0.0]]), torcia.tensor([[0.0, 4.0]]),
    ...                          eps=0.0)
    tensor([5.])
    """
    diff = x1 - x2 + eps
    dim = -1 if diff.ndim else 0
    return diff.norm(p, dim=dim, keepdim=keepdim) if diff.ndim else diff.abs()


def bilinear(input1, input2, weight, bias=None):
    """``torch.bilinear``: ``x1^T W x2 + b``.

    Examples
    --------
    >>> import torcia
    >>> x1, x2 = torcia.tensor([[1.0, 2.0]]), torcia.tensor([[3.0]])
    >>> torcia.bilinear(x1, x2, torcia.ones(1, 2, 1))
    tensor([[9.]])
    """
    return functional().bilinear(input1, input2, weight, bias)


#: the functions here that are also Tensor methods, under the same name
METHODS = (
    "matmul", "mm", "bmm", "dot", "inner", "outer", "ger", "tensordot", "addmm", "mv", "addmv",
    "addr", "addbmm", "baddbmm", "dist", "det", "slogdet", "logdet", "inverse", "pinverse",
    "cov", "corrcoef", "addmm_", "vdot",
)

#: ... and those with an in-place ``name_`` method (computed out of place, then written back)
INPLACE = (
    "addmv", "addr", "addbmm", "baddbmm",
)

#: Tensor methods set only where ``torcia.linalg``'s, ``torcia.special``'s or the class's
#: own have not set them
FALLBACK_METHODS = (
    "dist", "renorm", "kron", "trace",
)

#: ... and the in-place ``name_`` methods set the same way
FALLBACK_INPLACE = (
    "renorm",
)

#: the names ``torcia`` exports from here
__all__ = [
    "addbmm", "addmm", "addmv", "addr", "baddbmm", "bilinear", "block_diag", "bmm", "cdist",
    "chain_matmul", "cond", "corrcoef", "cosine_similarity", "cov", "det", "dist", "dot", "einsum",
    "frobenius_norm", "ger", "inner", "inverse", "kron", "logdet", "matmul", "mm", "mv",
    "norm_except_dim", "nuclear_norm", "outer", "pairwise_distance", "pdist", "pinverse", "renorm",
    "slogdet", "tensordot", "trace", "vdot",
]

#: the functional forms here that ``torcia.nn.functional`` re-exports (through
#: :data:`torcia.library.functional`)
FUNCTIONAL = ("cosine_similarity", "pairwise_distance")
