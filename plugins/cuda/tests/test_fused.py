"""The fused optimizer kernels' C bodies, compiled for the host (host_kernels.py), against
torcia-optim's NumPy kernels; and an optimizer on "cuda" running them through the plugin.

On a GPU, tools/gpu_check runs tests/test_cupy.py, which checks the same kernels compiled
by CuPy.
"""

import importlib.util
import pathlib

import numpy as np
import pytest

import torcia
from torcia import plugins

pytest.importorskip("torcia_cuda")
reference = pytest.importorskip("torcia.optim.kernels")
HERE = pathlib.Path(__file__).parent


def _load(name):
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


host_kernels = _load("host_kernels")
fake_cupy = _load("fake_cupy")
if host_kernels.CXX is None:
    pytest.skip("no C++ compiler to build the kernels for the host", allow_module_level=True)

from torcia_cuda import fused  # noqa: E402


class HostCupy:
    """What the fused steps use of CuPy, on the host."""

    ElementwiseKernel = host_kernels.ElementwiseKernel
    empty_like = staticmethod(np.empty_like)


STEPS = fused.optimizer_steps(HostCupy)
RNG = np.random.default_rng(0)
SHAPES = [(3, 4), (5,), (2, 2, 3)]


def _same(a, b):
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("options", [
    dict(momentum=0.9, dampening=0.0, nesterov=False, weight_decay=0.0, maximize=False),
    dict(momentum=0.9, dampening=0.0, nesterov=True, weight_decay=1e-2, maximize=False),
    dict(momentum=0.5, dampening=0.1, nesterov=False, weight_decay=0.0, maximize=True),
    dict(momentum=0.0, dampening=0.0, nesterov=False, weight_decay=1e-3, maximize=False),
])
def test_sgd_kernel_matches_torcia_optim(dtype, options):
    ours = [RNG.standard_normal(s).astype(dtype) for s in SHAPES]
    theirs = [p.copy() for p in ours]
    bufs_ours, bufs_theirs = [None] * 3, [None] * 3
    for _ in range(3):  # the first step makes the momentum buffers, the next use them
        grads = [RNG.standard_normal(s).astype(dtype) for s in SHAPES]
        STEPS["sgd_step"](ours, grads, bufs_ours, lr=0.1, **options)
        reference.sgd_step(theirs, grads, bufs_theirs, lr=0.1, **options)
        _same(ours, theirs)
        if options["momentum"]:
            _same(bufs_ours, bufs_theirs)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("beta1", [0.9, 0.3])  # 0.3: lerp_ from the gradient's end
@pytest.mark.parametrize("amsgrad, decoupled, weight_decay, maximize", [
    (False, False, 0.0, False), (True, False, 1e-2, False), (False, True, 1e-2, True),
    (True, True, 0.0, False)])
def test_adam_kernel_matches_torcia_optim(dtype, beta1, amsgrad, decoupled, weight_decay,
                                          maximize):
    state = {}
    for side in ("ours", "theirs"):
        state[side] = [[RNG.standard_normal(s).astype(dtype) for s in SHAPES]]
    state["theirs"] = [[p.copy() for p in state["ours"][0]]]
    for side in state:
        state[side] += [[np.zeros(s, dtype) for s in SHAPES] for _ in range(3)]
    options = dict(lr=1e-2, beta1=beta1, beta2=0.999, eps=1e-8, weight_decay=weight_decay,
                   amsgrad=amsgrad, maximize=maximize, decoupled_weight_decay=decoupled)
    for step in (1.0, 2.0, 3.0):
        grads = [RNG.standard_normal(s).astype(dtype) for s in SHAPES]
        p, m, v, vmax = state["ours"]
        STEPS["adam_step"](p, grads, m, v, vmax, [step] * 3, **options)
        p, m, v, vmax = state["theirs"]
        reference.adam_step(p, grads, m, v, vmax, [step] * 3, **options)
        for ours, theirs in zip(state["ours"], state["theirs"]):
            # float32: the host compiler may keep a product in more precision
            np.testing.assert_allclose(np.concatenate([a.ravel() for a in ours]),
                                       np.concatenate([a.ravel() for a in theirs]),
                                       rtol=1e-6 if dtype == np.float32 else 1e-15, atol=0)


@pytest.fixture
def cupy_with_kernels(monkeypatch):
    cp = fake_cupy.install(monkeypatch, count=1)
    cp.ElementwiseKernel = host_kernels.ElementwiseKernel
    fused.kernels.cache_clear()
    plugins.reset()
    torcia.device("cuda").kernels = None
    yield cp
    monkeypatch.undo()
    fused.kernels.cache_clear()
    plugins.reset()
    torcia.device("cuda").kernels = None


@pytest.mark.parametrize("make", [
    lambda ps: torcia.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
    lambda ps: torcia.optim.AdamW(ps, lr=1e-2, weight_decay=0.1, amsgrad=True)])
def test_an_optimizer_on_cuda_runs_the_fused_kernels(cupy_with_kernels, make):
    pytest.importorskip("torcia.optim")
    from torcia.backend import get_backend

    assert "optimizer_steps" in get_backend("cuda").kernels["adam_step"].__qualname__
    torcia.manual_seed(0)
    cpu = torcia.nn.Linear(4, 3)
    gpu = torcia.nn.Linear(4, 3).to("cuda")
    gpu.load_state_dict(cpu.state_dict())
    x = torcia.randn(8, 4)
    for model, inputs in ((cpu, x), (gpu, x.cuda())):
        opt = make(list(model.parameters()))
        for _ in range(3):
            opt.zero_grad()
            model(inputs).square().sum().backward()
            opt.step()
    for a, b in zip(cpu.parameters(), gpu.parameters()):
        torcia.testing.assert_close(b.cpu(), a, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rows, hidden", [(1, 1), (3, 5), (4, 32)])
def test_lstm_cell_kernels_match_the_reference(cupy_with_kernels, dtype, rows, hidden):
    from torcia.library import ReferenceKernels as Reference

    ours, ref = fused.fused_kernels(cupy_with_kernels), Reference()
    gates = (RNG.standard_normal((2, rows, 4 * hidden)) * 4).astype(dtype)
    c = RNG.standard_normal((2, rows, hidden)).astype(dtype)
    tol = dict(rtol=1e-6, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-13, atol=1e-14)
    for a, b in zip(ours["lstm_cell"](gates, c), ref.lstm_cell(gates, c)):
        np.testing.assert_allclose(a, b, **tol)
    _, c_new, act = ref.lstm_cell(gates, c)
    gh, gc = RNG.standard_normal(c.shape).astype(dtype), RNG.standard_normal(c.shape).astype(dtype)
    for pair in ((gh, gc), (None, gc), (gh, None)):
        for a, b in zip(ours["lstm_cell_backward"](*pair, act, c, c_new),
                        ref.lstm_cell_backward(*pair, act, c, c_new)):
            np.testing.assert_allclose(a, b, **tol)


def test_an_lstm_on_cuda_runs_the_fused_cell(cupy_with_kernels):
    from torcia.library import fallback, get_backend

    # the reference layer (the device's fallback) steps the device's cell: the fused one
    fused_cell = get_backend("cuda").kernels["lstm_cell"]
    assert fused_cell.__qualname__.startswith("fused_kernels")
    assert fallback("lstm_layer", "cuda").__self__.lstm_cell is fused_cell
    torcia.manual_seed(0)
    cpu = torcia.nn.LSTM(3, 4, batch_first=True)
    gpu = torcia.nn.LSTM(3, 4, batch_first=True).to("cuda")
    gpu.load_state_dict(cpu.state_dict())
    x = torcia.randn(2, 5, 3)
    for model, inputs in ((cpu, x), (gpu, x.cuda())):
        out, _ = model(inputs)
        out.square().sum().backward()
    torcia.testing.assert_close(gpu.weight_hh_l0.grad.cpu(), cpu.weight_hh_l0.grad)


@pytest.fixture
def compiler(cupy_with_kernels):
    compiler = pytest.importorskip("torcia.compiler")
    compiler.reset()
    yield compiler
    compiler.reset()


def _fused_nodes(graph):
    return [n for n in graph.nodes if n.kind == "fused"]


def test_compile_on_cuda_fuses_elementwise_chains_into_device_kernels(compiler):
    def f(x, b):
        return ((x * 2 + b).tanh() * x.sigmoid()).relu() - 0.5

    rng = np.random.default_rng(0)
    compiled = compiler.compile(f)
    for _ in range(3):  # trace, the first replay (checked against eager), a replay
        x = torcia.tensor(rng.standard_normal((5, 7)), dtype=torcia.float32)
        b = torcia.tensor(rng.standard_normal(7), dtype=torcia.float32)
        got = compiled(x.cuda(), b.cuda())
        assert got.device.type == "cuda"
        torcia.testing.assert_close(got.cpu(), f(x, b), rtol=1e-6, atol=1e-6)
    entry = compiled._entries[0]
    assert entry.eager_reason is None and entry.graph.device.type == "cuda"
    (node,) = entry.graph.nodes
    assert node.kind == "fused" and node.op == "mul+add+tanh+sigmoid+mul+relu+sub"
    assert "std::" not in node.source and "torcia_max" not in node.source
    assert "T x0, T x1" in node.source  # the bias is broadcast by the kernel, not indexed


def test_a_compiled_training_step_on_cuda_matches_eager(compiler):
    torcia.manual_seed(0)
    nets = [torcia.nn.Sequential(torcia.nn.Linear(6, 8), torcia.nn.Tanh(),
                                 torcia.nn.Linear(8, 3)) for _ in range(2)]
    nets[1].load_state_dict(nets[0].state_dict())
    nets[1].to("cuda")
    opts = [torcia.optim.SGD(n.parameters(), lr=0.1, momentum=0.9) for n in nets]

    def step_of(net, opt):
        def step(x, y):
            opt.zero_grad()
            # an elementwise chain to fuse: Tanh's backward is one kernel already
            loss = torcia.nn.functional.cross_entropy(net(x) * 0.5 + 0.1, y)
            loss.backward()
            opt.step()
            return loss

        return step

    eager, compiled = step_of(nets[0], opts[0]), compiler.compile(step_of(nets[1], opts[1]))
    rng = np.random.default_rng(1)
    for _ in range(4):
        x = torcia.tensor(rng.standard_normal((4, 6)), dtype=torcia.float32)
        y = torcia.tensor(rng.integers(0, 3, 4))
        want, got = eager(x, y), compiled(x.cuda(), y.cuda())
        torcia.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-6)
    for a, b in zip(nets[0].parameters(), nets[1].parameters()):
        assert b.device.type == "cuda"
        torcia.testing.assert_close(b.detach().cpu(), a.detach(), rtol=1e-5, atol=1e-6)
    entry = compiled._entries[0]
    assert entry.eager_reason is None and _fused_nodes(entry.graph)


def test_a_compiled_module_on_cuda_runs_its_compiled_backward(compiler):
    torcia.manual_seed(0)
    cpu = torcia.nn.Sequential(torcia.nn.Linear(5, 4), torcia.nn.GELU(), torcia.nn.Linear(4, 2))
    gpu = torcia.nn.Sequential(torcia.nn.Linear(5, 4), torcia.nn.GELU(),
                               torcia.nn.Linear(4, 2)).to("cuda")
    gpu.load_state_dict(cpu.state_dict())
    model = compiler.compile(gpu)
    x = torcia.randn(3, 5)
    for _ in range(3):
        for net in (cpu, gpu):
            net.zero_grad()
        (cpu(x).square() * 0.5).sum().backward()
        out = model(x.cuda())
        assert out.device.type == "cuda"
        (out.square() * 0.5).sum().backward()
    for a, b in zip(cpu.parameters(), gpu.parameters()):
        torcia.testing.assert_close(b.grad.cpu(), a.grad, rtol=1e-5, atol=1e-6)
    entry = model._compiled_forward._entries[0]
    assert entry.joint is not None and entry.graph.device.type == "cuda"
