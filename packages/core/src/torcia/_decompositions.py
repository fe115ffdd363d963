"""Default decompositions: composite ops written with other ops.

An op with a decomposition here is *composite*; every other op is a *primitive*. A device
backend must implement the primitives; where it has no kernel for a composite op, the
dispatcher runs the op's decomposition on tensors instead (PyTorch's
CompositeImplicitAutograd): its ops are dispatched one by one, so autograd records them
and the composite's own derivative (and fused ``*_backward`` op) is not needed.

A decomposition takes the op's inputs (tensors, numbers or None) positionally and its
parameters as keywords, as a kernel does, and returns a tensor (or a tuple of tensors).
It is written with torcia ops only: it runs on any device. Those of the declared ops are
declared with them, in :mod:`torcia._ops`.
"""

from __future__ import annotations

import math
import string

import numpy as np

from torcia import _creation as C
from torcia import _dtype as D
from torcia import _opdef, _oplib
from torcia._grad_mode import STATE as _GRAD
from torcia._kernels_linalg import _PADE13, _THETA13, LinAlgError, dot_operands, outer_operands
from torcia._ops import DECLARED
from torcia._ops._common import HALF as _HALF
from torcia._ops._common import widened
from torcia._ops.elementwise import isfinite
from torcia._ops.reduce import norm, sqrt_of_sum
from torcia._tensor import AUTOGRAD, DECOMPOSITIONS, Tensor, active_modes, call

# ----- linear algebra -------------------------------------------------------------------


def mm(a, b):
    return a.matmul(b)


def dot(a, b):
    dot_operands(a, b)
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


# ----- helpers -----------------------------------------------------------------------------


def _in_float32(*tensors):
    """Half-precision ``tensors`` in float32 (the reference kernels' opmath), others as
    they are."""
    return tuple(map(widened, tensors))


def _zero(a):
    """A 0-dim zero of ``a``'s dtype on its device (a Python 0 would promote a bool)."""
    return C.zeros((), dtype=a.dtype, device=a.device)


def _one(a):
    """A 0-dim one of ``a``'s dtype on its device."""
    return C.ones((), dtype=a.dtype, device=a.device)


def _scalar(a, value):
    """``value`` as a 0-dim tensor of ``a``'s dtype on its device."""
    return C.full((), value, dtype=a.dtype, device=a.device)


def _both(x, y):
    # bitwise on bools; ``&`` would dispatch logical_and again
    return call("bitwise_and", (x, y), {})


# ----- products, norms and eigenvalues ---------------------------------------------------


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


def linalg_vector_norm(x, ord=2.0, dim=None, keepdim=False):
    return norm(x, ord, dim, keepdim)


def linalg_matrix_norm(a, ord="fro", dim=(-2, -1), keepdim=False):
    d0, d1 = (d % a.ndim for d in dim)
    if ord == "fro":
        squares = (a * a.conj()).real if a.is_complex() else a * a
        return sqrt_of_sum(squares.sum((d0, d1), keepdim=keepdim))
    if ord in ("nuc", 2, -2):
        moved = a.movedim((d0, d1), (-2, -1))
        s = call("linalg_svd", (moved,), {"full_matrices": False})[1]
        out = s.sum(-1) if ord == "nuc" else s.amax(-1) if ord == 2 else s.amin(-1)
        for d in sorted((d0, d1)) if keepdim else ():
            out = out.unsqueeze(d)
        return out
    # 1 / -1: max/min over columns of the column sums; inf / -inf: over rows
    sum_dim, pick_dim = (d0, d1) if ord in (1, -1) else (d1, d0)
    sums = a.abs().sum(sum_dim, keepdim=True)
    out = sums.amax(pick_dim, keepdim=True) if ord in (1, math.inf) else sums.amin(
        pick_dim, keepdim=True)
    return out if keepdim else out.squeeze((d0, d1))


def linalg_norm(a, ord=None, dim=None, keepdim=False):
    if dim is not None and not isinstance(dim, int) and len(dim) == 2:
        return linalg_matrix_norm(a, "fro" if ord is None else ord, dim, keepdim)
    return norm(a, 2.0 if ord is None else ord, dim, keepdim)


def linalg_eigvalsh(a, UPLO="L"):  # noqa: N803 - PyTorch's name
    return call("linalg_eigh", (a,), {"UPLO": UPLO})[0]


def linalg_eigvals(a):
    return call("linalg_eig", (a,), {})[0]


# ----- matrix functions --------------------------------------------------------------------


def linalg_matrix_exp(a):
    # the reference kernel's scaling and squaring of Pade's [13/13] approximant
    if a.dtype in _HALF:
        return linalg_matrix_exp(a.float()).to(a.dtype)
    n = a.shape[-1]
    flat = a.reshape(-1, n, n)
    if not n:
        return a.clone()
    norm1 = flat.abs().sum(-2).amax(-1).tolist()  # the squarings: a host decision
    s = [max(math.ceil(math.log2(v / _THETA13)), 0) if 0 < v < math.inf else 0
         for v in norm1]
    x = flat / C.tensor([2.0 ** k for k in s], device=a.device).to(a.dtype).reshape(
        -1, 1, 1)
    eye = C.eye(n, dtype=a.dtype, device=a.device)
    b = _PADE13
    x2 = x.matmul(x)
    x4 = x2.matmul(x2)
    x6 = x4.matmul(x2)
    u = x.matmul(x6.matmul(b[13] * x6 + b[11] * x4 + b[9] * x2)
                 + b[7] * x6 + b[5] * x4 + b[3] * x2 + b[1] * eye)
    v = (x6.matmul(b[12] * x6 + b[10] * x4 + b[8] * x2)
         + b[6] * x6 + b[4] * x4 + b[2] * x2 + b[0] * eye)
    r = call("linalg_solve", (v - u, v + u), {"left": True})
    steps = C.tensor(s, device=a.device).reshape(-1, 1, 1)
    for k in range(max(s, default=0)):
        r = _oplib.where(steps > k, r.matmul(r), r)
    return r.reshape(a.shape)


def linalg_pinv(a, rtol=None, hermitian=False):
    # V S^+ U^H, the singular values at or below rtol times the largest dropped
    if a.dtype in _HALF:
        return linalg_pinv(a.float(), rtol, hermitian).to(a.dtype)
    u, s, vh = call("linalg_svd", (a,), {"full_matrices": False})
    if rtol is None:
        rtol = max(a.shape[-2:]) * _oplib.finfo(s.dtype).eps
    large = s > rtol * s.amax(-1, keepdim=True)
    inv = _oplib.where(large, _oplib.where(large, s, _one(s)).reciprocal(), _zero(s))
    if a.is_complex():
        inv = inv.to(a.dtype)
    return vh.transpose(-2, -1).conj().matmul(inv.unsqueeze(-1) * u.transpose(-2, -1).conj())


# ----- einsum: one contraction of two operands at a time, each one matmul -------------------


def _einsum_prepared(x, labels, keep):
    """Operand ``x`` of subscripts ``labels``: a repeated label's diagonal taken, the
    labels that are not in ``keep`` summed out."""
    for label in labels:
        while labels.count(label) > 1:
            i = labels.index(label)
            j = labels.index(label, i + 1)
            x = call("diagonal", (x,), {"offset": 0, "dim1": i, "dim2": j})
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
    if operands[0].dtype in _HALF:  # sums in float32, rounded once, as the reference kernel
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


# ----- determinants and the inverse from the LU factors -------------------------------------


def _lu_diagonal(a):
    """(the diagonal of U in A = P L U, the permutation's sign: +-1 in a's dtype)."""
    lu, pivots, _ = call("linalg_lu_factor", (a,), {})
    diagonal = call("diagonal", (lu,), {"offset": 0, "dim1": -2, "dim2": -1})
    steps = C.arange(1, pivots.shape[-1] + 1, device=a.device).to(pivots.dtype)
    swaps = (pivots != steps).to(D.int64).sum(-1)
    sign = 1 - 2 * _oplib.remainder(swaps, 2).to(a.dtype)
    return diagonal, sign


def linalg_det(a):
    if a.dtype in _HALF:  # in float32, rounded once, as the reference kernel
        return linalg_det(a.float()).to(a.dtype)
    diagonal, sign = _lu_diagonal(a)
    return diagonal.prod(-1) * sign


def linalg_slogdet(a):
    if a.dtype in _HALF:
        sign, logabs = linalg_slogdet(a.float())
        return sign.to(a.dtype), logabs.to(a.dtype)
    diagonal, sign = _lu_diagonal(a)
    size = diagonal.abs()
    # a zero pivot: sign 0 and log|det| -inf, as LAPACK-based slogdet
    zero = (size == 0).any(-1)
    if a.is_complex():
        unit = diagonal / _oplib.where(size == 0, _one(size), size).to(diagonal.dtype)
    else:
        # each pivot's sign (+1 for NaN, as LAPACK-based slogdet), plus a zero made of the
        # pivots: the sign is differentiable, its gradient 0 (the kernel's derivative)
        unit = _oplib.where(diagonal < 0, _scalar(diagonal, -1), _one(diagonal))
        sign = sign + _oplib.where(isfinite(diagonal), diagonal * 0, _zero(diagonal)).sum(-1)
    sign = _oplib.where(zero, _zero(sign), unit.prod(-1) * sign)
    return sign, size.log().sum(-1)


def linalg_inv(a):
    eye = C.eye(a.shape[-1], dtype=a.dtype, device=a.device).expand(tuple(a.shape))
    try:
        return call("linalg_solve", (a, eye), {"left": True})
    except LinAlgError:
        # the inverse's own words: the first zero pivot of the first singular matrix
        info = call("linalg_lu_factor", (a,), {})[2].reshape(-1).tolist()
        b = next((i for i, k in enumerate(info) if k), 0)
        where = f"(Batch element {b}): " if a.ndim > 2 else ""
        raise LinAlgError(f"linalg.inv: {where}The diagonal element {info[b]} is zero, the "
                          "inversion could not be completed because the input matrix is "
                          "singular.") from None


def linalg_lu_permutation(pivots, m=0, dtype=None):
    # LAPACK's sequential row swaps applied to 0..m-1; P[perm[i], i] = 1 (A = P L U)
    k = pivots.shape[-1]
    swaps = pivots.reshape(-1, k).to(D.int64) - 1
    count = swaps.shape[0]
    perm = C.arange(m, device=pivots.device).expand(count, m).clone()
    for j in range(k):
        to = swaps[:, j:j + 1]
        here, there = perm[:, j:j + 1], perm.gather(1, to)
        perm = perm.scatter(1, C.full((count, 1), j, dtype=D.int64,
                                           device=pivots.device), there)
        perm = perm.scatter(1, to, here)
    rows = C.arange(m, device=pivots.device).reshape(m, 1)
    out = call("cast", (perm.unsqueeze(-2) == rows,), {"dtype": np.dtype(dtype)})
    return out.reshape(tuple(pivots.shape[:-1]) + (m, m))


def ran(op, inputs, params, result):
    """What :func:`torcia._tensor.call` does with a kernel's ``result`` of ``op`` on
    ``inputs``: the dispatch modes' ``on_result`` (forward AD's tangents...) and autograd's
    record. For a decomposition that computes the kernel's result itself (a view through
    as_strided of its detached input), so that the op is seen as the op it is."""
    for mode in active_modes():
        mode.on_result(op, inputs, params, result)
    if _GRAD.enabled and any(isinstance(x, Tensor) and x.requires_grad for x in inputs):
        AUTOGRAD.record(op, inputs, params, result)
    return result


# the declared decompositions (torcia._ops) run ops by name, and stand for one, with these
_opdef.CALL, _opdef.RAN = call, ran
DECOMPOSITIONS.update({
    **{name: op.decomposition for name, op in DECLARED.items() if op.decomposition},
    **{fn.__name__: fn for fn in (
        tensordot, linalg_vector_norm, linalg_matrix_norm, linalg_norm, linalg_eigvalsh,
        linalg_eigvals, linalg_matrix_exp, linalg_pinv, einsum, linalg_det,
        linalg_slogdet, linalg_inv, linalg_lu_permutation,)},
    "mm": mm, "bmm": mm, "dot": dot, "outer": outer, "addmm": addmm,
})
