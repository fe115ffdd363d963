"""What libraries use of ``torch._dynamo``, PyTorch's graph capture, served by torcia's.

:func:`torcia.compiler.compile` captures a program by running it (see :mod:`torcia.compiler`), so
PyTorch's bytecode-level capture has no counterpart here; the names libraries call on it
do: the decorators and predicates also under ``torch.compiler`` (:func:`disable`,
:func:`allow_in_graph`, :func:`is_compiling`, :func:`reset`...), the hints they put on
tensors (:func:`mark_static_address`), the settings torcia has a
counterpart of (:data:`config`), and :class:`TransformGetItemToIndex`, the function mode
that turns indexing by tensors into advanced indexing (transformers builds its attention
masks under it). The compat runner serves ``torch._dynamo`` from this module.

Examples
--------
>>> import torcia
>>> from torcia.compiler import dynamo
>>> x = torcia.zeros(3)
>>> dynamo.mark_static_address(x)
>>> x._dynamo_static_input_type
'guarded'
>>> dynamo.is_compiling(), dynamo.config.recompile_limit
(False, 8)
"""

from __future__ import annotations

import torcia
import torcia.compiler as _compiler
from torcia.compiler import (
    Unsupported,
    allow_in_graph,
    assume_constant_result,
    disable,
    is_compiling,
    reset,
)
from torcia.library import Tensor
from torcia.overrides import TorchFunctionMode
from torcia.utils import pytree

__all__ = ["TransformGetItemToIndex", "Unsupported", "allow_in_graph",
           "assume_constant_result", "config", "disable", "is_compiling",
           "mark_static_address", "reset"]


def mark_static_address(t, guard: bool = True) -> None:
    """Mark ``t``'s storage as one that stays at its address between calls (a KV cache),
    as ``torch._dynamo.mark_static_address`` does: the mark is the tensor's
    ``_dynamo_static_input_type`` attribute, ``"guarded"`` or ``"unguarded"``.

    :func:`torcia.compiler.compile` reads a module's buffers anew on every call of a captured
    program, so the mark changes no program here; it is kept, as PyTorch keeps it, for
    code that reads it back.

    Examples
    --------
    >>> import torcia
    >>> from torcia.compiler import dynamo
    >>> cache = torcia.zeros(2, 4)
    >>> dynamo.mark_static_address(cache, guard=False)
    >>> cache._dynamo_static_input_type
    'unguarded'
    """
    if not isinstance(t, Tensor):
        raise TypeError(f"mark_static_address expects a tensor but received {type(t)}")
    t._dynamo_static_input_type = "guarded" if guard else "unguarded"


class _Config:
    """``torch._dynamo.config``: the settings of capture that torcia has a counterpart of.
    ``recompile_limit`` (also under its former name ``cache_size_limit``) is
    :data:`torcia.compiler.recompile_limit`, the programs kept per compiled function
    before it runs eagerly; setting another name is an AttributeError naming it."""

    __slots__ = ()

    @property
    def recompile_limit(self) -> int:
        return _compiler.recompile_limit

    @recompile_limit.setter
    def recompile_limit(self, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"recompile_limit must be an int >= 0, got {value!r}")
        _compiler.recompile_limit = value

    cache_size_limit = recompile_limit

    def __repr__(self):
        return f"torch._dynamo.config (recompile_limit={self.recompile_limit})"


#: ``torch._dynamo.config``: ``config.recompile_limit`` (and ``cache_size_limit``) read and
#: set :data:`torcia.compiler.recompile_limit`.
config = _Config()


def _index_by_tensors(x: Tensor, indices: list) -> Tensor:
    """``x[indices]`` with every index a tensor, as advanced indexing (``aten.index``): the
    indices broadcast together, and a 0-d index is an index tensor too, not an int."""
    shape = torcia.broadcast_shapes(*(i.shape for i in indices))
    flat = tuple(i.expand(shape).reshape(-1) for i in indices)
    picked = x[flat]
    return picked.reshape(*shape, *picked.shape[1:])


class TransformGetItemToIndex(TorchFunctionMode):
    """A function mode under which ``x[i, j]`` with tensor indices is advanced indexing
    (PyTorch's ``aten.index``) even where an index is a 0-d tensor, which indexing would
    otherwise take as the integer it holds; as
    ``torch._dynamo._trace_wrapped_higher_order_op.TransformGetItemToIndex``. Under
    ``torcia.vmap`` an index that is one element of a batched tensor is then looked up
    for every element at once.

    Examples
    --------
    >>> import torcia
    >>> from torcia.compiler.dynamo import TransformGetItemToIndex
    >>> x = torcia.arange(12).reshape(3, 4)
    >>> with TransformGetItemToIndex():
    ...     picked = x[torcia.tensor(2), torcia.tensor([1, 3])]
    ...     row = x[torcia.tensor(1)]
    >>> picked.tolist(), row.tolist()
    ([9, 11], [4, 5, 6, 7])
    """

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is Tensor.__getitem__:
            leaves = pytree.tree_leaves(args[1])
            if leaves and all(isinstance(i, Tensor) for i in leaves):
                return _index_by_tensors(args[0], leaves)
        return func(*args, **(kwargs or {}))
