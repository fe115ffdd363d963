"""The forward-mode table: how each differentiable op maps input tangents to output
tangents (its Jacobian-vector product), beside :mod:`torcia.autograd.derivatives`.

Every op with a backward formula has a JVP, found in this order:

1. ``JVP[op]``: a formula written out (the common elementwise ops, products, matmul),
   registered with ``@jvp("op")``. It receives ``tangents`` (one per input, ``None`` where
   the input has none), the op's inputs positionally, then keyword-only ``result`` and the
   op's parameters, and returns the output's tangent (a tuple for several outputs).
2. Linear ops: a row whose backward formula reads no input value and not the result
   (every input named with a leading underscore) has a constant Jacobian; unless listed in
   :data:`PIECEWISE_CONSTANT`, the op is linear and its JVP is the op itself applied to the
   tangents, as PyTorch derives it.
3. Otherwise, the transpose of the backward formula: the vjp ``u -> J^T u`` is linear in
   ``u`` and written with differentiable ops, so ``J t = d/du <J^T u, t>``, one reverse pass
   over the formula's own small graph.

Complex tensors: a JVP is the real-linear map on real and imaginary parts, as in PyTorch.
Holomorphic formulas (``exp``, ``mul``, ``matmul``, ...) hold unchanged; linear ops
(``real``, ``conj``, FFTs) are real-linear, so applying them to tangents is right too. The
transposed path reads PyTorch's backward convention as the adjoint in the real inner
product ``<a, b> = Re(sum(conj(a) * b))``, whose gradient in ``u`` is then ``J t`` itself.
"""

from __future__ import annotations

import torcia
from torcia import enable_grad
from torcia.autograd import derivatives as _derivs
from torcia.autograd.graph import Meta
from torcia.library import Tensor, call

JVP: dict = {}

# rows whose backward reads no value but whose op is not linear: the Jacobian is zero
# (steps, rounding), so applying the op to a tangent would be wrong
PIECEWISE_CONSTANT = frozenset({"sign", "floor", "ceil", "round", "trunc", "frac"})
# rows the engine records itself (no kernel to call on tangents)
_ENGINE_OPS = frozenset({"copy_slices", "to_device"})


def jvp(op: str):
    """Register the forward formula of ``op`` (see the module docstring)."""

    def register(fn):
        if op in JVP:
            raise ValueError(f"a forward formula for {op!r} is already registered")
        JVP[op] = fn
        return fn

    return register


def is_linear(op: str) -> bool:
    """Whether the derivative table shows ``op`` to be linear in its tensor inputs.

    Examples
    --------
    >>> from torcia.autograd import forward_derivatives
    >>> forward_derivatives.is_linear("add"), forward_derivatives.is_linear("mul")
    (True, False)
    """
    entry = _derivs.TABLE.get(op)
    return (entry is not None and entry.fn is not None and op not in PIECEWISE_CONSTANT
            and op not in _ENGINE_OPS and not entry.uses_result and not any(entry.saved_flags)
            and not entry.variadic_saved)


def kind(op: str) -> str:
    """``"formula"``, ``"linear"`` or ``"transposed-vjp"``: where ``op``'s JVP comes from.

    Examples
    --------
    >>> from torcia.autograd import forward_derivatives
    >>> forward_derivatives.kind("add")
    'linear'
    """
    if op in JVP:
        return "formula"
    return "linear" if is_linear(op) else "transposed-vjp"


def _zero_tangent(x):
    return torcia.zeros(x.shape, dtype=x.dtype, device=x.device)


def output_tangents(op: str, primals: tuple, tangents: list, params: dict, result):
    """The tangent(s) of ``op``'s output(s), given its inputs and their tangents."""
    fn = JVP.get(op)
    if fn is not None:
        return fn(tangents, *primals, result=result, **params)
    if is_linear(op):
        # a number operand (``x + 1``, ``x + True``, ``x + 1j``) is a constant: its tangent
        # is a zero of its type, which promotes as the number does
        ins = tuple(
            (_zero_tangent(x) if t is None else t.to(x.dtype)) if isinstance(x, Tensor)
            else type(x)(0) if isinstance(x, (int, float, complex)) else x
            for x, t in zip(primals, tangents))
        return call(op, ins, params)
    return _transposed_vjp(op, primals, tangents, params, result)


def _transposed_vjp(op, primals, tangents, params, result):
    entry = _derivs.TABLE[op]
    outs = result if isinstance(result, tuple) else (result,)
    mask = entry.differentiable_outputs
    # where the caller records, the tangent is differentiable too (reverse over forward)
    create_graph = torcia.is_grad_enabled()
    with enable_grad():
        seeds = [torcia.zeros(o.shape, dtype=o.dtype, device=o.device).requires_grad_(True)
                 if (o.is_floating_point() or o.is_complex()) and (mask is None or mask[k])
                 else None
                 for k, o in enumerate(outs)]
        inputs = []
        for i, x in enumerate(primals):
            if not isinstance(x, Tensor):
                inputs.append(x)
                continue
            keep = entry.saved_flags[i] if i < len(entry.saved_flags) else entry.variadic_saved
            data = x.__torcia_data__
            inputs.append(x if keep else Meta((data.shape, data.dtype, x.__torcia_device__)))
        kwargs = {name: params[name] for name in entry.param_names if name in params}
        if entry.uses_result:
            kwargs["result"] = result
        if entry.wants_needs:
            kwargs["needs_input_grad"] = tuple(t is not None for t in tangents)
        if entry.multi:
            grads = entry.fn(list(seeds), *inputs, **kwargs)
        else:
            grads = entry.fn(seeds[0], *inputs, **kwargs)
        if not isinstance(grads, tuple):
            grads = (grads,)
        total = None
        for g, x, t in zip(grads, primals, tangents):
            if g is None or t is None:
                continue
            meta = (x.__torcia_data__.shape, x.__torcia_data__.dtype, x.__torcia_device__)
            g = _derivs._fit(g, meta)
            if g.is_complex() or t.is_complex():
                # the adjoint is taken in the real inner product Re(sum(conj(a) * b)),
                # which PyTorch's convention for complex gradients uses
                term = (g.conj() * t).real.sum()
            else:
                term = (g * t).sum()
            total = term if total is None else total + term
        live = [s for s in seeds if s is not None]
        if total is None or not total.requires_grad:
            found = [None] * len(live)
        else:
            found = torcia.autograd.grad(total, live, allow_unused=True,
                                         create_graph=create_graph)
    found = iter(found)
    out = []
    for s, o in zip(seeds, outs):
        if s is None:
            out.append(None)
            continue
        g = next(found)
        # autograd.grad's results are out of the graph, with their tangents of the outer
        # forward levels (nested forward mode reads them)
        out.append(_zero_tangent(o) if g is None else g)
    return tuple(out) if isinstance(result, tuple) else out[0]


def _t(t, x):
    return _zero_tangent(x) if t is None else t


# ----- formulas written out: the common ops, for speed ----------------------------------


@jvp("exp")
def _(tangents, x, *, result):
    return tangents[0] * result


@jvp("log")
def _(tangents, x, *, result):
    return tangents[0] / x


@jvp("sin")
def _(tangents, x, *, result):
    return tangents[0] * x.cos()


@jvp("cos")
def _(tangents, x, *, result):
    return -tangents[0] * x.sin()


@jvp("tanh")
def _(tangents, x, *, result):
    return tangents[0] * (1 - result * result)


@jvp("sigmoid")
def _(tangents, x, *, result):
    return tangents[0] * result * (1 - result)


@jvp("relu")
def _(tangents, x, *, result):
    return tangents[0] * (result > 0)


@jvp("sqrt")
def _(tangents, x, *, result):
    return tangents[0] / (2 * result)


@jvp("mul")
def _(tangents, a, b, *, result):
    ta, tb = tangents
    out = None
    if ta is not None:
        out = ta * b
    if tb is not None:
        out = a * tb if out is None else out + a * tb
    return out


@jvp("div")
def _(tangents, a, b, *, result, rounding_mode=None):
    if rounding_mode is not None:
        return _zero_tangent(result)
    ta, tb = tangents
    out = None
    if ta is not None:
        out = ta / b
    if tb is not None:
        term = -tb * result / b
        out = term if out is None else out + term
    return out


@jvp("pad")
def _(tangents, x, *, result, pad, mode, value):
    # affine in x: the fill value is a constant
    return call("pad", (tangents[0],), {"pad": pad, "mode": mode, "value": 0})


@jvp("matmul")
def _(tangents, a, b, *, result):
    ta, tb = tangents
    out = None
    if ta is not None:
        out = torcia.matmul(ta, b)
    if tb is not None:
        term = torcia.matmul(a, tb)
        out = term if out is None else out + term
    return out
