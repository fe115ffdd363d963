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
    # reached as an attribute too (torcia.version is torcia's own)
    assert _compat("import torch\nprint(torch.version.__version__)").strip() == "2.13.0"
    assert out.split("\n")[1] == "[1, 2]"


def test_torch_function_subclass_keeps_type_and_graph():
    pytest.importorskip("torcia.autograd")
    nn = pytest.importorskip("torcia.nn")

    class Tagged(torcia.Tensor):
        pass

    w = torcia.tensor([1.0, 2.0], requires_grad=True)
    x = w.as_subclass(Tagged)
    y = (x * 3 + 1).sum()
    assert type(y) is Tagged and type(torcia.cat([x, x])) is Tagged
    assert type(x * 3 + x) is Tagged  # two instances: found by identity, not by __eq__
    assert all(type(t) is Tagged for t in x.split(1))
    y.backward()
    assert w.grad.tolist() == [3.0, 3.0]
    p = nn.Parameter(torcia.ones(2))
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


@pytest.mark.parametrize("first", ["module", "dispatch"])
def test_lazily_bound_names_are_one_routed_object(first):
    # torcia.save is bound on first use: a module name read before that, once dispatch was
    # on, was the unrouted function (torch.serialization.save is not torch.save)
    steps = ["import torcia.serialization as ser", "overrides.switch_on()"]
    if first == "dispatch":
        steps.reverse()
    code = "\n".join(["import torcia", "from torcia import overrides", *steps,
                      "from torcia.serialization import save",
                      "assert save is torcia.save is ser.save",
                      "assert overrides.routed(save) is save",
                      "class Tagged(torcia.Tensor):",
                      "    @classmethod",
                      "    def __torch_function__(cls, func, types, args=(), kwargs=None):",
                      "        return func.__name__",
                      "assert save(torcia.ones(1).as_subclass(Tagged), 'f') == 'save'"])
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


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


def test_wide_unsigned_dtypes_promote_as_pytorch():
    wide = (torcia.uint16, torcia.uint32, torcia.uint64)
    others = [torcia.bool, torcia.uint8, torcia.int8, torcia.int32, torcia.int64,
              torcia.float16, torcia.bfloat16, torcia.float32, torcia.float64,
              torcia.complex64, *wide]
    real = _torch()
    for a in wide:
        top = min(np.iinfo(a.to_numpy()).max, np.iinfo(np.int64).max)
        x = torcia.tensor([1, 2, top], dtype=a)
        assert x.dtype is a and not a.is_signed and a.itemsize == np.dtype(a.to_numpy()).itemsize
        assert x.numpy().dtype == a.to_numpy() and x.tolist()[-1] == top
        for b in others:
            try:
                ours = torcia.promote_types(a, b).name
            except RuntimeError as exc:
                ours = str(exc)
            if b is a:
                assert ours == a.name
            elif b.is_floating_point:
                assert ours == b.name
            else:
                assert ours.startswith("Promotion for uint16, uint32, uint64 types is not "
                                       "supported")
            if real is not None:
                try:
                    theirs = str(real.promote_types(getattr(real, a.name),
                                                    getattr(real, b.name))).split(".")[1]
                except RuntimeError as exc:
                    theirs = str(exc)
                assert ours == theirs
    u = torcia.from_numpy(np.array([7], dtype=np.uint32))
    assert u.dtype is torcia.uint32 and u.to(torcia.int64).tolist() == [7]


def test_storages_map_files_and_slice_as_views(tmp_path):
    path = tmp_path / "weights.bin"
    path.write_bytes(bytes(range(16)))
    s = torcia.UntypedStorage.from_file(str(path), shared=False, nbytes=16)
    part = s[4:8]
    # a slice is the same memory, as PyTorch's (it was a copy)
    part[0] = 99
    assert s[4] == 99 and part.data_ptr() == s.data_ptr() + 4
    assert path.read_bytes()[4] == 4  # not shared: the file keeps its bytes
    as_int = torcia.asarray(s[8:16], dtype=torcia.int32)
    assert as_int.tolist() == np.frombuffer(bytes(range(8, 16)), dtype=np.int32).tolist()
    shared = torcia.UntypedStorage.from_file(str(path), True, 16)
    shared[0] = 200
    del shared
    assert path.read_bytes()[0] == 200
    grown = tmp_path / "new.bin"
    assert torcia.UntypedStorage.from_file(str(grown), True, 5).tolist() == [0] * 5
    assert grown.stat().st_size == 5
    assert len(torcia.UntypedStorage.from_file(str(path))) == 0  # nbytes=0: nothing
    with pytest.raises(RuntimeError, match="smaller than the required mapping size <32>"):
        torcia.UntypedStorage.from_file(str(path), False, 32)
    with pytest.raises(RuntimeError, match="only a step of 1"):
        s[::2]


def _asarray_cases(fw):
    """(description, call) of torch.asarray's behaviours: aliasing, copies, dtypes, refusals."""
    a = np.arange(4, dtype=np.float32)
    yield "numpy shared", lambda: fw.asarray(a)
    yield "numpy copy", lambda: fw.asarray(a, copy=True)
    yield "numpy cast", lambda: fw.asarray(a, dtype=fw.float64)
    yield "numpy cast refused", lambda: fw.asarray(a, dtype=fw.float64, copy=False)
    yield "list", lambda: fw.asarray([1, 2.5])
    yield "list alias refused", lambda: fw.asarray([1, 2], copy=False)
    yield "scalar", lambda: fw.asarray(3)
    yield "bytes", lambda: fw.asarray(bytearray(b"\x01\x00\x02\x00"), dtype=fw.int16)
    yield "untyped storage", lambda: fw.asarray(fw.UntypedStorage(8).fill_(1))
    yield "untyped storage int32", lambda: fw.asarray(fw.UntypedStorage(6).fill_(2),
                                                      dtype=fw.int32)
    yield "requires grad", lambda: fw.asarray([1.0, 2.0], requires_grad=True)


def test_asarray_matches_pytorch():
    real = _torch()
    if real is None:
        pytest.skip("PyTorch is not installed")

    def outcome(fn):
        try:
            t = fn()
        except (ValueError, RuntimeError, TypeError) as exc:
            return type(exc).__name__, str(exc)
        return str(t.dtype).split(".")[1], list(t.shape), t.requires_grad, t.tolist()

    ours, theirs = dict(_asarray_cases(torcia)), dict(_asarray_cases(real))
    for name in ours:
        assert outcome(ours[name]) == outcome(theirs[name]), name
    for fw in (torcia, real):
        a = np.zeros(2, dtype=np.float32)
        shared, copied = fw.asarray(a), fw.asarray(a, copy=True)
        a[0] = 5
        assert (shared[0].item(), copied[0].item()) == (5.0, 0.0)
        x = fw.ones(2)
        assert fw.asarray(x) is x and fw.asarray(x, copy=True) is not x
        y = fw.asarray(x, requires_grad=True)
        assert y is x and x.requires_grad  # the tensor given, now requiring grad


def test_view_takes_its_dtype_by_keyword():
    x = torcia.tensor([1, 0, 2, 0], dtype=torcia.uint8)
    assert x.view(dtype=torcia.int16).tolist() == [1, 2] == x.view(torcia.int16).tolist()
    with pytest.raises(TypeError, match="not both"):
        x.view(4, dtype=torcia.int16)
