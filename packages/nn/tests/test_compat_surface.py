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
