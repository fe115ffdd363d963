"""The "nccl" process group, without a GPU: torcia-cuda's NCCLProcessGroup runs unchanged
over tests/fake_cupy.py, whose communicators really exchange data between processes.

Several processes are started with torchrun's variables (nccl_worker.py is one rank); a
single rank also runs in this process. Every subprocess has a timeout: nothing can hang.
"""

import datetime
import importlib.util
import os
import pathlib
import socket
import subprocess
import sys
import time

import pytest

import torcia
import torcia.distributed as dist
from torcia import plugins

pytest.importorskip("torcia_cuda")
HERE = pathlib.Path(__file__).parent
_spec = importlib.util.spec_from_file_location("fake_cupy", HERE / "fake_cupy.py")
fake_cupy = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fake_cupy)

ALL_BUT_DDP = "collectives,point_to_point,objects,groups,mismatch,cpu_tensor"


def _free_port():
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _launch(scenarios, world_size, ranks=None, timeout_s=20.0, limit=120):
    """Start ``ranks`` (all by default) of a ``world_size`` group running ``scenarios``;
    returns each one's (exit status, output). Every process is killed after ``limit``."""
    env = {**os.environ, "WORLD_SIZE": str(world_size), "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(_free_port()), "NCCL_TEST_TIMEOUT": str(timeout_s)}
    procs = [subprocess.Popen([sys.executable, str(HERE / "nccl_worker.py"), scenarios],
                              env={**env, "RANK": str(r)}, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
             for r in (range(world_size) if ranks is None else ranks)]
    deadline = time.monotonic() + limit
    results = []
    try:
        for p in procs:
            out, _ = p.communicate(timeout=max(0.1, deadline - time.monotonic()))
            results.append((p.returncode, out))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return results


def _assert_passed(results, scenarios):
    for rank, (code, out) in enumerate(results):
        assert code == 0, f"rank {rank}:\n{out}"
        for name in scenarios.split(","):
            assert f"PASS {name} rank {rank}" in out, f"rank {rank}:\n{out}"


def test_collectives_point_to_point_objects_and_groups_on_two_ranks():
    _assert_passed(_launch(ALL_BUT_DDP, 2), ALL_BUT_DDP)


@pytest.mark.slow
def test_collectives_point_to_point_and_groups_on_four_ranks():
    scenarios = "collectives,point_to_point,groups"
    _assert_passed(_launch(scenarios, 4), scenarios)


def test_ddp_on_two_ranks_matches_single_process_training():
    _assert_passed(_launch("ddp", 2), "ddp")


@pytest.mark.slow
@pytest.mark.parametrize("world_size", [2, 4])
def test_a_rank_that_dies_is_named_by_the_others_within_the_timeout(world_size):
    start = time.monotonic()
    results = _launch("dies", world_size, timeout_s=2.0, limit=60)
    assert time.monotonic() - start < 40
    for rank, (code, out) in enumerate(results):
        if rank == 1:
            assert code == -9, out
        else:
            assert code == 0 and f"PASS dies rank {rank}" in out, f"rank {rank}:\n{out}"
            assert "rank 1 stopped responding" in out and "communicator was aborted" in out


def test_a_rank_that_raises_is_named_by_the_others_before_the_timeout():
    start = time.monotonic()
    results = _launch("raises", 3, timeout_s=30.0, limit=60)
    assert time.monotonic() - start < 25  # the error came from the store, not the timeout
    for rank, (code, out) in enumerate(results):
        if rank == 1:
            assert code == 1 and "ValueError: bad batch" in out, out
        else:
            assert code == 0 and f"PASS raises rank {rank}" in out, f"rank {rank}:\n{out}"
            assert "rank 1 raised ValueError: bad batch" in out, out


def test_a_rank_that_never_joins_is_named():
    [(code, out)] = _launch("collectives", 2, ranks=[0], timeout_s=1.0, limit=60)
    assert code != 0 and "rank(s) [1] did not join within 1 s" in out, out


# ---------------------------------------------------------------------------------------
# one rank, in this process
# ---------------------------------------------------------------------------------------


@pytest.fixture
def cupy(monkeypatch):
    """The fake ``cupy`` in place of the real one, and torcia-cuda's plugin over it."""
    cp = fake_cupy.install(monkeypatch, count=1)
    from torcia_cuda import nccl

    monkeypatch.setattr(nccl, "_ptr", lambda arr: arr.ctypes.data)
    plugins.reset()
    torcia.device("cuda").kernels = None
    yield cp
    dist.destroy_process_group()
    monkeypatch.undo()
    plugins.reset()
    for dev in ("cuda", "cuda:0"):
        torcia.device(dev).kernels = None


def _one_rank():
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, timeout=5)
    dist.init_process_group("nccl", store=store, rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=5))


def test_one_rank_moves_cuda_tensors_and_refuses_cpu_ones(cupy):
    assert dist.is_nccl_available()
    _one_rank()
    assert dist.get_backend() == "nccl"
    t = torcia.tensor([1.0, 2.0], device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    dist.broadcast(t, src=0)
    assert t.device.type == "cuda" and t.cpu().tolist() == [1.0, 2.0]
    with pytest.raises(RuntimeError, match=r"tensor is on cpu; the 'nccl' process group "
                       r"handles cuda:0 tensors \(move it with .cuda\(\)"):
        dist.broadcast(torcia.ones(2), src=0)
    with pytest.raises(TypeError, match="NCCL cannot reduce int16 tensors"):
        dist.all_reduce(torcia.ones(2, dtype=torcia.int16, device="cuda"))


def test_a_cuda_tensor_on_the_mpi_group_says_to_move_it(cupy):
    if not dist.is_mpi_available():
        pytest.skip("no 'mpi' backend installed (torcia-mpi)")
    dist.init_process_group("mpi")
    with pytest.raises(RuntimeError, match=r"tensor is on cuda:0; the 'mpi' process group "
                       r"handles cpu tensors \(move it with .cpu\(\), or use the nccl backend\)"):
        dist.all_reduce(torcia.ones(2, device="cuda"))


def test_without_cupy_nccl_is_unavailable_and_says_why(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy raises ImportError
    plugins.reset()
    try:
        assert not dist.is_nccl_available()
        with pytest.raises(RuntimeError, match="'nccl' process group backend cannot be used "
                           "here: CuPy is not installed"):
            dist.init_process_group("nccl")
    finally:
        monkeypatch.undo()
        plugins.reset()


def test_cupy_without_nccl_says_so(cupy):
    cupy.cuda.nccl.available = False
    plugins.reset()
    with pytest.raises(RuntimeError, match="CuPy could not load the NCCL library"):
        dist.init_process_group("nccl")


@pytest.mark.parametrize("uid", [bytes(range(200, 256)) + bytes(72),  # CuPy 14: bytes
                                 tuple(range(-128, 0)) + tuple(range(0, 0))])  # older: chars
def test_nccls_unique_id_reaches_every_rank_as_cupy_made_it(uid):
    from torcia_cuda.nccl import _pack_id, _unpack_id

    got = _unpack_id(_pack_id(uid))
    assert got == uid and type(got) is type(uid)
