"""Dynamic sizes: :class:`Dim`, the ``dynamic_shapes`` argument, and how an exported
program's sizes become polynomials of them.

torcia captures a program by running it, so every size in a capture is a number. To
learn how the numbers follow a dynamic dimension, the program is captured again with
that dimension one larger (or smaller), then at the corners of the dimensions that
appear together in one number (a reshape to ``batch * seq``), and each number that
changed is fitted as a polynomial of degree at most one in each dimension (the form
of the sizes of reshapes, views and expands). One more capture, with every dimension
moved again, checks every fitted number; a size that is not of that form (``seq // 2``)
is an error naming the op, or, for :data:`Dim.AUTO`, makes that dimension static.
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import math

import numpy as np

from torcia.export._capture import ExportError, located
from torcia.export._program import Sym
from torcia.library import Tensor

INT_MAX = 2 ** 63 - 1


class _Hint:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"Dim.{self.name}"


class Dim:
    """A dynamic dimension of the inputs of :func:`~torcia.export.export`
    (``torch.export.Dim``): the same :class:`Dim` on two inputs says their sizes are
    equal; ``min`` and ``max`` bound it (checked on every call of the program).

    ``Dim.AUTO`` makes a dimension dynamic where the program allows it and static
    where it does not; ``Dim.DYNAMIC`` makes it dynamic or fails; ``Dim.STATIC`` (or
    ``None``) keeps the example's size.

    Examples
    --------
    >>> import torcia
    >>> batch = torcia.export.Dim("batch", min=1, max=64)
    >>> batch.__name__, batch.min, batch.max
    ('batch', 1, 64)
    """

    AUTO = _Hint("AUTO")
    DYNAMIC = _Hint("DYNAMIC")
    STATIC = _Hint("STATIC")

    def __init__(self, name: str, *, min: int | None = None, max: int | None = None):
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"Dim's name must be a Python identifier, got {name!r}")
        lo = 0 if min is None else min
        hi = INT_MAX if max is None else max
        if lo < 0:
            raise ValueError(f"Dim {name!r}: min must be non-negative, got {lo}")
        if hi < lo:
            raise ValueError(f"Dim {name!r}: max ({hi}) is smaller than min ({lo})")
        self.__name__ = name
        self.min = lo
        self.max = hi

    def __repr__(self):
        return f"Dim({self.__name__!r}, min={self.min}, max={self.max})"


def dims(*names: str, min: int | None = None, max: int | None = None) -> tuple:
    """Several :class:`Dim` with the same bounds (``torch.export.dims``).

    Examples
    --------
    >>> import torcia
    >>> batch, seq = torcia.export.dims("batch", "seq", max=512)
    >>> seq.__name__, seq.max
    ('seq', 512)
    """
    return tuple(Dim(n, min=min, max=max) for n in names)


@dataclasses.dataclass
class DimInfo:
    """One dynamic dimension of an export: where it sits among the inputs' sizes."""

    name: str
    min: int
    max: int
    mode: str  # "dim" (a Dim), "auto" or "dynamic"
    where: list  # (leaf index, axis)
    example: int


def _axes_spec(spec, t: Tensor, path: str):
    """One input's spec as {axis: Dim or hint}."""
    if spec is None:
        return {}
    ndim = t.dim()
    if isinstance(spec, dict):
        items = spec.items()
    elif isinstance(spec, (tuple, list)):
        if len(spec) != ndim:
            raise ValueError(f"dynamic_shapes{path}: {len(spec)} entries for a tensor of "
                             f"{ndim} dimensions")
        items = enumerate(spec)
    else:
        raise ValueError(f"dynamic_shapes{path}: expected a dict of axis -> Dim, a tuple "
                         f"of one entry per dimension, or None, got {type(spec).__name__}")
    out = {}
    for axis, d in items:
        if not isinstance(axis, int) or not -ndim <= axis < ndim:
            raise ValueError(f"dynamic_shapes{path}: axis {axis!r} is not a dimension of a "
                             f"tensor of {ndim} dimensions")
        if d is None or d is Dim.STATIC:
            continue
        if not isinstance(d, (Dim, _Hint)):
            raise ValueError(f"dynamic_shapes{path}[{axis}]: expected a Dim, Dim.AUTO, "
                             f"Dim.DYNAMIC, Dim.STATIC or None, got {d!r}")
        out[axis % ndim] = d
    return out


def _walk(value, spec, path, found):
    """Pair each tensor in ``value`` with its axes spec (in ``found``, by id)."""
    if isinstance(value, Tensor):
        found[id(value)] = (_axes_spec(spec, value, path), path)
        return
    if spec is None:
        return
    if isinstance(value, (list, tuple)):
        if not isinstance(spec, (list, tuple)) or len(spec) != len(value):
            raise ValueError(f"dynamic_shapes{path}: expected a list of {len(value)} specs "
                             f"for this {type(value).__name__}, got {spec!r}")
        for i, (v, s) in enumerate(zip(value, spec)):
            _walk(v, s, f"{path}[{i}]", found)
    elif isinstance(value, dict):
        if not isinstance(spec, dict):
            raise ValueError(f"dynamic_shapes{path}: expected a dict for this dict input")
        for k, s in spec.items():
            _walk(value[k], s, f"{path}[{k!r}]", found)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        # a registered dataclass: its fields' specs by name, in field order, or as an
        # instance of the same dataclass
        names = [f.name for f in dataclasses.fields(value) if f.init]
        if isinstance(spec, (list, tuple)) and len(spec) == len(names):
            spec = dict(zip(names, spec))
        elif type(spec) is type(value):
            spec = {k: getattr(spec, k) for k in names}
        if not isinstance(spec, dict) or not set(spec) <= set(names):
            raise ValueError(f"dynamic_shapes{path}: expected the specs of {names} (a dict "
                             f"by field, a list in field order or a {type(value).__name__})"
                             f", got {spec!r}")
        for k, s in spec.items():
            _walk(getattr(value, k), s, f"{path}.{k}", found)


def bind(module, args, kwargs) -> dict:
    """The inputs by ``forward``'s argument names (torch.export's combined args)."""
    sig = inspect.signature(module.forward)
    try:
        return dict(sig.bind(*args, **(kwargs or {})).arguments)
    except TypeError as exc:
        raise ValueError(f"the example inputs do not fit forward{sig}: {exc}") from None


def map_inputs(value, fn):
    """``value`` (nested lists, tuples and dicts) with ``fn`` applied to each leaf."""
    if isinstance(value, list):
        return [map_inputs(v, fn) for v in value]
    if isinstance(value, tuple):
        return tuple(map_inputs(v, fn) for v in value)
    if isinstance(value, dict):
        return {k: map_inputs(v, fn) for k, v in value.items()}
    return fn(value)


class ShapesCollection:
    """Dynamic shapes given per input tensor rather than in the inputs' structure
    (``torch.export.ShapesCollection``).

    Examples
    --------
    >>> import torcia
    >>> from torcia.export import Dim, ShapesCollection
    >>> x = torcia.ones(3, 4)
    >>> shapes = ShapesCollection()
    >>> shapes[x] = {0: Dim.DYNAMIC}
    >>> shapes.dynamic_shapes(torcia.nn.Linear(4, 2), (x,))
    {'input': {0: Dim.DYNAMIC}}
    """

    def __init__(self):
        self._shapes: dict = {}

    def __setitem__(self, t, shape):
        if not isinstance(t, Tensor):
            raise AssertionError(f"Cannot assign shape to non-tensor type {type(t)}")
        if id(t) in self._shapes and self._shapes[id(t)] != shape:
            raise AssertionError(f"Shapes assigned to input do not match: expected "
                                 f"{self._shapes[id(t)]}, got {shape}")
        self._shapes[id(t)] = shape

    def __getitem__(self, t):
        return self._shapes.setdefault(id(t), {})

    def __len__(self) -> int:
        return len(self._shapes)

    def dynamic_shapes(self, m, args, kwargs=None) -> dict:
        """The ``dynamic_shapes`` argument, by ``m.forward``'s argument names, that these
        shapes make for the inputs ``args`` and ``kwargs``."""
        seen = set()

        def find(v):
            if isinstance(v, Tensor) and id(v) in self._shapes:
                seen.add(id(v))
                return self._shapes[id(v)]
            return None

        out = map_inputs(bind(m, args, kwargs), find)
        if seen != set(self._shapes):
            raise ValueError("Some tensors that were assigned shapes were not found in args. "
                             "Maybe such tensors were copied when passing them as args?")
        return out


class _Shape(tuple):
    """A tensor's sizes, apart from tuples among the inputs."""


def _merge(values: list, path: str):
    first = values[0]
    if any(type(v) is not type(first) for v in values):
        raise ValueError(f"The following inputs were found to have differing types, so "
                         f"they cannot be marked as dynamic: {tuple(values)} (at {path})")
    if isinstance(first, _Shape):
        if any(len(v) != len(first) for v in values):
            raise ValueError(f"the tensors at {path} differ in rank: "
                             f"{[len(v) for v in values]}")
        return tuple(None if len(set(sizes)) == 1 else Dim.DYNAMIC for sizes in zip(*values))
    if isinstance(first, (list, tuple)):
        if any(len(v) != len(first) for v in values):
            raise ValueError(f"the inputs at {path} differ in length")
        return type(first)(_merge(list(vs), f"{path}[{i}]")
                           for i, vs in enumerate(zip(*values)))
    if isinstance(first, dict):
        if any(v.keys() != first.keys() for v in values):
            raise ValueError(f"the inputs at {path} differ in keys")
        return {k: _merge([v[k] for v in values], f"{path}[{k!r}]") for k in first}
    if any(v != first for v in values):
        # a torcia extension of the message: Python numbers are specialised, not symbolic
        raise ValueError(f"The following inputs were found to have differing values, but "
                         f"they cannot be marked as dynamic: {tuple(values)} (at {path}; "
                         f"torcia.export specialises Python values among the inputs)")
    return None


class AdditionalInputs:
    """Dynamic shapes inferred from more example inputs (``torch.export.AdditionalInputs``):
    a size that differs among the examples is dynamic (``Dim.DYNAMIC``), one that does
    not is static; :func:`~torcia.export.export` then checks that the program accepts
    every example.

    Examples
    --------
    >>> import torcia
    >>> from torcia.export import AdditionalInputs
    >>> more = AdditionalInputs()
    >>> more.add((torcia.ones(5, 4),))
    >>> more.dynamic_shapes(torcia.nn.Linear(4, 2), (torcia.ones(3, 4),))
    {'input': (Dim.DYNAMIC, None)}
    """

    def __init__(self):
        self._examples: list = []

    def add(self, args, kwargs=None) -> None:
        """One more example: positional inputs (a tuple) and keyword inputs (a dict)."""
        if type(args) is not tuple:
            raise AssertionError(f"Representative args {args} must be a tuple")
        if kwargs is not None and type(kwargs) is not dict:
            raise AssertionError(f"Representative kwargs {kwargs} must be None or a dict")
        self._examples.append((args, kwargs))

    def dynamic_shapes(self, m, args, kwargs=None) -> dict:
        """The ``dynamic_shapes`` argument the examples, with ``args`` and ``kwargs``,
        make: by ``m.forward``'s argument names."""
        shapes = [map_inputs(bind(m, a, k), lambda v: _Shape(v.shape)
                             if isinstance(v, Tensor) else v)
                  for a, k in [(args, kwargs), *self._examples]]
        return {name: _merge([s[name] for s in shapes], f"[{name!r}]") for name in shapes[0]}

    def verify(self, ep) -> None:
        """Check that the exported program ``ep`` accepts every example (its guards)."""
        module = ep.module()
        for args, kwargs in self._examples:
            module._check_inputs(*args, **(kwargs or {}))


def parse(module, args, kwargs, dynamic_shapes, leaves) -> list[DimInfo]:
    """The dynamic dimensions ``dynamic_shapes`` asks for, located among ``leaves``."""
    if dynamic_shapes is None:
        return []
    sig = inspect.signature(module.forward)
    named = bind(module, args, kwargs)
    found: dict = {}
    if isinstance(dynamic_shapes, dict):
        for name, spec in dynamic_shapes.items():
            if name not in named:
                raise ValueError(f"dynamic_shapes names {name!r}, which is not an argument "
                                 f"of forward{sig} given here (given: {', '.join(named)})")
            _walk(named[name], spec, f"[{name!r}]", found)
    elif isinstance(dynamic_shapes, (tuple, list)):
        values = list(named.values())
        if len(dynamic_shapes) != len(values):
            raise ValueError(f"dynamic_shapes has {len(dynamic_shapes)} entries for "
                             f"{len(values)} inputs")
        for i, (v, spec) in enumerate(zip(values, dynamic_shapes)):
            _walk(v, spec, f"[{i}]", found)
    else:
        raise ValueError("dynamic_shapes must be a dict (by argument name), a tuple or list "
                         f"(one entry per argument), or None, got {type(dynamic_shapes)}")
    infos: dict = {}
    for i, leaf in enumerate(leaves):
        if not isinstance(leaf, Tensor) or id(leaf) not in found:
            continue
        axes, path = found[id(leaf)]
        for axis, d in sorted(axes.items()):
            size = leaf.shape[axis]
            if isinstance(d, Dim):
                key = id(d)
                info = infos.get(key)
                if info is None:
                    info = infos[key] = DimInfo(d.__name__, d.min, d.max, "dim", [], size)
                elif info.example != size:
                    raise ExportError(
                        f"Dim {d.__name__!r} is given to inputs of different sizes "
                        f"({info.example} and {size} at dynamic_shapes{path}[{axis}])")
                if not d.min <= size <= d.max:
                    raise ExportError(f"the example size {size} of dynamic_shapes{path}"
                                      f"[{axis}] is outside Dim {d.__name__!r}'s range "
                                      f"[{d.min}, {d.max}]")
            else:
                key = (i, axis)
                mode = "auto" if d is Dim.AUTO else "dynamic"
                info = infos[key] = DimInfo("", 0, INT_MAX, mode, [], size)
            info.where.append((i, axis))
    out = list(infos.values())
    used = {d.name for d in out}
    k = 0
    for d in out:
        if not d.name:
            while f"s{k}" in used:
                k += 1
            d.name = f"s{k}"
            used.add(d.name)
    return out


# ---------------------------------------------------------------------------------------
# comparing captures
# ---------------------------------------------------------------------------------------


def _split(obj, ints: list, others: list):
    """The skeleton of a constant: its integers taken out into ``ints``, everything else
    into ``others`` (compared as it is)."""
    if isinstance(obj, (bool, np.bool_)) or obj is None or isinstance(obj, str):
        others.append(obj)
        return "o"
    if isinstance(obj, (int, np.integer)):
        ints.append(int(obj))
        return "i"
    if isinstance(obj, (tuple, list)):
        return (type(obj).__name__, tuple(_split(x, ints, others) for x in obj))
    if isinstance(obj, slice):
        return ("slice", tuple(_split(x, ints, others) for x in (obj.start, obj.stop,
                                                                  obj.step)))
    others.append(obj)
    return "o"


def _split_ref(ref, ints, others):
    kind, what = ref[0], ref[1]
    if kind == "v":
        return ref
    if kind == "l":
        return ("l", tuple(_split_ref(r, ints, others) for r in what))
    return ("c", _split(what, ints, others))


def _same_other(a, b) -> bool:
    if isinstance(a, (np.ndarray, np.generic)) or isinstance(b, (np.ndarray, np.generic)):
        a, b = np.asarray(a), np.asarray(b)
        return a.shape == b.shape and a.dtype == b.dtype and bool(
            np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


@dataclasses.dataclass
class Summary:
    """One capture, taken apart for comparison with others."""

    tracer: object
    skeleton: list  # per node and per input: structure with the integers taken out
    ints: list  # the integers, in order
    owners: list  # for each integer, the node (or input) it belongs to
    others: list
    consts: list  # per lifted-constant input: its array


def summarize(tracer, param_ids) -> Summary:
    graph = tracer.graph
    skeleton, ints, owners, others, consts = [], [], [], [], []
    for vid, src in graph.inputs:
        kind = src[0]
        if kind == "tensor" and id(src[1].__torcia_data__) not in param_ids:
            arr = src[1].__torcia_data__
            consts.append(arr)
            n = len(ints)
            ints.extend(arr.shape)
            owners.extend([("input", vid)] * (len(ints) - n))
            skeleton.append(("const", vid, arr.ndim, str(arr.dtype)))
        else:
            key = src[1] if kind == "arg" else id(src[1].__torcia_data__)
            skeleton.append((kind, vid, key))
    for node in graph.nodes:
        n = len(ints)
        args = tuple(_split_ref(r, ints, others) for r in node.args)
        params = tuple((k, _split_ref(r, ints, others)) for k, r in node.params.items())
        owners.extend([("node", node)] * (len(ints) - n))
        skeleton.append((node.kind, node.op, tuple(node.outs), node.tuple_out, args, params))
    skeleton.append(("out", repr(_shape_free(graph.outputs))))
    return Summary(tracer, skeleton, ints, owners, others, consts)


def _shape_free(outputs):
    tag = outputs[0]
    if tag in ("v", "c"):
        return outputs[:2]
    if tag == "dict":
        return ("dict", tuple((k, _shape_free(v)) for k, v in outputs[1].items()))
    return (tag, tuple(_shape_free(x) for x in outputs[1]))


def differ(base: Summary, other: Summary) -> str | None:
    """Why two captures are not the same program up to their integers (None if they are)."""
    for a, b in zip(base.skeleton, other.skeleton):
        if a != b:
            return _describe(base, a, b)
    if len(base.skeleton) != len(other.skeleton):
        return (f"the program has {len(other.skeleton)} steps instead of "
                f"{len(base.skeleton)}")
    for a, b in zip(base.others, other.others):
        if not _same_other(a, b):
            return f"a constant of the program changed ({_short(a)} -> {_short(b)})"
    return None


def _short(x) -> str:
    if isinstance(x, np.ndarray):
        return f"array of shape {list(x.shape)}"
    return repr(x)[:40]


def _describe(base: Summary, a, b) -> str:
    where = ""
    for node in base.tracer.graph.nodes:
        if a[:2] == (node.kind, node.op):
            where = base.tracer.locs.get(id(node), "")
            break
    what = f"op {a[1]!r}" if a[0] in ("call", "cast", "copy_") else "an input"
    got = f"op {b[1]!r}" if b[0] in ("call", "cast", "copy_") else "an input"
    return located(f"the program changes: {what} became {got}", where)


# ---------------------------------------------------------------------------------------
# fitting
# ---------------------------------------------------------------------------------------


def fit_values(points: dict, base: list, signs: list, dims_of: frozenset):
    """The polynomial through ``points`` (corner -> value): each corner a frozenset of
    the dims moved from ``base`` by ``signs`` (one step), over the dims in ``dims_of``.
    Returns an int (no dependence) or a :class:`Sym`."""
    order = sorted(dims_of)
    if not order:
        return points[frozenset()]
    coefs: dict = {}
    for r in range(len(order) + 1):
        for subset in itertools.combinations(order, r):
            s = frozenset(subset)
            # Moebius inversion: the coefficient of prod(delta_i for i in s), where
            # delta_i = (size_i - base_i) * sign_i is 0 at the base and 1 one step away
            g = sum((-1) ** (len(s) - len(t)) * points[frozenset(t)]
                    for k in range(len(s) + 1) for t in itertools.combinations(subset, k))
            if g == 0:
                continue
            # expand g * prod(sign_i * size_i - sign_i * base_i) into monomials of sizes
            for k in range(len(subset) + 1):
                for chosen in itertools.combinations(subset, k):
                    c = g
                    for i in subset:
                        c *= signs[i] if i in chosen else -signs[i] * base[i]
                    coefs[chosen] = coefs.get(chosen, 0) + c
    terms = [(c, m) for m, c in coefs.items() if c]
    if all(not m for _, m in terms):
        return sum(c for c, _ in terms)
    return Sym(terms)


def step_values(info: DimInfo) -> tuple[int, int, int]:
    """The sizes a dimension is captured at: the example's, one step away (+1, else -1),
    and a check two steps away (or None when its range leaves no room)."""
    a = info.example
    lo = max(info.min, 2)  # sizes 0 and 1 broadcast: never probe them
    if a + 1 <= info.max:
        b = a + 1
        c = a + 3 if a + 3 <= info.max else (a - 1 if a - 1 >= lo else None)
    elif a - 1 >= lo:
        b = a - 1
        c = a - 3 if a - 3 >= lo else None
    else:
        return a, None, None
    return a, b, c


def fit_size(captures: dict, steps: list, vid: int, axis: int, n: int):
    """The size ``axis`` of value ``vid`` (``n`` in the base capture) fitted over the
    captures :func:`torcia.export._fit` made, or None where it is not of that form."""
    def at(key):
        meta = captures[key].tracer.graph.meta.get(vid)
        return None if meta is None or len(meta[0]) <= axis else meta[0][axis]

    singles = [k for k in range(len(steps)) if frozenset([k]) in captures]
    depends = frozenset(k for k in singles if at(frozenset([k])) != n)
    points = {key: at(key) for key in captures
              if all(isinstance(k, int) for k in key) and key <= depends}
    if len(points) < 2 ** len(depends) or any(v is None for v in points.values()):
        return None
    fitted = fit_values(points, [s[0] for s in steps],
                        [s[1] - s[0] if s[1] is not None else 1 for s in steps], depends)
    check = frozenset(["check"])
    if check in captures and depends:
        sizes = [s[2] if s[2] is not None else s[0] for s in steps]
        want = fitted.value(sizes) if isinstance(fitted, Sym) else fitted
        if want != at(check):
            return None
    return fitted
