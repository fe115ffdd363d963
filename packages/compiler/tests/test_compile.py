import numpy as np
import pytest

import torcia
import torcia.compiler
from torcia import nn
from torcia.compiler import inductor


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCIA_CACHE_DIR", str(tmp_path / "cache"))
    torcia.compiler.set_logs(guards=True, fusion=True)
    yield
    torcia.compiler.set_logs()


def _mlp():
    torcia.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4))


def _cnn():
    torcia.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(4 * 4 * 4, 4))


class _LSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(6, 8, batch_first=True)
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(out[:, -1])


def _gpt():
    torcia.manual_seed(0)
    return nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0,
                                      batch_first=True)


def _step_of(model, loss_fn):
    def step(x, y):
        loss = loss_fn(model(x), y)
        loss.backward()
        return loss
    return step


def _parity(model, step, batches, backend):
    compiled = torcia.compile(step, backend=backend)
    for x0, y0 in batches:
        # the first call traces, the second replays on other values of the same shapes
        for x, y in ((x0, y0), (x0 * 0.5 + 1, y0.flip(0))):
            for p in model.parameters():
                p.grad = None
            got = compiled(x, y)
            got_grads = [p.grad.clone() for p in model.parameters()]
            for p in model.parameters():
                p.grad = None
            want = step(x, y)
            for g, p in zip(got_grads, model.parameters()):
                np.testing.assert_allclose(g.numpy(), p.grad.numpy(), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(got.item(), want.item(), rtol=1e-6)
    return compiled


def _ce(out, y):
    return nn.functional.cross_entropy(out, y)


def _train_step(model, opt):
    """A whole training step over ``model`` and ``opt``: ``zero_grad``, the loss,
    ``backward``, ``opt.step()``."""

    def step(x, y):
        opt.zero_grad()
        loss = _ce(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def _mse(out, y):
    return ((out - y) ** 2).mean()


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("name", ["mlp", "cnn", "lstm", "gpt"])
def test_training_step_parity_with_retrace(name, backend):
    if name == "mlp":
        model, shape, loss = _mlp(), (8,), _ce
    elif name == "cnn":
        model, shape, loss = _cnn(), (1, 8, 8), _ce
    elif name == "lstm":
        torcia.manual_seed(0)
        model, shape, loss = _LSTM(), (5, 6), _ce
    else:
        model, shape, loss = _gpt(), (5, 16), _mse
    batches = []
    for n in (4, 6):  # a new batch size retraces
        x = torcia.randn(n, *shape)
        y = torcia.randn(n, 5, 16) if name == "gpt" else torcia.randint(0, 4, (n,))
        batches.append((x, y))
    compiled = _parity(model, _step_of(model, loss), batches, backend)
    assert len(compiled._entries) == 2
    assert all(e.eager_reason is None for e in compiled._entries)


def test_graph_is_printable_and_holds_the_backward():
    model = _mlp()
    step = torcia.compile(_step_of(model, _ce), backend="eager")
    step(torcia.randn(3, 8), torcia.tensor([0, 1, 2]))
    text = step._entries[0].graph.tabular()
    assert "placeholder" in text and "cross_entropy_backward" in text and "output" in text


def test_data_dependent_control_flow_breaks_the_graph(capsys):
    w = torcia.ones(3, requires_grad=True)

    def f(x):
        if (x.sum() > 0):
            return (x * w).sum()
        return (x - w).sum()

    g = torcia.compile(f)
    assert g(torcia.ones(3)).item() == 3.0
    assert g(-torcia.ones(3)).item() == -6.0  # the other branch: no wrong answer
    assert "graph break" in capsys.readouterr().err
    with pytest.raises(torcia.compiler.Unsupported, match="Tensor.item"):
        torcia.compile(f, fullgraph=True)(torcia.ones(3))


def test_a_graph_break_splits_the_program_and_guards_the_branch(capsys):
    """Data-dependent control flow: the pieces around the break are compiled, the values
    Python read guard the branch; the other branch traces a second program; each is
    replayed (not run eagerly) from then on, forward and backward."""
    w = torcia.ones(3, requires_grad=True)

    def f(x):
        y = (x * 2).sin()
        loss = (y * w).sum() if x.sum() > 0 else (y - w).exp().sum()
        loss.backward()
        return loss

    g = torcia.compile(f)
    for s in (1.0, 1.0, -1.0, -1.0, 1.5, -0.5, 1.0):
        w.grad = None
        got = g(torcia.ones(3) * s)
        got_grad = w.grad.clone()
        w.grad = None
        want = f(torcia.ones(3) * s)
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-6)
        np.testing.assert_allclose(got_grad.numpy(), w.grad.numpy(), rtol=1e-6)
    assert len(g._entries) == 2
    assert all(e.eager_reason is None and e.checked for e in g._entries)
    assert all(sum(n.kind == "guard" for n in e.graph.nodes) == 1 for e in g._entries)
    err = capsys.readouterr().err
    assert "compiled in 2 pieces" in err and "Tensor.item() read other values" in err


def test_a_value_read_that_changes_every_call_ends_in_eager(monkeypatch):
    monkeypatch.setattr(torcia.compiler, "recompile_limit", 3)

    def f(x):
        return x * float(x.sum())  # a Python number made from the data

    g = torcia.compile(f)
    for k in range(6):
        x = torcia.full((2,), float(k))
        np.testing.assert_allclose(g(x).numpy(), f(x).numpy())
    assert len(g._entries) == 3


def test_a_numpy_read_or_a_write_before_a_break_runs_eagerly(capsys):
    def reads_numpy(x):
        return x * float(x.numpy().sum())

    g = torcia.compile(reads_numpy)
    for k in (1.0, 2.0):
        assert g(torcia.full((2,), k)).tolist() == [2 * k * k] * 2
    assert g._entries[0].eager_reason is not None

    def writes_then_reads(x, buf):
        buf.copy_(x * 2)
        return x + 1 if buf.sum() > 0 else x - 1

    h = torcia.compile(writes_then_reads)
    buf = torcia.zeros(2)
    assert h(torcia.ones(2), buf).tolist() == [2.0, 2.0]
    assert h(-torcia.ones(2), buf).tolist() == [-2.0, -2.0] and buf.tolist() == [-2.0, -2.0]
    assert "after an in-place write" in capsys.readouterr().err


def test_changed_dtype_retraces(capsys):
    f = torcia.compile(lambda x: (x * 2).exp())
    np.testing.assert_allclose(f(torcia.ones(2)).numpy(), np.exp(2.0) * np.ones(2), rtol=1e-6)
    out = f(torcia.ones(2, dtype=torcia.float64))
    assert out.dtype == torcia.float64
    assert "dtype changed (torcia.float32 -> torcia.float64)" in capsys.readouterr().err


def test_module_attribute_change_retraces(capsys):
    class Scale(nn.Module):
        def __init__(self):
            super().__init__()
            self.factor = 2.0

        def forward(self, x):
            return x * self.factor

    m = Scale()
    cm = torcia.compile(m)
    assert isinstance(cm, torcia.compiler.OptimizedModule) and cm._orig_mod is m
    assert cm(torcia.ones(2)).tolist() == [2.0, 2.0]
    m.factor = 3.0
    assert cm(torcia.ones(2)).tolist() == [3.0, 3.0]
    assert "attribute the module.factor changed (2.0 -> 3.0)" in capsys.readouterr().err


def test_compiled_module_forward_backpropagates():
    model = _mlp()
    cm = torcia.compile(model)
    x, y = torcia.randn(4, 8), torcia.tensor([0, 1, 2, 3])
    for _ in range(2):
        model.zero_grad()
        out = cm(x)
        _ce(out, y).backward()
        got = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        _ce(model(x), y).backward()
        for g, p in zip(got, model.parameters()):
            # the fused tanh backward rounds once where eager rounds per op
            np.testing.assert_allclose(g.numpy(), p.grad.numpy(), rtol=1e-5, atol=1e-7)
    # the backward is the captured program, one autograd node, not eager's per-op graph
    assert out.grad_fn.name() == "_CompiledForwardBackward"
    assert cm._compiled_forward._entries[0].joint is not None


class _Tagged(nn.Module):
    """A forward with several outputs: one that needs no grad, one returned twice."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3, dtype=torcia.float64)

    def forward(self, x):
        h = self.lin(x).tanh()
        return h, (h * x).sum(), x.argmax(1), h


def test_compiled_backward_of_several_outputs_and_an_input_gradient():
    torcia.manual_seed(0)
    model = _Tagged()
    cm = torcia.compile(model)
    for n in (2, 2, 3):  # trace, replay, retrace
        x = torcia.randn(n, 3, dtype=torcia.float64, requires_grad=True)
        grads = []
        for f in (cm, model):
            model.zero_grad()
            x.grad = None
            h, s, idx, h2 = f(x)
            assert not idx.requires_grad and h2.requires_grad
            (h.exp().sum() + s * 2 + (h2 ** 2).sum()).backward()
            grads.append([x.grad.clone()] + [p.grad.clone() for p in model.parameters()])
            assert idx.tolist() == x.argmax(1).tolist()
        for a, b in zip(*grads):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-12)
    entries = cm._compiled_forward._entries
    assert len(entries) == 2 and all(e.joint is not None for e in entries)


def test_compiled_module_backward_twice_needs_retain_graph():
    model = _mlp()
    cm = torcia.compile(model)
    x = torcia.randn(4, 8)
    cm(x)
    out = cm(x).sum()
    out.backward(retain_graph=True)
    first = [p.grad.clone() for p in model.parameters()]
    out.backward()
    for a, p in zip(first, model.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), 2 * a.numpy(), rtol=1e-6)


@pytest.mark.parametrize("name", ["mlp", "cnn", "lstm", "gpt"])
def test_compiled_module_training_parity_with_retrace(name):
    """``loss.backward()`` of a compiled module runs its captured backward program:
    losses and gradients as eager's, over training steps and after a new batch size."""
    if name == "lstm":
        torcia.manual_seed(0)
    model = {"mlp": _mlp, "cnn": _cnn, "lstm": _LSTM, "gpt": _gpt}[name]()
    shape = {"mlp": (8,), "cnn": (1, 8, 8), "lstm": (5, 6), "gpt": (5, 16)}[name]
    loss = _mse if name == "gpt" else _ce
    cm = torcia.compile(model)
    for n in (4, 4, 4, 6, 6):
        x = torcia.randn(n, *shape)
        y = torcia.randn(n, 5, 16) if name == "gpt" else torcia.randint(0, 4, (n,))
        results = []
        for f in (cm, model):
            model.zero_grad()
            value = loss(f(x), y)
            value.backward()
            results.append((value.item(), [p.grad.clone() for p in model.parameters()]))
        (got, got_grads), (want, want_grads) = results
        np.testing.assert_allclose(got, want, rtol=1e-5)
        for a, b in zip(got_grads, want_grads):
            scale = float(b.abs().max()) + 1e-12
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-5 * scale)
        with torcia.no_grad():  # a training step between calls: new values, same program
            for p in model.parameters():
                p -= 0.1 * p.grad
    entries = cm._compiled_forward._entries
    assert len(entries) == 2 and all(e.joint is not None and e.eager_reason is None
                                     for e in entries)


def test_recompile_limit(monkeypatch):
    monkeypatch.setattr(torcia.compiler, "recompile_limit", 2)
    f = torcia.compile(lambda x: x + 1)
    for n in range(1, 5):
        assert f(torcia.zeros(n)).tolist() == [1.0] * n
    assert len(f._entries) == 2


OPS = [
    ("exp", lambda x, y: x.exp()), ("log", lambda x, y: (x.abs() + 1).log()),
    ("tanh", lambda x, y: x.tanh()), ("sigmoid", lambda x, y: x.sigmoid()),
    ("relu", lambda x, y: x.relu()), ("sin", lambda x, y: x.sin()),
    ("cos", lambda x, y: x.cos()), ("sqrt", lambda x, y: (x * x + 1).sqrt()),
    ("neg", lambda x, y: -x), ("abs", lambda x, y: x.abs()),
    ("add", lambda x, y: x + y), ("sub", lambda x, y: x - y), ("mul", lambda x, y: x * y),
    ("div", lambda x, y: x / (y.abs() + 1)), ("pow", lambda x, y: x ** 2),
    ("maximum", lambda x, y: torcia.maximum(x, y)),
    ("minimum", lambda x, y: torcia.minimum(x, y)),
    ("sum", lambda x, y: x.sum(dim=1)), ("mean", lambda x, y: x.mean()),
    ("matmul", lambda x, y: x @ y.T), ("softmax", lambda x, y: x.softmax(-1)),
    ("log_softmax", lambda x, y: x.log_softmax(-1)),
    ("gelu", lambda x, y: nn.functional.gelu(x)),
    ("silu", lambda x, y: nn.functional.silu(x)),
    ("layer_norm", lambda x, y: nn.functional.layer_norm(x, (5,))),
    ("transpose", lambda x, y: x.transpose(0, 1) * 2),
    ("reshape", lambda x, y: x.reshape(5, 4) + 1),
    ("cat", lambda x, y: torcia.cat([x, y], 0)),
    ("where", lambda x, y: torcia.where(x > y, x, y)),
    ("clamp", lambda x, y: x.clamp(-0.5, 0.5)),
    ("chain", lambda x, y: ((x * y + 1).tanh() * 0.5 - y).exp()),
    # indexing and shape
    ("getitem", lambda x, y: x[1:3, ::2] * y[0, :3]),
    ("index_select", lambda x, y: x.index_select(1, torcia.tensor([4, 0, 0]))),
    ("gather", lambda x, y: x.gather(1, torcia.tensor([[0, 1], [2, 2], [4, 3], [1, 0]]))),
    ("masked_fill", lambda x, y: x.masked_fill(y > 0, 0.5)),
    ("stack_chunk", lambda x, y: torcia.stack(x.chunk(5, 1), 0) * 2),
    ("flip_roll", lambda x, y: x.flip(0).roll(2, 1) - y),
    # reductions and scans
    ("cumsum", lambda x, y: x.cumsum(1)),
    ("logsumexp", lambda x, y: x.logsumexp(1)),
    ("var", lambda x, y: x.var(0)),
    ("amax_dim", lambda x, y: (x * y).amax(1)),
    ("norm", lambda x, y: torcia.linalg.vector_norm(x, dim=1)),
    # linear algebra and nn
    ("bmm", lambda x, y: torcia.bmm(x.reshape(2, 2, 5), y.reshape(2, 5, 2))),
    ("einsum", lambda x, y: torcia.einsum("ij,kj->ik", x, y)),
    ("conv1d", lambda x, y: nn.functional.conv1d(x.unsqueeze(0), y[:3, :4].unsqueeze(-1))),
    ("max_pool1d", lambda x, y: nn.functional.max_pool1d(x.unsqueeze(0), 2)),
    ("mse_loss", lambda x, y: nn.functional.mse_loss(x, y)),
    ("cross_entropy", lambda x, y: nn.functional.cross_entropy(x, torcia.tensor([0, 4, 2, 1]))),
    ("embedding", lambda x, y: nn.functional.embedding(torcia.tensor([[1, 3], [0, 1]]), x)),
]


@pytest.mark.parametrize("name,fn", OPS, ids=[o[0] for o in OPS])
def test_ops_parity_forward_and_grad(name, fn):
    torcia.manual_seed(1)
    x = torcia.randn(4, 5, dtype=torcia.float64, requires_grad=True)
    y = torcia.randn(4, 5, dtype=torcia.float64, requires_grad=True)

    def step(a, b):
        out = fn(a, b)
        (out * out).sum().backward()
        return out.detach()

    compiled = torcia.compile(step)
    for scale in (1.0, 0.7):  # trace, then replay on other values
        x.data.mul_(scale)
        y.data.mul_(scale)
        x.grad = y.grad = None
        got = compiled(x, y)
        gx = x.grad.clone()
        gy = None if y.grad is None else y.grad.clone()
        x.grad = y.grad = None
        want = step(x, y)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(gx.numpy(), x.grad.numpy(), rtol=1e-12, atol=1e-12)
        if gy is not None:
            np.testing.assert_allclose(gy.numpy(), y.grad.numpy(), rtol=1e-12, atol=1e-12)
    assert compiled._entries[0].eager_reason is None


def test_passes_and_fusion(capsys):
    def f(x, y):
        a = (x * y).tanh()
        b = (x * y).tanh()  # CSE
        dead = x.exp()  # noqa: F841 -- DCE
        return (a + b).sigmoid() * 2.0

    compiled = torcia.compile(f)
    x, y = torcia.randn(64, 32), torcia.randn(64, 32)
    compiled(x, y)
    got = compiled(x, y)
    np.testing.assert_allclose(got.numpy(), f(x, y).numpy(), rtol=1e-5)
    graph = compiled._entries[0].graph
    assert [n.kind for n in graph.nodes] == ["fused"]
    assert "#pragma omp parallel for" in graph.nodes[0].source
    assert "#pragma omp simd" in graph.nodes[0].source
    assert "fused mul+tanh+add+sigmoid+mul" in capsys.readouterr().err
    assert list(inductor.cache_dir().glob("k*.so"))
    with pytest.raises(ValueError, match="expects"):
        graph.nodes[0].fn(np.zeros(3, np.float32), np.zeros(3, np.float32))


def test_backends_registry_and_reset():
    assert {"eager", "inductor"} <= set(torcia.compiler.list_backends())
    with pytest.raises(KeyError, match="nope"):
        torcia.compile(lambda x: x, backend="nope")
    seen = []

    def counting(graph, example_inputs):
        seen.append(len(graph.nodes))
        return graph

    f = torcia.compile(lambda x: x.exp() + 1, backend=counting)
    f(torcia.ones(2))
    torcia.compiler.reset()
    f(torcia.ones(2))
    assert seen == [2, 2]
    with pytest.raises(RuntimeError, match="Unrecognized mode"):
        torcia.compile(lambda x: x, mode="fast")


def test_fusion_of_masks_and_scalars_not_of_mixed_dtypes():
    w = torcia.randn(32, 16, requires_grad=True)

    def step(x, s):
        loss = ((x * w).relu() * s - 1.0).tanh().sum()
        loss.backward()
        return loss

    compiled = torcia.compile(step)
    x, s = torcia.randn(32, 16), torcia.tensor(0.5)
    for _ in range(2):
        w.grad = None
        got = compiled(x, s)
        g = w.grad.clone()
        w.grad = None
        want = step(x, s)
        np.testing.assert_allclose(g.numpy(), w.grad.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
    ops = [n.op for n in compiled._entries[0].graph.nodes if n.kind == "fused"]
    assert any("activation_backward" in op for op in ops), ops  # relu's backward

    def mixed(a, b):
        return (a.double() * b).exp() + 1

    a, b = torcia.randn(8), torcia.randn(8, dtype=torcia.float64)
    f = torcia.compile(mixed)
    f(a, b)
    np.testing.assert_allclose(f(a, b).numpy(), mixed(a, b).numpy(), rtol=1e-12)
    graph = f._entries[0].graph
    assert all(graph.meta[v][1] == np.float64 for n in graph.nodes if n.kind == "fused"
               for v in n.value_args())


@pytest.mark.parametrize("name", ["SGD", "Adam"])
def test_a_whole_training_step_with_the_optimizer(name):
    """``zero_grad``, forward, ``backward`` and ``opt.step()`` in one compiled function:
    the optimizer's calls replay as opaque nodes (their kernels run outside dispatch)
    between the captured, fused forward and backward, with the gradients written first;
    ``torcia.compile(opt.step)`` alone too."""
    opt_mod = pytest.importorskip("torcia.optim")

    def make():
        model = _mlp()
        kwargs = {"momentum": 0.9} if name == "SGD" else {}
        return model, getattr(opt_mod, name)(model.parameters(), lr=0.05, **kwargs)

    model, opt = make()
    ref, ref_opt = make()

    step = _train_step(model, opt)

    compiled = torcia.compile(step)
    compiled_step = torcia.compile(ref_opt.step)
    torcia.manual_seed(3)
    for _ in range(5):
        x, y = torcia.randn(4, 8), torcia.randint(0, 4, (4,))
        got = compiled(x, y)
        ref_opt.zero_grad()
        want = _ce(ref(x), y)
        want.backward()
        compiled_step()
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
        for p, q in zip(model.parameters(), ref.parameters()):
            np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5,
                                       atol=1e-6)
    (entry,) = compiled._entries  # the first state of momentum buffers traced once
    assert entry.eager_reason is None
    assert [n.op for n in entry.graph.nodes if n.kind == "opaque"] == [
        f"{name}.zero_grad", f"{name}.step"]
    assert [n.op for n in compiled_step._entries[0].graph.nodes] == [f"{name}.step"]
    assert "step" not in vars(opt) and "zero_grad" not in vars(opt)  # unpatched


def test_kernel_profile_times_the_kernels_of_programs_traced_inside():
    """``kernel_profile`` instruments the programs traced while it is active (results
    unchanged), per op, the optimizer's opaque calls included; a program traced before
    runs as it was."""
    opt_mod = pytest.importorskip("torcia.optim")
    model, ref = _mlp(), _mlp()
    opt = opt_mod.SGD(model.parameters(), lr=0.05, momentum=0.9)
    ref_opt = opt_mod.SGD(ref.parameters(), lr=0.05, momentum=0.9)

    step = _train_step(model, opt)

    def ref_step(x, y):
        ref_opt.zero_grad()
        _ce(ref(x), y).backward()
        ref_opt.step()

    before = torcia.compile(lambda x: (x.sin() * 2).sum())
    before(torcia.ones(3))
    compiled = torcia.compile(step)
    x, y = torcia.randn(4, 8), torcia.randint(0, 4, (4,))
    with torcia.compiler.kernel_profile() as prof:
        for _ in range(4):
            compiled(x, y)
            ref_step(x, y)
        prof.clear()
        before(torcia.ones(3))
        compiled(x, y)
        ref_step(x, y)
    assert prof.calls["SGD.step"] == prof.calls["SGD.zero_grad"] == 1
    assert prof.calls["linear"] == 2 and all(t >= 0 for t in prof.times.values())
    assert not any("sin" in op for op in prof.calls)  # traced before the block
    compiled(x, y)  # after the block: still instrumented
    ref_step(x, y)
    assert prof.calls["SGD.step"] == 2
    for p, q in zip(model.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
    table = prof.table(steps=2)
    assert "SGD.step" in table and table.splitlines()[-1].startswith("all kernels")


def test_an_optimizer_step_with_a_closure_runs_eagerly(capsys):
    opt_mod = pytest.importorskip("torcia.optim")
    w = torcia.ones(2, requires_grad=True)
    opt = opt_mod.SGD([w], lr=0.1)

    def closure():
        w.grad = None
        (2 * w).pow(2).mean().backward()
        return w.sum()

    compiled = torcia.compile(lambda: opt.step(closure))
    for _ in range(2):
        compiled()
    np.testing.assert_allclose(w.detach().numpy(), [0.36, 0.36], rtol=1e-6)
    assert "closure" in capsys.readouterr().err


def test_a_third_party_backend_from_a_plugin(capsys):
    example = pytest.importorskip("torcia_example")
    assert "example_print" in torcia.compiler.list_backends()
    assert torcia.compiler.backends.provider("example_print") == "example"
    f = torcia.compile(lambda x: x.exp() + 1, backend="example_print")
    assert f(torcia.zeros(2)).tolist() == [2.0, 2.0]
    assert f(torcia.zeros(2)).tolist() == [2.0, 2.0]
    assert "call_function" in capsys.readouterr().out
    assert example.COMPILED_GRAPHS[-1].nodes[0].op == "exp"


def test_plugins_command_lists_the_backends():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "torcia", "plugins"], capture_output=True,
                         text=True, timeout=120).stdout
    assert "compile backend (2): eager, inductor" in out


def test_memory_planning_reuses_dead_fused_buffers():
    def f(x, y, z):
        a = (x * y).exp() + 1  # a fused kernel; a has two readers, so it is a buffer
        b = (a * 2).tanh() + a  # the fused kernel a dies in
        return ((b @ z) * 3).sin() + 1  # this fused kernel may write into a's buffer

    g = torcia.compile(f)
    x, y, z = torcia.randn(16, 16), torcia.randn(16, 16), torcia.randn(16, 16)
    g(x, y, z)
    np.testing.assert_allclose(g(x, y, z).numpy(), f(x, y, z).numpy(), rtol=1e-4, atol=1e-4)
    from torcia.compiler.replay import generate, reusable_buffers

    graph = g._entries[0].graph
    results = sorted(graph.output_values())
    assert reusable_buffers(graph, set(results))
    _, source = generate(graph, results)
    assert "out=v" in source and "# 1 fused kernel(s) write into a dead buffer" in source


def test_relu_of_nan_is_nan_in_fused_kernels():
    # as eager's relu (and PyTorch's): NaN propagates, only values <= 0 become 0; a NaN
    # that first shows up after the first replay's check must not turn into 0
    if inductor.compiler() is None:
        pytest.skip("no C++ compiler")
    f = torcia.compile(lambda x: (x * 2).relu() + 1)
    x = torcia.tensor([1.0, -1.0, 0.0, 2.0])
    f(x)
    f(x)
    x = torcia.tensor([float("nan"), -1.0, 0.0, 2.0])
    got = f(x).numpy()
    np.testing.assert_array_equal(got, (x * 2).relu().numpy() + 1)
    assert np.isnan(got[0]) and f._entries[0].eager_reason is None


def test_kernels_come_from_the_disk_cache(monkeypatch):
    f = torcia.compile(lambda x: (x * 3).exp() - x)
    x = torcia.randn(8)
    f(x)
    torcia.compiler.reset()
    inductor._loaded.clear()

    def no_compiler(*args, **kwargs):
        raise AssertionError("the compiler ran for a cached kernel")

    monkeypatch.setattr(inductor.subprocess, "run", no_compiler)
    g = torcia.compile(lambda x: (x * 3).exp() - x)
    g(x)
    np.testing.assert_allclose(g(x).numpy(), ((x * 3).exp() - x).numpy(), rtol=1e-6)


def test_freezing_a_parameter_retraces(capsys):
    model = _mlp()
    step = torcia.compile(_step_of(model, _ce))
    x, y = torcia.randn(4, 8), torcia.tensor([0, 1, 2, 3])
    step(x, y)
    model[0].weight.requires_grad_(False)
    model.zero_grad(set_to_none=True)
    step(x, y)
    assert model[0].weight.grad is None and model[2].weight.grad is not None
    assert "changed shape, dtype or requires_grad" in capsys.readouterr().err


def test_a_value_made_outside_dispatch_is_caught_on_the_first_replay(capsys):
    from torcia.library import array, wrap

    def f(x):
        # a tensor built from x's array without any op: capture sees a constant
        y = wrap(array(x) * 2, x.device)
        return (y + 1).exp()

    g = torcia.compile(f)
    g(torcia.zeros(3))
    x = torcia.ones(3)
    np.testing.assert_allclose(g(x).numpy(), f(x).numpy())
    np.testing.assert_allclose(g(x).numpy(), f(x).numpy())
    assert "first replay differed from eager" in capsys.readouterr().err


def test_torcia_logs_environment_variable(tmp_path):
    import os
    import subprocess
    import sys

    code = ("import torcia\n"
            "f = torcia.compile(lambda x: (x * 2).exp() + 1)\n"
            "f(torcia.ones(3)); f(torcia.ones(4))\n")
    env = dict(os.environ, TORCIA_LOGS="graph,fusion,guards", TORCIA_CACHE_DIR=str(tmp_path))
    err = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=120).stderr
    assert "[torcia.compile:graph] captured" in err and "placeholder" in err
    assert "[torcia.compile:fusion] fused mul+exp+add" in err and "omp simd" in err
    assert "[torcia.compile:guards] recompiling" in err and "shape changed" in err


def test_compiled_step_matches_pytorch():
    torch = pytest.importorskip("torch")
    model = _mlp()
    ref = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    with torch.no_grad():
        for p, q in zip(model.parameters(), ref.parameters()):
            q.copy_(torch.from_numpy(p.detach().numpy().copy()))
    step = torcia.compile(_step_of(model, _ce))
    for seed in (0, 1):  # trace, then replay
        rng = np.random.default_rng(seed)
        x, y = rng.standard_normal((6, 8)).astype(np.float32), rng.integers(0, 4, 6)
        model.zero_grad(set_to_none=True)
        ref.zero_grad(set_to_none=True)
        loss = step(torcia.from_numpy(x), torcia.from_numpy(y))
        want = torch.nn.functional.cross_entropy(ref(torch.from_numpy(x)), torch.from_numpy(y))
        want.backward()
        np.testing.assert_allclose(loss.item(), want.item(), rtol=1e-5)
        for p, q in zip(model.parameters(), ref.parameters()):
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_another_device_is_captured_and_replayed_there(capsys):
    pytest.importorskip("torcia_example")
    torcia.compiler.set_logs(guards=True)
    f = torcia.compile(lambda x: (x * 3).relu() + 1)
    x = torcia.tensor([1.0, -2.0], device="example")
    assert f(x).tolist() == [4.0, 1.0]
    out = f(x * 2)  # the replay: on the device, unfused (its arrays have no ElementwiseKernel)
    assert out.device.type == "example" and out.tolist() == [7.0, 1.0]
    graph = f._entries[0].graph
    assert graph.device.type == "example" and [n.op for n in graph.nodes] == ["mul", "relu",
                                                                                "add"]
    # a copy between devices: that signature runs eagerly, saying why (a replay would
    # hand back the data copied when traced)
    g = torcia.compile(lambda x, y: x.cpu() * 2 + y)
    assert g(x, torcia.ones(2)).tolist() == [3.0, -3.0]
    assert g(x * 2, torcia.ones(2)).tolist() == [5.0, -7.0]
    assert "a copy between devices (example:0 to cpu)" in capsys.readouterr().err
    torcia.compiler.set_logs()


def test_in_place_writes_are_replayed():
    def f(x, buf):
        buf.mul_(0.5).add_(x)
        return buf * 2

    g = torcia.compile(f)
    buf, ref = torcia.ones(4), torcia.ones(4)
    for k in range(3):
        x = torcia.full((4,), float(k))
        np.testing.assert_allclose(g(x, buf).numpy(), f(x, ref).numpy())
        np.testing.assert_allclose(buf.numpy(), ref.numpy())
    assert [n.kind for n in g._entries[0].graph.nodes].count("copy_") == 2


def _manual_softmax(x):
    e = (x - x.amax(-1, keepdim=True)).exp()
    return e / e.sum(-1, keepdim=True)


def _manual_layer_norm(x, w, b):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / (var + 1e-5).sqrt() * w + b


def _manual_gelu(x):
    return 0.5 * x * (1 + (0.7978845608 * (x + 0.044715 * x ** 3)).tanh())


REDUCTIONS = [
    # (name, function, fused kernels it must contain: a value the backward reads again
    # is kept, so a chain feeding a reduction fuses with it only where nothing else reads it)
    ("mse", lambda x, y, b: ((x - y) ** 2).mean(), ["pow->mean"]),
    ("rows", lambda x, y, b: (x * y + b).tanh().sum(-1), ["mul+add+tanh"]),
    ("rows_keepdim", lambda x, y, b: (x * b).exp().sum(1, keepdim=True) * 1, ["mul->sum"]),
    ("columns", lambda x, y, b: (x * b - y).sum(0), ["mul+sub->sum"]),
    ("columns_mean", lambda x, y, b: (x + y).sigmoid().mean(0, keepdim=True), ["add+sigmoid"]),
    ("amax", lambda x, y, b: (x * 2).exp().amax(0), ["mul+exp"]),
    ("amin", lambda x, y, b: (x - b).amin(-1), ["neg->sum"]),
    ("softmax", lambda x, y, b: _manual_softmax(x * y), ["sub+exp", "neg+div+mul->sum"]),
    ("layer_norm", lambda x, y, b: _manual_layer_norm(x, b, y[0]),
     ["pow->mean", "neg+div+mul->sum"]),
    ("gelu", lambda x, y, b: _manual_gelu(x * y), ["pow+mul+add+mul+tanh"]),
]


@pytest.mark.parametrize("name,fn,kernels", REDUCTIONS, ids=[r[0] for r in REDUCTIONS])
def test_fusion_of_broadcasts_and_reductions(name, fn, kernels):
    """Elementwise chains (with operands broadcast into them) feeding a sum, mean, amax or
    amin over the trailing or the leading dims become one generated kernel; forward and
    gradients as eager's."""
    torcia.manual_seed(2)
    x = torcia.randn(6, 7, dtype=torcia.float64, requires_grad=True)
    y = torcia.randn(6, 7, dtype=torcia.float64, requires_grad=True)
    b = torcia.randn(7, dtype=torcia.float64, requires_grad=True)

    def step(x, y, b):
        out = fn(x, y, b)
        (out * out).sum().backward()
        return out.detach()

    compiled = torcia.compile(step)
    for scale in (1.0, 0.6):
        with torcia.no_grad():
            x.mul_(scale)
        results = []
        for f in (compiled, step):
            x.grad = y.grad = b.grad = None
            out = f(x, y, b)
            results.append([out] + [t.grad for t in (x, y, b)])
        for got, want in zip(*results):
            if want is None:
                assert got is None
                continue
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10, atol=1e-12)
    ops = [n.op for n in compiled._entries[0].graph.nodes if n.kind == "fused"]
    for k in kernels:
        assert any(k in op for op in ops), (k, ops)


def test_reduction_fusion_keeps_nan_and_float32_accuracy():
    def f(x):
        return (x * 1.0).amax(-1), (x + 0.0).sum(-1), (x * 2.0).mean(0)

    compiled = torcia.compile(f)
    x = torcia.randn(8, 4096)
    compiled(x)
    x[3, 100] = float("nan")
    got, want = compiled(x), f(x)
    assert np.isnan(got[0][3].item()) and np.isnan(got[1][3].item())
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-4, equal_nan=True)
    assert sum("->" in n.op for n in compiled._entries[0].graph.nodes) == 3


def test_a_reduction_over_middle_dims_is_not_fused():
    f = torcia.compile(lambda x: (x * 2).sum(1))
    x = torcia.randn(3, 4, 5)
    f(x)
    np.testing.assert_allclose(f(x).numpy(), (x * 2).sum(1).numpy(), rtol=1e-6)
    assert [n.op for n in f._entries[0].graph.nodes] == ["mul", "sum"]


@pytest.mark.parametrize("dropout", [False, True])
def test_compiled_module_with_batch_norm_and_dropout(dropout, capsys):
    """A BatchNorm's running statistics (in-place writes) replay in the forward program and
    are part of the first replay's check; a dropout mask is a graph node that draws from
    the default generator on each replay, so under the same seed compiled equals eager."""
    def make():
        torcia.manual_seed(0)
        layers = [nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU()]
        return nn.Sequential(*layers, *([nn.Dropout(0.3)] if dropout else []),
                             nn.Linear(16, 4))

    model, ref = make(), make()
    cm = torcia.compile(model)
    for i in range(4):
        x = torcia.randn(6, 8)
        results = []
        for f, m in ((cm, model), (ref, ref)):
            torcia.manual_seed(100 + i)
            out = f(x)
            out.pow(2).sum().backward()
            results.append([out.detach(), m[1].running_mean, m[1].running_var]
                           + [p.grad.clone() for p in m.parameters()])
            m.zero_grad()
        for a, b in zip(*results):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    assert int(model[1].num_batches_tracked) == int(ref[1].num_batches_tracked) == 4
    (entry,) = cm._compiled_forward._entries
    assert entry.eager_reason is None and entry.joint is not None and entry.checked
    assert ("dropout_mask" in [n.op for n in entry.graph.nodes]) == dropout
    assert "first replay" not in capsys.readouterr().err


def _dropout_net():
    torcia.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.5), nn.Linear(32, 4),
                         nn.Dropout(0.2)).double()


def test_compiled_dropout_draws_a_fresh_mask_on_each_replay():
    """The mask is captured as a node, not a constant: successive calls of the compiled
    model drop different units, and every call (the trace, the checked first replay, the
    replays after it) equals eager's output and gradients under the same seed."""
    model, ref = _dropout_net(), _dropout_net()
    cm = torcia.compile(model)
    x = torcia.randn(6, 8, dtype=torcia.float64)
    for seed in (0, 1, 2, 3):
        results = []
        for f, m in ((cm, model), (ref, ref)):
            torcia.manual_seed(seed)
            out = f(x)
            out.pow(2).sum().backward()
            results.append([out.detach()] + [p.grad.clone() for p in m.parameters()])
            m.zero_grad()
        for a, b in zip(*results):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-14)
    (entry,) = cm._compiled_forward._entries
    assert entry.eager_reason is None and entry.joint is not None and entry.checked
    assert [n.op for n in entry.graph.nodes].count("dropout_mask") == 2
    # no reseeding: each replay draws new masks, as eager would
    torcia.manual_seed(5)
    outs = [cm(x).detach() for _ in range(3)]
    assert not torcia.equal(outs[0], outs[1]) and not torcia.equal(outs[1], outs[2])
    torcia.manual_seed(5)
    for want in outs:
        np.testing.assert_allclose(ref(x).detach().numpy(), want.numpy(), rtol=1e-12)


def test_compiled_dropout_gradients_match_finite_differences():
    """The compiled backward multiplies by the mask the forward drew: with the mask fixed
    by the seed, the gradient of the compiled function matches central differences."""
    torcia.manual_seed(0)
    w = torcia.randn(5, 5, dtype=torcia.float64, requires_grad=True)
    f = torcia.compile(lambda a: nn.functional.dropout(a @ w, 0.4).tanh().sum())
    x = torcia.randn(3, 5, dtype=torcia.float64)
    for seed in (1, 2):  # the trace, then the checked replay
        torcia.manual_seed(seed)
        f(x)
    torcia.manual_seed(3)
    (g,) = torcia.autograd.grad(f(x), w)
    eps, num = 1e-6, np.zeros((5, 5))
    for i in range(5):
        for j in range(5):
            d = torcia.zeros(5, 5, dtype=torcia.float64)
            d[i, j] = eps
            with torcia.no_grad():
                torcia.manual_seed(3)
                hi = nn.functional.dropout(x @ (w + d), 0.4).tanh().sum().item()
                torcia.manual_seed(3)
                lo = nn.functional.dropout(x @ (w - d), 0.4).tanh().sum().item()
            num[i, j] = (hi - lo) / (2 * eps)
    np.testing.assert_allclose(g.numpy(), num, rtol=1e-6, atol=1e-8)
    assert f._entries[0].eager_reason is None


@pytest.mark.parametrize("draw", [lambda x: x + torcia.rand(3), lambda x: x * torcia.randn(3),
                                  lambda x: torcia.bernoulli(x),
                                  lambda x: x + torcia.normal(0.0, 1.0, (3,))])
def test_compiled_random_ops_replay_fresh_draws(draw):
    f = torcia.compile(draw)
    x = torcia.full((3,), 0.5)
    with torcia.no_grad():
        torcia.manual_seed(0)
        got = [f(x) for _ in range(8)]
        torcia.manual_seed(0)
        want = [draw(x) for _ in range(8)]
    for a, b in zip(got, want):
        assert torcia.equal(a, b)
    assert len({tuple(a.tolist()) for a in got}) > 1
    (entry,) = f._entries
    assert entry.eager_reason is None and entry.run is not None


def test_double_backward_through_a_compiled_backward_raises():
    torcia.manual_seed(0)
    lin = nn.Linear(3, 1, dtype=torcia.float64)
    cm = torcia.compile(lin)
    x = torcia.randn(2, 3, dtype=torcia.float64, requires_grad=True)
    cm(x)
    (gx,) = torcia.autograd.grad(cm(x).tanh().sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable"):
        gx.sum().backward()


def test_a_chain_read_again_after_its_reduction_is_written_by_the_same_kernel():
    """Softmax written out: ``exp(x - max)`` is summed and divided by that sum; one kernel
    computes it, writes it and sums its rows (two outputs); so does ``x * 2`` and its max."""
    f = torcia.compile(lambda x: _manual_softmax(x * 2))
    for n in (5, 5):
        x = torcia.randn(n, 33, dtype=torcia.float64)
        np.testing.assert_allclose(f(x).numpy(), (x * 2).softmax(-1).numpy(), rtol=1e-12)
    ops = [n.op for n in f._entries[0].graph.nodes]
    assert ops == ["mul->amax+out", "sub+exp->sum+out", "div"], ops
    node = f._entries[0].graph.nodes[1]
    assert node.tuple_out and len(node.outs) == 2 and "kept[i]" in node.source


POOLS = [  # kernel_size, stride, padding, dilation, ceil_mode, input (N, C, H, W)
    (2, 2, 0, 1, False, (2, 3, 8, 8)),
    (2, 2, 0, 1, True, (2, 3, 7, 9)),  # ceil: the last windows run past the input
    (3, 2, 1, 1, False, (1, 2, 9, 7)),  # overlapping windows, padding
    (3, 1, 1, 2, False, (1, 2, 8, 8)),  # dilation
    ((2, 3), (1, 2), (1, 0), 1, False, (2, 2, 6, 10)),
    # 2x2 tiles in rows of 8 or more outputs: loops of their own (an odd row or column
    # past the last window is left out)
    (2, 2, 0, 1, False, (2, 3, 16, 17)),
    (2, 2, 0, 1, False, (1, 2, 9, 20)),
]


@pytest.mark.parametrize("k,s,p,d,ceil,shape", POOLS)
@pytest.mark.parametrize("dtype", [torcia.float32, torcia.float64])
@pytest.mark.parametrize("whole_step", [True, False])
def test_generated_max_pooling_matches_eager(k, s, p, d, ceil, shape, dtype, whole_step):
    if inductor.compiler() is None:
        pytest.skip("no C++ compiler: pooling is not specialised")

    def pool(x):
        return nn.functional.max_pool2d(x, k, s, p, d, ceil_mode=ceil, return_indices=True)

    # a whole step: x is a leaf the step reads (as a parameter), the backward in one graph
    leaf = torcia.zeros(shape, dtype=dtype, requires_grad=True)

    def step(g):
        out, idx = pool(leaf)
        (out * g).sum().backward()
        return out.detach(), idx

    compiled = torcia.compile(step if whole_step else pool)
    torcia.manual_seed(0)
    for scale in (1.0, -2.0, 3.0):  # replays on other values, all-negative windows
        x = (torcia.randn(*shape, dtype=dtype) * scale).round()  # ties: the first wins
        x[0, 0, 1, 1] = float("nan")  # NaN wins its windows
        g = torcia.randn(*pool(x)[0].shape, dtype=dtype)
        xe = x.clone().requires_grad_()
        if whole_step:
            with torcia.no_grad():
                leaf.copy_(x)
            leaf.grad = None
            got, got_idx = compiled(g)
            got_grad = leaf.grad
        else:
            xc = x.clone().requires_grad_()
            got, got_idx = compiled(xc)
            (got * g).sum().backward()
            got_grad = xc.grad
        want, want_idx = pool(xe)
        (want * g).sum().backward()
        np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
        np.testing.assert_array_equal(got_idx.numpy(), want_idx.numpy())
        # overlapping windows add into one element in an order of their own: the
        # reference kernel (torcia-cpu absent) may round the sum differently in the last bit
        np.testing.assert_allclose(got_grad.numpy(), xe.grad.numpy(), rtol=1e-6, atol=1e-7)
    entry = compiled._entries[0]
    assert entry.eager_reason is None
    nodes = entry.graph.nodes + (entry.joint.bwd_graph.nodes if entry.joint else [])
    pools = [n for n in nodes if n.op in ("max_pool", "max_pool_backward")]
    assert len(pools) == 2 and all(isinstance(n.fn, inductor.PoolKernel) for n in pools)
    tiled = k == 2 and s == 2 and p == 0 and shape[3] >= 16
    assert ("table()" not in pools[0].source) == tiled


def test_generated_max_pooling_checks_its_arrays():
    if inductor.compiler() is None:
        pytest.skip("no C++ compiler")
    spec = (2, 4, 4, 2, 2, (2, 2, 2, 2, 0, 0, 1, 1))
    pool = inductor.PoolKernel(inductor._pool_source("float", *spec), spec,
                               np.dtype(np.float32))
    values, indices = pool(np.arange(32, dtype=np.float32).reshape(1, 2, 4, 4))
    np.testing.assert_array_equal(indices[0, 0], [[5, 7], [13, 15]])
    with pytest.raises(ValueError, match="expects an input of 32 float32"):
        pool(np.zeros((1, 2, 4, 4), np.float64))
    back = inductor.PoolKernel(inductor._pool_backward_source("float", *spec), spec,
                               np.dtype(np.float32), backward=True)
    grad = back(np.ones((1, 2, 2, 2), np.float32), indices)
    np.testing.assert_array_equal(grad[0, 0].ravel().nonzero()[0], [5, 7, 13, 15])
    with pytest.raises(ValueError, match="indices outside a plane of 16"):
        back(np.ones((1, 2, 2, 2), np.float32), indices + 16)
    relu_pool = inductor.PoolKernel(inductor._pool_source("float", *spec, relu=True), spec,
                                    np.dtype(np.float32))
    x = -np.arange(32, dtype=np.float32).reshape(1, 2, 4, 4)
    x[0, 1, 0, 0] = np.nan
    x[0, 1, 3, 3] = 5.0
    values, _ = relu_pool(x)
    np.testing.assert_array_equal(values, [[[[0, 0], [0, 0]], [[np.nan, 0], [0, 5]]]])
    # the same in rows of 8 outputs (the tiled loop): NaN wins, then stays; relu after
    spec = (2, 2, 16, 1, 8, (2, 2, 2, 2, 0, 0, 1, 1))
    tiled = inductor.PoolKernel(inductor._pool_source("float", *spec, relu=True), spec,
                                np.dtype(np.float32))
    assert "table()" not in tiled.source
    x = -np.arange(64, dtype=np.float32).reshape(1, 2, 2, 16)
    x[0, 1, 0, 1], x[0, 1, 1, 0] = np.nan, 7.0
    x[0, 1, 1, 15] = 5.0
    values, indices = tiled(x)
    np.testing.assert_array_equal(values[0, :, 0], [[0] * 8, [np.nan] + [0] * 6 + [5]])
    np.testing.assert_array_equal(indices[0, 1, 0, [0, 7]], [1, 31])


def test_gradients_handed_to_the_optimizer_are_not_aliased():
    # a + b hands one gradient array to both leaves, b's also passes a view (expand):
    # each leaf's .grad must own its memory; the grads a step made stay as they were
    # while the next replays (a fresh buffer per step, not one reused under them)
    torcia.manual_seed(0)
    a = torcia.randn(4, 3, requires_grad=True)
    b = torcia.randn(4, 3, requires_grad=True)
    c = torcia.randn(3, requires_grad=True)
    opt = torcia.optim.SGD([a, b, c], lr=0.1)

    def step(x):
        opt.zero_grad()
        loss = ((a + b) * x).sum() + (c.expand(4, 3) * 2).sum()
        loss.backward()
        opt.step()
        return loss

    compiled = torcia.compile(step)
    held = []
    for scale in (1.0, 2.0, 3.0):
        x = torcia.full((4, 3), scale)
        compiled(x)
        held.append([(p.grad, p.grad.numpy().copy()) for p in (a, b, c)])
        assert not np.shares_memory(a.grad.numpy(), b.grad.numpy())
        np.testing.assert_array_equal(a.grad.numpy(), np.full((4, 3), scale, np.float32))
        np.testing.assert_array_equal(c.grad.numpy(), np.full(3, 8.0, np.float32))
    for grads in held:
        for grad, value in grads:
            np.testing.assert_array_equal(grad.numpy(), value)
    a.grad.numpy()[...] = 0
    assert (b.grad.numpy() == 3).all()
    assert compiled._entries[0].eager_reason is None


@pytest.mark.parametrize("k,s,p,d,ceil,shape", POOLS[:3] + POOLS[-2:])
def test_relu_then_max_pooling_is_one_kernel_each_way(k, s, p, d, ceil, shape):
    if inductor.compiler() is None:
        pytest.skip("no C++ compiler")
    torcia.manual_seed(0)
    conv = nn.Conv2d(shape[1], shape[1], 1)

    def step(x):
        out = nn.functional.max_pool2d(torcia.relu(conv(x)), k, s, p, d, ceil_mode=ceil)
        loss = (out * out.flip(-1)).sum()  # every pooled value reaches the loss
        loss.backward()
        return loss, out.detach()

    compiled = torcia.compile(step)
    for scale in (1.0, -1.0, 0.5):  # all-negative windows, other values per replay
        x = torcia.randn(*shape) * scale
        conv.zero_grad()
        got, got_out = compiled(x)
        got_grads = [q.grad.clone() for q in conv.parameters()]
        conv.zero_grad()
        want, want_out = step(x)
        np.testing.assert_allclose(got_out.numpy(), want_out.numpy(), rtol=1e-6)
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
        for g, q in zip(got_grads, conv.parameters()):
            np.testing.assert_allclose(g.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6)
    ops = [n.op for n in compiled._entries[0].graph.nodes]
    assert "relu+max_pool" in ops and "max_pool_backward*relu_mask" in ops
    assert "relu" not in ops and "gt" not in ops


@pytest.mark.parametrize("dims,keepdim", [((0, 2, 3), False), ((0, 2, 3), True), ((0, 3), False),
                                          ((-1, 0), False)])
@pytest.mark.parametrize("dtype", [torcia.float32, torcia.float64])
def test_a_sum_keeping_middle_dims_is_a_generated_loop(dims, keepdim, dtype):
    if inductor.compiler() is None:
        pytest.skip("no C++ compiler")
    f = torcia.compile(lambda x: x.sum(dims, keepdim=keepdim) * 2)
    torcia.manual_seed(0)
    for _ in range(2):
        x = torcia.randn(3, 4, 5, 6, dtype=dtype) + 100  # float32 sums: double accumulators
        got, want = f(x), (x.double().sum(dims, keepdim=keepdim) * 2).to(dtype)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6 if dtype ==
                                   torcia.float32 else 1e-12)
        assert got.shape == want.shape and got.dtype == dtype
    nodes = f._entries[0].graph.nodes
    assert any(n.op == "sum" and isinstance(n.fn, inductor.FusedKernel) for n in nodes)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("dtype", [torcia.float32, torcia.float64])
def test_cross_entropy_and_its_backward_share_one_softmax(reduction, dtype):
    if inductor.compiler() is None:
        pytest.skip("no C++ compiler")
    torcia.manual_seed(0)
    lin = nn.Linear(6, 5).to(dtype)

    def step(x, y):
        loss = nn.functional.cross_entropy(lin(x) * 30, y, reduction=reduction,
                                           ignore_index=2)  # large logits: a stable exp
        loss.backward()
        return loss

    compiled = torcia.compile(step)
    for _ in range(3):
        x, y = torcia.randn(7, 6, dtype=dtype), torcia.randint(0, 5, (7,))
        y[0] = 2  # ignored: out of the mean's divisor and of the gradient
        lin.zero_grad()
        got = compiled(x, y)
        got_grads = [q.grad.clone() for q in lin.parameters()]
        lin.zero_grad()
        want = step(x, y)
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-6)
        for g, q in zip(got_grads, lin.parameters()):
            np.testing.assert_allclose(g.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6)
    ops = [n.op for n in compiled._entries[0].graph.nodes]
    assert "cross_entropy+softmax" in ops and "cross_entropy_backward(softmax)" in ops
    with pytest.raises(IndexError, match="Target 9 is out of bounds"):
        compiled(torcia.randn(7, 6, dtype=dtype), torcia.full((7,), 9))


@pytest.mark.parametrize("dtype", [torcia.float32, torcia.float64])
@pytest.mark.parametrize("batched", [False, True])
def test_cross_entropy_backward_sums_the_bias_gradient(batched, dtype):
    # a Linear head's bias gradient is the CE gradient summed over its rows: the
    # backward kernel adds it up as it writes them (through the reshapes of a (B, L, C)
    # head), and no separate sum reads the (N, C) gradient again
    if inductor.compiler() is None:
        pytest.skip("no C++ compiler")
    torcia.manual_seed(0)
    head = nn.Linear(6, 5).to(dtype)
    opt = torcia.optim.SGD(head.parameters(), lr=0.1, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(head(x).reshape(-1, 5), y, ignore_index=2)
        loss.backward()
        opt.step()
        return loss

    compiled = torcia.compile(step)
    twin = nn.Linear(6, 5).to(dtype)
    twin.load_state_dict(head.state_dict())
    twin_opt = torcia.optim.SGD(twin.parameters(), lr=0.1, momentum=0.9)
    for _ in range(4):
        shape = (3, 4, 6) if batched else (12, 6)
        x, y = torcia.randn(*shape, dtype=dtype), torcia.randint(0, 5, (12,))
        got = compiled(x, y)
        twin_opt.zero_grad()
        want = nn.functional.cross_entropy(twin(x).reshape(-1, 5), y, ignore_index=2)
        want.backward()
        twin_opt.step()
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-6)
        for a, b in zip(head.parameters(), twin.parameters()):
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5,
                                       atol=1e-6)
    nodes = compiled._entries[0].graph.nodes
    fused = [n for n in nodes if n.op == "cross_entropy_backward(softmax)+sum"]
    assert len(fused) == 1 and not any(n.op == "sum" for n in nodes)


def test_cross_entropy_backward_kernel_writes_over_the_softmax():
    if inductor.compiler() is None:
        pytest.skip("no C++ compiler")
    dt = np.dtype(np.float64)
    ce = inductor.CrossEntropyKernel(3, 4, dt, "mean", -100)
    back = inductor.CrossEntropyKernel(3, 4, dt, "mean", -100, backward=True,
                                       column_sum=True)
    x, t = np.random.default_rng(0).standard_normal((3, 4)), np.array([1, -100, 3])
    _, p = ce(x, t)
    want = p / 2  # two rows kept: the mean's divisor
    want[0, 1] -= 0.5
    want[1] = 0
    want[2, 3] -= 0.5
    grad, colsum = back(np.array(1.0), p, t)
    assert grad is p  # the softmax's buffer, read by nothing else in a program
    np.testing.assert_allclose(grad, want, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(colsum, want.sum(0), rtol=1e-12, atol=1e-15)
    with pytest.raises(ValueError, match="probabilities"):
        back(np.array(1.0), np.zeros((2, 4)), t)


def test_cross_entropy_kernel_all_rows_ignored_and_infinite_logits():
    if inductor.compiler() is None:
        pytest.skip("no C++ compiler")
    ce = inductor.CrossEntropyKernel(2, 3, np.dtype(np.float32), "mean", -100)
    x = np.array([[0, -np.inf, 1], [2, 2, 2]], np.float32)
    loss, p = ce(x, np.array([2, 0]))
    want = nn.functional.cross_entropy(torcia.tensor(x), torcia.tensor([2, 0]))
    np.testing.assert_allclose(loss, want.item(), rtol=1e-6)
    np.testing.assert_allclose(p.sum(1), [1, 1], rtol=1e-6)
    with np.errstate(invalid="ignore"):
        loss, _ = ce(x, np.array([-100, -100]))
    assert np.isnan(loss)


def test_first_replay_check_on_nan_and_infinite_outputs():
    from torcia.compiler import _same

    nan = np.full(3, np.nan)
    assert _same([nan], [nan.copy()])  # all NaN: the same answer, not a mismatch
    big = np.array([np.inf, 1.0, 2.0])
    assert _same([big], [big.copy()])
    # an infinite value must not widen the tolerance until any answer passes
    assert not _same([np.array([np.inf, 1.0, 50.0])], [big])
    assert not _same([np.array([np.nan, 1.0])], [np.array([0.0, 1.0])])


def test_every_fusion_table_builds_against_the_installed_op_records():
    records = torcia.library.op_records()
    tables = inductor.fusion_ops()
    assert tables == inductor._written_fusion_ops()
    assert all(name in records for table in tables for name in table)


@pytest.mark.parametrize("field", ["unary", "binary", "compare", "reduce",
                                   "activation_backward"])
def test_a_stale_op_name_in_a_fusion_table_is_refused_naming_the_table(monkeypatch, field):
    written = inductor._written_fusion_ops()
    getattr(written, field)["no_such_op"] = "x"
    monkeypatch.setattr(inductor, "_written_fusion_ops", lambda: written)
    inductor.fusion_ops.cache_clear()
    try:
        with pytest.raises(KeyError, match=f"torcia.compiler.inductor.fusion_ops\\(\\).{field}: "
                                           "no op named 'no_such_op'"):
            inductor.fusion_ops()
    finally:
        monkeypatch.undo()
        inductor.fusion_ops.cache_clear()
