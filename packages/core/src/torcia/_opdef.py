"""The op record: everything known about one op, published as
:class:`torcia.library.OpDef`."""

from __future__ import annotations

import ast
import dataclasses
import types
from collections.abc import Callable

#: The module whose public function of an op documents the op's record (``torcia.add`` for
#: the op add): the ``torcia`` package, set by its ``__init__`` as it loads. torcia.library
#: reads it here, so that the facade does not import the package that loads it.
PUBLIC: types.ModuleType | None = None

#: ``torcia._tensor.call`` and ``torcia._decompositions.ran``, set by
#: :mod:`torcia._decompositions` as it fills the table of decompositions: the declared ones
#: that run an op by name (as a view of their input, a cast to the same dtype) or stand for
#: the kernel of the op they decompose (the strided views of :mod:`torcia._ops.views`)
#: reach them here, the family modules of :mod:`torcia._ops` being below the Tensor class.
CALL: Callable | None = None
RAN: Callable | None = None
#: :mod:`torcia._tensor`, set by that module as it loads: the creation and random ops'
#: public functions, written in :mod:`torcia._ops.creation` and :mod:`torcia._ops.random`
#: below it, make their tensors with its ``Tensor``, ``canonical_device`` and
#: ``DECOMPOSITIONS``, and draw through its dispatch modes (``MODES``)
TENSOR: types.ModuleType | None = None
#: ``torcia._autocast.autocast_as``, set by that module as it loads: the public functions
#: written in :mod:`torcia._ops` that autocast takes as one op (``torcia.linalg.solve``)
#: reach it here, that module being above the family modules
AUTOCAST_AS: Callable | None = None
#: ``torcia._autocast.autocast_where_listed``, set with :data:`AUTOCAST_AS`: the RNN cells
#: written in :mod:`torcia._ops.nn_rnn`, one op for autocast where a device lists them
AUTOCAST_WHERE_LISTED: Callable | None = None
#: ``torcia._tensor.inplace``, set by that module as it loads: the in-place public functions
#: written in :mod:`torcia._ops` (``torcia.conj_physical_``, ``functional.elu(x,
#: inplace=True)``) write their result back with it
INPLACE: Callable | None = None
#: ``torcia._storage.storage_size`` and ``torcia._storage.inplace_view``, set by that module
#: as it loads: ``as_strided`` (written in :mod:`torcia._ops.views`) checks its bounds
#: against the storage's size, and the in-place views (``t_``, ``squeeze_``...) make their
#: tensor a view of its old memory, that module being above the family modules
STORAGE_SIZE: Callable | None = None
INPLACE_VIEW: Callable | None = None
#: ``torcia._tensor.write_inplace`` and ``torcia._tensor.check_overlap``, set by that module
#: as it loads: ``tensor[key] = value`` (written in :mod:`torcia._ops.indexing`) writes the
#: indexed region in place with them, checking the value's overlap itself
WRITE_INPLACE: Callable | None = None
CHECK_OVERLAP: Callable | None = None

#: ``torcia._tensor.result_type``, set by that module as it loads: the public functions
#: written in :mod:`torcia._ops` promote their operands with it (``clamp``'s bounds)
RESULT_TYPE: Callable | None = None
#: ``torcia._tensor.unary`` and ``binary`` (torcia._speedups' where they replace them), set
#: by that module as it loads: the public functions of the elementwise ops, made in
#: :mod:`torcia._ops.unary` and ``binary``, dispatch with them (binding them once, on
#: their first call: the hottest path)
UNARY: Callable | None = None
BINARY: Callable | None = None


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
    random : bool
        Whether it draws from a random generator (its kernel's ``rng``): not pure, so
        running it again gives other values; a compiler must neither fold nor merge it.
    doc : str
        What the op computes.
    samples : callable or None
        ``samples(rng) -> [(args, params), ...]``: calls of the kernel that the device
        conformance kit (:mod:`torcia.testing.conformance`) runs the op on, where it cannot
        make them from the schema (index tensors, windows, sequences, a creation op's
        arguments): host arrays drawn from the ``numpy.random.Generator`` ``rng``, and
        parameters, a parameter ``rng`` given as None (each call gets a fresh generator).
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
    random: bool = False
    doc: str = ""
    samples: Callable | None = None


@dataclasses.dataclass(frozen=True)
class Declaration:
    """A built-in op as its family module in :mod:`torcia._ops` declares it: what
    :func:`define` was given. The tables the rest of torcia reads (:mod:`torcia.ops`'s
    lists, the reference kernels, the meta shapes, the decompositions, autocast's lists)
    are filled from these, so a declared op is written down once.

    Attributes
    ----------
    name : str
        The op's name, read from ``schema``.
    schema : str
        ``"name(Tensor x, *, float alpha=1.0) -> Tensor"``: the arguments before ``*``
        are the op's inputs (passed positionally to its kernel), those after it its
        parameters (keywords, with their defaults); ``**params`` takes any others.
    inputs : tuple of str
        The input names, from ``schema``.
    params : dict
        The parameters and their defaults, from ``schema``.
    kernel : callable
        The reference kernel, written as a method of the reference backend
        (``kernel(self, *arrays, **params)``, ``self.xp`` the array module), or an
        :class:`~torcia._ops._common.ArrayFunction` naming one function of the array module.
    shape : callable or None
        ``shape(*input_metas, **params) -> (shape, numpy dtype)`` for the "meta" device.
    decomposition : callable or None
        The op written with other ops, on tensors; an op with one is a composite.
    autocast : dict
        Device type -> what autocast does with the op there (``"lower"``, ``"float32"``,
        ``"promote"``); a device type absent runs it in its inputs' dtypes.
    floating_inputs : bool
        Whether the kernel is given floating-point (or complex) inputs only
        (:data:`torcia.ops.FLOATING_INPUTS`).
    differentiable : bool
        Whether its float outputs carry gradients.
    group : str
        The list of :mod:`torcia.ops` it belongs to (``"nn"``...).
    refuses : dict
        The inputs PyTorch has no kernel for: NumPy kind of an input's dtype (``"c"``
        complex, ``"b"`` bool) -> ``(error class, message)``, ``{}`` in the message
        standing for PyTorch's name of the dtype. The reference kernel raises it, and
        ``torcia._numpy_backend.refusal`` gives it to the decompositions.
    doc : str
        The summary of its public function's docstring; "" for the family's default.
    examples : tuple
        The calls that its public function's docstring shows and the docs tests run: each
        the arguments (a string starting with ``[`` stands for a tensor of that list) and,
        last, what the call prints.
    inplace : bool
        Whether ``Tensor.name_`` computes it in place (out of place, then written back); for
        an activation (:mod:`torcia._ops.nn_activation`), whether its functional form takes
        ``inplace=False``.
    inplace_example : tuple
        ``(input, arguments after it, what the input holds afterwards)``: the example of
        ``name_``, where running ``examples[0]`` in place would not show it (no example,
        or a bool result written back in the input's dtype).
    aliases : tuple of str
        PyTorch's other names of its public function (``arcsin`` for ``asin``).
    tags : frozenset of str
        The tensor subclasses, list functions and namespaces that carry the op
        (:data:`TAGS`).
    operator : str
        The Python operator that runs it, as its special method is named without the
        underscores (``"add"`` for ``+``, ``"truediv"`` for div, ``"invert"`` for ``~``);
        "" where none does.
    random : bool
        Whether its kernel draws from the random generator it is given (``rng``): the op
        is not pure (:attr:`OpDef.random`, :data:`torcia.ops.RANDOM`).
    answers_early : callable or None
        ``answers_early(array) -> bool``: the inputs PyTorch answers before it looks for
        their dtype's kernel (a scan of an empty tensor), which ``refuses`` lets through.
    checks : callable or None
        ``checks(input, **params)``: the checks of its public function's arguments that the
        schema cannot say (gelu's ``approximate`` is ``"none"`` or ``"tanh"``), raising
        PyTorch's error; run before the dtype's refusal.
    samples : callable or None
        The calls the device conformance kit runs the op on (:attr:`OpDef.samples`).
    """

    name: str
    schema: str
    inputs: tuple
    params: dict
    kernel: Callable
    shape: Callable | None = None
    decomposition: Callable | None = None
    autocast: dict = dataclasses.field(default_factory=dict)
    floating_inputs: bool = False
    differentiable: bool = True
    group: str = "plugin"
    refuses: dict = dataclasses.field(default_factory=dict)
    doc: str = ""
    examples: tuple = ()
    inplace: bool = False
    inplace_example: tuple = ()
    aliases: tuple = ()
    tags: frozenset = frozenset()
    operator: str = ""
    random: bool = False
    answers_early: Callable | None = None
    checks: Callable | None = None
    samples: Callable | None = None


_POLICIES = ("lower", "float32", "promote")

#: the tags of :attr:`Declaration.tags`: ``torcia.masked``'s MaskedTensor, torcia.nested's
#: NestedTensor, ``torcia._foreach_*`` and the sparse tensors (zero stays zero: PyTorch
#: has a sparse kernel) carry the op (PyTorch's lists of each); ``torcia.special`` exports
#: the public function of an op declared in another family under its name too
TAGS = ("masked", "nested", "foreach", "sparse", "special")


def _top_level_split(text: str) -> list[str]:
    """``text`` split at the commas outside brackets and quotes (a default may be a tuple)."""
    parts, depth, quote, start = [], 0, None, 0
    for i, ch in enumerate(text):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return parts + [text[start:]]


def parse_schema(schema: str) -> tuple[str, tuple, dict]:
    """``(name, inputs, params)`` of an op schema.

    Examples
    --------
    >>> from torcia._opdef import parse_schema
    >>> parse_schema("scaled(Tensor x, Tensor? w, *, float beta=1.0, str mode='fast') -> Tensor")
    ('scaled', ('x', 'w'), {'beta': 1.0, 'mode': 'fast'})
    """
    # the returns may be a tuple, "-> (Tensor, Tensor)": the arguments end before the arrow
    head, sep, rest = schema.partition("->")[0].partition("(")
    args, close, _ = rest.rpartition(")")
    name = head.strip()
    if not sep or not close or not name.isidentifier():
        raise ValueError(f"op schema {schema!r}: expected 'name(arguments) -> returns'")
    inputs, params, keyword = [], {}, False
    for arg in filter(None, (a.strip() for a in _top_level_split(args))):
        if arg == "*":
            keyword = True
            continue
        if arg.startswith("**"):
            continue  # any other keyword parameters: not part of the record
        declared, eq, default = arg.partition("=")
        arg_name = declared.split()[-1]
        if not keyword:
            inputs.append(arg_name)
        elif not eq:
            raise ValueError(f"op schema {schema!r}: parameter {arg_name!r} has no default")
        else:
            params[arg_name] = ast.literal_eval(default.strip())
    return name, tuple(inputs), params


def define(schema: str, kernel: Callable, *, shape: Callable | None = None,
           decomposition: Callable | None = None, autocast: dict | None = None,
           floating_inputs: bool = False, differentiable: bool = True,
           group: str = "plugin", refuses: dict | None = None, doc: str = "",
           examples: tuple = (), inplace: bool = False, inplace_example: tuple = (),
           aliases: tuple = (), tags: tuple = (), operator: str = "",
           random: bool = False, answers_early: Callable | None = None,
           checks: Callable | None = None, samples: Callable | None = None) -> Declaration:
    """Declare a built-in op: its schema and everything core needs of it (see
    :class:`Declaration`). The counterpart of ``torcia.library.OpRegistry.define`` for
    the ops core ships; the backward formula stays in the autograd engine.

    Examples
    --------
    >>> from torcia._opdef import define
    >>> op = define("twice(Tensor x) -> Tensor", lambda self, a: a * 2, group="nn")
    >>> op.name, op.inputs, op.params
    ('twice', ('x',), {})
    """
    name, inputs, params = parse_schema(schema)
    for device_type, policy in (autocast or {}).items():
        if policy not in _POLICIES:
            raise ValueError(f"op {name!r}: autocast policy {policy!r} on {device_type!r} is "
                             f"none of {', '.join(_POLICIES)}")
    return Declaration(name=name, schema=schema, inputs=inputs, params=params, kernel=kernel,
                       shape=shape, decomposition=decomposition, autocast=dict(autocast or {}),
                       floating_inputs=floating_inputs, differentiable=differentiable,
                       group=group, refuses=dict(refuses or {}), doc=doc,
                       examples=tuple(examples), inplace=inplace,
                       inplace_example=tuple(inplace_example), aliases=tuple(aliases),
                       tags=frozenset(tags), operator=operator, random=random,
                       answers_early=answers_early, checks=checks, samples=samples)
