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
    plugins.reset()
    torcia.device("cuda").kernels = None
    yield cp
    monkeypatch.undo()
    plugins.reset()
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
    "pool_padded": lambda a, b: F.max_pool2d((a * b).reshape(1, 1, 3, 4), 3, 2, 1),
    "embedding": lambda a, b: F.embedding(torcia.tensor([[0, 2, 2], [1, 0, 2]], device=a.device),
                                          a * b, padding_idx=2),
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


def test_device_properties_and_capabilities(cupy):
    props = torcia.cuda.get_device_properties(1)
    assert (props.name, props.major, props.minor) == ("Fake GPU 1", 9, 0)
    assert props.total_memory == 80 << 30 and props.multi_processor_count == 132
    assert props.uuid == "00010203-0405-0607-0809-0a0b0c0d0e0f"
    assert "name='Fake GPU 1', major=9, minor=0, total_memory=81920MB" in repr(props)
    assert torcia.cuda.get_device_capability("cuda:0") == (9, 0)
    assert torcia.cuda.get_arch_list() == ["sm_90"]
    assert torcia.cuda.is_bf16_supported() and torcia.cuda.is_tf32_supported()
    assert torcia.cuda.mem_get_info() == (70 << 30, 80 << 30)
    assert torcia.cuda.can_device_access_peer(0, 1) and not torcia.cuda.can_device_access_peer(0, 0)
    assert torcia.cuda.is_initialized()
    with pytest.raises(ValueError, match="Expected a cuda device, but got: cpu"):
        torcia.cuda.get_device_properties("cpu")


def test_memory_statistics_under_pytorchs_keys(cupy):
    torcia.cuda.reset_peak_memory_stats()
    x = torcia.ones(1024, device="cuda")
    stats = torcia.cuda.memory_stats()
    assert set(stats) == {"allocated_bytes.all.current", "allocated_bytes.all.peak",
                          "reserved_bytes.all.current", "reserved_bytes.all.peak",
                          "allocation.all.allocated"}
    assert stats["allocated_bytes.all.current"] == torcia.cuda.memory_allocated() >= 4096
    assert torcia.cuda.max_memory_reserved() >= torcia.cuda.memory_reserved()
    assert torcia.cuda.memory_cached() == torcia.cuda.memory_reserved()
    summary = torcia.cuda.memory_summary()
    assert "device ID 0" in summary and "Allocated memory" in summary
    del x
    torcia.cuda.reset_max_memory_allocated()
    assert torcia.cuda.max_memory_allocated() == torcia.cuda.memory_allocated()
    torcia.cuda.set_per_process_memory_fraction(0.5)
    assert torcia.cuda.get_per_process_memory_fraction() == 0.5
    assert cupy.get_default_memory_pool().limit_fraction == 0.5
    with pytest.raises(ValueError, match="Invalid fraction value: 2"):
        torcia.cuda.set_per_process_memory_fraction(2)


def test_streams_and_stream_contexts(cupy):
    default = torcia.cuda.current_stream()
    assert default == torcia.cuda.default_stream() and default.cuda_stream == 0
    s = torcia.cuda.Stream(priority=-1)
    assert isinstance(s, torcia.Stream) and isinstance(torcia.Stream("cuda"), torcia.cuda.Stream)
    assert s.cuda_stream != 0 and s.device == torcia.device("cuda:0") and s.priority == -1
    with torcia.cuda.stream(s):
        assert torcia.cuda.current_stream() == s
        with torcia.cuda.stream(None):  # no change
            assert torcia.cuda.current_stream() == s
        with torcia.cuda.Stream() as inner:
            assert torcia.cuda.current_stream() == inner
        assert torcia.cuda.current_stream() == s
    assert torcia.cuda.current_stream() == default
    torcia.cuda.set_stream(s)
    assert torcia.cuda.current_stream() == s
    torcia.cuda.set_stream(default)
    external = torcia.cuda.ExternalStream(0x5000)
    assert external.cuda_stream == 0x5000 and external == torcia.cuda.ExternalStream(0x5000)
    event = s.record_event()
    assert isinstance(event, torcia.cuda.Event) and event.query() and s.query()
    default.wait_stream(s)
    with pytest.raises(RuntimeError, match="must be created with argument 'enable_timing=True'"):
        event.elapsed_time(torcia.cuda.Event())
    with pytest.raises(RuntimeError, match="interprocess events are not supported"):
        torcia.cuda.Event(interprocess=True)


def test_cuda_graph_capture_uses_a_private_pool_and_restores_the_allocator(cupy):
    g = torcia.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="must be captured on a non-default stream"):
        g.capture_begin()
    with pytest.raises(RuntimeError, match="has not captured anything"):
        g.replay()
    default_allocator = cupy.cuda.allocator[0]
    assert not torcia.cuda.is_current_stream_capturing()
    with torcia.cuda.graph(g):
        assert torcia.cuda.is_current_stream_capturing()
        assert torcia.cuda.current_stream().cuda_stream != 0  # a side stream
        cupy.cuda.allocator[0](256)  # what CuPy calls for a new array
    assert g.pool().mallocs == 1 and g.pool() is not cupy.get_default_memory_pool()
    # after the capture, allocations go to the default pool again
    before = cupy.get_default_memory_pool().mallocs
    cupy.cuda.allocator[0](256)
    assert g.pool().mallocs == 1 and cupy.get_default_memory_pool().mallocs == before + 1
    assert default_allocator is not None
    assert torcia.cuda.current_stream().cuda_stream == 0
    g.replay()
    g.replay()
    assert g._handle._graph.launches == 2
    with pytest.raises(RuntimeError, match="call reset\\(\\) before capturing again"):
        with torcia.cuda.graph(g):
            pass
    shared = torcia.cuda.graph_pool_handle()
    g.reset()
    with torcia.cuda.graph(g, pool=shared):
        pass
    assert g.pool() is shared
    with pytest.raises(RuntimeError, match="Unknown capture error mode"):
        torcia.cuda.CUDAGraph().capture_begin(capture_error_mode="strict")


def test_rng_state_repeats_the_random_ops_of_cuda_tensors(cupy):
    state = torcia.cuda.get_rng_state()
    a = torcia.randn(5, device="cuda")
    torcia.cuda.set_rng_state(state)
    assert torcia.equal(a, torcia.randn(5, device="cuda"))
    states = torcia.cuda.get_rng_state_all()
    assert len(states) == 2
    b = torcia.rand(3, device="cuda")
    torcia.cuda.set_rng_state_all(states)
    assert torcia.equal(b, torcia.rand(3, device="cuda"))
    torcia.manual_seed(11)
    assert torcia.cuda.initial_seed() == 11


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_autocast_and_grad_scaler_on_cuda(cupy, dtype):
    low = getattr(torcia, dtype)
    layer = torcia.nn.Linear(4, 3).cuda()
    x = torcia.randn(2, 4, device="cuda")
    with torcia.autocast("cuda", dtype=low):
        y = layer(x)
        assert y.dtype == low and torcia.get_autocast_dtype("cuda") == low
        assert (x + 1).dtype == torcia.float32  # not on the lists: as it comes
    with pytest.warns(FutureWarning, match=r"torcia.cuda.amp.autocast\(args...\)` is deprecated"):
        region = torcia.cuda.amp.autocast(dtype=low)
    with region:
        assert layer(x).dtype == low
    scaler = torcia.amp.GradScaler("cuda", init_scale=1024.0)
    opt = torcia.optim.SGD(layer.parameters(), lr=0.1)
    before = layer.weight.detach().clone()
    with torcia.autocast("cuda", dtype=low):
        loss = layer(x).float().square().sum()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 1024.0 and not torcia.equal(layer.weight, before)
    # an inf in one gradient: the step is skipped and the scale backs off
    opt.zero_grad()
    scaler.scale(layer(x).sum()).backward()
    layer.bias.grad[0] = float("inf")
    after = layer.weight.detach().clone()
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 512.0 and torcia.equal(layer.weight, after)


def test_cuda_amp_names_warn_and_forward(cupy):
    with pytest.warns(FutureWarning, match=r"torcia.amp.GradScaler\('cuda', args...\)"):
        scaler = torcia.cuda.amp.GradScaler(init_scale=4.0, enabled=True)
    assert scaler.device == "cuda" and scaler.get_scale() == 4.0
    with pytest.warns(FutureWarning, match="custom_fwd"):
        fwd = torcia.cuda.amp.custom_fwd(cast_inputs=torcia.float32)
    with pytest.warns(FutureWarning, match="custom_bwd"):
        bwd = torcia.cuda.amp.custom_bwd(lambda ctx, g: g * 2)

    class Double(torcia.autograd.Function):
        forward = staticmethod(fwd(lambda ctx, x: x * 2))
        backward = staticmethod(bwd)

    x = torcia.ones(2, dtype=torcia.float16, device="cuda", requires_grad=True)
    with torcia.autocast("cuda"):
        out = Double.apply(x)
    assert out.dtype == torcia.float32


def test_allow_tf32_sets_cupys_gemm_compute_type(cupy):
    assert torcia.cuda.is_available()
    compute = cupy._core._routines_linalg.compute
    assert compute[np.dtype(np.float32)] == "default"
    torcia.backends.cuda.matmul.allow_tf32 = True
    try:
        assert compute[np.dtype(np.float32)] == "tf32"
    finally:
        torcia.backends.cuda.matmul.allow_tf32 = False
    assert compute[np.dtype(np.float32)] == "default"
    torcia.set_float32_matmul_precision("high")
    assert compute[np.dtype(np.float32)] == "tf32"
    torcia.set_float32_matmul_precision("highest")
    assert compute[np.dtype(np.float32)] == "default"


def test_checks_on_the_device_raise_at_the_next_synchronisation(cupy):
    from torcia.library import check_async

    x = torcia.ones(3, device="cuda")
    check_async("cuda", np.array(True), lambda: IndexError("index out of range"))  # no wait
    with pytest.raises(IndexError, match="index out of range"):
        x.sum().item()  # a copy to the host: the device has answered
    x.sum().item()  # reported once
    check_async("cuda:0", np.array(False), lambda: IndexError("never"))
    check_async("cuda", np.array(True), lambda: ValueError("bad input"))
    with pytest.raises(ValueError, match="bad input"):
        torcia.cuda.synchronize()
    # in-range targets and indices: quiet
    logits = torcia.randn(3, 4, device="cuda")
    F.cross_entropy(logits, torcia.tensor([0, 3, -100], device="cuda"))
    F.embedding(torcia.tensor([1, 3], device="cuda"), torcia.randn(4, 2, device="cuda"))
    torcia.cuda.synchronize()
    with pytest.raises(IndexError, match="Target 9 is out of bounds"):  # on the host: at once
        F.cross_entropy(logits.cpu(), torcia.tensor([9, 0, 0]))
