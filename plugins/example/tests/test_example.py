"""How to test a torcia plugin: check that the installed distribution is discovered and
loaded, then use what it registered through torcia's public API."""

import numpy as np
import pytest

import torcia
import torcia_example


def test_the_installed_plugin_is_discovered_and_loaded():
    infos = {info.name: info for info in torcia.plugins.plugin_infos()}
    info = infos["example"]
    assert (info.distribution, info.status) == ("torcia-example-plugin", "loaded")
    # torcia_register_compile_backends is listed where torcia-compiler defines it
    assert [h for h in info.hooks if h != "torcia_register_compile_backends"] == [
        "torcia_register_backends", "torcia_register_kernels", "torcia_register_ops"]
    assert "op:logcosh" in info.provides
    assert "device backend:example" in info.provides
    assert {f"kernel:{op}@example" for op in torcia_example.KERNELS} <= set(info.provides)


def test_kernels_compute_on_the_device():
    x = torcia.tensor([1.0, -2.0, 3.0], device="example")
    y = (x * x + x).relu()
    assert y.device.type == "example"
    np.testing.assert_array_equal(y.to("cpu").numpy(), [2.0, 2.0, 12.0])


def test_relu_keeps_the_dtype():
    y = torcia.tensor([-1, 2], dtype=torcia.int32, device="example").relu()
    assert y.dtype == torcia.int32
    np.testing.assert_array_equal(y.to("cpu").numpy(), [0, 2])


def test_moving_to_the_device_copies():
    host = torcia.tensor([1.0, 2.0])
    on_device = host.to("example")
    host.numpy()[0] = 5.0
    assert on_device.to("cpu").tolist() == [1.0, 2.0]


def test_mixing_devices_is_an_error():
    with pytest.raises(RuntimeError, match="example"):
        torcia.tensor([1.0], device="example") + torcia.tensor([1.0])


def test_an_op_the_device_lacks_runs_through_the_host_fallback():
    from torcia import library

    x = torcia.tensor([1.0, 2.0], device="example")
    for op in (torcia.exp, lambda t: t - t, lambda t: t.sum()):
        out = op(x)
        assert out.device.type == "example"
        torcia.testing.assert_close(out.cpu(), op(x.cpu()))
    ops = library.device_ops("example")
    # custom ops (``ns::name``, defined by other tests in this process) without
    # device_types run natively on every device, this one too, as PyTorch's do
    assert {op for op, how in ops.items() if how == "native" and "::" not in op} == \
        {"add", "mul", "relu"}
    assert ops["exp"] == ops["sub"] == ops["conv"] == "fallback"
    assert "missing" not in ops.values()


def test_logcosh_matches_numpy_and_stays_finite():
    x = np.array([-300.0, -1.5, 0.0, 2.0, 300.0])
    got = torcia_example.logcosh(torcia.tensor(x, dtype=torcia.float64)).numpy()
    with np.errstate(over="ignore"):
        naive = np.log(np.cosh(x))
    np.testing.assert_allclose(got[1:4], naive[1:4], rtol=1e-12)
    np.testing.assert_allclose(got[[0, 4]], 300.0 - np.log(2.0), rtol=1e-12)
    with pytest.raises(TypeError, match="must be Tensor"):
        torcia_example.logcosh([1.0])


def test_logcosh_passes_gradcheck_and_gradgradcheck():
    autograd = pytest.importorskip("torcia.autograd")
    x = torcia.randn(5, dtype=torcia.float64, requires_grad=True)
    assert autograd.gradcheck(torcia_example.logcosh, (x,))
    assert autograd.gradgradcheck(torcia_example.logcosh, (x,))


def test_logcosh_on_the_meta_device_and_on_the_example_device():
    out = torcia_example.logcosh(torcia.empty(3, 4, device="meta"))
    assert out.shape == (3, 4) and out.device.type == "meta"
    y = torcia_example.logcosh(torcia.tensor([1.0, -2.0]).to(torcia_example.DEVICE))
    assert y.device.type == "example"  # through the host fallback
    np.testing.assert_allclose(y.to("cpu").numpy(), np.log(np.cosh([1.0, -2.0])), rtol=1e-6)


def test_logcosh_record():
    from torcia import library

    record = library.get_op("logcosh")
    assert record.group == "unary_float" and record.differentiable
    assert record.shape is not None and record.backward is not None


@pytest.mark.slow
def test_the_device_passes_the_conformance_suite(tmp_path):
    # what a device plugin's CI runs: core's op checks against the installed device
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                          "--torcia-device", "example"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:]
    summary = run.stdout.split("torcia conformance: device 'example'", 1)[1]
    assert "native (3): add, mul, relu" in summary
    assert "missing (0)" in summary and "failed (0)" in summary
    assert " failed" not in summary.splitlines()[-1]
