import subprocess
import sys

import pytest

import torcia
from torcia.data import (
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    StackDataset,
    Subset,
    TensorDataset,
    random_split,
)


class Squares(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return i * i


class Stream(IterableDataset):
    def __init__(self, items):
        self.items = items

    def __iter__(self):
        return iter(self.items)

    def __len__(self):
        return len(self.items)


def test_utils_data_is_the_same_module():
    import torcia.data
    import torcia.utils.data

    assert torcia.utils.data is torcia.data
    assert torcia.utils.data.DataLoader is torcia.data.DataLoader


@pytest.mark.parametrize("first, second", [("torcia.utils.data", "torcia.data"),
                                           ("torcia.data", "torcia.utils.data")])
def test_utils_data_submodules_are_the_same_modules_whichever_comes_first(first, second):
    # a fresh interpreter: which name is imported first is the point
    script = (
        f"import importlib, torcia\n"
        f"a = importlib.import_module('{first}.sampler')\n"
        f"b = importlib.import_module('{second}.sampler')\n"
        f"from {second}.distributed import DistributedSampler\n"
        f"assert a is b and DistributedSampler is torcia.data.DistributedSampler\n"
        f"assert torcia.utils.data is torcia.data\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True)


def test_dataset_base_class_asks_for_getitem():
    with pytest.raises(NotImplementedError, match="__getitem__"):
        Dataset()[0]
    with pytest.raises(NotImplementedError, match="__iter__"):
        iter(IterableDataset())


def test_tensor_dataset_rows():
    x = torcia.arange(12).reshape(4, 3)
    y = torcia.tensor([1, 0, 1, 0])
    ds = TensorDataset(x, y)
    assert len(ds) == 4
    row, label = ds[2]
    assert row.tolist() == [6, 7, 8] and label.item() == 1


def test_tensor_dataset_batched_fetch_matches_single_fetches():
    x = torcia.randn(10, 2, 3)
    y = torcia.arange(10)
    ds = TensorDataset(x, y)
    indices = [7, 0, 7, -1]
    batch = ds.__getitems__(indices)
    assert len(batch) == 4
    for (bx, by), i in zip(batch, indices):
        sx, sy = ds[i]
        assert bx.shape == sx.shape and by.shape == sy.shape == ()
        assert bx.tolist() == sx.tolist() and by.item() == sy.item()


def test_tensor_dataset_batched_fetch_of_tensors_that_require_grad():
    pytest.importorskip("torcia.autograd")
    w = torcia.ones(4, 2, requires_grad=True)
    rows = TensorDataset(w).__getitems__([1, 2])
    assert all(r[0].requires_grad for r in rows)


def test_tensor_dataset_size_mismatch():
    with pytest.raises(ValueError, match="Size mismatch between tensors"):
        TensorDataset(torcia.zeros(3), torcia.zeros(4))


def test_concat_dataset_indexing_and_add():
    ds = Squares(3) + Squares(2)
    assert isinstance(ds, ConcatDataset)
    assert [ds[i] for i in range(len(ds))] == [0, 1, 4, 0, 1]
    assert ds[-1] == 1 and ds[-5] == 0
    assert ds.cumulative_sizes == [3, 5]
    with pytest.raises(ValueError, match="should not exceed dataset length"):
        ds[-6]
    with pytest.raises(IndexError):
        ds[5]


def test_concat_dataset_rejects_empty_and_iterable():
    with pytest.raises(ValueError, match="should not be an empty iterable"):
        ConcatDataset([])
    with pytest.raises(TypeError, match="does not support IterableDataset"):
        ConcatDataset([Stream([1])])


def test_chain_dataset_and_iterable_add():
    chained = Stream([1, 2]) + Stream([3])
    assert isinstance(chained, ChainDataset)
    assert list(chained) == [1, 2, 3] and len(chained) == 3
    with pytest.raises(TypeError, match="only supports IterableDataset"):
        list(ChainDataset([Squares(2)]))


def test_subset_single_and_batched_fetch():
    s = Subset(Squares(10), [9, 2, 5])
    assert len(s) == 3
    assert [s[i] for i in range(3)] == [81, 4, 25]
    assert s.__getitems__([2, 0]) == [25, 81]


def test_stack_dataset_tuple_and_dict():
    t = StackDataset(Squares(3), ["a", "b", "c"])
    assert t[2] == (4, "c") and len(t) == 3
    assert t.__getitems__([0, 2]) == [(0, "a"), (4, "c")]
    d = StackDataset(sq=Squares(3), name=["a", "b", "c"])
    assert d[1] == {"sq": 1, "name": "b"}
    assert d.__getitems__([1]) == [{"sq": 1, "name": "b"}]


@pytest.mark.parametrize(
    "args, kwargs, match",
    [((), {}, "At least one dataset"),
     (([1],), {"b": [2]}, "but both types are given"),
     (([1], [1, 2]), {}, "Size mismatch between datasets")],
)
def test_stack_dataset_errors(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        StackDataset(*args, **kwargs)


def test_random_split_lengths_partition_the_dataset():
    parts = random_split(range(10), [3, 7], generator=torcia.Generator().manual_seed(0))
    assert [len(p) for p in parts] == [3, 7]
    assert sorted(list(parts[0]) + list(parts[1])) == list(range(10))


def test_random_split_is_reproducible_and_follows_the_generator():
    def split(seed):
        return [list(p) for p in random_split(range(20), [10, 10],
                                              generator=torcia.Generator().manual_seed(seed))]

    assert split(3) == split(3)
    assert split(3) != split(4)
    order = torcia.randperm(20, generator=torcia.Generator().manual_seed(3)).tolist()
    assert split(3) == [order[:10], order[10:]]


def test_random_split_fractions_deal_the_remainder_in_order():
    parts = random_split(range(11), [0.5, 0.3, 0.2], generator=torcia.Generator().manual_seed(0))
    # floor gives 5, 3, 2 (10); the one left over goes to the first part
    assert [len(p) for p in parts] == [6, 3, 2]


def test_random_split_errors():
    with pytest.raises(ValueError, match="Sum of input lengths does not equal"):
        random_split(range(10), [3, 3])
    with pytest.raises(ValueError, match="not between 0 and 1"):
        random_split(range(10), [1.5, -0.5])
    with pytest.warns(UserWarning, match="Length of split at index 1 is 0"):
        random_split(range(2), [0.9, 0.1])


def test_random_split_defaults_to_the_default_generator():
    torcia.manual_seed(5)
    a = [list(p) for p in random_split(range(8), [4, 4])]
    torcia.manual_seed(5)
    b = [list(p) for p in random_split(range(8), [4, 4])]
    assert a == b

