"""The plugin's real path (probe, backend, kernels, CupyRuntime) on a fake ``cupy``
module that is NumPy underneath, put where the real one would be imported from."""

import importlib.util
import pathlib

import numpy as np
import pytest

import torcia
import torcia.nn.functional as F
from torcia import plugins

pytest.importorskip("torcia_cuda")
_spec = importlib.util.spec_from_file_location(
    "fake_cupy", pathlib.Path(__file__).with_name("fake_cupy.py"))
fake_cupy = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fake_cupy)


@pytest.fixture
def cupy(monkeypatch):
    cp = fake_cupy.install(monkeypatch, count=2)
    plugins._reset()
    torcia.device("cuda").kernels = None
    yield cp
    monkeypatch.undo()
    plugins._reset()
    for dev in ("cuda", "cuda:0", "cuda:1"):
        torcia.device(dev).kernels = None


def test_the_plugin_finds_the_device_through_cupy(cupy):
    assert torcia.cuda.is_available() and torcia.cuda.device_count() == 2
    assert torcia.cuda.get_device_name() == "Fake GPU 0"
    info = {i.name: i for i in plugins.plugin_infos()}["cuda"]
    assert info.status == "loaded" and "device backend:cuda" in info.provides


def test_runtime_services(cupy):
    before = torcia.cuda.memory_allocated()
    x = torcia.ones(1024, device="cuda")
    assert torcia.cuda.memory_allocated() >= before + 4096
    assert torcia.cuda.max_memory_allocated() >= torcia.cuda.memory_allocated()
    torcia.cuda.synchronize()
    assert cupy.cuda.runtime.synchronized == 1
    start, end = torcia.cuda.Event(enable_timing=True), torcia.cuda.Event(enable_timing=True)
    start.record()
    (x * 2).sum()
    end.record()
    assert start.elapsed_time(end) >= 0
    with torcia.cuda.device(1):
        assert torcia.zeros(1, device="cuda").device == torcia.device("cuda:1")
    with torcia.cuda.stream(torcia.cuda.Stream()):
        assert (x + 1).device.type == "cuda"
    torcia.cuda.empty_cache()
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        torcia.ones(1, device="cuda:2")


CASES = {
    "elementwise": lambda a, b: (a * b + a.exp() - b.sigmoid() / (1 + a.abs())).tanh(),
    "reductions": lambda a, b: a.sum(0) + b.mean(0) + a.amax(0) - b.logsumexp(0),
    "products": lambda a, b: (a @ b.T).relu() @ a,
    "indexing": lambda a, b: (a[1:, ::2] * b[[0, 2], :2]).sum() + a.gather(1, (b > 0).long()),
    "nn": lambda a, b: F.log_softmax(F.gelu(F.linear(a, b)), dim=1)
    + F.layer_norm(a @ b.T, (3,)),
    "conv": lambda a, b: F.max_pool2d(F.conv2d(a.reshape(1, 1, 3, 4), b.reshape(3, 1, 2, 2),
                                                padding=1), 2).sum((2, 3)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_ops_and_gradients_match_the_cpu(cupy, name):
    rng = np.random.default_rng(0)
    a0 = rng.standard_normal((3, 4))
    b0 = rng.standard_normal((3, 4))
    results = []
    for device in ("cpu", "cuda"):
        a = torcia.tensor(a0, device=device, requires_grad=True)
        b = torcia.tensor(b0, device=device, requires_grad=True)
        out = CASES[name](a, b)
        out.sum().backward()
        assert out.device.type == device and a.grad.device.type == device
        results.append([t.detach().cpu().numpy() for t in (out, a.grad, b.grad)])
    for got, want in zip(results[1], results[0]):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_pinned_memory(cupy):
    x = torcia.arange(6.0).reshape(2, 3)
    assert not x.is_pinned()
    p = x.pin_memory()
    assert p.is_pinned() and p[1:].is_pinned()  # a view of pinned memory is pinned too
    assert torcia.equal(p, x) and p.data_ptr() != x.data_ptr()
    assert torcia.equal(p.to("cuda", non_blocking=True).cpu(), x)
    w = torcia.ones(3, requires_grad=True)
    (w.pin_memory() * 2).sum().backward()  # pinning keeps the graph, as a copy does
    assert torcia.equal(w.grad, torcia.full((3,), 2.0))
    with pytest.raises(RuntimeError, match="only dense CPU tensors can be pinned"):
        p.cuda().pin_memory()


def test_a_data_loader_pins_its_batches(cupy):
    data = pytest.importorskip("torcia.data")
    loader = data.DataLoader(data.TensorDataset(torcia.arange(4.0)), batch_size=2,
                             pin_memory=True)
    (batch,) = next(iter(loader))
    assert batch.is_pinned() and batch.tolist() == [0.0, 1.0]
