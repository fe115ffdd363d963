"""In-place operations: never a silently wrong gradient.

A tensor that a backward formula saved and that is later modified in place makes backward
raise PyTorch's error (version counters); writes that autograd can follow (through views,
into non-leaf tensors) give PyTorch's gradients.
"""

from __future__ import annotations

import numpy as np
import pytest

import torcia

F64 = torcia.float64
MODIFIED = "modified by an inplace operation"


def leaf(values):
    return torcia.tensor(values, dtype=F64, requires_grad=True)


# ----- modified saved tensors raise ----------------------------------------------------------


def test_modified_saved_input_raises():
    x = leaf([1.0, 2.0])
    a = x * 1
    y = a.sin()  # saves a
    a.add_(1)
    with pytest.raises(RuntimeError, match=MODIFIED):
        y.sum().backward()


def test_modified_saved_result_raises():
    # exp saves its result; modifying the result itself must not go unnoticed
    x = leaf([1.0, 2.0])
    y = x.exp()
    y.add_(1)
    with pytest.raises(RuntimeError, match=MODIFIED):
        y.sum().backward()


def test_modified_view_of_saved_tensor_raises():
    x = leaf([1.0, 2.0, 3.0])
    a = x * 1
    y = (a * a).sum()  # saves a
    a[1:].mul_(2)  # a write through a view bumps the base's version
    with pytest.raises(RuntimeError, match=MODIFIED):
        y.backward()


def test_modified_base_of_saved_view_raises():
    x = leaf([1.0, 2.0, 3.0])
    a = x * 1
    v = a[:2]
    y = v.sin().sum()  # saves the view
    a.zero_()
    with pytest.raises(RuntimeError, match=MODIFIED):
        y.backward()


def test_modified_input_of_a_custom_function_raises():
    class Square(torcia.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = leaf([1.0, 2.0])
    a = x * 1
    y = Square.apply(a)
    a.mul_(3)
    with pytest.raises(RuntimeError, match=MODIFIED):
        y.sum().backward()


def test_error_names_the_node_and_versions():
    x = leaf([1.0, 2.0])
    a = x * 1
    y = a.sin()
    a.add_(1)
    with pytest.raises(RuntimeError, match=r"output of SinBackward0, is at version 1; expected "
                                           r"version 0"):
        y.sum().backward()


def test_leaf_modified_under_no_grad_after_use_raises():
    x = leaf([1.0, 2.0])
    y = (x * x).sum()  # saves x
    with torcia.no_grad():
        x.mul_(2)
    with pytest.raises(RuntimeError, match=MODIFIED):
        y.backward()


def test_modifying_a_detached_alias_raises():
    # detach() shares storage and version counter with the saved tensor, as in PyTorch
    x = leaf([1.0, 2.0])
    a = x * 1
    y = a.exp() * a
    a.detach().zero_()
    with pytest.raises(RuntimeError, match=MODIFIED):
        y.sum().backward()


def test_retain_graph_then_modify_raises_on_the_second_pass():
    x = leaf([1.0, 2.0])
    a = x * 1
    y = (a * a).sum()
    y.backward(retain_graph=True)
    a.add_(1)
    with pytest.raises(RuntimeError, match=MODIFIED):
        y.backward()


def test_unsaved_tensor_may_be_modified():
    # add does not save its inputs: changing one afterwards is harmless, as in PyTorch
    x = leaf([1.0, 2.0])
    a = x * 1
    y = a + 1
    a.mul_(5)
    y.sum().backward()
    assert x.grad.tolist() == [1.0, 1.0]


def test_leaf_in_place_errors():
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        x.add_(1)
    with pytest.raises(RuntimeError, match="view of a leaf Variable"):
        x[:1].mul_(2)
    with torcia.no_grad():
        x.add_(1)  # allowed, as in PyTorch (optimizer steps)
    assert x.tolist() == [2.0, 3.0]


# ----- writes that autograd follows ---------------------------------------------------------


def test_in_place_chain_on_non_leaf():
    x = leaf([1.0, 2.0])
    y = x * 2
    y.mul_(y)  # y = (2x)^2
    y.add_(x)
    y.sum().backward()
    assert x.grad.tolist() == [8.0 * 1 + 1, 8.0 * 2 + 1]


def test_setitem_on_non_leaf():
    x, v = leaf([1.0, 2.0, 3.0]), leaf([10.0])
    y = x * 2
    y[1] = v[0] * 3
    (y * y).sum().backward()
    # y = [2, 30, 6]: dx = 2 * y * 2 except where overwritten
    assert x.grad.tolist() == [8.0, 0.0, 24.0]
    assert v.grad.tolist() == [180.0]


def _grads(lib, build, arrays):
    """Gradients of ``build``'s output, or the RuntimeError that backward raised."""
    xs = [lib.tensor(a, requires_grad=True) for a in arrays]
    try:
        build(lib, *xs).backward()
    except RuntimeError as exc:
        return exc
    return [x.grad.numpy() for x in xs]


def _view_write(lib, x, w):
    base = x * 1
    view = base[1:, ::2]
    view.mul_(w)  # CopySlices: base now depends on w
    view.add_(1)
    return (base * base).sum() + (view.exp()).sum()


def _transpose_write(lib, x, w):
    base = x * 2
    base.mT[0].copy_(w)  # overwrite the first column through a transposed view
    return (base * x).sum()


def _setitem_advanced(lib, x, w):
    base = x * x
    base[lib.tensor([0, 2])] = w[:2] * 2
    base[:, 1] += w[2:].sum()
    return (base.sin()).sum()


def _transpose_write_saved(lib, x, w):
    base = x.exp()  # exp saves its output, which the write then changes: an error
    base.mT[0].copy_(w)
    return (base * x).sum()


def _noncontiguous_base_write(lib, x, w):
    base = x.mT * 2  # a computed tensor whose memory is column-major
    base[0].mul_(3)
    base[1:3, 1:3].mul_(w)
    return (base * base).sum()


def _view_then_base_op(lib, x, w):
    base = x * 3
    v = base.view(-1)
    v[3] = w[0, 0]
    return (base * x).sum() + v.sum()


@pytest.mark.parametrize("build", [_view_write, _transpose_write, _transpose_write_saved,
                                   _setitem_advanced, _noncontiguous_base_write,
                                   _view_then_base_op])
def test_writes_through_views_match_torch(build):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal((3, 4)), rng.standard_normal((2, 2))]
    if build in (_transpose_write, _transpose_write_saved):
        arrays[1] = rng.standard_normal(3)
    if build is _setitem_advanced:
        arrays[1] = rng.standard_normal((4, 4))
    theirs = _grads(torch, build, arrays)
    ours = _grads(torcia, build, arrays)
    if isinstance(theirs, Exception):
        assert isinstance(ours, Exception) and MODIFIED in str(ours), ours
        return
    assert not isinstance(ours, Exception), ours
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_version_counter_is_shared_by_views():
    x = torcia.zeros(3)
    v = x[1:]
    before = x._version
    v.add_(1)
    assert x._version == v._version == before + 1


def _retained_after_write(lib, x, w):
    y = x * 2
    y.retain_grad()
    y.mul_(3)  # retain_grad follows the new value; y.grad is the gradient of that
    z = x * 1
    z.retain_grad()
    z[1:].mul_(w[0, 0])  # a write through a view moves the base's retained grad too
    loss = (y * y).sum() + (z * z).sum()
    loss.backward()
    return y.grad, z.grad


def test_retain_grad_follows_in_place_writes_as_in_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal((2, 3)), rng.standard_normal((2, 2))]
    theirs = _retained_after_write(torch, *[torch.tensor(a, requires_grad=True) for a in arrays])
    ours = _retained_after_write(torcia, *[torcia.tensor(a, requires_grad=True) for a in arrays])
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12)


IN_PLACE_METHODS = {
    "add_": lambda L, y, w: y.add_(w), "sub_": lambda L, y, w: y.sub_(w, alpha=2),
    "mul_": lambda L, y, w: y.mul_(w), "div_": lambda L, y, w: y.div_(w),
    "pow_": lambda L, y, w: y.pow_(2), "exp_": lambda L, y, w: y.exp_(),
    "sigmoid_": lambda L, y, w: y.sigmoid_(), "tanh_": lambda L, y, w: y.tanh_(),
    "clamp_": lambda L, y, w: y.clamp_(-0.5, 0.5), "copy_": lambda L, y, w: y.copy_(w),
    "fill_": lambda L, y, w: y.fill_(2.0), "zero_": lambda L, y, w: y.zero_(),
    "masked_fill_": lambda L, y, w: y.masked_fill_(y > 0, 1.0),
    "relu_": lambda L, y, w: y.relu_(), "sqrt_": lambda L, y, w: y.abs_().sqrt_(),
    "neg_": lambda L, y, w: y.neg_(), "addcmul_": lambda L, y, w: y.addcmul_(w, w, value=0.5),
    "lerp_": lambda L, y, w: y.lerp_(w, 0.3),
    "index_add_": lambda L, y, w: y.index_add_(0, L.tensor([1, 0]), w),
    "scatter_": lambda L, y, w: y.scatter_(1, L.tensor([[0], [1]]), w[:, :1]),
    "square_": lambda L, y, w: y.square_(), "reciprocal_": lambda L, y, w: y.reciprocal_(),
    "setitem": lambda L, y, w: y.__setitem__((slice(None), 0), w[:, 0] * 2),
    "+=": lambda L, y, w: y.__iadd__(w), "*=": lambda L, y, w: y.__imul__(w),
}


def _in_place_grads(lib, method, a, b):
    x, w = lib.tensor(a, requires_grad=True), lib.tensor(b, requires_grad=True)
    y = x * 1.5
    IN_PLACE_METHODS[method](lib, y, w)
    (y * y).sum().backward()
    return x.grad.numpy(), (np.zeros_like(b) if w.grad is None else w.grad.numpy())


@pytest.mark.parametrize("method", IN_PLACE_METHODS)
def test_in_place_methods_on_non_leaves_match_torch(method):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 2)) + 2, rng.standard_normal((2, 2)) + 2
    for ours, theirs in zip(_in_place_grads(torcia, method, a, b),
                            _in_place_grads(torch, method, a, b)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12)


def test_integer_beside_a_list_gradient():
    # x[1, :, [0, 4]] has shape (4, 2): the integer beside the list selects first
    x = torcia.arange(60.0, dtype=torcia.float64).reshape(3, 4, 5).requires_grad_()
    w = torcia.arange(8.0, dtype=torcia.float64).reshape(4, 2)
    (x[1, :, [0, 4]] * w).sum().backward()
    expected = np.zeros((3, 4, 5))
    expected[1][:, [0, 4]] = w.numpy()
    np.testing.assert_array_equal(x.grad.numpy(), expected)
    # assigned: the value's gradient comes back in the value's (4, 2) layout
    value = torcia.arange(8.0, dtype=torcia.float64).reshape(4, 2).requires_grad_()
    y = torcia.zeros(3, 4, 5, dtype=torcia.float64)
    y[1, :, [0, 4]] = value
    weight = np.arange(60.0).reshape(3, 4, 5)
    (y * torcia.from_numpy(weight)).sum().backward()
    np.testing.assert_array_equal(value.grad.numpy(), weight[1][:, [0, 4]])
