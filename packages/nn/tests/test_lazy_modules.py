"""Lazy modules: sizes inferred on the first forward, the eager class afterwards, the
same values as the eager layer under the same seed, optimizers built before keep working,
state dicts load into them; and the placeholders themselves."""

import warnings

import numpy as np
import pytest

import torcia
from torcia import nn
from torcia.nn.parameter import is_lazy

CASES = [
    (lambda: nn.LazyLinear(4), lambda: nn.Linear(3, 4), (2, 3)),
    (lambda: nn.LazyConv1d(4, 3), lambda: nn.Conv1d(2, 4, 3), (2, 2, 6)),
    (lambda: nn.LazyConv2d(4, 3, padding=1, groups=2), lambda: nn.Conv2d(2, 4, 3, padding=1,
                                                                         groups=2),
     (2, 2, 5, 5)),
    (lambda: nn.LazyConv3d(2, 2), lambda: nn.Conv3d(3, 2, 2), (1, 3, 3, 3, 3)),
    (lambda: nn.LazyConvTranspose1d(4, 3, stride=2), lambda: nn.ConvTranspose1d(2, 4, 3,
                                                                                stride=2),
     (2, 2, 5)),
    (lambda: nn.LazyConvTranspose2d(2, 3), lambda: nn.ConvTranspose2d(3, 2, 3), (1, 3, 4, 4)),
    (lambda: nn.LazyConvTranspose3d(2, 2), lambda: nn.ConvTranspose3d(3, 2, 2),
     (1, 3, 2, 2, 2)),
    (lambda: nn.LazyBatchNorm1d(), lambda: nn.BatchNorm1d(3), (4, 3)),
    (lambda: nn.LazyBatchNorm2d(), lambda: nn.BatchNorm2d(3), (4, 3, 2, 2)),
    (lambda: nn.LazyBatchNorm3d(momentum=None), lambda: nn.BatchNorm3d(3, momentum=None),
     (2, 3, 2, 2, 2)),
    (lambda: nn.LazyInstanceNorm1d(affine=True), lambda: nn.InstanceNorm1d(3, affine=True),
     (2, 3, 5)),
    (lambda: nn.LazyInstanceNorm2d(track_running_stats=True),
     lambda: nn.InstanceNorm2d(3, track_running_stats=True), (2, 3, 4, 4)),
    (lambda: nn.LazyInstanceNorm3d(), lambda: nn.InstanceNorm3d(3), (2, 3, 2, 2, 2)),
]


@pytest.mark.parametrize("lazy, eager, shape", CASES, ids=lambda c: getattr(c, "__name__", ""))
def test_lazy_module_becomes_the_eager_one_with_its_values(lazy, eager, shape):
    x = torcia.from_numpy(np.random.default_rng(0).standard_normal(shape).astype(np.float32))
    torcia.manual_seed(0)
    ref = eager()
    torcia.manual_seed(0)
    m = lazy()
    assert m.has_uninitialized_params() or not list(m.parameters())
    out = m(x)
    assert type(m) is type(ref) and not any(is_lazy(p) for p in m.parameters())
    np.testing.assert_allclose(out.detach().numpy(), ref(x).detach().numpy(), rtol=1e-6,
                               atol=1e-6)
    assert m.state_dict().keys() == ref.state_dict().keys()
    for k, v in ref.state_dict().items():
        np.testing.assert_allclose(m.state_dict()[k].numpy(), v.numpy(), rtol=1e-6)
    assert repr(m) == repr(ref)


def test_an_optimizer_built_before_the_first_forward_trains_the_parameters():
    model = nn.Sequential(nn.LazyLinear(8), nn.ReLU(), nn.LazyLinear(1))
    params = list(model.parameters())
    opt = pytest.importorskip("torcia.optim").SGD(params, lr=0.1)
    x, y = torcia.randn(16, 3), torcia.randn(16, 1)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert [p is q for p, q in zip(model.parameters(), params)] == [True] * 4
    assert losses[-1] < losses[0] and model[0].weight.shape == (8, 3)


def test_state_dict_of_the_eager_layer_loads_into_a_lazy_one():
    ref = nn.Conv2d(3, 4, 3)
    lazy = nn.LazyConv2d(4, 3)
    lazy.load_state_dict(ref.state_dict())
    assert not lazy.has_uninitialized_params() and lazy.weight.shape == (4, 3, 3, 3)
    assert torcia.equal(lazy.weight, ref.weight)
    x = torcia.randn(1, 3, 5, 5)
    assert torcia.allclose(lazy(x), ref(x)) and type(lazy) is nn.Conv2d
    bn = nn.LazyBatchNorm1d()
    bn.load_state_dict(nn.BatchNorm1d(6).state_dict())
    assert bn.running_mean.shape == (6,)


def test_conversions_before_the_first_forward_keep_the_placeholders():
    m = nn.LazyLinear(2).double()
    assert is_lazy(m.weight) and m.weight.dtype is torcia.float64
    assert m(torcia.ones(1, 3, dtype=torcia.float64)).dtype is torcia.float64
    bn = nn.LazyBatchNorm2d().double()
    assert is_lazy(bn.running_mean) and bn.running_mean.dtype is torcia.float64
    bn(torcia.randn(2, 3, 2, 2, dtype=torcia.float64))
    assert bn.running_mean.dtype is torcia.float64 and bn.running_mean.shape == (3,)


def test_bad_first_inputs_are_named():
    with pytest.raises(RuntimeError, match=r"Expected 3D \(unbatched\) or 4D \(batched\) "
                                           r"input to LazyConv2d"):
        nn.LazyConv2d(2, 3)(torcia.ones(5, 5))
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nn.LazyConv1d(4, 1, groups=2)(torcia.ones(1, 3, 4))


def test_placeholders():
    p = nn.UninitializedParameter(dtype=torcia.float64)
    assert isinstance(p, nn.Parameter) and is_lazy(p) and p.requires_grad
    with pytest.raises(RuntimeError, match="Can't access the shape of an uninitialized"):
        p.shape  # noqa: B018 - the lookup is what raises
    p.materialize((2, 2))
    assert type(p) is nn.Parameter and p.dtype is torcia.float64 and p.shape == (2, 2)
    b = nn.UninitializedBuffer()
    assert not b.requires_grad and repr(b) == "<UninitializedBuffer>"
    b.materialize(3, dtype=torcia.int64)
    assert type(b) is torcia.Tensor and b.dtype is torcia.int64


def test_lazy_linear_matches_pytorch():
    torch = pytest.importorskip("torch")
    ours, theirs = nn.LazyLinear(3), torch.nn.LazyLinear(3)
    x = np.random.default_rng(1).standard_normal((4, 5)).astype(np.float32)
    ours(torcia.from_numpy(x))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs(torch.from_numpy(x))
    assert type(ours).__name__ == type(theirs).__name__ == "Linear"
    assert tuple(ours.weight.shape) == tuple(theirs.weight.shape)
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict())


def test_factory_kwargs_and_container():
    assert nn.factory_kwargs(None) == {}
    assert nn.factory_kwargs({"dtype": torcia.float16}) == {"dtype": torcia.float16}
    with pytest.raises(TypeError, match="unexpected kwargs"):
        nn.factory_kwargs({"size": 3})
    with pytest.raises(TypeError, match="dtype specified twice"):
        nn.factory_kwargs({"dtype": 1, "factory_kwargs": {"dtype": 2}})
    with pytest.warns(FutureWarning, match="nn.Container is deprecated"):
        c = nn.Container(a=nn.ReLU())
    assert isinstance(c.a, nn.ReLU)
