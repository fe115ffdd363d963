"""The rest of ``torch.jit``'s public names: fuser and executor switches, the flatbuffer
save and load, the last executed graph, frozen optimizations, the warning and class
wrappers, ``set_module``; compared with PyTorch 2.13 where installed."""

from __future__ import annotations

import io
import warnings

import pytest

import torcia
from torcia import nn

try:
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch 2.13 is not installed")


@needs_torch
def test_every_public_name_of_torch_jit_is_there():
    modules = {"Iterator", "contextmanager", "frontend", "torch", "warnings"}  # imports
    missing = sorted(n for n in dir(torch.jit) if not n.startswith("_") and n not in modules
                     and not hasattr(torcia.jit, n))
    assert missing == []


def test_fuser_switches_and_restores_and_refuses_unknown_names():
    assert not torcia.jit.onednn_fusion_enabled()
    with torcia.jit.fuser("fuser3"):
        assert torcia.jit.onednn_fusion_enabled()
        with torcia.jit.fuser("none"):
            assert not torcia.jit.onednn_fusion_enabled()
        assert torcia.jit.onednn_fusion_enabled()
    assert not torcia.jit.onednn_fusion_enabled()
    with pytest.raises(Exception, match=r"unrecognized fuser option \(name: fuser9\)"):
        with torcia.jit.fuser("fuser9"):
            pass


@needs_torch
def test_fuser_refuses_as_torch():
    with pytest.raises(Exception) as theirs:
        with torch.jit.fuser("fuser9"):
            pass
    with pytest.raises(Exception) as ours:
        with torcia.jit.fuser("fuser9"):
            pass
    assert str(ours.value) == str(theirs.value) and type(ours.value) is type(theirs.value)


def test_optimized_execution_runs_programs_unchanged():
    net = nn.Sequential(nn.Linear(3, 3), nn.Tanh()).eval()
    traced = torcia.jit.trace(net, torcia.randn(2, 3))
    x = torcia.randn(4, 3)
    with torcia.jit.optimized_execution(False):
        assert torcia.equal(traced(x), net(x))


def test_flatbuffer_save_and_load_round_trip_and_last_graph():
    net = nn.Sequential(nn.Linear(3, 2), nn.ReLU()).eval()
    traced = torcia.jit.trace(net, torcia.randn(2, 3))
    buf = io.BytesIO()
    torcia.jit.save_jit_module_to_flatbuffer(traced, buf)
    buf.seek(0)
    loaded = torcia.jit.jit_module_from_flatbuffer(buf)
    x = torcia.randn(5, 3)
    assert torcia.equal(loaded(x), net(x))
    assert [n.op for n in torcia.jit.last_executed_optimized_graph().nodes] == ["linear",
                                                                                 "relu"]


def test_run_frozen_optimizations_keeps_a_frozen_module_working():
    net = nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3), nn.ReLU()).eval()
    x = torcia.randn(1, 2, 6, 6)
    frozen = torcia.jit.freeze(torcia.jit.trace(net, x))
    assert torcia.jit.run_frozen_optimizations(frozen) is None
    assert [n.op for n in frozen.graph.nodes] == ["conv", "relu"]
    assert torcia.allclose(frozen(x), net(x), atol=1e-5)
    with pytest.raises(RuntimeError, match="frozen ScriptModule"):
        torcia.jit.run_frozen_optimizations(net)


def test_onnx_traced_module_returns_the_graph_and_outputs():
    inner = nn.Sequential(nn.Linear(2, 2), nn.Sigmoid())
    x = torcia.randn(3, 2)
    graph, out = torcia.jit.ONNXTracedModule(inner)(x)
    assert [n.op for n in graph.nodes] == ["linear", "sigmoid"]
    assert torcia.allclose(out, inner(x))
    graph, out, inputs = torcia.jit.ONNXTracedModule(inner, return_inputs=True)(x)
    assert inputs[0] is x


def test_script_method_warns_and_returns_the_function():
    def forward(self, x):
        return x + 1

    with pytest.warns(UserWarning, match="script_method` is deprecated"):
        assert torcia.jit.script_method(forward) is forward


def test_set_module_and_its_refusal():
    class Thing:
        pass

    torcia.jit.set_module(Thing, "pkg.mod")
    assert Thing.__module__ == "pkg.mod"
    with pytest.raises(TypeError, match="should be a string"):
        torcia.jit.set_module(Thing, 3)


def test_script_warning_and_recursive_script_class():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.warn("x", torcia.jit.ScriptWarning, stacklevel=1)
    assert caught[0].category is torcia.jit.ScriptWarning

    class Box:
        def __init__(self):
            self.items = [1, 2]

        def __len__(self):
            return len(self.items)

        def __iter__(self):
            return iter(self.items)

    box = torcia.jit.RecursiveScriptClass(Box())
    assert len(box) == 2 and list(box) == [1, 2]
    box.items = [3]
    assert box._c.items == [3]
    with pytest.raises(RuntimeError, match="cannot be pickled"):
        box.__getstate__()


def test_compiled_modules_keep_the_module_they_came_from():
    net = nn.Sequential(nn.Linear(2, 2))
    assert torcia.jit.script(net).original_module is net
    assert torcia.jit.trace(net, torcia.randn(1, 2)).original_module is net
    assert "original_module" not in dict(torcia.jit.script(net).named_modules())
