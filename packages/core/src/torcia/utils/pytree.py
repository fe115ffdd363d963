"""Pytrees: nested containers whose leaves a function maps over, as ``torch.utils._pytree``.

A pytree is a leaf or a *node*: a container of a registered type (tuple, list, dict,
namedtuple, ``OrderedDict``, ``defaultdict``, ``deque``, :class:`torcia.Size`, and what
:func:`register_pytree_node` adds) whose children are pytrees. :func:`tree_flatten` turns a
pytree into its leaves and a :class:`TreeSpec` that :func:`tree_unflatten` rebuilds it
from; :func:`tree_map` applies a function to every leaf. ``None`` is a leaf, as in PyTorch.

Under the compat runner this module also answers for PyTorch's private
``torch.utils._pytree``, which libraries import to register their output classes.

Examples
--------
>>> from torcia.utils import pytree
>>> leaves, spec = pytree.tree_flatten({"a": [1, 2], "b": (3,)})
>>> leaves
[1, 2, 3]
>>> pytree.tree_unflatten([x * 10 for x in leaves], spec)
{'a': [10, 20], 'b': (30,)}
>>> pytree.tree_map(lambda x: x + 1, [1, (2, 3)])
[2, (3, 4)]
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict, defaultdict, deque, namedtuple
from collections.abc import Callable
from typing import Any, NamedTuple

from torcia._ops._common import RETURN_TYPES
from torcia._tensor import Size

__all__ = [
    "Context", "FlattenFunc", "GetAttrKey", "KeyEntry", "KeyPath", "LeafSpec", "MappingKey",
    "PyTree", "SUPPORTED_NODES", "SequenceKey", "TreeSpec", "UnflattenFunc", "is_namedtuple",
    "is_namedtuple_class", "is_namedtuple_instance", "key_get", "keystr", "register_dataclass",
    "register_pytree_node", "tree_all", "tree_all_only", "tree_any", "tree_any_only",
    "tree_flatten", "tree_flatten_with_path", "tree_is_leaf", "tree_iter", "tree_leaves",
    "tree_leaves_with_path", "tree_map", "tree_map_", "tree_map_only", "tree_map_only_",
    "tree_map_with_path", "tree_structure", "tree_unflatten", "treespec_leaf",
]

PyTree = Any
Context = Any
FlattenFunc = Callable[[PyTree], "tuple[list, Context]"]
UnflattenFunc = Callable[[list, Context], PyTree]


class NodeDef(NamedTuple):
    """How one registered type is taken apart and put together again."""

    type: type
    flatten_fn: Callable
    unflatten_fn: Callable
    flatten_with_keys_fn: Callable | None


#: The registered node types (PyTorch's ``SUPPORTED_NODES``); namedtuples are recognised by
#: shape and stored under the ``namedtuple`` factory, as PyTorch does.
SUPPORTED_NODES: dict = {}
_LOCK = threading.Lock()


def register_pytree_node(cls, flatten_fn, unflatten_fn, *, serialized_type_name=None,
                         to_dumpable_context=None, from_dumpable_context=None,
                         flatten_with_keys_fn=None) -> None:
    """Make ``cls`` a pytree node.

    Parameters
    ----------
    cls : type object
        The container class.
    flatten_fn : callable
        ``flatten_fn(obj) -> (children, context)``; ``context`` is what unflattening needs
        beyond the children (keys, field names), and compares with ``==``.
    unflatten_fn : callable
        ``unflatten_fn(children, context) -> obj``.
    serialized_type_name, to_dumpable_context, from_dumpable_context
        Accepted for PyTorch's signature (spec serialisation is not provided).
    flatten_with_keys_fn : callable, optional
        ``obj -> ([(key, child), ...], context)``, for the ``*_with_path`` functions.

    Examples
    --------
    >>> from torcia.utils import pytree
    >>> class Pair:
    ...     def __init__(self, a, b):
    ...         self.a, self.b = a, b
    >>> pytree.register_pytree_node(Pair, lambda p: ([p.a, p.b], None),
    ...                             lambda children, _: Pair(*children))
    >>> pytree.tree_leaves([Pair(1, 2), 3])
    [1, 2, 3]
    """
    with _LOCK:
        if cls in SUPPORTED_NODES:
            raise ValueError(f"{cls} is already registered as pytree node.")
        SUPPORTED_NODES[cls] = NodeDef(cls, flatten_fn, unflatten_fn, flatten_with_keys_fn)


def _register_pytree_node(cls, flatten_fn, unflatten_fn, to_str_fn=None, maybe_from_str_fn=None,
                          *, serialized_type_name=None, to_dumpable_context=None,
                          from_dumpable_context=None, flatten_with_keys_fn=None) -> None:
    # PyTorch's older, private spelling, which libraries still call
    register_pytree_node(cls, flatten_fn, unflatten_fn, flatten_with_keys_fn=flatten_with_keys_fn)


def register_dataclass(cls, *, field_names=None, drop_field_names=None, **kwargs) -> None:
    """Make the dataclass ``cls`` a pytree node whose children are its fields (those of
    ``field_names`` when given, less ``drop_field_names``).

    Examples
    --------
    >>> import dataclasses
    >>> from torcia.utils import pytree
    >>> @dataclasses.dataclass
    ... class Point:
    ...     x: int
    ...     y: int
    >>> pytree.register_dataclass(Point)
    >>> pytree.tree_map(lambda v: v * 2, Point(1, 2))
    Point(x=2, y=4)
    """
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"register_dataclass expects a dataclass, got {cls!r}")
    names = list(field_names) if field_names is not None else [
        f.name for f in dataclasses.fields(cls) if f.init]
    dropped = set(drop_field_names or ())
    names = [n for n in names if n not in dropped]

    def flatten(obj):
        return [getattr(obj, n) for n in names], names

    def unflatten(values, context):
        return cls(**dict(zip(context, values)))

    def flatten_with_keys(obj):
        return [(GetAttrKey(n), getattr(obj, n)) for n in names], names

    register_pytree_node(cls, flatten, unflatten, flatten_with_keys_fn=flatten_with_keys)


# ---------------------------------------------------------------------------------------
# keys: where a leaf sits in a tree
# ---------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SequenceKey:
    """The position of a child in a sequence: prints as ``[idx]``."""

    idx: int

    def __str__(self):
        return f"[{self.idx!r}]"

    def get(self, sequence):
        return sequence[self.idx]


@dataclasses.dataclass(frozen=True)
class MappingKey:
    """The key of a child in a mapping: prints as ``[key]``."""

    key: Any

    def __str__(self):
        return f"[{self.key!r}]"

    def get(self, mapping):
        return mapping[self.key]


@dataclasses.dataclass(frozen=True)
class GetAttrKey:
    """The attribute holding a child (namedtuple fields, dataclass fields): ``.name``."""

    name: str

    def __str__(self):
        return f".{self.name}"

    def get(self, obj):
        return getattr(obj, self.name)


KeyEntry = Any
KeyPath = tuple


def keystr(kp) -> str:
    """A key path as the Python accessor it stands for.

    Examples
    --------
    >>> from torcia.utils.pytree import GetAttrKey, MappingKey, SequenceKey, keystr
    >>> keystr((GetAttrKey("w"), SequenceKey(1), MappingKey("k")))
    ".w[1]['k']"
    """
    return "".join(str(k) for k in kp)


def key_get(obj, kp):
    """The child of ``obj`` at key path ``kp``.

    Examples
    --------
    >>> from torcia.utils.pytree import MappingKey, SequenceKey, key_get
    >>> key_get({"a": [5, 6]}, (MappingKey("a"), SequenceKey(1)))
    6
    """
    for k in kp:
        obj = k.get(obj)
    return obj


# ---------------------------------------------------------------------------------------
# the built-in nodes
# ---------------------------------------------------------------------------------------


def is_namedtuple_class(cls) -> bool:
    """Whether ``cls`` is a namedtuple type (a tuple subclass with ``_fields``)."""
    return (isinstance(cls, type) and issubclass(cls, tuple)
            and isinstance(getattr(cls, "_fields", None), tuple)
            and callable(getattr(cls, "_make", None)))


def is_namedtuple_instance(obj) -> bool:
    """Whether ``obj`` is an instance of a namedtuple type."""
    return is_namedtuple_class(type(obj))


def is_namedtuple(obj) -> bool:
    """Whether ``obj`` is a namedtuple type or instance."""
    return is_namedtuple_class(obj if isinstance(obj, type) else type(obj))


# The built-in nodes' functions under PyTorch's private names, which libraries pass to
# register_pytree_node for their own dict and sequence types.


def _seq_keys(children):
    return [(SequenceKey(i), c) for i, c in enumerate(children)]


def _tuple_flatten(t):
    return list(t), None


def _tuple_unflatten(values, context):
    return tuple(values)


def _tuple_flatten_with_keys(t):
    return _seq_keys(t), None


def _list_flatten(t):
    return list(t), None


def _list_unflatten(values, context):
    return list(values)


_list_flatten_with_keys = _tuple_flatten_with_keys


def _dict_flatten(d):
    return list(d.values()), list(d.keys())


def _dict_unflatten(values, context):
    return dict(zip(context, values))


def _dict_flatten_with_keys(d):
    return [(MappingKey(k), v) for k, v in d.items()], list(d.keys())


def _ordereddict_unflatten(values, context):
    return OrderedDict(zip(context, values))


def _defaultdict_flatten(d):
    return list(d.values()), [d.default_factory, list(d.keys())]


def _defaultdict_unflatten(values, context):
    return defaultdict(context[0], zip(context[1], values))


def _defaultdict_flatten_with_keys(d):
    return [(MappingKey(k), v) for k, v in d.items()], [d.default_factory, list(d.keys())]


def _namedtuple_flatten(t):
    return list(t), type(t)


def _namedtuple_unflatten(values, context):
    return context(*values)


def _namedtuple_flatten_with_keys(t):
    return [(GetAttrKey(f), v) for f, v in zip(t._fields, t)], type(t)


def _deque_flatten(d):
    return list(d), d.maxlen


def _deque_unflatten(values, context):
    return deque(values, maxlen=context)


def _deque_flatten_with_keys(d):
    return _seq_keys(d), d.maxlen


def _builtin_nodes():
    nodes = [
        (tuple, _tuple_flatten, _tuple_unflatten, _tuple_flatten_with_keys),
        (list, _list_flatten, _list_unflatten, _list_flatten_with_keys),
        (dict, _dict_flatten, _dict_unflatten, _dict_flatten_with_keys),
        (namedtuple, _namedtuple_flatten, _namedtuple_unflatten,
         _namedtuple_flatten_with_keys),
        (OrderedDict, _dict_flatten, _ordereddict_unflatten, _dict_flatten_with_keys),
        (defaultdict, _defaultdict_flatten, _defaultdict_unflatten,
         _defaultdict_flatten_with_keys),
        (deque, _deque_flatten, _deque_unflatten, _deque_flatten_with_keys),
        (Size, _tuple_flatten, lambda values, _: Size(values), _tuple_flatten_with_keys),
    ]
    for cls, flatten, unflatten, with_keys in nodes:
        SUPPORTED_NODES[cls] = NodeDef(cls, flatten, unflatten, with_keys)


_builtin_nodes()


def _return_type_nodes():
    # the named results of multi-output ops (torch.return_types) are nodes, as
    # torch/return_types.py registers them: their values are the children
    for cls in RETURN_TYPES:
        SUPPORTED_NODES[cls] = NodeDef(cls, _tuple_flatten,
                                       lambda values, _, cls=cls: cls(*values),
                                       _tuple_flatten_with_keys)


_return_type_nodes()


def _node_type(tree):
    if is_namedtuple_instance(tree):
        return namedtuple
    return type(tree)


def tree_is_leaf(tree, is_leaf=None) -> bool:
    """Whether ``tree`` is a leaf: not of a registered node type, or ``is_leaf`` says so.

    Examples
    --------
    >>> from torcia.utils import pytree
    >>> pytree.tree_is_leaf(1), pytree.tree_is_leaf([1]), pytree.tree_is_leaf(None)
    (True, False, True)
    """
    if is_leaf is not None and is_leaf(tree):
        return True
    return _node_type(tree) not in SUPPORTED_NODES


# ---------------------------------------------------------------------------------------
# TreeSpec
# ---------------------------------------------------------------------------------------


class TreeSpec:
    """The structure of a pytree: a node's type and context and its children's specs; a
    leaf's spec is a :class:`LeafSpec`. Specs compare with ``==``.

    Examples
    --------
    >>> from torcia.utils import pytree
    >>> spec = pytree.tree_structure([1, {"a": 2}])
    >>> spec.num_leaves, spec.num_nodes, spec.type
    (2, 4, <class 'list'>)
    >>> spec.unflatten(["x", "y"])
    ['x', {'a': 'y'}]
    """

    def __init__(self, type, context, children_specs):
        self.type = type
        self.context = context
        self._children = list(children_specs)
        self.num_nodes = 1 + sum(c.num_nodes for c in self._children)
        self.num_leaves = sum(c.num_leaves for c in self._children)
        self.num_children = len(self._children)

    @property
    def children_specs(self) -> list:
        return self._children

    def children(self) -> list:
        """The children's specs."""
        return list(self._children)

    def child(self, index: int) -> TreeSpec:
        """The spec of child ``index``."""
        return self._children[index]

    def is_leaf(self) -> bool:
        return False

    def __eq__(self, other):
        if not isinstance(other, TreeSpec):
            return NotImplemented
        return (self.is_leaf() == other.is_leaf() and self.type == other.type
                and self.context == other.context and self._children == other._children)

    def __hash__(self):
        return hash((self.type, self.num_nodes, self.num_leaves))

    def __repr__(self, indent: int = 0):
        if self.type is namedtuple:
            head = f"TreeSpec({self.type.__name__}, {self.context}, ["
        else:
            head = f"TreeSpec({self.type.__name__}, {self.context!r}, ["
        pad = " " * (indent + 2)
        parts = [c.__repr__(indent + 2) for c in self._children]
        return head + f",\n{pad}".join(parts) + "])"

    def unflatten(self, leaves) -> PyTree:
        """The pytree of this structure holding ``leaves`` (as :func:`tree_unflatten`)."""
        leaves = list(leaves)
        if len(leaves) != self.num_leaves:
            raise ValueError(
                f"treespec.unflatten(leaves): `leaves` has length {len(leaves)} but the spec "
                f"refers to a pytree that holds {self.num_leaves} items ({self})."
            )
        return self._build(iter(leaves))

    def _build(self, leaves):
        node = SUPPORTED_NODES[self.type]
        return node.unflatten_fn([c._build(leaves) for c in self._children], self.context)

    def flatten_up_to(self, tree) -> list:
        """The subtrees of ``tree`` that stand where this spec has leaves; ``tree`` must have
        this spec's structure down to them."""
        out: list = []
        self._flatten_up_to(tree, out)
        return out

    def _flatten_up_to(self, tree, out):
        if _node_type(tree) is not self.type:
            raise ValueError(f"Node type mismatch; expected {self.type}, but got "
                             f"{type(tree)}.")
        children, context = SUPPORTED_NODES[self.type].flatten_fn(tree)
        if len(children) != self.num_children:
            raise ValueError(f"Node arity mismatch; expected {self.num_children}, but got "
                             f"{len(children)}.")
        if context != self.context:
            raise ValueError(f"Node context mismatch for custom node type {self.type}.")
        for spec, child in zip(self._children, children):
            spec._flatten_up_to(child, out)


class LeafSpec(TreeSpec):
    """The spec of a leaf (printed ``*``)."""

    def __init__(self):
        super().__init__(None, None, [])
        self.num_nodes = 1
        self.num_leaves = 1

    def is_leaf(self) -> bool:
        return True

    def __repr__(self, indent: int = 0):
        return "*"

    def _build(self, leaves):
        return next(leaves)

    def _flatten_up_to(self, tree, out):
        out.append(tree)


_LEAF = LeafSpec()


def treespec_leaf() -> LeafSpec:
    """The spec of a leaf."""
    return _LEAF


# ---------------------------------------------------------------------------------------
# flatten, unflatten, map
# ---------------------------------------------------------------------------------------


def tree_flatten(tree, is_leaf=None):
    """The leaves of ``tree`` in order, and its :class:`TreeSpec`.

    ``is_leaf(subtree)`` returning True stops the descent there.

    Examples
    --------
    >>> from torcia.utils import pytree
    >>> pytree.tree_flatten((1, [2, 3]))[0]
    [1, 2, 3]
    """
    leaves: list = []
    return leaves, _flatten(tree, is_leaf, leaves)


def _flatten(tree, is_leaf, leaves):
    if tree_is_leaf(tree, is_leaf):
        leaves.append(tree)
        return _LEAF
    kind = _node_type(tree)
    children, context = SUPPORTED_NODES[kind].flatten_fn(tree)
    return TreeSpec(kind, context, [_flatten(c, is_leaf, leaves) for c in children])


def tree_unflatten(leaves, treespec: TreeSpec) -> PyTree:
    """The pytree of structure ``treespec`` holding ``leaves``.

    Examples
    --------
    >>> from torcia.utils import pytree
    >>> _, spec = pytree.tree_flatten({"a": 1, "b": [2]})
    >>> pytree.tree_unflatten([7, 8], spec)
    {'a': 7, 'b': [8]}
    """
    if not isinstance(treespec, TreeSpec):
        raise TypeError(f"tree_unflatten(leaves, treespec): Expected `treespec` to be an "
                        f"instance of TreeSpec but got item of type {type(treespec)}.")
    return treespec.unflatten(leaves)


def tree_iter(tree, is_leaf=None):
    """The leaves of ``tree``, one by one."""
    if tree_is_leaf(tree, is_leaf):
        yield tree
        return
    children, _ = SUPPORTED_NODES[_node_type(tree)].flatten_fn(tree)
    for child in children:
        yield from tree_iter(child, is_leaf)


def tree_leaves(tree, is_leaf=None) -> list:
    """The leaves of ``tree`` in order.

    Examples
    --------
    >>> from torcia.utils import pytree
    >>> pytree.tree_leaves([None, 1, {"b": 2, "a": 3}])
    [None, 1, 2, 3]
    """
    return list(tree_iter(tree, is_leaf))


def tree_structure(tree, is_leaf=None) -> TreeSpec:
    """The :class:`TreeSpec` of ``tree``."""
    return tree_flatten(tree, is_leaf)[1]


def tree_map(func, tree, *rests, is_leaf=None) -> PyTree:
    """A pytree of ``tree``'s structure whose leaves are ``func(leaf, *rest_leaves)``, the
    ``rests`` being pytrees of the same structure (or with ``tree``'s leaves as prefixes).

    Examples
    --------
    >>> from torcia.utils import pytree
    >>> pytree.tree_map(lambda a, b: a + b, [1, (2,)], [10, (20,)])
    [11, (22,)]
    """
    leaves, spec = tree_flatten(tree, is_leaf)
    flat = [leaves] + [spec.flatten_up_to(r) for r in rests]
    return spec.unflatten(func(*xs) for xs in zip(*flat))


def tree_map_(func, tree, *rests, is_leaf=None) -> PyTree:
    """Call ``func`` on every leaf (with the ``rests``' leaves) for its effect; return
    ``tree`` itself."""
    leaves, spec = tree_flatten(tree, is_leaf)
    flat = [leaves] + [spec.flatten_up_to(r) for r in rests]
    for xs in zip(*flat):
        func(*xs)
    return tree


def _only(type_or_pred, func):
    if isinstance(type_or_pred, (type, tuple)) or type(type_or_pred).__name__ == "UnionType":
        def pred(x):
            return isinstance(x, type_or_pred)
    elif callable(type_or_pred):
        pred = type_or_pred
    else:
        raise TypeError("Argument must be a type, a tuple of types, or a callable.")

    def wrapped(x):
        return func(x) if pred(x) else x

    return wrapped, pred


def tree_map_only(type_or_types_or_pred, /, func, tree, is_leaf=None) -> PyTree:
    """:func:`tree_map` on the leaves of the given type(s) (or passing the predicate);
    other leaves stay.

    Examples
    --------
    >>> from torcia.utils import pytree
    >>> pytree.tree_map_only(int, lambda x: x * 10, [1, "a", 2.0])
    [10, 'a', 2.0]
    """
    return tree_map(_only(type_or_types_or_pred, func)[0], tree, is_leaf=is_leaf)


def tree_map_only_(type_or_types_or_pred, /, func, tree, is_leaf=None) -> PyTree:
    """:func:`tree_map_` on the leaves of the given type(s) only."""
    return tree_map_(_only(type_or_types_or_pred, func)[0], tree, is_leaf=is_leaf)


def tree_all(pred, tree, is_leaf=None) -> bool:
    """Whether ``pred`` holds for every leaf."""
    return all(map(pred, tree_iter(tree, is_leaf)))


def tree_any(pred, tree, is_leaf=None) -> bool:
    """Whether ``pred`` holds for some leaf."""
    return any(map(pred, tree_iter(tree, is_leaf)))


def tree_all_only(type_or_types, /, pred, tree, is_leaf=None) -> bool:
    """Whether ``pred`` holds for every leaf of the given type(s)."""
    check = _only(type_or_types, pred)[1]
    return all(pred(x) for x in tree_iter(tree, is_leaf) if check(x))


def tree_any_only(type_or_types, /, pred, tree, is_leaf=None) -> bool:
    """Whether ``pred`` holds for some leaf of the given type(s)."""
    check = _only(type_or_types, pred)[1]
    return any(pred(x) for x in tree_iter(tree, is_leaf) if check(x))


# ---------------------------------------------------------------------------------------
# with key paths
# ---------------------------------------------------------------------------------------


def _keyed_children(tree):
    node = SUPPORTED_NODES[_node_type(tree)]
    if node.flatten_with_keys_fn is None:
        raise ValueError(f"Did not find a flatten_with_keys_fn for type: {node.type}. Please "
                         "pass a flatten_with_keys_fn argument to register_pytree_node.")
    return node.flatten_with_keys_fn(tree)[0]


def _paths(tree, is_leaf, prefix, out):
    if tree_is_leaf(tree, is_leaf):
        out.append((prefix, tree))
        return
    for key, child in _keyed_children(tree):
        _paths(child, is_leaf, prefix + (key,), out)


def tree_leaves_with_path(tree, is_leaf=None) -> list:
    """``(key_path, leaf)`` for every leaf.

    Examples
    --------
    >>> from torcia.utils import pytree
    >>> [(pytree.keystr(k), v) for k, v in pytree.tree_leaves_with_path({"a": [1, 2]})]
    [("['a'][0]", 1), ("['a'][1]", 2)]
    """
    out: list = []
    _paths(tree, is_leaf, (), out)
    return out


def tree_flatten_with_path(tree, is_leaf=None):
    """``(tree_leaves_with_path(tree), tree_structure(tree))``."""
    return tree_leaves_with_path(tree, is_leaf), tree_structure(tree, is_leaf)


def tree_map_with_path(func, tree, *rests, is_leaf=None) -> PyTree:
    """:func:`tree_map` whose ``func`` receives each leaf's key path first."""
    with_path, spec = tree_flatten_with_path(tree, is_leaf)
    flat = [spec.flatten_up_to(r) for r in rests]
    return spec.unflatten(func(kp, leaf, *xs)
                          for (kp, leaf), *xs in zip(with_path, *flat))
