"""Faults in workers: each raises a clear error in the main process within seconds, and
none leaves a worker process or a shared-memory segment behind."""

import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from torcia.data import DataLoader, Dataset, IterableDataset, _shm, _worker

pytestmark = pytest.mark.usefixtures("no_leaks")


class Faulty(Dataset):
    """Samples 0..n-1 as float32 arrays of ``size``; at index ``at`` it does ``what``."""

    def __init__(self, what, at=5, n=12, size=256):
        self.what, self.at, self.n, self.size = what, at, n, size

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.at:
            if self.what == "raise":
                raise ValueError(f"sample {i} is corrupt")
            if self.what == "stop":
                raise StopIteration
            if self.what == "keyerror":
                raise KeyError("missing 'label'")
            if self.what == "odd-exception":
                raise OddError(1, 2)
            if self.what == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            if self.what == "exit":
                os._exit(3)
            if self.what == "hang":
                time.sleep(30)
        return np.full(self.size, i, np.float32)


class OddError(Exception):
    def __init__(self, a, b):  # cannot be rebuilt from a message alone
        super().__init__(a, b)


def test_exception_in_worker_is_reraised_with_worker_id_and_traceback():
    loader = DataLoader(Faulty("raise"), batch_size=2, num_workers=2)
    it = iter(loader)
    assert next(it)[:, 0].tolist() == [0, 1]
    assert next(it)[:, 0].tolist() == [2, 3]
    with pytest.raises(ValueError) as info:
        next(it)
    msg = str(info.value)
    del info  # its traceback holds the iterator, and with it the workers
    # the batch [4, 5] is the third task: round robin gives it to worker 0
    assert "Caught ValueError in DataLoader worker process 0" in msg
    assert "Original Traceback (most recent call last)" in msg
    assert "in __getitem__" in msg and 'raise ValueError(f"sample {i} is corrupt")' in msg
    assert "sample 5 is corrupt" in msg
    # the loader goes on with the next batch, as PyTorch's does
    assert next(it)[:, 0].tolist() == [6, 7]
    del it


def test_key_error_message_is_readable():
    with pytest.raises(KeyError) as info:
        list(DataLoader(Faulty("keyerror"), batch_size=2, num_workers=1))
    msg = str(info.value)
    del info  # its traceback holds the iterator, and with it the workers
    assert "\\n" not in msg and "missing 'label'" in msg


def test_stop_iteration_from_a_map_style_dataset_is_an_error_not_the_end():
    with pytest.raises(RuntimeError, match="Caught StopIteration in DataLoader worker process"):
        list(DataLoader(Faulty("stop"), batch_size=2, num_workers=2))


def test_exception_that_cannot_be_rebuilt_becomes_runtime_error():
    with pytest.raises(RuntimeError, match="Caught OddError in DataLoader worker process 0"):
        list(DataLoader(Faulty("odd-exception"), batch_size=2, num_workers=1))


def test_exception_in_the_main_process_is_the_original():
    with pytest.raises(ValueError, match="^sample 5 is corrupt$"):
        list(DataLoader(Faulty("raise"), batch_size=2, num_workers=0))


def test_worker_killed_by_a_signal_raises_quickly():
    loader = DataLoader(Faulty("kill", at=6), batch_size=2, num_workers=2)
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"DataLoader worker 1 \(pid \d+\) exited "
                                           r"unexpectedly \(killed by signal SIGKILL\)"):
        list(loader)
    assert time.monotonic() - start < 5


def test_worker_that_exits_raises():
    with pytest.raises(RuntimeError, match=r"exited unexpectedly \(exit code 3\)"):
        list(DataLoader(Faulty("exit"), batch_size=2, num_workers=2))


def test_timeout_raises():
    loader = DataLoader(Faulty("hang", at=0), batch_size=2, num_workers=1, timeout=0.3)
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="DataLoader timed out after 0.3 seconds"):
        next(iter(loader))
    # the hung worker is terminated after the grace period, not waited for
    assert time.monotonic() - start < 0.3 + 2 * _worker.POLL_INTERVAL + 2


def test_unpicklable_arguments_under_spawn_fail_at_start():
    loader = DataLoader(Faulty("none"), num_workers=2, multiprocessing_context="spawn",
                        collate_fn=lambda batch: batch)
    with pytest.raises((AttributeError, TypeError, pickle.PicklingError)):
        iter(loader)


def test_worker_init_fn_failure_names_the_worker():
    def init(worker_id):
        if worker_id == 1:
            raise OSError("no GPU for worker 1")

    loader = DataLoader(Faulty("none"), batch_size=2, num_workers=2, worker_init_fn=init)
    with pytest.raises(OSError, match="(?s)worker process 1.*no GPU for worker 1"):
        list(loader)


@pytest.mark.parametrize("persistent", [False, True])
def test_breaking_out_early_leaves_nothing_behind(persistent):
    # 1 MiB batches, eight in flight when the loop is left
    class Big(Dataset):
        def __len__(self):
            return 64

        def __getitem__(self, i):
            return np.full(1 << 16, i, np.float32)

    loader = DataLoader(Big(), batch_size=4, num_workers=2, prefetch_factor=4,
                        persistent_workers=persistent)
    it = iter(loader)
    taken = [next(it), next(it)]
    time.sleep(0.2)  # let the workers fill their pipes with batches nobody will take
    del it, loader  # as a `break` does; the no_leaks fixture then checks processes and /dev/shm
    # batches already taken are views of unlinked mappings: they outlive the workers
    assert taken[1][:, 0].tolist() == [4, 5, 6, 7]


def test_breaking_out_of_a_slow_epoch_is_quick():
    loader = DataLoader(Faulty("hang", at=3), batch_size=1, num_workers=2)
    start = time.monotonic()
    for k, _ in enumerate(loader):
        if k == 1:
            break
    assert time.monotonic() - start < 5


def test_batches_in_flight_leave_nothing_in_dev_shm(segments):
    # 4 x 16 KiB samples: 64 KiB batches, large enough to travel in shared memory, which
    # has no name while in flight: only descriptors, in the worker and then on the socket
    loader = DataLoader(Faulty("none", n=40, size=1 << 12), batch_size=4, num_workers=2,
                        prefetch_factor=2)
    it = iter(loader)
    first = next(it)
    time.sleep(0.2)  # the workers fill the sockets with the prefetched batches
    assert [n for n in os.listdir(_shm.SHM_DIR) if n.startswith(f"tc{os.getpid()}_")] == []
    rest = list(it)
    assert len(rest) == 9 and first.shape == (4, 1 << 12)
    del first, rest  # each mapping keeps a descriptor of its segment
    assert segments() == []


LOADS_AND_WAITS = """
import os, sys, time, numpy as np
from torcia.data import DataLoader, Dataset

class Big(Dataset):
    def __len__(self):
        return 1000
    def __getitem__(self, i):
        return np.full(1 << 16, i, np.float32)  # 256 KiB samples: 1 MiB batches

loader = DataLoader(Big(), batch_size=4, num_workers=2, prefetch_factor=4)
it = iter(loader)
next(it)
time.sleep(0.5)  # batches in flight: written by the workers, not taken
print(os.getpid(), flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_killed_main_process_leaves_nothing_in_dev_shm(sig):
    # issue #20: named segments of batches in flight stayed in /dev/shm when the main
    # process died by a signal (PyTorch leaves none)
    if not os.path.isdir(_shm.SHM_DIR):
        pytest.skip("no /dev/shm here")
    proc = subprocess.Popen([sys.executable, "-c", LOADS_AND_WAITS], stdout=subprocess.PIPE,
                            text=True)
    try:
        pid = int(proc.stdout.readline())
        os.kill(pid, sig)
        proc.wait(30)
    finally:
        proc.kill()
        proc.wait()
    mine = f"tc{pid}_"
    deadline = time.monotonic() + 3 * _worker.POLL_INTERVAL + 2
    while time.monotonic() < deadline and any(n.startswith(mine)
                                              for n in os.listdir(_shm.SHM_DIR)):
        time.sleep(0.1)
    assert [n for n in os.listdir(_shm.SHM_DIR) if n.startswith(mine)] == []


def test_workers_exit_when_the_main_process_is_killed(tmp_path):
    script = textwrap.dedent("""
        import os, sys, numpy as np
        from torcia.data import DataLoader, Dataset

        class D(Dataset):
            def __len__(self):
                return 100
            def __getitem__(self, i):
                return np.full(4, os.getpid())

        loader = DataLoader(D(), batch_size=2, num_workers=2, persistent_workers=True)
        pids = {int(p) for b in loader for p in b[:, 0].tolist()}
        print(" ".join(map(str, pids)), flush=True)
        os.kill(os.getpid(), 9)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60)
    pids = [int(p) for p in out.stdout.split()]
    assert len(pids) == 2, out.stderr
    deadline = time.monotonic() + 3 * _worker.POLL_INTERVAL + 2
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    assert not any(_alive(p) for p in pids)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_iterable_dataset_whose_iter_fails_on_a_later_epoch():
    class Once(IterableDataset):
        def __init__(self):
            self.started = 0

        def __iter__(self):
            self.started += 1
            if self.started > 1:
                raise OSError("stream closed")
            return iter(range(4))

    loader = DataLoader(Once(), batch_size=2, num_workers=1, persistent_workers=True)
    assert [b.tolist() for b in loader] == [[0, 1], [2, 3]]
    with pytest.raises(OSError, match="(?s)worker process 0.*stream closed"):
        list(loader)
    del loader
