"""Bad input raises the exception class PyTorch raises, with its message (names of shapes,
dims and dtypes), checked against torch itself where it is installed."""

import numpy as np
import pytest

import torcia

# each case: (lib, x) -> the failing call; x is a float32 tensor of shape (2, 3)
CASES = {
    "view_size": lambda m, x: x.view(4, 2),
    "view_noncontiguous": lambda m, x: x.t().view(6),
    "broadcast": lambda m, x: x + m.ones(3, 2),
    "broadcast_inplace": lambda m, x: x.add_(m.ones(4, 2, 3)),
    "index_range": lambda m, x: x[2],
    "index_range_dim1": lambda m, x: x[:, 3],
    "index_tensor_range": lambda m, x: x[m.tensor([0, 5])],
    "too_many_indices": lambda m, x: x[0, 0, 0],
    "dim_range": lambda m, x: x.sum(2),
    "dim_range_negative": lambda m, x: x.transpose(-3, 0),
    "matmul_shapes": lambda m, x: x @ x,
    "mm_dtype": lambda m, x: m.mm(x, x.t().double()),
    "cat_sizes": lambda m, x: m.cat([x, m.ones(2, 2)]),
    "cat_ndim": lambda m, x: m.cat([x, m.ones(3)]),
    "stack_sizes": lambda m, x: m.stack([x, x.t()]),
    "expand": lambda m, x: x.expand(4, 3),
    "inplace_cast": lambda m, x: m.ones(2, dtype=m.int64).add_(1.5),
    "item_many": lambda m, x: x.item(),
    "bool_many": lambda m, x: bool(x),
    "mean_int": lambda m, x: m.ones(2, dtype=m.int32).mean(),
    "gather_dtype": lambda m, x: x.gather(1, m.zeros(2, 3, dtype=m.int16)),
    "gather_range": lambda m, x: x.gather(1, m.full((2, 3), 3)),
    "split_sizes": lambda m, x: x.split([1, 1], 1),
    "reshape_infer_two": lambda m, x: x.reshape(-1, -1),
    "permute_dup": lambda m, x: x.permute(0, 0),
    "narrow": lambda m, x: x.narrow(1, 2, 2),
    "topk": lambda m, x: x.topk(4),
    "kthvalue": lambda m, x: x.kthvalue(4),
    "bincount": lambda m, x: m.bincount(m.tensor([-1])),
    "masked_fill_mask": lambda m, x: x.masked_fill(x, 0.0),
    "where_cond": lambda m, x: m.where(x, x, x),
    "linalg_square": lambda m, x: m.linalg.inv(x),
    "linalg_int": lambda m, x: m.linalg.det(m.ones(2, 2, dtype=m.int64)),
    "sub_bool": lambda m, x: m.tensor([True]) - m.tensor([True]),
    "len_0d": lambda m, x: len(x.sum()),
    "ragged": lambda m, x: m.tensor([[1, 2], [3]]),
    "int_neg_pow": lambda m, x: m.tensor([2]) ** -1,
    "randint_range": lambda m, x: m.randint(3, 3, (2,)),
    "arange_step": lambda m, x: m.arange(0, 3, 0),
    "multinomial_neg": lambda m, x: m.multinomial(m.tensor([-1.0, 1.0]), 1),
    "dot_1d": lambda m, x: m.dot(x, x),
    "tril_1d": lambda m, x: m.tril(m.ones(3)),
    "scatter_reduce_op": lambda m, x: x.scatter_reduce(0, m.zeros(1, 3, dtype=m.int64), x,
                                                       "median"),
    # a product's operand that is no tensor is named (it used to be an AttributeError)
    "matmul_not_tensor": lambda m, x: m.matmul(x, 3),
    "matmul_list": lambda m, x: m.matmul([[1.0]], x),
    "mm_not_tensor": lambda m, x: m.mm(3, x),
    "bmm_not_tensor": lambda m, x: m.bmm(x, 3),
    "dot_not_tensor": lambda m, x: m.dot(m.ones(2), 3),
    "mv_not_tensor": lambda m, x: m.mv(x, [1.0, 2.0, 3.0]),
}
# messages PyTorch words differently in detail; the exception class must still match
CLASS_ONLY = {"bool_many", "where_cond", "linalg_int", "len_0d", "randint_range",
              "arange_step", "multinomial_neg", "tril_1d", "dim_range_negative", "mm_dtype",
              "index_tensor_range", "gather_dtype", "gather_range", "permute_dup",
              "split_sizes", "broadcast_inplace", "expand", "scatter_reduce_op", "dot_1d",
              "masked_fill_mask", "bincount", "reshape_infer_two", "cat_ndim", "mean_int",
              "inplace_cast", "kthvalue", "topk", "sub_bool", "ragged", "int_neg_pow"}


def _raise(lib, case):
    x = lib.ones(2, 3)
    with pytest.raises(Exception) as info:
        CASES[case](lib, x)
    return info.value


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_raises(case):
    exc = _raise(torcia, case)
    assert isinstance(exc, (RuntimeError, IndexError, TypeError, ValueError))
    assert str(exc)


def _torch_class(exc):
    # torch's LinAlgError and friends subclass RuntimeError; compare the builtin base
    for base in (IndexError, TypeError, ValueError, RuntimeError):
        if isinstance(exc, base):
            return base
    return type(exc)


@pytest.mark.torch
@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_matches_torch(case):
    torch = pytest.importorskip("torch")
    ours, theirs = _raise(torcia, case), _raise(torch, case)
    assert _torch_class(ours) is _torch_class(theirs), (ours, theirs)
    if case not in CLASS_ONLY:
        assert str(ours) == str(theirs).replace("torch.", "torcia.").split("\n")[0]


def test_messages_name_shapes_and_dims():
    x = torcia.ones(2, 3)
    with pytest.raises(RuntimeError, match=r"\(2x3 and 2x3\)"):
        x @ x
    with pytest.raises(IndexError, match="dimension 1 with size 3"):
        x[:, 3]
    with pytest.raises(RuntimeError, match=r"shape '\[4, 2\]' is invalid for input of size 6"):
        x.view(4, 2)
    np.testing.assert_array_equal(x.numpy(), np.ones((2, 3)))
