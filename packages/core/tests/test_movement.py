"""Joining, splitting, gathering, scattering, padding and rearranging, against hand values,
NumPy and torch."""

import numpy as np
import pytest

import torcia


def test_cat_stack_and_errors():
    a, b = torcia.zeros(1, 2), torcia.ones(2, 2)
    assert torcia.cat([a, b]).tolist() == [[0, 0], [1, 1], [1, 1]]
    assert torcia.cat([a, a], dim=-1).shape == (1, 4)
    assert torcia.cat([torcia.tensor([1]), torcia.tensor([2.5])]).dtype is torcia.float32
    assert torcia.cat([torcia.zeros(0), b]).shape == (2, 2)  # legacy empty 1-D is skipped
    assert torcia.stack([a, a], dim=1).shape == (1, 2, 2)
    assert torcia.stack([torcia.tensor(1), torcia.tensor(2)]).tolist() == [1, 2]
    assert torcia.hstack([torcia.ones(2), torcia.zeros(1)]).tolist() == [1, 1, 0]
    assert torcia.vstack([torcia.ones(2), torcia.zeros(2)]).shape == (2, 2)
    with pytest.raises(RuntimeError, match="Sizes of tensors must match except in dimension "
                                           "0. Expected size 2 but got size 3 for tensor "
                                           "number 1 in the list."):
        torcia.cat([a, torcia.ones(1, 3)])
    with pytest.raises(RuntimeError, match=r"stack expects each tensor to be equal size, but "
                                           r"got \[1, 2\] at entry 0 and \[2, 2\] at entry 1"):
        torcia.stack([a, b])
    with pytest.raises(RuntimeError, match="zero-dimensional tensor"):
        torcia.cat([torcia.tensor(1.0)])


def test_split_chunk_unbind():
    x = torcia.arange(10)
    assert [t.tolist() for t in x.split(4)] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert [len(t) for t in x.split([3, 7])] == [3, 7]
    assert [len(t) for t in x.chunk(3)] == [4, 4, 2]
    assert [len(t) for t in torcia.tensor_split(x, 3)] == [4, 3, 3]
    assert [t.tolist() for t in torcia.arange(4).reshape(2, 2).unbind(1)] == [[0, 2], [1, 3]]
    with pytest.raises(RuntimeError, match="split_with_sizes expects split_sizes to sum "
                                           "exactly to 10"):
        x.split([3, 3])


def test_gather_scatter_family():
    x = torcia.tensor([[1, 2], [3, 4]])
    idx = torcia.tensor([[0, 0], [1, 0]])
    assert torcia.gather(x, 1, idx).tolist() == [[1, 1], [4, 3]]
    z = torcia.zeros(2, 3, dtype=torcia.int64)
    src = torcia.tensor([[5, 6, 7], [8, 9, 10]])
    assert z.scatter(1, torcia.tensor([[2, 0]]), src).tolist() == [[6, 0, 5], [0, 0, 0]]
    assert z.scatter(0, torcia.tensor([[1, 0, 1]]), 3).tolist() == [[0, 3, 0], [3, 0, 3]]
    added = torcia.zeros(3).scatter_add(0, torcia.tensor([0, 0, 2]), torcia.ones(3))
    assert added.tolist() == [2.0, 0.0, 1.0]
    assert torcia.index_select(x, 0, torcia.tensor([1, 1])).tolist() == [[3, 4], [3, 4]]
    assert torcia.zeros(3).index_add(0, torcia.tensor([0, 0]), torcia.tensor([1.0, 2.0]),
                                     alpha=2).tolist() == [6.0, 0.0, 0.0]
    assert torcia.zeros(3).index_copy(0, torcia.tensor([2]), torcia.tensor([9.0])).tolist() \
        == [0.0, 0.0, 9.0]
    assert torcia.take_along_dim(x, torcia.tensor([[1], [0]]), 1).tolist() == [[2], [3]]
    assert torcia.take_along_dim(x, torcia.tensor([3, 0])).tolist() == [4, 1]
    with pytest.raises(RuntimeError, match="index 2 is out of bounds for dimension 1 with "
                                           "size 2"):
        torcia.gather(x, 1, torcia.tensor([[2, 0], [0, 0]]))
    with pytest.raises(RuntimeError, match="gather\\(\\): Expected dtype int32/int64 for "
                                           "index"):
        torcia.gather(x, 1, torcia.tensor([[0.0]]))
    assert torcia.gather(x, 1, idx.int()).tolist() == [[1, 1], [4, 3]]
    y = torcia.zeros(2)
    y.scatter_(0, torcia.tensor([1]), torcia.tensor([4.0]))
    assert y.tolist() == [0.0, 4.0] and y._version == 1


@pytest.mark.parametrize("reduce, include_self, expected", [
    ("sum", True, [12.0, 1.0, 8.0]), ("sum", False, [11.0, 1.0, 7.0]),
    ("prod", True, [30.0, 1.0, 7.0]), ("mean", True, [4.0, 1.0, 4.0]),
    ("mean", False, [5.5, 1.0, 7.0]), ("amax", True, [6.0, 1.0, 7.0]),
    ("amin", False, [5.0, 1.0, 7.0]),
])
def test_scatter_reduce_by_hand(reduce, include_self, expected):
    out = torcia.scatter_reduce(torcia.ones(3), 0, torcia.tensor([0, 0, 2]),
                                torcia.tensor([5.0, 6.0, 7.0]), reduce,
                                include_self=include_self)
    assert out.tolist() == expected


def test_scatter_reduce_integer_mean_and_errors():
    out = torcia.scatter_reduce(torcia.tensor([1, 1, 1]), 0, torcia.tensor([0, 0, 2]),
                                torcia.tensor([5, 6, 7]), "mean")
    assert out.tolist() == [4, 1, 4]  # floor of 12/3 and 8/2, as PyTorch
    with pytest.raises(RuntimeError, match="reduce argument must be either sum, prod, mean, "
                                           "amax or amin"):
        torcia.scatter_reduce(torcia.ones(2), 0, torcia.tensor([0]), torcia.ones(1), "max")



def test_scatter_reduce_of_complex_numbers_refuses_autograd_as_torch():
    pytest.importorskip("torcia.autograd")
    # its gradient formulas are real ones: they gave wrong complex gradients
    x = torcia.tensor([1 + 1j, 2j], requires_grad=True)
    src = torcia.tensor([2 - 1j, 1j])
    with pytest.raises(RuntimeError, match="does not support automatic differentiation for "
                                           "outputs with complex dtype"):
        torcia.scatter_reduce(x, 0, torcia.tensor([0, 0]), src, "prod")
    with torcia.no_grad():
        assert torcia.scatter_reduce(x, 0, torcia.tensor([0, 0]), src, "sum").tolist() == \
            [3 + 1j, 2j]


def test_scatter_and_index_reduce_of_complex_numbers():
    x, idx = torcia.tensor([1 + 1j, 1 + 1j, 1 + 1j]), torcia.tensor([0, 0, 2])
    src = torcia.tensor([2 - 1j, 4 + 3j, 1j])
    # the mean as a true division: ((1+1j) + (2-1j) + (4+3j)) / 3, and (1+1j + 1j) / 2
    out = torcia.scatter_reduce(x, 0, idx, src, "mean")
    np.testing.assert_allclose(out.numpy(), [(7 + 3j) / 3, 1 + 1j, (1 + 2j) / 2], rtol=1e-6)
    out = torcia.scatter_reduce(x, 0, idx, src, "mean", include_self=False)
    np.testing.assert_allclose(out.numpy(), [3 + 1j, 1 + 1j, 1j], rtol=1e-6)
    np.testing.assert_allclose(torcia.index_reduce(x, 0, idx, src, "mean").numpy(),
                               [(7 + 3j) / 3, 1 + 1j, (1 + 2j) / 2], rtol=1e-6)
    # complex numbers have no order, and PyTorch no kernel without the input's values
    for reduce in ("amax", "amin"):
        with pytest.raises(NotImplementedError, match=f"cpu_reduce_{reduce}\" not implemented "
                                                      "for 'ComplexFloat'"):
            torcia.scatter_reduce(x, 0, idx, src, reduce)
        with pytest.raises(NotImplementedError, match="m(ax|in)imum_cpu"):
            torcia.index_reduce(x, 0, idx, src, reduce)
    with pytest.raises(NotImplementedError, match="index_reduce_func_exclude_input_init"):
        torcia.index_reduce(x, 0, idx, src, "prod", include_self=False)

def test_flip_roll_repeat_tile():
    x = torcia.tensor([[1, 2, 3], [4, 5, 6]])
    assert x.flip(0).tolist() == [[4, 5, 6], [1, 2, 3]]
    assert x.flip((0, 1)).tolist() == [[6, 5, 4], [3, 2, 1]]
    assert torcia.fliplr(x).tolist() == [[3, 2, 1], [6, 5, 4]]
    assert x.roll(1, 1).tolist() == [[3, 1, 2], [6, 4, 5]]
    assert x.roll(1).tolist() == [[6, 1, 2], [3, 4, 5]]
    assert x.roll((1, -1), (0, 1)).tolist() == [[5, 6, 4], [2, 3, 1]]
    assert torcia.tensor([1, 2]).repeat(2, 2).tolist() == [[1, 2, 1, 2], [1, 2, 1, 2]]
    assert torcia.tile(torcia.tensor([1, 2]), (2,)).tolist() == [1, 2, 1, 2]
    assert x.repeat_interleave(2, dim=0).shape == (4, 3)
    assert torcia.repeat_interleave(torcia.tensor([1, 2]), torcia.tensor([1, 3])).tolist() == \
        [1, 2, 2, 2]
    assert torcia.repeat_interleave(torcia.tensor([[1, 2], [3, 4]]), 2).tolist() == \
        [1, 1, 2, 2, 3, 3, 4, 4]
    assert torcia.repeat_interleave(torcia.tensor([2, 1])).tolist() == [0, 0, 1]
    with pytest.raises(RuntimeError, match="Number of dimensions of repeat dims can not be "
                                           "smaller"):
        x.repeat(2)


def test_repeat_interleave_checks_output_size_as_torch():
    # it was ignored: a wrong size gave the right-length result without a word
    x = torcia.ones(3)
    assert torcia.repeat_interleave(x, torcia.tensor([1, 2, 3]), output_size=6).shape == (6,)
    with pytest.raises(RuntimeError, match="Invalid output_size, expected 6 but got 5"):
        torcia.repeat_interleave(x, 2, output_size=5)
    with pytest.raises(RuntimeError, match="allocated size does not match required size"):
        torcia.repeat_interleave(x, torcia.tensor([1, 2, 3]), output_size=5)
    with pytest.raises(RuntimeError, match="allocated size does not match required size"):
        torcia.repeat_interleave(torcia.tensor([1, 2]), output_size=4)


@pytest.mark.parametrize(("shape", "repeats", "dim", "size", "expected"),
                         [((3,), 3, None, 6, (6,)), ((2, 4), 4, 1, 9, (2, 9)),
                          ((2, 4), 1, 0, 5, (5, 4)), ((2, 3), 6, None, 7, (7,))])
def test_repeat_interleave_on_meta_takes_the_given_output_size_as_torch(shape, repeats, dim,
                                                                        size, expected):
    x = torcia.empty(*shape, device="meta")
    r = torcia.empty(repeats, dtype=torcia.int64, device="meta")
    out = torcia.repeat_interleave(x, r, dim=dim, output_size=size)
    assert out.shape == expected and out.device.type == "meta"
    with pytest.raises(RuntimeError, match="repeats must have the same size as input"):
        torcia.repeat_interleave(x, torcia.empty(repeats + 2, dtype=torcia.int64,
                                                 device="meta"), dim=dim, output_size=size)
    with pytest.raises(RuntimeError, match="cannot repeat_interleave a meta tensor"):
        torcia.repeat_interleave(x, r, dim=dim)


def test_tril_triu_diag():
    x = torcia.arange(1, 10).reshape(3, 3)
    assert x.tril().tolist() == [[1, 0, 0], [4, 5, 0], [7, 8, 9]]
    assert x.triu(1).tolist() == [[0, 2, 3], [0, 0, 6], [0, 0, 0]]
    assert torcia.diag(x).tolist() == [1, 5, 9]
    assert torcia.diag(x, -1).tolist() == [4, 8]
    assert torcia.diag(torcia.tensor([1, 2]), 1).tolist() == [[0, 1, 0], [0, 0, 2], [0, 0, 0]]
    emb = torcia.diag_embed(torcia.tensor([[1, 2], [3, 4]]))
    assert emb.shape == (2, 2, 2) and emb[1].tolist() == [[3, 0], [0, 4]]
    emb = torcia.diag_embed(torcia.tensor([[1, 2]]), offset=-1, dim1=0, dim2=2)
    assert emb.shape == (3, 1, 3) and emb[:, 0].tolist() == [[0, 0, 0], [1, 0, 0], [0, 2, 0]]
    with pytest.raises(RuntimeError, match="tril: input tensor must have at least 2 dim"):
        torcia.tril(torcia.ones(3))


def test_masked_select():
    x = torcia.tensor([[1, 2], [3, 4]])
    assert torcia.masked_select(x, x > 2).tolist() == [3, 4]
    assert x.masked_select(torcia.tensor([True, False])).tolist() == [1, 3]  # broadcast
    with pytest.raises(RuntimeError, match="The size of tensor a \\(2\\) must match the size "
                                           "of tensor b \\(3\\)"):
        torcia.masked_select(x, torcia.ones(3, dtype=torcia.bool))


@pytest.mark.parametrize("mode, pad, expected", [
    ("constant", (1, 2), [[0, 1, 2, 3, 0, 0], [0, 4, 5, 6, 0, 0]]),
    ("constant", (-1, 0), [[2, 3], [5, 6]]),
    ("reflect", (2, 1), [[3, 2, 1, 2, 3, 2], [6, 5, 4, 5, 6, 5]]),
    ("replicate", (1, 2), [[1, 1, 2, 3, 3, 3], [4, 4, 5, 6, 6, 6]]),
    ("circular", (1, 1), [[3, 1, 2, 3, 1], [6, 4, 5, 6, 4]]),
])
def test_pad_last_dim(mode, pad, expected):
    from torcia._ops.movement import pad as pad_fn

    x = torcia.tensor([[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]])
    assert pad_fn(x, pad, mode=mode)[0].tolist() == expected


def test_pad_two_dims_and_errors():
    from torcia._ops.movement import pad

    x = torcia.ones(1, 1, 2, 2)
    y = pad(x, (1, 0, 0, 2), value=5.0)  # last dim (1, 0), then dim 2 (0, 2)
    assert y.shape == (1, 1, 4, 3) and y[0, 0, 3].tolist() == [5, 5, 5]
    with pytest.raises(RuntimeError, match="Padding length must be divisible by 2"):
        pad(x, (1,))
    with pytest.raises(RuntimeError, match=r"Padding size should be less than the corresponding "
                                           r"input dimension, but got: padding \(2, 2\) at "
                                           r"dimension 3 of input \[1, 1, 2, 2\]"):
        pad(x, (2, 2), mode="reflect")


@pytest.mark.torch
def test_pad_matches_torch():
    torch = pytest.importorskip("torch")
    from torcia._ops.movement import pad

    data = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    for mode in ("constant", "reflect", "replicate", "circular"):
        # PyTorch pads the last dim of 3-D inputs, the last two of 4-D ones
        for x, p in ((data[0], (1, 2)), (data, (2, 1, 1, 3)), (data, (0, 3, 2, 0))):
            ours = pad(torcia.from_numpy(x), p, mode=mode)
            theirs = torch.nn.functional.pad(torch.from_numpy(x), p, mode=mode)
            np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


@pytest.mark.torch
def test_movement_matches_torch(torch_parity):
    rng = np.random.default_rng(1)
    data = rng.normal(size=(4, 5)).astype(np.float32)
    index = rng.integers(0, 4, size=(3, 5))
    cases = [
        lambda m, x, i: m.gather(x, 0, i),
        lambda m, x, i: m.scatter_add(x, 0, i, x[:3]),
        lambda m, x, i: m.scatter_reduce(x, 0, i, x[:3], "amax", include_self=False),
        lambda m, x, i: m.scatter_reduce(x, 0, i, x[:3], "mean"),
        lambda m, x, i: m.index_add(x, 0, i[0, :2], x[:2]),
        lambda m, x, i: m.roll(x, (2, -1), (0, 1)),
        lambda m, x, i: m.repeat_interleave(x, 2, dim=1),
        lambda m, x, i: m.diag_embed(x, 1, 0, 2),
        lambda m, x, i: m.tril(x, -1),
        lambda m, x, i: m.take_along_dim(x, i, 0),
    ]
    torch_parity(cases, data, index)
