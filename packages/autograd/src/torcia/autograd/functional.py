"""Higher-level differentiation of functions: ``vjp``, ``jvp``, ``jacobian``, ``hessian``,
``vhp``, ``hvp``.

Each takes a function of tensors and the point where to differentiate it, as
``torch.autograd.functional`` does. Inputs and outputs may be a tensor or a tuple of
tensors; results follow the same nesting. Everything is built on :func:`grad`, so with
``create_graph=True`` the results are differentiable again.
"""

from __future__ import annotations

from torcia import Tensor, enable_grad, ones_like, stack, zeros, zeros_like
from torcia.autograd.engine import grad

__all__ = ["hessian", "hvp", "jacobian", "jvp", "vhp", "vjp"]


def _as_tuple(x, what):
    if isinstance(x, Tensor):
        return (x,), True
    if isinstance(x, (tuple, list)) and all(isinstance(t, Tensor) for t in x):
        return tuple(x), False
    raise TypeError(f"The {what} given to the function must be either a Tensor or a tuple of "
                    f"Tensors but the given {what} is {type(x).__name__}.")


def _prepare(inputs, create_graph):
    """Inputs to differentiate at: connected to their graph only when ``create_graph``."""
    out = []
    for t in inputs:
        if create_graph and t.requires_grad:
            out.append(t.view_as(t))
        else:
            out.append(t.detach().requires_grad_(True))
    return tuple(out)


def _finish(ts, create_graph):
    return tuple(t if t is None or create_graph else t.detach() for t in ts)


def _grads(outputs, inputs, grad_outputs, create_graph, strict):
    """Gradients of ``outputs`` w.r.t. ``inputs``, zeros where an input is unused."""
    wanted = [o for o in outputs if o.requires_grad]
    seeds = [g for o, g in zip(outputs, grad_outputs) if o.requires_grad]
    if not wanted:
        if strict:
            raise RuntimeError("The output of the user-provided function is independent of "
                               "input 0. This is not allowed in strict mode.")
        return tuple(zeros_like(x) for x in inputs)
    got = grad(wanted, inputs, seeds, retain_graph=True, create_graph=create_graph,
               allow_unused=True)
    result = []
    for i, (g, x) in enumerate(zip(got, inputs)):
        if g is None:
            if strict:
                raise RuntimeError(f"The output of the user-provided function is independent "
                                   f"of input {i}. This is not allowed in strict mode.")
            g = zeros_like(x)
        result.append(g)
    return tuple(result)


def _check_v(v, outputs, what):
    v, _ = _as_tuple(v, what)
    if len(v) != len(outputs):
        raise RuntimeError(f"The given {what} should contain as many Tensors as the outputs: "
                           f"got {len(v)} and {len(outputs)}")
    for i, (a, o) in enumerate(zip(v, outputs)):
        if tuple(a.shape) != tuple(o.shape):
            raise RuntimeError(f"Entry {i} in {what} has invalid size: expected "
                               f"{list(o.shape)} but got {list(a.shape)}")
    return v


def _vector_for_inputs(v, inputs):
    """``v`` checked against the inputs; ones when omitted for a one-element input."""
    if v is not None:
        return _check_v(v, inputs, "v")
    if any(x.numel() != 1 for x in inputs):
        raise RuntimeError("The vector v can only be None if the input to the user-provided "
                           "function is a single Tensor with a single element.")
    return tuple(ones_like(x) for x in inputs)


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """The function's outputs and the vector-Jacobian product ``v^T J``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.autograd.functional import vjp
    >>> out, g = vjp(lambda x: x ** 2, torcia.tensor([1.0, 2.0]), torcia.tensor([1.0, 1.0]))
    >>> g
    tensor([2., 4.])
    """
    inputs, single_in = _as_tuple(inputs, "inputs")
    with enable_grad():
        xs = _prepare(inputs, create_graph)
        outputs, single_out = _as_tuple(func(*xs), "outputs of the user-provided function")
        if v is None:
            if any(o.numel() != 1 for o in outputs):
                raise RuntimeError("The vector v can only be None if the user-provided "
                                   "function returns a single Tensor with a single element.")
            v = tuple(None for _ in outputs)
        else:
            v = _check_v(v, outputs, "v")
        g = _grads(outputs, xs, v, create_graph, strict)
    outs = _finish(outputs, create_graph)
    g = _finish(g, create_graph)
    return (outs[0] if single_out else outs), (g[0] if single_in else g)


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """The function's outputs and the Jacobian-vector product ``J v``, computed with two
    reverse passes (the vjp is linear in its seed; differentiating it w.r.t. the seed gives
    the jvp).

    Examples
    --------
    >>> import torcia
    >>> from torcia.autograd.functional import jvp
    >>> jvp(lambda x: x ** 2, torcia.tensor([1.0, 2.0]), torcia.tensor([1.0, 0.0]))[1]
    tensor([2., 0.])
    """
    inputs, single_in = _as_tuple(inputs, "inputs")
    v = _vector_for_inputs(v, inputs)
    with enable_grad():
        xs = _prepare(inputs, create_graph)
        outputs, single_out = _as_tuple(func(*xs), "outputs of the user-provided function")
        seeds = tuple(zeros_like(o).requires_grad_(True) for o in outputs)
        g = _grads(outputs, xs, seeds, True, strict)
        live = [(gi, vi) for gi, vi in zip(g, v) if gi.requires_grad]
        if live:
            got = grad([gi for gi, _ in live], seeds, [vi for _, vi in live],
                       create_graph=create_graph, allow_unused=True)
        else:
            got = (None,) * len(seeds)
        result = tuple(zeros_like(o) if r is None else r for r, o in zip(got, outputs))
    outs = _finish(outputs, create_graph)
    result = _finish(result, create_graph)
    return (outs[0] if single_out else outs), (result[0] if single_out else result)


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy="reverse-mode"):
    """The Jacobian of ``func`` at ``inputs``: for one output and one input, a tensor of
    shape ``output.shape + input.shape``; otherwise tuples nested as (output, input).

    Examples
    --------
    >>> import torcia
    >>> from torcia.autograd.functional import jacobian
    >>> jacobian(lambda x: x ** 2, torcia.tensor([1.0, 2.0]))
    tensor([[2., 0.],
            [0., 4.]])
    """
    if strategy not in ("reverse-mode", "forward-mode"):
        raise ValueError('Expected strategy to be either "forward-mode" or "reverse-mode".')
    inputs, single_in = _as_tuple(inputs, "inputs")
    with enable_grad():
        xs = _prepare(inputs, create_graph)
        outputs, single_out = _as_tuple(func(*xs), "outputs of the user-provided function")
        rows = []
        for o in outputs:
            per_input = [[] for _ in xs]
            flat = o.reshape(-1)
            for k in range(flat.numel()):
                seed = zeros_like(flat)
                seed[k] = 1.0
                g = _grads((flat,), xs, (seed,), create_graph, strict)
                for i, gi in enumerate(g):
                    per_input[i].append(gi)
            jac = []
            for x, parts in zip(xs, per_input):
                shape = tuple(o.shape) + tuple(x.shape)
                j = stack(parts).reshape(shape) if parts else zeros(shape, dtype=x.dtype)
                jac.append(j if create_graph else j.detach())
            rows.append(tuple(jac))
    if single_out:
        return rows[0][0] if single_in else rows[0]
    return tuple(r[0] for r in rows) if single_in else tuple(rows)


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy="reverse-mode"):
    """The Hessian of a scalar function: ``input.shape + input.shape`` for one input,
    tuples nested as (input, input) for several.

    Examples
    --------
    >>> import torcia
    >>> from torcia.autograd.functional import hessian
    >>> hessian(lambda x: (x ** 3).sum(), torcia.tensor([1.0, 2.0]))
    tensor([[ 6.,  0.],
            [ 0., 12.]])
    """
    inputs, single_in = _as_tuple(inputs, "inputs")

    def gradient(*xs):
        out = func(*xs)
        if not isinstance(out, Tensor) or out.numel() != 1:
            raise RuntimeError("The function given to hessian should return a single Tensor "
                               "containing a single element")
        return _grads((out.reshape(()),), xs, (None,), True, strict)

    jac = jacobian(gradient, inputs, create_graph=create_graph, strict=strict)
    return jac[0][0] if single_in else jac


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """The scalar function's value and the vector-Hessian product ``v^T H``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.autograd.functional import vhp
    >>> vhp(lambda x: (x ** 3).sum(), torcia.tensor([1.0, 2.0]), torcia.tensor([1.0, 1.0]))[1]
    tensor([ 6., 12.])
    """
    inputs, single_in = _as_tuple(inputs, "inputs")
    v = _vector_for_inputs(v, inputs)
    with enable_grad():
        xs = _prepare(inputs, create_graph)
        out = func(*xs)
        if not isinstance(out, Tensor) or out.numel() != 1:
            raise RuntimeError("The function given to vhp should return a single Tensor "
                               "containing a single element")
        g = _grads((out.reshape(()),), xs, (None,), True, strict)
        wanted = [(gi, vi) for gi, vi in zip(g, v) if gi.requires_grad]
        if wanted:
            result = _grads(tuple(gi for gi, _ in wanted), xs, tuple(vi for _, vi in wanted),
                            create_graph, strict)
        else:
            result = tuple(zeros_like(x) for x in xs)
    value = out if create_graph else out.detach()
    result = _finish(result, create_graph)
    return value, (result[0] if single_in else result)


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """The scalar function's value and the Hessian-vector product ``H v`` (the Hessian is
    symmetric, so this is :func:`vhp`).

    Examples
    --------
    >>> import torcia
    >>> from torcia.autograd.functional import hvp
    >>> hvp(lambda x: (x ** 3).sum(), torcia.tensor([1.0, 2.0]), torcia.tensor([1.0, 1.0]))
    (tensor(9.), tensor([ 6., 12.]))
    """
    return vhp(func, inputs, v, create_graph, strict)
