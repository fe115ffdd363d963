"""Capture: a dispatch mode that records every kernel the tracing thread runs.

The function runs eagerly once under :class:`Tracer` (so its first results are eager's);
each kernel call becomes a :class:`~torcia.compiler.graph.Node` over numbered values.
Backward formulas dispatch through the same kernels, so a ``loss.backward()`` inside the
function lands in the same graph; hooks on the leaves it read record the gradients the
engine accumulates. A random op (a dropout mask, ``rand``...) is a node like any other
whose ``rng`` parameter is the generator itself, so each replay draws new numbers from the
stream eager would draw from. Anything the graph cannot replay faithfully (Python reading
tensor values, an array of unknown origin that aliases a traced one) marks the trace
broken, and the caller runs that signature eagerly.
"""

from __future__ import annotations

import threading

import numpy as np

from torcia.compiler.graph import Graph, Node
from torcia.library import TRACE_ORDER, DispatchMode, Tensor, host_array, tensor_of


def accumulate(leaf: Tensor, grad, owned: bool = False) -> None:
    """Add a replayed gradient into ``leaf.grad`` as the engine does (a new tensor where
    there is none: ``grad`` itself where the program hands it over, ``owned``, else a
    copy)."""
    if leaf.grad is None:
        leaf.grad = tensor_of(grad if owned else grad.copy(), leaf.device)
    else:
        leaf.grad.__torcia_data__ += grad


class Unsupported(RuntimeError):
    """What torcia.compile cannot capture (PyTorch's ``torch._dynamo.exc.Unsupported``);
    raised with ``fullgraph=True``, a logged graph break otherwise.

    Examples
    --------
    >>> import torcia
    >>> issubclass(torcia.compiler.Unsupported, RuntimeError)
    True
    """


def _is_array(x) -> bool:
    # NumPy reductions to 0-d hand back NumPy scalars: values like any array
    # (a NumPy scalar type, a dtype argument, has ``shape`` and ``dtype`` too)
    return isinstance(x, np.generic) or (
        not isinstance(x, type) and hasattr(x, "shape") and hasattr(x, "dtype")
        and not np.isscalar(x))


def _root(arr):
    while getattr(arr, "base", None) is not None:
        arr = arr.base
    return arr


class Tracer(DispatchMode):
    """The tracing mode (just inside ONNX's tracer, around the kernel)."""

    order = TRACE_ORDER + 1

    def __init__(self, fullgraph: bool = False):
        self.graph = Graph()
        self.fullgraph = fullgraph
        self.ids: dict[int, int] = {}  # id(array) -> value id
        self.alive: list = []  # the traced arrays, so that their ids stay unique
        self.roots: set[int] = set()
        self.pending: tuple = ()
        self.hooked: dict[int, object] = {}
        self.handles: list = []
        self.broken: str | None = None
        self.read_tensors: dict[int, Tensor] = {}
        self.thread = threading.get_ident()
        self.paused = False  # an opaque call runs: its ops are not recorded

    def _tracing(self) -> bool:
        return threading.get_ident() == self.thread and not self.paused

    def opaque(self, name: str, fn, args=(), kwargs=None):
        """Run ``fn(*args, **kwargs)`` unrecorded and record one ``"opaque"`` node that
        calls it again on replay (an optimizer's ``step``, whose multi-tensor kernels run
        outside dispatch). The gradients the engine accumulated so far are written into
        their leaves first, as they were when ``fn`` ran: the node reads them."""
        kwargs = kwargs or {}
        if not self._tracing() or self.broken is not None:
            return fn(*args, **kwargs)
        flushed, self.graph.grads = self.graph.grads, []

        def replay(*grads, owned=()):
            owned = owned or (False,) * len(grads)
            for (leaf, _), g, own in zip(flushed, grads, owned):
                accumulate(leaf, g, own)
            fn(*args, **kwargs)

        self.graph.nodes.append(Node("opaque", name, replay,
                                     [("v", v) for _, v in flushed], {}, []))
        self.paused = True
        try:
            return fn(*args, **kwargs)
        finally:
            self.paused = False

    # -- breaking -----------------------------------------------------------------------

    def fail(self, reason: str) -> None:
        if self.fullgraph:
            raise Unsupported(f"torcia.compile(fullgraph=True): {reason}")
        if self.broken is None:
            self.broken = reason

    def on_read(self, tensor, how):
        """Python reads a tensor's values: what follows may depend on them (data-dependent
        control flow, ``if loss > 10``). The graph is split there (a ``"guard"`` node): a
        replay runs the program up to it, checks that the tensor holds the values read
        when traced (the branch Python took), and only then runs on; other values trace
        another program. ``.numpy()`` hands Python the array itself: the graph breaks."""
        if not self._tracing() or self.broken is not None:
            return
        if self.fullgraph or how == "numpy":
            self.fail(f"graph break: Python reads the values of a tensor (Tensor.{how}()), "
                      "so what follows may depend on data (data-dependent control flow); "
                      "this signature runs eagerly")
            return
        if id(tensor.__torcia_data__) not in self.ids:
            self.register(tensor)
        data = tensor.__torcia_data__
        self.graph.nodes.append(Node("guard", how, None, [("v", self.ids[id(data)])],
                                     {"value": ("c", np.array(host_array(data), copy=True))},
                                     []))

    # -- values -------------------------------------------------------------------------

    def _bind(self, arr) -> int:
        vid = self.graph.new_value(arr)
        self.ids[id(arr)] = vid
        self.alive.append(arr)
        self.roots.add(id(_root(arr)))
        return vid

    def _input(self, arr, source) -> int:
        if getattr(arr, "base", None) is not None and id(_root(arr)) in self.roots:
            self.fail("a tensor made outside the dispatched ops aliases a traced one (an "
                      "untraced view)")
        vid = self._bind(arr)
        self.graph.inputs.append((vid, source))
        return vid

    def register(self, t: Tensor, source=None) -> None:
        """Make ``t``'s array a graph input if it is not a traced value yet."""
        if id(t.__torcia_data__) not in self.ids:
            self._input(t.__torcia_data__, source or ("tensor", t))
            self.read_tensors[id(t)] = t
        if t.__torcia_requires_grad__ and t.is_leaf and id(t) not in self.hooked:
            self.hooked[id(t)] = t
            if t.grad is not None and id(t.grad.__torcia_data__) not in self.ids:
                self._input(t.grad.__torcia_data__, ("grad", t))
            self.handles.append(t.register_hook(self._grad_hook(t)))

    def _grad_hook(self, leaf):
        def hook(grad):
            if self._tracing() and self.broken is None:
                vid = self.ids.get(id(grad.__torcia_data__))
                if vid is None:
                    self.fail("a gradient was computed outside the dispatched ops")
                else:
                    self.graph.grads.append((leaf, vid))
            return None

        return hook

    def ref(self, x, cand=None):
        """The reference to kernel argument ``x``; ``cand`` is the dispatched input it came
        from (to see the dtype promotion dispatch applied)."""
        if isinstance(x, (list, tuple)) and any(_is_array(e) for e in x):
            cands = cand if isinstance(cand, (list, tuple)) and len(cand) == len(x) else \
                [None] * len(x)
            return ("l", [self.ref(e, c) for e, c in zip(x, cands)])
        if not _is_array(x):
            return ("c", x)
        vid = self.ids.get(id(x))
        if vid is not None:
            return ("v", vid)
        if isinstance(cand, Tensor) and cand.__torcia_data__ is not x:
            src = self.ids.get(id(cand.__torcia_data__))
            if src is not None and cand.__torcia_data__.shape == x.shape:
                out = self._bind(x)
                self.graph.nodes.append(Node("cast", "cast", None, [("v", src)],
                                             {"dtype": ("c", x.dtype)}, [out]))
                return ("v", out)
        if id(_root(x)) in self.roots:
            self.fail("a kernel argument is a view of a traced array made outside the "
                      "dispatched ops")
        # an array made without a kernel (a Python scalar promoted by dispatch): a constant
        return ("c", x.copy())

    # -- the mode -----------------------------------------------------------------------

    def on_inputs(self, op, inputs):
        if self._tracing():
            for x in inputs:
                if isinstance(x, Tensor):
                    self.register(x)
                elif isinstance(x, (list, tuple)):
                    for e in x:
                        if isinstance(e, Tensor):
                            self.register(e)
            self.pending = inputs
        return inputs

    def around_kernel(self, op, kernel, device):
        if not self._tracing():
            return kernel
        if self.graph.device is None:
            self.graph.device = device
        elif device != self.graph.device:
            # one program runs on one device (the backend generates its kernels for it)
            self.fail(f"the function runs kernels on two devices ({self.graph.device} and "
                      f"{device}): capture takes one")

        def traced(*args, **params):
            pending, self.pending = self.pending, ()
            out = kernel(*args, **params)
            if self.broken is not None:
                return out
            refs = [self.ref(a, pending[i] if i < len(pending) else None)
                    for i, a in enumerate(args)]
            prefs = {k: self.ref(v) for k, v in params.items()}
            outs = out if isinstance(out, tuple) else (out,)
            if any(isinstance(o, np.generic) for o in outs):
                # the tensor would hold np.asarray of it: bind that array, not the scalar
                outs = tuple(np.asarray(o) if isinstance(o, np.generic) else o for o in outs)
                out = outs if isinstance(out, tuple) else outs[0]
            if not all(_is_array(o) for o in outs):
                self.fail(f"op {op!r} returned a non-array")
                return out
            vids = [self._bind(o) for o in outs]
            self.graph.nodes.append(Node("call", op, kernel, refs, prefs, vids,
                                         isinstance(out, tuple)))
            return out

        return traced

    def on_result(self, op, inputs, params, result):
        if op == "to_device" and self._tracing():
            # the copy runs outside the kernels: replayed, the program would hand back
            # the data copied when traced
            self.fail(f"a copy between devices ({params.get('device')} to {result.device}) "
                      "inside the function: move the data before the call")

    def on_inplace(self, target, out):
        if not self._tracing() or self.broken is not None:
            return
        if id(target.__torcia_data__) not in self.ids:
            self.register(target)
        src = self.ids.get(id(out.__torcia_data__))
        if src is None:
            self.fail("an in-place write of a value computed outside the dispatched ops")
            return
        self.graph.nodes.append(Node("copy_", "copy_", None,
                                     [("v", self.ids[id(target.__torcia_data__)]), ("v", src)],
                                     {}, []))

    def __exit__(self, *exc):
        super().__exit__(*exc)
        for h in self.handles:
            h.remove()
        self.handles = []
        return False

    def output(self, obj):
        """The returned structure with its tensors as value references."""
        if isinstance(obj, Tensor):
            if id(obj.__torcia_data__) not in self.ids:
                self.register(obj)
            return ("v", self.ids[id(obj.__torcia_data__)], obj.__torcia_requires_grad__)
        if isinstance(obj, (list, tuple)):
            return (type(obj).__name__, [self.output(x) for x in obj])
        if isinstance(obj, dict):
            return ("dict", {k: self.output(v) for k, v in obj.items()})
        if obj is None or isinstance(obj, (int, float, bool, str)):
            return ("c", obj)
        self.fail(f"the function returned a {type(obj).__name__}, which capture does not "
                  "rebuild")
        return ("c", obj)
