"""Losses on integer scores raise PyTorch's NotImplementedError (issue #20: cross_entropy
on int64 logits returned an int64 loss)."""

import pytest

import torcia
import torcia.nn as nn
import torcia.nn.functional as F

CASES = [
    (lambda x, t: F.cross_entropy(x, t), (2, 3), "log_softmax_lastdim_kernel_impl"),
    (lambda x, t: F.cross_entropy(x, t), (2, 3, 4), "log_softmax_kernel_impl"),
    (lambda x, t: F.cross_entropy(x, x.float()), (2, 3), "log_softmax_lastdim_kernel_impl"),
    (lambda x, t: F.nll_loss(x, t), (2, 3), "nll_loss_out_frame"),
    (lambda x, t: nn.CrossEntropyLoss()(x, t), (2, 3), "log_softmax_lastdim_kernel_impl"),
]


@pytest.mark.parametrize("fn, shape, kernel", CASES)
@pytest.mark.parametrize("dtype, name", [(torcia.int64, "Long"), (torcia.int32, "Int")])
def test_integer_logits_are_refused(fn, shape, kernel, dtype, name):
    x = torcia.zeros(*shape, dtype=dtype)
    t = torcia.zeros(shape[0], *shape[2:], dtype=torcia.int64)
    with pytest.raises(NotImplementedError, match=f'"{kernel}" not implemented for '
                                                  f"'{name}'"):
        fn(x, t)


@pytest.mark.torch
@pytest.mark.parametrize("fn, shape, kernel", CASES[:4])
def test_same_message_as_pytorch(fn, shape, kernel):
    torch = pytest.importorskip("torch")
    import torch.nn.functional as TF

    x, t = torch.zeros(*shape, dtype=torch.int64), torch.zeros(shape[0], *shape[2:],
                                                               dtype=torch.int64)
    name = "nll_loss" if kernel.startswith("nll") else "cross_entropy"
    target = x.float() if fn is CASES[2][0] else t
    with pytest.raises(NotImplementedError) as ref:
        getattr(TF, name)(x, target)
    with pytest.raises(NotImplementedError) as ours:
        fn(torcia.zeros(*shape, dtype=torcia.int64),
           torcia.zeros(shape[0], *shape[2:], dtype=torcia.int64))
    assert str(ours.value) == str(ref.value)
