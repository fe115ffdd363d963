"""``torcia.testing.assert_close``: PyTorch's default tolerances by dtype and its messages."""

import math

import numpy as np
import pytest

import torcia
from torcia.testing import assert_close, default_tolerances


@pytest.mark.parametrize("dtype, tol", [
    (torcia.float16, (1e-3, 1e-5)), (torcia.bfloat16, (1.6e-2, 1e-5)),
    (torcia.float32, (1.3e-6, 1e-5)), (torcia.float64, (1e-7, 1e-7)),
    (torcia.int64, (0.0, 0.0)), (torcia.uint8, (0.0, 0.0)), (torcia.bool, (0.0, 0.0)),
])
def test_default_tolerances(dtype, tol):
    assert default_tolerances(dtype) == tol


@pytest.mark.parametrize("dtype, inside, outside", [
    # |a - e| <= atol + rtol * |e| at e = 1
    (torcia.float32, 1e-5, 3e-5), (torcia.float64, 1.5e-7, 5e-7),
    (torcia.float16, 9e-4, 3e-3),
])
def test_tolerance_edges(dtype, inside, outside):
    assert_close(torcia.tensor([1.0 + inside], dtype=dtype), torcia.tensor([1.0], dtype=dtype))
    with pytest.raises(AssertionError):
        assert_close(torcia.tensor([1.0 + outside], dtype=dtype),
                     torcia.tensor([1.0], dtype=dtype))


def test_integers_are_exact():
    assert_close(torcia.tensor([1, 2]), torcia.tensor([1, 2]))
    with pytest.raises(AssertionError, match="Tensor-likes are not equal!"):
        assert_close(torcia.tensor([1, 2]), torcia.tensor([1, 3]))


def test_mismatch_message():
    with pytest.raises(AssertionError) as info:
        assert_close(torcia.tensor([[1.0, 2.0], [3.0, 4.0]]),
                     torcia.tensor([[1.0, 2.0], [3.0, 5.0]]))
    assert str(info.value) == (
        "Tensor-likes are not close!\n\n"
        "Mismatched elements: 1 / 4 (25.0%)\n"
        "Greatest absolute difference: 1.0 at index (1, 1) (up to 1e-05 allowed)\n"
        "Greatest relative difference: 0.20000000298023224 at index (1, 1) "
        "(up to 1.3e-06 allowed)")


def test_shape_dtype_device_and_nan():
    with pytest.raises(AssertionError, match=r"'shape' do not match: torcia.Size\(\[2\]\) != "):
        assert_close(torcia.zeros(2), torcia.zeros(3))
    with pytest.raises(AssertionError, match="'dtype' do not match: torcia.float32 != "
                                             "torcia.float64"):
        assert_close(torcia.zeros(2), torcia.zeros(2, dtype=torcia.float64))
    assert_close(torcia.zeros(2), torcia.zeros(2, dtype=torcia.float64), check_dtype=False)
    nan = torcia.tensor([math.nan])
    with pytest.raises(AssertionError):
        assert_close(nan, nan)
    assert_close(nan, nan, equal_nan=True)
    inf = torcia.tensor([math.inf])
    assert_close(inf, inf)
    with pytest.raises(AssertionError):
        assert_close(inf, -inf)


def test_containers_scalars_and_msg():
    assert_close([torcia.ones(2), {"a": 1.0}], [torcia.ones(2), {"a": 1.0}])
    with pytest.raises(AssertionError, match=r"The failure occurred for item \[1\]\['a'\]"):
        assert_close([torcia.ones(2), {"a": 1.0}], [torcia.ones(2), {"a": 2.0}])
    with pytest.raises(AssertionError, match="length of the sequences mismatch: 1 != 2"):
        assert_close([1], [1, 2])
    with pytest.raises(AssertionError, match="^custom$"):
        assert_close(torcia.ones(1), torcia.zeros(1), msg="custom")
    with pytest.raises(AssertionError, match="^X"):
        assert_close(torcia.ones(1), torcia.zeros(1), msg=lambda m: "X" + m)
    with pytest.raises(TypeError, match="No comparison pair"):
        assert_close(torcia.ones(1), 1.0)
    with pytest.raises(ValueError, match="no atol"):
        assert_close(torcia.ones(1), torcia.ones(1), rtol=0.1)
    assert_close(torcia.tensor([1.0]), torcia.tensor([1.05]), rtol=0.1, atol=0.0)
    assert_close(np.ones(2), np.ones(2))


@pytest.mark.torch
def test_messages_match_torch():
    torch = pytest.importorskip("torch")
    cases = [([1.0, 2.0, 3.0], [1.0, 2.1, 3.0]), ([1, 2, 3], [1, 4, 3]), (1.0, 2.0),
             ([math.nan, 1.0], [math.nan, 1.0]), ([0.0], [1.0]), ([math.inf], [-math.inf]),
             ([True, False], [True, True]), (3, 5), ([1.0, 2.0], [0.0, 2.0])]
    for a, e in cases:
        messages = []
        for lib, fn in ((torcia, assert_close), (torch, torch.testing.assert_close)):
            with pytest.raises(AssertionError) as info:
                fn(lib.tensor(a), lib.tensor(e))
            messages.append(str(info.value).replace("torch.", "torcia."))
        assert messages[0] == messages[1]


def test_hook_serialization_warnings():
    import importlib.util
    import warnings

    from torcia.utils.hooks import unserializable_hook, warn_if_has_hooks

    if importlib.util.find_spec("torcia.autograd") is None:
        pytest.skip("tensor hooks need torcia-autograd")
    t = torcia.ones(2, requires_grad=True)
    t.register_hook(unserializable_hook(lambda g: g))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warn_if_has_hooks(t)
        warn_if_has_hooks(torcia.ones(1))
    assert not caught
    t.register_hook(lambda g: g * 2)
    with pytest.warns(UserWarning, match="will not be serialized"):
        warn_if_has_hooks(t)
