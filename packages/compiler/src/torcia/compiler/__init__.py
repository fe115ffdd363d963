"""torcia.compile: capture a function or module once, replay it as one generated program.

:func:`compile` (also ``torcia.compile``) wraps a function or a :class:`torcia.nn.Module`.
Its first call runs the function eagerly under a tracing dispatch mode that records every
kernel, the forward and, when the function calls ``loss.backward()``, the backward too
(the joint graph AOTAutograd builds) into a :class:`~torcia.compiler.graph.Graph`. A
backend (``"eager"``: replay only; ``"inductor"``: dead-code elimination, CSE, constant
folding and elementwise fusion into generated C++/OpenMP kernels) turns the graph into the
program later calls run, with no per-op dispatch. When the function's outputs require
grad instead (a compiled module's forward), the backward of those outputs is traced too and
the joint graph split into a forward and a backward program: the outputs' ``backward()``
then runs the captured, fused backward as one autograd node.

The program is guarded: tensor arguments' shapes, dtypes, devices and ``requires_grad``,
the other arguments' values, grad mode, and the plain attributes, parameters and buffers
of the modules involved. A call that fails a guard retraces (up to
:data:`recompile_limit` programs per function, then eager), with the reason in the
``guards`` log. Python reading a tensor's values (``if t > 0``, ``.item()``, ``.tolist()``)
breaks the graph: the program is split there and the values read guard the rest (other
values trace another program, the other branch); ``fullgraph=True`` raises
:class:`Unsupported` instead. Anything else capture cannot reproduce falls back to
eager the same way, never to a wrong answer.

Logs: ``TORCIA_LOGS=graph,fusion,guards`` (or :func:`set_logs`) prints the captured
graphs, the fused kernels' source and the guard failures to stderr.

Examples
--------
>>> import torcia
>>> w = torcia.ones(3, requires_grad=True)
>>> @torcia.compile(backend="eager")
... def step(x):
...     loss = ((x * w).tanh() ** 2).sum()
...     loss.backward()
...     return loss
>>> round(step(torcia.ones(3)).item(), 4)  # traced (and run eagerly)
1.7401
>>> round(step(torcia.ones(3)).item(), 4), [round(g, 4) for g in w.grad.tolist()]
(1.7401, [1.2794, 1.2794, 1.2794])
"""

from __future__ import annotations

import functools
import os
import sys
import weakref

import numpy as np

import torcia
from torcia import nn, plugins
from torcia.autograd import Function, once_differentiable
from torcia.compiler import hookspecs
from torcia.compiler.capture import Tracer, Unsupported, accumulate
from torcia.compiler.graph import Graph, Node
from torcia.compiler.inductor import draws
from torcia.compiler.replay import DataGuardFailed, generate, same_values
from torcia.library import (
    Tensor,
    active_modes,
    dtype_from_numpy,
    get_backend,
    host_array,
    tensor_of,
)
from torcia.library import call as _call
from torcia.plugins import hookimpl

plugins.add_hookspecs(hookspecs)

__all__ = ["Graph", "Node", "OptimizedModule", "Unsupported", "allow_in_graph",
           "assume_constant_result", "backends", "compile", "disable", "hookimpl",
           "is_compiling", "is_dynamo_compiling", "is_exporting", "list_backends",
           "recompile_limit", "reset", "set_logs"]

#: programs kept per compiled function before it runs eagerly (torch._dynamo's
#: ``recompile_limit``)
recompile_limit = 8

backends = plugins.Registry("compile backend", "torcia_register_compile_backends")

_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
_LOG_NAMES = ("graph", "fusion", "guards")
_logs: set[str] | None = None
_compiled = weakref.WeakSet()  # every live compiled function, for reset()


def set_logs(*, graph: bool = False, fusion: bool = False, guards: bool = False) -> None:
    """Turn on the compiler's logs (``TORCIA_LOGS=graph,fusion,guards`` does the same).

    Examples
    --------
    >>> import torcia.compiler
    >>> torcia.compiler.set_logs(guards=True)
    >>> torcia.compiler.set_logs()
    """
    global _logs
    _logs = {n for n, on in (("graph", graph), ("fusion", fusion), ("guards", guards)) if on}


def logging_on(name: str) -> bool:
    """Whether log ``name`` ("graph", "fusion" or "guards") is on."""
    global _logs
    if _logs is None:
        env = os.environ.get("TORCIA_LOGS", "")
        _logs = {n.strip() for n in env.split(",") if n.strip() in _LOG_NAMES}
    return name in _logs


def log(name: str, text: str) -> None:
    if logging_on(name):
        print(f"[torcia.compile:{name}] {text}", file=sys.stderr)


def list_backends() -> list[str]:
    """The names ``backend=`` accepts (``torch._dynamo.list_backends()``).

    Examples
    --------
    >>> import torcia.compiler
    >>> {"eager", "inductor"} <= set(torcia.compiler.list_backends())
    True
    """
    return backends.names()


def reset() -> None:
    """Forget every captured program (``torch.compiler.reset()``); the next call of a
    compiled function traces again.

    Examples
    --------
    >>> import torcia.compiler
    >>> torcia.compiler.reset()
    """
    for c in _compiled:
        c._entries.clear()


def compile(model=None, *, fullgraph: bool = False, dynamic: bool | None = None,
            backend="inductor", mode: str | None = None, options: dict | None = None,
            disable: bool = False):
    """Compile a function or module: ``torch.compile``'s signature.

    Parameters
    ----------
    model : callable or Module, optional
        What to compile; omitted, ``compile`` returns a decorator.
    fullgraph : bool
        Raise :class:`Unsupported` where capture would break the graph.
    dynamic : bool or None
        Accepted for PyTorch compatibility; programs are always specialised to shapes, a
        new shape retraces (``dynamic=False``'s behaviour).
    backend : str or callable
        A registered backend name (:func:`list_backends`) or a callable
        ``backend(graph, example_inputs) -> Graph``.
    mode, options
        PyTorch's modes are accepted (they select nothing else here); ``options`` is
        handed to the backend.
    disable : bool
        Return ``model`` unchanged.

    Returns
    -------
    A callable with ``model``'s signature (an :class:`OptimizedModule` for a module).

    Examples
    --------
    >>> import torcia
    >>> f = torcia.compile(lambda x: (x.sin() * 2 + 1).relu())
    >>> f(torcia.zeros(2)).tolist()
    [1.0, 1.0]
    """
    if mode not in _MODES:
        raise RuntimeError(f"Unrecognized mode={mode}, should be one of: "
                           f"{', '.join(m for m in _MODES if m)}")
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be "
                           "specified at the same time.")
    if dynamic not in (None, True, False):
        raise TypeError(f"dynamic must be None or a bool, got {dynamic!r}")
    if isinstance(backend, str):
        backends.get(backend)  # an unknown name fails here, as torch.compile does
    elif not callable(backend):
        raise TypeError(f"backend must be a name or a callable, got {type(backend).__name__}")

    def wrap(m):
        if disable:
            return m
        if isinstance(m, nn.Module):
            return OptimizedModule(m, fullgraph, backend, options)
        if not callable(m):
            raise RuntimeError(f"torcia.compile expects a callable or a Module, got "
                               f"{type(m).__name__}")
        return _CompiledFunction(m, fullgraph, backend, options)

    return wrap if model is None else wrap(model)


# ---------------------------------------------------------------------------------------
# what libraries mark for the compiler (torch.compiler's decorators and predicates)
# ---------------------------------------------------------------------------------------


def _tracer() -> Tracer | None:
    for mode in active_modes():
        if isinstance(mode, Tracer) and mode._tracing():
            return mode
    return None


def is_compiling() -> bool:
    """Whether this thread is being captured by :func:`compile` right now (libraries skip
    Python-side checks then, as under ``torch.compile``).

    Examples
    --------
    >>> import torcia
    >>> torcia.compiler.is_compiling()
    False
    >>> torcia.compile(lambda x: x + torcia.compiler.is_compiling())(torcia.zeros(1))
    tensor([1.])
    """
    return _tracer() is not None


is_dynamo_compiling = is_compiling


def is_exporting() -> bool:
    """Whether an export traces this thread: False, since no export runs under
    :func:`compile`'s capture (PyTorch's ``torch.compiler.is_exporting``)."""
    return False


def allow_in_graph(fn):
    """Mark ``fn`` to be captured whole (``torch.compiler.allow_in_graph``): capture
    records the kernels every Python function runs, so ``fn`` is returned unchanged.

    Examples
    --------
    >>> import torcia
    >>> f = torcia.compiler.allow_in_graph(torcia.sin)
    >>> f is torcia.sin
    True
    """
    if not callable(fn):
        raise TypeError(f"allow_in_graph expects a callable, got {type(fn).__name__}")
    return fn


def assume_constant_result(fn):
    """``torch.compiler.assume_constant_result``: ``fn`` is returned unchanged (a captured
    program guards on the Python values it depends on anyway)."""
    return fn


def disable(fn=None, recursive: bool = True, *, reason: str | None = None):
    """Keep ``fn`` out of capture (``torch.compiler.disable``): when a compiled function
    calls it, that call signature runs eagerly, never from a captured program, so the
    Python side effects of ``fn`` happen on every call.

    Usable as ``@disable`` and ``@disable(recursive=False)``.

    Examples
    --------
    >>> import torcia
    >>> calls = []
    >>> @torcia.compiler.disable
    ... def log(x):
    ...     calls.append(1)
    ...     return x
    >>> f = torcia.compile(lambda x: log(x * 2))
    >>> _ = f(torcia.ones(1)); _ = f(torcia.ones(1))
    >>> len(calls)
    2
    """
    if fn is None:
        return functools.partial(disable, recursive=recursive, reason=reason)

    @functools.wraps(fn)
    def eager(*args, **kwargs):
        tracer = _tracer()
        if tracer is not None:
            tracer.fail(f"{getattr(fn, '__qualname__', fn)} is marked "
                        f"torch.compiler.disable{f' ({reason})' if reason else ''}")
        return fn(*args, **kwargs)

    eager._torchdynamo_disable = True
    return eager


# ---------------------------------------------------------------------------------------
# guards
# ---------------------------------------------------------------------------------------


def _flatten(obj, out):
    if isinstance(obj, Tensor):
        out.append(obj)
        return ("T",)
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__, tuple(_flatten(x, out) for x in obj))
    if isinstance(obj, dict):
        return ("dict", tuple((k, _flatten(v, out)) for k, v in sorted(obj.items())))
    try:
        hash(obj)
    except TypeError:
        return ("id", id(obj))
    return ("=", type(obj), obj)


def _tensor_key(t: Tensor):
    data = t.__torcia_data__
    return (data.shape, data.dtype, t.__torcia_device__, t.__torcia_requires_grad__)


def _is_optimizer(obj) -> bool:
    # by name: torcia-compiler does not depend on torcia-optim
    return any(c.__name__ == "Optimizer" for c in type(obj).__mro__)


def _modules_of(fn, kind) -> list:
    """The objects of ``kind`` (a class or a predicate) a function reaches through its
    closure, globals or ``self``."""
    match = (lambda v: isinstance(v, kind)) if isinstance(kind, type) else kind
    found = []
    target = getattr(fn, "__func__", fn)
    owner = getattr(fn, "__self__", None)
    if owner is not None and match(owner):
        found.append(owner)
    code = getattr(target, "__code__", None)
    if code is None:
        return found
    for cell in getattr(target, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:
            continue
        if match(value):
            found.append(value)
    glob = getattr(target, "__globals__", {})
    for name in code.co_names:
        value = glob.get(name)
        if value is not None and match(value):
            found.append(value)
    return found


def _module_state(modules) -> tuple:
    """What a program assumes of ``modules``: each submodule's plain attributes and the
    identity of its parameters and buffers."""
    # run on every call: one pass per module, exact types looked up in a set first
    state = []
    for root in modules:
        for name, m in root.named_modules():
            attrs = tuple([(k, v) for k, v in m.__dict__.items()
                           if type(v) in _PLAIN or (type(v) not in _NOT_PLAIN
                                                    and isinstance(v, _PLAIN_BASES))])
            state.append((name, attrs, (
                tuple([(k, id(v)) for k, v in m._parameters.items()]),
                tuple([(k, id(v)) for k, v in m._buffers.items()]))))
    return tuple(state)


_PLAIN = frozenset({bool, int, float, str, type(None)})
_PLAIN_BASES = (bool, int, float, str)
_NOT_PLAIN = frozenset({dict, list, tuple, set, type(lambda: 0)})


def _why(old, new) -> str:
    """The first difference between two guard keys, in words."""
    (osig, otensors, ograd, ostate), (nsig, ntensors, ngrad, nstate) = old, new
    if ograd != ngrad:
        return f"grad mode changed ({ograd} -> {ngrad})"
    if len(otensors) != len(ntensors):
        return f"number of tensor arguments changed ({len(otensors)} -> {len(ntensors)})"
    for i, (a, b) in enumerate(zip(otensors, ntensors)):
        for what, x, y in zip(("shape", "dtype", "device", "requires_grad"), a, b):
            if x != y:
                if what == "dtype":
                    x, y = dtype_from_numpy(x), dtype_from_numpy(y)
                return f"tensor argument {i}: {what} changed ({x} -> {y})"
    if osig != nsig:
        return "a non-tensor argument changed"
    for (name, oattrs, oten), (_, nattrs, nten) in zip(ostate, nstate):
        where = name or "the module"
        for (k, x), (_, y) in zip(oattrs, nattrs):
            if x != y:
                return f"attribute {where}.{k} changed ({x!r} -> {y!r})"
        if oattrs != nattrs:
            return f"attributes of {where} were added or removed"
        if oten != nten:
            return f"a parameter or buffer of {where} was replaced"
    return "a tensor the function read changed shape, dtype or requires_grad"


class _Entry:
    """One captured program and what it assumes."""

    def __init__(self, key, graph=None, run=None, reason=None):
        self.key = key
        self.graph = graph
        self.run = run
        self.eager_reason = reason  # not None: this signature runs eagerly
        self.sources: list = []  # (source, shape, dtype) of the graph's non-argument inputs
        self.autograd = False
        self.joint: _Joint | None = None  # a forward and a backward program
        self.rng = False  # random ops run before a graph break (undone when it fails)
        self.checked = False  # the first replay runs beside eager (see _check)

    def inputs_ok(self) -> bool:
        for src, shape, dtype, requires_grad in self.sources:
            t = src[1]
            held = t if src[0] == "tensor" else t.grad
            data = None if held is None else held.__torcia_data__
            if data is None or data.shape != shape or data.dtype != dtype or \
                    t.__torcia_requires_grad__ != requires_grad:
                return False
        return True


class _CompiledFunction:
    def __init__(self, fn, fullgraph, backend, options, modules=None):
        self._fn = fn
        self._fullgraph = fullgraph
        self._backend = backend
        self._options = options or {}
        self._modules = modules if modules is not None else _modules_of(fn, nn.Module)
        self._optimizers = [] if modules is not None else _modules_of(fn, _is_optimizer)
        self._entries: list[_Entry] = []
        self._warned_limit = False
        functools.update_wrapper(self, fn)
        _compiled.add(self)

    def _key(self, args, kwargs, flat):
        sig = _flatten((args, kwargs), flat)
        return (sig, tuple(_tensor_key(t) for t in flat), torcia.is_grad_enabled(),
                _module_state(self._modules))

    def __call__(self, *args, **kwargs):
        flat: list = []
        key = self._key(args, kwargs, flat)
        data_changed = None
        for entry in self._entries:
            if entry.key == key and entry.inputs_ok():
                if entry.eager_reason is not None:
                    return self._fn(*args, **kwargs)
                try:
                    if not entry.checked:
                        if entry.joint is not None:
                            return self._check_joint(entry, flat, args, kwargs)
                        return self._check(entry, flat, args, kwargs)
                    return self._replay(entry, flat)
                except DataGuardFailed as exc:
                    data_changed = str(exc)  # another program may hold the other branch
        if data_changed is not None and len(self._entries) < recompile_limit:
            log("guards", f"recompiling {self._name()}: {data_changed}")
            return self._trace(key, flat, args, kwargs)
        if self._entries:
            if len(self._entries) >= recompile_limit:
                if not self._warned_limit:
                    self._warned_limit = True
                    log("guards", f"{self._name()}: hit recompile_limit ({recompile_limit}); "
                        "running eagerly from now on")
                return self._fn(*args, **kwargs)
            why = _why(self._entries[-1].key, key) if self._entries[-1].key != key else \
                "a tensor the function read changed shape, dtype or requires_grad"
            log("guards", f"recompiling {self._name()}: {why}")
        return self._trace(key, flat, args, kwargs)

    def _name(self) -> str:
        return getattr(self._fn, "__qualname__", type(self._fn).__name__)

    def _trace(self, key, flat, args, kwargs):
        tracer = Tracer(self._fullgraph)
        for i, t in enumerate(flat):
            tracer.register(t, ("arg", i))
        fn = self._fn
        owner = getattr(fn, "__self__", None)
        if owner is not None and any(owner is o for o in self._optimizers):
            # torcia.compile(opt.step): the method as patched below
            name = fn.__name__
            fn = lambda *a, **k: getattr(owner, name)(*a, **k)  # noqa: E731
        patched = _patch_optimizers(tracer, self._optimizers)
        try:
            with tracer:
                out = fn(*args, **kwargs)
                graph = tracer.graph
                graph.outputs = tracer.output(out)
                joint = None
                if tracer.broken is None and torcia.is_grad_enabled() and not graph.grads \
                        and not any(n.kind == "opaque" for n in graph.nodes) \
                        and graph.outputs_require_grad():
                    joint = _trace_backward(tracer, out, flat)
        finally:
            for opt, name, had, old in patched:
                if had:
                    opt.__dict__[name] = old
                else:
                    opt.__dict__.pop(name, None)
        if tracer.broken is not None:
            log("guards", f"{self._name()}: {tracer.broken}")
            self._entries.append(_Entry(key, reason=tracer.broken))
            return out
        entry = _Entry(key, graph)
        entry.sources = [(src, graph.meta[v][0], graph.meta[v][1], src[1].__torcia_requires_grad__)
                         for v, src in graph.inputs if src[0] not in ("arg", "gout")]
        breaks = [i for i, n in enumerate(graph.nodes) if n.kind == "guard"]
        if breaks:
            before = graph.nodes[:breaks[-1]]
            if any(n.kind in ("copy_", "opaque") for n in before):
                reason = ("graph break after an in-place write or an optimizer call (a "
                          "replay stopped at the break could not undo it): this signature "
                          "runs eagerly")
                log("guards", f"{self._name()}: {reason}")
                self._entries.append(_Entry(key, reason=reason))
                return out
            entry.rng = any(draws(n) for n in before)
            log("guards", f"{self._name()}: {len(breaks)} graph break(s) (Python reads "
                f"tensor values): compiled in {len(breaks) + 1} pieces, each break guarded "
                "by the values read")
        if joint is not None:
            self._compile_joint(entry, joint, flat)
            self._entries.append(entry)
            return out
        entry.autograd = torcia.is_grad_enabled() and not graph.grads and \
            not any(n.kind == "opaque" for n in graph.nodes) and graph.outputs_require_grad()
        if entry.autograd and not all(
                n.kind in ("call", "cast", "guard") and all(r[0] != "l" for r in n.args)
                and all(r[0] == "c" for r in n.params.values()) for n in graph.nodes):
            reason = "a forward-only graph with in-place writes or list arguments whose " \
                "outputs require grad: running eagerly"
            log("guards", f"{self._name()}: {reason}")
            self._entries.append(_Entry(key, reason=reason))
            return out
        log("graph", f"captured {self._name()} ({len(graph.nodes)} ops):\n{graph.tabular()}")
        if not entry.autograd:
            backend = backends.get(self._backend) if isinstance(self._backend, str) \
                else self._backend
            examples = [_source_array(src, flat) for _, src in graph.inputs]
            graph = backend(graph, examples, **self._options)
            entry.graph = graph
            results = sorted(graph.output_values())
            run, source = generate(graph, results)
            log("graph", f"program of {self._name()}:\n{source}")
            entry.run = (run, results)
        self._entries.append(entry)
        return out

    def _check(self, entry, flat, args, kwargs):
        """The first replay, on new values: run eagerly too and compare, so that a value
        capture took for a constant (made outside the dispatched ops) sends this signature
        to eager instead of giving a wrong answer."""
        graph = entry.graph
        if any(n.kind == "opaque" for n in graph.nodes):
            entry.checked = True
            return self._replay(entry, flat)  # an optimizer step cannot run twice
        leaves = list({id(leaf): leaf for leaf, _ in graph.grads}.values())
        saved = [(leaf, leaf.grad, None if leaf.grad is None else leaf.grad.__torcia_data__.copy())
                 for leaf in leaves]
        written = _written_inputs(graph, flat)
        before = [a.copy() for a in written]
        rng = torcia.get_rng_state()
        # the program first: a graph break's guard that fails leaves nothing changed, and
        # the caller traces the other branch
        got = self._replay(entry, flat)
        entry.checked = True
        got_grads = [None if leaf.grad is None else leaf.grad.__torcia_data__.copy()
                     for leaf in leaves]
        got_written = _undo_writes(written, before)
        for leaf, grad, data in saved:
            leaf.grad = grad
            if grad is not None:
                grad.__torcia_data__[...] = data
        torcia.set_rng_state(rng)
        want = self._fn(*args, **kwargs)
        want_grads = [None if leaf.grad is None else leaf.grad.__torcia_data__ for leaf in leaves]
        if _same(_tensors(got), _tensors(want)) and _same(got_grads, want_grads) \
                and _same(got_written, written):
            return got
        entry.eager_reason = ("its first replay differed from eager (a value was computed "
                              "outside the dispatched ops); this signature runs eagerly")
        entry.graph = entry.run = None
        log("guards", f"{self._name()}: {entry.eager_reason}")
        return want

    def _compile_joint(self, entry, joint, flat):
        """Partition the joint graph into a forward program (which also returns what the
        backward reads: the saved activations) and a backward program, and compile both
        with the backend."""
        graph = entry.graph
        fwd_nodes, bwd_nodes = graph.nodes[:joint.n_forward], graph.nodes[joint.n_forward:]
        gouts = set(joint.gouts)
        made = {o for n in bwd_nodes for o in n.outs}
        saved = list(dict.fromkeys(
            v for v in [*(v for n in bwd_nodes for v in n.value_args()),
                        *(g for g in joint.grads if g is not None)]
            if v not in made and v not in gouts))
        fwd = Graph(nodes=fwd_nodes, meta=graph.meta, n_values=graph.n_values,
                    device=graph.device, outputs=("tuple", [graph.outputs,
                                       ("tuple", [("v", v, False) for v in saved])]))
        read = {v for n in fwd_nodes for v in n.value_args()} | fwd.output_values()
        fwd.inputs = [(v, src) for v, src in graph.inputs
                      if src[0] != "gout" and v in read]
        bwd = Graph(nodes=bwd_nodes, meta=graph.meta, n_values=graph.n_values,
                    device=graph.device, inputs=[(v, ("saved", j)) for j, v in enumerate(saved)]
                    + [(v, ("gout", k)) for k, v in enumerate(joint.gouts)],
                    outputs=("tuple", [("c", None) if g is None else ("v", g, False)
                                       for g in joint.grads]))
        log("graph", f"captured {self._name()}: forward ({len(fwd.nodes)} ops, "
            f"{len(saved)} saved for backward):\n{fwd.tabular()}\n"
            f"backward ({len(bwd.nodes)} ops):\n{bwd.tabular()}")
        backend = backends.get(self._backend) if isinstance(self._backend, str) \
            else self._backend
        fwd = backend(fwd, [_source_array(src, flat) for _, src in fwd.inputs],
                      **self._options)
        xp = _xp(graph.device)
        bwd = backend(bwd, [xp.zeros(*graph.meta[v]) for v, _ in bwd.inputs],
                      **self._options)
        joint.saved = saved
        joint.device = graph.device
        joint.fwd_results = sorted(fwd.output_values())
        joint.fwd_run, source = generate(fwd, joint.fwd_results)
        log("graph", f"forward program of {self._name()}:\n{source}")
        joint.bwd_results = sorted(bwd.output_values())
        joint.bwd_run, source = generate(bwd, joint.bwd_results)
        log("graph", f"backward program of {self._name()}:\n{source}")
        joint.bwd_inputs = {v for v, _ in bwd.inputs}
        joint.bwd_graph = bwd
        entry.graph, entry.joint = fwd, joint
        entry.sources = [(src, graph.meta[v][0], graph.meta[v][1], src[1].__torcia_requires_grad__)
                         for v, src in fwd.inputs if src[0] != "arg"]

    def _check_joint(self, entry, flat, args, kwargs):
        """The first replay of a forward+backward pair, on new values: outputs and the
        gradients of a random cotangent compared with eager's (see :meth:`_check`)."""
        joint = entry.joint
        diff = [_source_tensor(src, flat) for src in joint.diff]
        written = _written_inputs(entry.graph, flat)
        before = [a.copy() for a in written]
        rng = torcia.get_rng_state()
        got = self._replay(entry, flat)  # first: see _check
        entry.checked = True
        got_written = _undo_writes(written, before)
        got_out: list = []
        _flatten(got, got_out)
        seeds = [torcia.from_numpy(np.random.default_rng(k).standard_normal(
            got_out[p].shape).astype(got_out[p].__torcia_data__.dtype)).to(got_out[p].device)
            for k, p in enumerate(joint.positions)]
        got_grads = torcia.autograd.grad([got_out[p] for p in joint.positions], diff, seeds,
                                         retain_graph=True, allow_unused=True)
        torcia.set_rng_state(rng)
        want = self._fn(*args, **kwargs)
        want_out: list = []
        _flatten(want, want_out)
        want_grads = torcia.autograd.grad([want_out[p] for p in joint.positions], diff,
                                          seeds, retain_graph=True, allow_unused=True)
        if _same(_tensors(got), _tensors(want)) and _same(got_written, written) and _same(
                [None if g is None else g.__torcia_data__ for g in got_grads],
                [None if g is None else g.__torcia_data__ for g in want_grads]):
            return got
        entry.eager_reason = ("its first replay differed from eager (a value was computed "
                              "outside the dispatched ops); this signature runs eagerly")
        entry.graph = entry.joint = None
        log("guards", f"{self._name()}: {entry.eager_reason}")
        return want

    def _replay(self, entry, flat):
        if not entry.rng:
            return self._run(entry, flat)
        state = torcia.get_rng_state()
        try:
            return self._run(entry, flat)
        except DataGuardFailed:
            torcia.set_rng_state(state)
            raise

    def _run(self, entry, flat):
        graph = entry.graph
        if entry.joint is not None:
            joint = entry.joint
            inputs = [_source_array(src, flat) for _, src in graph.inputs]
            outs = _CompiledForward.apply(joint, inputs,
                                          *(_source_tensor(src, flat) for src in joint.diff))
            return _rebuild(joint.outputs, dict(zip(joint.out_vids, outs)).__getitem__,
                            wrap=lambda t: t)
        if entry.autograd:
            return _replay_autograd(graph, flat)
        run, results = entry.run
        arrays = run([_source_array(src, flat) for _, src in graph.inputs])
        values = dict(zip(results, arrays))
        for leaf, vid in graph.grads:
            accumulate(leaf, values[vid])
        device = graph.device or _CPU
        return _rebuild(graph.outputs, values.__getitem__,
                        wrap=lambda arr: tensor_of(arr, device))


def _written_inputs(graph: Graph, flat) -> list:
    """The arrays of the graph's inputs its in-place writes change (a BatchNorm's running
    statistics), each once."""
    targets = {n.args[0][1] for n in graph.nodes if n.kind == "copy_"}
    arrays = {}
    for vid, src in graph.inputs:
        if vid in targets:
            arr = _source_array(src, flat)
            arrays[id(arr)] = arr
    return list(arrays.values())


def _undo_writes(written, before) -> list:
    """Put the written arrays back as they were (eager runs next, from the same state);
    returns what the program had written."""
    after = [a.copy() for a in written]
    for a, b in zip(written, before):
        a[...] = b
    return after


def _patch_optimizers(tracer: Tracer, optimizers) -> list:
    """Make each optimizer's ``step`` and ``zero_grad`` record one opaque node while the
    tracer runs (they reach their kernels and ``.grad`` outside dispatch); returns what
    to restore."""
    patched = []
    for opt in optimizers:
        for name in ("zero_grad", "step"):
            original = getattr(opt, name)
            patched.append((opt, name, name in opt.__dict__, opt.__dict__.get(name)))
            opt.__dict__[name] = _opaque(tracer, f"{type(opt).__name__}.{name}", original)
    return patched


def _opaque(tracer, label, original):
    def call(*args, **kwargs):
        if label.endswith(".step") and (args or kwargs):
            tracer.fail("opt.step(closure): the closure's forward would run outside the "
                        "captured graph")
            return original(*args, **kwargs)
        return tracer.opaque(label, original, args, kwargs)

    return call


class _Joint:
    """What a joint forward+backward trace left: where the backward starts, the values
    standing for the outputs' gradients (``gouts``, one per output that requires grad),
    the inputs differentiated (their sources) and their gradients' values."""

    def __init__(self, n_forward, outputs, out_vids, positions, gouts, diff, grads,
                 gouts_of):
        self.n_forward = n_forward
        self.gouts_of = gouts_of  # the output value each cotangent stands for
        self.outputs = outputs  # the returned structure
        self.out_vids = out_vids  # the forward's tensor outputs, each once
        self.positions = positions  # where those that require grad sit among them
        self.gouts = gouts
        self.diff = diff
        self.grads = grads
        self.saved: list = []
        self.fwd_run = self.bwd_run = None
        self.fwd_results: list = []
        self.bwd_results: list = []
        self.bwd_inputs: set = set()
        self.bwd_graph: Graph | None = None  # the backward program's graph, for logs
        self.device = None  # the device both programs run on (None: the CPU)


def _source_tensor(src, flat) -> Tensor:
    return flat[src[1]] if src[0] == "arg" else src[1]


def _trace_backward(tracer: Tracer, out, flat) -> _Joint | None:
    """Trace the backward of ``out`` (the traced forward's result) into the tracer's graph
    as AOTAutograd does: ``autograd.grad`` of the outputs that require grad, with
    placeholder cotangents, with respect to every input that requires grad. Returns None
    (the graph as it was) where the backward cannot be captured."""
    graph = tracer.graph
    found: list = []
    _flatten(out, found)
    out_vids = list(dict.fromkeys(tracer.ids[id(t.__torcia_data__)] for t in found))
    positions, outs = [], []
    for p, t in enumerate(found):
        vid = tracer.ids[id(t.__torcia_data__)]
        if t.__torcia_requires_grad__ and \
                all(tracer.ids[id(o.__torcia_data__)] != vid for o in outs):
            positions.append(p)
            outs.append(t)
    diff = [src for _, src in graph.inputs
            if src[0] in ("arg", "tensor") and _source_tensor(src, flat).__torcia_requires_grad__]
    n_forward, n_inputs, n_grads = len(graph.nodes), len(graph.inputs), len(graph.grads)
    seeds = []
    for k, t in enumerate(outs):
        # made outside dispatch (a kernel would be traced): an input of the graph
        data = t.__torcia_data__
        seed = tensor_of(_xp(t.device).ones(data.shape, data.dtype), t.device)
        tracer.register(seed, ("gout", k))
        seeds.append(seed)
    fullgraph, tracer.fullgraph = tracer.fullgraph, False
    try:
        grads = torcia.autograd.grad(outs, [_source_tensor(s, flat) for s in diff], seeds,
                                     retain_graph=True, allow_unused=True)
    except (RuntimeError, NotImplementedError) as exc:
        tracer.fail(f"the backward could not be traced ({exc})")
        grads = ()
    finally:
        tracer.fullgraph = fullgraph
    grad_vids = [None if g is None else tracer.ids.get(id(g.__torcia_data__)) for g in grads]
    if tracer.broken is None and any(v is None and g is not None
                                     for v, g in zip(grad_vids, grads)):
        tracer.fail("a gradient was computed outside the dispatched ops")
    if tracer.broken is not None:
        from torcia.compiler import log as _log

        _log("guards", f"the backward runs eagerly: {tracer.broken}")
        tracer.broken = None
        del graph.nodes[n_forward:], graph.inputs[n_inputs:], graph.grads[n_grads:]
        return None
    del graph.grads[n_grads:]  # the leaves' hooks saw grad()'s results: not accumulated
    return _Joint(n_forward, graph.outputs, out_vids, positions,
                  [tracer.ids[id(s.__torcia_data__)] for s in seeds], diff, grad_vids,
                  [tracer.ids[id(t.__torcia_data__)] for t in outs])


class _CompiledForward(Function):
    """The forward program as one autograd node whose backward is the backward program
    (``torch._functorch``'s ``CompiledFunction``)."""

    @staticmethod
    def forward(ctx, joint, inputs, *diff):
        values = dict(zip(joint.fwd_results, joint.fwd_run(inputs)))
        ctx.joint = joint
        ctx.saved_arrays = [values[v] for v in joint.saved]
        device = joint.device or _CPU
        outs = tuple(tensor_of(values[v], device) for v in joint.out_vids)
        rg = set(joint.gouts_of)
        ctx.mark_non_differentiable(*(o for o, v in zip(outs, joint.out_vids)
                                      if v not in rg))
        return outs

    @staticmethod
    @once_differentiable  # the backward program records nothing: no double backward
    def backward(ctx, *grads):
        joint = ctx.joint
        at = {v: i for i, v in enumerate(joint.out_vids)}
        xp = _xp(joint.device)
        cotangents = [xp.ascontiguousarray(grads[at[v]].__torcia_data__) for v in joint.gouts_of]
        values = dict(zip(joint.bwd_results, joint.bwd_run(ctx.saved_arrays + cotangents)))
        out = []
        for g in joint.grads:
            if g is None:
                out.append(None)
                continue
            arr = values[g]
            # a gradient that is an input of the program (a cotangent passed through)
            # must not alias it: the engine may accumulate into it
            out.append(tensor_of(arr.copy() if g in joint.bwd_inputs else arr,
                                 joint.device or _CPU))
        return (None, None, *out)


_CPU = torcia.device("cpu")


def _xp(device):
    """The array module of ``device`` (NumPy for the CPU, or None: no kernel ran)."""
    return np if device is None or device.type == "cpu" else get_backend(device.type).xp


def _tensors(obj) -> list:
    out: list = []
    _flatten(obj, out)
    return [t.__torcia_data__ for t in out]


def _same(got, want) -> bool:
    if len(got) != len(want):
        return False
    for a, b in zip(got, want):
        if a is None or b is None:
            if a is not b:
                return False
            continue
        a, b = host_array(a), host_array(b)
        if a.shape != b.shape:
            return False
        if a.dtype.kind in "fc":
            # fused kernels round differently: only a gross difference is a wrong answer
            # the scale of the finite values only: an all-NaN output would make it NaN (and
            # fail every comparison), an infinite one would make any answer pass
            finite = np.abs(b[np.isfinite(b)])
            scale = float(finite.max()) if finite.size else 0.0
            if not np.allclose(a, b, rtol=1e-3, atol=1e-5 * scale + 1e-6, equal_nan=True):
                return False
        elif not np.array_equal(a, b):
            return False
    return True


def _source_array(src, flat):
    kind, what = src
    if kind == "arg":
        return flat[what].__torcia_data__
    if kind == "tensor":
        return what.__torcia_data__
    return what.grad.__torcia_data__


def _outputs_require_grad(self) -> bool:
    found = []

    def walk(obj):
        if isinstance(obj, tuple) and len(obj) == 3 and obj[0] == "v":
            found.append(obj[2])
        elif isinstance(obj, tuple) and len(obj) == 2 and obj[0] != "c":
            for x in (obj[1].values() if isinstance(obj[1], dict) else obj[1]):
                walk(x)

    walk(self.outputs)
    return any(found)


Graph.outputs_require_grad = _outputs_require_grad


def _rebuild(obj, value, wrap):
    tag = obj[0]
    if tag == "v":
        return wrap(value(obj[1]))
    if tag == "c":
        return obj[1]
    if tag == "dict":
        return {k: _rebuild(v, value, wrap) for k, v in obj[1].items()}
    items = [_rebuild(x, value, wrap) for x in obj[1]]
    return tuple(items) if tag == "tuple" else items


def _replay_autograd(graph: Graph, flat):
    """Replay a forward-only graph op by op through dispatch, so that autograd records it
    (the outputs require grad and their backward runs later, outside the program)."""
    env: dict[int, Tensor] = {}
    for vid, (kind, what) in graph.inputs:
        env[vid] = flat[what] if kind == "arg" else what if kind == "tensor" else what.grad

    def arg(ref):
        return env[ref[1]] if ref[0] == "v" else ref[1]

    for node in graph.nodes:
        if node.kind == "cast":
            env[node.outs[0]] = env[node.args[0][1]].to(dtype_from_numpy(node.params["dtype"][1]))
            continue
        if node.kind == "guard":
            if not same_values(env[node.args[0][1]].__torcia_data__, node.params["value"][1]):
                raise DataGuardFailed(f"Tensor.{node.op}() read other values")
            continue
        out = _call(node.op, tuple(arg(r) for r in node.args),
                    {k: arg(r) for k, r in node.params.items()})
        for vid, o in zip(node.outs, out if node.tuple_out else (out,)):
            env[vid] = o
    return _rebuild(graph.outputs, env.__getitem__, wrap=lambda t: t)


class OptimizedModule(nn.Module):
    """A compiled module (``torch._dynamo.eval_frame.OptimizedModule``): calls run the
    compiled forward, ``_orig_mod`` is the original module, whose parameters and state
    dict this one shares.

    Examples
    --------
    >>> import torcia
    >>> m = torcia.compile(torcia.nn.Linear(2, 1))
    >>> type(m._orig_mod).__name__, m(torcia.ones(1, 2)).shape
    ('Linear', torcia.Size([1, 1]))
    """

    def __init__(self, mod, fullgraph=False, backend="inductor", options=None):
        super().__init__()
        self._orig_mod = mod
        self._compiled_forward = _CompiledFunction(mod.__call__, fullgraph, backend, options,
                                                   modules=[mod])

    def forward(self, *args, **kwargs):
        return self._compiled_forward(*args, **kwargs)

    def state_dict(self, *args, **kwargs):
        return self._orig_mod.state_dict(*args, **kwargs)

    def load_state_dict(self, *args, **kwargs):
        return self._orig_mod.load_state_dict(*args, **kwargs)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._modules["_orig_mod"], name)
