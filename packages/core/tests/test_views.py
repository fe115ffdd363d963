"""Views and shape ops: memory sharing, the shared version counter, in-place writes seen
through views, indexing and index assignment, and the errors PyTorch raises."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import torcia


def shares(a, b):
    return np.shares_memory(a.numpy(), b.numpy())


def grid():
    return torcia.arange(12.0).reshape(3, 4)


VIEWS = {
    "view": lambda x: x.view(4, 3),
    "view_infer": lambda x: x.view(-1),
    "reshape_contiguous": lambda x: x.reshape(2, 6),
    "permute": lambda x: x.permute(1, 0),
    "transpose": lambda x: x.transpose(0, 1),
    "t": lambda x: x.t(),
    "mT": lambda x: x.mT,
    "T": lambda x: x.T,
    "squeeze": lambda x: x.unsqueeze(0).squeeze(0),
    "unsqueeze": lambda x: x.unsqueeze(1),
    "expand": lambda x: x[:1].expand(5, 4),
    "expand_as": lambda x: x[:1].expand_as(torcia.zeros(2, 4)),
    "flatten": lambda x: x.flatten(),
    "unflatten": lambda x: x.unflatten(1, (2, 2)),
    "narrow": lambda x: x.narrow(1, 1, 2),
    "unfold": lambda x: x.unfold(1, 2, 1),
    "movedim": lambda x: x.movedim(0, 1),
    "diagonal": lambda x: x.diagonal(),
    "select": lambda x: x.select(1, 2),
    "basic_index": lambda x: x[1:, ::2],
    "int_index": lambda x: x[1],
    "scalar_index": lambda x: x[1, 2],
    "negative_scalar_index": lambda x: x[-1][-2],
    "none_ellipsis": lambda x: x[None, ..., 0],
    "split": lambda x: x.split(1)[1],
    "chunk": lambda x: x.chunk(2, dim=1)[0],
    "unbind": lambda x: x.unbind(0)[2],
    "detach": lambda x: x.detach(),
    "as_strided": lambda x: x.as_strided((2, 2), (4, 1), 1),
}


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_views_share_memory_and_version(name):
    x = grid()
    v = VIEWS[name](x)
    assert shares(x, v)
    assert v._version == x._version
    x.add_(1)  # an in-place op on the base is seen through the view and bumps its version
    assert v._version == x._version == 1
    np.testing.assert_array_equal(v.numpy(), VIEWS[name](grid() + 1).numpy())


@pytest.mark.parametrize("name", ["view", "permute", "narrow", "basic_index", "unflatten",
                                  "select", "diagonal", "int_index", "split", "scalar_index",
                                  "negative_scalar_index"])
def test_writes_through_views_reach_the_base(name):
    x = grid()
    v = VIEWS[name](x)
    v.mul_(0)
    assert v._version == x._version == 1
    expected = grid().numpy().copy()
    VIEWS[name](torcia.from_numpy(expected)).numpy()[...] = 0
    np.testing.assert_array_equal(x.numpy(), expected)


def test_advanced_indexing_copies():
    x = grid()
    for key in ([0, 2], torcia.tensor([0, 2]), x > 5, (slice(None), [1, 3])):
        y = x[key]
        assert not shares(x, y)
        np.testing.assert_array_equal(y.numpy(), x.numpy()[key if not isinstance(
            key, torcia.Tensor) else key.numpy()])


def test_reshape_copies_only_when_it_must():
    x = grid()
    assert shares(x, x.reshape(12))
    y = x.t().reshape(12)
    assert not shares(x, y)
    assert y.tolist() == x.numpy().T.reshape(12).tolist()


def test_view_of_noncontiguous_needs_reshape():
    x = grid().t()
    assert not x.is_contiguous()
    with pytest.raises(RuntimeError, match=r"view size is not compatible with input tensor's "
                                           r"size and stride .* Use \.reshape\(\.\.\.\) instead"):
        x.view(12)
    c = x.contiguous()
    assert c.is_contiguous() and c.stride() == (3, 1)
    assert grid().contiguous() is not None and grid().is_contiguous()


def test_shape_errors():
    x = grid()
    with pytest.raises(RuntimeError, match=r"shape '\[5, 3\]' is invalid for input of size 12"):
        x.view(5, 3)
    with pytest.raises(RuntimeError, match="only one dimension can be inferred"):
        x.view(-1, -1)
    with pytest.raises(RuntimeError, match=r"The expanded size of the tensor \(5\) must match "
                                           r"the existing size \(3\) at non-singleton "
                                           r"dimension 0"):
        x.expand(5, 4)
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of "
                                         r"\[-2, 1\], but got 2\)"):
        x.transpose(0, 2)
    with pytest.raises(RuntimeError, match="t\\(\\) expects a tensor with <= 2 dimensions"):
        torcia.zeros(2, 2, 2).t()
    with pytest.raises(RuntimeError, match="start \\(3\\) \\+ length \\(2\\) exceeds"):
        x.narrow(0, 3, 2)


def test_indexing_errors():
    x = grid()
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 0 with size 3"):
        x[3]
    with pytest.raises(IndexError, match="index 4 is out of bounds for dimension 1 with size 4"):
        x[0, 4]
    with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 0 with size 3"):
        x[torcia.tensor([0, 5])]
    with pytest.raises(IndexError, match="too many indices for tensor of dimension 2"):
        x[0, 0, 0]
    with pytest.raises(IndexError, match="The shape of the mask \\[2\\] at index 0 does not "
                                         "match the shape of the indexed tensor \\[3, 4\\]"):
        x[torcia.tensor([True, False])]
    with pytest.raises(IndexError, match="tensors used as indices must be long"):
        x[torcia.tensor([0.0])]


def test_index_assignment():
    x = torcia.zeros(3, 4)
    x[0] = 1.0
    x[1, 1:3] = torcia.tensor([2.0, 3.0])
    x[:, 3] = torcia.tensor([7, 8, 9])  # cast to x's dtype
    x[x == 0] = -1.0
    x[[2, 2], [0, 1]] = torcia.tensor([5.0, 6.0])
    expected = np.array([[1, 1, 1, 7], [-1, 2, 3, 8], [5, 6, -1, 9]], dtype=np.float32)
    np.testing.assert_array_equal(x.numpy(), expected)
    assert x._version == 5
    v = x[1]
    v[...] = 0
    assert (x[1] == 0).all() and x._version == 6


def test_masked_fill_and_where():
    x = grid()
    m = x > 6
    np.testing.assert_array_equal(x.masked_fill(m, -1).numpy(),
                                  np.where(m.numpy(), -1, x.numpy()))
    y = x.clone()
    y.masked_fill_(m, 0.5)
    assert y[2, 3].item() == 0.5 and y[0, 0].item() == 0
    assert torcia.where(m, x, torcia.zeros(())).tolist() == np.where(m.numpy(), x.numpy(),
                                                                      0).tolist()
    assert torcia.where(m, 1.0, 0.0).dtype is torcia.float32
    assert torcia.where(m, 1, 0).dtype is torcia.int64
    with pytest.raises(RuntimeError, match="masked_fill_ only supports boolean masks"):
        x.masked_fill(x, 0)
    rows, cols = torcia.where(m)
    assert rows.tolist() == [1, 2, 2, 2, 2] and cols.tolist() == [3, 0, 1, 2, 3]


def test_expanded_view_refuses_in_place_write():
    e = torcia.zeros(1, 3).expand(2, 3)
    assert e.stride() == (0, 1)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        e.add_(1)


def test_squeeze_unsqueeze_and_friends():
    x = torcia.zeros(1, 3, 1)
    assert x.squeeze().shape == (3,)
    assert x.squeeze(0).shape == (3, 1)
    assert x.squeeze((0, 2)).shape == (3,)
    assert x.squeeze(1).shape == (1, 3, 1)  # a dim that is not 1 stays
    assert x.unsqueeze(-1).shape == (1, 3, 1, 1)
    assert torcia.zeros(2, 3, 4).movedim((0, 1), (2, 0)).shape == (3, 4, 2)
    assert torcia.zeros(2, 3, 4).flatten(1).shape == (2, 12)
    assert torcia.zeros(2, 3, 4).permute(2, 0, 1).shape == (4, 2, 3)
    assert torcia.arange(7).unfold(0, 3, 2).tolist() == [[0, 1, 2], [2, 3, 4], [4, 5, 6]]


@pytest.mark.torch
def test_indexing_matches_torch():
    torch = pytest.importorskip("torch")
    base = np.arange(60.0, dtype=np.float32).reshape(3, 4, 5)
    keys = [
        (1,), (slice(None), 2), (Ellipsis, 1), (None, 1, slice(1, 3)), (slice(None, None, 2),),
        ([0, 2],), (slice(None), [1, 3], [0, 4]), ([[0], [2]], [1, 3]), (-1, -2, -3),
        (slice(1, None), None, Ellipsis, [0, 0, 1]),
    ]
    for key in keys:
        ours = torcia.from_numpy(base.copy())[key]
        theirs = torch.from_numpy(base.copy())[key]
        assert tuple(ours.shape) == tuple(theirs.shape), key
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    mask = base > 30
    np.testing.assert_array_equal(torcia.from_numpy(base)[torcia.from_numpy(mask)].numpy(),
                                  torch.from_numpy(base)[torch.from_numpy(mask)].numpy())


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_permute_reshape_property(data):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=4, max_side=4))
    arr = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    order = data.draw(st.permutations(range(len(shape))))
    x = torcia.from_numpy(arr).permute(*order)
    expected = arr.transpose(order)
    np.testing.assert_array_equal(x.numpy(), expected)
    assert shares(x, torcia.from_numpy(arr))
    flat = x.reshape(-1)
    np.testing.assert_array_equal(flat.numpy(), expected.reshape(-1))
    # a reshape shares memory exactly when NumPy can do it without a copy
    assert shares(flat, x) == np.shares_memory(expected.reshape(-1), arr)
    if x.is_contiguous():
        np.testing.assert_array_equal(x.view(-1).numpy(), expected.reshape(-1))
    else:
        with pytest.raises(RuntimeError, match="view size is not compatible"):
            x.view(-1)


# An integer beside an index list is a basic index in PyTorch: it selects first, and only
# the lists decide where the broadcast dimensions go (NumPy would count it as advanced).
INT_BESIDE_LIST = [
    (1, slice(None), [0, 4]), (1, [0, 1], 2), (1, None, [0, 3]),
    (1, Ellipsis, [0, 4]), (1, [[0], [2]], [0, 4]), ([0, 1], 1, [0, 4]), (2, None, slice(1), [1]),
    ([0, 2], slice(None), 1), (slice(None), 1, [0, 4]), (Ellipsis, 1, [[1, 2]]),
]


def test_integer_beside_a_list_selects_first():
    base = np.arange(60.0).reshape(3, 4, 5)
    x = torcia.from_numpy(base.copy())
    out = x[1, :, [0, 4]]
    assert out.shape == (4, 2)
    np.testing.assert_array_equal(out.numpy(), base[1][:, [0, 4]])
    # the same rule for assignment: the value has the shape of the result, (4, 2)
    value = np.arange(8.0).reshape(4, 2) + 100
    x[1, :, [0, 4]] = torcia.from_numpy(value)
    expected = base.copy()
    expected[1][:, [0, 4]] = value
    np.testing.assert_array_equal(x.numpy(), expected)
    with pytest.raises(RuntimeError, match=r"indexing result of shape \[4, 2\]"):
        x[1, :, [0, 4]] = torcia.zeros(2, 4)


@pytest.mark.torch
@pytest.mark.parametrize("key", INT_BESIDE_LIST, ids=str)
def test_integer_beside_a_list_matches_torch(key):
    torch = pytest.importorskip("torch")
    base = np.arange(60.0).reshape(3, 4, 5)
    ours, theirs = torcia.from_numpy(base.copy()), torch.from_numpy(base.copy())
    assert tuple(ours[key].shape) == tuple(theirs[key].shape)
    np.testing.assert_array_equal(ours[key].numpy(), theirs[key].numpy())
    value = np.random.default_rng(0).random(tuple(theirs[key].shape))
    ours[key] = torcia.from_numpy(value)
    theirs[key] = torch.from_numpy(value)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
