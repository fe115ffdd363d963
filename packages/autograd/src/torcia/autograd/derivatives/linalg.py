"""Backward formulas of linear algebra (``_ops/linalg.py`` and :mod:`torcia.linalg`): products,
``einsum``, inverses, determinants, decompositions, norms."""

from __future__ import annotations

import torcia
from torcia.autograd.derivatives import (
    _EIGEN_NAMES,
    _c,
    _matmul_names,
    _norm_backward,
    _restore_dims,
    derivative,
)
from torcia.library import call


@derivative("matmul", saved_only_for={"a": "b", "b": "a"}, names=_matmul_names)
def _(grad, a, b, *, needs_input_grad):
    ga = gb = None
    if a.ndim == 1 and b.ndim == 1:
        if needs_input_grad[0]:
            ga = grad * _c(b)
        if needs_input_grad[1]:
            gb = grad * _c(a)
        return ga, gb
    # vectors act as matrices: a row on the left, a column on the right
    g = grad.unsqueeze(-2) if a.ndim == 1 else grad
    g = g.unsqueeze(-1) if b.ndim == 1 else g
    if needs_input_grad[0]:
        ga = g @ (b.unsqueeze(-1) if b.ndim == 1 else b).mH
        if a.ndim == 1:
            ga = ga.squeeze(-2)
            if ga.ndim > 1:
                ga = ga.reshape(-1, a.shape[0]).sum(0)
    if needs_input_grad[1] and b.ndim == 2 and a.ndim > 2:
        # a weight shared across a batch: one product over all rows, rather than a
        # product per batch entry summed afterwards
        gb = a.reshape(-1, a.shape[-1]).mH @ g.reshape(-1, g.shape[-1])
    elif needs_input_grad[1]:
        gb = (a.unsqueeze(0) if a.ndim == 1 else a).mH @ g
        if b.ndim == 1:
            gb = gb.squeeze(-1)
            if gb.ndim > 1:
                gb = gb.reshape(-1, b.shape[0]).sum(0)
    return ga, gb


@derivative("mm", saved_only_for={"a": "b", "b": "a"}, names={"b": "mat2"})
def _(grad, a, b, *, needs_input_grad):
    return (grad @ b.mH if needs_input_grad[0] else None,
            a.mH @ grad if needs_input_grad[1] else None)


@derivative("sparse_mm", saved_only_for={"dense": "values"})
def _(grad, crow, col, values, dense, *, ncols, transpose, needs_input_grad):
    # out = A @ dense (A^T @ dense with transpose), A the compressed-row matrix of
    # (crow, col, values): dense gets A^H @ grad (A-bar @ grad), each stored value the
    # dot product of the grad row and the dense row its entry joins
    gv = gd = None
    if needs_input_grad[3]:
        gd = call("sparse_mm", (crow, col, _c(values), grad),
                  {"ncols": ncols, "transpose": not transpose})
    if needs_input_grad[2]:
        counts = crow[1:] - crow[:-1]
        rows = torcia.repeat_interleave(torcia.arange(crow.shape[0] - 1, device=crow.device),
                                        counts.long())
        out_rows, in_rows = (col, rows) if transpose else (rows, col)
        gv = (grad.index_select(0, out_rows.long())
              * _c(dense.index_select(0, in_rows.long()))).sum(-1)
    return None, None, gv, gd


@derivative("bmm", saved_only_for={"a": "b", "b": "a"}, names={"b": "mat2"})
def _(grad, a, b, *, needs_input_grad):
    return (grad @ b.mH if needs_input_grad[0] else None,
            a.mH @ grad if needs_input_grad[1] else None)


@derivative("dot", saved_only_for={"a": "b", "b": "a"}, names={"b": "tensor"})
def _(grad, a, b, *, needs_input_grad):
    return (grad * _c(b) if needs_input_grad[0] else None,
            grad * _c(a) if needs_input_grad[1] else None)


@derivative("outer", saved_only_for={"a": "b", "b": "a"}, names={"b": "vec2"})
def _(grad, a, b, *, needs_input_grad):
    return (grad @ _c(b) if needs_input_grad[0] else None,
            grad.mT @ _c(a) if needs_input_grad[1] else None)


def _addmm_names(node):
    """addmm's operands as PyTorch's node calls them: baddbmm's (BaddbmmBackward0) are
    batches."""
    if node.name() == "BaddbmmBackward0":
        return {"c": "self", "a": "batch1", "b": "batch2"}
    return {"c": "self", "a": "mat1", "b": "mat2"}


@derivative("addmm", saved_only_for={"a": "b", "b": "a"}, names=_addmm_names)
def _(grad, _c, a, b, *, beta, alpha, needs_input_grad):
    # scaling by 1 would cost a full pass (and a node under create_graph)
    gc = (grad if beta == 1 else grad * beta) if needs_input_grad[0] else None
    ga = grad @ b.mH if needs_input_grad[1] else None
    gb = a.mH @ grad if needs_input_grad[2] else None
    if alpha != 1:
        ga = ga * alpha if ga is not None else None
        gb = gb * alpha if gb is not None else None
    return gc, ga, gb


@derivative("einsum")
def _(grad, *operands, equation):
    subs, out = _einsum_letters(equation, [o.shape for o in operands])
    sizes = {}
    for sub, o in zip(subs, operands):
        sizes.update(zip(sub, o.shape))
    grads = []
    for i, sub in enumerate(subs):
        others = [s for j, s in enumerate(subs) if j != i]
        ops = [_c(o) for j, o in enumerate(operands) if j != i]
        unique = list(dict.fromkeys(sub))
        elsewhere = set(out).union(*others)
        target = "".join(c for c in unique if c in elsewhere)
        g = torcia.einsum(",".join([out] + others) + "->" + target, grad, *ops)
        # letters summed inside this operand alone: the gradient is constant along them
        for c in unique:
            if c not in elsewhere:
                g = g.unsqueeze(-1).expand(*g.shape, sizes[c])
                target += c
        grads.append(_einsum_place(g, target, sub, sizes))
    return tuple(grads)


_FRESH = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _einsum_letters(equation, shapes):
    """Operand and output subscripts with '...' spelled out as fresh letters and the
    implicit output made explicit. A broadcast (size-1) ellipsis dim gets a letter of its
    own, so that its gradient is summed."""
    equation = equation.replace(" ", "")
    lhs, out = equation.split("->") if "->" in equation else (equation, None)
    subs = lhs.split(",")
    used = set(equation)
    fresh = iter(c for c in _FRESH if c not in used)
    n_ell = max((len(shape) - len(s.replace("...", ""))
                 for s, shape in zip(subs, shapes) if "..." in s), default=0)
    ell = [next(fresh) for _ in range(n_ell)]
    ell_size = [1] * n_ell
    for s, shape in zip(subs, shapes):
        if "..." in s:
            k = len(shape) - len(s.replace("...", ""))
            for j in range(k):
                ell_size[n_ell - k + j] = max(ell_size[n_ell - k + j], shape[s.index("...") + j])
    spelled = []
    for s, shape in zip(subs, shapes):
        if "..." in s:
            k = len(shape) - len(s.replace("...", ""))
            at = s.index("...")
            mine = ""
            for j in range(k):
                pos = n_ell - k + j
                broadcast = shape[at + j] == 1 and ell_size[pos] != 1
                mine += next(fresh) if broadcast else ell[pos]
            s = s.replace("...", mine)
        spelled.append(s)
    if out is None:
        letters = "".join(subs)
        out = "".join(ell) + "".join(
            sorted(c for c in set(letters) if letters.count(c) == 1 and c != "."))
    else:
        out = out.replace("...", "".join(ell))
    return spelled, out


def _einsum_place(g, target, sub, sizes):
    """Arrange ``g`` (indexed by the distinct letters ``target``) as an operand indexed by
    ``sub``; a letter repeated in ``sub`` (a diagonal) puts ``g`` on that diagonal."""
    renamed = ""
    eyes = []
    seen = set()
    used = set(target) | set(sub)
    fresh = iter(c for c in _FRESH + "abcdefghijklmnopqrstuvwxyz" if c not in used)
    for c in sub:
        if c in seen:
            d = next(fresh)
            eyes.append((c, d))
            renamed += d
        else:
            seen.add(c)
            renamed += c
    if not eyes:
        return g.permute([target.index(c) for c in sub])
    eye_ops = [torcia.eye(sizes[c], dtype=g.dtype, device=g.device) for c, _ in eyes]
    spec = ",".join([target] + [c + d for c, d in eyes]) + "->" + renamed
    return torcia.einsum(spec, g, *eye_ops)


@derivative("tensordot")
def _(grad, a, b, *, dims):
    da, db = dims
    free_a = [d for d in range(a.ndim) if d not in da]
    free_b = [d for d in range(b.ndim) if d not in db]
    na = len(free_a)
    # grad has dims free_a + free_b
    # ga's dims: free_a, then b's contracted dims in b's order (each paired with a dim of a)
    ga = torcia.tensordot(grad, _c(b), (tuple(range(na, grad.ndim)), tuple(free_b)))
    order_a = free_a + [da[list(db).index(d)] for d in sorted(db)]
    ga = ga.permute([order_a.index(d) for d in range(a.ndim)])
    gb = torcia.tensordot(_c(a), grad, (tuple(free_a), tuple(range(na))))
    order_b = [db[list(da).index(d)] for d in sorted(da)] + free_b
    gb = gb.permute([order_b.index(d) for d in range(b.ndim)])
    return ga, gb


# =======================================================================================
# linear algebra: inverses, determinants, decompositions, norms
# =======================================================================================


def _eye_like(n, like):
    return torcia.eye(n, dtype=like.dtype, device=like.device)


@derivative("linalg_inv", names={"a": "A", "result": "inverse"})
def _(grad, _a, *, result):
    return -(result.mH @ grad @ result.mH)


@derivative("linalg_solve", names={"a": "A", "b": "B"})
def _(grad, a, _b, *, left, result, needs_input_grad):
    # left: A X = B, so gB = A^-T g and gA = -gB X^T; right: X A = B, gB = g A^-T
    gb = torcia.linalg.solve(a.mH, grad, left=left)
    ga = None
    if needs_input_grad[0]:
        ga = -(gb @ result.mH) if left else -(result.mH @ gb)
    return ga, gb


@derivative("linalg_det", names={"a": "A"})
def _(grad, a, *, result):
    # NOTE: well defined for invertible matrices only; a singular one raises in inv
    return (grad * _c(result)).unsqueeze(-1).unsqueeze(-1) * torcia.linalg.inv(a).mH


@derivative("linalg_slogdet", names={"a": "A"})
def _(grads, a, *, result):
    # d logabsdet = Re(tr(A^-1 dA)); d sign = i Im(tr(A^-1 dA)) sign, nothing for a real
    # sign (+-1): the adjoints at (g_sign, g_abs) are (g_abs - i Im(conj(g_sign) sign)) A^-H
    g_sign, g = grads
    if g_sign is not None and a.is_complex():
        turn = -1j * (g_sign.conj() * result[0]).imag
        g = turn if g is None else g + turn
    if g is None:
        return None
    return g.unsqueeze(-1).unsqueeze(-1) * torcia.linalg.inv(a).mH


@derivative("linalg_cholesky", names={"result": "L"})
def _(grad, _a, *, upper, result):
    # A = L L^T gives L^-1 dA L^-T = X + X^T with X = L^-1 dL lower triangular, so
    # dL = L phi(L^-1 dA L^-T) (phi: lower triangle, halved diagonal). An upper factor is
    # the transpose of the lower one, and so is its gradient.
    low, g = (result.mH, grad.mH) if upper else (result, grad)
    p = (low.mH @ g).tril()
    p = p - 0.5 * torcia.diag_embed(p.diagonal(0, -2, -1))
    linv = torcia.linalg.inv(low)
    return linv.mH @ ((p + p.mH) / 2) @ linv


@derivative("linalg_qr", names={"a": "A", "result0": "Q", "result1": "R"})
def _(grads, _a, *, mode, result):
    q, r = result
    m, n = q.shape[-2], r.shape[-1]
    if mode == "r":
        raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed "
                           "when mode='r'. Please use linalg.qr(A, mode='reduced') if you are "
                           "going to differentiate through linalg.qr.")
    if m < n:
        raise NotImplementedError("The derivative of linalg.qr is not implemented when "
                                  "the input has more columns than rows")
    if mode == "complete" and m > n:
        # the extra columns of Q are arbitrary: no gradient is defined through them
        raise RuntimeError("The QR decomposition is not differentiable when mode='complete' "
                           "and nrows > ncols.")
    gq = grads[0] if grads[0] is not None else torcia.zeros_like(q)
    gr = grads[1] if grads[1] is not None else torcia.zeros_like(r)
    # M = R gR^T - gQ^T Q; gA = (gQ + Q copyltu(M)) R^-T, copyltu mirrors M's lower part
    big_m = r @ gr.mH - gq.mH @ q
    low = big_m.tril(-1)
    diag = big_m.diagonal(0, -2, -1)
    copyltu = low + low.mH + torcia.diag_embed(diag.real if diag.is_complex() else diag)
    rhs = gq + q @ copyltu
    return torcia.linalg.solve(r.mH, rhs, left=False)


def _check_gauge(phases, what, op, scale):
    """PyTorch's error for a loss that depends on the arbitrary phases of complex
    eigen-/singular vectors (``phases``: d loss / d phase of each vector)."""
    if bool((phases.abs() > 1e-6 * (1 + scale)).any()):
        raise RuntimeError(
            f"{op}: The {what} in the complex case are specified up to multiplication by "
            f"e^{{i phi}}. The specified loss function depends on this quantity, so it is "
            f"ill-defined.")


def _gap_inverse(values):
    """F[i, j] = 1 / (values[j] - values[i]) off the diagonal, 0 on it."""
    diff = values.unsqueeze(-2) - values.unsqueeze(-1)
    n = values.shape[-1]
    eye = _eye_like(n, values).to(torcia.bool)
    return torcia.where(eye, torcia.zeros_like(diff), 1 / diff.masked_fill(eye, 1))


@derivative("linalg_eigh", names=_EIGEN_NAMES)
def _(grads, _a, *, result, UPLO="L"):
    vals, vecs = result
    gl, gv = grads
    if gv is not None and gv.is_complex():
        _check_gauge((vecs.mH @ gv).diagonal(0, -2, -1).imag, "eigenvectors",
                     "linalg_eigh_backward", float(gv.abs().max()) if gv.numel() else 0.0)
    inner = torcia.zeros_like(vecs) if gv is None else (
        _gap_inverse(vals) * (vecs.mH @ gv - gv.mH @ vecs) / 2)
    if gl is not None:
        inner = inner + torcia.diag_embed(gl)
    return vecs @ inner @ vecs.mH


@derivative("linalg_eig", names=_EIGEN_NAMES)
def _(grads, _a, *, result):
    # A = V diag(L) V^-1 with unit eigenvectors (PyTorch's formula): the gradient is
    # V^-H (diag(gL) + (V^H gV - V^H V Re(diag(V^H gV))) / conj(L_j - L_i)) V^H; the removed
    # diagonal is the part a loss that depends on the eigenvectors' phases would see
    vals, vecs = result
    gl, gv = grads
    n = vals.shape[-1]
    eye = _eye_like(n, vals.real).to(torcia.bool)
    if gv is None:
        inner = torcia.diag_embed(gl)
    else:
        vhgv = vecs.mH @ gv
        _check_gauge(vhgv.diagonal(0, -2, -1).imag, "eigenvectors", "linalg_eig_backward",
                     float(gv.abs().max()) if gv.numel() else 0.0)
        inner = vhgv - vecs.mH @ (vecs * vhgv.diagonal(0, -2, -1).real.unsqueeze(-2))
        gaps = (vals.unsqueeze(-2) - vals.unsqueeze(-1)).conj()
        inner = torcia.where(eye, torcia.zeros_like(inner), inner / gaps.masked_fill(eye, 1))
        if gl is not None:
            inner = inner + torcia.diag_embed(gl)
    return torcia.linalg.solve(vecs.mH, inner @ vecs.mH)


@derivative("linalg_eigvals")
def _(grad, a):
    vecs = torcia.linalg.eig(a).eigenvectors
    return torcia.linalg.solve(vecs.mH, torcia.diag_embed(grad) @ vecs.mH)


@derivative("linalg_eigvalsh")
def _(grad, a, *, UPLO="L"):
    vecs = torcia.linalg.eigh(a, UPLO=UPLO).eigenvectors
    return (vecs * grad.unsqueeze(-2)) @ vecs.mH


@derivative("linalg_svd",
            names={"a": "A", "result0": "U", "result1": "S", "result2": "Vh"})
def _(grads, a, *, full_matrices, result):
    u, s, vh = result
    k = s.shape[-1]
    if full_matrices:
        # the extra singular vectors are arbitrary: only the first k carry a gradient
        u, vh = u.narrow(-1, 0, k), vh.narrow(-2, 0, k)
    gu, gs, gvh = grads
    if gu is not None and full_matrices:
        gu = gu.narrow(-1, 0, k)
    if gvh is not None and full_matrices:
        gvh = gvh.narrow(-2, 0, k)
    if u.is_complex() and (gu is not None or gvh is not None):
        # the phase shared by u_i and v_i: d loss / d phase must vanish
        phases = 0
        if gu is not None:
            phases = phases + (u.mH @ gu).diagonal(0, -2, -1).imag
        if gvh is not None:
            phases = phases + (vh @ gvh.mH).diagonal(0, -2, -1).imag
        scale = max(float(g.abs().max()) for g in (gu, gvh) if g is not None and g.numel())
        _check_gauge(phases, "singular vectors", "svd_backward", scale)
    return _svd_backward(a, u, s, vh, gu, gs, gvh)


def _svd_backward(a, u, s, vh, gu, gs, gvh):
    """SVD backward for distinct nonzero singular values (Townsend's formula; for complex
    input, with the term of the singular vectors' phases as PyTorch's)."""
    m, n = a.shape[-2], a.shape[-1]
    v = vh.mH
    inner = torcia.diag_embed(gs) if gs is not None else torcia.zeros_like(
        torcia.diag_embed(s))
    if u.is_complex():
        inner = inner.to(u.dtype)
    out = None
    if gu is not None or gvh is not None:
        f = _gap_inverse(s * s)
        s_mat = torcia.diag_embed(s).to(u.dtype)
        s_inv = torcia.diag_embed(1 / s).to(u.dtype)
        if gu is not None:
            utgu = u.mH @ gu
            inner = inner + (f * (utgu - utgu.mH)) @ s_mat
            if utgu.is_complex():
                inner = inner + torcia.diag_embed(1j * utgu.diagonal(0, -2, -1).imag / s)
            if m > s.shape[-1]:
                out = (gu - u @ utgu) @ s_inv @ vh
        if gvh is not None:
            gv = gvh.mH
            vtgv = v.mH @ gv
            inner = inner + s_mat @ (f * (vtgv - vtgv.mH))
            if vtgv.is_complex() and gu is None:
                inner = inner - torcia.diag_embed(1j * vtgv.diagonal(0, -2, -1).imag / s)
            if n > s.shape[-1]:
                extra = u @ s_inv @ (gv.mH - vtgv.mH @ v.mH)
                out = extra if out is None else out + extra
    core = u @ inner @ vh
    return core if out is None else core + out


@derivative("linalg_pinv")
def _(grad, a, *, rtol, hermitian, result):
    return _pinv_backward(grad, a, result)


def _pinv_backward(grad, a, p):
    """The gradient through ``p = pinv(a)`` at constant rank:
    dP = -P dA P + P P^T dA^T (I - A P) + (I - P A) dA^T P^T P."""
    eye_m = _eye_like(a.shape[-2], grad)
    eye_n = _eye_like(a.shape[-1], grad)
    return (-(p.mH @ grad @ p.mH) + (eye_m - a @ p) @ grad.mH @ p @ p.mH
            + p.mH @ p @ grad.mH @ (eye_n - p @ a))


@derivative("linalg_lu_factor", differentiable_outputs=(True, False, False),
            names={"a": "A", "result0": "LU", "result1": "pivots"})
def _(grads, a, *, result):
    # A = P L U (square): gA = P L^-H (tril(L^H gL, -1) + triu(gU U^H)) U^-H, with gL and gU
    # the strictly lower and upper parts of the packed factors' gradient
    if a.shape[-1] != a.shape[-2]:
        raise NotImplementedError("the derivative of linalg.lu_factor is implemented for "
                                  "square matrices only")
    lu, pivots, _ = result
    g = grads[0]
    p, low, up = torcia.linalg.lu_unpack(lu, pivots)
    phi = (low.mH @ g.tril(-1)).tril(-1) + (g.triu() @ up.mH).triu()
    x = torcia.linalg.solve_triangular(low.mH, phi, upper=True, unitriangular=True)
    return p @ torcia.linalg.solve_triangular(up.mH, x, upper=False, left=False)


@derivative("linalg_solve_triangular", names={"b": "B"})
def _(grad, a, _b, *, upper, left, unitriangular, result, needs_input_grad):
    # left: A X = B gives gB = A^-T g, gA = -gB X^T; right: X A = B, gB = g A^-T,
    # gA = -X^T gB; gA keeps A's triangle (strictly, for a unit diagonal)
    gb = torcia.linalg.solve_triangular(a.mH, grad, upper=not upper, left=left,
                                        unitriangular=unitriangular)
    ga = None
    if needs_input_grad[0]:
        ga = -(gb @ result.mH) if left else -(result.mH @ gb)
        shift = 1 if unitriangular else 0
        ga = ga.triu(shift) if upper else ga.tril(-shift)
    return ga, gb


@derivative("linalg_matrix_exp")
def _(grad, a):
    # the Frechet derivative's adjoint: the upper-right block of exp([[A^T, G], [0, A^T]])
    n = a.shape[-1]
    at = a.mH
    top = torcia.cat([at, grad], -1)
    bottom = torcia.cat([torcia.zeros_like(at), at], -1)
    block = torcia.linalg.matrix_exp(torcia.cat([top, bottom], -2))
    return block[..., :n, n:]


@derivative("linalg_lstsq", differentiable_outputs=(True, True, False, False),
            names={"b": "b"})
def _(grads, a, b, *, rcond, driver, result):
    # solution = pinv(A) B; residuals = min ||A X - B||^2, whose gradients need only the
    # residual A X - B at the optimum
    gx, gres = grads[0], grads[1]
    x = result[0]
    p = torcia.linalg.pinv(a)
    ga = gb = None
    if gx is not None:
        gb = p.mH @ gx
        ga = _pinv_backward(gx @ b.mH, a, p)
    if gres is not None and gres.numel():
        r = (a @ x - b) * gres.unsqueeze(-2)
        ga = 2 * r @ x.mH if ga is None else ga + 2 * r @ x.mH
        gb = -2 * r if gb is None else gb - 2 * r
    return ga, gb


@derivative("linalg_ldl_factor", differentiable_outputs=(True, False, False))
def _(grads, _a, *, hermitian):
    raise NotImplementedError("the derivative for 'linalg_ldl_factor_ex' is not implemented.")


@derivative("linalg_geqrf", differentiable_outputs=(True, True))
def _(grads, _a):
    raise NotImplementedError("the derivative for 'geqrf' is not implemented.")


@derivative("linalg_ldl_solve", names={"ld": "LD", "b": "B"})
def _(grad, _ld, _pivots, _b, *, hermitian):
    raise NotImplementedError("the derivative for 'linalg_ldl_solve' is not implemented.")


@derivative("linalg_vector_norm")
def _(grad, x, *, ord, dim, keepdim, result):
    return _norm_backward(grad, x, ord, dim, keepdim, result)


def _matrix_norm_backward(grad, a, ord, dim, keepdim, result):
    d0, d1 = dim
    g = _restore_dims(grad, tuple(sorted(dim)), keepdim, a.ndim)
    if ord == "fro":
        r = _restore_dims(result, tuple(sorted(dim)), keepdim, a.ndim)
        return g * a / r.masked_fill(r == 0, 1)
    if ord in ("nuc", 2, -2):
        moved = a.movedim((d0, d1), (-2, -1))
        u, s, vh = torcia.linalg.svd(moved, full_matrices=False)
        if ord == "nuc":
            d = u @ vh
        else:
            j = 0 if ord == 2 else s.shape[-1] - 1
            d = u.narrow(-1, j, 1) @ vh.narrow(-2, j, 1)
        return g * d.movedim((-2, -1), (d0, d1))
    # 1 / -1: extreme column of the column sums; inf / -inf: extreme row of the row sums
    sum_dim, pick_dim = (d0, d1) if ord in (1, -1) else (d1, d0)
    sums = a.abs().sum(sum_dim, keepdim=True)
    pick = _restore_dims(result, tuple(sorted(dim)), keepdim, a.ndim)
    mask = sums == pick
    share = g * mask / mask.sum(pick_dim, keepdim=True)
    return share * torcia.sgn(a)


@derivative("linalg_matrix_norm")
def _(grad, a, *, ord, dim, keepdim, result):
    return _matrix_norm_backward(grad, a, ord, dim, keepdim, result)


@derivative("linalg_norm")
def _(grad, a, *, ord, dim, keepdim, result):
    if dim is not None and len(dim) == 2:
        return _matrix_norm_backward(grad, a, "fro" if ord is None else ord, dim, keepdim,
                                     result)
    return _norm_backward(grad, a, 2.0 if ord is None else ord, dim, keepdim, result)
