"""Autocast casts every op on its lists, per device, whichever dispatch entry the op takes
(``call``, ``binary``, ``unary`` or a composite under ``autocast_as``), on the "cpu" device
and on a "cuda" device: each op of ``LOWER_PRECISION``, ``FLOAT32``, ``PROMOTE`` and
``BANNED`` is run here, with no torch involved (torcia-nn's test_autocast_lists.py compares
the lists and the CPU dtypes with PyTorch's).

The "cuda" device here is a test plugin holding NumPy arrays (with the reference kernels),
so that the CUDA lists are checked without a GPU; torcia-cuda's own backend, if installed,
is set aside meanwhile. float16 is the low dtype on both, so no ml_dtypes is needed. The
ops of torcia-nn (losses, attention, ``grid_sample``...) run where it is installed and skip,
naming it, where core is tested alone.
"""

import numpy as np
import pytest

import torcia
from torcia import _autocast, _opdef, amp, library, plugins
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
    plugins.reset()


def _spd(dev, dtype):
    m = torcia.tensor([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]], device=dev)
    return m.to(dtype)


def _x(dev, dtype, *shape):
    torcia.manual_seed(0)
    return (torcia.rand(*shape, device="cpu") * 0.5 + 0.25).to(dev).to(dtype)


def _idx(dev, *values):
    return torcia.tensor(list(values), device=dev)


def _nn():
    """torcia.nn.functional, whose ops (the losses, attention...) are on the lists too.

    torcia-core does not depend on torcia-nn: where it is absent (core tested alone) those
    cases skip, saying which distribution holds the op."""
    return pytest.importorskip("torcia.nn.functional",
                               reason="the op is torcia-nn's (torcia.nn.functional), "
                                      "which is not installed")


# op -> a call of it on inputs of dtype ``t`` on device ``d``, through the public entry
# point the op takes (unary/binary dispatch, ``call``, a composite under ``autocast_as``)
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
    "dist": lambda d, t: torcia.dist(_x(d, t, 3), _x(d, t, 3) * 2),
    "cdist": lambda d, t: torcia.cdist(_x(d, t, 3, 4), _x(d, t, 2, 4)),
    "pdist": lambda d, t: _nn().pdist(_x(d, t, 3, 4)),
    "cosine_similarity": lambda d, t: library.functional.cosine_similarity(_x(d, t, 2, 3),
                                                                _x(d, t, 2, 3)),
    # ----- normalization, activations -----
    "softmax": lambda d, t: torcia.softmax(_x(d, t, 2, 3), dim=1),
    "log_softmax": lambda d, t: torcia.log_softmax(_x(d, t, 2, 3), dim=1),
    "softplus": lambda d, t: library.functional.softplus(_x(d, t, 2, 3)),
    "layer_norm": lambda d, t: library.functional.layer_norm(_x(d, t, 2, 3), (3,)),
    "group_norm": lambda d, t: library.functional.group_norm(_x(d, t, 2, 4, 3), 2),
    "rms_norm": lambda d, t: _nn().rms_norm(_x(d, t, 2, 3), (3,)),
    "prelu": lambda d, t: library.functional.prelu(_x(d, t, 2, 3), _x(d, t, 1)),
    # ----- pooling, padding, sampling -----
    "avg_pool3d": lambda d, t: library.functional.avg_pool3d(_x(d, t, 1, 1, 4, 4, 4), 2),
    "max_pool3d": lambda d, t: library.functional.max_pool3d(_x(d, t, 1, 1, 4, 4, 4), 2),
    "adaptive_avg_pool3d": lambda d, t: library.functional.adaptive_avg_pool3d(
        _x(d, t, 1, 1, 4, 4, 4), 2),
    "adaptive_max_pool3d": lambda d, t: library.functional.adaptive_max_pool3d(
        _x(d, t, 1, 1, 4, 4, 4), 2),
    "reflection_pad": lambda d, t: library.pad(_x(d, t, 1, 2, 4), (1, 1), mode="reflect"),
    "replication_pad": lambda d, t: library.pad(_x(d, t, 1, 2, 4), (1, 1), mode="replicate"),
    "grid_sample": lambda d, t: _nn().grid_sample(_x(d, t, 1, 1, 4, 4),
                                                  _x(d, t, 1, 2, 2, 2) - 0.5,
                                                  align_corners=False),
    # ----- losses (torcia-nn) -----
    "nll_loss": lambda d, t: _nn().nll_loss(_x(d, t, 2, 3), _idx(d, 0, 2)),
    "cross_entropy": lambda d, t: _nn().cross_entropy(_x(d, t, 2, 3), _idx(d, 0, 2)),
    "mse_loss": lambda d, t: _nn().mse_loss(_x(d, t, 4), _x(d, t, 4) * 2),
    "l1_loss": lambda d, t: _nn().l1_loss(_x(d, t, 4), _x(d, t, 4) * 2),
    "smooth_l1_loss": lambda d, t: _nn().smooth_l1_loss(_x(d, t, 4), _x(d, t, 4) * 2),
    "huber_loss": lambda d, t: _nn().huber_loss(_x(d, t, 4), _x(d, t, 4) * 2),
    "binary_cross_entropy": lambda d, t: _nn().binary_cross_entropy(_x(d, t, 4),
                                                                    _x(d, t, 4)),
    "binary_cross_entropy_with_logits": lambda d, t: _nn().binary_cross_entropy_with_logits(
        _x(d, t, 4), _x(d, t, 4)),
    "kl_div": lambda d, t: _nn().kl_div(_x(d, t, 2, 3).log(), _x(d, t, 2, 3),
                                        reduction="batchmean"),
    "soft_margin_loss": lambda d, t: _nn().soft_margin_loss(_x(d, t, 4), _x(d, t, 4).sign()),
    "poisson_nll_loss": lambda d, t: _nn().poisson_nll_loss(_x(d, t, 4), _x(d, t, 4)),
    "cosine_embedding_loss": lambda d, t: _nn().cosine_embedding_loss(
        _x(d, t, 2, 3), _x(d, t, 2, 3) * 2, _idx(d, 1, -1)),
    "hinge_embedding_loss": lambda d, t: _nn().hinge_embedding_loss(
        _x(d, t, 4), _x(d, t, 4).sign()),
    "margin_ranking_loss": lambda d, t: _nn().margin_ranking_loss(
        _x(d, t, 4), _x(d, t, 4) * 2, _x(d, t, 4).sign()),
    "triplet_margin_loss": lambda d, t: _nn().triplet_margin_loss(
        _x(d, t, 2, 3), _x(d, t, 2, 3) * 2, _x(d, t, 2, 3) * 3),
    "multi_margin_loss": lambda d, t: _nn().multi_margin_loss(_x(d, t, 2, 3), _idx(d, 0, 2)),
    "multilabel_margin_loss": lambda d, t: _nn().multilabel_margin_loss(
        _x(d, t, 2, 3), torcia.tensor([[2, 0, -1], [1, -1, 0]], device=d)),
    "ctc_loss": lambda d, t: _nn().ctc_loss(
        _x(d, t, 4, 1, 3).log_softmax(2), torcia.tensor([[1, 2]], device=d),
        _idx(d, 4), _idx(d, 2)),
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
    # ----- products, convolutions, cells (the low-precision list) -----
    "matmul": lambda d, t: _x(d, t, 2, 3) @ _x(d, t, 3, 2),
    "mm": lambda d, t: torcia.mm(_x(d, t, 2, 3), _x(d, t, 3, 2)),
    "bmm": lambda d, t: torcia.bmm(_x(d, t, 1, 2, 3), _x(d, t, 1, 3, 2)),
    "addmm": lambda d, t: torcia.addmm(_x(d, t, 2, 2), _x(d, t, 2, 3), _x(d, t, 3, 2)),
    "baddbmm": lambda d, t: torcia.baddbmm(_x(d, t, 1, 2, 2), _x(d, t, 1, 2, 3),
                                           _x(d, t, 1, 3, 2)),
    "addbmm": lambda d, t: torcia.addbmm(_x(d, t, 2, 2), _x(d, t, 1, 2, 3),
                                         _x(d, t, 1, 3, 2)),
    "mv": lambda d, t: torcia.mv(_x(d, t, 2, 3), _x(d, t, 3)),
    "addmv": lambda d, t: torcia.addmv(_x(d, t, 2), _x(d, t, 2, 3), _x(d, t, 3)),
    "addr": lambda d, t: torcia.addr(_x(d, t, 2, 3), _x(d, t, 2), _x(d, t, 3)),
    "linear": lambda d, t: library.call("linear", (_x(d, t, 2, 3), _x(d, t, 4, 3), None), {}),
    "einsum": lambda d, t: torcia.einsum("ij,jk->ik", _x(d, t, 2, 3), _x(d, t, 3, 2)),
    "tensordot": lambda d, t: torcia.tensordot(_x(d, t, 2, 3), _x(d, t, 3, 2), dims=1),
    "conv": lambda d, t: library.functional.conv2d(_x(d, t, 1, 2, 4, 4), _x(d, t, 3, 2, 3, 3)),
    "conv_transpose": lambda d, t: library.functional.conv_transpose2d(_x(d, t, 1, 2, 4, 4),
                                                            _x(d, t, 2, 3, 3, 3)),
    "scaled_dot_product_attention": lambda d, t: _nn().scaled_dot_product_attention(
        _x(d, t, 1, 2, 4), _x(d, t, 1, 2, 4), _x(d, t, 1, 2, 4)),
    # the fused LSTM cell op (gates, c) -> (h, c, gates), as torcia.nn.LSTMCell runs it
    "lstm_cell": lambda d, t: library.call("lstm_cell", (_x(d, t, 2, 8), _x(d, t, 2, 2)),
                                           {})[0],
    "chain_matmul": lambda d, t: torcia.chain_matmul(_x(d, t, 2, 3), _x(d, t, 3, 2)),
    "linalg_multi_dot": lambda d, t: torcia.linalg.multi_dot([_x(d, t, 2, 3), _x(d, t, 3, 2)]),
    "linalg_vecdot": lambda d, t: torcia.linalg.vecdot(_x(d, t, 2, 3), _x(d, t, 2, 3)),
    "renorm": lambda d, t: torcia.renorm(_x(d, t, 2, 3), 2, 0, 1.0),
    "conv_tbc": lambda d, t: torcia.conv_tbc(_x(d, t, 4, 1, 2), _x(d, t, 2, 2, 3),
                                             _x(d, t, 3)),
    # the RNN cells of torch's level (hx cast too, so the result is in the low dtype)
    "gru_cell": lambda d, t: torcia.gru_cell(_x(d, t, 2, 3), _x(d, t, 2, 4), _x(d, t, 12, 3),
                                             _x(d, t, 12, 4)),
    "rnn_tanh_cell": lambda d, t: torcia.rnn_tanh_cell(_x(d, t, 2, 3), _x(d, t, 2, 4),
                                                       _x(d, t, 4, 3), _x(d, t, 4, 4)),
    "rnn_relu_cell": lambda d, t: torcia.rnn_relu_cell(_x(d, t, 2, 3), _x(d, t, 2, 4),
                                                       _x(d, t, 4, 3), _x(d, t, 4, 4)),
}


def _policy_ops(device, policy):
    return sorted(op for op in CASES if amp.op_policy(device, op) == policy)


def _listed(device):
    return (set(amp.LOWER_PRECISION.get(device, ())) | set(amp.FLOAT32.get(device, ()))
            | set(amp.PROMOTE.get(device, ())) | set(amp.BANNED.get(device, ())))


@pytest.mark.parametrize("device, op", [(d, op) for d in ("cpu", "cuda")
                                        for op in _policy_ops(d, "float32")],
                         indirect=["device"])
def test_float32_list_ops_run_in_float32(device, op):
    with torcia.autocast(device, dtype=LOW):
        out = CASES[op](device, LOW)
    assert out.dtype is torcia.float32, op
    assert out.device.type == device


@pytest.mark.parametrize("device, op", [(d, op) for d in ("cpu", "cuda")
                                        for op in _policy_ops(d, "lower")],
                         indirect=["device"])
def test_lower_precision_list_ops_run_in_the_low_dtype(device, op):
    with torcia.autocast(device, dtype=LOW):
        out = CASES[op](device, torcia.float32)
    assert out.dtype is LOW, op
    assert out.device.type == device


# op -> a call of it on a float32 tensor ``a`` and a low-precision tensor ``b`` (both on the
# same device), whose result autocast gives the wider dtype, float32
PROMOTE_CASES = {
    "cat": lambda a, b: torcia.cat([a, b]),
    "stack": lambda a, b: torcia.stack([a, b]),
    "addcmul": lambda a, b: torcia.addcmul(a, b, b),
    "addcdiv": lambda a, b: torcia.addcdiv(a, b, b),
    "atan2": lambda a, b: torcia.atan2(a, b),
    "dot": lambda a, b: torcia.dot(a, b),
    "tensordot": lambda a, b: torcia.tensordot(a, b, dims=1),
    "index_put": lambda a, b: a.index_put((_idx(a.device, 0),), b[:1]),
    "scatter_add": lambda a, b: a.scatter_add(0, _idx(a.device, 0, 1), b),
    "bilinear": lambda a, b: _nn().bilinear(a.reshape(1, 2), b.reshape(1, 2),
                                            b.reshape(1, 1, 2).expand(3, 2, 2)),
    "cross": lambda a, b: torcia.cross(torcia.cat([a, a[:1]]), torcia.cat([b, b[:1]])),
    "vdot": lambda a, b: torcia.vdot(a, b),
    "grid_sample": lambda a, b: _nn().grid_sample(a.reshape(1, 1, 1, 2),
                                                  (b - 0.5).reshape(1, 1, 1, 2),
                                                  align_corners=False),
}


@pytest.mark.parametrize("device, op", [(d, op) for d in ("cpu", "cuda")
                                        for op in sorted(amp.PROMOTE[d])],
                         indirect=["device"])
def test_promote_list_ops_run_in_the_widest_dtype(device, op):
    with torcia.autocast(device, dtype=LOW):
        out = PROMOTE_CASES[op](_x(device, torcia.float32, 2), _x(device, LOW, 2))
    assert out.dtype is torcia.float32, op
    assert out.device.type == device


@pytest.mark.parametrize("device, op", [(d, op) for d in ("cpu", "cuda")
                                        for op in sorted(amp.BANNED.get(d, ()))],
                         indirect=["device"])
def test_banned_list_ops_raise_inside_autocast_only(device, op):
    with torcia.autocast(device, dtype=LOW):
        with pytest.raises(RuntimeError, match=f"{op} .*unsafe to autocast"):
            CASES[op](device, LOW)
    assert CASES[op](device, LOW).dtype is LOW  # allowed outside


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_every_op_on_the_lists_has_a_case(device):
    # torcia's lists hold only ops torcia has (PyTorch's ops that torcia lacks are listed,
    # and checked to be still missing, in torcia-nn's test_autocast_lists.py)
    promoted = set(amp.PROMOTE[device])
    assert _listed(device) - promoted <= set(CASES), _listed(device) - promoted - set(CASES)
    assert promoted <= set(PROMOTE_CASES), promoted - set(PROMOTE_CASES)


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


def test_the_names_on_the_lists_resolve_to_ops_or_to_autocast_as_names():
    # a name no op declares is one a function takes part under through autocast_as; core's
    # families record theirs as they load, before the function first runs
    amp.check_lists()
    assert {"gru_cell", "linalg_solve", "reflection_pad"} <= _opdef.AUTOCAST_NAMES


def test_a_misspelt_name_on_a_list_is_refused_at_the_first_region(monkeypatch):
    monkeypatch.setattr(_autocast, "_checked", False)
    monkeypatch.setitem(amp.FLOAT32, "cpu", amp.FLOAT32["cpu"] | {"cdistt"})
    refusal = r"autocast's FLOAT32\['cpu'\]: no op named 'cdistt'; similar: .*cdist"
    with pytest.raises(KeyError, match=refusal):
        with torcia.autocast("cpu", dtype=LOW):
            pass
    with pytest.raises(KeyError, match=refusal):
        torcia.set_autocast_enabled("cpu", True)
    assert not torcia.is_autocast_enabled("cpu")  # refused before any state changed
