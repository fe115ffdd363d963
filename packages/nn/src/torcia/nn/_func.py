"""Function transforms, served as ``torcia.func`` (PyTorch's ``torch.func``): ``grad``,
``grad_and_value``, ``vjp``, ``jvp``, ``linearize``, ``jacrev``, ``jacfwd``, ``hessian``,
``vmap``, ``functional_call``, ``stack_module_state``, ``replace_all_batch_norm_modules_``.

torcia-nn owns it because ``functional_call`` and the module helpers need modules; core
aliases the name. The transforms compose (``vmap(grad(f))``, ``jacrev(jacrev(f))``).

``vmap`` runs the function once on batched tensors (a dispatch mode, see
``torcia.nn._vmap``): each op runs once for the whole batch through its batching rule, or
once per sample where it has none (with a one-time performance warning naming the op).
Random ops (rand, randn, normal, bernoulli, the dropout masks) have rules too:
``randomness="different"`` draws every sample's numbers in one call, ``"same"`` draws once
and broadcasts. Inputs autograd tracks across the call (``grad(vmap(f))``, an ensemble
trained through ``vmap``) run batched too: the batched run is one node of the outer
graph, whose backward is one batched backward pass (see :class:`_Region`). Cases that run
the whole function once per sample instead, with the same results: a function that draws
from the default generator outside dispatch (randint, randperm, the in-place fills...)
under ``"same"``/``"different"``, found after the batched run (which then reruns as the
loop, with a warning); a tracked function that closes over a tensor autograd tracks, or
that runs inside another vmap or on forward-mode tangents; and the backward of a tracked
vmap that must itself be differentiable (second derivatives). ``jacfwd`` and ``jacrev``
are one vmap over all one-hot directions, as torch.func's. The ops with rules are listed
in the docs (``docs/vmap_coverage.rst``).
"""

from __future__ import annotations

import functools
import warnings

import torcia
import torcia.autograd.forward_ad as fwAD
from torcia import library
from torcia.nn import _vmap as _vm
from torcia.nn.modules.module import Module
from torcia.nn.utils.stateless import functional_call as _functional_call
from torcia.utils import pytree

__all__ = ["functional_call", "grad", "grad_and_value", "hessian", "jacfwd", "jacrev", "jvp",
           "linearize", "replace_all_batch_norm_modules_", "stack_module_state", "vjp",
           "vmap"]


# ---------------------------------------------------------------------------------------
# pytrees: nested tuples, lists and dicts with tensors (or anything) at the leaves
# ---------------------------------------------------------------------------------------


def _flatten(tree):
    """``(leaves, rebuild)`` with ``rebuild(leaves) == tree``: torch.func walks its
    arguments and results as torch.utils._pytree's trees."""
    leaves, spec = pytree.tree_flatten(tree)
    return leaves, lambda new: pytree.tree_unflatten(list(new), spec)


def _tensors_only(tree, what):
    leaves, _ = _flatten(tree)
    for leaf in leaves:
        if not isinstance(leaf, torcia.Tensor):
            raise RuntimeError(f"{what}: Expected f(*args) to return only tensors, got "
                               f"unsupported type {type(leaf).__name__}")
    return leaves


# ---------------------------------------------------------------------------------------
# reverse mode
# ---------------------------------------------------------------------------------------


def _argnums_tuple(argnums, nargs, name):
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    if not nums:
        raise RuntimeError(f"{name}: argnums must be non-empty")
    for a in nums:
        if not isinstance(a, int):
            raise RuntimeError(f"{name}: argnums must be int or Tuple[int, ...], got: "
                               f"{type(a).__name__}")
        if not -nargs <= a < nargs:
            raise RuntimeError(f"Got argnums={a}, but only {nargs} positional inputs")
    return tuple(a % nargs for a in nums)


# how many transforms are running their function: inside one, results must stay
# differentiable for the outer transform; at the top they are plain tensors, as in PyTorch
_DEPTH = [0]


def _call_inside(func, *args, **kwargs):
    _DEPTH[0] += 1
    try:
        return func(*args, **kwargs)
    finally:
        _DEPTH[0] -= 1


def _needs_graph(tree) -> bool:
    return _DEPTH[0] > 0 or any(isinstance(x, torcia.Tensor) and x.requires_grad
                                for x in _flatten(tree)[0])


def _finish(tree, keep_graph: bool):
    if keep_graph:
        return tree
    leaves, rebuild = _flatten(tree)
    return rebuild([_detach(x) if isinstance(x, torcia.Tensor) else x for x in leaves])


def _detach(x):
    """``x`` cut from the reverse graph, keeping its forward-mode tangent: inside an
    outer ``jvp``/``jacfwd`` (forward-over-reverse) the tangent is what it reads."""
    return fwAD.map_tangents(x, x.detach())


def _fresh_leaves(tree):
    """A copy of ``tree`` whose tensors are new leaves that require grad (kept attached,
    so an outer transform still differentiates through them)."""
    leaves, rebuild = _flatten(tree)
    fresh = []
    for leaf in leaves:
        if not isinstance(leaf, torcia.Tensor):
            raise RuntimeError("grad: expected the differentiated inputs to be tensors, got "
                               f"{type(leaf).__name__}")
        if not leaf.is_floating_point():
            raise RuntimeError("only Tensors of floating point dtype can require gradients")
        if leaf.requires_grad:
            fresh.append(leaf.view_as(leaf))
            continue
        new = leaf.detach().requires_grad_(True)
        if fwAD.is_dual(leaf):
            # a dual input (an outer jvp): a view of the new leaf carries its tangents on
            new = fwAD.map_tangents(leaf, new.view_as(new))
        fresh.append(new)
    return rebuild(fresh), fresh


def grad_and_value(func, argnums=0, has_aux=False):
    """``func``'s gradient with respect to the ``argnums`` inputs, and its value.

    Parameters
    ----------
    func : callable
        Returns a one-element tensor (or ``(output, aux)`` with ``has_aux=True``).
    argnums : int or tuple of int
        Which positional inputs to differentiate (each may be a pytree of tensors).
    has_aux : bool
        ``func`` returns ``(output, aux)``; ``aux`` is passed through undifferentiated.

    Returns
    -------
    callable
        Returns ``(grad, value)``, or ``(grad, (value, aux))``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.func import grad_and_value
    >>> g, v = grad_and_value(lambda x: (x ** 2).sum())(torcia.tensor([1.0, 2.0]))
    >>> g, v
    (tensor([2., 4.]), tensor(5.))
    """

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        nums = _argnums_tuple(argnums, len(args), "grad_and_value")
        keep = _needs_graph(args)
        args = list(args)
        fresh = []
        with torcia.enable_grad():
            for a in nums:
                args[a], leaves = _fresh_leaves(args[a])
                fresh.append(leaves)
            out = _call_inside(func, *args, **kwargs)
            aux = None
            if has_aux:
                if not (isinstance(out, tuple) and len(out) == 2):
                    raise RuntimeError("grad_and_value(f)(*args): output of function f "
                                       "should be a tuple: (output, aux) if has_aux is True")
                out, aux = out
            if not isinstance(out, torcia.Tensor):
                raise RuntimeError("grad_and_value(f)(*args): Expected f(*args) to return a "
                                   f"Tensor, got {type(out).__name__}")
            if out.numel() != 1:
                raise RuntimeError("grad_and_value(f)(*args): Expected f(*args) to return a "
                                   "scalar Tensor, got tensor with "
                                   f"{out.ndim} dims. Maybe you wanted to use the vjp or "
                                   "jacrev APIs instead?")
            flat = [leaf for leaves in fresh for leaf in leaves]
            if out.requires_grad:
                got = torcia.autograd.grad(out, flat, create_graph=keep, allow_unused=True)
            else:
                got = (None,) * len(flat)
        got = [torcia.zeros_like(x) if g is None else g for g, x in zip(got, flat)]
        grads, i = [], 0
        for a, leaves in zip(nums, fresh):
            _, rebuild = _flatten(args[a])
            grads.append(rebuild(got[i:i + len(leaves)]))
            i += len(leaves)
        result = _finish(grads[0] if isinstance(argnums, int) else tuple(grads), keep)
        out = _finish(out, keep)
        return result, ((out, aux) if has_aux else out)

    return wrapper


def grad(func, argnums=0, has_aux=False):
    """The gradient of ``func`` (a function returning one number) with respect to the
    ``argnums`` inputs.

    Examples
    --------
    >>> import torcia
    >>> from torcia.func import grad
    >>> grad(lambda x: x.sin().sum())(torcia.tensor([0.0]))
    tensor([1.])
    >>> grad(grad(lambda x: x.cos().sum()))(torcia.tensor([0.0]))
    tensor([-1.])
    """
    inner = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        g, value = inner(*args, **kwargs)
        return (g, value[1]) if has_aux else g

    return wrapper


def vjp(func, *primals, has_aux=False):
    """``func(*primals)`` and a function mapping output cotangents to input cotangents.

    Examples
    --------
    >>> import torcia
    >>> from torcia.func import vjp
    >>> out, fn = vjp(torcia.sin, torcia.tensor([0.0, 1.0]))
    >>> fn(torcia.ones(2))
    (tensor([1.0000, 0.5403]),)
    """
    keep = _needs_graph(primals)
    with torcia.enable_grad():
        fresh_args, fresh = _fresh_leaves(primals)
        out = _call_inside(func, *fresh_args)
        aux = None
        if has_aux:
            out, aux = out
    outputs = _tensors_only(out, "vjp(f, *primals)")

    def vjp_fn(*cotangents):
        cots = _tensors_only(cotangents[0] if len(cotangents) == 1 else cotangents,
                             "vjp_fn")
        if len(cots) != len(outputs):
            raise RuntimeError("Expected pytree structure of cotangents to be the same as "
                               "pytree structure of outputs to the function")
        pairs = [(o, c) for o, c in zip(outputs, cots) if o.requires_grad]
        with torcia.enable_grad():
            got = (torcia.autograd.grad([o for o, _ in pairs], fresh, [c for _, c in pairs],
                                        retain_graph=True, create_graph=keep,
                                        allow_unused=True)
                   if pairs else (None,) * len(fresh))
        got = [torcia.zeros_like(x) if g is None else g for g, x in zip(got, fresh)]
        _, rebuild = _flatten(primals)
        return _finish(tuple(rebuild(got)), keep)

    out = _finish(out, keep)
    return (out, vjp_fn, aux) if has_aux else (out, vjp_fn)


# ---------------------------------------------------------------------------------------
# forward mode
# ---------------------------------------------------------------------------------------


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """``func(*primals)`` and its Jacobian-vector product with ``tangents``, in forward
    mode (:mod:`torcia.autograd.forward_ad`).

    Examples
    --------
    >>> import torcia
    >>> from torcia.func import jvp
    >>> jvp(lambda x: x ** 3, (torcia.tensor([2.0]),), (torcia.tensor([1.0]),))
    (tensor([8.]), tensor([12.]))
    """
    if not isinstance(primals, tuple) or not isinstance(tangents, tuple):
        raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to be "
                           "tuples")
    p_leaves, rebuild = _flatten(primals)
    t_leaves, _ = _flatten(tangents)
    if len(p_leaves) != len(t_leaves):
        raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to have "
                           "the same python structure")
    # a level of its own inside any open one: jvp of a jvp (jacfwd(jacfwd(f))) nests
    with fwAD.nested_dual_level() as level:
        duals = [fwAD.make_dual(p, t, level=level) for p, t in zip(p_leaves, t_leaves)]
        out = func(*rebuild(duals))
        aux = None
        if has_aux:
            out, aux = out
        leaves, rebuild_out = _flatten(out)
        _tensors_only(out, "jvp(f, primals, tangents)")
        pairs = [fwAD.unpack_dual(o, level=level) for o in leaves]
        primal_out = rebuild_out([_detach(p) for p, _ in pairs])
        tangent_out = rebuild_out([torcia.zeros_like(o) if t is None else t
                                   for o, (_, t) in zip(leaves, pairs)])
    return (primal_out, tangent_out, aux) if has_aux else (primal_out, tangent_out)


def linearize(func, *primals):
    """``func(*primals)`` and a function computing its Jacobian-vector product at those
    primals.

    Examples
    --------
    >>> import torcia
    >>> from torcia.func import linearize
    >>> out, jvp_fn = linearize(torcia.sin, torcia.tensor([0.0]))
    >>> jvp_fn(torcia.tensor([2.0]))
    tensor([2.])
    """
    out = func(*primals)

    def jvp_fn(*tangents):
        return jvp(func, primals, tangents)[1]

    return out, jvp_fn


def _basis(leaves):
    """One-hot directions for the flattened ``leaves`` together: for each leaf, a tensor
    of shape (total elements, *leaf.shape), the rows of one identity matrix split by
    leaf."""
    sizes = [x.numel() for x in leaves]
    total = sum(sizes)
    dtype = leaves[0].dtype if leaves else torcia.get_default_dtype()
    eye = torcia.eye(total, dtype=dtype, device=leaves[0].device if leaves else None)
    out, start = [], 0
    for x, n in zip(leaves, sizes):
        out.append(eye[:, start:start + n].reshape(total, *x.shape).to(x.dtype))
        start += n
    return out, sizes


def _blocks(rows, out_leaves, in_leaves, forward):
    """Jacobian blocks ``[output][input]`` of shape output shape + input shape, from the
    batched products: forward mode gives per output (inputs' total, *output shape), reverse
    mode per input (outputs' total, *input shape)."""
    blocks = [[None] * len(in_leaves) for _ in out_leaves]
    if forward:
        start = 0
        for j, x in enumerate(in_leaves):
            n = x.numel()
            for o, out in enumerate(out_leaves):
                part = rows[o][start:start + n]
                blocks[o][j] = part.movedim(0, -1).reshape(*out.shape, *x.shape)
            start += n
    else:
        start = 0
        for o, out in enumerate(out_leaves):
            n = out.numel()
            for j, x in enumerate(in_leaves):
                blocks[o][j] = rows[j][start:start + n].reshape(*out.shape, *x.shape)
            start += n
    return blocks


def _jacobian(func, argnums, has_aux, forward, name, chunk_size=None):
    """jacfwd/jacrev: one batched pass over every one-hot direction at once (vmap of a
    jvp over the inputs' directions, of a vjp over the outputs'), as torch.func does."""

    @functools.wraps(func)
    def wrapper(*args):
        nums = _argnums_tuple(argnums, len(args), name)
        per_arg = [_flatten(args[i]) for i in nums]
        in_leaves = [leaf for leaves, _ in per_arg for leaf in leaves]

        def at(*xs):
            call_args = list(args)
            k = 0
            for i, (leaves, rebuild) in zip(nums, per_arg):
                call_args[i] = rebuild(list(xs[k:k + len(leaves)]))
                k += len(leaves)
            return func(*call_args)

        aux = None
        if forward:
            def push(*tangents):
                res = jvp(at, tuple(in_leaves), tuple(tangents), has_aux=has_aux)
                return (res[1], res[2]) if has_aux else res[1]

            basis, _ = _basis(in_leaves)
            got = vmap(push, out_dims=(0, None) if has_aux else 0,
                       chunk_size=chunk_size)(*basis)
            if has_aux:
                got, aux = got
            out_leaves, out_rebuild = _flatten(got)
            # the outputs' shapes: a tangent row has the output's shape
            shapes = [torcia.empty(t.shape[1:], dtype=t.dtype) for t in out_leaves]
            blocks = _blocks(out_leaves, shapes, in_leaves, True)
        else:
            out, pull, *rest = vjp(at, *in_leaves, has_aux=has_aux)
            aux = rest[0] if rest else None
            out_leaves, out_rebuild = _flatten(out)
            _tensors_only(out, name)
            basis, _ = _basis(out_leaves)
            rows = vmap(lambda *cot: pull(out_rebuild(list(cot))),
                        chunk_size=chunk_size)(*basis)
            blocks = _blocks(list(rows), out_leaves, in_leaves, False)
        result, k = [], 0
        for (leaves, rebuild) in per_arg:
            result.append(out_rebuild([rebuild(row[k:k + len(leaves)]) for row in blocks]))
            k += len(leaves)
        jac = result[0] if isinstance(argnums, int) else tuple(result)
        return (jac, aux) if has_aux else jac

    return wrapper


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None):
    """The Jacobian of ``func`` with respect to the ``argnums`` inputs, one reverse pass
    per output element. Shape: output shape + input shape.

    Examples
    --------
    >>> import torcia
    >>> from torcia.func import jacrev
    >>> jacrev(lambda x: x ** 2)(torcia.tensor([1.0, 2.0]))
    tensor([[2., 0.],
            [0., 4.]])
    """
    _check_chunk_size(chunk_size)
    return _jacobian(func, argnums, has_aux, False, "jacrev", chunk_size)


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """The Jacobian of ``func`` with respect to the ``argnums`` inputs, one forward-mode
    pass per input element. Shape: output shape + input shape.

    Examples
    --------
    >>> import torcia
    >>> from torcia.func import jacfwd
    >>> jacfwd(lambda x: x.sin())(torcia.tensor([0.0, 0.0]))
    tensor([[1., 0.],
            [0., 1.]])
    """
    _check_randomness(randomness)
    return _jacobian(func, argnums, has_aux, True, "jacfwd")


def hessian(func, argnums=0):
    """The Hessian of ``func`` (a function returning one number): the Jacobian of its
    gradient, forward-over-reverse (``jacfwd(jacrev(func))``) as PyTorch's.

    Examples
    --------
    >>> import torcia
    >>> from torcia.func import hessian
    >>> hessian(lambda x: (x ** 3).sum())(torcia.tensor([1.0, 2.0]))
    tensor([[ 6.,  0.],
            [ 0., 12.]])
    """
    return jacfwd(jacrev(func, argnums), argnums)


# ---------------------------------------------------------------------------------------
# vmap
# ---------------------------------------------------------------------------------------

def _check_randomness(randomness):
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or "
                           f"'same'. Got {randomness}")


def _check_chunk_size(chunk_size):
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size <= 0):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got "
                         f"{chunk_size})")


def _broadcast_dims(dims, tree, what):
    """``dims`` (an int/None or a tree prefix of ``tree``) expanded to one per leaf."""
    if dims is None or isinstance(dims, int):
        return [dims] * len(_flatten(tree)[0])
    if isinstance(tree, (tuple, list)) and isinstance(dims, (tuple, list)):
        if len(dims) != len(tree):
            raise ValueError(f"vmap: {what} is not compatible with the structure of the "
                             f"inputs: expected {len(tree)} entries, got {len(dims)}")
        return [d for sub_d, sub_t in zip(dims, tree) for d in
                _broadcast_dims(sub_d, sub_t, what)]
    if isinstance(tree, dict) and isinstance(dims, dict):
        if set(dims) != set(tree):
            raise ValueError(f"vmap: {what} is not compatible with the structure of the "
                             "inputs: the dict keys differ")
        return [d for k in tree for d in _broadcast_dims(dims[k], tree[k], what)]
    raise ValueError(f"vmap: {what} is not compatible with the structure of the inputs "
                     f"({type(dims).__name__} against {type(tree).__name__})")


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """Map ``func`` over a dimension of its inputs: ``vmap(f)(x)[i] == f(x[i])``.

    Parameters
    ----------
    func : callable
    in_dims : int, None or pytree
        The mapped dim of each input (``None``: not mapped, passed whole); a tuple gives one
        per positional argument and may nest like the arguments.
    out_dims : int or tuple
        Where the mapped dim goes in each output.
    randomness : {"error", "different", "same"}
        ``"error"`` rejects random ops inside ``func``; ``"different"`` draws independently
        per entry; ``"same"`` draws the same numbers for every entry.
    chunk_size : int, optional
        Run the batched function on this many entries at a time (less memory, more
        calls), concatenating the results.

    Returns
    -------
    callable

    Examples
    --------
    >>> import torcia
    >>> from torcia.func import vmap
    >>> vmap(torcia.dot)(torcia.ones(3, 2), torcia.ones(3, 2))
    tensor([2., 2., 2.])
    >>> vmap(lambda x, y: x * y, in_dims=(0, None))(torcia.arange(3.0), torcia.tensor(2.0))
    tensor([0., 2., 4.])
    """
    _check_randomness(randomness)
    _check_chunk_size(chunk_size)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        if not args:
            raise ValueError(f"vmap({getattr(func, '__name__', func)})(<inputs>): got no "
                             "inputs. Maybe you forgot to add inputs, or you are trying to "
                             "vmap over a function with no inputs.")
        dims = in_dims
        if isinstance(dims, list):
            dims = tuple(dims)
        if not (dims is None or isinstance(dims, (int, tuple))):
            raise ValueError(f"vmap(...): Expected in_dims to be int or a (potentially "
                             f"nested) tuple matching the structure of inputs, got: "
                             f"{type(dims).__name__}.")
        leaves, rebuild = _flatten(args)
        per_leaf = _broadcast_dims(dims if isinstance(dims, tuple) else dims, args, "in_dims")
        size = None
        for leaf, d in zip(leaves, per_leaf):
            if d is None:
                continue
            if not isinstance(leaf, torcia.Tensor):
                raise ValueError(f"vmap: Got in_dim={d} for an input but the input is of type "
                                 f"{type(leaf).__name__}. We cannot vmap over non-Tensor "
                                 "arguments, please use None as the respective in_dim")
            if not -leaf.ndim <= d < max(leaf.ndim, 1) or leaf.ndim == 0:
                raise ValueError(f"vmap: Tried to map over dim {d} for a tensor of dim "
                                 f"{leaf.ndim}, but that is out of bounds")
            n = leaf.shape[d]
            if size is not None and n != size:
                sizes = [x.shape[e] for x, e in zip(leaves, per_leaf) if e is not None]
                raise ValueError("vmap: Expected all tensors to have the same size in the "
                                 f"mapped dimension, got sizes {sizes} for the mapped "
                                 "dimension")
            size = n
        if size is None:
            raise ValueError("vmap: at least one input must be mapped (in_dims all None)")
        per_out = out_dims if not isinstance(out_dims, list) else tuple(out_dims)
        if not _tracks_grad(leaves):
            done = _vmap_chunked(func, leaves, per_leaf, rebuild, kwargs, size, per_out,
                                 chunk_size, randomness)
            if done is not None:
                return done
        elif chunk_size is None or chunk_size >= size:
            done = _vmap_region(func, leaves, per_leaf, rebuild, kwargs, size, per_out,
                                randomness)
            if done is not None:
                return done
        return _vmap_loop(func, leaves, per_leaf, rebuild, kwargs, size, per_out,
                          randomness)

    return wrapper


def _tracks_grad(leaves) -> bool:
    """Whether autograd must see through the mapped inputs (``grad(vmap(f))``): the
    batched path records its graph on the per-sample tensors, which do not outlive the
    vmap call, so those calls take the loop."""
    return torcia.is_grad_enabled() and any(
        isinstance(x, torcia.Tensor) and x.requires_grad for x in leaves)


def _check_outputs(func, leaves):
    for leaf in leaves:
        if not isinstance(leaf, torcia.Tensor):
            raise ValueError(f"vmap: `{getattr(func, '__name__', func)}` must only return "
                             f"Tensors, got type {type(leaf).__name__}.")


def _vmap_chunked(func, leaves, per_leaf, rebuild, kwargs, size, out_dims, chunk_size,
                  randomness):
    """The batched run, ``chunk_size`` samples at a time; None when the function's
    outputs carry a graph the batched run cannot give them, or when it drew random
    numbers outside dispatch (the loop runs instead)."""
    if chunk_size is None or chunk_size >= size:
        return _vmap_batched(func, leaves, per_leaf, rebuild, kwargs, size, out_dims,
                             randomness)
    parts = []
    start_state = torcia.random.get_rng_state() if randomness == "same" else None
    for start in range(0, size, chunk_size):
        n = min(chunk_size, size - start)
        chunk = [leaf.narrow(d, start, n) if d is not None else leaf
                 for leaf, d in zip(leaves, per_leaf)]
        if start_state is not None:  # every chunk draws the same numbers
            torcia.random.set_rng_state(start_state)
        part = _vmap_batched(func, chunk, per_leaf, rebuild, kwargs, n, out_dims, randomness)
        if part is None:
            return None
        parts.append(part)
    flat = [_flatten(p)[0] for p in parts]
    _, out_rebuild = _flatten(parts[0])
    per_out = _broadcast_dims(out_dims, parts[0], "out_dims")
    return out_rebuild([
        flat[0][k] if d is None else torcia.cat([f[k] for f in flat], dim=d)
        for k, d in enumerate(per_out)])


def _vmap_batched(func, leaves, per_leaf, rebuild, kwargs, size, out_dims, randomness):
    ran = _run_at_level(func, leaves, per_leaf, rebuild, kwargs, size, randomness)
    if ran is None:
        return None
    result, level = ran
    out_leaves, out_rebuild = _flatten(result)
    _check_outputs(func, out_leaves)
    if _tracks_grad(out_leaves):
        return None
    per_out = _broadcast_dims(out_dims, result, "out_dims")
    return out_rebuild([_from_batched(t, d, level, size) for t, d in zip(out_leaves, per_out)])


def _run_at_level(func, leaves, per_leaf, rebuild, kwargs, size, randomness,
                  prepare=None):
    """``func`` once on the batched inputs at a new vmap level: ``(batched result,
    level)``, or None when it drew random numbers outside dispatch (the loop runs
    instead). ``prepare(leaf, dim, level)`` makes a mapped input's batched tensor
    (:func:`_to_batched` by default)."""
    prepare = prepare or _to_batched
    level = _vm.LEVELS.depth
    state, entered = _enter_level(size, randomness)
    gen = torcia.random.default_generator.rng.bit_generator
    logged = randomness != "error" and state.draws is None
    if logged:
        state.draws = []
    start = gen.state
    try:
        sample = rebuild([leaf if d is None else prepare(leaf, d, level)
                          for leaf, d in zip(leaves, per_leaf)])
        result = func(*sample, **kwargs)
        if randomness == "error" and gen.state != start:
            raise RuntimeError(_vm.RANDOMNESS_ERROR)
        if logged and _drew_outside_dispatch(start, gen.state, state.draws):
            gen.state = start
            warnings.warn("vmap: the function draws random numbers outside dispatch (an op "
                          "without a batching rule for randomness); it runs once per "
                          "sample.", UserWarning, stacklevel=5)
            return None
    finally:
        if logged:
            state.draws = None
        _leave_level(state, entered)
    return result, level


def _enter_level(size, randomness):
    """Open a vmap level (a new one, or a region's again for its backward, see
    :class:`_Region`): ``(state, whether the mode was entered)``."""
    state = _vm.LEVELS
    state.depth += 1
    state.randomness.append(randomness)
    state.sizes.append(size)
    entered = state.mode is None
    if entered:
        state.mode = _vm.VmapMode()
        state.mode.__enter__()
    return state, entered


def _leave_level(state, entered):
    state.depth -= 1
    state.randomness.pop()
    state.sizes.pop()
    if entered:
        state.mode.__exit__(None, None, None)
        state.mode = None


# ---------------------------------------------------------------------------------------
# grad(vmap(f)): the batched run as one node of the outer graph
# ---------------------------------------------------------------------------------------


class _Spec:
    """What a :class:`_Region` needs besides its tensors."""

    __slots__ = ("func", "leaves", "per_leaf", "rebuild", "kwargs", "size", "out_dims",
                 "randomness", "tensor_slots", "out_rebuild", "per_out", "fell_back")

    def __init__(self, func, leaves, per_leaf, rebuild, kwargs, size, out_dims, randomness):
        self.func, self.leaves, self.per_leaf, self.rebuild = func, leaves, per_leaf, rebuild
        self.kwargs, self.size, self.out_dims = kwargs, size, out_dims
        self.randomness = randomness
        self.tensor_slots = [i for i, x in enumerate(leaves) if isinstance(x, torcia.Tensor)]
        self.out_rebuild = self.per_out = None
        self.fell_back = False


class _Region(torcia.autograd.Function):
    """``vmap(f)`` where autograd tracks the mapped inputs (``grad(vmap(f))``): the
    batched run, recorded inside on batched leaves of its own, is one node of the outer
    graph, whose backward is one batched backward pass of that inner graph at the same
    vmap level (a mapped input's gradient unbatched, an unmapped one's summed over the
    samples). A backward that must build a graph (``create_graph``) or that runs inside
    another vmap recomputes the samples one by one instead, so that higher derivatives
    stay right."""

    @staticmethod
    def forward(ctx, spec, *tensors):
        leaves = list(spec.leaves)
        for slot, t in zip(spec.tensor_slots, tensors):
            leaves[slot] = t
        fresh = {}

        def prepare(leaf, d, level):
            batched = _to_batched(leaf.detach(), d, level)
            if leaf.requires_grad:
                batched.requires_grad_(True)
                fresh[id(leaf)] = batched
            return batched

        own = [leaf.detach().requires_grad_(True)
               if d is None and isinstance(leaf, torcia.Tensor) and leaf.requires_grad
               else leaf for leaf, d in zip(leaves, spec.per_leaf)]
        for leaf, mine in zip(leaves, own):
            if mine is not leaf:
                fresh[id(leaf)] = mine
        with torcia.enable_grad():
            ran = _run_at_level(spec.func, own, spec.per_leaf, spec.rebuild, spec.kwargs,
                                spec.size, spec.randomness, prepare)
        if ran is None:
            spec.fell_back = True
            return ()
        result, level = ran
        out_leaves, spec.out_rebuild = _flatten(result)
        _check_outputs(spec.func, out_leaves)
        inner = [fresh.get(id(t)) for t in tensors]
        if _reaches_other_leaves(out_leaves, {id(x) for x in inner if x is not None}):
            # a tensor the function closes over takes part: the loop records it
            spec.fell_back = True
            return ()
        spec.per_out = _broadcast_dims(spec.out_dims, result, "out_dims")
        ctx.spec, ctx.inner, ctx.outputs, ctx.level = spec, inner, out_leaves, level
        ctx.originals = tensors
        return tuple(_from_batched(t.detach(), d, level, spec.size)
                     for t, d in zip(out_leaves, spec.per_out))

    @staticmethod
    def backward(ctx, *grads):
        spec = ctx.spec
        wanted = [i for i, x in enumerate(ctx.inner) if x is not None]
        if torcia.is_grad_enabled() or _vm.LEVELS.depth:
            got = _region_by_loop(ctx, grads, wanted)
        else:
            state, entered = _enter_level(spec.size, spec.randomness)
            try:
                pairs = [(o, g if d is None else _to_batched(g, d, ctx.level))
                         for o, g, d in zip(ctx.outputs, grads, spec.per_out)
                         if g is not None and o.requires_grad]
                found = torcia.autograd.grad([o for o, _ in pairs],
                                             [ctx.inner[i] for i in wanted],
                                             [g for _, g in pairs], retain_graph=True,
                                             allow_unused=True)
            finally:
                _leave_level(state, entered)
            got = [None] * len(ctx.inner)
            for i, g in zip(wanted, found):
                if g is not None:
                    got[i] = _region_grad(g, spec.per_leaf[spec.tensor_slots[i]], ctx.level,
                                          spec.size)
        return (None,) + tuple(got)


def _region_grad(g, d, level, size):
    """A gradient from the batched backward for its outer tensor: a mapped input's
    unbatched at its dim; an unmapped one's per-sample gradients summed."""
    if d is not None:
        return _unbatched(g, d, level, size)
    if isinstance(g.__torcia_data__, _vm.BatchedArray) and g.__torcia_data__.level == level:
        return _unbatched(g, 0, level, size).sum(0)
    return g


def _region_by_loop(ctx, grads, wanted):
    """The region's input gradients from the loop over the samples (differentiable)."""
    spec = ctx.spec
    originals = list(ctx.originals)
    leaves = list(spec.leaves)
    for slot, t in zip(spec.tensor_slots, originals):
        leaves[slot] = t
    with torcia.enable_grad():
        result = _vmap_loop(spec.func, leaves, spec.per_leaf, spec.rebuild, spec.kwargs,
                            spec.size, spec.out_dims, spec.randomness)
        outs = _flatten(result)[0]
        pairs = [(o, g) for o, g in zip(outs, grads) if g is not None and o.requires_grad]
        found = torcia.autograd.grad([o for o, _ in pairs], [originals[i] for i in wanted],
                                     [g for _, g in pairs], allow_unused=True,
                                     create_graph=torcia.is_grad_enabled())
    got = [None] * len(originals)
    for i, g in zip(wanted, found):
        got[i] = g
    return got


def _reaches_other_leaves(outputs, own) -> bool:
    """Whether the graph of ``outputs`` reaches a leaf that requires grad other than the
    ``own`` ones (ids): a tensor the function closes over."""
    seen = set()
    stack = [o.grad_fn for o in outputs if o.grad_fn is not None]
    for o in outputs:
        if o.requires_grad and o.grad_fn is None and id(o) not in own:
            return True
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        variable = getattr(node, "variable", None)
        if variable is not None and id(variable) not in own:
            return True
        stack.extend(n for n, _ in node.next_functions if n is not None)
    return False


def _vmap_region(func, leaves, per_leaf, rebuild, kwargs, size, out_dims, randomness):
    """``vmap`` where autograd tracks the inputs, as one batched run (see
    :class:`_Region`); None where it takes the loop instead."""
    if _vm.LEVELS.depth or any(fwAD.is_dual(x) for x in leaves
                               if isinstance(x, torcia.Tensor)):
        # inside another vmap, or with forward-mode tangents: the loop composes
        return None
    spec = _Spec(func, leaves, per_leaf, rebuild, kwargs, size, out_dims, randomness)
    outs = _Region.apply(spec, *[leaves[i] for i in spec.tensor_slots])
    if spec.fell_back:
        return None
    outs = (outs,) if isinstance(outs, torcia.Tensor) else outs
    return spec.out_rebuild(list(outs))


def _drew_outside_dispatch(start, end, draws) -> bool:
    """Whether the default generator moved from ``start`` to ``end`` other than through
    the logged ``(before, after)`` draws of the dispatched random ops."""
    for before, after in draws:
        if before != start:
            return True
        start = after
    return start != end


def _to_batched(t, d, level):
    """A tensor whose array is ``t``'s with its dim ``d`` mapped at ``level`` (a dual
    tensor's tangent mapped alike: ``jvp(vmap(f))``)."""
    data = t.__torcia_data__
    d = d % t.ndim
    axes = (d,) + tuple(i for i in range(t.ndim) if i != d)
    out = library.wrap(_vm.BatchedArray(data.transpose(axes), level), t.device)
    return fwAD.map_tangents(t, out, lambda tangent: _to_batched(tangent, d, level))


def _from_batched(t, d, level, size):
    # a tangent's own tangents (of the outer levels) come along too
    return fwAD.map_tangents(t, _unbatched(t, d, level, size),
                             lambda tangent: _from_batched(tangent, d, level, size))


def _unbatched(t, d, level, size):
    data = t.__torcia_data__
    if isinstance(data, _vm.BatchedArray) and data.level == level:
        phys = data.value
    else:
        # not batched at this level: the same value for every sample
        phys = _vm._expand_dim(data, 0, size)
    if d is None:
        return library.wrap(phys[0] if not isinstance(phys, _vm.BatchedArray)
                                    else phys[0], t.device)
    ndim = phys.ndim
    if not -ndim <= d < ndim:
        raise ValueError(f"vmap: out_dim {d} is out of bounds for an output of dim "
                         f"{ndim - 1}")
    d %= ndim
    axes = tuple(range(1, d + 1)) + (0,) + tuple(range(d + 1, ndim))
    return library.wrap(phys.transpose(axes), t.device)


def _vmap_loop(func, leaves, per_leaf, rebuild, kwargs, size, out_dims, randomness):
    """vmap as a loop over the samples: for ``randomness`` "same"/"different" and for
    inputs autograd tracks through the call."""
    start_state = torcia.random.get_rng_state()
    results = []
    for b in range(size):
        if randomness == "same":
            torcia.random.set_rng_state(start_state)
        before = torcia.random.get_rng_state() if randomness == "error" else None
        sample = rebuild([leaf.select(d, b) if d is not None else leaf
                          for leaf, d in zip(leaves, per_leaf)])
        results.append(func(*sample, **kwargs))
        if before is not None and not torcia.equal(before, torcia.random.get_rng_state()):
            raise RuntimeError("vmap: called random operation while in randomness error "
                               "mode. Please either use the 'same' or 'different' "
                               "randomness flags on vmap or perform the randomness "
                               "operation out of vmap")
    out_leaves = [_flatten(r)[0] for r in results]
    _, out_rebuild = _flatten(results[0])
    per_out = _broadcast_dims(out_dims, results[0], "out_dims")
    stacked = []
    for k, d in enumerate(per_out):
        column = [leaves_b[k] for leaves_b in out_leaves]
        _check_outputs(func, column[:1])
        stacked.append(column[0] if d is None else torcia.stack(column, dim=d))
    return out_rebuild(stacked)


# ---------------------------------------------------------------------------------------
# modules
# ---------------------------------------------------------------------------------------


def functional_call(module: Module, parameter_and_buffer_dicts, args=None, kwargs=None, *,
                    tie_weights: bool = True, strict: bool = False):
    """:func:`torcia.nn.utils.stateless.functional_call`, under ``torcia.func``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.func import functional_call
    >>> m = torcia.nn.Linear(1, 1)
    >>> functional_call(m, {"weight": torcia.ones(1, 1), "bias": torcia.ones(1)},
    ...                 (torcia.ones(1, 1),))
    tensor([[2.]])
    """
    return _functional_call(module, parameter_and_buffer_dicts, args, kwargs,
                            tie_weights=tie_weights, strict=strict)


def stack_module_state(models):
    """Stack the parameters and buffers of same-shaped models into dicts of tensors with a
    leading model dimension (the parameters as new leaves), for ``vmap`` over an ensemble.

    Examples
    --------
    >>> import torcia
    >>> from torcia.func import stack_module_state
    >>> params, buffers = stack_module_state([torcia.nn.Linear(3, 2) for _ in range(4)])
    >>> params["weight"].shape, params["weight"].requires_grad
    (torcia.Size([4, 2, 3]), True)
    """
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or all(not m.training for m in models)):
        raise RuntimeError("stack_module_state: Expected all models to have the same "
                           "training/eval mode.")
    first = type(models[0])
    if not all(type(m) is first for m in models):
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")
    params = {name: torcia.stack([dict(m.named_parameters())[name].detach() for m in models])
              .requires_grad_(any(p.requires_grad for p in
                                  [dict(m.named_parameters())[name] for m in models]))
              for name, _ in models[0].named_parameters()}
    buffers = {name: torcia.stack([dict(m.named_buffers())[name] for m in models])
               for name, _ in models[0].named_buffers()}
    return params, buffers


def replace_all_batch_norm_modules_(root: Module) -> Module:
    """Make every batch norm in ``root`` stop tracking running statistics (in place), so
    it normalizes with the batch's own statistics under ``vmap``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.func import replace_all_batch_norm_modules_
    >>> m = replace_all_batch_norm_modules_(torcia.nn.Sequential(torcia.nn.BatchNorm1d(3)))
    >>> m[0].track_running_stats, m[0].running_mean is None
    (False, True)
    """
    from torcia.nn.modules.normalization import _BatchNorm

    for module in root.modules():
        if isinstance(module, _BatchNorm):
            module.running_mean = None
            module.running_var = None
            module.num_batches_tracked = None
            module.track_running_stats = False
    return root
