"""What real PyTorch programs hit first, in core: torcia.accelerator, torcia.backends,
legacy constructors, range keys, device predicates."""

import numpy as np
import pytest

import torcia


def test_accelerator_answers_for_installed_device_plugins():
    acc = torcia.accelerator.current_accelerator()
    assert acc is None or acc.type not in ("cpu", "meta")  # neither is an accelerator
    available = torcia.accelerator.is_available()
    assert available == (torcia.accelerator.device_count() > 0)
    if not available:
        assert torcia.accelerator.current_accelerator(check_available=True) is None
        with pytest.raises(RuntimeError, match="no accelerator is available"):
            torcia.accelerator.synchronize()
    with torcia.accelerator.device_index(None):
        pass


def test_backends_flags_are_settable_and_scoped():
    from torcia.backends import cuda, cudnn, mkldnn, mps, opt_einsum

    assert (cudnn.enabled, cudnn.benchmark, cudnn.deterministic) == (True, False, False)
    cudnn.benchmark = True
    try:
        assert torcia.backends.cudnn.benchmark is True
    finally:
        cudnn.benchmark = False
    with cudnn.flags(enabled=False, deterministic=True):
        assert not cudnn.enabled and cudnn.deterministic
    assert cudnn.enabled and not cudnn.deterministic
    assert not cudnn.is_available() and cudnn.version() is None
    assert cuda.matmul.allow_tf32 is False
    with pytest.raises(AttributeError, match="Unknown attribute"):
        cuda.matmul.allow_tf33 = True
    assert mps.is_available() is False and mps.is_built() is False
    assert mkldnn.is_available() is False
    assert opt_einsum.strategy == "auto" and isinstance(opt_einsum.is_available(), bool)
    with cuda.sdp_kernel(enable_flash=False):
        assert not cuda.flash_sdp_enabled() and cuda.math_sdp_enabled()
    assert cuda.flash_sdp_enabled()


def test_float32_matmul_precision_sets_allow_tf32():
    torcia.set_float32_matmul_precision("high")
    try:
        assert torcia.backends.cuda.matmul.allow_tf32 is True
        assert torcia.get_float32_matmul_precision() == "high"
    finally:
        torcia.set_float32_matmul_precision("highest")
    assert torcia.backends.cuda.matmul.allow_tf32 is False
    with pytest.raises(RuntimeError, match="Invalid precision"):
        torcia.set_float32_matmul_precision("low")


def test_tensor_legacy_constructor():
    t = torcia.Tensor(2, 3)
    assert t.shape == (2, 3) and t.dtype is torcia.float32
    assert torcia.Tensor().shape == (0,)
    assert torcia.Tensor(torcia.Size([4])).shape == (4,)
    assert torcia.Tensor([1, 2]).dtype is torcia.float32
    x = torcia.ones(2)
    assert torcia.Tensor(x) is x
    with pytest.raises(TypeError, match="float32"):
        torcia.Tensor(torcia.tensor([1, 2]))


@pytest.mark.parametrize("name,dtype", [
    ("FloatTensor", torcia.float32), ("DoubleTensor", torcia.float64),
    ("LongTensor", torcia.int64), ("IntTensor", torcia.int32), ("BoolTensor", torcia.bool),
    ("ByteTensor", torcia.uint8), ("HalfTensor", torcia.float16)])
def test_typed_legacy_constructors_convert(name, dtype):
    cls = getattr(torcia, name)
    assert cls([0, 1, 2]).dtype is dtype
    assert cls(2, 5).shape == (2, 5) and cls(2, 5).dtype is dtype
    assert isinstance(torcia.zeros(1, dtype=dtype), cls)
    other = torcia.float64 if dtype is not torcia.float64 else torcia.float32
    assert not isinstance(torcia.zeros(1, dtype=other), cls)


def test_legacy_types_in_type_and_values():
    assert torcia.LongTensor([1.7, -2.2]).tolist() == [1, -2]
    assert torcia.BoolTensor([0, 2]).tolist() == [False, True]
    assert torcia.ones(2).type(torcia.LongTensor).dtype is torcia.int64
    assert torcia.ones(2).type("torch.DoubleTensor").dtype is torcia.float64
    assert torcia.ones(2).type() == "torcia.FloatTensor"
    assert not isinstance(torcia.ones(1), torcia.cuda.FloatTensor)


def test_range_keys_index_like_lists():
    x = torcia.arange(10.0)
    assert x[range(2, 5)].tolist() == [2.0, 3.0, 4.0]
    y = torcia.arange(12.0).reshape(3, 4)
    assert y[range(2), torcia.tensor([0, 1])].tolist() == [0.0, 5.0]
    assert y[range(1, 3), 1:3].tolist() == [[5.0, 6.0], [9.0, 10.0]]
    y[range(2), [0, 0]] = -1.0
    assert y[:2, 0].tolist() == [-1.0, -1.0]


def test_range_keys_match_torch():
    torch = pytest.importorskip("torch")
    a = np.arange(24.0).reshape(2, 3, 4)
    for key in [(range(2),), (slice(None), range(1, 3)), (range(2), range(1, 3)),
                (0, range(3), [1, 2, 3])]:
        want = torch.from_numpy(a)[key].numpy()
        np.testing.assert_array_equal(torcia.from_numpy(a)[key].numpy(), want)


def test_device_predicates():
    x = torcia.ones(1)
    assert x.is_cpu and not x.is_cuda
    assert not (x.is_xpu or x.is_mps or x.is_meta or x.is_ipu or x.is_hpu or x.is_mtia
                or x.is_vulkan or x.is_xla or x.is_sparse or x.is_quantized or x.is_mkldnn
                or x.is_nested)
    meta = torcia.empty(2, device="meta")
    assert meta.is_meta and not meta.is_cpu


@pytest.mark.parametrize("shape", [(3, 7), (7,), (1, 5)])
def test_cov_corrcoef_match_torch(shape):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape)
    fw = rng.integers(1, 4, shape[-1])
    aw = rng.random(shape[-1])
    cases = [{}, {"correction": 0}, {"fweights": fw}, {"aweights": aw},
             {"fweights": fw, "aweights": aw, "correction": 2}]
    for kw in cases:
        ours = {k: torcia.from_numpy(v) if isinstance(v, np.ndarray) else v
                for k, v in kw.items()}
        theirs = {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v
                  for k, v in kw.items()}
        np.testing.assert_allclose(torcia.cov(torcia.from_numpy(x), **ours).numpy(),
                                   torch.cov(torch.from_numpy(x), **theirs).numpy(),
                                   rtol=1e-10)
    np.testing.assert_allclose(torcia.from_numpy(x).corrcoef().numpy(),
                               torch.corrcoef(torch.from_numpy(x)).numpy(), rtol=1e-10)


def test_cov_gradcheck():
    gradcheck = pytest.importorskip("torcia.autograd").gradcheck
    x = torcia.randn(3, 6, dtype=torcia.float64, requires_grad=True)
    assert gradcheck(lambda t: torcia.cov(t), (x,))
    assert gradcheck(lambda t: torcia.corrcoef(t), (x,))
    with pytest.raises(RuntimeError, match="integral"):
        torcia.cov(x, fweights=torcia.ones(6))
