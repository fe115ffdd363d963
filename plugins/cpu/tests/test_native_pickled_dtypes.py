"""Every native entry point takes arrays whose dtype went through pickle (issue #44).

An array unpickled in a worker process carries a dtype object equal to NumPy's float32 but
not the same object; the native checks compared dtypes by identity and refused it
("matmul_batched: a must be float32 or float64, got float32"), or, where a kernel picked
its float or double loop by identity, would have read float32 memory as double.

A workload of torcia ops (forward and backward, optimizer steps) runs with every call
into the extension recorded; each recorded call is then made again with its arrays
pickled and unpickled, and must give what the original arrays give.
"""

import copy
import pickle

import numpy as np
import pytest
from torcia_cpu import _native, _provider
from torcia_cpu import kernels as native_kernels
from torcia_cpu import quant as native_quant

import torcia
import torcia.nn.functional as F
from torcia import nn

# entry points that take no arrays (settings and queries)
SETTINGS = {"blas_name", "get_num_threads", "set_num_threads", "set_blas_threads", "set_crowded",
            "set_winograd", "winograd", "openmp", "use_mkl", "ELEMENTWISE_GRAIN",
            "has_int8_gemm", "has_int8_conv", "int8_library", "use_onednn",
            "use_page_aligned_arrays"}
# the int8 products run only where an integer GEMM (oneDNN or MKL) was loaded
INT8_GEMM = {"int8_linear", "qconv2d", "quantize_rows"}
ENTRY_POINTS = sorted(n for n in dir(_native) if not n.startswith("_") and n not in SETTINGS)


class _Recorder:
    """Stands in for the extension module: each call is made, and its arguments (copied
    before the call, which may write into them) kept by entry point and dtype."""

    def __init__(self):
        self.calls = {}

    def __getattr__(self, name):
        fn = getattr(_native, name)
        if name in SETTINGS:
            return fn

        def record(*args):
            key = (name, _first_float(args))
            self.calls.setdefault(key, copy.deepcopy(args))
            return fn(*args)

        return record


def _arrays(obj):
    if isinstance(obj, np.ndarray):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            yield from _arrays(x)


def _first_float(args):
    return next((a.dtype.name for a in _arrays(args) if a.dtype.kind == "f"), None)


def _workload(dtype):
    torcia.manual_seed(0)
    # 3x3 convolutions of stride 1 on a plane of 256 2x2 blocks run by Winograd's
    # transform; the 5x5 one by im2col and one GEMM; the grouped one by im2col/col2im
    x = torcia.randn(1, 8, 32, 32, dtype=dtype, requires_grad=True)
    layers = [nn.Conv2d(8, 8, 3, padding=1), nn.Conv2d(8, 8, 5, padding=2),
              nn.Conv2d(8, 8, 3, padding=1, groups=2), nn.ConvTranspose2d(8, 8, 3, padding=1),
              nn.ConvTranspose2d(8, 8, 3, padding=1, groups=2), nn.BatchNorm2d(8)]
    for layer in layers:
        layer.to(dtype)
    y = x
    for layer in layers:
        y = layer(y)
    y = F.max_pool2d(y, 2)
    for act in (F.gelu, F.silu, torcia.sigmoid, torcia.tanh, F.softplus, F.elu, F.leaky_relu,
                F.relu, lambda t: F.gelu(t, approximate="tanh")):
        y = act(y)
    h = y.reshape(2, 16, 64)
    h = F.layer_norm(h, (64,), _ones(64, dtype), _ones(64, dtype))
    h = F.rms_norm(h, (64,), _ones(64, dtype))
    # a batch of small products, attention's causal mask, softmax over the last dim
    scores = (h @ h.transpose(-2, -1)).masked_fill(
        torcia.ones(16, 16, dtype=torcia.bool).triu(1), float("-inf"))
    h = F.softmax(scores, -1) @ h + F.log_softmax(scores.clamp(min=-1e4), -1).mean()
    # attention without the scores (flash_attention), causal and with a bool mask
    q = h.reshape(2, 2, 8, 64)
    h = h + F.scaled_dot_product_attention(q, q, q, is_causal=True).reshape(2, 16, 64)
    h = h + F.scaled_dot_product_attention(
        q, q, q, attn_mask=torcia.ones(8, 8, dtype=torcia.bool).tril()).reshape(2, 16, 64)
    # elementwise ops and sums of a tensor above the grain (native on several threads)
    big = torcia.randn(2, 40000, dtype=dtype, requires_grad=True)
    wide = ((big * 2.0 + big) / (big.abs() + 1.0).sqrt() - big[0]).exp().sum(1).mean()
    h = h + wide * 0
    # lerp with a number weight and addcmul (one fused multiply-add an element, natively)
    h = h + (big.lerp(big * 2.0, 0.3) + torcia.addcmul(big, big, big, value=0.5)).sum() * 0
    # a cat of C-contiguous pieces above the grain (joined natively)
    h = h + torcia.cat([big, big], 1).sum() * 0
    # a transposed tensor's C-contiguous copy, of more than _COPY_FROM elements (native)
    h = h + big.t().contiguous().sum() * 0
    out, _ = nn.LSTM(64, 8).to(dtype)(h)
    cell = nn.LSTMCell(8, 8).to(dtype)
    hc = cell(out[0])
    emb = nn.Embedding(10, 8).to(dtype)(torcia.arange(16) % 10)
    # bags of embeddings: their rows added with index_add
    emb = emb + nn.EmbeddingBag(10, 8).to(dtype)(torcia.arange(32) % 10, torcia.arange(0, 32, 2))
    logits = nn.Linear(8, 5).to(dtype)(hc[0] + emb)
    loss = F.cross_entropy(logits, torcia.arange(16) % 5) + out.sum() * 0
    loss.backward()
    params = [p for layer in layers for p in layer.parameters()]
    for opt in (torcia.optim.SGD(params, lr=0.1, momentum=0.9),
                torcia.optim.Adam(params, lr=0.1, amsgrad=True)):
        opt.step()
        opt.step()


def _quant_workload():
    # torcia-ao's ops call these kernels with NumPy arrays (uint8/int8 integers, float32
    # scales), as the quantized modules do
    rng = np.random.default_rng(0)
    kernels = native_quant.QuantKernels()
    x = rng.standard_normal((6, 32)).astype(np.float32)
    wq = rng.integers(-127, 128, (8, 32)).astype(np.int8)
    scales = rng.uniform(1e-3, 1e-2, 8).astype(np.float32)
    bias = rng.standard_normal(8).astype(np.float32)
    act = dict(x_scale=0.05, x_zero_point=128, out_scale=0.1, out_zero_point=3)
    xq = kernels.quantize_per_tensor(x, scale=0.05, zero_point=128, qmin=0, qmax=255,
                                     dtype="quint8")
    kernels.dequantize_per_tensor(xq, scale=0.05, zero_point=128)
    kernels.quantized_linear(xq, wq, scales, bias, **act)
    kernels.quantized_add(xq, xq, a_scale=0.05, a_zero_point=128, b_scale=0.05,
                          b_zero_point=128, out_scale=0.1, out_zero_point=3)
    kernels.linear_dynamic(x, wq, scales, bias)
    kernels.linear_weight_int8(x, wq, scales, bias)
    packed = rng.integers(0, 256, (8, 16)).astype(np.uint8)
    kernels.linear_weight_int4(x, packed, np.full((8, 2), 0.01, np.float32),
                               np.full((8, 2), 8.0, np.float32), bias, group_size=16)
    image = kernels.quantize_per_tensor(rng.standard_normal((1, 4, 8, 8)).astype(np.float32),
                                        scale=0.05, zero_point=128, qmin=0, qmax=255,
                                        dtype="quint8")
    kernels.quantized_conv2d(image, rng.integers(-127, 128, (8, 4, 3, 3)).astype(np.int8),
                             scales, bias, padding=((1, 1), (1, 1)), **act)
    kernels.quantized_max_pool2d(image, kernel_size=(2, 2), stride=(2, 2))


def _ones(n, dtype):
    return torcia.ones(n, dtype=dtype, requires_grad=True)


@pytest.fixture(scope="module")
def recorded():
    recorder = _Recorder()
    patch = pytest.MonkeyPatch()
    patch.setattr(native_kernels, "_native", recorder)
    patch.setattr(native_quant, "_native", recorder)
    # the arithmetic natively whatever this machine's thread count
    patch.setattr(native_kernels, "_arithmetic_from", _native.ELEMENTWISE_GRAIN)
    try:
        for dtype in (torcia.float32, torcia.float64):
            _workload(dtype)
        _quant_workload()
    finally:
        patch.undo()
    return recorder.calls


def test_the_workload_reaches_every_entry_point(registered, recorded):
    reached = {name for name, _ in recorded}
    _provider.choose()
    expected = set(ENTRY_POINTS) - (set() if _native.has_int8_gemm() else INT8_GEMM)
    assert reached == expected, sorted(expected ^ reached)


def _unpickled(args):
    out = pickle.loads(pickle.dumps(args))
    for a, b in zip(_arrays(args), _arrays(out)):
        assert a.dtype == b.dtype and a.dtype is not b.dtype, "pickle kept the dtype object"
    return out


def _same(a, b, dtype):
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y, dtype)
    elif isinstance(a, np.ndarray):
        assert a.shape == b.shape and a.dtype == b.dtype
        # the BLAS may pick other blockings for differently aligned copies
        tol = 1e-5 if dtype == "float32" else 1e-12
        np.testing.assert_allclose(b, a, rtol=tol, atol=tol)
    else:
        assert a == b


@pytest.mark.parametrize("name", ENTRY_POINTS)
def test_pickled_arrays_run_natively(recorded, name):
    fn = getattr(_native, name)
    for (entry, dtype), args in recorded.items():
        if entry != name:
            continue
        mine, theirs = copy.deepcopy(args), _unpickled(args)
        expected = fn(*mine)
        got = fn(*theirs)
        _same(expected, got, dtype)
        _same(mine, theirs, dtype)  # what the in-place updates wrote


def test_pickled_bool_mask_and_int64_indices():
    # the masks and indices the kernels read as bool and int64 arrays
    a = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    mask = pickle.loads(pickle.dumps(np.array([True, False, True])))
    assert mask.dtype is not np.dtype(bool)
    np.testing.assert_array_equal(_native.masked_fill_rows(a, mask, -1.0),
                                  [[-1, 1, -1], [-1, 4, -1]])
    g = np.ones((3, 2), np.float32)
    idx = pickle.loads(pickle.dumps(np.array([0, 2, 2], np.int64)))
    assert idx.dtype is not np.dtype(np.int64)
    np.testing.assert_array_equal(_native.embedding_backward(g, idx, 3, -1),
                                  [[1, 1], [0, 0], [2, 2]])


def test_byte_swapped_arrays_are_refused():
    # by value, a big-endian float32 is not the float32 the loops read
    a = np.ones((2, 2), np.float32).astype(">f4")
    with pytest.raises(RuntimeError, match="a must be float32 or float64"):
        _native.matmul_batched(a, a)
    with pytest.raises(RuntimeError, match="x must be float32 or float64"):
        _native.activation("relu", a)


def test_a_pickled_array_through_torcia_runs_the_native_product():
    # the case: a pickled array, made a tensor, multiplied (matmul_batched)
    a = pickle.loads(pickle.dumps(np.ones((4, 3), np.float32)))
    b = pickle.loads(pickle.dumps(np.ones((2, 4, 3), np.float32)))
    for t in (torcia.tensor(a), torcia.from_numpy(a), torcia.as_tensor(a)):
        assert torcia.equal(t @ torcia.ones(3, 2), torcia.full((4, 2), 3.0))
    assert torcia.equal(torcia.from_numpy(b) @ torcia.ones(2, 3, 5),
                        torcia.full((2, 4, 5), 3.0))
