"""On a machine with a GPU and CuPy: the real device against the CPU reference."""

import numpy as np
import pytest

import torcia

cupy = pytest.importorskip("cupy")
if not torcia.cuda.is_available():
    pytest.skip("no usable CUDA GPU", allow_module_level=True)


def test_ops_and_gradients_match_the_cpu():
    torcia.manual_seed(0)
    a = torcia.randn(8, 5, dtype=torcia.float64, requires_grad=True)
    b = torcia.randn(5, 3, dtype=torcia.float64, requires_grad=True)
    ga, gb = a.detach().cuda().requires_grad_(), b.detach().cuda().requires_grad_()
    out_cpu = (a @ b).tanh().sum(1).logsumexp(0)
    out_gpu = (ga @ gb).tanh().sum(1).logsumexp(0)
    out_cpu.backward()
    out_gpu.backward()
    assert isinstance(torcia.library.array(ga), cupy.ndarray)
    torcia.testing.assert_close(out_gpu.cpu(), out_cpu)
    torcia.testing.assert_close(ga.grad.cpu(), a.grad)
    torcia.testing.assert_close(gb.grad.cpu(), b.grad)


def test_memory_statistics_and_events():
    torcia.cuda.reset_peak_memory_stats()
    before = torcia.cuda.memory_allocated()
    x = torcia.empty(1 << 20, device="cuda")
    assert torcia.cuda.memory_allocated() >= before + 4 * (1 << 20)
    assert torcia.cuda.max_memory_allocated() >= torcia.cuda.memory_allocated()
    start, end = torcia.cuda.Event(enable_timing=True), torcia.cuda.Event(enable_timing=True)
    start.record()
    (x * 2).sum()
    end.record()
    torcia.cuda.synchronize()
    assert start.elapsed_time(end) >= 0
    del x
    torcia.cuda.empty_cache()


def test_dlpack_with_cupy():
    c = cupy.arange(4, dtype=cupy.float32)
    t = torcia.from_dlpack(c)
    assert t.device.type == "cuda"
    t += 1
    assert np.array_equal(cupy.asnumpy(c), [1, 2, 3, 4])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fused_optimizer_kernels_match_torcia_optim(dtype):
    reference = pytest.importorskip("torcia.optim.kernels")
    from torcia_cuda.fused import optimizer_steps

    steps = optimizer_steps(cupy)
    rng = np.random.default_rng(0)
    shapes = [(300, 7), (1001,)]
    host = [rng.standard_normal(s).astype(dtype) for s in shapes]
    device = [cupy.asarray(p) for p in host]
    state_host = [[np.zeros(s, dtype) for s in shapes] for _ in range(3)]
    state_device = [[cupy.asarray(a) for a in arrays] for arrays in state_host]
    options = dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=1e-2, amsgrad=True,
                   maximize=False, decoupled_weight_decay=True)
    for step in (1.0, 2.0):
        grads = [rng.standard_normal(s).astype(dtype) for s in shapes]
        reference.adam_step(host, grads, *state_host, [step] * 2, **options)
        steps["adam_step"](device, [cupy.asarray(g) for g in grads], *state_device,
                           [step] * 2, **options)
    for a, b in zip(device, host):
        np.testing.assert_allclose(cupy.asnumpy(a), b, rtol=1e-5 if dtype == "float32" else 1e-12)
    bufs_host, bufs_device = [None, None], [None, None]
    for _ in range(2):
        grads = [rng.standard_normal(s).astype(dtype) for s in shapes]
        reference.sgd_step(host, grads, bufs_host, lr=0.1, weight_decay=1e-3, momentum=0.9,
                           dampening=0.0, nesterov=True, maximize=False)
        steps["sgd_step"](device, [cupy.asarray(g) for g in grads], bufs_device, lr=0.1,
                          weight_decay=1e-3, momentum=0.9, dampening=0.0, nesterov=True,
                          maximize=False)
    for a, b in zip(device, host):
        # nvcc contracts a * b + c into one rounding (FMA): a few ulps off the host's
        np.testing.assert_allclose(cupy.asnumpy(a), b, rtol=1e-5 if dtype == "float32" else 1e-12,
                                   atol=1e-7 if dtype == "float32" else 0)


def test_an_lstm_runs_the_fused_cell_on_the_device():
    from torcia.library import fallback, get_backend

    # the reference layer steps the device's cell: the fused one
    fused_cell = get_backend("cuda").kernels["lstm_cell"]
    assert fused_cell.__qualname__.startswith("fused_kernels")
    assert fallback("lstm_layer", "cuda").__self__.lstm_cell is fused_cell
    torcia.manual_seed(0)
    cpu = torcia.nn.LSTM(16, 32, num_layers=2, batch_first=True, dtype=torcia.float64)
    gpu = torcia.nn.LSTM(16, 32, num_layers=2, batch_first=True, dtype=torcia.float64).cuda()
    gpu.load_state_dict(cpu.state_dict())
    x = torcia.randn(4, 7, 16, dtype=torcia.float64)
    for model, inputs in ((cpu, x), (gpu, x.cuda())):
        out, (h, c) = model(inputs)
        (out.square().sum() + c.sum()).backward()
    for a, b in zip(cpu.parameters(), gpu.parameters()):
        torcia.testing.assert_close(b.grad.cpu(), a.grad)


def test_device_properties():
    props = torcia.cuda.get_device_properties(0)
    assert props.name == torcia.cuda.get_device_name(0) and props.total_memory > 0
    major, minor = torcia.cuda.get_device_capability()
    assert (major, minor) == (props.major, props.minor) and major >= 3
    assert torcia.cuda.get_arch_list() == [f"sm_{major}{minor}"]
    free, total = torcia.cuda.mem_get_info()
    assert 0 < free <= total == props.total_memory
    assert props.multi_processor_count > 0 and props.L2_cache_size > 0


def test_memory_statistics_follow_allocations():
    torcia.cuda.synchronize()
    torcia.cuda.reset_peak_memory_stats()
    base = torcia.cuda.memory_allocated()
    x = torcia.empty(16 << 20, device="cuda")  # 64 MiB
    assert torcia.cuda.memory_allocated() >= base + (64 << 20)
    assert torcia.cuda.memory_reserved() >= torcia.cuda.memory_allocated()
    peak = torcia.cuda.max_memory_allocated()
    del x
    assert torcia.cuda.memory_allocated() <= base + (1 << 20)
    assert torcia.cuda.max_memory_allocated() == peak >= base + (64 << 20)
    assert "Allocated memory" in torcia.cuda.memory_summary()
    torcia.cuda.empty_cache()
    assert torcia.cuda.memory_reserved() < peak


def test_streams_order_work_and_events_time_it():
    x = torcia.randn(1024, 1024, device="cuda")
    want = (x @ x).cpu()
    side = torcia.cuda.Stream()
    start, end = torcia.cuda.Event(enable_timing=True), torcia.cuda.Event(enable_timing=True)
    side.wait_stream(torcia.cuda.current_stream())
    with torcia.cuda.stream(side):
        assert torcia.cuda.current_stream() == side
        start.record()
        y = x @ x
        for _ in range(5):
            y = y * 1.0
        end.record()
    assert torcia.cuda.current_stream() == torcia.cuda.default_stream()
    torcia.cuda.current_stream().wait_stream(side)
    end.synchronize()
    assert end.query() and start.elapsed_time(end) > 0
    torcia.testing.assert_close(y.cpu(), want)


def test_a_cuda_graph_replays_the_captured_kernels():
    x = torcia.zeros(1000, device="cuda")
    w = torcia.full((1000,), 2.0, device="cuda")
    side = torcia.cuda.Stream()
    side.wait_stream(torcia.cuda.current_stream())
    with torcia.cuda.stream(side):  # warm up: kernels compiled, pool blocks made
        for _ in range(2):
            (x * w + w).tanh()
    torcia.cuda.current_stream().wait_stream(side)
    g = torcia.cuda.CUDAGraph()
    with torcia.cuda.graph(g):
        y = (x * w + w).tanh()
    for value in (0.5, -1.0):
        x.copy_(torcia.full((1000,), value, device="cuda"))
        g.replay()
        torcia.cuda.synchronize()
        torcia.testing.assert_close(y.cpu(), torcia.full((1000,), value * 2.0 + 2.0).tanh())


def test_rng_state_repeats_random_ops_on_the_device():
    state = torcia.cuda.get_rng_state()
    a = torcia.randn(100, device="cuda")
    torcia.cuda.set_rng_state(state)
    assert torcia.equal(a, torcia.randn(100, device="cuda"))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_autocast_and_grad_scaler(dtype):
    low = getattr(torcia, dtype)
    torcia.manual_seed(0)
    layer = torcia.nn.Linear(64, 32).cuda()
    x = torcia.randn(16, 64, device="cuda")
    with torcia.autocast("cuda", dtype=low):
        y = layer(x)
    assert y.dtype == low and y.device.type == "cuda"
    torcia.testing.assert_close(y.float(), layer(x), rtol=2e-2, atol=2e-2)
    scaler = torcia.amp.GradScaler("cuda")
    opt = torcia.optim.SGD(layer.parameters(), lr=0.01)
    before = layer.weight.detach().clone()
    with torcia.autocast("cuda", dtype=low):
        loss = torcia.nn.functional.mse_loss(layer(x).float(), torcia.zeros(16, 32, device="cuda"))
    scaler.scale(loss).backward()
    assert layer.weight.grad.dtype == torcia.float32
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 2.0 ** 16 and not torcia.equal(layer.weight, before)


def test_allow_tf32_runs_float32_products_on_tensor_cores():
    torcia.manual_seed(0)
    a, b = torcia.randn(512, 512, device="cuda"), torcia.randn(512, 512, device="cuda")
    exact = a.double() @ b.double()

    def error():
        return ((a @ b).double() - exact).abs().max().item()

    full = error()
    torcia.backends.cuda.matmul.allow_tf32 = True
    try:
        reduced = error()
    finally:
        torcia.backends.cuda.matmul.allow_tf32 = False
    assert full < 1e-3 < reduced < 1.0, (full, reduced)
    assert error() == full


def test_compile_generates_cuda_kernels_checked_against_eager():
    import torcia.compiler

    torcia.compiler.reset()

    def f(x, b):
        return ((x * 2 + b).tanh() * x.sigmoid()).relu() - 0.5

    compiled = torcia.compile(f)
    for _ in range(3):
        x, b = torcia.randn(256, 64, device="cuda"), torcia.randn(64, device="cuda")
        torcia.testing.assert_close(compiled(x, b), f(x, b), rtol=1e-5, atol=1e-6)
    entry = compiled._entries[0]
    assert entry.eager_reason is None and [n.kind for n in entry.graph.nodes] == ["fused"]


def test_a_compiled_training_step_matches_eager_on_the_device():
    import torcia.compiler

    torcia.compiler.reset()
    torcia.manual_seed(0)
    nets = [torcia.nn.Sequential(torcia.nn.Linear(32, 64), torcia.nn.ReLU(),
                                 torcia.nn.Linear(64, 10)).cuda() for _ in range(2)]
    nets[1].load_state_dict(nets[0].state_dict())
    opts = [torcia.optim.Adam(n.parameters(), lr=1e-3) for n in nets]

    def step_of(net, opt):
        def step(x, y):
            opt.zero_grad()
            loss = torcia.nn.functional.cross_entropy(net(x), y)
            loss.backward()
            opt.step()
            return loss

        return step

    eager, compiled = step_of(nets[0], opts[0]), torcia.compile(step_of(nets[1], opts[1]))
    for _ in range(4):
        x, y = torcia.randn(16, 32, device="cuda"), torcia.randint(0, 10, (16,), device="cuda")
        torcia.testing.assert_close(compiled(x, y), eager(x, y), rtol=1e-5, atol=1e-6)
    for a, b in zip(*(n.parameters() for n in nets)):
        torcia.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
    assert compiled._entries[0].eager_reason is None


def test_out_of_range_targets_raise_at_the_next_synchronisation():
    logits = torcia.randn(3, 4, device="cuda")
    # CuPy's indexing wraps: the step goes on, the check answers at the next read
    loss = torcia.nn.functional.cross_entropy(logits, torcia.tensor([0, 7, 1], device="cuda"))
    with pytest.raises(IndexError, match="Target 7 is out of bounds"):
        loss.item()
    torcia.nn.functional.embedding(torcia.tensor([1, 5], device="cuda"),
                                   torcia.randn(4, 2, device="cuda"))
    with pytest.raises(IndexError, match="index out of range in self"):
        torcia.cuda.synchronize()
    torcia.cuda.synchronize()
