"""TCPStore (the rendezvous that needs no MPI) and init_process_group's ways to reach it."""

import datetime
import socket
import threading
import time

import pytest

import torcia.distributed as dist
from torcia.distributed import DistStoreError, TCPStore
from torcia.distributed import collectives as C


def _free_port():
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


@pytest.fixture
def stores():
    master = TCPStore("127.0.0.1", 0, is_master=True, timeout=datetime.timedelta(seconds=2))
    return master, TCPStore("127.0.0.1", master.port, timeout=2)


def test_set_get_add_check_delete(stores):
    master, worker = stores
    worker.set("k", "text")
    master.set("raw", b"\x00\xff")
    assert master.get("k") == b"text" and worker.get("raw") == b"\x00\xff"
    assert master.add("n", 3) == 3 and worker.add("n", -1) == 2 and master.get("n") == b"2"
    assert worker.check(["k", "n"]) and not worker.check(["k", "absent"])
    assert master.delete_key("k") and not master.delete_key("k")
    assert worker.clone().get("raw") == b"\x00\xff"


def test_get_and_wait_block_until_another_process_sets(stores):
    master, worker = stores
    threading.Timer(0.2, lambda: master.set("late", "here")).start()
    assert worker.get("late") == b"here"
    threading.Timer(0.2, lambda: master.set("b", 1)).start()
    master.set("a", 1)
    worker.wait(["a", "b"])


def test_timeouts_name_the_missing_keys(stores):
    master, worker = stores
    start = time.monotonic()
    with pytest.raises(DistStoreError, match="key 'never' was not set within 2 s"):
        worker.get("never")
    assert time.monotonic() - start < 4
    master.set("present", 1)
    with pytest.raises(DistStoreError, match="keys 'absent' were not set within 0.2 s"):
        worker.wait(["present", "absent"], timeout=0.2)
    assert worker.get("present") == b"1"  # the connection is still usable after a timeout


def test_a_master_that_is_not_there():
    port = _free_port()
    with pytest.raises(DistStoreError, match=f"could not reach the master at 127.0.0.1:{port}"
                       ".*is rank 0 running"):
        TCPStore("127.0.0.1", port, timeout=0.3)


def test_the_master_waits_for_the_workers():
    port = _free_port()
    threading.Timer(0.2, lambda: TCPStore("127.0.0.1", port, timeout=2)).start()
    master = TCPStore("127.0.0.1", port, world_size=2, is_master=True, timeout=2)
    assert master.add("__torcia_store_joined__", 0) == 2
    with pytest.raises(DistStoreError, match="1 of 2 processes connected within 0.3 s"):
        TCPStore("127.0.0.1", 0, world_size=2, is_master=True, timeout=0.3)


def test_init_methods_name_the_store_address(monkeypatch):
    for var in ("MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ValueError, match="needs MASTER_ADDR and MASTER_PORT"):
        C._rendezvous("env://", 0, 1, 1.0)
    with pytest.raises(ValueError, match="should be tcp://HOST:PORT"):
        C._rendezvous("tcp://nohost", 0, 1, 1.0)
    with pytest.raises(ValueError, match="'udp://x' is not supported"):
        C._rendezvous("udp://x", 0, 1, 1.0)
    store = C._rendezvous(f"tcp://127.0.0.1:{_free_port()}", 0, 1, 1.0)
    store.set("a", 1)
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(store.port))
    assert C._rendezvous("env://", 1, 2, 1.0).get("a") == b"1"


class _Recorder:
    """A process-group backend that takes a store, and records what it was given."""

    calls = []

    @classmethod
    def create(cls, rank, world_size, timeout, init_method, store):
        cls.calls.append((rank, world_size, store))
        from torcia.distributed.group import ProcessGroup

        return ProcessGroup(rank, world_size, timeout)


@pytest.fixture
def recorder(monkeypatch):
    entries = C.backends.build()
    monkeypatch.setitem(entries, "recorder", _Recorder.create)
    _Recorder.calls.clear()
    yield _Recorder
    dist.destroy_process_group()


def test_store_backends_get_rank_and_size_from_the_launchers(recorder, monkeypatch):
    for var in C._RANK_VARS + C._SIZE_VARS:
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ValueError, match="needs this process's rank.*RANK and WORLD_SIZE"):
        dist.init_process_group("recorder")
    master = TCPStore("127.0.0.1", 0, is_master=True, timeout=2)
    monkeypatch.setenv("PMI_RANK", "1")
    monkeypatch.setenv("PMI_SIZE", "3")
    dist.init_process_group("recorder", store=master)
    assert recorder.calls[-1] == (1, 3, master)
    assert dist.get_rank() == 1 and dist.get_world_size() == 3
    dist.destroy_process_group()
    monkeypatch.setenv("SLURM_PROCID", "0")
    monkeypatch.setenv("RANK", "2")
    dist.init_process_group("recorder", init_method=f"tcp://127.0.0.1:{_free_port()}",
                            rank=0, world_size=1)
    assert recorder.calls[-1][:2] == (0, 1) and isinstance(recorder.calls[-1][2], TCPStore)


def test_an_unavailable_backend_says_why(monkeypatch):
    def unavailable(**kwargs):
        raise AssertionError("never called")

    unavailable.unavailable_reason = "no GPU here"
    monkeypatch.setitem(C.backends.build(), "gpu-only", unavailable)
    assert not dist.is_backend_available("gpu-only")
    with pytest.raises(RuntimeError, match="'gpu-only' process group backend cannot be used "
                       "here: no GPU here"):
        dist.init_process_group("gpu-only")
