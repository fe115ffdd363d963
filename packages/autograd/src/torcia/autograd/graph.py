"""Graph nodes: what recording an op leaves behind.

A :class:`Node` is the backward of one forward op. It holds the op's derivative formula
(from :mod:`torcia.autograd.derivatives`), what the formula needs (saved tensors with their
versions, metadata of the others, the op's parameters) and ``next_functions``: for each
input, the node its gradient flows to and which of that node's outputs it belongs to.
"""

from __future__ import annotations

import weakref

import torcia
from torcia.library import RemovableHandle, Size, Tensor, bump_version, dtype_from_numpy
from torcia.library import alias as make_alias

_FREED = (
    "Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed). Saved intermediate values of the graph are freed "
    "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
    "backward through the graph a second time or if you need to access saved tensors after "
    "calling backward."
)


class Meta(tuple):
    """Shape, dtype and device of an input whose value the formula does not need.

    The graph keeps the plain tuple ``(array shape, array dtype, device)``; a formula sees
    it through this class, whose attributes are computed only when read (most formulas
    never look).
    """

    __slots__ = ()

    @property
    def shape(self):
        return Size(self[0])

    @property
    def dtype(self):
        return dtype_from_numpy(self[1])

    @property
    def device(self):
        return self[2]

    @property
    def ndim(self) -> int:
        return len(self[0])

    def numel(self) -> int:
        return Size(self[0]).numel()

    def size(self, dim=None):
        return self.shape if dim is None else self[0][dim]

    def dim(self) -> int:
        return len(self[0])


class Node:
    """The backward of one recorded op. ``name()`` is PyTorch-style (``MulBackward0``)."""

    __slots__ = (
        "op", "entry", "args", "versions", "params", "next_functions", "metas",
        "n_outputs", "pre_hooks", "post_hooks", "released", "trace", "holds_saved",
        "packed", "__weakref__",
    )

    def __init__(self, op, entry, args, versions, params, next_functions, metas, n_outputs):
        self.op = op
        self.entry = entry
        self.args = args
        self.versions = versions
        self.params = params
        self.next_functions = next_functions
        self.metas = metas
        self.n_outputs = n_outputs
        self.pre_hooks = None
        self.post_hooks = None
        self.released = False
        self.trace = None
        # whether backward frees something; PyTorch lets a node that saved nothing run again
        self.holds_saved = bool(versions)
        # whether saved_tensors_hooks packed the saved tensors
        self.packed = False

    def name(self) -> str:
        return node_name(self.op, self.params, self.metas)

    def __repr__(self):
        # the class name, as PyTorch's repr: "CopySlices" where name() has its C++ namespace
        return f"<{self.name().rpartition('::')[2]} object at {id(self):#x}>"

    def register_hook(self, fn):
        """``fn(grad_inputs, grad_outputs)`` after this node runs."""
        return _add_posthook(self, fn)

    def register_prehook(self, fn):
        """``fn(grad_outputs)`` before this node runs; may return replacement grads."""
        return _add_prehook(self, fn)

    def release(self):
        """Free what backward needed; a node that saved no tensor can run again, as in
        PyTorch."""
        if self.holds_saved:
            self.args = None
            self.released = True

    def unpack(self, create_graph: bool):
        """The formula's arguments, checking that no saved tensor changed since."""
        if self.released:
            raise RuntimeError(_FREED)
        args = self.args
        if self.packed:
            # saved_tensors_hooks packed them all; register_hooks on a raw saved tensor,
            # some
            args = list(args)
            for i, v in self.versions:
                a = args[i]
                if a.__class__ is Packed:
                    args[i] = a.unpack(v, self.name())
                elif a.__torcia_version__[0] != v:
                    raise RuntimeError(_modified_message(a, v, self.name()))
            return tuple(args)
        for i, v in self.versions:
            t = args[i]
            if t.__torcia_version__[0] != v:
                raise RuntimeError(_modified_message(t, v, self.name()))
        return args

    @property
    def saved_tensors(self):
        args = self.unpack(False)
        return tuple(args[i] for i, _ in self.versions)

    def apply(self, grads, create_graph: bool):
        return self.entry.backward(self, grads, create_graph)

    def __getattr__(self, name):
        # only names that are not slots reach here: PyTorch's saved values of the node
        if name.startswith("_saved_"):
            found = _saved_attributes(self).get(name[7:])
            if found is not None:
                return _saved_value(self, *found)
        elif name.startswith("_raw_saved_"):
            found = _saved_attributes(self).get(name[11:])
            if found is not None and found[0] in ("input", "result"):
                return SavedTensor(self, *found)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __dir__(self):
        saved = _saved_attributes(self)
        return sorted({*super().__dir__(), *("_saved_" + n for n in saved),
                       *("_raw_saved_" + n for n, (kind, _) in saved.items()
                         if kind in ("input", "result"))})


def _saved_attributes(node) -> dict:
    attributes = getattr(node.entry, "saved_attributes", None)
    return attributes(node) if attributes is not None else {}


def _slot(node, kind, key) -> int:
    """The index in ``node.args`` of a saved input or output."""
    return key if kind == "input" else len(node.next_functions) + key


def _saved_value(node, kind, key):
    """``grad_fn._saved_<name>``: what the node saved, as PyTorch shows it."""
    if kind == "param":
        name, default = key
        value = node.params.get(name, default)
        return tuple(value) if isinstance(value, list) else value
    if kind == "sizes":
        meta = node.metas[key]
        return None if meta is None else tuple(meta[0])
    if kind == "inputs":
        return [_unpacked(node, i) for i in range(key, len(node.next_functions))]
    value = _unpacked(node, _slot(node, kind if kind != "strides" else "input", key))
    if kind == "strides":
        return tuple(value.stride()) if isinstance(value, Tensor) else None
    if kind == "result":
        from torcia.autograd.derivatives import _reattach

        # the output again, as PyTorch gives it: equal to it, with this node as grad_fn
        return None if value is None else _reattach(value, node, key)
    return value if value is None or isinstance(value, Tensor) else _wrapped(value)


def _unpacked(node, slot):
    """What the node saved in ``node.args[slot]``, checked as backward checks it."""
    if node.released:
        raise RuntimeError(_FREED)
    value = node.args[slot]
    version = dict(node.versions).get(slot)
    if value.__class__ is Packed:
        return value.unpack(version, node.name())
    if version is not None and value.__torcia_version__[0] != version:
        raise RuntimeError(_modified_message(value, version, node.name()))
    return value


def _wrapped(number) -> Tensor:
    """A number where PyTorch's op takes a tensor, as PyTorch saves it: a 0-dim tensor
    of the number's widest dtype (its "wrapped number")."""
    dtype = (torcia.bool if isinstance(number, bool) else torcia.int64
             if isinstance(number, int) else torcia.complex128 if isinstance(number, complex)
             else torcia.float64)
    return torcia.tensor(number, dtype=dtype)


class SavedTensor:
    """A tensor a node saved, as ``grad_fn._raw_saved_<name>`` gives it: with
    :meth:`register_hooks`, its own pack and unpack hooks.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([1.0, 2.0], requires_grad=True)
    >>> y = x.sin()
    >>> y.grad_fn._raw_saved_self.register_hooks(lambda t: t * 10, lambda t: t / 10)
    >>> y.grad_fn._saved_self
    tensor([1., 2.], requires_grad=True)
    """

    __slots__ = ("node", "slot")

    def __init__(self, node, kind, key):
        self.node = node
        self.slot = _slot(node, kind, key)

    def register_hooks(self, pack_hook, unpack_hook) -> None:
        """Pack the saved tensor now with ``pack_hook(tensor) -> object``; backward (and
        ``_saved_<name>``) gets it back through ``unpack_hook(object) -> Tensor``."""
        if not callable(pack_hook) or not callable(unpack_hook):
            raise TypeError("register_hooks(): expected two callables (pack_hook, "
                            "unpack_hook)")
        node = self.node
        if node.released:
            raise RuntimeError("Calling register_hooks on a saved tensor after it has been "
                               "freed. " + _FREED[_FREED.index("Saved intermediate"):])
        value = node.args[self.slot]
        if value.__class__ is Packed:
            raise RuntimeError("Calling register_hooks on a saved tensor whose hooks have "
                               "already been set. Hint: only one pair of hooks is allowed "
                               "at a time.")
        if value is None:
            raise RuntimeError("Calling register_hooks on a saved tensor with value None is "
                               "forbidden")
        if not isinstance(value, Tensor):
            # a number: from now on the tensor PyTorch would have saved, which formulas
            # take as they take the number (a 0-dim operand does not promote)
            value = _wrapped(value)
            node.versions += ((self.slot, value.__torcia_version__[0]),)
        version = dict(node.versions)[self.slot]
        if value.__torcia_version__[0] != version:
            raise RuntimeError(_modified_message(value, version, node.name()))
        args = list(node.args)
        args[self.slot] = Packed(value, pack_hook, unpack_hook)
        node.args = tuple(args)
        node.packed = True


# PyTorch's node names where they are not the op's name in CamelCase + "Backward0"
_NAMES = {
    "max_dim": "MaxBackward0", "min_dim": "MinBackward0", "median_dim": "MedianBackward1",
    "mode_dim": "ModeBackward0", "cast": "ToCopyBackward0", "to_device": "ToCopyBackward0",
    "copy_slices": "torch::autograd::CopySlices", "contiguous": "CloneBackward0",
    "reshape": "ViewBackward0",
    "narrow": "SliceBackward0", "take_along_dim": "GatherBackward0", "tile": "RepeatBackward0",
    "square": "PowBackward0", "norm": "LinalgVectorNormBackward0", "detach_view":
    "AliasBackward0", "linalg_inv": "LinalgInvExBackward0", "linalg_solve":
    "LinalgSolveExBackward0", "linalg_cholesky": "LinalgCholeskyExBackward0",
}
_SECOND_FORM = ("sum", "mean", "prod", "squeeze")  # "...Backward1" when given a dim
# "...Backward1" when the input at this position is a tensor (PyTorch's Tensor overload;
# its Scalar one is "...Backward0")
_TENSOR_FORM = {"fmod": 1, "remainder": 1, "lerp": 2}


def node_name(op: str, params: dict, metas) -> str:
    """The name PyTorch gives the backward node of ``op`` (``MulBackward0``...).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([1.0], requires_grad=True)
    >>> (x * 2).grad_fn.name()
    'MulBackward0'
    >>> from torcia.autograd.graph import node_name
    >>> node_name("mul", {}, ())
    'MulBackward0'
    """
    if op in _NAMES:
        return _NAMES[op]
    if op in _SECOND_FORM and params.get("dim") is not None:
        return "".join(p.capitalize() for p in op.split("_")) + "Backward1"
    if op == "getitem":
        return _getitem_name(params["key"])
    if op == "index_put" and "key" in params and metas and metas[0] is not None:
        return _setitem_name(params["key"], metas[0][0], metas[1] if len(metas) > 1 else None)
    if op == "pow" and metas and metas[1] is not None:
        return "PowBackward1"
    if op == "clamp" and len(metas) == 3 and metas[1] is None and metas[2] is None:
        return "ClampBackward1"  # bounds that are numbers (or None): clamp.Scalar's node
    if op in _TENSOR_FORM and len(metas) > _TENSOR_FORM[op] and metas[_TENSOR_FORM[op]]:
        return "".join(p.capitalize() for p in op.split("_")) + "Backward1"
    if op == "addmm" and len(metas) > 1 and metas[1] is not None and len(metas[1][0]) == 3:
        return "BaddbmmBackward0"  # baddbmm records addmm over batches
    if op == "matmul" and metas and metas[0] is not None and metas[1] is not None:
        ranks = (len(metas[0][0]), len(metas[1][0]))
        return {(2, 2): "MmBackward0", (2, 1): "MvBackward0", (1, 1): "DotBackward0"}.get(
            ranks, "MatmulBackward0")
    return "".join(p.capitalize() for p in op.split("_")) + "Backward0"


def _setitem_name(key, shape, value) -> str:
    """PyTorch's node for ``base[key] = value``: the key's basic entries make a view first,
    and an in-place op on a view gives the base a CopySlices node; a slice that starts at
    0, steps by 1 and reaches the dim's end makes none (start -3 on a dim of 3 does). On
    the base itself: index_put_ for array entries, fill_ for a number or a 0-d value,
    else copy_."""
    arrays = [k for k in key if hasattr(k, "ndim")]
    consumed = sum(1 if k.dtype != bool else k.ndim for k in arrays) + sum(
        1 for k in key if isinstance(k, (int, slice)) and not isinstance(k, bool))
    dim, view = 0, False
    for k in key:
        if k is Ellipsis:
            dim += len(shape) - consumed
        elif hasattr(k, "ndim"):
            dim += 1 if k.dtype != bool else k.ndim
        elif k is None or isinstance(k, bool):
            view = True
        elif isinstance(k, slice):
            start, stop, step = k.start or 0, k.stop, k.step or 1
            full = start == 0 and step == 1 and (stop is None or stop >= shape[dim])
            view, dim = view or not full, dim + 1
        else:
            view, dim = True, dim + 1
    if view:
        return "torch::autograd::CopySlices"
    if arrays:
        return "IndexPutBackward0"
    return "FillBackward3" if value is None or len(value[0]) == 0 else \
        "torch::autograd::CopyBackwards"


def _getitem_name(key) -> str:
    """Index (any array in the key), else the last selecting entry: Select or Slice."""
    if any(k is not None and k is not Ellipsis and not isinstance(k, (int, slice))
           for k in key):
        return "IndexBackward0"
    for k in reversed(key):
        if isinstance(k, int):
            return "SelectBackward0"
        if isinstance(k, slice) and k != slice(None):
            return "SliceBackward0"
        if k is None:
            return "UnsqueezeBackward0"
    return "AliasBackward0"


def _modified_message(t, expected, node_name):
    return (
        "one of the variables needed for gradient computation has been modified by an "
        f"inplace operation: [torcia.{t.dtype.name} {list(t.shape)}], which is an input or "
        f"output of {node_name}, is at version {t._version}; expected version {expected} "
        "instead. Hint: enable anomaly detection to find the operation that failed to compute "
        "its gradient, with torcia.autograd.set_detect_anomaly(True)."
    )


class AccumulateGrad:
    """The sink of a leaf: adds incoming gradients into ``leaf.grad``."""

    __slots__ = ("variable", "next_functions", "pre_hooks", "post_hooks", "__weakref__")
    n_outputs = 1

    def __init__(self, variable: Tensor):
        self.variable = variable
        self.next_functions = ()
        self.pre_hooks = None
        self.post_hooks = None

    def name(self) -> str:
        return "torch::autograd::AccumulateGrad"  # PyTorch's, the C++ class's full name

    def __repr__(self):
        return f"<AccumulateGrad object at {id(self):#x}>"

    def register_hook(self, fn):
        """``fn(variable)`` after the gradient has been accumulated into ``variable.grad``."""
        return _add_posthook(self, fn)

    def register_prehook(self, fn):
        """``fn(grad_outputs)`` before accumulation; may return replacement grads."""
        return _add_prehook(self, fn)


def _add_posthook(node, fn):
    """A hook run after ``node`` (a Node or an AccumulateGrad)."""
    if node.post_hooks is None:
        node.post_hooks = []
    node.post_hooks.append(fn)
    return RemovableHandle(node.post_hooks, hook=fn)


def _add_prehook(node, fn):
    """A node hook on all output gradients at once, kept under key -1 of ``pre_hooks``
    (tensor hooks are under their output number)."""
    if node.pre_hooks is None:
        node.pre_hooks = {}
    hooks = node.pre_hooks.setdefault(-1, [])
    hooks.append(fn)
    return RemovableHandle(hooks, hook=fn)


class TensorMeta:
    """Autograd state a tensor carries only once it needs it (in its one autograd-meta slot,
    ``t.__torcia_autograd_meta__``)."""

    __slots__ = ("hooks", "accumulator", "retain_hook", "post_accumulate_hooks")

    def __init__(self):
        self.hooks = []
        self.accumulator = None
        self.retain_hook = None
        self.post_accumulate_hooks = []


def meta_of(t: Tensor) -> TensorMeta:
    m = t.__torcia_autograd_meta__
    if m is None:
        m = t.__torcia_autograd_meta__ = TensorMeta()
    return m


def accumulator_of(t: Tensor) -> AccumulateGrad:
    """The one AccumulateGrad of a leaf (weakly cached so leaf hooks fire once per pass)."""
    m = meta_of(t)
    acc = m.accumulator() if m.accumulator is not None else None
    if acc is None:
        acc = AccumulateGrad(t)
        m.accumulator = weakref.ref(acc)
    return acc


# ---------------------------------------------------------------------------------------
# saved-tensor hooks
# ---------------------------------------------------------------------------------------

# the active (pack_hook, unpack_hook) pairs, innermost last; only the innermost applies
SAVED_HOOKS: list = []


class Packed:
    """A saved tensor as the pack hook left it, with what is needed to make the unpacked
    tensor carry the original's history again (so double backward still reaches it)."""

    __slots__ = ("value", "unpack_hook", "vc", "requires_grad", "grad_fn", "out_nr",
                 "leaf_meta", "dtype", "shape")

    def __init__(self, t: Tensor, pack_hook, unpack_hook, check_version: bool = True):
        self.unpack_hook = unpack_hook
        # the version counter (a one-item list), not the data: in-place changes stay caught
        self.vc = t.__torcia_version__ if check_version else None
        self.dtype = t.dtype
        self.shape = t.shape
        self.requires_grad = t.__torcia_requires_grad__
        self.grad_fn = t.grad_fn
        self.out_nr = t.__torcia_output_nr__
        self.leaf_meta = meta_of(t) if t.__torcia_requires_grad__ and t.grad_fn is None else None
        self.value = pack_hook(t)

    @property
    def _version(self) -> int:  # as a tensor's, for the message of a modified value
        return self.vc[0]

    def unpack(self, version: int, node_name: str) -> Tensor:
        if self.vc is not None and self.vc[0] != version:
            raise RuntimeError(_modified_message(self, version, node_name))
        t = self.unpack_hook(self.value)
        if not isinstance(t, Tensor):
            raise TypeError("Output of saved tensor unpack_hook expected to be a Tensor but "
                            f"got result of type {type(t).__name__}")
        if not self.requires_grad:
            return t
        if (t.__torcia_requires_grad__ and t.grad_fn is self.grad_fn
                and (self.grad_fn is not None or t.__torcia_autograd_meta__ is self.leaf_meta)):
            return t
        out = make_alias(t)
        out.__torcia_requires_grad__ = True
        out.grad_fn = self.grad_fn
        out.__torcia_output_nr__ = self.out_nr
        if self.grad_fn is None:
            # a saved leaf: gradients reach the original leaf's accumulator
            out.__torcia_autograd_meta__ = self.leaf_meta
        return out


def snapshot_packed(node: Node, t: Tensor) -> None:
    """``t`` is about to be written in place by the op ``node`` records: a packed tensor
    that is another tensor object over ``t``'s memory (a detached alias, as checkpointing
    keeps) gets its own copy of the old values first. One that is ``t`` itself is left to
    the version check, as in PyTorch."""
    import numpy as np

    for i, _ in node.versions:
        packed = node.args[i]
        value = getattr(packed, "value", None)
        if isinstance(value, Tensor) and value is not t and np.shares_memory(value.__torcia_data__,
                                                                              t.__torcia_data__):
            value.__torcia_data__ = value.__torcia_data__.copy()
            if packed.vc is not None:
                value.__torcia_version__ = [packed.vc[0]]
                packed.vc = value.__torcia_version__


def pack_node(node: Node) -> None:
    """Run the innermost pack hook over everything ``node`` saved."""
    pack_hook, unpack_hook, check_version = SAVED_HOOKS[-1]
    args = list(node.args)
    for i, _ in node.versions:
        args[i] = Packed(args[i], pack_hook, unpack_hook, check_version)
    node.args = tuple(args)
    node.packed = True


class saved_tensors_hooks:
    """Context manager: every tensor an op saves for backward inside the block goes through
    ``pack_hook``, and what it returns comes back through ``unpack_hook`` when backward needs
    the tensor.

    Parameters
    ----------
    pack_hook : callable
        ``pack_hook(tensor) -> object``; must not modify its input in place.
    unpack_hook : callable
        ``unpack_hook(object) -> Tensor`` with the value of the packed tensor.

    Examples
    --------
    >>> import torcia
    >>> seen = []
    >>> def pack(t):
    ...     seen.append(tuple(t.shape))
    ...     return t
    >>> x = torcia.ones(3, requires_grad=True)
    >>> with torcia.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
    ...     y = (x * x).sum()
    >>> y.backward()
    >>> seen
    [(3,), (3,)]
    >>> x.grad
    tensor([2., 2., 2.])
    """

    def __init__(self, pack_hook, unpack_hook):
        if not callable(pack_hook) or not callable(unpack_hook):
            raise TypeError("saved_tensors_hooks expects two callables (pack_hook, unpack_hook)")
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    # checkpointing recomputes what it saved, so an in-place change after saving is harmless
    _check_version = True

    def __enter__(self):
        SAVED_HOOKS.append((self.pack_hook, self.unpack_hook, self._check_version))
        return self

    def __exit__(self, *exc):
        SAVED_HOOKS.pop()
        return False


class save_on_cpu(saved_tensors_hooks):
    """Saved tensors live in host memory until backward, which copies them back to the
    device they came from.

    Parameters
    ----------
    pin_memory : bool
        Ask for page-locked host memory where the device supports it (ignored on CPU).
    device_type : str
        The device type whose tensors are moved (PyTorch's default, ``"cuda"``); tensors
        of other devices are kept as they are.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.ones(2, requires_grad=True)
    >>> with torcia.autograd.graph.save_on_cpu():
    ...     y = (x.exp() * x).sum()
    >>> y.backward()
    >>> x.grad
    tensor([5.4366, 5.4366])
    """

    def __init__(self, pin_memory: bool = False, device_type: str = "cuda"):
        def pack(t):
            if t.device.type != device_type:
                return (None, t)
            host = t.detach().to("cpu")
            if pin_memory and torcia.cuda.is_available():
                host = host.pin_memory()
            return (t.device, host)

        def unpack(packed):
            device, t = packed
            return t if device is None else t.to(device)

        super().__init__(pack, unpack)


# ---------------------------------------------------------------------------------------
# the rest of torch.autograd.graph's names
# ---------------------------------------------------------------------------------------


class _HookSwitch:
    """The message with which saved-tensor hooks are refused (None: allowed)."""

    disabled_message = None


_SWITCH = _HookSwitch()
_saved_hooks_enter = saved_tensors_hooks.__enter__


def _checked_enter(self):
    if _SWITCH.disabled_message is not None:
        raise RuntimeError(_SWITCH.disabled_message)
    return _saved_hooks_enter(self)


saved_tensors_hooks.__enter__ = _checked_enter


class disable_saved_tensors_hooks:
    """Inside the block, entering :class:`saved_tensors_hooks` raises ``RuntimeError``
    with ``error_message`` (a feature that cannot work with them says why).

    Examples
    --------
    >>> import torcia
    >>> from torcia.autograd.graph import disable_saved_tensors_hooks, saved_tensors_hooks
    >>> with disable_saved_tensors_hooks("not with this feature"):
    ...     try:
    ...         saved_tensors_hooks(lambda t: t, lambda t: t).__enter__()
    ...     except RuntimeError as error:
    ...         print(error)
    not with this feature
    """

    def __init__(self, error_message: str):
        self.error_message = error_message

    def __enter__(self):
        self._saved = _SWITCH.disabled_message
        _SWITCH.disabled_message = self.error_message
        return self

    def __exit__(self, *exc):
        _SWITCH.disabled_message = self._saved
        return False


class allow_mutation_on_saved_tensors(saved_tensors_hooks):
    """Inside the block, a tensor saved for backward may be modified in place afterwards:
    backward uses the values it had when it was saved (each saved tensor is copied when
    saved; PyTorch copies on the first mutation, with the same results).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([1.0, 2.0], requires_grad=True)
    >>> with torcia.autograd.graph.allow_mutation_on_saved_tensors():
    ...     y = x.clone()
    ...     z = (y * y).sum()
    ...     with torcia.no_grad():
    ...         _ = y.mul_(10)
    ...     z.backward()
    >>> x.grad
    tensor([2., 4.])
    """

    _check_version = False

    def __init__(self):
        super().__init__(lambda t: t.detach().clone(), lambda t: t)


class GradientEdge(tuple):
    """Where a tensor's gradient flows in the graph: ``(node, output_nr)``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.autograd.graph import get_gradient_edge
    >>> x = torcia.ones(2, requires_grad=True)
    >>> edge = get_gradient_edge(x * 2)
    >>> edge.node.name(), edge.output_nr
    ('MulBackward0', 0)
    """

    def __new__(cls, node, output_nr: int, ownership_token=None):
        return super().__new__(cls, (node, output_nr))

    @property
    def node(self):
        return self[0]

    @property
    def output_nr(self) -> int:
        return self[1]


def get_gradient_edge(tensor: Tensor) -> GradientEdge:
    """The edge ``tensor``'s gradient flows along: its ``grad_fn`` (the accumulator of a
    leaf) and which of that node's outputs it is."""
    if not tensor.requires_grad:
        raise RuntimeError("It is not possible to get the gradient edge for a Tensor that "
                           "does not require gradients")
    if tensor.grad_fn is None:
        return GradientEdge(accumulator_of(tensor), 0)
    return GradientEdge(tensor.grad_fn, tensor.__torcia_output_nr__)


def increment_version(tensor) -> None:
    """Count an in-place change that autograd did not see (a write through ``.data`` or a
    raw array): saved copies of ``tensor`` then fail their version check.

    Examples
    --------
    >>> import torcia
    >>> from torcia.autograd.graph import increment_version
    >>> t = torcia.ones(2)
    >>> before = t._version
    >>> increment_version(t)
    >>> t._version - before
    1
    """
    for t in ([tensor] if isinstance(tensor, Tensor) else tensor):
        bump_version(t)


def register_multi_grad_hook(tensors, fn, *, mode: str = "all"):
    """Call ``fn`` once per backward pass for a group of tensors: with ``mode="all"``,
    ``fn(grads)`` after the pass has computed the gradients it computes among them (None
    for the others); with ``mode="any"``, ``fn(grad)`` with the first one computed.

    Examples
    --------
    >>> import torcia
    >>> from torcia.autograd.graph import register_multi_grad_hook
    >>> a = torcia.ones(2, requires_grad=True)
    >>> b = torcia.ones(2, requires_grad=True)
    >>> seen = []
    >>> handle = register_multi_grad_hook((a, b), lambda grads: seen.append(
    ...     [None if g is None else g.tolist() for g in grads]))
    >>> (a * 3).sum().backward()
    >>> seen
    [[[3.0, 3.0], None]]
    >>> handle.remove()
    """
    from torcia.autograd.engine import queue_callback, register_hook

    if mode not in ("all", "any"):
        raise ValueError(f"Expects mode to be one of ('all', 'any') but got {mode}")
    tensors = tuple(tensors)
    state = {"grads": [None] * len(tensors), "pending": False, "fired": False}

    def finish():
        grads = state["grads"]
        state.update(grads=[None] * len(tensors), pending=False, fired=False)
        if mode == "all":
            fn(grads)

    def make_hook(i):
        def hook(grad):
            if not state["pending"]:
                state["pending"] = True
                queue_callback(finish)
            if mode == "all":
                state["grads"][i] = grad
            elif not state["fired"]:
                state["fired"] = True
                fn(grad)
            return None
        return hook

    handles = [register_hook(t, make_hook(i)) for i, t in enumerate(tensors)
               if t.requires_grad]
    return _MultiHandle(handles)


class _MultiHandle(RemovableHandle):
    """Removes every hook of :func:`register_multi_grad_hook`."""

    def __init__(self, handles):
        super().__init__({})
        self._handles = handles

    def remove(self) -> None:
        for h in self._handles:
            h.remove()


class _Setting:
    budget = None
    warn_stream_mismatch = True
    override_stale_capture_stream = False


_SETTINGS = _Setting()


class region_activation_memory_budget:
    """PyTorch's budget of saved activations for the region (a fraction in [0, 1]) that
    ``torch.compile``'s partitioner reads; torcia's compiler keeps every activation, and
    the value is kept here for code that sets it.

    Examples
    --------
    >>> from torcia.autograd.graph import region_activation_memory_budget
    >>> with region_activation_memory_budget(0.5):
    ...     pass
    """

    def __init__(self, budget: float):
        if not 0.0 <= budget <= 1.0:
            raise ValueError(f"activation memory budget must be in [0, 1], got {budget}")
        self.budget = budget

    def __enter__(self):
        self._saved, _SETTINGS.budget = _SETTINGS.budget, self.budget
        return self

    def __exit__(self, *exc):
        _SETTINGS.budget = self._saved
        return False


def set_warn_on_accumulate_grad_stream_mismatch(enabled: bool) -> None:
    """PyTorch's switch of the warning when a CUDA gradient is accumulated on another
    stream than its tensor's; torcia's CUDA device synchronises its streams at each op,
    so the mismatch cannot arise; the setting is kept."""
    _SETTINGS.warn_stream_mismatch = bool(enabled)


def set_override_stale_capture_stream(enabled: bool) -> None:
    """PyTorch's switch for CUDA-graph capture streams left stale by autograd; kept for
    code that sets it (torcia's CUDA graphs capture on the current stream)."""
    _SETTINGS.override_stale_capture_stream = bool(enabled)
