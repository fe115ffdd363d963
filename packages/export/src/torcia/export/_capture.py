"""One capture of a module's forward: torcia-compiler's tracer, with the line of user code
each op came from, and errors (not graph breaks) where the program cannot be expressed."""

from __future__ import annotations

import dataclasses
import linecache
import sys
import warnings

import numpy as np

import torcia
from torcia import nn
from torcia.compiler.capture import Tracer
from torcia.library import Tensor

#: Modules whose frames are the framework's machinery rather than the model's code: an
#: error names the innermost frame outside them (the model's own ``forward``, or the
#: torcia.nn layer it called).
# torcia.overrides: once __torch_function__ is switched on, every public function runs
# through its dispatch
_MACHINERY = ("torcia._", "torcia.library", "torcia.autograd", "torcia.compiler",
              "torcia.export", "torcia.jit", "torcia.ops", "torcia.backend", "torcia.amp",
              "torcia.overrides", "torcia.nn.functional", "torcia.nn.modules.module")


class ExportError(RuntimeError):
    """What :func:`torcia.export.export` cannot express: Python reading a tensor's values
    (data-dependent control flow, ``.item()``), an op that cannot be saved, a dynamic
    size the program specialises. The message names the line of the model's code.

    Examples
    --------
    >>> import torcia
    >>> issubclass(torcia.export.ExportError, RuntimeError)
    True
    """


def _is_machinery(name: str) -> bool:
    return name == "torcia" or any(name == m or name.startswith(m + ".") or
                                   (m.endswith("_") and name.startswith(m))
                                   for m in _MACHINERY)


def user_frame(depth: int = 1) -> str:
    """``File "...", line N, in fn`` and the source line of the innermost frame of the
    model's code on the current stack ("" when there is none)."""
    frame = sys._getframe(depth)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if not _is_machinery(name):
            code = frame.f_code
            line = linecache.getline(code.co_filename, frame.f_lineno).strip()
            where = f'File "{code.co_filename}", line {frame.f_lineno}, in {code.co_name}'
            return f"{where}\n    {line}" if line else where
        frame = frame.f_back
    return ""


def located(message: str, loc: str) -> str:
    return f"{message}\n\nThe following call raised this error:\n  {loc}" if loc else message


class ExportTracer(Tracer):
    """The compiler's tracer, refusing graph breaks, recording where each op and each
    tensor made outside the traced ops came from."""

    def __init__(self, on_read="error"):
        super().__init__(fullgraph=True)
        self.locs: dict[int, str] = {}  # id(node) -> user line
        self.input_locs: dict[int, str] = {}  # value id of an input -> user line
        self.reads = on_read  # "error", or the Warning class to warn with
        self.warned: set = set()
        # the calls of the model's submodules, in the order they started: [fqn, first
        # node, end node, argument leaves, their spec, output leaves, their spec, depth]
        self.calls: list = []
        self.open_calls: list = []

    def fail(self, reason: str) -> None:
        raise ExportError(located(f"torcia.export cannot capture this program: {reason}",
                                  user_frame(2)))

    def on_read(self, tensor, how):
        if not self._tracing():
            return
        if self.reads != "error":
            loc = user_frame(2)
            if loc not in self.warned:
                self.warned.add(loc)
                warnings.warn(located(
                    f"Python reads the values of a tensor (Tensor.{how}()): the program "
                    "takes them as constants, so it may not generalize to other inputs "
                    "(a branch taken here is the branch it always takes)", loc),
                    self.reads, stacklevel=3)
            return
        raise ExportError(located(
            f"Could not guard on data-dependent expression: Python reads the values of a "
            f"tensor (Tensor.{how}()), so what the program does next depends on the data "
            "(data-dependent control flow). An exported program is one graph for every "
            "input: compute both branches and select with torcia.where, or move the "
            "decision out of forward.", user_frame(2)))

    def _input(self, arr, source):
        vid = super()._input(arr, source)
        self.input_locs[vid] = user_frame(2)
        return vid

    def around_kernel(self, op, kernel, device):
        traced = super().around_kernel(op, kernel, device)
        if traced is kernel:
            return kernel

        def with_location(*args, **params):
            first = len(self.graph.nodes)
            out = traced(*args, **params)
            loc = user_frame(2)
            for node in self.graph.nodes[first:]:
                self.locs[id(node)] = loc
            return out

        return with_location


    def enter_module(self, fqn: str, args: tuple) -> None:
        leaves: list = []
        spec = flatten((args, {}), leaves)
        call = [fqn, len(self.graph.nodes), None, leaves, spec, None, None,
                len(self.open_calls)]
        self.calls.append(call)
        self.open_calls.append(call)

    def exit_module(self, output) -> None:
        call = self.open_calls.pop()
        leaves: list = []
        call[6] = flatten(output, leaves)
        call[2], call[5] = len(self.graph.nodes), leaves


#: serialized type name -> dataclass, and back: the dataclasses :func:`register_dataclass`
#: lets programs take and return
_DATACLASSES: dict[str, type] = {}
_DATACLASS_NAMES: dict[type, str] = {}

#: the key under which a registered dataclass's type name travels through the compiler's
#: capture, which rebuilds tuples, lists and dicts only
DATACLASS_KEY = "$torcia.export.dataclass"


def register_dataclass(cls: type, *, serialized_type_name: str | None = None) -> None:
    """Let exported programs take and return instances of dataclass ``cls``
    (``torch.export.register_dataclass``): their fields are flattened like a dict's,
    tensors becoming the program's inputs, other values its guarded constants.
    ``serialized_type_name`` (by default the class's ``module.qualname``) names it in a
    saved program; the process that loads the program registers it again under that
    name.

    Examples
    --------
    >>> import dataclasses
    >>> import torcia
    >>> @dataclasses.dataclass
    ... class Batch:
    ...     x: torcia.Tensor
    ...     scale: float = 2.0
    >>> torcia.export.register_dataclass(Batch)
    >>> class Net(torcia.nn.Module):
    ...     def forward(self, b: Batch):
    ...         return Batch(b.x.relu() * b.scale, b.scale)
    >>> ep = torcia.export.export(Net(), (Batch(torcia.tensor([-1.0, 3.0])),))
    >>> ep.module()(Batch(torcia.tensor([2.0, -5.0])))
    Batch(x=tensor([4., 0.]), scale=2.0)
    """
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise TypeError(f"register_dataclass expects a dataclass type, got {cls!r}")
    name = serialized_type_name or f"{cls.__module__}.{cls.__qualname__}"
    registered = _DATACLASSES.get(name)
    if registered is not None and registered is not cls:
        raise ValueError(f"{name!r} is already registered for {registered!r}")
    _DATACLASSES[name] = cls
    _DATACLASS_NAMES[cls] = name


def _dataclass_fields(obj) -> list:
    return [f.name for f in dataclasses.fields(obj) if f.init]


def _registered_dataclass(name: str) -> type:
    cls = _DATACLASSES.get(name)
    if cls is None:
        raise TypeError(f"the program uses dataclass {name!r}, which is not registered in "
                        "this process: call torcia.export.register_dataclass on it (with the "
                        "same serialized_type_name) before loading or running the program")
    return cls


def as_tree(obj):
    """``obj`` with each registered dataclass as a dict of its fields (its type name under
    :data:`DATACLASS_KEY`): how outputs pass through the compiler's capture."""
    if type(obj) in _DATACLASS_NAMES:
        return {DATACLASS_KEY: _DATACLASS_NAMES[type(obj)],
                **{k: as_tree(getattr(obj, k)) for k in _dataclass_fields(obj)}}
    if isinstance(obj, (list, tuple)):
        return type(obj)(as_tree(x) for x in obj)
    if isinstance(obj, dict):
        return {k: as_tree(v) for k, v in obj.items()}
    return obj


def from_tree(obj):
    """The inverse of :func:`as_tree`."""
    if isinstance(obj, dict):
        fields = {k: from_tree(v) for k, v in obj.items() if k != DATACLASS_KEY}
        if DATACLASS_KEY in obj:
            return _registered_dataclass(obj[DATACLASS_KEY])(**fields)
        return fields
    if isinstance(obj, (list, tuple)):
        return type(obj)(from_tree(x) for x in obj)
    return obj


def flatten(obj, leaves: list):
    """``obj`` (nested tuples, lists, dicts and registered dataclasses) as a spec, its
    leaves appended to ``leaves``: a tensor leaf is ``("T",)``, any other ``("=",)``."""
    if isinstance(obj, Tensor):
        leaves.append(obj)
        return ("T",)
    if type(obj) in _DATACLASS_NAMES:
        return ("dataclass", (_DATACLASS_NAMES[type(obj)], tuple(
            (k, flatten(getattr(obj, k), leaves)) for k in _dataclass_fields(obj))))
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__, tuple(flatten(x, leaves) for x in obj))
    if isinstance(obj, dict):
        return ("dict", tuple((k, flatten(obj[k], leaves)) for k in obj))
    leaves.append(obj)
    return ("=",)


def unflatten(spec, leaves):
    """The inverse of :func:`flatten` (``leaves`` an iterator)."""
    tag = spec[0]
    if tag in ("T", "="):
        return next(leaves)
    if tag == "dict":
        return {k: unflatten(s, leaves) for k, s in spec[1]}
    if tag == "dataclass":
        name, fields = spec[1]
        return _registered_dataclass(name)(**{k: unflatten(s, leaves) for k, s in fields})
    items = [unflatten(s, leaves) for s in spec[1]]
    return tuple(items) if tag == "tuple" else items


def capture(module, args: tuple, kwargs: dict, on_read="error"):
    """Run ``module(*args, **kwargs)`` once under :class:`ExportTracer` with gradients off.

    Returns ``(tracer, leaves)``: the tracer holds the graph (its ``outputs`` set), the
    node locations and the inputs' locations; ``leaves`` are the flattened arguments.
    """
    leaves: list = []
    flatten((args, kwargs), leaves)
    tracer = ExportTracer(on_read)
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, Tensor):
            tracer.register(leaf, ("arg", i))
    names = {id(m): name for name, m in module.named_modules() if name}

    def enter(mod, call_args):
        if id(mod) in names and tracer._tracing():
            tracer.enter_module(names[id(mod)], call_args)

    def leave(mod, call_args, output):
        if id(mod) in names and tracer._tracing():
            tracer.exit_module(output)

    handles = [nn.register_module_forward_pre_hook(enter),
               nn.register_module_forward_hook(leave)]
    try:
        with torcia.no_grad(), tracer:
            out = module(*args, **kwargs)
            tracer.graph.outputs = tracer.output(as_tree(out))
    finally:
        for h in handles:
            h.remove()
    return tracer, leaves


def resampled(t: Tensor, shape, rng: np.random.Generator | None) -> Tensor:
    """A tensor of ``shape`` and ``t``'s dtype whose values are drawn from ``t``'s own
    (so that token ids stay valid ids, positive inputs positive); without ``rng``, its
    values repeated in order."""
    pool = t.__torcia_data__.reshape(-1)
    if pool.size == 0:
        return torcia.from_numpy(np.zeros(shape, t.__torcia_data__.dtype))
    n = int(np.prod(shape, dtype=np.int64))
    picked = pool[rng.integers(0, pool.size, size=n)] if rng is not None else np.resize(pool, n)
    return torcia.from_numpy(np.ascontiguousarray(picked.reshape(shape)))
