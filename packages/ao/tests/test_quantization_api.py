"""The rest of ``torch.ao.quantization``'s public API: debug and reuse observers, the
fused QAT fake quantizer, float-qparams fake quantization, embeddings and 1-D/3-D
convolutions in QAT, qconfig helpers, fusion helpers, affine quantization's vocabulary;
compared with PyTorch where it is installed."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import torcia
from torcia import nn
from torcia.ao import quantization as tq
from torcia.ao.nn import qat as nnqat
from torcia.ao.quantization.fake_quantize import default_embedding_fake_quant

try:
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch 2.13 is not installed")
# torch 2.13 marks its eager quantization deprecated; the comparisons call it on purpose
pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::UserWarning")]

# what torcia leaves out of torch.ao.quantization's names
NOT_COVERED: set = set()

RNG = np.random.default_rng(7)


@needs_torch
def test_every_public_name_of_torch_ao_quantization_is_there():
    names = {n for n in torch.ao.quantization.__all__ if hasattr(torch.ao.quantization, n)}
    missing = sorted(n for n in names - NOT_COVERED if not hasattr(tq, n))
    assert missing == []


def test_the_debug_observer_records_what_it_sees():
    obs = tq.default_debug_observer()
    assert isinstance(obs, tq.RecordingObserver)
    x = torcia.tensor([1.0, 2.0])
    assert obs(x) is x
    x.add_(1)  # a copy was kept, not the tensor
    assert [t.tolist() for t in obs.get_tensor_value()] == [[1.0, 2.0]]
    for observer in (obs, tq.ReuseInputObserver()):
        with pytest.raises(Exception, match="calculate_qparams should not be called"):
            observer.calculate_qparams()


def _sequence(shape, steps=4):
    return [(RNG.standard_normal(shape) * (i + 1)).astype(np.float32) for i in range(steps)]


@needs_torch
@pytest.mark.parametrize("name", ["default_fused_act_fake_quant", "default_fused_wt_fake_quant",
                                  "default_fused_per_channel_wt_fake_quant",
                                  "fused_wt_fake_quant_range_neg_127_to_127",
                                  "fused_per_channel_wt_fake_quant_range_neg_127_to_127"])
def test_the_fused_fake_quantizers_give_torchs_values(name):
    ours = getattr(tq.fake_quantize, name)()
    theirs = getattr(torch.ao.quantization.fake_quantize, name)()
    assert isinstance(ours, tq.FusedMovingAvgObsFakeQuantize)
    for x in _sequence((4, 6)):
        np.testing.assert_allclose(ours(torcia.tensor(x)).numpy(),
                                   theirs(torch.tensor(x)).numpy(), rtol=0, atol=1e-6)
    np.testing.assert_allclose(ours.scale.numpy(), theirs.scale.numpy(), rtol=1e-6)
    assert ours.zero_point.tolist() == theirs.zero_point.tolist()
    assert ours.zero_point.dtype == torcia.int32
    assert ours.fake_quant_enabled.dtype == torcia.int64


@needs_torch
def test_float_qparams_fake_quantization_of_embedding_rows_matches_torch():
    ours, theirs = default_embedding_fake_quant(), \
        torch.ao.quantization.fake_quantize.default_embedding_fake_quant()
    for x in _sequence((5, 3)):
        np.testing.assert_allclose(ours(torcia.tensor(x)).numpy(),
                                   theirs(torch.tensor(x)).numpy(), rtol=0, atol=1e-6)
    assert ours.zero_point.dtype == torcia.float32
    np.testing.assert_allclose(ours.zero_point.numpy(), theirs.zero_point.numpy(), rtol=1e-6)


@needs_torch
def test_the_4bit_float_qparams_observer_matches_torch():
    x = RNG.standard_normal((3, 8)).astype(np.float32)
    ours, theirs = tq.default_float_qparams_observer_4bit(), \
        torch.ao.quantization.default_float_qparams_observer_4bit()
    ours(torcia.tensor(x))
    theirs(torch.tensor(x))
    for a, b in zip(ours.calculate_qparams(), theirs.calculate_qparams(), strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)


@pytest.mark.parametrize(("backend", "version"), [("x86", 0), ("x86", 1), ("qnnpack", 1),
                                                  ("onednn", 1), ("fbgemm", 0)])
def test_default_qat_qconfig_versions_as_torch(backend, version):
    qconfig = tq.get_default_qat_qconfig(backend, version)
    kind = tq.FusedMovingAvgObsFakeQuantize if version == 1 else tq.FakeQuantize
    assert type(qconfig.activation()) is kind and type(qconfig.weight()) is kind
    assert qconfig.activation().quant_max == (127 if backend in ("x86", "fbgemm") else 255)
    if torch is not None:
        theirs = torch.ao.quantization.get_default_qat_qconfig(backend, version)
        assert type(theirs.activation()).__name__ == kind.__name__
        assert theirs.activation().quant_max == qconfig.activation().quant_max
        assert theirs.weight().qscheme.__repr__().split(".")[-1] == \
            repr(qconfig.weight().qscheme).split(".")[-1]
    with pytest.raises(AssertionError, match="Version number must be 0 or 1"):
        tq.get_default_qat_qconfig(backend, 2)


def test_qconfig_equals_compares_factories_by_class_and_arguments():
    assert tq.qconfig_equals(tq.get_default_qconfig("x86"), tq.get_default_qconfig("x86"))
    assert not tq.qconfig_equals(tq.get_default_qconfig("x86"),
                                 tq.get_default_qconfig("qnnpack"))
    assert tq.qconfig_equals(tq.get_default_qat_qconfig(), tq.get_default_qat_qconfig())
    assert not tq.qconfig_equals(tq.get_default_qat_qconfig(version=0),
                                 tq.get_default_qat_qconfig(version=1))
    assert tq.qconfig_equals(None, None) and not tq.qconfig_equals(tq.default_qconfig, None)


def test_qconfig_mapping_regexes_and_dict_form():
    mapping = (tq.QConfigMapping().set_global(tq.default_qconfig)
               .set_object_type(nn.Linear, tq.default_per_channel_qconfig)
               .set_module_name_regex(r"encoder\.layer\d+", None)
               .set_module_name("encoder.layer1", tq.default_dynamic_qconfig))
    linear = nn.Linear(2, 2)
    assert mapping.qconfig_for("encoder.layer1", linear) is tq.default_dynamic_qconfig
    assert mapping.qconfig_for("encoder.layer2", linear) is None
    assert mapping.qconfig_for("head", linear) is tq.default_per_channel_qconfig
    assert mapping.qconfig_for("head", nn.ReLU()) is tq.default_qconfig
    as_dict = mapping.to_dict()
    assert set(as_dict) == {"", "object_type", "module_name_regex", "module_name",
                            "module_name_object_type_order"}
    again = tq.QConfigMapping.from_dict(as_dict)
    assert again.to_dict() == as_dict
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert tq.get_default_qconfig_dict()[""] is not None
        assert tq.get_default_qat_qconfig_dict()[""] is not None
    assert [w.category for w in caught] == [FutureWarning, FutureWarning]


@needs_torch
@pytest.mark.parametrize("granularity", ["PerTensor()", "PerAxis(0)", "PerAxis(2)",
                                         "PerRow()", "PerToken()"])
def test_get_block_size_as_torch(granularity):
    shape = (2, 3, 4)
    ours = tq.get_block_size(shape, eval(f"tq.{granularity}"))
    theirs = torch.ao.quantization.get_block_size(
        shape, eval(f"torch.ao.quantization.{granularity}"))
    assert ours == theirs


def test_get_block_size_groups_and_refusals():
    assert tq.get_block_size((8, 16), tq.PerGroup(4)) == (1, 4)
    with pytest.raises(AssertionError, match="Expecting input shape dim to be 2"):
        tq.get_block_size((2, 8, 16), tq.PerGroup(4))
    with pytest.raises(AssertionError, match="instance of Granularity"):
        tq.get_block_size((2, 3), tq.PerTensor)
    assert tq.PerAxis(1) == tq.PerAxis(1) and hash(tq.PerGroup(2)) == hash(tq.PerGroup(2))


def test_affine_observer_base_is_abstract():
    with pytest.raises(TypeError, match="abstract"):
        tq.AffineQuantizedObserverBase(tq.MappingType.SYMMETRIC, torcia.int8, tq.PerTensor())
    with pytest.raises(AssertionError, match="granularity is None"):
        type("Obs", (tq.AffineQuantizedObserverBase,),
             {"forward": lambda self, x: x, "calculate_qparams": lambda self: None})(
            tq.MappingType.ASYMMETRIC, torcia.uint8, None)


def test_enums_have_torchs_members():
    assert [int(t) for t in tq.QuantType] == [0, 1, 2, 3]
    assert [m.name for m in tq.MappingType] == ["SYMMETRIC", "SYMMETRIC_NO_CLIPPING_ERR",
                                               "ASYMMETRIC"]
    assert [m.name for m in tq.ZeroPointDomain] == ["INT", "FLOAT", "NONE"]
    assert len(tq.TorchAODType) == 7


def _copy_conv(ours, theirs):
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(ours.weight.detach().numpy()))
        theirs.bias.copy_(torch.tensor(ours.bias.detach().numpy()))


@needs_torch
@pytest.mark.parametrize(("kind", "shape", "padding_mode"),
                         [("Conv1d", (2, 3, 9), "zeros"), ("Conv3d", (1, 3, 4, 5, 5), "zeros"),
                          ("Conv2d", (1, 3, 6, 6), "reflect")])
def test_qat_convolutions_match_torch(kind, shape, padding_mode):
    ours = getattr(nnqat, kind)(3, 4, 3, padding=1, padding_mode=padding_mode,
                                qconfig=tq.get_default_qat_qconfig())
    theirs = getattr(torch.ao.nn.qat, kind)(
        3, 4, 3, padding=1, padding_mode=padding_mode,
        qconfig=torch.ao.quantization.get_default_qat_qconfig())
    _copy_conv(ours, theirs)
    x = RNG.standard_normal(shape).astype(np.float32)
    np.testing.assert_allclose(ours(torcia.tensor(x)).detach().numpy(),
                               theirs(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-5)
    back = ours.to_float()
    assert type(back) is getattr(nn, kind) and back.padding_mode == padding_mode


def test_qat_modules_refuse_what_torchs_refuse():
    with pytest.raises(AssertionError, match="qconfig must be provided"):
        nnqat.Conv1d(2, 2, 3)
    with pytest.raises(AssertionError, match="per_channel_affine_float_qparams"):
        nnqat.Embedding(4, 2, qconfig=tq.get_default_qat_qconfig())
    emb = nn.Embedding(4, 2)
    with pytest.raises(AssertionError, match="must have qconfig defined"):
        nnqat.Embedding.from_float(emb)
    with pytest.raises(AssertionError, match="only works for Embedding"):
        nnqat.Embedding.from_float(nn.EmbeddingBag(4, 2))


def _embedding_model(lib):
    class Model(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = lib.nn.EmbeddingBag(12, 4, mode="sum")
            self.lin = lib.nn.Linear(4, 2)

        def forward(self, x):
            return self.lin(self.emb(x))

    return Model()


@needs_torch
def test_embedding_qat_trains_and_converts_as_torchs():
    ours, theirs = _embedding_model(torcia), _embedding_model(torch)
    theirs.load_state_dict({k: torch.tensor(v.numpy()) for k, v in ours.state_dict().items()})
    ours.emb.qconfig = tq.QConfig(activation=tq.NoopObserver.with_args(dtype=torcia.float32),
                                  weight=default_embedding_fake_quant)
    theirs.emb.qconfig = torch.ao.quantization.default_embedding_qat_qconfig
    tq.prepare_qat(ours, mapping=tq.get_embedding_qat_module_mappings(), inplace=True)
    torch.ao.quantization.prepare_qat(
        theirs, mapping=torch.ao.quantization.get_embedding_qat_module_mappings(), inplace=True)
    assert type(ours.emb) is nnqat.EmbeddingBag
    x = RNG.integers(0, 12, (3, 5))
    trained = ours(torcia.tensor(x))
    np.testing.assert_allclose(trained.detach().numpy(),
                               theirs(torch.tensor(x)).detach().numpy(), atol=1e-6)
    trained.sum().backward()
    assert ours.emb.weight.grad is not None
    ours.eval()
    theirs.eval()
    converted = tq.convert(ours, mapping=tq.get_embedding_static_quant_module_mappings())
    their_converted = torch.ao.quantization.convert(
        theirs, mapping=torch.ao.quantization.get_embedding_static_quant_module_mappings())
    np.testing.assert_allclose(converted(torcia.tensor(x)).detach().numpy(),
                               their_converted(torch.tensor(x)).detach().numpy(), atol=1e-5)


def test_mappings_and_propagation_lists_hold_the_embedding_and_sequential_types():
    assert tq.get_embedding_qat_module_mappings()[nn.Embedding] is nnqat.Embedding
    assert tq.get_embedding_static_quant_module_mappings()[nnqat.EmbeddingBag] \
        .__name__ == "EmbeddingBag"
    propagated = tq.get_default_qconfig_propagation_list()
    assert nn.Sequential in propagated and nn.Conv2d in propagated
    assert propagated <= tq.get_default_compare_output_module_list()


def test_fuse_convtranspose_bn_folds_in_eval_and_refuses_qat():
    convt, bn = nn.ConvTranspose1d(3, 4, 3, stride=2).eval(), nn.BatchNorm1d(4).eval()
    bn.running_mean.uniform_(-1, 1)
    bn.running_var.uniform_(0.5, 2)
    x = torcia.randn(2, 3, 7)
    fused = tq.fuse_convtranspose_bn(False, convt, bn)
    np.testing.assert_allclose(fused(x).detach().numpy(), bn(convt(x)).detach().numpy(),
                               atol=1e-5)
    with pytest.raises(Exception, match="not yet supported in QAT"):
        tq.fuse_convtranspose_bn(True, convt, bn)
    with pytest.raises(AssertionError, match="same mode"):
        tq.fuse_convtranspose_bn(False, convt.train(), bn)


def test_get_fuser_method_new_matches_wildcards_most_specific_first():
    mapping = {(nn.ReLU, nn.Conv2d): "exact", (nn.ReLU, tq.MatchAllNode): "any"}
    assert tq.get_fuser_method_new((nn.ReLU, nn.Conv2d), mapping) == "exact"
    assert tq.get_fuser_method_new((nn.ReLU, nn.Linear), mapping) == "any"
    with pytest.raises(AssertionError, match="did not find fuser method"):
        tq.get_fuser_method_new((nn.Tanh, nn.Linear), mapping)


def test_default_eval_fn_calibrates_on_the_inputs():
    seen = []
    tq.default_eval_fn(lambda x: seen.append(x), [(1, "a"), (2, "b")])
    assert seen == [1, 2]


@needs_torch
@pytest.mark.parametrize("namespace", ["intrinsic", "intrinsic.qat", "intrinsic.quantized",
                                       "qat"])
def test_the_fused_and_qat_module_namespaces_have_torchs_classes(namespace):
    import importlib
    theirs = importlib.import_module(f"torch.ao.nn.{namespace}")
    ours = importlib.import_module(f"torcia.ao.nn.{namespace}")
    # FX-only fusions whose quantized kernels torcia does not have
    fx_only = {"LinearLeakyReLU", "LinearTanh", "ConvAdd2d", "ConvAddReLU2d"}
    names = {n for n in dir(theirs) if n[0].isupper() and isinstance(getattr(theirs, n), type)}
    if namespace == "intrinsic.quantized":
        names -= fx_only
    assert sorted(n for n in names if not hasattr(ours, n)) == []


def test_fused_modules_check_the_types_of_their_parts():
    from torcia.ao.nn import intrinsic as nni
    with pytest.raises(AssertionError, match="Incorrect types for input modules"):
        nni.ConvReLU1d(nn.Conv2d(1, 1, 1), nn.ReLU())
    with pytest.raises(AssertionError, match="Incorrect types for input modules"):
        nni.LinearTanh(nn.Linear(1, 1), nn.ReLU())
    m = nni.ConvAddReLU2d(nn.Conv2d(1, 1, 1), torcia.add, nn.ReLU())
    assert m(torcia.ones(1, 1, 2, 2), -10 * torcia.ones(1, 1, 2, 2)).max().item() == 0.0


def _stubbed(lib, nd, relu=True):
    conv = getattr(lib.nn, f"Conv{nd}d")(3, 4, 3, padding=1)
    bn = getattr(lib.nn, f"BatchNorm{nd}d")(4)
    tail = [lib.nn.ReLU()] if relu else []
    return lib.nn.Sequential(lib.ao.quantization.QuantStub(), conv, bn, *tail,
                             lib.ao.quantization.DeQuantStub())


def _same_state(ours, theirs):
    theirs.load_state_dict({k: torch.tensor(v.detach().numpy())
                            for k, v in ours.state_dict().items()})


@needs_torch
@pytest.mark.parametrize(("nd", "relu"), [(1, True), (3, True), (1, False), (3, False)])
def test_post_training_quantization_of_1d_and_3d_conv_bn_relu_matches_torch(nd, relu):
    torcia.manual_seed(nd)
    ours, theirs = _stubbed(torcia, nd, relu), _stubbed(torch, nd, relu)
    with torcia.no_grad():
        ours[2].running_mean.copy_(torcia.randn(4) * 0.3)
        ours[2].running_var.copy_(torcia.rand(4) + 0.5)
    _same_state(ours, theirs)
    names = ["1", "2", "3"] if relu else ["1", "2"]
    ours = tq.fuse_modules(ours.eval(), names)
    theirs = torch.ao.quantization.fuse_modules(theirs.eval(), names)
    assert type(ours[1]).__name__ == type(theirs[1]).__name__
    ours.qconfig = tq.default_per_channel_qconfig
    theirs.qconfig = torch.ao.quantization.default_per_channel_qconfig
    tq.prepare(ours, inplace=True)
    torch.ao.quantization.prepare(theirs, inplace=True)
    shape = (2, 3) + (5,) * nd
    for _ in range(3):
        x = RNG.standard_normal(shape).astype(np.float32)
        ours(torcia.tensor(x))
        theirs(torch.tensor(x))
    tq.convert(ours, inplace=True)
    torch.ao.quantization.convert(theirs, inplace=True)
    assert type(ours[1]).__name__ == type(theirs[1]).__name__
    x = RNG.standard_normal(shape).astype(np.float32)
    got, want = ours(torcia.tensor(x)).numpy(), theirs(torch.tensor(x)).numpy()
    assert ours[1].scale == pytest.approx(theirs[1].scale, rel=1e-6)
    # the same integers: the dequantized values differ by the scale's float32 rounding
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)


@needs_torch
@pytest.mark.parametrize("nd", [1, 3])
def test_quantization_aware_training_of_1d_and_3d_conv_bn_relu_matches_torch(nd):
    torcia.manual_seed(10 + nd)
    ours, theirs = _stubbed(torcia, nd), _stubbed(torch, nd)
    _same_state(ours, theirs)
    ours = tq.fuse_modules_qat(ours.train(), ["1", "2", "3"])
    theirs = torch.ao.quantization.fuse_modules_qat(theirs.train(), ["1", "2", "3"])
    ours.qconfig = tq.get_default_qat_qconfig("x86")
    theirs.qconfig = torch.ao.quantization.get_default_qat_qconfig("x86")
    tq.prepare_qat(ours, inplace=True)
    torch.ao.quantization.prepare_qat(theirs, inplace=True)
    assert type(ours[1]).__name__ == type(theirs[1]).__name__ == f"ConvBnReLU{nd}d"
    shape = (2, 3) + (4,) * nd
    for _ in range(2):
        x = RNG.standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(ours(torcia.tensor(x)).detach().numpy(),
                                   theirs(torch.tensor(x)).detach().numpy(), atol=1e-4)
    ours.apply(tq.fake_quantize.disable_observer)
    ours.eval()
    quantized = tq.convert(ours)
    assert type(quantized[1]).__name__ == f"ConvReLU{nd}d"
    assert quantized(torcia.randn(*shape)).shape == shape[:1] + (4,) + shape[2:]


def test_linear_bn_fuses_for_qat_and_converts_to_a_quantized_linear():
    torcia.manual_seed(3)
    model = nn.Sequential(tq.QuantStub(), nn.Linear(4, 3), nn.BatchNorm1d(3), tq.DeQuantStub())
    model = tq.fuse_modules_qat(model.train(), ["1", "2"])
    model.qconfig = tq.get_default_qat_qconfig("x86")
    tq.prepare_qat(model, inplace=True)
    assert type(model[1]).__name__ == "LinearBn1d"
    for _ in range(3):
        model(torcia.randn(8, 4))
    model.apply(tq.disable_observer)
    model.eval()
    x = torcia.randn(5, 4) * 0.3  # inside the calibrated range, where QAT's clamps agree
    expected = model(x)
    quantized = tq.convert(model)
    assert type(quantized[1]).__name__ == "Linear"
    assert (quantized(x) - expected).abs().max().item() < 0.1


@needs_torch
def test_batch_norm_relu_fuses_and_quantizes_as_torchs():
    def build(lib):
        return lib.nn.Sequential(lib.ao.quantization.QuantStub(), lib.nn.BatchNorm3d(2),
                                 lib.nn.ReLU(), lib.ao.quantization.DeQuantStub())
    ours, theirs = build(torcia), build(torch)
    with torcia.no_grad():
        ours[1].running_mean.copy_(torcia.tensor([0.3, -0.4]))
        ours[1].running_var.copy_(torcia.tensor([1.5, 0.7]))
    _same_state(ours, theirs)
    ours = tq.fuse_modules(ours.eval(), ["1", "2"])
    theirs = torch.ao.quantization.fuse_modules(theirs.eval(), ["1", "2"])
    for model, api in ((ours, tq), (theirs, torch.ao.quantization)):
        model.qconfig = api.default_qconfig
        api.prepare(model, inplace=True)
    x = RNG.standard_normal((2, 2, 3, 3, 3)).astype(np.float32)
    ours(torcia.tensor(x))
    theirs(torch.tensor(x))
    tq.convert(ours, inplace=True)
    torch.ao.quantization.convert(theirs, inplace=True)
    assert type(ours[1]).__name__ == "BNReLU3d"
    got, want = ours(torcia.tensor(x)).numpy(), theirs(torch.tensor(x)).numpy()
    # the same integers: the dequantized values differ by the scale's float32 rounding
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)


def _observer_pair(kind, **kwargs):
    ours = getattr(tq, kind)(**{k: getattr(tq, v) if isinstance(v, str) else v
                                for k, v in kwargs.items()})
    theirs = getattr(torch.ao.quantization, kind)(
        **{k: getattr(torch, v) if isinstance(v, str) else v for k, v in kwargs.items()})
    return ours, theirs


HISTOGRAM_CASES = [
    {}, {"reduce_range": True}, {"qscheme": "per_tensor_symmetric"},
    {"qscheme": "per_tensor_symmetric", "reduce_range": True},
    {"dtype": "qint8", "qscheme": "per_tensor_symmetric"}, {"quant_min": 0, "quant_max": 127},
    {"bins": 256},
]


@needs_torch
@pytest.mark.parametrize("kwargs", HISTOGRAM_CASES, ids=str)
@pytest.mark.parametrize("seed", range(6))
def test_histogram_observer_gives_torchs_histogram_and_parameters(kwargs, seed):
    rng = np.random.default_rng(seed)
    ours, theirs = _observer_pair("HistogramObserver", **kwargs)
    for step in range(1 + seed % 4):
        x = (rng.standard_normal(int(rng.integers(1, 500))) * rng.uniform(0.1, 5)
             + rng.uniform(-1, 1)).astype(np.float32)
        if seed == 4:
            x = np.abs(x)  # one-signed: the range still holds 0
        if seed == 5 and step == 1:
            x[:3] = [np.inf, -np.inf, 2.0]  # infinities are ignored, with a warning
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ours(torcia.tensor(x))
            theirs(torch.tensor(x))
    np.testing.assert_array_equal(ours.histogram.numpy(), theirs.histogram.numpy())
    assert (ours.min_val.item(), ours.max_val.item()) == \
        (theirs.min_val.item(), theirs.max_val.item())
    (scale, zero), (their_scale, their_zero) = ours.calculate_qparams(), \
        theirs.calculate_qparams()
    assert scale.tolist() == their_scale.tolist() and zero.tolist() == their_zero.tolist()


@needs_torch
@pytest.mark.parametrize("kwargs", [{"qscheme": "per_tensor_symmetric", "dtype": "qint8",
                                     "reduce_range": True},
                                    {"qscheme": "per_tensor_symmetric", "quant_min": 0,
                                     "quant_max": 127},
                                    {"quant_min": -3, "quant_max": 100}], ids=str)
def test_min_max_parameters_are_torchs_float32_ones(kwargs):
    rng = np.random.default_rng(1)
    for _ in range(20):
        ours, theirs = _observer_pair("MinMaxObserver", **kwargs)
        x = (rng.standard_normal(50) * rng.uniform(0.01, 30)).astype(np.float32)
        ours(torcia.tensor(x))
        theirs(torch.tensor(x))
        (scale, zero), (their_scale, their_zero) = ours.calculate_qparams(), \
            theirs.calculate_qparams()
        assert scale.tolist() == their_scale.tolist()
        assert zero.tolist() == their_zero.tolist()


def test_observers_refuse_what_torchs_refuse():
    for kind, scheme in (("MinMaxObserver", tq.per_tensor_symmetric),
                         ("PerChannelMinMaxObserver", tq.per_channel_symmetric)):
        with pytest.raises(NotImplementedError, match="Cannot reduce range for symmetric"):
            getattr(tq, kind)(qscheme=scheme, reduce_range=True)
    with pytest.raises(NotImplementedError, match="per_tensor_symmetric and"):
        tq.HistogramObserver(qscheme=tq.per_channel_affine)
    with pytest.raises(NotImplementedError, match="dynamic quantization"):
        tq.HistogramObserver(is_dynamic=True)
