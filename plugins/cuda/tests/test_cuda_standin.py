import numpy as np
import pytest

import torcia


def test_available_and_counted(fake_cuda):
    assert torcia.cuda.is_available()
    assert torcia.cuda.device_count() == 2
    assert torcia.cuda.current_device() == 0


def test_tensors_move_and_compute(fake_cuda):
    x = torcia.randn(3, 4)
    y = x.cuda()
    assert y.device == torcia.device("cuda:0") and y.is_cuda
    assert torcia.library.array(y) is not torcia.library.array(x)
    torcia.testing.assert_close((y * 2 + 1).cpu(), x * 2 + 1)
    z = torcia.zeros(2, device="cuda")
    assert z.device.type == "cuda" and z.tolist() == [0.0, 0.0]
    assert "device='cuda:0'" in repr(z)


def test_numpy_of_a_cuda_tensor_says_to_copy_first(fake_cuda):
    with pytest.raises(TypeError, match="cpu()"):
        torcia.ones(2, device="cuda").numpy()


def test_mixing_devices_names_both(fake_cuda):
    with pytest.raises(RuntimeError, match="same device.*cpu and cuda:0|cuda:0 and cpu"):
        torcia.ones(2) + torcia.ones(2, device="cuda")
    with pytest.raises(RuntimeError, match="cuda:1"):
        torcia.ones(2, device="cuda:0") * torcia.ones(2, device="cuda:1")


def test_device_context_and_ordinals(fake_cuda):
    with torcia.cuda.device(1):
        assert torcia.cuda.current_device() == 1
        assert torcia.ones(1, device="cuda").device == torcia.device("cuda:1")
    assert torcia.cuda.current_device() == 0
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        torcia.ones(1, device="cuda:2")


def test_gradients_on_the_device_and_across_transfers(fake_cuda):
    a = torcia.randn(3, device="cuda", requires_grad=True)
    (a * a).sum().backward()
    assert a.grad.device.type == "cuda"
    torcia.testing.assert_close(a.grad.cpu(), 2 * a.detach().cpu())
    b = torcia.randn(3, requires_grad=True)
    (b.cuda() * 3).sum().backward()
    assert b.grad.device == torcia.device("cpu")
    assert b.grad.tolist() == [3.0, 3.0, 3.0]


def test_views_share_device_memory(fake_cuda):
    x = torcia.arange(6.0, device="cuda").view(2, 3)
    x.t()[0] += 10
    assert x.cpu().tolist() == [[10.0, 1.0, 2.0], [13.0, 4.0, 5.0]]


def test_without_cupy_cuda_is_unavailable_with_the_reason(monkeypatch):
    pytest.importorskip("torcia_cuda")
    try:
        import cupy  # noqa: F401
        pytest.skip("CuPy is installed; this checks the machine without it")
    except ImportError:
        pass
    torcia.plugins.reset()
    assert torcia.cuda.is_available() is False
    assert torcia.cuda.device_count() == 0
    with pytest.raises(RuntimeError, match="CuPy is not installed"):
        torcia.zeros(2, device="cuda")
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        torcia.cuda.synchronize()


def test_kernels_are_the_reference_kernels_on_xp(fake_cuda):
    from torcia_cuda import cupy_kernels

    from torcia import library

    view = cupy_kernels(np)["view"]
    a = np.arange(12.0).reshape(3, 4)
    assert np.array_equal(view(a.T.copy(), (12,)), a.T.reshape(12))
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        view(a.T, (12,))
    assert view(a, (4, 3)).base is not None
    # every other op is the reference kernel on the device's array module
    ops = library.device_ops("cuda")
    assert ops["view"] == "native" and ops["matmul"] == ops["conv"] == "fallback"
    assert "missing" not in ops.values()
    reference = library.fallback("conv", "cuda")
    assert isinstance(reference.__self__, library.ReferenceKernels)
