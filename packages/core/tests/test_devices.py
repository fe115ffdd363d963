"""Devices: parsing, moving tensors, and the errors when devices meet.

A second device, "alt", is a test plugin registered through ``torcia_register_backends``
and ``torcia_register_kernels`` like any third-party backend: it holds NumPy arrays (copied
on every transfer) and reuses the reference kernels.
"""

import numpy as np
import pytest

import torcia
from torcia import plugins
from torcia._numpy_backend import Reference
from torcia.backend import Backend


class AltPlugin:
    """A fake device backed by NumPy."""

    @torcia.hookimpl
    def torcia_register_backends(self, registry):
        registry.add(Backend("alt", np, to_host=np.array,
                             from_host=lambda a, index=None: np.array(a)))

    @torcia.hookimpl
    def torcia_register_kernels(self, registry):
        for name, fn in Reference().table().items():
            registry.add(name, "alt", fn)


def _reset_tables():
    for registry in list(plugins._state.registries.values()):
        registry.reset()


@pytest.fixture
def alt():
    pm = plugins.manager()
    plugin = AltPlugin()
    pm.register(plugin, name="test-alt-device")
    _reset_tables()
    # like "cuda", a tensor's device carries an index
    yield torcia.device("alt:0")
    pm.unregister(plugin)
    plugins.reset()


@pytest.mark.parametrize("text, type_, index", [
    ("cpu", "cpu", None), ("cuda:0", "cuda", 0), ("cuda:1", "cuda", 1), ("alt", "alt", None),
])
def test_device_parsing(text, type_, index):
    d = torcia.device(text)
    assert (d.type, d.index) == (type_, index)
    assert str(d) == text
    assert d == text
    assert torcia.device(type_, index) == d


def test_device_repr_and_errors():
    assert repr(torcia.device("cuda:1")) == "device(type='cuda', index=1)"
    assert repr(torcia.device("cpu")) == "device(type='cpu')"
    assert torcia.device(torcia.device("cpu")) is torcia.device("cpu")
    with pytest.raises(RuntimeError, match="Invalid device string: 'cuda:x'"):
        torcia.device("cuda:x")
    with pytest.raises(RuntimeError, match="Invalid device string"):
        torcia.device("1cuda")
    with pytest.raises(RuntimeError, match="must not include an index"):
        torcia.device("cuda:0", 1)


def test_missing_backend_is_named():
    with pytest.raises(RuntimeError, match="no device backend named 'nosuch'"):
        torcia.zeros(2, device="nosuch")


def test_cpu_tensor_device():
    x = torcia.ones(2)
    assert x.device == torcia.device("cpu")
    assert x.cpu() is x
    assert x.to("cpu") is x
    assert x.to(torcia.float64).dtype is torcia.float64
    assert not x.is_cuda and x.get_device() == -1


def test_to_and_back(alt):
    x = torcia.tensor([[1.0, 2.0], [3.0, 4.0]])
    y = x.to("alt")
    assert y.device == alt and y.device.type == "alt"
    assert not np.shares_memory(y._data, x._data)
    z = y.to("alt", torcia.float64)
    assert z.device == alt and z.dtype is torcia.float64
    back = (y * 2).cpu()
    assert back.device.type == "cpu"
    assert back.tolist() == [[2.0, 4.0], [6.0, 8.0]]
    assert x.to(y).device == alt
    assert torcia.zeros(3, device="alt").device == alt
    assert "device='alt:0'" in repr(y)
    assert y.sum().item() == 10.0


def test_devices_meeting_raise_naming_both(alt):
    x = torcia.ones(2)
    y = torcia.ones(2, device="alt")
    message = ("Expected all tensors to be on the same device, but found at least two "
               "devices, cpu and alt:0!")
    with pytest.raises(RuntimeError, match=message):
        x + y
    with pytest.raises(RuntimeError, match="devices, alt:0 and cpu!"):
        y * x
    with pytest.raises(RuntimeError, match="at least two devices"):
        torcia.cat([x, y])
    with pytest.raises(RuntimeError, match="at least two devices"):
        torcia.where(x > 0, x, y)


def test_numpy_of_other_device_raises(alt):
    y = torcia.ones(2, device="alt")
    with pytest.raises(TypeError, match="can't convert alt:0 device type tensor to numpy"):
        y.numpy()
    assert np.asarray(y).tolist() == [1.0, 1.0]


def test_copy_across_devices(alt):
    x = torcia.zeros(2)
    x.copy_(torcia.tensor([1.0, 2.0], device="alt"))
    assert x.tolist() == [1.0, 2.0]


def test_pinning_memory_needs_cuda():
    import torcia

    x = torcia.ones(2)
    assert not x.is_pinned()
    if not torcia.cuda.is_available():
        with pytest.raises(RuntimeError, match="cuda"):
            x.pin_memory()
