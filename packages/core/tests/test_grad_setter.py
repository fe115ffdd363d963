"""``t.grad = g`` checks the gradient as PyTorch does (issue #20: a (1,)-shaped gradient on a
large parameter reached the native SGD step and crashed it)."""

import pytest

import torcia


@pytest.mark.parametrize("bad, message", [
    (torcia.zeros(1), "attempting to assign a gradient of size '[1]' to a tensor of size '[3]'"),
    (torcia.zeros(2, 3), "attempting to assign a gradient of size '[2, 3]' to a tensor of "
                         "size '[3]'"),
    (torcia.zeros(3, dtype=torcia.float64), "attempting to assign a gradient with dtype "
                                            "'double' to a tensor with grad_dtype 'Float'"),
    (torcia.zeros(3, dtype=torcia.int64), "attempting to assign a gradient with dtype "
                                          "'long int' to a tensor with grad_dtype 'Float'"),
])
def test_mismatched_grad_is_refused(bad, message):
    t = torcia.zeros(3)
    with pytest.raises(RuntimeError) as err:
        t.grad = bad
    assert str(err.value).startswith(message)
    assert t.grad is None


def test_non_tensor_grad_is_a_type_error():
    t = torcia.zeros(3)
    with pytest.raises(TypeError, match="assigned grad expected to be a Tensor or None but "
                                        "got grad of type int"):
        t.grad = 1


def test_matching_grad_and_none_are_accepted():
    t = torcia.zeros(2, 2)
    g = torcia.ones(2, 2)
    t.grad = g
    assert t.grad is g
    t.grad = None
    assert t.grad is None


@pytest.mark.torch
@pytest.mark.parametrize("shape, dtype", [((1,), "float32"), ((3,), "float64"),
                                          ((3,), "int64"), ((3, 1), "float32")])
def test_messages_match_pytorch(shape, dtype):
    torch = pytest.importorskip("torch")
    ours, theirs = torcia.zeros(3), torch.zeros(3)
    with pytest.raises(RuntimeError) as mine:
        ours.grad = torcia.zeros(*shape, dtype=getattr(torcia, dtype))
    with pytest.raises(RuntimeError) as ref:
        theirs.grad = torch.zeros(*shape, dtype=getattr(torch, dtype))
    # PyTorch's dtype message goes on to explain its grad_dtype attribute, which torcia lacks
    assert str(ref.value).startswith(str(mine.value).split(" (defaults")[0])
