import numpy as np
import pytest

import torcia
from torcia.amp import GradScaler, autocast

pytest.importorskip("ml_dtypes")


def test_op_output_dtypes_follow_the_cpu_lists():
    a = torcia.randn(3, 3)
    with torcia.autocast("cpu"):
        assert (a @ a).dtype is torcia.bfloat16  # lower precision
        assert torcia.mm(a, a).dtype is torcia.bfloat16
        if hasattr(torcia, "linear") or "linear" in torcia.ops.NN:
            from torcia._tensor import call

            assert call("linear", (a, a, None), {}).dtype is torcia.bfloat16
        assert (a + a).dtype is torcia.float32  # untouched ops keep their inputs' dtype
        low = a.bfloat16()
        assert torcia.cat([a, low]).dtype is torcia.float32  # widest input
        assert low.prod().dtype is torcia.float32  # float32 list
        assert (torcia.ones(2, dtype=torcia.int64) * 2).dtype is torcia.int64
        with autocast("cpu", enabled=False):
            assert (a @ a).dtype is torcia.float32
    assert (a @ a).dtype is torcia.float32 and not torcia.amp.is_autocast_enabled()
    with autocast("cpu", dtype=torcia.float16):
        assert (a @ a).dtype is torcia.float16
    with pytest.raises(ValueError, match="dtype must be"):
        autocast("cpu", dtype=torcia.float64)


def test_gradients_reach_float32_parameters():
    pytest.importorskip("torcia.autograd")
    w = torcia.randn(3, 3, requires_grad=True)
    with torcia.autocast("cpu"):
        (torcia.ones(2, 3) @ w).float().sum().backward()
    assert w.grad.dtype is torcia.float32
    np.testing.assert_allclose(w.grad.numpy(), np.full((3, 3), 2.0))


class _Optimizer:
    """The part of an optimizer GradScaler uses: param_groups and step()."""

    def __init__(self, params):
        self.param_groups = [{"params": params}]
        self.steps = 0

    def step(self):
        self.steps += 1


def test_grad_scaler_skips_inf_steps_and_adapts_the_scale():
    pytest.importorskip("torcia.autograd")
    w = torcia.tensor([1.0, 2.0], requires_grad=True)
    opt = _Optimizer([w])
    scaler = GradScaler(init_scale=8.0, growth_interval=2)
    scaler.scale((w * 3).sum()).backward()
    assert w.grad.tolist() == [24.0, 24.0]
    scaler.step(opt)
    assert w.grad.tolist() == [3.0, 3.0] and opt.steps == 1
    scaler.update()
    w.grad = None
    scaler.scale((w * float("inf")).sum()).backward()
    assert scaler.step(opt) is None and opt.steps == 1  # skipped
    scaler.update()
    assert scaler.get_scale() == 4.0
    for _ in range(2):
        w.grad = None
        scaler.scale(w.sum()).backward()
        scaler.step(opt)
        scaler.update()
    assert scaler.get_scale() == 8.0 and opt.steps == 3
    state = scaler.state_dict()
    fresh = GradScaler()
    fresh.load_state_dict(state)
    assert fresh.get_scale() == 8.0 and fresh.state_dict() == state
    scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="already been called"):
        scaler.unscale_(opt)


def test_custom_fwd_casts_and_custom_bwd_replays_the_state():
    pytest.importorskip("torcia.autograd")
    from torcia.amp import custom_bwd, custom_fwd, is_autocast_available

    seen = {}

    class Scale(torcia.autograd.Function):
        @staticmethod
        @custom_fwd(device_type="cpu", cast_inputs=torcia.float32)
        def forward(ctx, x):
            seen["forward"] = (x.dtype, torcia.amp.is_autocast_enabled("cpu"))
            return x * 3

        @staticmethod
        @custom_bwd(device_type="cpu")
        def backward(ctx, grad):
            seen["backward"] = torcia.amp.is_autocast_enabled("cpu")
            return grad * 3

    x = torcia.ones(2, dtype=torcia.bfloat16, requires_grad=True)
    with torcia.autocast("cpu"):
        y = Scale.apply(x)
    y.sum().backward()
    assert seen == {"forward": (torcia.float32, False), "backward": False}
    assert is_autocast_available("cpu") and not is_autocast_available("xpu")
    with pytest.raises(ValueError, match="device_type"):
        custom_fwd(device_type="tpu")


def test_top_level_autocast_queries():
    assert not torcia.is_autocast_enabled() and not torcia.is_autocast_cpu_enabled()
    with autocast("cpu"):
        assert torcia.is_autocast_enabled("cpu") and torcia.is_autocast_cpu_enabled()
        assert torcia.get_autocast_cpu_dtype() is torcia.bfloat16
        assert torcia.get_autocast_dtype("cpu") is torcia.bfloat16
    assert torcia.get_autocast_gpu_dtype() is torcia.float16
    assert torcia.is_autocast_cache_enabled() is False
    assert torcia.clear_autocast_cache() is None
