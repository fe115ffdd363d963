
import numpy as np
import pytest

import torcia
import torcia.distributed as dist
from torcia.distributed import _objects


@pytest.fixture(autouse=True)
def _clean_state():
    yield
    dist.destroy_process_group()


def test_nothing_works_before_init():
    assert not dist.is_initialized()
    with pytest.raises(RuntimeError, match="Default process group has not been initialized"):
        dist.all_reduce(torcia.ones(1))
    with pytest.raises(RuntimeError, match="has not been initialized"):
        dist.get_rank()


def test_unknown_backend_names_what_to_install():
    with pytest.raises(RuntimeError, match="no process group backend named 'ucc'.*Install"):
        dist.init_process_group("ucc")


def test_blocked_backend_says_what_blocked_it(monkeypatch):
    pytest.importorskip("torcia_mpi")
    monkeypatch.setenv("TORCIA_DISABLE_PLUGINS", "mpi")
    torcia.plugins.reset()
    try:
        assert not dist.is_backend_available("mpi")
        with pytest.raises(RuntimeError, match="'mpi'.*blocked by TORCIA_DISABLE_PLUGINS"):
            dist.init_process_group("mpi")
    finally:
        monkeypatch.delenv("TORCIA_DISABLE_PLUGINS")
        torcia.plugins.reset()


def test_objects_round_trip_without_pickle():
    obj = {"a": [1, 2.5, "x", None, True], "t": torcia.tensor([[1.0, 2.0]]),
           "arr": np.arange(3, dtype=np.int16), "tup": (1, (2, b"\x00\x01")), 3: "int key",
           "bf": torcia.tensor([1.5], dtype=torcia.bfloat16)}
    back = _objects.loads(_objects.dumps(obj))
    assert back["a"] == obj["a"] and back["tup"] == obj["tup"] and back[3] == "int key"
    assert back["t"].tolist() == [[1.0, 2.0]] and back["arr"].dtype == np.int16
    assert back["bf"].dtype is torcia.bfloat16 and back["bf"].tolist() == [1.5]
    with pytest.raises(TypeError, match="cannot send an object of type object"):
        _objects.dumps(object())
    with pytest.raises(ValueError, match="unrecognised object record"):
        _objects.loads(b'{"__reduce__": ["os.system", "echo hacked"]}')


def test_single_process_world_and_ddp():
    if not dist.is_backend_available("mpi"):
        pytest.skip("no 'mpi' backend installed (torcia-mpi)")
    dist.init_process_group("mpi")
    assert dist.is_initialized() and dist.get_world_size() == 1 and dist.get_rank() == 0
    t = torcia.tensor([2.0, 3.0])
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    assert t.tolist() == [2.0, 3.0]
    torcia.manual_seed(0)
    net = torcia.nn.Linear(3, 2)
    ref = torcia.nn.Linear(3, 2)
    ref.load_state_dict(net.state_dict())
    model = dist.DistributedDataParallel(net)
    x = torcia.randn(4, 3)
    model(x).pow(2).sum().backward()
    ref(x).pow(2).sum().backward()
    for p, q in zip(model.module.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-6)
    with pytest.raises(TypeError, match="expects an nn.Module"):
        dist.DistributedDataParallel(lambda x: x)


def test_a_tensor_on_another_device_than_the_group_moves_is_refused():
    from torcia.distributed import collectives as C
    from torcia.distributed.group import ProcessGroup

    class GPUGroup(ProcessGroup):
        backend_name = "gpu"
        device_type = "cuda"

    with pytest.raises(RuntimeError, match=r"tensor is on cpu; the 'gpu' process group handles "
                       r"cuda tensors \(move it with .cuda\(\), or use the mpi backend\)"):
        C._array(torcia.ones(2), GPUGroup(0, 1, 1.0))
    pinned = GPUGroup(0, 1, 1.0)
    pinned.device_type, pinned.device_index = "cpu", 0
    with pytest.raises(RuntimeError, match=r"handles cpu:0 tensors \(move it with .to\('cpu:0'\)"):
        C._array(torcia.ones(2), pinned)
