"""A stand-in for the GPU: this plugin's backend and kernels over NumPy.

The plugin's logic (backend wiring, transfers, device errors, autograd across devices)
runs here on machines without a GPU; what only CuPy can show runs in test_cupy.py when a
GPU is present.
"""

import contextlib

import numpy as np
import pytest
from torcia_cuda import cupy_kernels, make_backend

import torcia
from torcia import plugins
from torcia.plugins import hookimpl


class FakeRuntime:
    def __init__(self, count=1):
        self.count = count
        self.current = 0

    def device_count(self):
        return self.count

    def current_device(self):
        return self.current

    def set_device(self, index):
        if not 0 <= index < self.count:
            raise RuntimeError(f"invalid device ordinal {index}")
        self.current = index

    def device_context(self, index):
        return contextlib.nullcontext()

    def synchronize(self, index=None):
        return None


class StandIn:
    """Registers "cuda" on NumPy; copies on every transfer, as device memory would."""

    def __init__(self, count=1):
        self.runtime = FakeRuntime(count)

    @hookimpl
    def torcia_register_backends(self, registry):
        registry.add(make_backend(np, self.runtime, to_host=np.array,
                                  from_host=lambda a, index=None: np.array(a)))

    @hookimpl
    def torcia_register_kernels(self, registry):
        for op, fn in cupy_kernels(np).items():
            registry.add(op, "cuda", fn)


@pytest.fixture
def fake_cuda(monkeypatch):
    """A "cuda" device with two GPUs on the NumPy stand-in; the real plugin blocked."""
    monkeypatch.setenv("TORCIA_DISABLE_PLUGINS", "cuda")
    plugins.reset()
    standin = StandIn(count=2)
    plugins.manager().register(standin, name="cuda-standin")
    yield standin
    monkeypatch.delenv("TORCIA_DISABLE_PLUGINS")
    plugins.reset()
    torcia.device("cuda").kernels = None
