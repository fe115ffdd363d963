"""torcia.autograd._native, the optional backward loop and recording in C: every scenario
gives the same gradients, hook calls (in the same order), errors and buffer ownership as the
Python engine, recording leaves the same node, and ``TORCIA_PURE_PYTHON=1`` runs the Python
engine."""

import os
import subprocess
import sys

import pytest

import torcia
from torcia import library
from torcia.autograd import engine

native = pytest.mark.skipif(engine._NATIVE is None,
                            reason="torcia.autograd._native is not built (or TORCIA_PURE_PYTHON)")


class _PythonRecording(library.AutogradMode):
    """The engine with the Python record (the native one is what the engine registers)."""

    def __getattr__(self, name):
        return getattr(engine.ENGINE, name)

    def record(self, op, inputs, params, out):
        engine.record(op, inputs, params, out)


def _run(scenario, loop, monkeypatch):
    monkeypatch.setattr(engine, "_NATIVE", loop)
    try:
        if loop is None:
            with library.register_autograd_mode(_PythonRecording()):
                return ("ok", scenario())
        return ("ok", scenario())
    except Exception as exc:  # the error is part of what both paths must agree on
        return ("error", type(exc).__name__, str(exc))


def _vals(*ts):
    return [None if t is None else (t.dtype.name, tuple(t.shape), t.tolist()) for t in ts]


def _leaves():
    a = torcia.tensor([1.0, -2.0, 3.0, 0.5], requires_grad=True)
    b = torcia.arange(4, dtype=torcia.float32).requires_grad_()
    return a, b


def tiny():
    a, b = _leaves()
    (a * b + a).sum().backward()
    (a * b + a).sum().backward()  # accumulation into an existing .grad
    return _vals(a.grad, b.grad)


def chain():
    a, b = _leaves()
    y = ((((a.sin() * b + a).exp() * 0.5).tanh() - b) ** 2).sigmoid().sum()
    y.backward()
    return _vals(a.grad, b.grad)


def broadcast_and_dtypes():
    a = torcia.ones(3, 1, requires_grad=True)
    b = torcia.arange(4, dtype=torcia.float64).requires_grad_()
    (a * b).mean().backward()
    return _vals(a.grad, b.grad)


def hooks():
    log = []
    a, b = _leaves()
    a.register_hook(lambda g: log.append(("leaf a", g.tolist())))
    b.register_hook(lambda g: g * 10)
    b.register_post_accumulate_grad_hook(lambda t: log.append(("post acc b", t.grad.tolist())))
    h = a * b
    h.retain_grad()
    h.register_hook(lambda g: log.append(("h", g.tolist())) or g + 1)
    y = h.exp()
    y.grad_fn.register_prehook(lambda gs: log.append(("pre exp", len(gs))))
    y.grad_fn.register_hook(lambda gi, go: log.append(("post exp", len(gi), len(go))))
    z = y.sum()
    z.grad_fn.register_hook(lambda gi, go: (gi[0] * 2,))
    z.backward()
    return log, _vals(a.grad, b.grad, h.grad)


def accumulate_grad_hooks():
    log = []
    a, _ = _leaves()
    acc = (a * 1).grad_fn.next_functions[0][0]
    y = (a * 2).sum()
    acc.register_prehook(lambda gs: log.append(("pre", gs[0].tolist())))
    acc.register_hook(lambda *args: log.append(("post", len(args))))
    y.backward()
    return log, _vals(a.grad)


def retain_then_free():
    a, b = _leaves()
    y = (a * b).sum()
    y.backward(retain_graph=True)
    y.backward()
    first = _vals(a.grad)
    y.backward()  # freed: PyTorch's error
    return first


def double_backward():
    a, _ = _leaves()
    y = (a ** 3).sum()
    (g,) = torcia.autograd.grad(y, a, create_graph=True)
    g.sum().backward()
    return _vals(g, a.grad)


def grad_of_non_leaf_and_unused():
    a, b = _leaves()
    h = a * b
    y = (h.sin() + a).sum()
    got = torcia.autograd.grad(y, (h, a, b), allow_unused=True, retain_graph=True)
    c = torcia.ones(2, requires_grad=True)
    unused = torcia.autograd.grad(y, (a, c), allow_unused=True)
    return _vals(*got), _vals(*unused), _vals(a.grad)


def backward_inputs():
    a, b = _leaves()
    h = a * b
    (h * h + b).sum().backward(inputs=[b, h])
    return _vals(a.grad, b.grad, h.grad)


def several_roots():
    a, b = _leaves()
    y1, y2 = (a * b).sum(), (a + b).prod()
    torcia.autograd.backward([y1, y2], [torcia.tensor(2.0), None])
    outs = (a * b).unbind()
    torcia.autograd.backward([outs[0], outs[2]])  # two outputs of one node
    return _vals(a.grad, b.grad)


def multi_output_op():
    a, _ = _leaves()
    values, _ = a.reshape(2, 2).max(dim=1)
    parts = a.split(3)
    (values.sum() + parts[1].sum() * 3).backward()
    return _vals(a.grad)


def custom_function():
    class Cube(torcia.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3 * x ** 2

    a, _ = _leaves()
    Cube.apply(a * 2).sum().backward()
    return _vals(a.grad)


def modified_in_place():
    a, _ = _leaves()
    h = a * 1
    y = (h * h).sum()
    with torcia.no_grad():
        h.add_(1)
    y.backward()


def formula_error():
    a, _ = _leaves()
    y = (a * 2).sum()
    y.grad_fn.register_prehook(lambda gs: ("not a tensor",))
    y.backward()


def hook_error():
    a, _ = _leaves()
    h = a * 2
    h.register_hook(lambda g: 1 / 0)
    h.sum().backward()


def callbacks():
    log = []
    a, _ = _leaves()
    h = a * 2
    h.register_hook(lambda g: engine.queue_callback(lambda: log.append(("callback", a.grad))))
    h.sum().backward()
    return [(k, _vals(g)) for k, g in log]


def steal_and_in_place_sum():
    a, b = _leaves()
    y = (a * b + a * 3).sum()  # a's two gradients meet in a buffer: summed in place
    y.backward()
    first = a.grad
    kept = []
    b2 = torcia.ones(4, requires_grad=True)
    h = b2 * 2
    h.register_hook(lambda g: kept.append(g))
    (h * 5).sum().backward()
    # a gradient a hook keeps is not stolen: .grad is its own buffer
    return (_vals(first, b.grad, b2.grad), first.__torcia_data__.flags.owndata,
            b2.grad.__torcia_data__ is not kept[0].__torcia_data__)


def anomaly_mode():
    a, _ = _leaves()
    with torcia.autograd.detect_anomaly():
        (a.abs().sqrt() * 3).sum().backward()  # anomaly mode runs the Python loop
    return _vals(a.grad)


def no_grad_needed_branch():
    a, b = _leaves()
    c = torcia.ones(4)
    y = (a * c + b.detach() * b).sum()
    (ga,) = torcia.autograd.grad(y, a)
    return _vals(ga, a.grad, b.grad)


def saved_tensor_hooks():
    log = []
    a, b = _leaves()
    with torcia.autograd.graph.saved_tensors_hooks(lambda t: log.append("pack") or t * 1,
                                                   lambda t: log.append("unpack") or t):
        y = (a * b).exp().sum()
    y.backward()
    return log, _vals(a.grad, b.grad)


def results_under_create_graph():
    a, _ = _leaves()
    y = a.sigmoid() * a.exp()
    (g,) = torcia.autograd.grad(y.sum(), a, create_graph=True)
    (gg,) = torcia.autograd.grad(g.sum(), a)
    return _vals(g, gg), g.grad_fn.name()


def existing_grads():
    a, b = _leaves()
    store = torcia.zeros(8)
    a.grad = store[::2]  # a view: the sum lands in store
    b.grad = torcia.ones(4, requires_grad=True)  # a .grad that records: a new sum
    y = (a * b + a).sum()
    y.backward()
    return _vals(store, a.grad, b.grad), a.grad._version, b.grad.requires_grad


SCENARIOS = [tiny, chain, broadcast_and_dtypes, hooks, accumulate_grad_hooks, retain_then_free,
             double_backward, grad_of_non_leaf_and_unused, backward_inputs, several_roots,
             multi_output_op, custom_function, modified_in_place, formula_error, hook_error,
             callbacks, steal_and_in_place_sum, anomaly_mode, no_grad_needed_branch,
             saved_tensor_hooks, results_under_create_graph, existing_grads]


@native
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda f: f.__name__)
def test_native_loop_matches_the_python_loop(scenario, monkeypatch):
    reference = _run(scenario, None, monkeypatch)
    ours = _run(scenario, engine._NATIVE, monkeypatch)
    assert ours == reference
    assert torcia.is_grad_enabled()  # grad mode comes back after errors too


@native
def test_the_errors_are_checked_ones():
    # what the scenarios meant to fail fail in both loops (and not for another reason)
    for scenario, words in ((modified_in_place, "modified by an inplace operation"),
                            (retain_then_free, "backward through the graph a second time"),
                            (hook_error, "division by zero"),
                            (formula_error, "__torcia_data__")):
        with pytest.raises(Exception, match=words):
            scenario()


def test_pure_python_environment_runs_the_python_loop():
    code = "from torcia.autograd import engine; print(engine._NATIVE is None)"
    env = {**os.environ, "TORCIA_PURE_PYTHON": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "True"


def _node_fields(out):
    node = out.grad_fn
    return {
        "class": type(node), "op": node.op, "entry": node.entry,
        "args": [a if not isinstance(a, torcia.Tensor) else ("tensor", id(a))
                 for a in node.args[:len(node.next_functions)]],
        "results": [None if a is None else (type(a), a._version, a.requires_grad,
                                            a.grad_fn, a.tolist())
                    for a in node.args[len(node.next_functions):]],
        "versions": node.versions, "params": node.params,
        "next_functions": node.next_functions, "metas": node.metas,
        "n_outputs": node.n_outputs, "pre_hooks": node.pre_hooks,
        "post_hooks": node.post_hooks, "released": node.released, "trace": node.trace,
        "holds_saved": node.holds_saved, "packed": node.packed, "name": node.name(),
        "out": (out.requires_grad, out._output_nr if hasattr(out, "_output_nr") else None),
    }


def _recordings():
    a = torcia.tensor([1.0, -2.0, 3.0], requires_grad=True)
    b = torcia.tensor([0.5, 0.25, 2.0])
    h = a * 2  # a non-leaf input: its node is the edge
    i = torcia.tensor([0, 2])
    return [
        ("mul", (a, b), {}), ("mul", (b, a), {}), ("mul", (a, h), {}), ("mul", (a, 2.0), {}),
        ("add", (h, a), {}), ("exp", (h,), {}), ("sigmoid", (a,), {}),
        ("sum", (a,), {"dim": None, "keepdim": False}),
        ("sum", (h,), {"dim": (0,), "keepdim": True}),
        ("pow", (a, 3), {}), ("pow", (a, h), {}), ("cat", (a, h, b), {"dim": 0}),
        ("index_select", (a, i), {"dim": 0}), ("argmax", (a,), {"dim": None,
                                                                 "keepdim": False}),
        ("eq", (a, b), {}),
    ]


@native
@pytest.mark.parametrize("case", range(len(_recordings())))
def test_native_record_leaves_the_python_node(case):
    op, inputs, params = _recordings()[case]
    with torcia.no_grad():
        ours = library.call(op, inputs, params)
        reference = library.call(op, inputs, params)
    engine._NATIVE.record(op, inputs, params, ours)
    engine.record(op, inputs, params, reference)
    assert ours.requires_grad == reference.requires_grad
    if reference.grad_fn is None:
        assert ours.grad_fn is None
        return
    assert _node_fields(ours) == _node_fields(reference)
    engine._NATIVE.record(op, inputs, params, ours)  # recorded once
    assert _node_fields(ours)["class"] is type(reference.grad_fn)


@native
def test_native_record_leaves_the_rest_to_the_python_one():
    a = torcia.tensor([1.0, 2.0], requires_grad=True)
    with torcia.no_grad():
        out = a * 1
    with pytest.raises(RuntimeError, match="the derivative for 'no_such_op'"):
        engine._NATIVE.record("no_such_op", (a,), {}, out)
    with torcia.autograd.graph.saved_tensors_hooks(lambda t: ("packed", t), lambda p: p[1]):
        y = a * a
    assert y.grad_fn.packed
    with torcia.no_grad():
        values, indices = a.max(0)
    engine._NATIVE.record("max_dim", (a,), {"dim": 0, "keepdim": False}, (values, indices))
    assert values.grad_fn is not None and indices.grad_fn is None
