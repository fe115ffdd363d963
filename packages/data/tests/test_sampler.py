"""Samplers: exact orders where they are deterministic, distributions where they are random
(fixed seeds, bounds loose enough that a correct sampler passes for any seed)."""

import collections
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import torcia
from torcia.data import (
    BatchSampler,
    DistributedSampler,
    RandomSampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)


def gen(seed=0):
    return torcia.Generator().manual_seed(seed)


def chi2_uniform(counts, n_cells):
    """Pearson's statistic against a uniform distribution over ``n_cells``."""
    total = sum(counts.values())
    expected = total / n_cells
    return sum((counts.get(c, 0) - expected) ** 2 / expected for c in range(n_cells))


def test_sequential_sampler_order():
    s = SequentialSampler(range(5))
    assert list(s) == [0, 1, 2, 3, 4] and len(s) == 5


def test_random_sampler_is_a_permutation_following_its_generator():
    s = RandomSampler(range(10), generator=gen(1))
    first = list(s)
    assert sorted(first) == list(range(10)) and len(s) == 10
    assert first == torcia.randperm(10, generator=gen(1)).tolist()
    assert list(s) != first  # the generator moved on: the next epoch is another order


def test_random_sampler_without_generator_follows_manual_seed():
    torcia.manual_seed(0)
    a = list(RandomSampler(range(50)))
    torcia.manual_seed(0)
    assert list(RandomSampler(range(50))) == a


def test_random_sampler_positions_are_uniform():
    # where index 0 lands over many permutations: uniform over the 10 positions
    s = RandomSampler(range(10), generator=gen(2))
    counts = collections.Counter(list(s).index(0) for _ in range(2000))
    # 9 degrees of freedom: the 0.999 quantile is 27.9
    assert chi2_uniform(counts, 10) < 27.9


def test_random_sampler_num_samples_chains_permutations():
    s = RandomSampler(range(4), num_samples=10, generator=gen(0))
    out = list(s)
    assert len(out) == len(s) == 10
    assert sorted(out[:4]) == sorted(out[4:8]) == [0, 1, 2, 3]
    assert len(set(out[8:])) == 2


def test_random_sampler_with_replacement_is_uniform():
    s = RandomSampler(range(10), replacement=True, num_samples=20000, generator=gen(3))
    out = list(s)
    assert len(out) == 20000 and min(out) == 0 and max(out) == 9
    assert chi2_uniform(collections.Counter(out), 10) < 27.9
    # with replacement, repeats happen in a short run (a permutation would have none)
    assert len(set(out[:10])) < 10


@pytest.mark.parametrize(
    "kwargs, error, match",
    [({"replacement": 1}, TypeError, "replacement should be a boolean value"),
     ({"num_samples": 0}, ValueError, "num_samples should be a positive integer value"),
     ({"num_samples": 2.5}, ValueError, "num_samples should be a positive integer value")],
)
def test_random_sampler_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        RandomSampler(range(3), **kwargs)


def test_subset_random_sampler():
    idx = [10, 20, 30, 40, 50]
    s = SubsetRandomSampler(idx, generator=gen(0))
    out = list(s)
    assert sorted(out) == idx and len(s) == 5
    perm = torcia.randperm(5, generator=gen(0)).tolist()
    assert out == [idx[i] for i in perm]
    # which index comes first, over many epochs: uniform over the 5 (4 degrees of freedom)
    counts = collections.Counter(idx.index(list(s)[0]) for _ in range(2000))
    assert chi2_uniform(counts, 5) < 18.5


def test_weighted_random_sampler_frequencies_follow_weights():
    weights = [1.0, 2.0, 3.0, 4.0]
    s = WeightedRandomSampler(weights, 40000, generator=gen(4))
    counts = collections.Counter(s)
    assert len(s) == 40000
    for i, w in enumerate(weights):
        p = w / 10
        sd = math.sqrt(40000 * p * (1 - p))
        assert abs(counts[i] - 40000 * p) < 5 * sd


def test_weighted_random_sampler_zero_weight_never_drawn():
    s = WeightedRandomSampler(torcia.tensor([0.0, 1.0, 0.0, 1.0]), 1000, generator=gen(0))
    assert set(s) == {1, 3}


def test_weighted_random_sampler_without_replacement():
    s = WeightedRandomSampler([1.0] * 6, 6, replacement=False, generator=gen(0))
    assert sorted(s) == list(range(6))
    with pytest.raises(RuntimeError, match="cannot sample n_sample > prob_dist"):
        list(WeightedRandomSampler([1.0] * 3, 4, replacement=False))


def test_weighted_random_sampler_bad_arguments():
    with pytest.raises(ValueError, match="weights should be a 1d sequence"):
        WeightedRandomSampler([[1.0, 2.0]], 2)
    with pytest.raises(ValueError, match="num_samples should be a positive integer"):
        WeightedRandomSampler([1.0], -1)
    with pytest.raises(TypeError, match="replacement should be a boolean"):
        WeightedRandomSampler([1.0], 1, replacement="yes")


@pytest.mark.parametrize(
    "n, size, drop_last, expected",
    [(7, 3, False, [[0, 1, 2], [3, 4, 5], [6]]),
     (7, 3, True, [[0, 1, 2], [3, 4, 5]]),
     (6, 3, True, [[0, 1, 2], [3, 4, 5]]),
     (2, 5, False, [[0, 1]]),
     (2, 5, True, [])],
)
def test_batch_sampler_exact_batches(n, size, drop_last, expected):
    s = BatchSampler(SequentialSampler(range(n)), size, drop_last)
    assert list(s) == expected and len(s) == len(expected)


def test_batch_sampler_keeps_the_inner_order():
    inner = RandomSampler(range(10), generator=gen(5))
    order = torcia.randperm(10, generator=gen(5)).tolist()
    assert [i for b in BatchSampler(inner, 4, False) for i in b] == order


def test_batch_sampler_bad_arguments():
    with pytest.raises(ValueError, match="batch_size should be a positive integer value"):
        BatchSampler(range(3), 0, False)
    with pytest.raises(TypeError, match="drop_last should be a boolean value"):
        BatchSampler(range(3), 2, None)


def test_distributed_sampler_exact_shards_without_shuffle():
    shards = [list(DistributedSampler(range(10), 3, r, shuffle=False)) for r in range(3)]
    # 10 indices padded to 12 by repeating the start: 0 and 1
    assert shards == [[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]
    dropped = [list(DistributedSampler(range(10), 3, r, shuffle=False, drop_last=True))
               for r in range(3)]
    assert dropped == [[0, 3, 6], [1, 4, 7], [2, 5, 8]]
    assert len(DistributedSampler(range(10), 3, 0)) == 4
    assert len(DistributedSampler(range(10), 3, 0, drop_last=True)) == 3


def test_distributed_sampler_shuffled_shards_partition_one_permutation():
    samplers = [DistributedSampler(range(20), 4, r, seed=7) for r in range(4)]
    shards = [list(s) for s in samplers]
    assert sorted(i for s in shards for i in s) == list(range(20))
    order = torcia.randperm(20, generator=gen(7)).tolist()
    assert shards[1] == order[1::4]


def test_distributed_sampler_set_epoch_changes_the_order_on_every_replica_alike():
    a, b = DistributedSampler(range(16), 2, 0), DistributedSampler(range(16), 2, 1)
    epoch0 = list(a)
    assert list(a) == epoch0  # same epoch, same order
    a.set_epoch(1)
    b.set_epoch(1)
    epoch1 = list(a)
    assert epoch1 != epoch0
    assert sorted(epoch1 + list(b)) == list(range(16))


def test_distributed_sampler_pads_a_tiny_dataset_by_cycling():
    shards = [list(DistributedSampler(range(2), 5, r, shuffle=False)) for r in range(5)]
    assert shards == [[0], [1], [0], [1], [0]]


def test_distributed_sampler_shuffle_is_uniform_over_epochs():
    s = DistributedSampler(range(8), 2, 0, seed=1)
    counts = collections.Counter()
    for epoch in range(2000):
        s.set_epoch(epoch)
        counts[list(s)[0]] += 1
    assert chi2_uniform(counts, 8) < 24.3  # 7 degrees of freedom, 0.999 quantile


def test_distributed_sampler_rank_and_world_size():
    with pytest.raises(ValueError, match=r"Invalid rank 2, rank should be in the interval \[0, 1"):
        DistributedSampler(range(4), num_replicas=2, rank=2)


def test_distributed_sampler_reads_the_launcher_environment(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    assert list(DistributedSampler(range(4), shuffle=False)) == [1, 3]
    monkeypatch.delenv("RANK")
    with pytest.raises(ValueError, match="needs rank"):
        DistributedSampler(range(4))


@pytest.mark.torch
def test_orders_match_pytorch_where_deterministic():
    torch = pytest.importorskip("torch")
    tud = torch.utils.data
    for n, r, drop in ((10, 3, False), (10, 3, True), (2, 5, False)):
        for rank in range(r):
            ours = list(DistributedSampler(range(n), r, rank, shuffle=False, drop_last=drop))
            theirs = list(tud.DistributedSampler(range(n), r, rank, shuffle=False,
                                                 drop_last=drop))
            assert ours == theirs
    for n, size, drop in ((7, 3, False), (7, 3, True)):
        assert list(BatchSampler(range(n), size, drop)) == list(tud.BatchSampler(range(n), size,
                                                                                  drop))


def test_numpy_weights_accepted():
    s = WeightedRandomSampler(np.array([0.0, 5.0]), 3, generator=gen(0))
    assert list(s) == [1, 1, 1]


@given(n=st.integers(0, 60), size=st.integers(1, 10), drop_last=st.booleans())
def test_batch_sampler_partitions_the_order(n, size, drop_last):
    batches = list(BatchSampler(range(n), size, drop_last))
    assert len(batches) == len(BatchSampler(range(n), size, drop_last))
    assert all(len(b) == size for b in batches[:-1])
    flat = [i for b in batches for i in b]
    assert flat == list(range(len(flat)))
    assert len(flat) == (n - n % size if drop_last else n)


@given(n=st.integers(1, 50), replicas=st.integers(1, 8), drop_last=st.booleans(),
       seed=st.integers(0, 100))
def test_distributed_shards_are_equal_and_cover_the_data(n, replicas, drop_last, seed):
    shards = [list(DistributedSampler(range(n), replicas, r, seed=seed, drop_last=drop_last))
              for r in range(replicas)]
    sizes = {len(s) for s in shards}
    assert sizes == {len(DistributedSampler(range(n), replicas, 0, drop_last=drop_last))}
    seen = [i for s in shards for i in s]
    if drop_last:
        assert len(seen) == len(set(seen)) == n - n % replicas  # disjoint, the tail dropped
    else:
        assert set(seen) == set(range(n))  # everything, a few padded twice


def test_random_sampler_with_replacement_draws_lazily():
    import itertools

    import torcia
    from torcia.data import RandomSampler

    sampler = RandomSampler(range(5), replacement=True, num_samples=10**10,
                            generator=torcia.Generator().manual_seed(0))
    assert len(sampler) == 10**10
    first = list(itertools.islice(iter(sampler), 100))
    assert len(first) == 100 and set(first) <= set(range(5)) and len(set(first)) > 1
    assert len(list(RandomSampler(range(5), replacement=True, num_samples=70))) == 70
