"""Behaviour that PyTorch libraries rely on and torcia used to get wrong: ops that copy,
attributes on tensors, ``.data``'s own version counter, the scalar-first overloads, float8."""

import copy
import itertools
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import torcia


def _torch():
    """PyTorch where it is installed (the specification), else None."""
    try:
        import torch as real
    except ImportError:
        return None
    return real if getattr(real, "Tensor", None) is not torcia.Tensor else None


# ---------------------------------------------------------------------------------------
# flip and friends copy, as in PyTorch
# ---------------------------------------------------------------------------------------

_COPYING = {
    "flip": lambda m, x, dims: m.flip(x, dims),
    "Tensor.flip": lambda m, x, dims: x.flip(dims),
    "fliplr": lambda m, x, dims: m.fliplr(x),
    "flipud": lambda m, x, dims: m.flipud(x),
    "rot90": lambda m, x, dims: m.rot90(x, 1, [0, 1]),
    "rot90_k2": lambda m, x, dims: m.rot90(x, 2, [0, 1]),
    "rot90_k3": lambda m, x, dims: m.rot90(x, 3, [1, 0]),
    "roll": lambda m, x, dims: m.roll(x, 1, 0),
}


def _inputs():
    """2-d and 3-d tensors, contiguous and not, of a float and an integer dtype, with the
    dims to flip (every subset of the first two, the empty one included)."""
    for shape, dtype, transpose in itertools.product(((3, 4), (2, 3, 2)), ("float32", "int64"),
                                                     (False, True)):
        base = np.arange(int(np.prod(shape))).reshape(shape).astype(dtype)
        if transpose:
            base = base.swapaxes(0, 1)
        for r in range(3):
            for dims in itertools.combinations((0, 1), r):
                yield base, list(dims)


@pytest.mark.parametrize("name", sorted(_COPYING))
def test_flip_family_returns_a_copy(name):
    fn = _COPYING[name]
    real = _torch()
    for array, dims in _inputs():
        x = torcia.tensor(array)
        before = x.clone()
        y = fn(torcia, x, dims)
        y.add_(100)  # a write into the result must not reach the input
        assert torcia.equal(x, before), (name, array.shape, dims)
        if real is not None:
            t = real.tensor(array)
            ty = fn(real, t, dims)
            np.testing.assert_array_equal(fn(torcia, torcia.tensor(array), dims).numpy(),
                                          ty.numpy())
            assert ty.data_ptr() != t.data_ptr()  # the specification: a copy


def test_mixup_pattern_leaves_the_batch_alone():
    # timm's Mixup: x_flipped = x.flip(0).mul_(1 - lam); x.mul_(lam).add_(x_flipped)
    x = torcia.arange(4.0).reshape(2, 2)
    lam = 0.25
    flipped = x.flip(0).mul_(1 - lam)
    x.mul_(lam).add_(flipped)
    # by hand: row0 = 0.25*[0, 1] + 0.75*[2, 3], row1 = 0.25*[2, 3] + 0.75*[0, 1]
    assert x.tolist() == [[1.5, 2.5], [0.5, 1.5]]


# ---------------------------------------------------------------------------------------
# Python attributes on tensors
# ---------------------------------------------------------------------------------------


def test_tensors_accept_new_attributes():
    x = torcia.zeros(2)
    x.note = "kept"
    assert x.note == "kept"
    assert not hasattr(x + 1, "note")  # a result does not inherit them
    del x.note
    assert not hasattr(x, "note")


def test_parameters_accept_new_attributes_and_keep_them_when_copied():
    nn = pytest.importorskip("torcia.nn")
    p = nn.Parameter(torcia.zeros(3))
    p._is_hf_initialized = True  # transformers' from_pretrained
    assert p._is_hf_initialized
    q = copy.deepcopy(p)
    assert q._is_hf_initialized and type(q) is type(p)


def test_as_subclass_does_not_share_attributes():
    class Mine(torcia.Tensor):
        pass

    x = torcia.zeros(2)
    x.tag = 1
    y = x.as_subclass(Mine)
    y.tag = 2
    assert x.tag == 1


# ---------------------------------------------------------------------------------------
# .data has its own version counter
# ---------------------------------------------------------------------------------------


def test_data_has_its_own_version_counter():
    a = torcia.zeros(3)
    a.add_(1)
    assert (a._version, a.data._version) == (1, 0)
    d = a.data
    d.add_(1)
    assert (a._version, d._version) == (1, 1)
    assert a.tolist() == [2.0, 2.0, 2.0]  # the storage is shared
    real = _torch()
    if real is not None:
        t = real.zeros(3)
        t.add_(1)
        td = t.data
        td.add_(1)
        assert (t._version, td._version) == (a._version, d._version)


def test_writes_through_data_do_not_invalidate_saved_tensors():
    # torchdiffeq's dopri5 rescales its tableau through .data after the tensors were used
    pytest.importorskip("torcia.autograd")
    w = torcia.tensor([1.0, 2.0], requires_grad=True)
    x = torcia.tensor([3.0, 4.0])
    y = (w * x).sum()  # saves x for w's gradient
    x.data.mul_(2)  # hidden from autograd, as in PyTorch
    y.backward()
    assert w.grad.tolist() == [6.0, 8.0]  # the saved x, written to through .data
    x2 = torcia.tensor([3.0, 4.0])
    y2 = (w * x2).sum()
    x2.mul_(2)  # a visible write is still caught
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y2.backward()


# ---------------------------------------------------------------------------------------
# PyTorch's deprecated scalar-first overloads
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("op,args,expected", [
    # x = [1, 2], a = [3, 4], b = [2, 8]
    ("addcmul_", (0.5, "a", "b"), [1 + 0.5 * 3 * 2, 2 + 0.5 * 4 * 8]),
    ("addcdiv_", (2, "a", "b"), [1 + 2 * 3 / 2, 2 + 2 * 4 / 8]),
    ("add_", (3, "a"), [1 + 3 * 3, 2 + 3 * 4]),
    ("sub_", (2, "a"), [1 - 2 * 3, 2 - 2 * 4]),
    ("addcmul", (0.5, "a", "b"), [4.0, 18.0]),
    ("add", (3, "a"), [10.0, 14.0]),
])
def test_scalar_first_overloads(op, args, expected):
    def operands():
        return {"a": torcia.tensor([3.0, 4.0]), "b": torcia.tensor([2.0, 8.0])}

    x = torcia.tensor([1.0, 2.0])
    ops = operands()
    with pytest.warns(UserWarning, match=f"This overload of {op.rstrip('_')} is deprecated"):
        out = getattr(x, op)(*[ops.get(a, a) if isinstance(a, str) else a for a in args])
    assert out.tolist() == expected
    if op.endswith("_"):
        assert out is x
    real = _torch()
    if real is not None:
        t = real.tensor([1.0, 2.0])
        tops = {"a": real.tensor([3.0, 4.0]), "b": real.tensor([2.0, 8.0])}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = getattr(t, op)(*[tops.get(a, a) if isinstance(a, str) else a for a in args])
        assert ref.tolist() == expected


def test_scalar_first_overload_wants_a_number():
    x = torcia.zeros(2)
    with pytest.raises(TypeError, match="takes a number first"):
        x.add_(torcia.ones(2), torcia.ones(2))
    with pytest.raises(TypeError):
        x.addcmul_(torcia.ones(2), torcia.ones(2), torcia.ones(2), torcia.ones(2))


# ---------------------------------------------------------------------------------------
# float8
# ---------------------------------------------------------------------------------------

_FLOAT8 = ["float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
           "float8_e8m0fnu"]


@pytest.mark.parametrize("name", _FLOAT8)
def test_float8_dtypes_store_and_convert(name):
    pytest.importorskip("ml_dtypes")
    dt = getattr(torcia, name)
    assert dt.is_floating_point and dt.itemsize == 1
    values = [0.25, 1.0, 1.5, 2.0, 16.0]  # exact in every float8 format with a mantissa
    if name == "float8_e8m0fnu":
        values = [0.25, 1.0, 2.0, 16.0]  # powers of two only
    x = torcia.tensor(values).to(dt)
    assert x.dtype is dt and x.is_floating_point()
    assert x.float().tolist() == values
    with pytest.raises(RuntimeError, match="Promotion for Float8 Types is not supported"):
        torcia.promote_types(dt, torcia.float32)
    assert torcia.promote_types(dt, dt) is dt
    real = _torch()
    if real is not None:
        assert real.tensor(values).to(getattr(real, name)).float().tolist() == values


def test_float8_rounds_as_pytorch():
    pytest.importorskip("ml_dtypes")
    real = _torch()
    if real is None:
        pytest.skip("PyTorch is not installed")
    values = np.random.default_rng(0).standard_normal(200).astype(np.float32) * 50
    for name in ("float8_e4m3fn", "float8_e5m2"):
        ours = torcia.tensor(values).to(getattr(torcia, name)).float().numpy()
        theirs = real.tensor(values).to(getattr(real, name)).float().numpy()
        np.testing.assert_array_equal(ours, theirs)


def test_a_function_is_one_object_under_every_public_name_once_the_protocol_is_on():
    pytest.importorskip("torcia.nn")
    code = textwrap.dedent("""
        import torcia, torcia.nn.functional as F, torcia.library, torcia.serialization
        class Tagged(torcia.Tensor):
            pass
        assert torcia.save is torcia.serialization.save
        assert F.gelu is torcia.library.functional.gelu
        assert type(F.gelu(torcia.ones(2).as_subclass(Tagged))) is Tagged
    """)
    subprocess.run([sys.executable, "-c", code], check=True)
