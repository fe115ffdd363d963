"""The op record: everything known about one op, published as
:class:`torcia.library.OpDef`."""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable

#: The module whose public function of an op documents the op's record (``torcia.add`` for
#: the op add): the ``torcia`` package, set by its ``__init__`` as it loads. torcia.library
#: reads it here, so that the facade does not import the package that loads it.
PUBLIC: types.ModuleType | None = None


@dataclasses.dataclass(frozen=True)
class OpDef:
    """Everything known about one op.

    Attributes
    ----------
    name : str
        The op's name, the key of every kernel table.
    group : str
        Its kind, the lower-cased name of its list in :mod:`torcia.ops` (``"binary"``,
        ``"reduce"``, ``"nn"``...), or the group a plugin gave it.
    inputs : tuple of str
        The positional (tensor) arguments of its kernel.
    params : dict
        Its keyword parameters with their defaults.
    kernel : callable or None
        The reference kernel (NumPy arrays in, arrays out), which defines what the op means.
    backward : callable or None
        The backward formula (see ``torcia.autograd.derivatives``); None when the op is
        not differentiable or no autograd engine is available.
    jvp : callable or None
        The forward-mode formula (``jvp(tangents, *inputs, result=..., **params)``), read
        from autograd's forward table (``torcia.autograd.forward_derivatives``) for the
        built-in ops; None without an engine or for non-differentiable ops.
    shape : callable or None
        ``shape(*input_metas, **params)`` -> the output's ``(shape, dtype)`` without data.
    primitive : bool
        Whether a backend must implement it; a composite has a ``decomposition`` into
        primitives that runs where a backend has no kernel of its own.
    decomposition : callable or None
        ``decomposition(*inputs, **params)`` on tensors, for composites.
    differentiable : bool
        Whether its float outputs carry gradients.
    doc : str
        What the op computes.
    """

    name: str
    group: str
    inputs: tuple = ()
    params: dict = dataclasses.field(default_factory=dict)
    kernel: Callable | None = None
    backward: Callable | None = None
    jvp: Callable | None = None
    shape: Callable | None = None
    primitive: bool = True
    decomposition: Callable | None = None
    differentiable: bool = True
    doc: str = ""
