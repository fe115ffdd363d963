"""First and second derivatives of every row of the derivative table, by finite differences.

``SAMPLES`` maps each differentiable op to cases ``(fn, inputs, check_kwargs)``: ``fn``
calls the op (often on a transposed or sliced view, or with broadcasting), ``inputs`` are
float64 tensors in the op's valid domain. A completeness test fails when an op of the table
or of :data:`torcia.ops.ALL` (differentiable, not a neural-network primitive) has no case.

Neural-network primitives (:data:`torcia.ops.NN`) are checked by torcia-nn's own
``test_functional*`` files; here we only require that every NN op with a table row is named
in one of them.
"""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

import torcia
from torcia import ops
from torcia.autograd import derivatives, engine, gradcheck, gradgradcheck
from torcia.library import call, pad

RNG = np.random.default_rng(0)
F64 = torcia.float64


def t(array):
    return torcia.tensor(np.asarray(array, dtype=np.float64), requires_grad=True)


def r(*shape):
    """Standard normal."""
    return t(RNG.standard_normal(shape))


def pos(*shape):
    """In [0.5, 2)."""
    return t(RNG.uniform(0.5, 2.0, shape))


def unit(*shape):
    """In (-0.8, 0.8): inside the domain of asin, acos, atanh, erfinv."""
    return t(RNG.uniform(-0.8, 0.8, shape))


def prob(*shape):
    """In (0.1, 0.9): inside the domain of ndtri."""
    return t(RNG.uniform(0.1, 0.9, shape))


def distinct(*shape):
    """A permutation of well-separated values: no ties for max, sort, median, mode."""
    n = int(np.prod(shape))
    return t(RNG.permutation(np.linspace(-2.0, 2.0, n)).reshape(shape))


def distinct2(*shape):
    """Like :func:`distinct`, shifted so that it never ties with it."""
    return t(distinct(*shape).detach().numpy() + 0.1)


def spd(n):
    """A symmetric positive-definite matrix, well conditioned."""
    a = RNG.standard_normal((n, n))
    return t(a @ a.T + n * np.eye(n))


def idx(values):
    return torcia.tensor(values, dtype=torcia.int64)


def mask(values):
    return torcia.tensor(values, dtype=torcia.bool)


def case(fn, *inputs, **kwargs):
    return (fn, inputs, kwargs)


def unary(fn, make=r):
    """A contiguous case, a transposed one and a sliced one."""
    return [case(fn, make(2, 3)), case(lambda x: fn(x.mT), make(2, 3)),
            case(lambda x: fn(x[:, ::2]), make(3, 4))]


def binary(fn, make_a=r, make_b=r):
    """Same shapes, broadcasting both ways, and a transposed operand."""
    return [case(fn, make_a(2, 3), make_b(2, 3)), case(fn, make_a(2, 1, 3), make_b(4, 1)),
            case(lambda a, b: fn(a.mT, b), make_a(3, 2), make_b(2, 3))]


def _transfer(x):
    # what core's Tensor.to does for a device copy: the modes (forward AD) see it, then
    # autograd records it
    out = torcia.library.wrap(torcia.library.array(x).copy(), x.device)
    for mode in torcia.library.active_modes():
        mode.on_result("to_device", (x,), {"device": x.device}, out)
    engine.record_transfer(x, out)
    return out


def _copy_slices(x, y):
    z = x * 1
    z[1:, ::2].mul_(y)  # a write through a strided view of a non-leaf
    return z


def _setitem(x, v):
    z = x * 1
    z[idx([0, 2])] = v
    return z


INF = float("inf")
# constants (no grad): the other operand's formula must not need what was not kept
C23 = torcia.tensor(RNG.uniform(0.5, 2.0, (2, 3)))
C3 = torcia.tensor(RNG.uniform(0.5, 2.0, 3))
C32 = torcia.tensor(RNG.standard_normal((3, 2)))
C42 = torcia.tensor(RNG.standard_normal((4, 2)))
# the compressed rows of a 3 x 4 matrix with entries (0, 1), (0, 3), (2, 0), (2, 1), (2, 2)
SP_CROW, SP_COL = torcia.tensor([0, 2, 2, 5]), torcia.tensor([1, 3, 0, 1, 2])

SAMPLES = {
    # ----- elementwise, one input ---------------------------------------------------------
    "neg": unary(torcia.neg), "abs": unary(torcia.abs), "square": unary(torcia.square),
    "relu": unary(torcia.relu), "exp": unary(torcia.exp), "exp2": unary(torcia.exp2),
    "expm1": unary(torcia.expm1), "log": unary(torcia.log, pos), "log2": unary(torcia.log2, pos),
    "log10": unary(torcia.log10, pos), "log1p": unary(torcia.log1p, pos),
    "sqrt": unary(torcia.sqrt, pos), "rsqrt": unary(torcia.rsqrt, pos),
    "reciprocal": unary(torcia.reciprocal, pos), "sin": unary(torcia.sin),
    "cos": unary(torcia.cos), "tan": unary(torcia.tan, unit), "asin": unary(torcia.asin, unit),
    "acos": unary(torcia.acos, unit), "atan": unary(torcia.atan), "sinh": unary(torcia.sinh),
    "cosh": unary(torcia.cosh), "tanh": unary(torcia.tanh), "asinh": unary(torcia.asinh),
    "acosh": unary(lambda x: torcia.acosh(x + 1), pos), "atanh": unary(torcia.atanh, unit),
    "sigmoid": unary(torcia.sigmoid), "erf": unary(torcia.erf), "erfc": unary(torcia.erfc),
    "erfinv": unary(torcia.erfinv, unit), "lgamma": unary(torcia.lgamma, pos),
    "digamma": unary(torcia.digamma, pos) + [case(torcia.digamma, t([-0.7, -2.4, 0.2]))],
    "frac": unary(lambda x: torcia.frac(x * 0.9)),
    # piecewise constant: a zero gradient, which finite differences see away from the steps
    "sign": unary(torcia.sign), "floor": unary(lambda x: torcia.floor(x * 0.9)),
    "ceil": unary(lambda x: torcia.ceil(x * 0.9)), "trunc": unary(lambda x: torcia.trunc(x * 0.9)),
    "round": unary(lambda x: torcia.round(x * 0.9)) + unary(
        lambda x: torcia.round(x * 0.9, decimals=1)),
    # ----- special functions -------------------------------------------------------------
    "i0": unary(torcia.special.i0), "i0e": unary(torcia.special.i0e),
    "i1": unary(torcia.special.i1) + [case(torcia.special.i1, t([0.0, 1.3]))],
    "i1e": unary(torcia.special.i1e, pos) + [case(torcia.special.i1e, t([-0.4, -1.3]))],
    "ndtr": unary(torcia.special.ndtr), "ndtri": unary(torcia.special.ndtri, prob),
    "log_ndtr": unary(torcia.special.log_ndtr), "erfcx": unary(torcia.special.erfcx),
    "sinc": unary(torcia.special.sinc) + [case(torcia.special.sinc, t([0.0, 0.4]))],
    "entr": unary(torcia.special.entr, pos),
    "polygamma": unary(lambda x: torcia.special.polygamma(1, x), pos)
    + [case(lambda x: torcia.polygamma(2, x), pos(3))],
    "xlog1py": binary(torcia.special.xlog1py, r, pos)
    + [case(lambda a: torcia.special.xlog1py(a, 1.5), r(3)),
       case(lambda b: torcia.special.xlog1py(2.0, b), pos(3))],
    "zeta": [case(lambda b: torcia.special.zeta(C23 + 1, b), pos(2, 3)),
             case(lambda b: torcia.special.zeta(3.0, b), pos(3))],
    "gammainc": [case(lambda b: torcia.special.gammainc(C23, b), pos(2, 3))],
    "gammaincc": [case(lambda b: torcia.special.gammaincc(C3, b), pos(2, 3))],
    # ----- elementwise, two or more inputs ------------------------------------------------
    "add": binary(torcia.add) + [case(lambda a: a + 2.5, r(3))],
    "sub": binary(torcia.sub) + [case(lambda a: 1 - a, r(3))],
    "mul": binary(torcia.mul) + [case(lambda a: a * 3, r(3)), case(lambda a: a * C23, r(2, 3)),
                                  case(lambda b: C3 * b, r(2, 3))],
    # a number over a tensor is its reciprocal times the number (as PyTorch): a 0-d
    # tensor keeps div
    "div": binary(torcia.div, r, pos) + [case(lambda a: torcia.tensor(2.0).double() / a,
                                              pos(3)),
                                         case(lambda a: a / C3, r(3)),
                                         case(lambda b: C3 / b, pos(3))],
    "pow": binary(torcia.pow, pos, r) + [case(lambda a: a ** 3, r(4)),
                                         case(lambda a: a ** 0.5, pos(3)),
                                         case(lambda b: 2.0 ** b, r(3))],
    "maximum": binary(torcia.maximum, distinct, distinct2)
    + [case(lambda a: torcia.maximum(a, 0.05), distinct(3))],
    "minimum": binary(torcia.minimum, distinct, distinct2)
    + [case(lambda a: torcia.minimum(a, 0.05), distinct(3))],
    "fmax": binary(torcia.fmax, distinct, distinct2) + [case(lambda a: torcia.fmax(a, 0.05), r(3))],
    "fmin": binary(torcia.fmin, distinct, distinct2) + [case(lambda a: torcia.fmin(a, 0.05), r(3))],
    "remainder": binary(lambda a, b: torcia.remainder(a, b + 3), pos, pos)
    + [case(lambda a: torcia.remainder(a, 1.5), pos(3))],
    "fmod": binary(lambda a, b: torcia.fmod(a, b + 3), pos, pos)
    + [case(lambda a: torcia.fmod(a, 1.5), pos(3))],
    "atan2": binary(torcia.atan2, pos, pos) + [case(lambda a: torcia.atan2(a, 1.5), r(3))],
    "hypot": binary(torcia.hypot, pos, pos) + [case(lambda a: torcia.hypot(a, 1.5), r(3))],
    "xlogy": binary(torcia.xlogy, r, pos) + [case(lambda a: torcia.xlogy(a, 1.5), r(3)),
                                             case(lambda b: torcia.xlogy(2.0, b), pos(3))],
    "clamp": [case(lambda x, lo, hi: torcia.clamp(x, lo - 1, hi + 1), distinct(2, 3), r(3),
                   r(2, 1)),
              case(lambda x: torcia.clamp(x, -0.5, 0.6), distinct(2, 3)),
              case(lambda x: torcia.clamp(x.mT, max=0.3), distinct(3, 2))],
    "where": [case(lambda a, b: torcia.where(mask([[True, False, True]]), a, b), r(2, 3),
                   r(2, 1))],
    "lerp": [case(torcia.lerp, r(2, 3), r(3), r(2, 1)),
             case(lambda a, b: torcia.lerp(a, b, 0.3), r(2, 3), r(2, 3))],
    "addcmul": [case(lambda x, a, b: torcia.addcmul(x, a, b, value=0.5), r(3), r(2, 3),
                     r(2, 1))],
    "addcdiv": [case(lambda x, a, b: torcia.addcdiv(x, a, b, value=2.0), r(3), r(2, 3),
                     pos(2, 1))],
    "masked_fill": [case(lambda x: x.masked_fill(mask([True, False, True]), 2.0), r(2, 3))],
    "cast": [case(lambda x: x.to(torcia.float32).to(F64), r(2, 3), eps=1e-3, atol=1e-3)],
    "to_device": [case(_transfer, r(2, 3))],
    "nan_to_num": [case(torcia.nan_to_num, r(2, 3))],
    # ----- reductions ---------------------------------------------------------------------
    "sum": [case(torcia.sum, r(2, 3)), case(lambda x: x.sum(0), r(2, 3)),
            case(lambda x: x.mT.sum((0, 2), keepdim=True), r(2, 3, 2))],
    "nansum": [case(lambda x: x.nansum(1), r(2, 3))],
    "mean": [case(torcia.mean, r(2, 3)), case(lambda x: x[:, ::2].mean(1, keepdim=True),
                                               r(2, 4))],
    "prod": [case(torcia.prod, r(2, 3)), case(lambda x: x.prod(1), r(2, 3)),
             case(lambda x: x.prod(0), t([[0.0, 2.0], [3.0, 0.0], [0.5, 0.0]]))],
    "amax": [case(lambda x: x.amax(1), distinct(2, 3)), case(torcia.amax, distinct(2, 3))],
    "amin": [case(lambda x: x.amin((0, 1)), distinct(2, 3))],
    "var": [case(torcia.var, r(2, 3)), case(lambda x: x.var(1, correction=0), r(2, 3))],
    "std": [case(torcia.std, r(2, 3)), case(lambda x: x.mT.std(1, keepdim=True), r(2, 3))],
    "norm": [case(lambda x, p=p: x.norm(p), r(2, 3)) for p in (1, 2, 3, INF)]
    + [case(lambda x: x.norm(2, dim=1), r(2, 3))],
    "logsumexp": [case(lambda x: x.logsumexp(1), r(2, 3))],
    "max_dim": [case(lambda x: torcia.max(x, 1).values, distinct(2, 3)),
                case(lambda x: torcia.max(x.mT, 0, keepdim=True).values, distinct(2, 3))],
    "min_dim": [case(lambda x: torcia.min(x, 0).values, distinct(2, 3))],
    "median_dim": [case(lambda x: torcia.median(x, 1).values, distinct(2, 3))],
    "mode_dim": [case(lambda x: torcia.mode(x, 1).values, distinct(2, 3))],
    "cumsum": [case(lambda x: x.cumsum(1), r(2, 3))],
    "cumprod": [case(lambda x: x.cumprod(0), r(3, 2)),
                case(lambda x: x.cumprod(0), t([1.5, 0.0, 2.0, -1.0]))],
    "cummax": [case(lambda x: torcia.cummax(x, 1).values, distinct(2, 4))],
    "cummin": [case(lambda x: torcia.cummin(x.mT, 0).values, distinct(2, 4))],
    "logcumsumexp": [case(lambda x: torcia.logcumsumexp(x, 1), r(2, 3))],
    # ----- views and movement -------------------------------------------------------------
    "view": [case(lambda x: x.view(3, 2) * 1, r(2, 3))],
    "reshape": [case(lambda x: x.mT.reshape(-1), r(2, 3))],
    "permute": [case(lambda x: x.permute(2, 0, 1), r(2, 3, 2))],
    "transpose": [case(lambda x: x.transpose(0, 1), r(2, 3))],
    "squeeze": [case(lambda x: x.squeeze(1), r(2, 1, 3)), case(torcia.squeeze, r(1, 3))],
    "unsqueeze": [case(lambda x: x.unsqueeze(1), r(2, 3))],
    "expand": [case(lambda x: x.expand(2, 3, 2), r(3, 1))],
    "narrow": [case(lambda x: x.narrow(1, 1, 2), r(2, 4))],
    "unfold": [case(lambda x: x.unfold(1, 2, 1), r(2, 4))],
    "diagonal": [case(lambda x: x.diagonal(1), r(3, 4)), case(torcia.diagonal, r(3, 3))],
    "as_strided": [case(lambda x: x.as_strided((2, 2), (1, 2)), r(6))],
    "getitem": [case(lambda x: x[1], r(2, 3)), case(lambda x: x[:, ::2], r(2, 5)),
                case(lambda x: x[idx([0, 2, 0])], r(3, 2)),
                case(lambda x: x[mask([[True, False], [True, True]])], r(2, 2))],
    "detach_view": [case(lambda x: call("detach_view", (x,), {}), r(2, 3))],
    "contiguous": [case(lambda x: x.mT.contiguous(), r(2, 3))],
    "clone": [case(torcia.clone, r(2, 3))],
    "flip": [case(lambda x: x.flip((0, 1)), r(2, 3))],
    "roll": [case(lambda x: x.roll(1, 1), r(2, 3)), case(lambda x: x.roll(2), r(2, 3))],
    "repeat": [case(lambda x: x.repeat(2, 1, 2), r(2, 3))],
    "tile": [case(lambda x: call("tile", (x,), {"dims": (2,)}), r(2, 3))],
    "repeat_interleave": [case(lambda x: x.repeat_interleave(2, dim=1), r(2, 3)),
                          case(lambda x: x.repeat_interleave(idx([1, 0, 2]), dim=1), r(2, 3)),
                          case(lambda x: x.repeat_interleave(2), r(2, 2))],
    "tril": [case(lambda x: x.tril(), r(3, 3))], "triu": [case(lambda x: x.triu(1), r(3, 3))],
    "cat": [case(lambda a, b: torcia.cat([a, b.mT], 1), r(2, 3), r(1, 2))],
    "stack": [case(lambda a, b: torcia.stack([a, b], 1), r(2, 3), r(2, 3))],
    "split": [case(lambda x: x.split([1, 2], 1)[1], r(2, 3)),
              case(lambda x: torcia.chunk(x, 2, 0), r(4, 2))],
    "gather": [case(lambda x: x.gather(1, idx([[0, 0], [2, 1]])), r(2, 3))],
    "scatter": [case(lambda x, s: x.scatter(1, idx([[0], [2]]), s), r(2, 3), r(2, 2)),
                case(lambda x: x.scatter(0, idx([[1, 0, 1]]), 0.5), r(2, 3))],
    "scatter_add": [case(lambda x, s: x.scatter_add(1, idx([[0, 0], [2, 1]]), s), r(2, 3),
                         r(2, 2))],
    "scatter_reduce": [
        case(lambda x, s, red=red, inc=inc: x.scatter_reduce(0, idx([0, 2, 0, 1]), s, red,
                                                           include_self=inc),
             distinct(3) if red in ("amax", "amin") else r(3),
             distinct2(4) if red in ("amax", "amin") else r(4))
        for red in ("sum", "mean", "amax", "amin", "prod") for inc in (True, False)
    ] + [case(lambda x, s: x.scatter_reduce(0, idx([0, 0, 1, 1, 1]), s, "prod"), r(2),
              t([0.0, 2.0, 3.0, 0.0, 0.0])),
         case(lambda x, s: x.scatter_reduce(0, idx([0, 0, 1, 1]), s, "prod"),
              t([0.0, 1.5]), t([0.0, 2.0, 0.5, 0.0])),
         case(lambda x, s: x.scatter_reduce(0, idx([0, 0, 0]), s, "prod"), t([0.0]),
              t([0.0, 0.0, 2.0]))],
    "index_select": [case(lambda x: x.index_select(1, idx([2, 0, 2])), r(2, 3))],
    "index_add": [case(lambda x, s: x.index_add(0, idx([1, 1]), s, alpha=2.0), r(2, 3),
                       r(2, 3))],
    "index_copy": [case(lambda x, s: x.index_copy(1, idx([2, 0]), s), r(2, 3), r(2, 2))],
    "index_put": [case(_setitem, r(3, 2), r(2, 2)),
                  case(lambda x, v: torcia.index_put(x, (idx([0, 0]),), v, accumulate=True),
                       r(2, 3), r(3))],
    "copy_slices": [case(_copy_slices, r(3, 4), r(2, 2))],
    "take_along_dim": [case(lambda x: torcia.take_along_dim(x, idx([[1], [0]]), 1), r(2, 3)),
                       case(lambda x: torcia.take_along_dim(x, idx([4, 0, 4])), r(2, 3))],
    "pad": [case(lambda x: pad(x, (1, 2)), r(2, 3)),
            case(lambda x: pad(x, (-1, 1, 1, 0), value=2.0), r(2, 3)),
            case(lambda x: pad(x, (2, 1), mode="reflect"), r(2, 4)),
            case(lambda x: pad(x, (1, 2, 1, 1), mode="replicate"), r(2, 3)),
            case(lambda x: pad(x, (2, 1), mode="circular"), r(2, 3))],
    "diag": [case(torcia.diag, r(3)), case(lambda x: torcia.diag(x, -1), r(3, 3))],
    "diag_embed": [case(lambda x: torcia.diag_embed(x, 1), r(2, 2)),
                   case(lambda x: torcia.diag_embed(x, 0, 0, 2), r(2, 2))],
    "masked_select": [case(lambda x: x.masked_select(mask([True, False, True])), r(2, 3))],
    # ----- sorting --------------------------------------------------------------------------
    "sort": [case(lambda x: torcia.sort(x, 1).values, distinct(2, 3)),
             case(lambda x: torcia.sort(x.mT, 0, descending=True).values, distinct(2, 3))],
    "topk": [case(lambda x: torcia.topk(x, 2).values, distinct(2, 4)),
             case(lambda x: torcia.topk(x, 2, 0, largest=False).values, distinct(3, 2))],
    "kthvalue": [case(lambda x: torcia.kthvalue(x, 2, 1).values, distinct(2, 3)),
                 case(lambda x: torcia.kthvalue(x, 1, 0, keepdim=True).values, distinct(2, 3))],
    # ----- linear algebra -------------------------------------------------------------------
    "matmul": [case(torcia.matmul, r(2, 3), r(3, 2)), case(torcia.matmul, r(3), r(3)),
               case(torcia.matmul, r(3), r(2, 3, 2)), case(torcia.matmul, r(2, 2, 3), r(3)),
               case(lambda a, b: a.mT @ b, r(3, 2, 2), r(1, 2, 3)),
               case(lambda a: a @ C3, r(2, 3)), case(lambda b: C3 @ b, r(3, 2)),
               case(lambda b: C3 @ b, r(3)), case(lambda a: a @ C32, r(2, 2, 3)),
               case(torcia.matmul, r(2, 2, 3), r(3, 2)),
               case(lambda a, b: a.mT @ b, r(2, 3, 2), r(3, 2))],
    "mm": [case(torcia.mm, r(2, 3), r(3, 2)), case(lambda a, b: a.mm(b.mT), r(2, 3), r(2, 3)),
           case(lambda a: a.mm(C32), r(2, 3)), case(lambda b: C23.mm(b), r(3, 2))],
    # a 3 x 4 matrix of 5 entries (one empty row): A @ dense, A^T @ dense, and values only
    "sparse_mm": [
        case(lambda v, d: call("sparse_mm", (SP_CROW, SP_COL, v, d),
                               {"ncols": 4, "transpose": False}), r(5), r(4, 2)),
        case(lambda v, d: call("sparse_mm", (SP_CROW, SP_COL, v, d),
                               {"ncols": 4, "transpose": True}), r(5), r(3, 2)),
        case(lambda v: call("sparse_mm", (SP_CROW, SP_COL, v, C42),
                            {"ncols": 4, "transpose": False}), r(5))],
    "bmm": [case(torcia.bmm, r(2, 2, 3), r(2, 3, 2)),
            case(lambda a: torcia.bmm(a, C32.expand(2, 3, 2)), r(2, 2, 3))],
    "dot": [case(torcia.dot, r(3), r(3)), case(lambda a: torcia.dot(a, C3), r(3))],
    "outer": [case(torcia.outer, r(3), r(2)), case(lambda b: torcia.outer(C3, b), r(2))],
    "addmm": [case(lambda c, a, b: torcia.addmm(c, a, b, beta=0.5, alpha=2.0), r(2), r(2, 3),
                   r(3, 2)),
              case(lambda c, a: torcia.addmm(c, a, C32), r(2), r(2, 3))],
    "einsum": [case(lambda a, b: torcia.einsum("ij,jk->ik", a, b), r(2, 3), r(3, 2)),
               case(lambda a: torcia.einsum("ii->i", a), r(3, 3)),
               case(lambda a: torcia.einsum("ii", a), r(3, 3)),
               case(lambda a, b: torcia.einsum("...ij,...jk->...ik", a, b), r(2, 1, 2, 3),
                    r(2, 3, 2)),
               case(lambda a, b: torcia.einsum("...i,i", a, b), r(2, 3), r(3)),
               case(lambda a, b: torcia.einsum("ij,ik->i", a, b), r(2, 3), r(2, 2))],
    "tensordot": [case(lambda a, b: torcia.tensordot(a, b, ([0, 2], [2, 0])), r(2, 3, 2),
                       r(2, 2, 2))],
    "linalg_inv": [case(torcia.linalg.inv, spd(3)), case(torcia.linalg.inv, spd(2).expand(
        2, 2, 2))],
    "linalg_solve": [case(torcia.linalg.solve, spd(3), r(3, 2)),
                     case(torcia.linalg.solve, spd(3), r(3)),
                     case(lambda a, b: torcia.linalg.solve(a, b, left=False), spd(3), r(2, 3))],
    "linalg_det": [case(torcia.linalg.det, spd(3)), case(torcia.linalg.det, r(2, 2, 2))],
    "linalg_slogdet": [case(lambda a: torcia.linalg.slogdet(a).logabsdet, r(3, 3))],
    "linalg_cholesky": [case(lambda a: torcia.linalg.cholesky(a @ a.mT + torcia.eye(3, dtype=F64)),
                             r(3, 3)),
                        case(lambda a: torcia.linalg.cholesky(a @ a.mT + torcia.eye(2, dtype=F64),
                                                              upper=True), r(2, 2))],
    "linalg_qr": [case(lambda a: torcia.linalg.qr(a), r(3, 2)),
                  case(lambda a: torcia.linalg.qr(a), r(3, 3)),
                  case(lambda a: torcia.linalg.qr(a, mode="complete"), r(3, 3))],
    "linalg_eigh": [case(lambda a: _eigh_invariant(a + a.mT), r(3, 3))],
    "linalg_eigvalsh": [case(lambda a: torcia.linalg.eigvalsh(a + a.mT), r(3, 3))],
    "linalg_eig": [case(lambda a: _eig_invariant(a), r(3, 3)),
                   case(lambda a: _eig_invariant(a), r(2, 2, 2))],
    "linalg_eigvals": [case(torcia.linalg.eigvals, r(3, 3))],
    "linalg_svd": [case(lambda a: _svd_invariant(a, False), r(3, 2)),
                   case(lambda a: _svd_invariant(a, False), r(2, 3)),
                   case(lambda a: _svd_invariant(a, True), r(3, 3))],
    "linalg_pinv": [case(torcia.linalg.pinv, r(3, 2)), case(torcia.linalg.pinv, r(2, 3))],
    "linalg_lu_factor": [case(lambda a: torcia.linalg.lu_factor(a).LU, r(3, 3)),
                         case(lambda a: torcia.linalg.lu(a)[1:], r(2, 3, 3)),
                         case(lambda a, b: torcia.linalg.lu_solve(*torcia.linalg.lu_factor(a), b),
                              r(3, 3), r(3, 2))],
    "linalg_solve_triangular": [
        case(lambda a, b, u=u, l_=l_, d=d: torcia.linalg.solve_triangular(
            a, b, upper=u, left=l_, unitriangular=d), spd(3), r(3, 3))
        for u in (True, False) for l_ in (True, False) for d in (True, False)]
    + [case(lambda a, b: torcia.linalg.solve_triangular(a, b, upper=False), spd(3),
            r(2, 3, 2))],
    "linalg_matrix_exp": [case(torcia.linalg.matrix_exp, r(3, 3)),
                          case(torcia.linalg.matrix_exp, r(2, 2, 2)),
                          case(lambda a: torcia.linalg.matrix_exp(6 * a), r(3, 3))],
    "linalg_lstsq": [case(lambda a, b: torcia.linalg.lstsq(a, b).solution, r(4, 3), r(4, 2)),
                     case(lambda a, b: torcia.linalg.lstsq(a, b).solution, r(2, 3), r(2)),
                     case(lambda a, b: torcia.linalg.lstsq(a, b, driver="gelsd")[:2], r(4, 2),
                          r(4, 3))],
    "linalg_vector_norm": [case(lambda x, o=o: torcia.linalg.vector_norm(x, o), r(2, 3))
                           for o in (1, 2, 3, INF, -INF)]
    + [case(lambda x: torcia.linalg.vector_norm(x, 2, dim=0, keepdim=True), r(2, 3))],
    "linalg_matrix_norm": [case(lambda x, o=o: torcia.linalg.matrix_norm(x, o), r(3, 2))
                           for o in ("fro", "nuc", 2, -2, 1, -1, INF, -INF)]
    + [case(lambda x: torcia.linalg.matrix_norm(x, "fro", dim=(0, 2)), r(2, 2, 3))],
    "linalg_norm": [case(lambda x: call("linalg_norm", (x,), {"ord": None, "dim": None,
                                                              "keepdim": False}), r(2, 3)),
                    case(lambda x: call("linalg_norm", (x,), {"ord": 1, "dim": (0, 1),
                                                              "keepdim": False}), r(2, 3))],
}

# ----- complex inputs (complex128): PyTorch's conjugate-Wirtinger convention -------------------


def cr(*shape):
    """Standard complex normal."""
    return torcia.tensor(RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape),
                         requires_grad=True)


def cpos(*shape):
    """Complex values away from 0 and the negative real axis (log and sqrt are smooth)."""
    return torcia.tensor(RNG.uniform(0.5, 2.0, shape) + 1j * RNG.uniform(-1.0, 1.0, shape),
                         requires_grad=True)


def _hpd(a):
    """A Hermitian positive-definite matrix made from ``a``."""
    return a @ a.mH + 3 * torcia.eye(a.shape[-1], dtype=a.dtype)


def _qr_invariant(a):
    # Q's columns and R's rows share phases: |Q| and |R| do not depend on them
    q, r = torcia.linalg.qr(a)
    return q.abs(), r.abs()


SAMPLES.update({
    "real": [case(torcia.real, cr(2, 3))], "imag": [case(torcia.imag, cr(2, 3))],
    "view_as_real": [case(torcia.view_as_real, cr(2, 3)),
                     case(lambda z: torcia.view_as_real(z[:, ::2]), cr(2, 3))],
    "view_as_complex": [case(torcia.view_as_complex, r(2, 3, 2))],
    "conj": [case(torcia.conj, cr(2, 3))],
    "angle": [case(torcia.angle, cr(2, 3)), case(torcia.angle, r(3))],
    "complex": [case(torcia.complex, r(2, 3), r(2, 3)), case(torcia.complex, r(2, 1), r(3))],
})
SAMPLES.update({
    "fft_c2c": [case(lambda z, m=m: torcia.fft.fft(z, norm=m), cr(2, 5)) for m in
                ("backward", "ortho", "forward")]
    + [case(lambda z: torcia.fft.ifftn(z, s=(3, 4)), cr(2, 3)),
       case(lambda x: torcia.fft.fft2(x, norm="ortho"), r(3, 4))],
    "fft_r2c": [case(lambda x, m=m: torcia.fft.rfft(x, norm=m), r(2, 5)) for m in
                ("backward", "ortho", "forward")]
    + [case(lambda x: torcia.fft.rfftn(x, s=(3, 6)), r(2, 4)),
       case(lambda x: torcia.fft.ihfft(x, dim=0), r(4, 2))],
    "fft_c2r": [case(lambda z, m=m, n=n: torcia.fft.irfft(z, n=n, norm=m), cr(2, 4))
                for m in ("backward", "ortho", "forward") for n in (6, 7)]
    + [case(lambda z: torcia.fft.irfft2(z, s=(3, 4)), cr(3, 3)),
       case(lambda z: torcia.fft.hfft(z, n=5), cr(3))],
})
for _op, _cases in {
    "mul": [case(torcia.mul, cr(2, 3), cr(2, 3)), case(torcia.mul, cr(3), r(2, 3))],
    "div": [case(torcia.div, cr(2, 3), cpos(2, 3)), case(lambda z: z / (1 + 2j), cr(3))],
    "add": [case(torcia.add, cr(3), r(3))], "sub": [case(torcia.sub, r(3), cr(3))],
    "pow": [case(lambda z: z ** 3, cr(3)), case(lambda z: z ** 2.5, cpos(3))],
    "exp": [case(torcia.exp, cr(3))], "log": [case(torcia.log, cpos(3))],
    "sqrt": [case(torcia.sqrt, cpos(3))], "reciprocal": [case(torcia.reciprocal, cpos(3))],
    "sin": [case(torcia.sin, cr(3))], "cos": [case(torcia.cos, cr(3))],
    "tanh": [case(torcia.tanh, cr(3))], "square": [case(torcia.square, cr(3))],
    "abs": [case(torcia.abs, cr(2, 3))], "neg": [case(torcia.neg, cr(3))],
    "matmul": [case(torcia.matmul, cr(2, 3), cr(3, 2)), case(torcia.matmul, cr(3), cr(3))],
    "mm": [case(torcia.mm, cr(2, 3), cr(3, 2))], "dot": [case(torcia.dot, cr(3), cr(3))],
    "outer": [case(torcia.outer, cr(3), cr(2))],
    "einsum": [case(lambda a, b: torcia.einsum("bim,iom->bom", a, b), cr(2, 3, 2),
                    cr(3, 2, 2))],
    "tensordot": [case(lambda a, b: torcia.tensordot(a, b, 1), cr(2, 3), cr(3, 2))],
    "sum": [case(lambda z: z.sum(), cr(2, 3))], "mean": [case(lambda z: z.mean(0), cr(2, 3))],
    "prod": [case(lambda z: z.prod(1), cr(2, 3)), case(lambda z: z.prod(), cr(3))],
    "cumprod": [case(lambda z: z.cumprod(1), cr(2, 3))],
    "lerp": [case(torcia.lerp, cr(3), cr(3), cr(3))],
    "addcmul": [case(lambda x, a, b: torcia.addcmul(x, a, b, value=2), cr(3), cr(3), cr(3))],
    "addcdiv": [case(lambda x, a, b: torcia.addcdiv(x, a, b, value=2), cr(3), cr(3), cpos(3))],
    "var": [case(lambda z: z.var(1), cr(2, 3))], "std": [case(lambda z: z.std(), cr(2, 3))],
    "linalg_inv": [case(lambda a: torcia.linalg.inv(_hpd(a)), cr(3, 3))],
    "linalg_solve": [case(torcia.linalg.solve, cr(3, 3), cr(3, 2))],
    "linalg_det": [case(torcia.linalg.det, cr(3, 3))],
    "linalg_slogdet": [case(lambda a: torcia.linalg.slogdet(a).logabsdet, cr(3, 3))],
    "linalg_cholesky": [case(lambda a: torcia.linalg.cholesky(_hpd(a)), cr(3, 3)),
                        case(lambda a: torcia.linalg.cholesky(_hpd(a), upper=True), cr(2, 2))],
    "linalg_qr": [case(lambda a: _qr_invariant(a), cr(3, 2))],
    "linalg_eigh": [case(lambda a: _eigh_invariant(_hpd(a)), cr(3, 3))],
    "linalg_eigvalsh": [case(lambda a: torcia.linalg.eigvalsh(_hpd(a)), cr(3, 3))],
    "linalg_svd": [case(lambda a: _svd_invariant(a, False), cr(3, 2)),
                   case(lambda a: _svd_invariant(a, True), cr(2, 3))],
    "linalg_pinv": [case(torcia.linalg.pinv, cr(3, 2))],
    "linalg_lu_factor": [case(lambda a: torcia.linalg.lu(a)[1:], cr(3, 3))],
    "linalg_solve_triangular": [case(lambda a, b: torcia.linalg.solve_triangular(
        a, b, upper=True), _hpd(cr(3, 3)).detach().requires_grad_(), cr(3, 2))],
    "linalg_matrix_exp": [case(torcia.linalg.matrix_exp, cr(3, 3))],
    "linalg_lstsq": [case(lambda a, b: torcia.linalg.lstsq(a, b, driver="gelsd")[:2], cr(4, 2),
                          cr(4, 2))],
    "linalg_matrix_norm": [case(lambda a, o=o: torcia.linalg.matrix_norm(a, o), cr(3, 2))
                           for o in ("fro", "nuc", 2, 1)],
    "linalg_vector_norm": [case(lambda z, o=o: torcia.linalg.vector_norm(z, o), cr(2, 3))
                           for o in (1, 2, 3, INF)],
}.items():
    SAMPLES[_op] = SAMPLES[_op] + _cases



def _eigh_invariant(a):
    # eigenvectors are defined up to a sign (a phase, when complex): |V|^2 is not
    vals, vecs = torcia.linalg.eigh(a)
    return vals, vecs * vecs.conj()


def _eig_invariant(a):
    vals, vecs = torcia.linalg.eig(a)
    return vals, vecs * vecs.conj()


def _svd_invariant(a, full):
    # singular vectors are defined up to a shared sign (phase): U Vh and |U|^2 are not
    u, s, vh = torcia.linalg.svd(a, full_matrices=full)
    k = s.shape[-1]
    u, vh = u[:, :k], vh[:k]
    return s, u @ vh, u * u.conj()


# ----- completeness -----------------------------------------------------------------------

NN = set(ops.NN)


#: rows that raise PyTorch's "not implemented" error, with a call that reaches them
NO_FORMULA = {
    "linalg_geqrf": lambda a: torcia.geqrf(a).a,
    "linalg_ldl_factor": lambda a: torcia.linalg.ldl_factor(a + a.mT).LD,
    "linalg_ldl_solve": lambda a: torcia.linalg.ldl_solve(
        *torcia.linalg.ldl_factor(torcia.eye(3, dtype=F64)), a),
}


def test_every_table_row_has_samples():
    # core's rows; installed plugins add rows for their own ops (torcia_register_ops)
    missing = sorted(op for op in derivatives.TABLE
                     if op in ops.ALL and op not in NN and op not in SAMPLES
                     and op not in NO_FORMULA)
    assert not missing, f"derivative rows without gradcheck samples: {missing}"


def test_every_differentiable_core_op_has_a_row_and_samples():
    differentiable = [op for op in ops.ALL if op not in ops.NOT_DIFFERENTIABLE and op not in NN]
    assert not [op for op in differentiable if op not in derivatives.TABLE]
    assert not [op for op in differentiable if op not in SAMPLES and op not in NO_FORMULA]


@pytest.mark.parametrize("op", sorted(NO_FORMULA))
def test_rows_without_a_formula_raise_on_backward(op):
    out = NO_FORMULA[op](r(3, 3))
    assert op in _ops_in_graph(out)
    with pytest.raises(NotImplementedError, match="the derivative for .* is not implemented"):
        out.sum().backward()


def test_samples_name_only_real_rows():
    assert not [op for op in SAMPLES if op not in derivatives.TABLE]


def test_nn_rows_are_covered_by_nn_functional_tests():
    nn_tests = pathlib.Path(__file__).resolve().parents[2] / "nn" / "tests"
    files = sorted(nn_tests.glob("test_functional*.py"))
    rows = sorted(op for op in derivatives.TABLE if op in NN)
    if not rows:
        pytest.skip("no neural-network rows in the table yet")
    if not files:
        pytest.skip("torcia-nn's tests are not in this checkout")
    text = "\n".join(f.read_text() for f in files)
    uncovered = [op for op in rows if f'"{op}"' not in text and f"'{op}'" not in text]
    assert not uncovered, f"NN rows that no torcia-nn test_functional* names: {uncovered}"


# ----- the checks ---------------------------------------------------------------------------

CASES = [pytest.param(op, i, id=f"{op}-{i}") for op, cs in SAMPLES.items()
         for i in range(len(cs))]


def _ops_in_graph(outputs):
    outs = outputs if isinstance(outputs, tuple) else (outputs,)
    seen, stack, names = set(), [o.grad_fn for o in outs if o.grad_fn is not None], set()
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        names.add(getattr(node, "op", None))
        stack.extend(n for n, _ in node.next_functions)
    return names


def _fresh(inputs):
    return tuple(x.detach().clone().requires_grad_(True) for x in inputs)


@pytest.mark.parametrize("op, i", CASES)
def test_gradcheck(op, i):
    fn, inputs, kwargs = SAMPLES[op][i]
    inputs = _fresh(inputs)
    assert op in _ops_in_graph(fn(*inputs)), f"the sample does not record {op!r}"
    assert gradcheck(fn, inputs, **kwargs)


@pytest.mark.parametrize("op, i", CASES)
def test_gradgradcheck(op, i):
    fn, inputs, kwargs = SAMPLES[op][i]
    assert gradgradcheck(fn, _fresh(inputs), **kwargs)


@pytest.mark.parametrize("op, i", CASES)
def test_forward_ad_agrees_with_backward(op, i):
    fn, inputs, kwargs = SAMPLES[op][i]
    assert gradcheck(fn, _fresh(inputs), check_forward_ad=True, **kwargs)


def _nodes(outputs):
    outs = outputs if isinstance(outputs, tuple) else (outputs,)
    seen, stack = {}, [o.grad_fn for o in outs if o is not None and o.grad_fn is not None]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen[id(node)] = node
        stack.extend(n for n, _ in node.next_functions)
    return list(seen.values())


def _grads(fn, inputs):
    out = fn(*inputs)
    outs = [o for o in (out if isinstance(out, tuple) else (out,))
            if o is not None and o.requires_grad]
    total = sum((o.real if o.is_complex() else o).sum() for o in outs)
    return out, torcia.autograd.grad(total, inputs, allow_unused=True)


@pytest.mark.parametrize("op", sorted(SAMPLES))
def test_saved_attributes_of_every_node(op):
    # every node's _saved_<name> resolves, and hooks registered on each of its raw saved
    # tensors (a pack that copies, an unpack that returns the copy) leave its gradients
    fn, inputs, kwargs = SAMPLES[op][0]
    inputs = _fresh(inputs)
    _, want = _grads(fn, inputs)
    out = fn(*inputs)
    unpacked = []
    for node in _nodes(out):
        for name in dir(node):
            if not name.startswith("_saved_"):
                continue
            value = getattr(node, name)
            assert value is None or isinstance(value, (
                torcia.Tensor, torcia.device, int, float, complex, str, tuple, list))
            if isinstance(value, torcia.Tensor) and hasattr(node, "_raw" + name):
                getattr(node, "_raw" + name).register_hooks(
                    lambda t: t.detach().clone(), lambda t: (unpacked.append(t), t)[1])
    outs = [o for o in (out if isinstance(out, tuple) else (out,))
            if o is not None and o.requires_grad]
    total = sum((o.real if o.is_complex() else o).sum() for o in outs)
    got = torcia.autograd.grad(total, inputs, allow_unused=True)
    assert all(isinstance(t, torcia.Tensor) for t in unpacked)
    for g, w in zip(got, want):
        assert (g is None) == (w is None)
        if g is not None:
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-10, atol=1e-12)
