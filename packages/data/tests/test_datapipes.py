"""DataPipes: functional forms, registration, element types checked at construction and
while iterating, determinism guards; and the loader's dataset kinds."""

import pytest

import torcia
from torcia.data import (
    DataChunk,
    DataLoader,
    DFIterDataPipe,
    IterDataPipe,
    MapDataPipe,
    TensorDataset,
    _DatasetKind,
    argument_validation,
    functional_datapipe,
    guaranteed_datapipes_determinism,
    non_deterministic,
    runtime_validation,
    runtime_validation_disabled,
)
from torcia.data.datapipes import IterableWrapper, SequenceWrapper


def test_iter_pipeline_chains_and_is_lazy():
    seen = []
    dp = IterableWrapper(range(7)).map(lambda x: seen.append(x) or x * 10)
    assert seen == []
    batches = list(dp.filter(lambda x: x != 30).batch(2))
    assert batches == [[0, 10], [20, 40], [50, 60]]
    assert all(isinstance(b, DataChunk) for b in batches)
    assert len(IterableWrapper(range(7)).batch(3)) == 3
    assert len(IterableWrapper(range(7)).batch(3, drop_last=True)) == 2
    with pytest.raises(ValueError, match="Boolean output is required"):
        list(IterableWrapper([1]).filter(lambda x: x))
    with pytest.raises(AssertionError, match="larger than 0"):
        IterableWrapper([1]).batch(0)


def test_map_pipeline_indexes():
    dp = SequenceWrapper([1, 2, 3, 4, 5]).map(lambda x: x * x).batch(2)
    assert len(dp) == 3 and dp[0] == [1, 4] and dp[2] == [25]
    with pytest.raises(IndexError, match="out of bound"):
        dp[3]
    with pytest.raises(AttributeError, match="has no attribute 'filter'"):
        SequenceWrapper([1]).filter  # noqa: B018 - the lookup is what raises


def test_pipes_feed_the_dataloader():
    loader = DataLoader(IterableWrapper(range(5)).map(float), batch_size=2)
    assert [b.tolist() for b in loader] == [[0.0, 1.0], [2.0, 3.0], [4.0]]
    loader = DataLoader(SequenceWrapper([3, 1, 2]), batch_size=3)
    assert next(iter(loader)).tolist() == [3, 1, 2]


def test_functional_datapipe_registers_once_per_kind():
    @functional_datapipe("_test_negate")
    class Negate(IterDataPipe):
        def __init__(self, source):
            self.source = source

        def __iter__(self):
            return (-x for x in self.source)

    @functional_datapipe("_test_negate")
    class MapNegate(MapDataPipe):
        def __init__(self, source):
            self.source = source

        def __getitem__(self, i):
            return -self.source[i]

        def __len__(self):
            return len(self.source)

    try:
        assert list(IterableWrapper([1, 2])._test_negate()) == [-1, -2]
        assert SequenceWrapper([4])._test_negate()[0] == -4
        with pytest.raises(Exception, match="already taken"):
            functional_datapipe("_test_negate")(Negate)
        with pytest.raises(TypeError, match="can only decorate"):
            functional_datapipe("_test_other")(int)
    finally:
        IterDataPipe.functions.pop("_test_negate")
        MapDataPipe.functions.pop("_test_negate")


class Ints(IterDataPipe[int]):
    def __init__(self, values=(1, 2)):
        self.values = values

    @runtime_validation
    def __iter__(self):
        yield from self.values


class Numbers(IterDataPipe[int | float]):
    def __iter__(self):
        yield 1.5


class Words(IterDataPipe[list[str]]):
    def __iter__(self):
        yield ["a"]


def test_element_types():
    assert str(Ints().type) == "int" and str(IterableWrapper([]).type) == "Any"
    assert Ints().type.issubtype(Numbers().type)
    assert not Numbers().type.issubtype(Ints().type)
    assert Words().type.issubtype_of_instance(["x", "y"])
    assert not Words().type.issubtype_of_instance(["x", 1])


def test_runtime_validation_checks_each_element_unless_disabled():
    assert list(Ints()) == [1, 2]
    with pytest.raises(RuntimeError, match=r"Expected an instance as subtype of int, but "
                                           r"found x\(<class 'str'>\)"):
        list(Ints((1, "x")))
    with runtime_validation_disabled():
        assert list(Ints((1, "x"))) == [1, "x"]
    with pytest.raises(RuntimeError):
        list(Ints(("x",)))
    with pytest.raises(TypeError, match="Can not decorate function reset"):
        def reset(self):
            return None

        runtime_validation(reset)


def test_argument_validation():
    class Consumer(IterDataPipe):
        @argument_validation
        def __init__(self, source: IterDataPipe[float | int], factor: int = 1):
            self.source = source

    Consumer(Ints())
    Consumer(Numbers(), factor=2)
    with pytest.raises(TypeError, match="as a IterDataPipe, but found <class 'list'>"):
        Consumer([1])
    with pytest.raises(TypeError, match="as a subtype of hint"):
        Consumer(Words())


def test_non_deterministic_refuses_under_the_guarantee():
    @non_deterministic
    class Racy(IterDataPipe):
        def __iter__(self):
            yield 1

    class Maybe(IterDataPipe):
        def __init__(self, racy):
            self.racy = racy

        def __iter__(self):
            yield 2

    Maybe = non_deterministic(lambda racy: racy)(Maybe)
    assert list(Racy()) == [1] and list(Maybe(True)) == [2]
    with guaranteed_datapipes_determinism():
        with pytest.raises(TypeError, match="Racy is non-deterministic"):
            Racy()
        with pytest.raises(TypeError, match="Maybe is non-deterministic"):
            Maybe(True)
        assert list(Maybe(False)) == [2]
    assert list(Racy()) == [1]
    with pytest.raises(TypeError, match="Only `IterDataPipe` can be decorated"):
        non_deterministic(int)
    with pytest.raises(TypeError, match="required to return a boolean"):
        non_deterministic(lambda: 1)(Maybe.__self__.cls)()


def test_df_pipe_marker_and_data_chunk():
    class Frames(DFIterDataPipe):
        def __iter__(self):
            yield {}

    assert Frames()._is_dfpipe() and isinstance(Frames(), IterDataPipe)
    chunk = DataChunk(iter([1, 2]))
    assert chunk == [1, 2] and chunk.as_str("> ") == "> [1, 2]"


def test_dataset_kind_fetchers():
    fetch = _DatasetKind.create_fetcher(_DatasetKind.Map, [5, 6, 7], True, list, False)
    assert fetch.fetch([1, 2]) == [6, 7]
    fetch = _DatasetKind.create_fetcher(_DatasetKind.Iterable, IterableWrapper(range(5)),
                                        True, list, True)
    assert fetch.fetch([None, None]) == [0, 1] and fetch.fetch([None] * 2) == [2, 3]
    with pytest.raises(StopIteration):
        fetch.fetch([None, None])  # one element left, dropped


def test_tensor_dataset_of_no_tensors_is_allowed_as_in_pytorch():
    ds = TensorDataset()
    assert ds.tensors == ()
    with pytest.raises(IndexError):
        len(ds)
    assert len(TensorDataset(torcia.ones(3, 2))) == 3
