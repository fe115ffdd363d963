"""Autocast casts every op on its lists, whichever dispatch entry the op takes (``call``,
``binary``, ``unary`` or a composite), on the "cpu" device and on a "cuda" device.

The "cuda" device here is a test plugin holding NumPy arrays (with the reference kernels),
so that the CUDA lists are checked without a GPU; torcia-cuda's own backend, if installed,
is set aside meanwhile. float16 is the low dtype on both, so no ml_dtypes is needed.
"""

import numpy as np
import pytest

import torcia
from torcia import amp, library, plugins
from torcia.backend import Backend

LOW = torcia.float16


class FakeCuda:
    @torcia.hookimpl
    def torcia_register_backends(self, registry):
        registry.add(Backend("cuda", np, to_host=np.array,
                             from_host=lambda a, index=None: np.array(a)))

    @torcia.hookimpl
    def torcia_register_kernels(self, registry):
        for name, fn in library.ReferenceKernels().table().items():
            registry.add(name, "cuda", fn)


def _reset_tables():
    for registry in list(plugins._state.registries.values()):
        registry.reset()


@pytest.fixture(params=["cpu", "cuda"])
def device(request):
    if request.param == "cpu":
        yield "cpu"
        return
    pm = plugins.manager()
    real = pm.get_plugin("cuda")
    if real is not None:
        pm.unregister(real)
    fake = FakeCuda()
    pm.register(fake, name="test-fake-cuda")
    _reset_tables()
    yield "cuda"
    pm.unregister(fake)
    if real is not None:
        pm.register(real, name="cuda")
    plugins._reset()


def _spd(dev, dtype):
    m = torcia.tensor([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]], device=dev)
    return m.to(dtype)


def _x(dev, dtype, *shape):
    torcia.manual_seed(0)
    return (torcia.rand(*shape, device="cpu") * 0.5 + 0.25).to(dev).to(dtype)


# op -> a call of it on inputs of ``dtype``, through the public entry point ops take
CASES = {
    # ----- elementwise: unary and binary dispatch -----
    "exp": lambda d, t: torcia.exp(_x(d, t, 4)),
    "log": lambda d, t: torcia.log(_x(d, t, 4)),
    "log1p": lambda d, t: torcia.log1p(_x(d, t, 4)),
    "log2": lambda d, t: torcia.log2(_x(d, t, 4)),
    "log10": lambda d, t: torcia.log10(_x(d, t, 4)),
    "reciprocal": lambda d, t: torcia.reciprocal(_x(d, t, 4)),
    "rsqrt": lambda d, t: torcia.rsqrt(_x(d, t, 4)),
    "acos": lambda d, t: torcia.acos(_x(d, t, 4)),
    "asin": lambda d, t: torcia.asin(_x(d, t, 4)),
    "cosh": lambda d, t: torcia.cosh(_x(d, t, 4)),
    "sinh": lambda d, t: torcia.sinh(_x(d, t, 4)),
    "tan": lambda d, t: torcia.tan(_x(d, t, 4)),
    "erfinv": lambda d, t: torcia.erfinv(_x(d, t, 4)),
    "expm1": lambda d, t: torcia.expm1(_x(d, t, 4)),
    "pow": lambda d, t: torcia.pow(_x(d, t, 4), 2.0),
    # ----- reductions and scans -----
    "sum": lambda d, t: _x(d, t, 4).sum(),
    "prod": lambda d, t: _x(d, t, 4).prod(),
    "cumsum": lambda d, t: _x(d, t, 4).cumsum(0),
    "cumprod": lambda d, t: _x(d, t, 4).cumprod(0),
    "norm": lambda d, t: _x(d, t, 4).norm(),
    "logsumexp": lambda d, t: _x(d, t, 4).logsumexp(0),
    # ----- nn -----
    "softmax": lambda d, t: torcia.softmax(_x(d, t, 2, 3), dim=1),
    "log_softmax": lambda d, t: torcia.log_softmax(_x(d, t, 2, 3), dim=1),
    "softplus": lambda d, t: library.softplus(_x(d, t, 2, 3)),
    "layer_norm": lambda d, t: library.layer_norm(_x(d, t, 2, 3), (3,)),
    "group_norm": lambda d, t: library.group_norm(_x(d, t, 2, 4, 3), 2),
    "batch_norm": lambda d, t: library.batch_norm(_x(d, t, 2, 3), None, None, training=True),
    "adaptive_avg_pool": lambda d, t: library.adaptive_avg_pool2d(_x(d, t, 1, 2, 4, 4), 2),
    "pad": lambda d, t: library.pad(_x(d, t, 2, 3), (1, 1)),
    "nll_loss": lambda d, t: library.call(
        "nll_loss", (_x(d, t, 2, 3), torcia.tensor([0, 2], device=d), None),
        {"reduction": "mean", "ignore_index": -100}),
    "cross_entropy": lambda d, t: library.call(
        "cross_entropy", (_x(d, t, 2, 3), torcia.tensor([0, 2], device=d), None),
        {"reduction": "mean", "ignore_index": -100, "label_smoothing": 0.0}),
    # ----- linear algebra -----
    "linalg_inv": lambda d, t: torcia.linalg.inv(_spd(d, t)),
    "linalg_solve": lambda d, t: torcia.linalg.solve(_spd(d, t), _spd(d, t)),
    "linalg_det": lambda d, t: torcia.linalg.det(_spd(d, t)),
    "linalg_slogdet": lambda d, t: torcia.linalg.slogdet(_spd(d, t))[1],
    "linalg_svd": lambda d, t: torcia.linalg.svd(_spd(d, t))[1],
    "linalg_qr": lambda d, t: torcia.linalg.qr(_spd(d, t))[0],
    "linalg_cholesky": lambda d, t: torcia.linalg.cholesky(_spd(d, t)),
    "linalg_eigh": lambda d, t: torcia.linalg.eigh(_spd(d, t))[0],
    "linalg_eigvalsh": lambda d, t: torcia.linalg.eigvalsh(_spd(d, t)),
    "linalg_pinv": lambda d, t: torcia.linalg.pinv(_spd(d, t)),
    "linalg_norm": lambda d, t: torcia.linalg.norm(_spd(d, t)),
    "linalg_vector_norm": lambda d, t: torcia.linalg.vector_norm(_spd(d, t)),
    "linalg_matrix_norm": lambda d, t: torcia.linalg.matrix_norm(_spd(d, t)),
    # ----- lower precision -----
    "matmul": lambda d, t: _x(d, t, 2, 3) @ _x(d, t, 3, 2),
    "mm": lambda d, t: torcia.mm(_x(d, t, 2, 3), _x(d, t, 3, 2)),
    "bmm": lambda d, t: torcia.bmm(_x(d, t, 1, 2, 3), _x(d, t, 1, 3, 2)),
    "addmm": lambda d, t: torcia.addmm(_x(d, t, 2, 2), _x(d, t, 2, 3), _x(d, t, 3, 2)),
    "linear": lambda d, t: library.call("linear", (_x(d, t, 2, 3), _x(d, t, 4, 3), None), {}),
    "dot": lambda d, t: torcia.dot(_x(d, t, 3), _x(d, t, 3)),
    "outer": lambda d, t: torcia.outer(_x(d, t, 3), _x(d, t, 2)),
    "einsum": lambda d, t: torcia.einsum("ij,jk->ik", _x(d, t, 2, 3), _x(d, t, 3, 2)),
    "tensordot": lambda d, t: torcia.tensordot(_x(d, t, 2, 3), _x(d, t, 3, 2), dims=1),
    "conv": lambda d, t: library.conv2d(_x(d, t, 1, 2, 4, 4), _x(d, t, 3, 2, 3, 3)),
    "conv_transpose": lambda d, t: library.conv_transpose2d(_x(d, t, 1, 2, 4, 4),
                                                            _x(d, t, 2, 3, 3, 3)),
}


@pytest.mark.parametrize("device, op", [(d, op) for d in ("cpu", "cuda")
                                        for op in sorted(amp.FLOAT32[d])], indirect=["device"])
def test_float32_list_ops_run_in_float32(device, op):
    with torcia.autocast(device, dtype=LOW):
        out = CASES[op](device, LOW)
    assert out.dtype is torcia.float32, op
    assert out.device.type == device


@pytest.mark.parametrize("op", sorted(amp.LOWER_PRECISION))
def test_lower_precision_list_ops_run_in_the_low_dtype(device, op):
    with torcia.autocast(device, dtype=LOW):
        out = CASES[op](device, torcia.float32)
    assert out.dtype is LOW, op


PROMOTE_CASES = {
    "cat": lambda a, b: torcia.cat([a, b]),
    "stack": lambda a, b: torcia.stack([a, b]),
    "addcmul": lambda a, b: torcia.addcmul(a, b, b),
    "addcdiv": lambda a, b: torcia.addcdiv(a, b, b),
    "atan2": lambda a, b: torcia.atan2(a, b),
    "lerp": lambda a, b: torcia.lerp(a, b, 0.5),
    "where": lambda a, b: torcia.where(a > 0.5, a, b),
    "index_copy": lambda a, b: a.index_copy(0, torcia.tensor([0], device=a.device), b[:1]),
    "index_put": lambda a, b: a.index_put((torcia.tensor([0], device=a.device),), b[:1]),
    "scatter_add": lambda a, b: a.scatter_add(0, torcia.tensor([0, 1], device=a.device), b),
}


@pytest.mark.parametrize("op", sorted(amp.PROMOTE))
def test_promote_list_ops_run_in_the_widest_dtype(device, op):
    with torcia.autocast(device, dtype=LOW):
        out = PROMOTE_CASES[op](_x(device, torcia.float32, 2), _x(device, LOW, 2))
    assert out.dtype is torcia.float32, op


def test_every_op_on_the_lists_has_a_case():
    listed = set(amp.LOWER_PRECISION) | set(amp.FLOAT32["cpu"]) | set(amp.FLOAT32["cuda"])
    assert listed <= set(CASES)
    assert set(amp.PROMOTE) <= set(PROMOTE_CASES)


def test_autocast_is_off_in_other_threads_and_after():
    import threading

    seen = []
    with torcia.autocast("cpu", dtype=LOW):
        thread = threading.Thread(target=lambda: seen.append((torcia.ones(2, 2) @
                                                               torcia.ones(2, 2)).dtype))
        thread.start()
        thread.join()
        assert (torcia.ones(2, 2) @ torcia.ones(2, 2)).dtype is LOW
    assert seen == [torcia.float32]
    assert torcia.exp(torcia.ones(2, dtype=LOW)).dtype is LOW
