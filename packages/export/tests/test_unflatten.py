"""torcia.export.unflatten and module_call_graph: an exported program back in its model's
module hierarchy, each submodule runnable alone and replaceable."""

from __future__ import annotations

import copy
import io

import pytest

import torcia
from torcia import nn


class Net(nn.Module):
    """A shared module called twice, a nested Sequential, and a module never called."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
        self.unused = nn.Linear(2, 2)

    def forward(self, x):
        h = self.b(self.a(x) + 1)
        return self.a(h) * 2, h


def _round_trip(ep):
    buf = io.BytesIO()
    torcia.export.save(ep, buf)
    buf.seek(0)
    return torcia.export.load(buf)


def test_module_call_graph_lists_every_module_and_the_preserved_signatures():
    ep = torcia.export.export(Net().eval(), (torcia.randn(2, 4),),
                              preserve_module_call_signature=("b",))
    for program in (ep, _round_trip(ep)):
        graph = program.module_call_graph
        assert [e.fqn for e in graph] == ["", "a", "b", "b.0", "b.1", "unused"]
        signed = {e.fqn: e.signature for e in graph if e.signature is not None}
        assert sorted(signed) == ["", "b"]
        assert signed[""].forward_arg_names == ["x"]
        assert len(signed[""].inputs) == 1 and len(signed[""].outputs) == 2
        assert len(signed["b"].inputs) == 1 and len(signed["b"].outputs) == 1
        assert signed["b"].outputs[0] in signed[""].outputs  # h is returned


def test_module_call_graph_names_the_modules_torch_names():
    torch = pytest.importorskip("torch")

    class TorchNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(4, 4)
            self.b = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
            self.unused = torch.nn.Linear(2, 2)

        def forward(self, x):
            h = self.b(self.a(x) + 1)
            return self.a(h) * 2, h

    theirs = torch.export.export(TorchNet(), (torch.randn(2, 4),),
                                 preserve_module_call_signature=("b",))
    ours = torcia.export.export(Net(), (torcia.randn(2, 4),),
                                preserve_module_call_signature=("b",))
    assert [(e.fqn, e.signature is None) for e in ours.module_call_graph] == \
        [(e.fqn, e.signature is None) for e in theirs.module_call_graph]


def test_preserving_an_unknown_module_is_refused():
    with pytest.raises(ValueError, match="'nope'.*not a submodule"):
        torcia.export.export(Net(), (torcia.randn(2, 4),),
                             preserve_module_call_signature=("nope",))


def test_unflattened_module_matches_the_model_and_its_submodules_run_alone():
    net = Net().eval()
    ep = torcia.export.export(net, (torcia.randn(2, 4),))
    for program in (ep, _round_trip(ep)):
        m = torcia.export.unflatten(program)
        assert isinstance(m, torcia.export.UnflattenedModule)
        assert [n for n, _ in m.named_children()] == ["a", "b", "unused"]
        assert isinstance(m.get_submodule("b.0"), torcia.export.InterpreterModule)
        assert list(m.state_dict()) == list(net.state_dict())
        x = torcia.randn(2, 4)
        for got, want in zip(m(x), net(x)):
            assert torcia.allclose(got, want, atol=1e-6)
        assert torcia.allclose(m.b(x), net.b(x), atol=1e-6)
        assert torcia.allclose(m.get_submodule("b.0")(x), net.b[0](x), atol=1e-6)
        with pytest.raises(RuntimeError, match="no call of its own"):
            m.unused(torcia.randn(1, 2))


def test_a_swapped_submodule_is_called_with_the_models_arguments():
    net = Net().eval()
    ep = torcia.export.export(net, (torcia.randn(2, 4),),
                              preserve_module_call_signature=("b",))
    m = torcia.export.unflatten(_round_trip(ep))
    m.b = nn.Tanh()
    x = torcia.randn(2, 4)
    h = torcia.tanh(net.a(x) + 1)
    out, hidden = m(x)
    assert torcia.allclose(hidden, h, atol=1e-6)
    assert torcia.allclose(out, net.a(h) * 2, atol=1e-6)
    m.b = nn.Linear(4, 3)
    with pytest.raises(Exception, match=r"size|shape"):
        m(x)  # a replacement of another output shape fails in the ops after it


def test_a_replacement_returning_another_structure_is_refused():
    m = torcia.export.unflatten(torcia.export.export(Net().eval(), (torcia.randn(2, 4),)))

    class Pair(nn.Module):
        def forward(self, x):
            return x, x

    m.b = Pair()
    with pytest.raises(TypeError, match="submodule 'b' returned a result of structure"):
        m(torcia.randn(2, 4))


def test_resnet18_unflattens_with_its_layers():
    from torcia.vision import models

    model = models.resnet18(num_classes=10).eval()
    x = torcia.randn(1, 3, 32, 32)
    m = torcia.export.unflatten(torcia.export.export(model, (x,)))
    assert [n for n, _ in m.named_children()] == [n for n, _ in model.named_children()]
    assert torcia.allclose(m(x), model(x), atol=1e-5)
    y = model.maxpool(model.relu(model.bn1(model.conv1(x))))
    assert torcia.allclose(m.layer1(y), model.layer1(y), atol=1e-5)
    assert torcia.allclose(m.get_submodule("layer1.0.conv1")(y), model.layer1[0].conv1(y),
                          atol=1e-5)


def test_a_module_reading_a_keyword_tensor_runs_inside_its_parent():
    class Masked(nn.Module):
        def forward(self, x, mask=None):
            return x.masked_fill(mask, 0.0)

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Masked()
            self.proj = nn.Linear(3, 3)

        def forward(self, x, mask):
            return self.proj(self.inner(x, mask=mask))

    model = Outer().eval()
    x, mask = torcia.randn(2, 3), torcia.tensor([[True, False, True], [False, False, True]])
    m = torcia.export.unflatten(torcia.export.export(model, (x, mask)))
    assert torcia.allclose(m(x, mask), model(x, mask), atol=1e-6)
    assert torcia.allclose(m.proj(x), model.proj(x), atol=1e-6)
    with pytest.raises(RuntimeError, match="run in its parent's"):
        m.inner(x, mask=mask)


def test_dynamic_sizes_guards_and_gradients():
    net = Net()
    ref = copy.deepcopy(net)  # the program shares net's parameters
    batch = torcia.export.Dim("batch")
    m = torcia.export.unflatten(torcia.export.export(net, (torcia.randn(2, 4),),
                                                     dynamic_shapes=({0: batch},)))
    x = torcia.randn(7, 4)
    out, _ = m(x)
    assert out.shape == (7, 4)
    out.sum().backward()
    ref(x)[0].sum().backward()
    for (name, p), q in zip(m.named_parameters(), ref.parameters()):
        assert (p.grad is None) == (q.grad is None), name
        if q.grad is not None:
            assert torcia.allclose(p.grad, q.grad, atol=1e-5), name
    with pytest.raises(AssertionError, match=r"Guard failed: x.size\(\)\[1\] == 4"):
        m(torcia.randn(7, 3))


def test_flat_args_adapter_adapts_other_inputs():
    class FirstOnly(torcia.export.FlatArgsAdapter):
        def adapt(self, target_spec, input_spec, input_args, metadata=None, obj=None):
            return input_args[:1]

    ep = torcia.export.export(nn.ReLU(), (torcia.ones(2),))
    with pytest.raises(TypeError, match="FlatArgsAdapter"):
        torcia.export.unflatten(ep)(torcia.ones(2), torcia.ones(3))
    m = torcia.export.unflatten(ep, FirstOnly())
    assert m(torcia.tensor([-1.0, 2.0]), torcia.ones(3)).tolist() == [0.0, 2.0]
    with pytest.raises(TypeError, match="expects an ExportedProgram"):
        torcia.export.unflatten(nn.ReLU())
