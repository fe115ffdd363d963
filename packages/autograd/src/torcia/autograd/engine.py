"""Recording ops into the graph, and running it backwards.

Core calls :func:`record` for every op where a tensor that requires grad took part and
grad mode is on. :func:`run_backward` walks the graph iteratively (no recursion, so a
10,000-op chain is fine) in dependency order: a node runs once every node that feeds its
gradient has run.
"""

from __future__ import annotations

import functools
import os
import sys
import traceback
import weakref

import numpy as np

import torcia
from torcia import ops as _oplist
from torcia.autograd import derivatives as _derivs
from torcia.autograd import forward_ad as _forward_ad
from torcia.autograd import forward_derivatives as _fwd
from torcia.autograd import graph as _graph
from torcia.autograd.graph import (
    SAVED_HOOKS,
    AccumulateGrad,
    Node,
    RemovableHandle,
    accumulator_of,
    meta_of,
)
from torcia.library import AutogradMode, Tensor, active_modes, set_grad_mode, wrap
from torcia.library import alias as make_alias

_STRIDED = torcia.strided

_NOT_DIFF = _oplist.NOT_DIFFERENTIABLE
_TABLE = _derivs.TABLE


def derivative(op: str):
    """The backward formula of ``op``, or None when the table has none."""
    entry = _TABLE.get(op)
    return None if entry is None else entry.fn


def forward_derivative(op: str):
    """The forward-mode formula of ``op`` from :mod:`torcia.autograd.forward_derivatives`
    (``jvp(tangents, *inputs, result=..., **params)``, one tangent or None per input), or
    None when ``op`` has no backward formula either."""
    entry = _TABLE.get(op)
    if entry is None or entry.fn is None:
        return None

    def jvp(tangents, *inputs, result, **params):
        return _fwd.output_tangents(op, inputs, list(tangents), params, result)

    jvp.__name__ = f"{op}_jvp"
    jvp.__qualname__ = jvp.__name__
    return jvp


def define_forward_derivative(op: str, fn) -> None:
    """Add the forward formula of an op a plugin defines (the convention of
    :func:`torcia.autograd.forward_derivatives.jvp`)."""
    _fwd.jvp(op)(fn)


class _NoDerivative:
    """The table's entry of an op a plugin defines without gradients."""

    __slots__ = ("op", "fn")

    def __init__(self, op):
        self.op = op
        self.fn = None


def define_derivative(op: str, fn, **options) -> None:
    """Add the backward formula of an op a plugin defines (the options of
    :func:`torcia.autograd.derivatives.derivative`); ``fn=None`` marks the op as having
    no gradient."""
    if fn is None:
        if op in _TABLE:
            raise ValueError(f"a derivative for {op!r} is already registered")
        _TABLE[op] = _NoDerivative(op)
        return
    _derivs.derivative(op, **options)(fn)


class _Anomaly:
    enabled = False
    check_nan = True


ANOMALY = _Anomaly()


# ---------------------------------------------------------------------------------------
# recording
# ---------------------------------------------------------------------------------------


# PyTorch's form for an input that gets no gradient: ``(None, 0)``
NO_EDGE = (None, 0)


def _edge(x):
    if x.__class__ is not Tensor and not isinstance(x, Tensor):
        return NO_EDGE
    if not x.__torcia_requires_grad__:
        return NO_EDGE
    fn = x.grad_fn
    if fn is None:
        return (accumulator_of(x), 0)
    return (fn, x.__torcia_output_nr__)


def record(op: str, inputs: tuple, params: dict, out) -> None:
    """Attach a backward node for ``op`` to its output(s) (once: forward AD records an
    op before the dispatcher does)."""
    if out.__class__ is not tuple and out.grad_fn is not None:
        return
    if out.__class__ is tuple and any(o.grad_fn is not None for o in out
                                      if isinstance(o, Tensor)):
        return
    entry = _TABLE.get(op)
    if entry is None:
        if op in _NOT_DIFF:
            return
        raise RuntimeError(
            f"the derivative for '{op}' is not implemented: add a row to "
            "torcia/autograd/derivatives/<family>.py (a plugin's op: give it a backward in "
            "torcia_register_ops), or call it under torcia.no_grad()"
        )
    if entry.fn is None:
        return
    # one pass over the inputs: edges, what the formula keeps, versions, metadata
    edges = []
    args = []
    versions = []
    metas = []
    flags = entry.saved_flags
    n_flags = len(flags)
    only_for = entry.only_for
    scalar_saved = False
    i = 0
    for x in inputs:
        if x.__class__ is Tensor or isinstance(x, Tensor):
            if x.__torcia_requires_grad__:
                fn = x.grad_fn
                if fn is not None:
                    edges.append((fn, x.__torcia_output_nr__))
                else:
                    meta = x.__torcia_autograd_meta__
                    acc = meta.accumulator() if meta is not None and meta.accumulator else None
                    edges.append((acc or accumulator_of(x), 0))
            else:
                edges.append(NO_EDGE)
            data = x.__torcia_data__
            metas.append((data.shape, data.dtype, x.__torcia_device__))
            keep = flags[i] if i < n_flags else entry.variadic_saved
            if keep and only_for is not None and i in only_for:
                other = inputs[only_for[i]]
                keep = isinstance(other, Tensor) and other.__torcia_requires_grad__
            if keep:
                args.append(x)
                versions.append((i, x.__torcia_version__[0]))
            else:
                args.append(None)
        else:
            edges.append(NO_EDGE)
            metas.append(None)
            args.append(x)
            # a number in a saved slot counts as saved, as PyTorch's wrapped scalars do
            if x is not None and (flags[i] if i < n_flags else entry.variadic_saved):
                scalar_saved = True
        i += 1
    args = tuple(args)
    versions = tuple(versions)
    multi = out.__class__ is tuple
    node = Node(op, entry, args, versions, params, tuple(edges), tuple(metas),
                len(out) if multi else 1)
    if scalar_saved:
        node.holds_saved = True
    if entry.uses_result:
        # aliases without grad_fn: saving the outputs themselves would make a reference cycle
        outs = out if multi else (out,)
        aliases = []
        kept = entry.saved_outputs
        for k, o in enumerate(outs):
            if kept is not None and k not in kept:
                aliases.append(None)
                continue
            alias = make_alias(o)
            if o.__class__ is not Tensor:
                # a dual output: formulas reading it see its tangent (forward-over-reverse)
                _forward_ad.share_tangent(o, alias)
            aliases.append(alias)
            versions += ((len(args) + k, o.__torcia_version__[0]),)
        node.args = args + tuple(aliases)
        node.versions = versions
        node.holds_saved = True
    if SAVED_HOOKS and node.versions:
        _graph.pack_node(node)
    if ANOMALY.enabled:
        node.trace = "".join(traceback.format_stack()[:-3])
    if multi:
        mask = entry.differentiable_outputs
        for i, o in enumerate(out):
            if (mask is None or mask[i]) and (
                o.__torcia_data__.dtype.kind in "fc" or o.dtype is torcia.bfloat16
            ):
                o.__torcia_requires_grad__ = True
                o.grad_fn = node
                o.__torcia_output_nr__ = i
    elif out.__torcia_data__.dtype.kind in "fc" or out.dtype is torcia.bfloat16:
        out.__torcia_requires_grad__ = True
        out.grad_fn = node


def record_custom(node, outputs) -> None:
    """Attach a node built elsewhere (custom Functions, device transfers) to outputs."""
    for i, o in enumerate(outputs):
        if o is not None and (o.__torcia_data__.dtype.kind in "fc" or o.dtype is torcia.bfloat16):
            o.__torcia_requires_grad__ = True
            o.grad_fn = node
            o.__torcia_output_nr__ = i


def record_transfer(src: Tensor, out: Tensor) -> None:
    """A copy to another device: the gradient goes back to the source's device."""
    record("to_device", (src,), {"device": src.__torcia_device__}, out)


def check_inplace(t: Tensor) -> None:
    """Raise PyTorch's errors for in-place writes that would corrupt gradients."""
    if t.__torcia_requires_grad__ and t.grad_fn is None:
        raise RuntimeError(
            "a leaf Variable that requires grad is being used in an in-place operation."
        )
    base = t.__torcia_base__
    if base is not None and base.__torcia_requires_grad__ and base.grad_fn is None:
        raise RuntimeError(
            "a view of a leaf Variable that requires grad is being used in an in-place "
            "operation."
        )


def rebase_inplace(t: Tensor, out: Tensor) -> None:
    """Make ``t`` (about to be overwritten with ``out``'s values) carry ``out``'s history.

    Nodes that saved ``t`` itself would see it change: they get a snapshot of the old
    value instead. A view's base gets a CopySlices node, so gradients through the base
    see the write too.
    """
    node = out.grad_fn
    if isinstance(node, Node) and node.packed and node.args is not None:
        _graph.snapshot_packed(node, t)
    if isinstance(node, Node) and node.args is not None and any(a is t for a in node.args):
        snapshot = wrap(t.__torcia_data__.copy(), t.__torcia_device__)
        snapshot.__torcia_requires_grad__ = t.__torcia_requires_grad__
        snapshot.grad_fn = t.grad_fn
        snapshot.__torcia_output_nr__ = t.__torcia_output_nr__
        node.args = tuple(snapshot if a is t else a for a in node.args)
        node.versions = tuple((i, 0 if node.args[i] is snapshot else v) for i, v in node.versions)
    base = t.__torcia_base__
    before = [(x, x.grad_fn, x.__torcia_output_nr__) for x in (t, base)
              if x is not None and x.__torcia_retains_grad__]
    if base is not None and (base.__torcia_requires_grad__ or out.__torcia_requires_grad__):
        _copy_slices(base, t, out)
    else:
        t.grad_fn = out.grad_fn
        t.__torcia_output_nr__ = out.__torcia_output_nr__
        t.__torcia_requires_grad__ = True
    for x, old_fn, old_nr in before:
        _follow_retained(x, old_fn, old_nr)


def _follow_retained(t: Tensor, old_fn, old_nr: int) -> None:
    """``retain_grad`` keeps the gradient of the tensor's current value, so after an
    in-place write its hook moves to the new node (other hooks stay with the old value,
    as in PyTorch)."""
    keep = t.__torcia_autograd_meta__.retain_hook
    hooks = old_fn.pre_hooks.get(old_nr) if old_fn.pre_hooks else None
    if hooks and keep in hooks:
        hooks.remove(keep)
    _add_pre_hook(t, keep)


def _copy_slices(base: Tensor, view: Tensor, out: Tensor) -> None:
    """Give ``base`` a CopySlices node (the write lands in the region ``view`` covers) and
    ``view`` a node that reads that region back out of the base's new history."""
    flat = _view_index(base, view)
    xp = base.__torcia_device__.backend.xp
    index = wrap(xp.asarray(flat), base.__torcia_device__)
    base_meta = (base.__torcia_data__.shape, base.__torcia_data__.dtype, base.__torcia_device__)
    out_meta = (out.__torcia_data__.shape, out.__torcia_data__.dtype, out.__torcia_device__)
    node = Node("copy_slices", _TABLE["copy_slices"], (None, None), (), {"index": index},
                (_edge(base), _edge(out)), (base_meta, out_meta), 1)
    base.__torcia_requires_grad__ = True
    base.grad_fn = node
    base.__torcia_output_nr__ = 0
    key = tuple(xp.asarray(k) for k in np.unravel_index(flat, base.__torcia_data__.shape))
    view_node = Node("getitem", _TABLE["getitem"], (None,), (), {"key": key},
                     ((node, 0),), (base_meta,), 1)
    view.grad_fn = view_node
    view.__torcia_output_nr__ = 0
    view.__torcia_requires_grad__ = True


def _view_index(base: Tensor, view: Tensor) -> np.ndarray:
    """For each element of ``view``, its flat (row-major) index in ``base``, found from
    memory offsets, so any layout of either works."""
    b, v = base.__torcia_data__, view.__torcia_data__
    if hasattr(b, "__array_interface__"):
        start, here = b.__array_interface__["data"][0], v.__array_interface__["data"][0]
    else:
        start, here = b.data.ptr, v.data.ptr
    base_off = _byte_offsets(b.shape, b.strides).reshape(-1)
    view_off = _byte_offsets(v.shape, v.strides) + (here - start)
    order = np.argsort(base_off, kind="stable")
    pos = np.searchsorted(base_off[order], view_off).clip(0, max(base_off.size - 1, 0))
    found = order[pos]
    if base_off.size == 0 or not np.array_equal(base_off[found], view_off):
        raise RuntimeError("in-place write through a view whose elements are not all in "
                           "its base; call .clone() on the view first")
    return found


def _byte_offsets(shape, strides) -> np.ndarray:
    off = np.zeros(shape, dtype=np.int64)
    for d, (n, st) in enumerate(zip(shape, strides)):
        axis = [1] * len(shape)
        axis[d] = n
        off = off + (np.arange(n, dtype=np.int64) * st).reshape(axis)
    return off


def register_hook(t: Tensor, hook):
    """A hook on the gradient of ``t``; returns a handle with ``remove()``."""
    if not t.__torcia_requires_grad__:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    return RemovableHandle(_add_pre_hook(t, hook), hook=hook)


def register_post_accumulate_grad_hook(t: Tensor, hook):
    """``hook(t)`` after each accumulation into the leaf ``t``'s ``.grad``."""
    if t.grad_fn is not None:
        raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf "
                           "tensors")
    if not t.__torcia_requires_grad__:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    hooks = meta_of(t).post_accumulate_hooks
    hooks.append(hook)
    return RemovableHandle(hooks, hook=hook)


def _add_pre_hook(t: Tensor, hook) -> list:
    """Append ``hook`` where ``t``'s gradient passes: its leaf hooks, or the pre-hooks of its
    node for its output number; returns that list."""
    node = t.grad_fn
    if node is None:
        hooks = meta_of(t).hooks
    else:
        if node.pre_hooks is None:
            node.pre_hooks = {}
        hooks = node.pre_hooks.setdefault(t.__torcia_output_nr__, [])
    hooks.append(hook)
    return hooks


def retain_grad(t: Tensor) -> None:
    """Keep ``t.grad`` after backward for a non-leaf (a no-op for leaves)."""
    if t.grad_fn is None:
        if not t.__torcia_requires_grad__:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        return
    if t.__torcia_retains_grad__:
        return
    ref = weakref.ref(t)

    def keep(grad):
        target = ref()
        if target is not None:
            g = grad.detach()
            target.grad = g.clone() if target.grad is None else target.grad + g
        return None

    _add_pre_hook(t, keep)
    meta_of(t).retain_hook = keep
    t.__torcia_retains_grad__ = True


# ---------------------------------------------------------------------------------------
# running backward
# ---------------------------------------------------------------------------------------


def _call_hooks(hooks, grad):
    for hook in list(hooks):
        r = hook(grad)
        if r is not None:
            grad = r
    return grad


def _run_pre_hooks(pre_hooks, grads):
    """Tensor hooks (keyed by output number) first, then the node's own (key -1), which see
    and may replace all output gradients at once, as in PyTorch."""
    for nr, hooks in pre_hooks.items():
        if nr >= 0 and grads[nr] is not None:
            grads[nr] = _call_hooks(hooks, grads[nr])
    for hook in list(pre_hooks.get(-1, ())):
        r = hook(tuple(grads))
        if r is not None:
            grads = list(r)
    return grads


def _check_nan(node, grads):
    for i, g in enumerate(grads):
        if g is not None and g.__torcia_data__.dtype.kind in "fc" and bool(np.isnan(
                g.__torcia_data__ if isinstance(g.__torcia_data__, np.ndarray)
                else g.cpu().__torcia_data__).any()):
            where = f"\nThe forward op was called at:\n{node.trace}" if node.trace else ""
            raise RuntimeError(f"Function '{node.name()}' returned nan values in its {i}th "
                               f"output.{where}")


def run_backward(roots, root_grads, retain_graph, create_graph, capture=None,
                 accumulate=True, targets=None):
    """Propagate ``root_grads`` from ``roots`` (pairs of node and output number).

    ``capture`` maps (node, output_nr) of wanted tensors to slots in the returned list
    (``autograd.grad``); ``accumulate`` says whether leaves' ``.grad`` is written;
    ``targets`` restricts accumulation to these AccumulateGrad nodes (``inputs=``).
    """
    if _NATIVE is not None and not ANOMALY.enabled and not active_modes():
        try:
            results = _NATIVE.run(roots, root_grads, retain_graph, create_graph, capture,
                                  accumulate, targets)
        except BaseException:
            _CALLBACKS.clear()
            raise
        while _CALLBACKS:
            _CALLBACKS.pop(0)()
        return results
    # count, for each node, how many edges feed it; a node is pushed when first reached
    deps: dict = {}
    # one entry per node: two roots on one node (outputs of one op) must count edges once
    starts = [roots[0][0]] if len(roots) == 1 else list(dict.fromkeys(n for n, _ in roots))
    root_set = set(starts)
    stack = starts.copy()
    pruning = capture is not None or targets is not None
    parents: dict = {}
    while stack:
        node = stack.pop()
        for nxt, _ in node.next_functions:
            if nxt is None:
                continue
            count = deps.get(nxt)
            if count is None:
                deps[nxt] = 1
                if nxt not in root_set:
                    stack.append(nxt)
            else:
                deps[nxt] = count + 1
            if pruning:
                parents.setdefault(nxt, []).append(node)

    needed = _needed(parents, capture, targets) if pruning else None

    buffers: dict = {}
    for (node, nr), g in zip(roots, root_grads):
        buf = buffers.get(node)
        if buf is None:
            buf = buffers[node] = [None] * node.n_outputs
        buf[nr] = g if buf[nr] is None else buf[nr] + g
    results = [None] * (len(capture) if capture else 0)
    ready = [n for n in starts if n not in deps]
    anomaly = ANOMALY.enabled
    modes = active_modes()  # e.g. the profiler, timing each node
    grad_mode_before = set_grad_mode(create_graph)
    # NOTE: locals, not globals or attributes, in the loop that runs once per node
    node_class, accumulate_class = Node, AccumulateGrad
    direct = accumulate and not capture and targets is None
    pop_ready, push_ready, pop_buffer, get_buffer = ready.pop, ready.append, buffers.pop, \
        buffers.get
    try:
        while ready:
            node = pop_ready()
            grads = pop_buffer(node, None)
            if grads is None:
                grads = [None] * node.n_outputs
            if node.pre_hooks:
                grads = _run_pre_hooks(node.pre_hooks, grads)
            if capture:
                for nr in range(node.n_outputs):
                    slot = capture.get((node, nr))
                    if slot is not None:
                        results[slot] = grads[nr]
            if node.__class__ is accumulate_class:
                if accumulate and grads[0] is not None and (targets is None or node in targets):
                    # the buffer list is the only reference this loop keeps
                    _accumulate(node, grads[0], create_graph, 1)
                continue
            edges = node.next_functions
            # a built-in formula's results are referenced only by grad_inputs and g below
            # (a mode or a post hook may keep the tuple, which hides their references)
            owned = 2 if node.__class__ is node_class and not modes else None
            # NOTE: not grads.count(None): that compares tensors with == (Tensor.__eq__)
            for g in grads:
                if g is not None:
                    break
            else:
                g = None
            if g is None or (needed is not None and node not in needed):
                grad_inputs = (None,) * len(edges)
            else:
                try:
                    if modes:
                        grad_inputs = _apply_in_modes(modes, node, grads, create_graph)
                    elif node.__class__ is node_class:
                        grad_inputs = node.entry.backward(node, grads, create_graph)
                    else:
                        grad_inputs = node.apply(grads, create_graph)
                except Exception as exc:
                    if anomaly and node.trace:
                        exc.add_note(f"The forward call of {node.name()} was:\n{node.trace}")
                    raise
                if anomaly:
                    _check_nan(node, grad_inputs)
                if node.post_hooks:
                    owned = None
                    for hook in list(node.post_hooks):
                        r = hook(grad_inputs, tuple(grads))
                        if r is not None:
                            grad_inputs = tuple(r)
                if not retain_graph:
                    node.release()
            # NOTE: not zip(edges, grad_inputs): zip's reused result tuple would hold a
            # reference to the last gradient, which _stealable must not count on
            for i, (nxt, nr) in enumerate(edges):
                if nxt is None:
                    continue
                g = grad_inputs[i]
                if nxt.__class__ is accumulate_class and direct and deps[nxt] == 1 \
                        and nxt not in buffers and _no_leaf_hooks(nxt):
                    # the last edge into a leaf, and the others brought nothing: the
                    # gradient is complete, accumulate it now rather than through the
                    # buffers and the ready stack (no hook can tell the difference)
                    deps[nxt] = 0
                    if g is not None:
                        _accumulate(nxt, g, create_graph, owned)
                    continue
                if g is not None:
                    buf = get_buffer(nxt)
                    if buf is None:
                        buf = buffers[nxt] = [None] * nxt.n_outputs
                        buf[nr] = g
                    else:
                        old = buf[nr]
                        if old is None:
                            buf[nr] = g
                        elif create_graph or not _add_in_place(old, g):
                            buf[nr] = old + g
                left = deps[nxt] - 1
                deps[nxt] = left
                if not left:
                    push_ready(nxt)
    except BaseException:
        _CALLBACKS.clear()
        raise
    finally:
        set_grad_mode(grad_mode_before)
    while _CALLBACKS:
        _CALLBACKS.pop(0)()
    return results


_CALLBACKS: list = []


try:
    from torcia.autograd import _native
except ImportError:  # built only where setuptools found a C compiler
    _native = None


def _native_engine():
    """torcia.autograd._native (the loop of :func:`run_backward` and :func:`record` in C, for
    their common cases), or None where it was not built or
    ``TORCIA_PURE_PYTHON`` (set, not "0") asks for the Python engine."""
    if _native is None or os.environ.get("TORCIA_PURE_PYTHON", "0") != "0":
        return None
    _native.setup(Node, AccumulateGrad, _accumulate, _run_pre_hooks, _add_in_place, _needed,
                  set_grad_mode, _derivs.Entry, _graph.Meta, Tensor, _derivs._fit)
    _native.setup_record(_TABLE, record, accumulator_of, NO_EDGE, SAVED_HOOKS, ANOMALY,
                         make_alias, torcia.bfloat16, _STRIDED)
    return _native


def _apply_in_modes(modes, node, grads, create_graph):
    def run():
        return node.apply(grads, create_graph)

    for mode in reversed(modes):
        run = functools.partial(mode.around_backward, node, run)
    return run()


def queue_callback(fn) -> None:
    """Run ``fn()`` once the backward pass under way has finished (DDP waits for its
    gradient reductions there)."""
    _CALLBACKS.append(fn)


def _needed(parents, capture, targets):
    """Nodes from which a captured or targeted node can be reached: walk the edges
    backwards from the wanted nodes."""
    wanted = []
    if capture:
        wanted.extend(node for node, _ in capture)
    if targets:
        wanted.extend(targets)
    needed = set(wanted)
    stack = list(needed)
    while stack:
        for parent in parents.get(stack.pop(), ()):
            if parent not in needed:
                needed.add(parent)
                stack.append(parent)
    return needed


def _no_leaf_hooks(acc: AccumulateGrad) -> bool:
    meta = acc.variable.__torcia_autograd_meta__
    return acc.pre_hooks is None and acc.post_hooks is None and (
        meta is None or not (meta.hooks or meta.post_accumulate_hooks))


def _stealable(grad: Tensor, leaf: Tensor, owned) -> bool:
    """Whether ``grad``'s buffer can become ``leaf.grad`` without a copy: as PyTorch's
    AccumulateGrad, only a temporary that nobody else references (``owned``: how many
    references the backward loop holds), whose array owns its memory and is seen by no
    view or other tensor, C-contiguous, writable, of the leaf's dtype and shape."""
    # getrefcount's argument and the parameters of this and _accumulate come on top
    if owned is None or sys.getrefcount(grad) != owned + 3 or grad.__class__ is not Tensor:
        return False
    data = grad.__torcia_data__
    # the attribute, the local and getrefcount's argument: any other is a view or a tensor
    if sys.getrefcount(data) != 3 or data.__class__ is not np.ndarray \
            or grad.__class__ is not Tensor:
        return False
    flags = data.flags  # holds a reference to data: read after the count
    return (flags.owndata and flags.c_contiguous and flags.writeable
            and not grad.__torcia_requires_grad__ and grad.__torcia_autograd_meta__ is None
            and grad.__torcia_base__ is None and data.dtype == leaf.__torcia_data__.dtype
            and data.shape == leaf.__torcia_data__.shape)


def _add_in_place(old: Tensor, grad: Tensor) -> bool:
    """Add ``grad`` into ``old``, a gradient waiting in a node's input buffer, where nobody
    else can see ``old`` (as :func:`_stealable`: only the buffer references it, its array
    owns its memory and no view or other tensor shares it) and the sum has its shape and
    dtype; False, and nothing done, otherwise. Saves the sum a new array (the gradients
    meeting at a residual connection, at each use of a weight)."""
    # the buffer's slot, the caller's local, this parameter and getrefcount's argument
    if old.__class__ is not Tensor or grad.__class__ is not Tensor or \
            sys.getrefcount(old) != 4:
        return False
    data, other = old.__torcia_data__, grad.__torcia_data__
    if data.__class__ is not np.ndarray or other.__class__ is not np.ndarray \
            or sys.getrefcount(data) != 3:
        return False
    flags = data.flags  # holds a reference to data: read after the count
    if not (flags.owndata and flags.writeable and flags.c_contiguous) \
            or old.__torcia_requires_grad__ or old.__torcia_autograd_meta__ is not None \
            or old.__torcia_base__ is not None \
            or data.dtype != other.dtype or data.shape != other.shape \
            or grad.__class__ is not Tensor:
        return False
    np.add(data, other, out=data)
    old.__torcia_version__[0] += 1
    return True


def _accumulate(acc: AccumulateGrad, grad: Tensor, create_graph: bool, owned=None) -> None:
    """Add ``grad`` into ``acc``'s leaf's ``.grad``; ``owned`` is how many references to
    ``grad`` the caller holds (None: unknown, never steal its buffer)."""
    leaf = acc.variable
    meta = leaf.__torcia_autograd_meta__
    hooked = meta is not None and meta.hooks
    if hooked:
        grad = _call_hooks(meta.hooks, grad)
    old = leaf.__torcia_grad__
    if grad.layout is not _STRIDED:
        # a sparse gradient (embedding's with sparse=True) is kept sparse, as PyTorch's;
        # added to a dense one it makes a dense one
        grad = grad if create_graph else grad.detach()
        leaf.__torcia_grad__ = grad if old is None else old + grad
    elif create_graph:
        leaf.grad = grad if old is None else old + grad
    elif old is None:
        if not hooked and _stealable(grad, leaf, owned):
            # nobody else sees this temporary: its buffer becomes .grad (PyTorch does so)
            fresh = wrap(grad.__torcia_data__, grad.__torcia_device__)
        else:
            # a fresh copy: one gradient tensor may flow to several leaves
            fresh = wrap(grad.__torcia_data__.copy(), grad.__torcia_device__)
        if hooked:
            leaf.grad = fresh  # what a hook returned gets the checks of the .grad setter
        else:
            leaf.__torcia_grad__ = fresh  # the formula's gradient has the leaf's shape and dtype
    elif old.__torcia_requires_grad__:
        leaf.grad = old + grad.detach()
    else:
        old.__torcia_data__ += grad.__torcia_data__
        old.__torcia_version__[0] += 1
    if meta is not None and meta.post_accumulate_hooks:
        for hook in list(meta.post_accumulate_hooks):
            hook(leaf)
    if acc.post_hooks:
        for hook in acc.post_hooks:
            hook(leaf)


#: the native record and backward loop, or None for the Python engine (the reference the
#: tests compare them with)
_NATIVE = _native_engine()


def _root(t: Tensor):
    if not t.__torcia_requires_grad__:
        raise RuntimeError("element 0 of tensors does not require grad and does not have a "
                           "grad_fn")
    if t.grad_fn is None:
        return (accumulator_of(t), 0)
    return (t.grad_fn, t.__torcia_output_nr__)


def _root_grads(outputs, grad_outputs):
    grads = []
    for i, (t, g) in enumerate(zip(outputs, grad_outputs)):
        if g is None:
            if t.__torcia_data__.size != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            data = t.__torcia_data__
            if data.dtype.kind == "c":
                raise RuntimeError("grad can be implicitly created only for real scalar outputs")
            if data.__class__ is np.ndarray:
                seed = np.array(1, data.dtype)  # np.ones costs 4x
                if data.ndim:
                    seed = seed.reshape(data.shape)
            else:
                seed = t.__torcia_device__.backend.xp.ones(data.shape, data.dtype)
            g = wrap(seed, t.__torcia_device__)
        elif not isinstance(g, Tensor):
            g = wrap(np.asarray(g, dtype=t.__torcia_data__.dtype), t.__torcia_device__)
        elif tuple(g.shape) != tuple(t.shape):
            raise RuntimeError(
                f"Mismatch in shape: grad_output[{i}] has a shape of {g.shape} and output[{i}] "
                f"has a shape of {t.shape}."
            )
        grads.append(g)
    return grads


def _as_tuple(x):
    if isinstance(x, Tensor):
        return (x,)
    return tuple(x)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate gradients of ``tensors`` into the ``.grad`` of graph leaves.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([1.0, 2.0], requires_grad=True)
    >>> (x * x).sum().backward(); x.grad
    tensor([2., 4.])
    """
    if tensors.__class__ is Tensor and grad_tensors is None and inputs is None:
        # loss.backward(), once per training step
        run_backward([_root(tensors)], _root_grads((tensors,), (None,)),
                     create_graph if retain_graph is None else retain_graph, create_graph)
        return
    tensors = _as_tuple(tensors)
    if grad_tensors is None:
        grad_tensors = (None,) * len(tensors)
    else:
        grad_tensors = _as_tuple(grad_tensors) if not isinstance(grad_tensors, (list, tuple)) \
            else tuple(grad_tensors)
    if retain_graph is None:
        retain_graph = create_graph
    roots = [_root(t) for t in tensors]
    grads = _root_grads(tensors, grad_tensors)
    targets = None
    capture = None
    if inputs is not None:
        inputs = _as_tuple(inputs)
        if not inputs:
            raise RuntimeError("'inputs' argument to backward() cannot be empty.")
        targets = set()
        capture = {}
        non_leaf = []
        for t in inputs:
            if not t.__torcia_requires_grad__:
                raise RuntimeError("One of the differentiated Tensors does not require grad")
            if t.grad_fn is None:
                targets.add(accumulator_of(t))
            else:
                capture[(t.grad_fn, t.__torcia_output_nr__)] = len(non_leaf)
                non_leaf.append(t)
        results = run_backward(roots, grads, retain_graph, create_graph, capture or None,
                               True, targets)
        for t, g in zip(non_leaf, results):
            if g is not None:
                g = g if create_graph else g.detach()
                t.grad = g if t.grad is None else t.grad + g
        return
    run_backward(roots, grads, retain_graph, create_graph)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         only_inputs=True, allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """Gradients of ``outputs`` with respect to ``inputs``, returned (not accumulated).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor(3.0, requires_grad=True)
    >>> (dx,) = torcia.autograd.grad(x ** 3, x, create_graph=True)
    >>> dx, torcia.autograd.grad(dx, x)[0]
    (tensor(27., grad_fn=<MulBackward0>), tensor(18.))
    """
    if is_grads_batched:
        return _grad_batched(outputs, inputs, grad_outputs, retain_graph, create_graph,
                             allow_unused, materialize_grads)
    outputs = _as_tuple(outputs)
    inputs = _as_tuple(inputs)
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    else:
        grad_outputs = _as_tuple(grad_outputs)
        if len(grad_outputs) != len(outputs):
            raise RuntimeError(f"grad requires one grad_output per output: got "
                               f"{len(grad_outputs)} grad_outputs and {len(outputs)} outputs")
    if retain_graph is None:
        retain_graph = create_graph
    if allow_unused is None:
        allow_unused = materialize_grads
    capture = {}
    keys = []
    for t in inputs:
        if not isinstance(t, Tensor) or not t.__torcia_requires_grad__:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
        key = (accumulator_of(t), 0) if t.grad_fn is None else (t.grad_fn, t.__torcia_output_nr__)
        keys.append(key)
        capture.setdefault(key, len(capture))
    roots = [_root(t) for t in outputs]
    grads = _root_grads(outputs, grad_outputs)
    got = run_backward(roots, grads, retain_graph, create_graph, capture, accumulate=False)
    result = []
    for t, key in zip(inputs, keys):
        g = got[capture[key]]
        if g is None:
            if materialize_grads:
                g = torcia.zeros_like(t)
            elif not allow_unused:
                raise RuntimeError(
                    "One of the differentiated Tensors appears to not have been used in the "
                    "graph. Set allow_unused=True if this is the desired behavior."
                )
        elif not create_graph:
            g = _forward_ad.detach_keeping_tangent(g)
        result.append(g)
    return tuple(result)


def _grad_batched(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused,
                  materialize_grads):
    """``grad`` for each slice along the first dim of every grad_output, stacked: one
    vector-Jacobian product per row (a loop where PyTorch vectorizes)."""
    from torcia import stack, zeros_like

    if grad_outputs is None:
        raise RuntimeError("grad_outputs must be given when is_grads_batched=True")
    seeds = _as_tuple(grad_outputs)
    n = seeds[0].shape[0] if seeds[0].ndim else 0
    if not n or any(s.ndim == 0 or s.shape[0] != n for s in seeds):
        raise RuntimeError("with is_grads_batched=True every grad_output needs the same "
                           "leading batch dim")
    keep = create_graph if retain_graph is None else retain_graph
    # every pass but the last keeps the graph for the next one
    rows = [grad(outputs, inputs, tuple(s[b] for s in seeds), retain_graph=keep or b < n - 1,
                 create_graph=create_graph, allow_unused=True)
            for b in range(n)]
    result = []
    for i, x in enumerate(_as_tuple(inputs)):
        column = [row[i] for row in rows]
        if any(g is None for g in column):
            if not (allow_unused or materialize_grads):
                raise RuntimeError(
                    "One of the differentiated Tensors appears to not have been used in the "
                    "graph. Set allow_unused=True if this is the desired behavior.")
            if not materialize_grads:
                result.append(None)
                continue
            column = [zeros_like(x) if g is None else g for g in column]
        result.append(stack(column))
    return tuple(result)



# ---------------------------------------------------------------------------------------
# the mode core dispatches to
# ---------------------------------------------------------------------------------------


class Engine(AutogradMode):
    """torcia-autograd's recording mode: what the ``torcia_autograd_engine`` hook gives core,
    which registers it with :func:`torcia.library.register_autograd_mode`.

    The engine's functions are instance attributes, so that the dispatcher's
    ``record`` lookup on every recorded op is one dictionary read.
    """

    def __init__(self):
        # record: the native one where torcia.autograd._native was built
        self.record = record if _NATIVE is None else _NATIVE.record
        for fn in (record_transfer, check_inplace, rebase_inplace, backward, grad,
                   derivative, define_derivative, forward_derivative,
                   define_forward_derivative, register_hook,
                   register_post_accumulate_grad_hook, retain_grad):
            setattr(self, fn.__name__, fn)
        # core's torcia.is_anomaly_enabled / set_anomaly_enabled read and set it here
        self.ANOMALY = ANOMALY

    def __repr__(self):
        return "<torcia.autograd engine>"


ENGINE = Engine()
