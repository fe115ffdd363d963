"""What PyTorch libraries import from torch at load time: pytree, the compat runner's
version and torch._C probes, __torch_function__, _foreach ops, device contexts."""

import collections
import dataclasses
import subprocess
import sys

import numpy as np
import pytest

import torcia
from torcia.utils import pytree


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch if getattr(torch, "Tensor", None) is not torcia.Tensor else None


NT = collections.namedtuple("NT", "x y")


def _trees():
    yield [None, 1, {"b": 2, "a": 3}, (4,), collections.OrderedDict(x=5)]
    yield NT(1, [2, 3])
    yield collections.deque([1, (2, 3)], maxlen=4)
    yield collections.defaultdict(list, a=1, b=[2])
    yield {"k": [], "j": ()}
    yield 7


@pytest.mark.parametrize("tree", list(_trees()), ids=lambda t: type(t).__name__)
def test_pytree_matches_pytorch(tree):
    leaves, spec = pytree.tree_flatten(tree)
    assert pytree.tree_unflatten(leaves, spec) == tree
    assert spec.num_leaves == len(leaves)
    real = _torch()
    if real is None:
        pytest.skip("PyTorch is not installed")
    import torch.utils._pytree as tp

    their_leaves, their_spec = tp.tree_flatten(tree)
    assert leaves == their_leaves
    assert (spec.num_leaves, spec.num_nodes) == (their_spec.num_leaves, their_spec.num_nodes)
    ours = [(pytree.keystr(k), v) for k, v in pytree.tree_leaves_with_path(tree)]
    theirs = [(tp.keystr(k), v) for k, v in tp.tree_leaves_with_path(tree)]
    assert ours == theirs


def test_pytree_map_and_registration():
    assert pytree.tree_map(lambda a, b: a * b, [1, (2, 3)], [4, (5, 6)]) == [4, (10, 18)]
    with pytest.raises(ValueError, match="arity mismatch"):
        pytree.tree_map(lambda a, b: a, [1, 2], [3])
    assert pytree.tree_map_only(int, lambda x: -x, [1, "a", 2.0]) == [-1, "a", 2.0]

    @dataclasses.dataclass
    class Box:
        w: object
        b: object

    pytree.register_dataclass(Box)
    out = pytree.tree_map(lambda t: t + 1, Box(torcia.zeros(1), [torcia.ones(1)]))
    assert out.w.tolist() == [1.0] and out.b[0].tolist() == [2.0]
    with pytest.raises(ValueError, match="already registered"):
        pytree.register_dataclass(Box)
    assert pytree.tree_leaves(torcia.Size([2, 3])) == [2, 3]


def _compat(source: str) -> str:
    return subprocess.run([sys.executable, "-c", "import torcia.compat; "
                           "torcia.compat.install()\n" + source],
                          capture_output=True, text=True, timeout=120, check=True).stdout


def test_compat_presents_the_pytorch_release():
    out = _compat("import torch, torch.version, torcia\n"
                  "print(torch.__version__, torch.__version__ >= '2.6', torch.version.cuda,"
                  " torcia.__version__, torch._C._get_tracing_state(),"
                  " torch._C._jit_set_profiling_mode(False), torch._C._get_accelerator())\n"
                  "from torch.utils import _pytree\nprint(_pytree.tree_leaves([1, [2]]))")
    assert out.split("\n")[0] == f"2.13.0 True None {torcia.__version__} None True cpu"
    assert out.split("\n")[1] == "[1, 2]"


def test_torch_function_subclass_keeps_type_and_graph():
    class Tagged(torcia.Tensor):
        pass

    w = torcia.tensor([1.0, 2.0], requires_grad=True)
    x = w.as_subclass(Tagged)
    y = (x * 3 + 1).sum()
    assert type(y) is Tagged and type(torcia.cat([x, x])) is Tagged
    assert all(type(t) is Tagged for t in x.split(1))
    y.backward()
    assert w.grad.tolist() == [3.0, 3.0]
    p = torcia.nn.Parameter(torcia.ones(2))
    assert type(p * 2) is torcia.Tensor  # Parameter opts out, as in PyTorch
    real = _torch()
    if real is not None:
        class TT(real.Tensor):
            pass

        assert type(real.ones(2).as_subclass(TT).sum()) is TT


def test_tensor_likes_and_modes():
    from torcia.overrides import TorchFunctionMode, has_torch_function

    calls = []

    class Like:
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            calls.append(func.__name__)
            return "like"

    assert torcia.add(Like(), 1) == "like" and calls == ["add"]
    assert has_torch_function((Like(),)) and not has_torch_function((torcia.ones(1),))

    class Count(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            calls.append(func.__name__)
            return func(*args, **(kwargs or {}))

    x = torcia.ones(2)
    with Count():
        assert torcia.mul(x, 2).tolist() == [2.0, 2.0]
    assert "mul" in calls


def test_foreach_ops_match_the_loop():
    xs = [torcia.tensor([1.0, -2.0]), torcia.tensor([[3.0], [0.5]])]
    ys = [torcia.tensor([4.0, 5.0]), torcia.tensor([[2.0], [2.0]])]
    for got, a, b in zip(torcia._foreach_add(xs, ys, alpha=2), xs, ys):
        assert got.tolist() == (a + 2 * b).tolist()
    assert [t.tolist() for t in torcia._foreach_sqrt([x.abs() for x in xs])] == [
        [1.0, np.sqrt(2.0).astype(np.float32).item()], [[np.sqrt(3.0).astype(np.float32).item()],
                                                          [np.sqrt(0.5).astype(np.float32).item()]]]
    copies = [x.clone() for x in xs]
    assert torcia._foreach_mul_(copies, [2.0, 3.0]) is None
    assert copies[0].tolist() == [2.0, -4.0] and copies[1].tolist() == [[9.0], [1.5]]
    with pytest.raises(RuntimeError, match="same number of tensors"):
        torcia._foreach_add(xs, [1.0])
    real = _torch()
    if real is not None:
        txs = [real.tensor(x.numpy()) for x in xs]
        for ours, theirs in zip(torcia._foreach_norm(xs), real._foreach_norm(txs)):
            assert abs(ours.item() - theirs.item()) < 1e-6


def test_device_context_and_contains():
    with torcia.device("meta"):
        assert torcia.zeros(2).device.type == "meta"
        with torcia.device("cpu"):
            assert torcia.zeros(2).device.type == "cpu"
        assert torcia.zeros(2).device.type == "meta"
    assert torcia.zeros(2).device.type == "cpu"
    x = torcia.arange(6.0).reshape(2, 3)
    assert 2.0 in x and 7 not in x  # element-wise, not row-wise
    assert torcia.tensor([0.0, 9.0, 9.0]) in x
    with pytest.raises(RuntimeError, match="only supports Tensor or scalar"):
        "a" in x  # noqa: B015
