"""The plugin as a plugin: registration, optimizer steps, gradients, the blocklist."""

import inspect
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import torcia
import torcia.nn.functional as F
from torcia.autograd import gradcheck
from torcia.backend import get_backend


def test_registered_over_the_reference_kernels(registered):
    from torcia import library

    cpu = get_backend("cpu")
    for op in ("conv", "conv_weight", "max_pool", "matmul", "embedding_backward"):
        assert cpu.kernel_providers[op] == "cpu", op
        # what the native kernel hands on: the reference kernel (behind its dtype refusals)
        reference = inspect.unwrap(library.fallback(op, "cpu"))
        assert isinstance(reference.__self__, library.ReferenceKernels)


def test_listing_shows_the_plugin_and_its_kernels(registered):
    out = subprocess.run([sys.executable, "-m", "torcia", "plugins", "--json"],
                         capture_output=True, text=True, check=True).stdout
    info = {p["name"]: p for p in json.loads(out)["plugins"]}["cpu"]
    assert info["distribution"] == "torcia-cpu" and info["status"] == "loaded"
    assert "kernel:conv@cpu" in info["provides"]


def test_policy_waits_for_the_first_kernel_call(registered):
    # listing the plugins builds the kernel tables but runs no kernel: nothing is set
    code = ("import torcia, torcia_cpu.plugin as p; torcia.plugins.plugin_infos(); "
            "before = p.policy_applied(); torcia.ones(2, 2) @ torcia.ones(2, 2); "
            "print(before, p.policy_applied())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "True"]


def test_policy_opt_out_leaves_blas_malloc_and_numpy_alone(registered):
    code = ("import torcia, torcia_cpu._memory as m, torcia_cpu._blas as b; "
            "calls = []; m.keep_freed_memory = lambda *a: calls.append('malloc'); "
            "m.align_arrays = lambda: calls.append('numpy'); "
            "b.set_threads = lambda n: calls.append('blas'); "
            "torcia.ones(2, 2) @ torcia.ones(2, 2); print(calls)")
    env = dict(os.environ, TORCIA_CPU_KEEP_DEFAULTS="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=env).stdout.strip()
    assert out == "[]"
    del env["TORCIA_CPU_KEEP_DEFAULTS"]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=env).stdout.strip()
    assert out == "['blas', 'malloc', 'numpy']"


def test_gradients_through_native_kernels_pass_gradcheck():
    x = torcia.randn(2, 3, 6, 5, dtype=torcia.float64, requires_grad=True)
    w = torcia.randn(4, 3, 3, 3, dtype=torcia.float64, requires_grad=True)
    gradcheck(lambda x, w: F.max_pool2d(F.conv2d(x, w, stride=1, padding=1), 2), (x, w))
    z = torcia.randn(3, 5, dtype=torcia.float64, requires_grad=True)
    gradcheck(lambda z: F.log_softmax(z, dim=1).sin(), (z,))
    gradcheck(lambda z: F.softmax(z, dim=-1).cos(), (z,))
    gradcheck(lambda z: F.cross_entropy(z, torcia.tensor([0, 4, 2]), label_smoothing=0.1),
              (z,))
    lstm = torcia.nn.LSTM(2, 3, dtype=torcia.float64)
    seq = torcia.randn(4, 2, 2, dtype=torcia.float64, requires_grad=True)
    weight = lstm.weight_hh_l0
    gradcheck(lambda seq, weight: lstm(seq)[0].tanh(), (seq, weight))


def _optim_kernels():
    return pytest.importorskip("torcia.optim.kernels")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("options", [
    dict(momentum=0.9, dampening=0.0, nesterov=False, weight_decay=0.0, maximize=False),
    dict(momentum=0.9, dampening=0.0, nesterov=True, weight_decay=1e-2, maximize=False),
    dict(momentum=0.5, dampening=0.1, nesterov=False, weight_decay=0.0, maximize=True),
    dict(momentum=0.0, dampening=0.0, nesterov=False, weight_decay=1e-3, maximize=False),
])
def test_sgd_step_matches_torcia_optim_bit_for_bit(dtype, options):
    reference = _optim_kernels()
    from torcia_cpu.kernels import sgd_step

    rng = np.random.default_rng(1)
    shapes = [(3, 4), (5,), (2, 2, 3)]
    a = [rng.standard_normal(s).astype(dtype) for s in shapes]
    b = [x.copy() for x in a]
    bufs_a, bufs_b = [None] * 3, [None] * 3
    for _ in range(3):
        grads = [rng.standard_normal(s).astype(dtype) for s in shapes]
        sgd_step(a, grads, bufs_a, lr=0.1, **options)
        reference.sgd_step(b, grads, bufs_b, lr=0.1, **options)
    for x, y in zip(a + bufs_a, b + bufs_b):
        if x is not None:
            np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("amsgrad, decoupled, weight_decay, maximize", [
    (False, False, 0.0, False), (True, False, 1e-2, False), (False, True, 1e-2, True)])
def test_adam_step_matches_torcia_optim_bit_for_bit(dtype, amsgrad, decoupled, weight_decay,
                                                    maximize):
    reference = _optim_kernels()
    from torcia_cpu.kernels import adam_step

    rng = np.random.default_rng(2)
    shapes = [(4, 3), (7,)]
    a = [rng.standard_normal(s).astype(dtype) for s in shapes]
    b = [x.copy() for x in a]
    state_a = [[np.zeros(s, dtype) for s in shapes] for _ in range(3)]
    state_b = [[np.zeros(s, dtype) for s in shapes] for _ in range(3)]
    kw = dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=weight_decay,
              amsgrad=amsgrad, maximize=maximize, decoupled_weight_decay=decoupled)
    for step in range(1, 4):
        grads = [rng.standard_normal(s).astype(dtype) for s in shapes]
        adam_step(a, grads, *state_a, [float(step)] * 2, **kw)
        reference.adam_step(b, grads, *state_b, [float(step)] * 2, **kw)
    for x, y in zip(a + sum(state_a, []), b + sum(state_b, [])):
        np.testing.assert_array_equal(x, y)


_SCRIPT = """
import numpy as np, torcia, torcia.nn.functional as F
from torcia.backend import get_backend
torcia.manual_seed(0)
x = torcia.randn(2, 3, 8, 8, requires_grad=True)
w = torcia.randn(5, 3, 3, 3, requires_grad=True)
y = torcia.tensor([1, 4])
loss = F.cross_entropy(F.max_pool2d(F.conv2d(x, w, padding=1), 2).mean((2, 3)), y)
loss.backward()
np.save({out!r}, np.concatenate([loss.detach().numpy().reshape(1), x.grad.numpy().ravel(),
                                 w.grad.numpy().ravel()]))
print(get_backend("cpu").kernel_providers["conv"])
"""


def test_blocking_the_plugin_falls_back_to_numpy_with_the_same_results(with_and_without_plugin):
    results = with_and_without_plugin(_SCRIPT)
    assert results["native"][0] == "cpu" and results["numpy"][0] == "core"
    np.testing.assert_allclose(results["native"][1], results["numpy"][1], rtol=1e-5, atol=1e-6)


class _FakeLibc:
    def __init__(self):
        self.calls = []

    def mallopt(self, option, value):
        self.calls.append((option, value))
        return 1


def test_malloc_keeps_freed_memory_unless_the_user_tuned_it(monkeypatch):
    from torcia_cpu import _memory

    for name in _memory._USER_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    libc = _FakeLibc()
    assert _memory.keep_freed_memory(libc)
    assert libc.calls == [(-3, _memory.MMAP_THRESHOLD), (-1, _memory.KEEP_FREED)]
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "0")
    libc = _FakeLibc()
    assert not _memory.keep_freed_memory(libc)
    assert libc.calls == []


def test_malloc_tuning_finds_glibc_where_python_runs_on_it():
    import platform

    from torcia_cpu import _memory

    assert (_memory._glibc() is not None) == (platform.libc_ver()[0] == "glibc")
