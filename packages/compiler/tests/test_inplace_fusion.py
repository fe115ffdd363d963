"""The inductor's fusion and in-place writes: a chain fused into a reduction must not
skip an in-place write (ReLU(inplace=True)) made to its result before the reduction reads
it (ResNet's stem and blocks end in exactly this)."""

import numpy as np
import pytest

import torcia
from torcia import nn
from torcia.compiler import inductor


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCIA_CACHE_DIR", str(tmp_path / "cache"))


class _AddReluMean(nn.Module):
    def forward(self, x):
        y = x + x
        y.relu_()  # written in place after add made it
        return y.mean((2, 3))


def test_reduction_reads_the_value_an_inplace_write_left():
    if inductor.compiler() is None:
        pytest.skip("no C++ compiler: the inductor does not fuse")
    graphs = []

    def fused(graph, example_inputs):
        graph = inductor.inductor(graph, example_inputs)
        graphs.append(graph)
        return graph

    x = torcia.randn(2, 8, 2, 2)
    # by hand: mean over the last two dims of relu(2x)
    want = np.maximum(2 * x.numpy(), 0).mean((2, 3))
    f = torcia.compile(_AddReluMean(), backend=fused)
    with torcia.no_grad():
        f(x)  # traced
        got = f(x)  # the first replay, checked against eager: it must not fall back
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)
    from torcia.compiler.replay import generate

    graph = graphs[0]
    run, _ = generate(graph, sorted(graph.output_values()))
    (out,) = run([x.numpy()])
    np.testing.assert_allclose(out, want, rtol=1e-6)
