"""In-place ``name_`` methods: each equals its out-of-place op, writes into the same
storage (seen through views), bumps the shared version counter and keeps self's dtype."""

import numpy as np
import pytest

import torcia
from torcia import _methods, library, ops

UNARY = sorted(set(_methods.INPLACE) & set(ops.UNARY_FLOAT + ops.UNARY_SAME) - {"bitwise_not"})
BINARY = sorted(set(_methods.INPLACE) & set(ops.BINARY + ops.BINARY_FLOAT + ("div",))
                - {"bitwise_and", "bitwise_or", "bitwise_xor"})


def _positive():
    return torcia.tensor([[0.2, 0.5], [0.7, 0.9]], dtype=torcia.float64)


@pytest.mark.parametrize("name", UNARY)
def test_unary_in_place_matches_out_of_place(name):
    base = _positive() + 1 if name == "acosh" else _positive()  # in every op's domain
    view = base[1]
    expected = getattr(base, name)()
    out = getattr(base, name + "_")()
    assert out is base
    np.testing.assert_allclose(base.numpy(), expected.numpy())
    np.testing.assert_allclose(view.numpy(), expected.numpy()[1])
    assert base._version == view._version == 1


@pytest.mark.parametrize("name", BINARY)
def test_binary_in_place_matches_out_of_place(name):
    base = _positive()
    other = torcia.tensor([0.3, 0.6], dtype=torcia.float64)  # broadcast over rows
    expected = getattr(torcia, name)(base, other)
    getattr(base, name + "_")(other)
    np.testing.assert_allclose(base.numpy(), expected.numpy())
    assert base._version == 1


def test_in_place_keeps_dtype_and_casts_within_category():
    x = torcia.tensor([1, 2, 3], dtype=torcia.int32)
    x.mul_(torcia.tensor([2, 2, 2]))  # int64 other: same category, cast back to int32
    assert x.dtype is torcia.int32 and x.tolist() == [2, 4, 6]
    h = torcia.ones(2, dtype=torcia.float16)
    h.add_(torcia.tensor([0.5, 1.5], dtype=torcia.float64))
    assert h.dtype is torcia.float16 and h.tolist() == [1.5, 2.5]
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired "
                                           "output type Int"):
        x.div_(2)
    x.div_(2, rounding_mode="floor")
    assert x.tolist() == [1, 2, 3]


def test_other_in_place_methods():
    x = torcia.arange(6.0).reshape(2, 3)
    x.clamp_(1, 4)
    assert x.tolist() == [[1, 1, 2], [3, 4, 4]]
    x.masked_fill_(x > 3, 0)
    x.index_add_(0, torcia.tensor([1]), torcia.ones(1, 3))
    x.tril_()
    assert x.tolist() == [[1, 0, 0], [4, 1, 0]]
    x.scatter_reduce_(1, torcia.tensor([[2], [2]]), torcia.tensor([[5.0], [6.0]]), "amax")
    assert x.tolist() == [[1, 0, 5], [4, 1, 6]]
    x.cumsum_(1)
    assert x.tolist() == [[1, 1, 6], [4, 5, 11]]
    x.copy_(torcia.tensor([7, 8, 9]))
    assert x.tolist() == [[7, 8, 9], [7, 8, 9]] and x.dtype is torcia.float32
    x.zero_()
    assert x.sum().item() == 0 and x._version == 8


@pytest.mark.parametrize("dtype", [torcia.float16, torcia.float32, torcia.float64,
                                   torcia.bfloat16, torcia.int64])
@pytest.mark.parametrize("op", ["__iadd__", "__isub__", "__imul__", "__itruediv__"])
@pytest.mark.parametrize("other", ["tensor", "float", "int"])
def test_augmented_assignment_matches_out_of_place(op, dtype, other):
    # the operators write a plain same-dtype operand or a float straight into self: the
    # same values, version and refusals as the out-of-place op written back
    base = torcia.tensor([[1.0, 2.0], [3.0, 4.0]]).to(dtype)
    view = base[1]
    operand = {"tensor": torcia.tensor([[2.0, 4.0], [5.0, 8.0]]).to(dtype), "float": 0.3,
               "int": 3}[other]
    try:
        expected = getattr(base, op.replace("__i", "__"))(operand)
        expected = expected.to(dtype) if torcia.can_cast(expected.dtype, dtype) else None
    except RuntimeError:
        expected = None
    if expected is None:
        with pytest.raises(RuntimeError):
            getattr(base, op)(operand)
        assert base._version == 0
        return
    assert getattr(base, op)(operand) is base
    np.testing.assert_array_equal(base.float().numpy(), expected.float().numpy())
    assert base.dtype is dtype and view._version == base._version == 1
    np.testing.assert_array_equal(view.float().numpy(), expected[1].float().numpy())


def test_augmented_assignment_refusals():
    x = torcia.arange(6.0)
    with pytest.raises(RuntimeError, match="single memory location"):
        x[1:] += x[:-1]
    with pytest.raises(RuntimeError, match="more than one element"):
        torcia.ones(1).expand(3).__iadd__(torcia.ones(3))
    with pytest.raises(RuntimeError, match="bool tensors"):
        torcia.ones(2, dtype=torcia.bool).__isub__(torcia.ones(2, dtype=torcia.bool))
    frozen = np.ones(3, np.float32)
    frozen.flags.writeable = False
    with pytest.raises(RuntimeError, match="read-only"):
        torcia.from_numpy(frozen).__imul__(2.0)
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        torcia.ones(3).__iadd__(torcia.ones(2, 3))


def _bits(t):
    a = t.numpy()
    return a.view(f"u{a.itemsize}")


@pytest.mark.parametrize("dtype", [torcia.float32, torcia.float64])
@pytest.mark.parametrize("call", ["add_", "sub_", "mul_", "div_", "add_alpha", "sub_alpha"])
@pytest.mark.parametrize("other", ["tensor", "row", "float", "self"])
def test_arithmetic_inplace_writes_the_out_of_place_bits(call, dtype, other):
    # a.add_(b) writes the kernel's result into a (its out=): the bits of a + b, through
    # views, with the version bumped
    torcia.manual_seed(0)
    base = torcia.randn(6, 5, dtype=dtype)
    view = base[2]
    operand = {"tensor": torcia.randn(6, 5, dtype=dtype), "row": torcia.randn(5, dtype=dtype),
               "float": 0.3, "self": base}[other]
    name, kwargs = (call[:4], {"alpha": 0.7}) if call.endswith("alpha") else (call, {})
    expected = getattr(torcia, name[:-1])(base, operand, **kwargs)
    assert getattr(base, name)(operand, **kwargs) is base
    np.testing.assert_array_equal(_bits(base), _bits(expected))
    np.testing.assert_array_equal(_bits(view), _bits(expected[2]))
    assert base._version == view._version == 1


def test_arithmetic_inplace_on_a_strided_self_and_refusals():
    x = torcia.arange(12.0).reshape(3, 4)
    t = x.t()
    expected = t * 2.5 + 1.0
    t.mul_(2.5).add_(torcia.ones(3))
    np.testing.assert_array_equal(x.t().numpy(), expected.numpy())
    with pytest.raises(RuntimeError, match="single memory location"):
        x[1:].add_(x[:-1])
    with pytest.raises(RuntimeError, match="single memory location"):
        x[1:].sub_(x[:-1], alpha=2.0)
    with pytest.raises(RuntimeError, match="more than one element"):
        torcia.ones(1).expand(3).mul_(torcia.ones(3))
    frozen = np.ones(3, np.float32)
    frozen.flags.writeable = False
    for call in (lambda t: t.add_(torcia.ones(3)), lambda t: t.mul_(2.0),
                 lambda t: t.add_(torcia.ones(3), alpha=2.0)):
        with pytest.raises(RuntimeError, match="read-only"):
            call(torcia.from_numpy(frozen))
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        torcia.ones(3).div_(torcia.ones(2, 3))
    assert x._version == 2


def test_arithmetic_inplace_with_a_kernel_without_out(monkeypatch):
    # a device kernel that does not take out= has its result copied in, as before
    x = torcia.ones(4)
    kernels = x._device.backend.kernels
    monkeypatch.setitem(kernels, "add", lambda a, b: np.add(a, b))
    monkeypatch.setitem(kernels, "mul", lambda a, b, **params: np.multiply(a, b))
    x.add_(torcia.full((4,), 2.0))
    x.mul_(0.5)
    x.add_(x, alpha=3.0)
    assert x.tolist() == [6.0] * 4 and x._version == 3


def test_reference_kernels_take_out():
    a, b = np.array([1.0, 4.0], np.float32), np.array([2.0, 8.0], np.float32)
    div = library.fallback("div", "cpu")
    assert div(a, b, out=a) is a and a.tolist() == [0.5, 0.5]
