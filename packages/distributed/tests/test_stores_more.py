"""HashStore, FileStore and PrefixStore, and the operations every store shares with
TCPStore: compare_set, queues, multi_get/multi_set, append, num_keys."""

import datetime
import os
import subprocess
import sys
import threading

import pytest

import torcia.distributed as dist
from torcia.distributed import (
    DistError,
    DistStoreError,
    FileStore,
    HashStore,
    PrefixStore,
    QueueEmptyError,
    Store,
    TCPStore,
)


@pytest.fixture(params=["hash", "file", "tcp", "prefix"])
def store(request, tmp_path):
    if request.param == "hash":
        s = HashStore()
    elif request.param == "file":
        s = FileStore(str(tmp_path / "store"))
    elif request.param == "tcp":
        s = TCPStore("127.0.0.1", 0, is_master=True)
    else:
        s = PrefixStore("job", HashStore())
    s.set_timeout(datetime.timedelta(seconds=2))
    return s


def test_every_store_is_a_store_with_pytorch_semantics(store):
    assert isinstance(store, Store)
    store.set("k", "text")
    assert store.get("k") == b"text"
    assert store.add("n", 3) == 3 and store.add("n", -1) == 2
    store.append("k", b"+more")
    assert store.get("k") == b"text+more"
    # compare_set: set when it holds the expected value; a missing key holds b""
    assert store.compare_set("c", "", "first") == b"first"
    assert store.compare_set("c", "", "second") == b"first"
    assert store.compare_set("c", "first", "second") == b"second"
    assert store.compare_set("missing", "x", "y") == b"x" and not store.check(["missing"])
    store.multi_set(["a", "b"], ["1", b"2"])
    assert store.multi_get(["b", "a"]) == [b"2", b"1"]
    assert store.check(["a", "b"]) and not store.check(["a", "zz"])
    assert store.delete_key("a") and not store.delete_key("a")
    assert store.has_extended_api()


def test_queues_are_first_in_first_out(store):
    store.queue_push("q", "one")
    store.queue_push("q", b"two")
    assert store.queue_len("q") == 2
    assert store.queue_pop("q") == b"one" and store.queue_pop("q", block=False) == b"two"
    with pytest.raises(QueueEmptyError, match="queue is empty"):
        store.queue_pop("q", block=False)
    store.set_timeout(datetime.timedelta(seconds=0.2))
    with pytest.raises(DistStoreError, match="stayed empty for 0.2 s"):
        store.queue_pop("q")
    store.set_timeout(datetime.timedelta(seconds=2))
    threading.Timer(0.2, lambda: store.clone().queue_push("q", "late")).start()
    assert store.queue_pop("q") == b"late"


def test_get_and_wait_block_then_time_out(store):
    threading.Timer(0.2, lambda: store.clone().set("later", "v")).start()
    assert store.get("later") == b"v"
    store.set_timeout(0.2)
    assert store.timeout == datetime.timedelta(seconds=0.2)
    with pytest.raises(DistStoreError, match="never' was not set within 0.2 s"):
        store.get("never")
    store.set("here", 1)
    with pytest.raises(DistStoreError, match="never' were not set within 0.1 s"):
        store.wait(["here", "never"], timeout=0.1)


def test_error_classes_nest_as_in_pytorch():
    assert issubclass(QueueEmptyError, DistStoreError)
    assert issubclass(DistStoreError, DistError) and issubclass(DistError, RuntimeError)
    assert issubclass(dist.DistBackendError, DistError)
    assert issubclass(dist.DistNetworkError, DistError)


def test_prefix_store_keeps_users_apart():
    base = HashStore()
    a, b = PrefixStore("a", base), PrefixStore("b", base)
    a.set("x", "1")
    b.set("x", "2")
    assert a.get("x") == b"1" and b.get("x") == b"2" and base.get("a/x") == b"1"
    assert a.underlying_store is base and sorted(base.list_keys()) == ["a/x", "b/x"]
    assert a.list_keys() == ["x"] and base.num_keys() == 2


def test_hash_store_serves_threads():
    store = HashStore()
    threads = [threading.Thread(target=lambda: [store.add("n", 1) for _ in range(100)])
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.get("n") == b"400"


def test_file_store_is_shared_between_processes(tmp_path):
    path = str(tmp_path / "shared")
    store = FileStore(path, 2)
    code = ("import sys; from torcia.distributed import FileStore; s = FileStore(sys.argv[1]);"
            "[s.add('count', 1) for _ in range(50)]; s.set('child', s.get('parent') + b'!')")
    child = subprocess.Popen([sys.executable, "-c", code, path])
    store.set("parent", "hello")
    for _ in range(50):
        store.add("count", 1)
    assert child.wait(60) == 0
    assert store.get("child") == b"hello!" and store.get("count") == b"100"
    assert FileStore(path).get("parent") == b"hello" and os.path.getsize(path) > 0


def test_file_store_loses_no_update_of_concurrent_processes(tmp_path):
    # each operation rewrites the whole table: one written after its lock is released
    # let another process read a torn table and drop keys (a 4-process rendezvous hung)
    path = str(tmp_path / "shared")
    code = ("import sys; from torcia.distributed import FileStore; s = FileStore(sys.argv[1]);"
            "r = sys.argv[2]; [(s.set(f'{r}/{i}', r), s.add('n', 1)) for i in range(200)]")
    children = [subprocess.Popen([sys.executable, "-c", code, path, str(r)]) for r in range(4)]
    assert [child.wait(120) for child in children] == [0] * 4
    store = FileStore(path)
    assert store.get("n") == b"800" and store.num_keys() == 801
    assert store.multi_get([f"{r}/199" for r in range(4)]) == [b"0", b"1", b"2", b"3"]


@pytest.mark.parametrize("damage", ["foreign", "cut"])
def test_file_store_names_a_file_that_is_not_its_table(tmp_path, damage):
    path = tmp_path / "store"
    FileStore(str(path)).set("key", "value")
    blob = path.read_bytes()
    path.write_bytes(b"#!/bin/sh\necho hello\n" if damage == "foreign" else blob[:-3])
    with pytest.raises(DistStoreError, match=r"FileStore\('.*store'\): the file is not a "):
        FileStore(str(path)).get("key")


def test_tcp_store_counts_its_bookkeeping_key():
    master = TCPStore("127.0.0.1", 0, is_master=True)
    master.set("x", 1)
    assert master.num_keys() == 2  # x and the key counting connected clients


def test_the_base_store_names_what_a_subclass_must_provide():
    with pytest.raises(NotImplementedError, match="must implement _request"):
        Store().set("k", "v")
