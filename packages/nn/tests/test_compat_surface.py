"""The nn names added for PyTorch parity: memory-format conversion, the corners of the
functional pools and feature dropout that PyTorch accepts, parameters_to_vector on a
tensor, init.sparse with no zeros."""

import warnings

import numpy as np
import pytest

import torcia
import torcia.nn.functional as F
from torcia import nn

RNG = np.random.default_rng(0)


@pytest.mark.parametrize("convert, kinds", [
    (nn.utils.convert_conv2d_weight_memory_format,
     (nn.Conv2d(2, 3, 3), nn.ConvTranspose2d(3, 2, 2))),
    (nn.utils.convert_conv3d_weight_memory_format,
     (nn.Conv3d(2, 3, 3), nn.ConvTranspose3d(3, 2, 2))),
])
def test_convert_weight_memory_format_copies_conv_weights_only(convert, kinds):
    net = nn.Sequential(nn.Sequential(*kinds), nn.Linear(2, 2))
    weights = [m.weight for m in kinds]
    old_data = [w.data for w in weights]
    values = [w.detach().clone() for w in weights]
    linear_data = net[1].weight.data
    assert convert(net, None) is net
    for m, w, old, v in zip(kinds, weights, old_data, values):
        assert m.weight is w and isinstance(m.weight, nn.Parameter)
        assert torcia.equal(m.weight, v)
        # a fresh copy: writing the old storage no longer reaches the weight
        old.add_(1)
        assert torcia.equal(m.weight, v)
    # other layers keep their storage
    linear_data.zero_()
    assert (net[1].weight == 0).all()


def test_adaptive_avg_pool2d_global_on_any_rank_is_the_mean():
    x = torcia.from_numpy(RNG.standard_normal((3, 4)))
    out = F.adaptive_avg_pool2d(x, 1)
    assert out.shape == (1, 1)
    np.testing.assert_allclose(out.item(), x.numpy().mean())
    assert F.adaptive_avg_pool2d(torcia.ones(2, 2, 2, 3, 4), (1, 1)).shape == (2, 2, 2, 1, 1)


def test_adaptive_max_pool_to_zero_size_is_empty():
    x = torcia.ones(3, 4)
    assert F.adaptive_max_pool1d(x, 0).shape == (3, 0)
    values, indices = F.adaptive_max_pool1d_with_indices(x, 0)
    assert values.shape == (3, 0) and indices.dtype is torcia.int64
    with pytest.raises(RuntimeError, match="non-zero size"):
        F.adaptive_max_pool1d(x, -1)


def test_dropout3d_on_other_ranks_drops_rows_of_dim_0_with_a_warning():
    torcia.manual_seed(0)
    with pytest.warns(UserWarning, match="Received a 2-D input to dropout3d"):
        out = F.dropout3d(torcia.ones(50, 4), 0.5)
    rows = out.numpy()
    # one draw per row: each row all 0 or all 2
    assert set(np.unique(rows)) <= {0.0, 2.0}
    assert (rows.min(1) == rows.max(1)).all()
    assert 0 < (rows[:, 0] == 0).sum() < 50
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert F.dropout3d(torcia.ones(2, 3, 1, 2, 2), 0.5).shape == (2, 3, 1, 2, 2)


def test_dropout3d_matches_torch_pattern_of_unbatched_input():
    torch = pytest.importorskip("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = torch.nn.functional.dropout3d(torch.ones(6, 5), 0.0)
        ours = F.dropout3d(torcia.ones(6, 5), 0.0)
    assert tuple(ours.shape) == tuple(theirs.shape)


def test_parameters_to_vector_of_a_tensor_iterates_its_rows():
    a = torcia.arange(6.0).reshape(2, 3)
    assert nn.utils.parameters_to_vector(a).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def test_init_sparse_with_no_zeros_keeps_every_entry():
    w = torcia.empty(4, 3)
    with pytest.warns(FutureWarning, match="sparse_"):
        nn.init.sparse(w, 0)
    assert (w != 0).all()
    assert int((nn.init.sparse_(torcia.empty(10, 2), 0.3) == 0).sum()) == 6


def _rand(shape, seed=0):
    return np.random.default_rng(seed).uniform(0.1, 1.0, shape)


def test_lp_pool3d_and_max_unpool3d_match_torch():
    torch = pytest.importorskip("torch")
    x = _rand((2, 3, 4, 4, 6))
    ours = F.lp_pool3d(torcia.from_numpy(x), 2, (2, 2, 3))
    theirs = torch.nn.functional.lp_pool3d(torch.from_numpy(x), 2, (2, 2, 3))
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12)
    y, i = torch.nn.functional.max_pool3d(torch.from_numpy(x), 2, return_indices=True)
    ours = nn.MaxUnpool3d(2)(torcia.from_numpy(y.numpy()), torcia.from_numpy(i.numpy()))
    np.testing.assert_array_equal(ours.numpy(), torch.nn.MaxUnpool3d(2)(y, i).numpy())
    assert nn.LPPool3d(2, 2)(torcia.from_numpy(x)).shape == (2, 3, 2, 2, 3)


def test_lp_pool3d_and_conv_tbc_gradients():
    x = torcia.from_numpy(_rand((1, 2, 2, 2, 4))).requires_grad_()
    assert torcia.autograd.gradcheck(lambda t: F.lp_pool3d(t, 3, (2, 2, 2)), (x,))
    inp = torcia.from_numpy(_rand((5, 2, 3), 1)).requires_grad_()
    w = torcia.from_numpy(_rand((2, 3, 4), 2)).requires_grad_()
    b = torcia.from_numpy(_rand(4, 3)).requires_grad_()
    assert torcia.autograd.gradcheck(lambda i, w, b: F.conv_tbc(i, w, b, 1), (inp, w, b))


def test_conv_tbc_matches_torch_and_checks_shapes():
    torch = pytest.importorskip("torch")
    x, w, b = _rand((6, 2, 3)), _rand((3, 3, 4), 1), _rand(4, 2)
    ours = F.conv_tbc(torcia.from_numpy(x), torcia.from_numpy(w), torcia.from_numpy(b), 1)
    theirs = torch.conv_tbc(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), 1)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12)
    with pytest.raises(RuntimeError, match="Input dim 2 \\(input channels\\) is not == dim 1"):
        F.conv_tbc(torcia.ones(4, 1, 2), torcia.ones(1, 3, 1), torcia.ones(1))


def test_argument_helpers():
    F.assert_int_or_pair(3, "k", "{} bad")
    with pytest.raises(AssertionError, match="k bad"):
        F.assert_int_or_pair((1, 2, 3), "k", "{} bad")

    def yes(x, flag=False):
        """Documented."""
        return "yes"

    def no(x, flag=False):
        return "no"

    fn = F.boolean_dispatch("flag", 1, False, yes, no, "m", "fn")
    assert (fn(0), fn(0, True), fn(0, flag=True)) == ("no", "yes", "yes")
    assert fn.__name__ == "fn" and fn.__module__ == "m" and no.__doc__ == "Documented."
    with pytest.raises(RuntimeError, match="only one function can have a docstring"):
        F.boolean_dispatch("flag", 1, False, yes, yes, "m", "fn")
    assert F.BroadcastingList2[int] is None and F.BroadcastingList1 is F.BroadcastingList3
