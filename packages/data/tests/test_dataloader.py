"""DataLoader behaviour, the same with 0, 1 and 2 workers; every test here also checks that
no worker process or shared-memory segment is left behind."""

import collections
import multiprocessing as mp
import os
import random
import time
import warnings

import numpy as np
import pytest

import torcia
from torcia.data import (
    DataLoader,
    Dataset,
    IterableDataset,
    RandomSampler,
    TensorDataset,
    _worker,
    get_worker_info,
)

pytestmark = pytest.mark.usefixtures("no_leaks")
WORKERS = [0, 1, 2]


class Items(Dataset):
    """Sample i: a small image-like array, the index, and a string."""

    def __init__(self, n=10):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return {"x": np.full((2, 3), i, np.float32), "i": i, "name": f"item{i}"}


class Seeds(Dataset):
    """What a sample sees of the worker: its id, seed and a draw from each generator."""

    def __len__(self):
        return 8

    def __getitem__(self, i):
        info = get_worker_info()
        return {"worker": -1 if info is None else info.id,
                "seed": -1 if info is None else info.seed,
                "torcia": torcia.rand(1).item(), "numpy": np.random.rand(),
                "random": random.random(), "pid": os.getpid()}


class Sharded(IterableDataset):
    """0 .. n-1, split between workers by get_worker_info."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = get_worker_info()
        if info is None:
            return iter(range(self.n))
        return iter(range(info.id, self.n, info.num_workers))

    def __len__(self):
        return self.n


def gen(seed=0):
    return torcia.Generator().manual_seed(seed)


@pytest.mark.parametrize("workers", WORKERS)
def test_exact_batches_in_order(workers):
    loader = DataLoader(Items(10), batch_size=4, num_workers=workers)
    batches = list(loader)
    assert len(loader) == len(batches) == 3
    assert [b["i"].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert batches[2]["name"] == ["item8", "item9"]
    assert batches[1]["x"].shape == (4, 2, 3) and batches[1]["x"].dtype is torcia.float32
    assert np.array_equal(batches[1]["x"].numpy()[:, 0, 0], [4, 5, 6, 7])


@pytest.mark.parametrize("workers", WORKERS)
def test_drop_last(workers):
    loader = DataLoader(Items(10), batch_size=4, drop_last=True, num_workers=workers)
    assert [b["i"].tolist() for b in loader] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert len(loader) == 2


@pytest.mark.parametrize("workers", [1, 2])
def test_shuffled_order_does_not_depend_on_workers(workers):
    def order(num_workers):
        loader = DataLoader(Items(23), batch_size=5, shuffle=True, generator=gen(11),
                            num_workers=num_workers)
        return [b["i"].tolist() for b in loader]

    expected = order(0)
    assert sorted(i for b in expected for i in b) == list(range(23))
    assert order(workers) == expected


def test_shuffle_without_generator_follows_manual_seed():
    def order():
        torcia.manual_seed(3)
        return [b["i"].tolist() for b in DataLoader(Items(12), batch_size=4, shuffle=True)]

    assert order() == order()


def test_the_sampler_draws_after_the_base_seed():
    # the loader draws the workers' base seed, then the sampler draws the order
    g = gen(5)
    g.spawn_seed()
    expected = torcia.randperm(9, generator=g).tolist()
    loader = DataLoader(Items(9), batch_size=9, shuffle=True, generator=gen(5))
    assert next(iter(loader))["i"].tolist() == expected


def test_worker_seeds_are_base_seed_plus_id():
    loader = DataLoader(Seeds(), batch_size=2, num_workers=2, generator=gen(7))
    batches = list(loader)
    base = gen(7).spawn_seed()
    for k, b in enumerate(batches):
        worker = k % 2  # batches go to the workers round robin
        assert b["worker"].tolist() == [worker, worker]
        assert b["seed"].tolist() == [base + worker] * 2
    # every generator is seeded per worker: the two workers draw different streams...
    assert batches[0]["torcia"].tolist() != batches[1]["torcia"].tolist()
    assert batches[0]["numpy"].tolist() != batches[1]["numpy"].tolist()
    assert batches[0]["random"].tolist() != batches[1]["random"].tolist()
    # ...and the same streams again for the same loader seed
    again = list(DataLoader(Seeds(), batch_size=2, num_workers=2, generator=gen(7)))
    for a, b in zip(batches, again):
        for key in ("torcia", "numpy", "random"):
            assert a[key].tolist() == b[key].tolist()


def test_worker_seed_stream_matches_manual_seed():
    loader = DataLoader(Seeds(), batch_size=1, num_workers=1, generator=gen(7))
    first = next(iter(loader))
    torcia.manual_seed(gen(7).spawn_seed())
    assert first["torcia"].item() == torcia.rand(1).item()


def test_worker_init_fn_runs_in_each_worker():
    def init(worker_id):
        info = get_worker_info()
        info.dataset.tag = f"w{worker_id}/{info.num_workers}"

    class Tagged(Dataset):
        tag = "main"

        def __len__(self):
            return 4

        def __getitem__(self, i):
            return self.tag

    loader = DataLoader(Tagged(), batch_size=1, num_workers=2, worker_init_fn=init)
    assert [b[0] for b in loader] == ["w0/2", "w1/2", "w0/2", "w1/2"]
    assert get_worker_info() is None


@pytest.mark.parametrize("workers", WORKERS)
def test_iterable_dataset_sharded_by_worker_info(workers):
    loader = DataLoader(Sharded(10), batch_size=3, num_workers=workers)
    got = [b.tolist() for b in loader]
    expected = {
        0: [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]],
        1: [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]],
        # worker 0 streams 0 2 4 6 8, worker 1 streams 1 3 5 7 9; batches alternate
        2: [[0, 2, 4], [1, 3, 5], [6, 8], [7, 9]],
    }[workers]
    assert got == expected
    assert len(loader) == 4


def test_iterable_dataset_unequal_shards_and_drop_last():
    loader = DataLoader(Sharded(7), batch_size=2, num_workers=2, drop_last=True)
    # worker 0: 0 2 4 6 -> [0 2] [4 6]; worker 1: 1 3 5 -> [1 3], its [5] dropped
    assert [b.tolist() for b in loader] == [[0, 2], [1, 3], [4, 6]]


def test_iterable_dataset_without_sharding_is_repeated_per_worker():
    class Plain(IterableDataset):
        def __iter__(self):
            return iter(range(4))

    got = [b.tolist() for b in DataLoader(Plain(), batch_size=2, num_workers=2)]
    assert got == [[0, 1], [0, 1], [2, 3], [2, 3]]


@pytest.mark.parametrize("workers", WORKERS)
def test_no_automatic_batching(workers):
    loader = DataLoader(Items(3), batch_size=None, num_workers=workers)
    samples = list(loader)
    assert len(loader) == 3
    assert [s["i"] for s in samples] == [0, 1, 2]
    assert isinstance(samples[1]["x"], torcia.Tensor) and samples[1]["x"].shape == (2, 3)


@pytest.mark.parametrize("workers", WORKERS)
def test_iterable_dataset_without_automatic_batching(workers):
    # samples one by one, Python ints kept as they are (default_convert); with two workers
    # the streams 0 2 4 and 1 3 interleave back into order
    assert list(DataLoader(Sharded(5), batch_size=None, num_workers=workers)) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("workers", WORKERS)
def test_batch_sampler_and_collate_fn(workers):
    def collate(samples):
        return np.stack([s["x"] for s in samples]), [s["i"] for s in samples]

    loader = DataLoader(Items(10), batch_sampler=[[9, 0], [3], [4, 5, 6]], collate_fn=collate,
                        num_workers=workers)
    got = list(loader)
    assert [ids for _, ids in got] == [[9, 0], [3], [4, 5, 6]]
    assert isinstance(got[0][0], np.ndarray) and got[0][0][:, 0, 0].tolist() == [9.0, 0.0]


@pytest.mark.parametrize("workers", [0, 2])
def test_sampler_argument(workers):
    loader = DataLoader(Items(6), batch_size=2, sampler=[5, 4, 3, 2, 1, 0], num_workers=workers)
    assert [b["i"].tolist() for b in loader] == [[5, 4], [3, 2], [1, 0]]


def test_tensor_dataset_through_workers_is_exact():
    x = torcia.randn(50, 3, generator=gen(0))
    y = torcia.arange(50)
    got = list(DataLoader(TensorDataset(x, y), batch_size=16, num_workers=2))
    assert np.array_equal(torcia.cat([b[0] for b in got]).numpy(), x.numpy())
    assert torcia.cat([b[1] for b in got]).tolist() == list(range(50))


def test_batches_from_workers_are_writable_and_independent():
    data = torcia.zeros(8, 4)
    loader = DataLoader(TensorDataset(data), batch_size=4, num_workers=1)
    first = next(iter(loader))[0]
    first += 1
    assert first.sum().item() == 16 and data.sum().item() == 0


def test_empty_and_zero_size_arrays_cross():
    class Shapes(Dataset):
        def __len__(self):
            return 2

        def __getitem__(self, i):
            return np.zeros((0, 3), np.float32), torcia.tensor(float(i))

    got = list(DataLoader(Shapes(), batch_size=2, num_workers=1))
    assert got[0][0].shape == (2, 0, 3) and got[0][1].tolist() == [0.0, 1.0]


def test_persistent_workers_keep_their_processes_across_epochs():
    loader = DataLoader(Seeds(), batch_size=2, num_workers=2, persistent_workers=True)
    pids = [set(b["pid"].tolist()) for b in loader]
    second = [set(b["pid"].tolist()) for b in loader]
    assert len(set().union(*pids)) == 2 and set().union(*pids) == set().union(*second)
    del loader


def test_persistent_workers_after_an_abandoned_epoch():
    loader = DataLoader(Items(20), batch_size=2, num_workers=2, persistent_workers=True,
                        prefetch_factor=3)
    for _ in loader:
        break  # six batches are in flight
    assert [b["i"].tolist()[0] for b in loader] == list(range(0, 20, 2))
    del loader


def test_persistent_workers_restart_iterable_datasets():
    loader = DataLoader(Sharded(6), batch_size=2, num_workers=2, persistent_workers=True)
    first = [b.tolist() for b in loader]
    for _ in loader:
        break
    assert [b.tolist() for b in loader] == first == [[0, 2], [1, 3], [4], [5]]
    del loader


def test_prefetch_factor_bounds_the_work_ahead():
    fetched = mp.get_context("fork").Value("i", 0)

    class Counting(Dataset):
        def __len__(self):
            return 100

        def __getitem__(self, i):
            with fetched.get_lock():
                fetched.value += 1
            return i

    loader = DataLoader(Counting(), batch_size=1, num_workers=2, prefetch_factor=2)
    it = iter(loader)
    next(it)
    # 2 workers x 2 batches in flight, plus the one handed out after the first was taken
    deadline = time.monotonic() + 5
    while fetched.value < 5 and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.3)  # time enough to load more, if anything asked for more
    assert fetched.value == 5
    del it


def test_len_of_iterable_dataset_loader():
    assert len(DataLoader(Sharded(10), batch_size=3)) == 4
    assert len(DataLoader(Sharded(10), batch_size=3, drop_last=True)) == 3
    assert len(DataLoader(Sharded(10), batch_size=None)) == 10


def test_pin_memory_without_cuda_warns_and_loads_as_usual():
    if torcia.cuda.is_available():
        pytest.skip("CUDA is available here: batches are pinned")
    loader = DataLoader(Items(2), batch_size=2, pin_memory=True, pin_memory_device="cpu")
    with pytest.warns(UserWarning, match="CUDA is not available"):
        batch = next(iter(loader))
    assert batch["i"].tolist() == [0, 1] and not batch["i"].is_pinned()


def test_pinning_reaches_every_tensor_of_a_batch(monkeypatch):
    from collections import namedtuple

    from torcia.data.dataloader import _pin_batch

    monkeypatch.setattr(torcia.Tensor, "pin_memory", lambda self: ("pinned", self.item()))
    pair = namedtuple("Pair", "a b")
    batch = {"x": [torcia.tensor(1), (torcia.tensor(2), "label")], "p": pair(torcia.tensor(3), 4)}
    assert _pin_batch(batch) == {"x": [("pinned", 1), (("pinned", 2), "label")],
                                 "p": pair(("pinned", 3), 4)}


@pytest.mark.parametrize(
    "kwargs, match",
    [({"num_workers": -1}, "num_workers option should be non-negative"),
     ({"timeout": -1}, "timeout option should be non-negative"),
     ({"prefetch_factor": 2}, "prefetch_factor option could only be specified in multiproc"),
     ({"num_workers": 1, "prefetch_factor": 0}, "prefetch_factor should be a positive integer"),
     ({"persistent_workers": True}, "persistent_workers option needs num_workers > 0"),
     ({"multiprocessing_context": "spawn"}, "multiprocessing_context can only be used"),
     ({"num_workers": 1, "multiprocessing_context": "bogus"}, "cannot find context for 'bogus'"),
     ({"sampler": [0], "shuffle": True}, "sampler option is mutually exclusive with shuffle"),
     ({"batch_sampler": [[0]], "batch_size": 2}, "batch_sampler option is mutually exclusive"),
     ({"batch_sampler": [[0]], "drop_last": True}, "batch_sampler option is mutually exclusive"),
     ({"batch_size": None, "drop_last": True}, "batch_size=None option disables auto-batching")],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        DataLoader(Items(2), **kwargs)


def test_sampling_attributes_are_fixed_after_construction():
    loader = DataLoader(Items(4), batch_size=2)
    with pytest.raises(ValueError, match="batch_size attribute should not be set after "
                                         "DataLoader is initialized"):
        loader.batch_size = 3
    loader.num_workers = 2  # others may change, as in PyTorch
    assert [b["i"].tolist() for b in loader] == [[0, 1], [2, 3]]


@pytest.mark.parametrize("name", ["shuffle", "sampler", "batch_sampler"])
def test_iterable_dataset_rejects_sampling_options(name):
    value = {"shuffle": True, "sampler": [0], "batch_sampler": [[0]]}[name]
    with pytest.raises(ValueError, match=f"expected unspecified {name} option"):
        DataLoader(Sharded(3), **{name: value})


def test_random_sampler_instance_with_workers():
    sampler = RandomSampler(Items(10), generator=gen(2))
    expected = torcia.randperm(10, generator=gen(2)).tolist()
    got = [b["i"].item() for b in DataLoader(Items(10), sampler=sampler, num_workers=2)]
    assert got == expected


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_other_start_methods(method):
    # a dataset class the fresh interpreter can import by name, wherever pytest runs from
    ds = TensorDataset(torcia.arange(7))
    loader = DataLoader(ds, batch_size=3, num_workers=2, multiprocessing_context=method)
    assert [b[0].tolist() for b in loader] == [[0, 1, 2], [3, 4, 5], [6]]


def test_forkserver_workers_outlive_a_wait_for_tasks():
    # a forkserver worker's parent is the fork server, not the main process: persistent
    # workers idle past the poll interval took that for their main process having died
    ds = TensorDataset(torcia.arange(4))
    loader = DataLoader(ds, batch_size=2, num_workers=2, persistent_workers=True,
                        multiprocessing_context="forkserver")
    assert [b[0].tolist() for b in loader] == [[0, 1], [2, 3]]
    time.sleep(_worker.POLL_INTERVAL * 2.5)
    assert [b[0].tolist() for b in loader] == [[0, 1], [2, 3]]


def test_loader_iterated_twice_gives_two_epochs():
    loader = DataLoader(Items(4), batch_size=2, num_workers=2)
    counts = collections.Counter(i for _ in range(2) for b in loader for i in b["i"].tolist())
    assert counts == {0: 2, 1: 2, 2: 2, 3: 2}


@pytest.mark.parametrize("options", [{"num_workers": 2},
                                     {"num_workers": 2, "persistent_workers": True}])
def test_shuffled_epochs_do_not_depend_on_workers_or_persistence(options):
    def epochs(**kwargs):
        loader = DataLoader(Items(9), batch_size=3, shuffle=True, generator=gen(4), **kwargs)
        return [[b["i"].tolist() for b in loader] for _ in range(3)]

    expected = epochs()
    assert expected[0] != expected[1]
    assert epochs(**options) == expected


def test_more_workers_than_cpus_warns_once(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    loader = DataLoader(Items(4), batch_size=2, num_workers=2, persistent_workers=True)
    with pytest.warns(UserWarning, match="create 2 worker processes in total, but this "
                                         "process may only use 1 CPUs"):
        assert len(list(loader)) == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(list(loader)) == 2
    del loader


def test_batches_that_arrive_early_wait_for_their_turn():
    class SlowFirst(Dataset):
        def __len__(self):
            return 6

        def __getitem__(self, i):
            if i == 0:
                time.sleep(0.3)  # worker 1 finishes batches 1 and 3 before batch 0 is done
            return i

    got = [b.item() for b in DataLoader(SlowFirst(), batch_size=1, num_workers=2)]
    assert got == [0, 1, 2, 3, 4, 5]


class Wide(Dataset):
    """Samples large enough to travel in shared memory, with their index."""

    def __len__(self):
        return 57

    def __getitem__(self, i):
        return np.full(1 << 14, i, np.float32), i


@pytest.mark.slow
def test_random_configurations_with_early_breaks():
    rng = random.Random(0)
    for trial in range(30):
        iterable = rng.random() < 0.3
        loader = DataLoader(
            Sharded(41) if iterable else Wide(), batch_size=rng.choice([1, 4, 7]),
            num_workers=rng.choice([1, 2]), persistent_workers=rng.random() < 0.5,
            prefetch_factor=rng.choice([1, 2, 4]), shuffle=None if iterable else True,
            generator=gen(trial),
        )
        for _ in range(3):
            stop = rng.choice([None, 0, 2, 5])
            seen = []
            for k, batch in enumerate(loader):
                seen += batch.tolist() if iterable else batch[1].tolist()
                if k == stop:
                    break
            if stop is None:
                assert sorted(seen) == list(range(41 if iterable else 57)), trial
        del loader, batch
