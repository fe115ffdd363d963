"""The process-group vocabulary that needs no peers: backends and their configuration,
options, the debug level, launch-environment queries, rendezvous, rank translation and
argument checks. What needs peers runs in ``test_c10d_processes.py``."""

import datetime

import pytest

import torcia
import torcia.distributed as dist
from torcia.distributed import collectives as C
from torcia.distributed.group import ProcessGroup, Work


@pytest.fixture(autouse=True)
def _clean_state():
    yield
    dist.destroy_process_group()


def test_backend_names_and_defaults():
    assert dist.Backend("MPI") == "mpi" and dist.Backend("NcCl") == dist.Backend.NCCL
    assert dist.Backend("mine") == "mine"
    with pytest.raises(ValueError, match="string-ish"):
        dist.Backend(3)
    assert dist.get_default_backend_for_device("cpu") == "gloo"
    assert dist.get_default_backend_for_device(torcia.device("cuda", 0)) == "nccl"
    with pytest.raises(ValueError, match="Default backend not registered for device : meta"):
        dist.get_default_backend_for_device("meta")


def test_backend_config_parses_both_forms():
    assert dist.BackendConfig("cpu:mpi,cuda:nccl").get_device_backend_map() == {
        "cpu": "mpi", "cuda": "nccl"}
    assert str(dist.BackendConfig("MPI")) == "cpu:mpi"
    with pytest.raises(ValueError, match="Invalid backend string"):
        dist.BackendConfig("cpu:mpi,cuda")


def test_backends_pytorch_knows_but_torcia_lacks_are_reported_unavailable():
    # "gloo" is served by torcia-mpi (the test extra installs it), on MPI
    assert dist.is_gloo_available() is dist.is_backend_available("gloo") is dist.is_mpi_available()
    assert not dist.is_ucc_available() and not dist.is_xccl_available()


class _Solo(ProcessGroup):
    """A one-process group: every collective is the identity."""

    backend_name = "solo"

    def _done(self):
        return Work(lambda: True, what="solo op", rank=self.rank)

    def allreduce(self, array, op):
        return self._done()

    def allgather(self, out, array):
        out[0] = array
        return self._done()

    def reduce_scatter(self, out, array, op):
        out[...] = array[0]
        return self._done()

    def barrier(self):
        return self._done()

    def subgroup(self, ranks):
        return _Solo(0, 1, self.timeout) if 0 in ranks else None


@pytest.fixture
def solo():
    made = []
    dist.Backend.register_backend(
        "solo", lambda store, rank, size, timeout: made.append(store) or _Solo(0, 1, timeout),
        devices=["cpu"])
    yield made
    C.backends.build().pop("solo", None)


def test_register_backend_makes_init_process_group_use_it(solo, tmp_path):
    count = dist.get_pg_count()
    dist.init_process_group("solo", init_method=f"file://{tmp_path / 'rdzv'}", rank=0,
                            world_size=1)
    assert dist.get_backend() == "solo" and isinstance(solo[0], dist.FileStore)
    assert dist.get_backend_config() == "cpu:solo" and dist.get_pg_count() == count + 1
    assert dist.Backend.SOLO == "solo"


def test_single_and_coalesced_collectives_on_one_process(solo):
    dist.init_process_group("solo", store=dist.HashStore(), rank=0, world_size=1)
    out = torcia.zeros(1, 3)
    dist.all_gather_single(out, torcia.tensor([1.0, 2.0, 3.0]))
    assert out.tolist() == [[1.0, 2.0, 3.0]]
    with pytest.raises(ValueError, match="expected 1 x 3"):
        dist.all_gather_single(torcia.zeros(4), torcia.ones(3))
    red = torcia.zeros(2)
    dist.reduce_scatter_single(red, torcia.tensor([[4.0, 5.0]]))
    assert red.tolist() == [4.0, 5.0]
    a, b = torcia.ones(2), torcia.full((1, 2), 3.0)
    with pytest.warns(FutureWarning, match="all_reduce_coalesced"):
        assert dist.all_reduce_coalesced([a, b]) is None
    assert a.tolist() == [1.0, 1.0] and b.tolist() == [[3.0, 3.0]]
    outs = [[torcia.zeros(2), torcia.zeros(1, 2)]]
    with pytest.warns(FutureWarning, match="all_gather_coalesced"):
        work = dist.all_gather_coalesced(outs, [a, b], async_op=True)
    assert work.wait() and outs[0][1].tolist() == [[3.0, 3.0]]
    with pytest.raises(ValueError, match="one dtype"), pytest.warns(FutureWarning):
        dist.all_reduce_coalesced([a, torcia.ones(1, dtype=torcia.int64)])


def test_subgroups_and_rank_translation_on_one_process(solo):
    dist.init_process_group("solo", store=dist.HashStore(), rank=0, world_size=1)
    mine, groups = dist.new_subgroups(group_size=1)
    assert len(groups) == 1 and mine is groups[0] and mine.ranks == [0]
    assert dist.get_global_rank(mine, 0) == 0 and dist.get_group_rank(mine, 0) == 0
    with pytest.raises(ValueError, match="Group rank 1 is not part of group"):
        dist.get_global_rank(mine, 1)
    with pytest.raises(ValueError, match="Global rank 5 is not part of group"):
        dist.get_group_rank(mine, 5)
    with pytest.raises(ValueError, match="not registered"):
        dist.get_group_rank("a group", 0)
    with pytest.raises(ValueError, match="divisible|must not exceed"):
        dist.new_subgroups(group_size=2)
    with pytest.raises(ValueError, match="Rank 0 has appeared in both subgroup"):
        dist.new_subgroups_by_enumeration([[0], [0]])
    assert dist.split_group(split_ranks=[[0]]).ranks == [0]
    with pytest.raises(ValueError, match="not in the parent group"):
        dist.split_group(split_ranks=[[0, 3]])


def test_device_mesh_on_one_process(solo):
    dist.init_process_group("solo", store=dist.HashStore(), rank=0, world_size=1)
    mesh = dist.init_device_mesh("cpu", (1, 1), mesh_dim_names=("dp", "tp"))
    assert mesh.shape == (1, 1) and mesh.ndim == 2 and mesh.size() == 1
    assert mesh.get_coordinate() == [0, 0] and mesh.get_local_rank("tp") == 0
    assert mesh["tp"].mesh.tolist() == [0] and mesh["tp"].get_group() is mesh.get_group(1)
    assert mesh["dp", "tp"] is mesh and mesh["tp", "dp"].mesh_dim_names == ("tp", "dp")
    with pytest.raises(KeyError, match="Mesh dimension 'pp' does not exist"):
        mesh["pp"]
    with pytest.raises(RuntimeError, match="needs 4 processes"):
        dist.init_device_mesh("cpu", (2, 2))
    with pytest.raises(RuntimeError, match="same length"):
        dist.init_device_mesh("cpu", (1,), mesh_dim_names=("a", "b"))


def test_record_comm_names_the_collectives_in_errors(solo):
    dist.init_process_group("solo", store=dist.HashStore(), rank=0, world_size=1)
    with dist.record_comm("my all-reduce"):
        work = dist.all_reduce(torcia.ones(1), async_op=True)
    assert work._what == "my all-reduce"
    assert dist.all_reduce(torcia.ones(1), async_op=True)._what == "solo op"


def test_debug_level_from_the_environment(monkeypatch, capsys, solo):
    monkeypatch.setenv("TORCH_DISTRIBUTED_DEBUG", "detail")
    dist.set_debug_level_from_env()
    try:
        assert dist.get_debug_level() is dist.DebugLevel.DETAIL
        dist.init_process_group("solo", store=dist.HashStore(), rank=0, world_size=1)
        dist.all_reduce(torcia.ones(1))
        assert "[torcia.distributed rank 0] solo op" in capsys.readouterr().err
    finally:
        dist.set_debug_level(dist.DebugLevel.OFF)
    monkeypatch.setenv("TORCH_DISTRIBUTED_DEBUG", "LOUD")
    with pytest.raises(ValueError, match="must be OFF, INFO or DETAIL"):
        dist.set_debug_level_from_env()
    with pytest.raises(TypeError, match="expects a DebugLevel"):
        dist.set_debug_level("INFO")


def test_options_carry_pytorch_defaults():
    opts = dist.ReduceOptions(rootRank=2)
    assert opts.rootRank == 2 and opts.reduceOp == dist.ReduceOp.SUM and opts.asyncOp
    assert opts.timeout == datetime.timedelta(milliseconds=-1)
    assert dist.BarrierOptions().device_ids == [] and dist.BarrierOptions().device is None
    assert isinstance(dist.AllreduceCoalescedOptions(), dist.AllreduceOptions)
    for cls in (dist.AllToAllOptions, dist.BroadcastOptions, dist.GatherOptions,
                dist.ScatterOptions, dist.ReduceScatterOptions):
        assert cls().asyncOp is True
    with pytest.raises(TypeError, match="has no option 'root'"):
        dist.GatherOptions(root=1)


def test_small_vocabulary():
    assert dist.supports_complex(dist.ReduceOp.SUM) and not dist.supports_complex("max")
    with pytest.warns(FutureWarning, match="reduce_op` is deprecated"):
        assert dist.reduce_op.SUM == dist.ReduceOp.SUM
    assert dist.GroupName("g") == "g"


def test_launch_environment(monkeypatch):
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    with pytest.raises(RuntimeError, match="LOCAL_RANK is not in the environment"):
        dist.get_node_local_rank()
    assert dist.get_node_local_rank(fallback_rank=3) == 3
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert dist.get_node_local_rank(fallback_rank=3) == 1
    assert not dist.is_torchelastic_launched()
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "job")
    assert dist.is_torchelastic_launched()


def test_rendezvous(tmp_path, monkeypatch):
    store, rank, size = next(dist.rendezvous(f"file://{tmp_path / 'r'}?rank=0&world_size=1"))
    store.set("k", 1)
    assert (rank, size) == (0, 1) and dist.FileStore(str(tmp_path / "r")).get("k") == b"1"
    with pytest.raises(ValueError, match="needs rank and world_size"):
        next(dist.rendezvous(f"file://{tmp_path / 'r'}"))
    with pytest.raises(RuntimeError, match="No rendezvous handler for udp://"):
        dist.rendezvous("udp://x")
    with pytest.raises(RuntimeError, match="`rank` must be an integer"):
        dist.rendezvous("env://", rank="0")
    with pytest.raises(RuntimeError, match="already registered"):
        dist.register_rendezvous_handler("tcp", lambda *a: None)


def test_point_to_point_ops_check_their_arguments():
    t = torcia.ones(2)
    with pytest.raises(ValueError, match="Expected ``op`` to be of type"):
        dist.P2POp(dist.send, t, 1)
    with pytest.raises(ValueError, match="Exactly one of peer and group_peer"):
        dist.P2POp(dist.isend, t)
    with pytest.raises(ValueError, match="Each op is expected to to be of type"):
        dist.batch_isend_irecv([("isend", t, 1)])
    other = C.ProcessGroupHandle(_Solo(0, 1, 1.0), [0])
    with pytest.raises(ValueError, match="same group"):
        dist.batch_isend_irecv([dist.P2POp(dist.isend, t, 1),
                                dist.P2POp(dist.irecv, t, group_peer=0, group=other)])


def test_breakpoint_stops_on_its_rank_only(solo, monkeypatch):
    dist.init_process_group("solo", store=dist.HashStore(), rank=0, world_size=1)
    stops = []
    monkeypatch.setattr("pdb.Pdb.set_trace", lambda self, frame=None: stops.append(frame))
    monkeypatch.setattr("pdb.Pdb.message", lambda self, msg: None)
    dist.breakpoint(rank=1)
    assert stops == []
    dist.breakpoint(rank=0)
    assert stops[0].f_code.co_name == "test_breakpoint_stops_on_its_rank_only"
    for _ in range(3):
        dist.breakpoint(rank=0, skip=2)
    assert len(stops) == 2
