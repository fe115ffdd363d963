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
    assert isinstance(ga._data, cupy.ndarray)
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
        np.testing.assert_allclose(cupy.asnumpy(a), b, rtol=1e-5 if dtype == "float32" else 1e-12)


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
