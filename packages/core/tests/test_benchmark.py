"""torcia.utils.benchmark: Measurement's statistics against NumPy's quantiles by hand,
Timer's protocol (block sizes, run times, callbacks, namespaces, refusals), and against
torch.utils.benchmark where installed: the same Compare tables character for character
over generated measurements, the same fuzzer draws from a seed, the same helpers' values,
the same FunctionCounts arithmetic."""

import pickle
import timeit

import numpy as np
import pytest

import torcia
from torcia.utils import benchmark as B

RNG = np.random.default_rng(11)


def _spec(lib, **kw):
    return lib.TaskSpec("f()", "pass", **kw)


def _measurements(lib, seed, envs=("e1",), threads=(1,), subs=("x", "y"),
                  descs=("a", "bb"), scale=1e-5, n_times=7):
    rng = np.random.default_rng(seed)
    out = []
    for th in threads:
        for env in envs:
            for d in descs:
                for sl in subs:
                    times = list(rng.uniform(1, 3, n_times) * scale * (1 + len(d)))
                    out.append(lib.Measurement(10, times, _spec(
                        lib, label="L", sub_label=sl, description=d, env=env, num_threads=th)))
    return out


def test_measurement_statistics_by_hand():
    m = B.Measurement(4, [4.0, 8.0, 12.0, 40.0], _spec(B))
    # per run: 1, 2, 3, 10; linear-interpolated quartiles 1.75 and 4.75
    assert m.times == [1.0, 2.0, 3.0, 10.0]
    assert m.median == 2.5 and m.mean == 4.0 and m.iqr == pytest.approx(3.0)
    assert m.has_warnings and not m.meets_confidence(0.1)
    steady = B.Measurement(1, [1.0] * 8, _spec(B, label="L"))
    assert not steady.has_warnings and steady.significant_figures == 4
    assert steady.label == "L" and steady.stmt == "f()" and steady.env == "Unspecified env"
    with pytest.raises(AttributeError):
        steady.nonexistent  # noqa: B018
    back = pickle.loads(pickle.dumps(m))
    assert back.times == m.times and back.median == m.median


def test_merge_and_helpers():
    spec = _spec(B)
    merged = B.Measurement.merge([B.Measurement(2, [4.0], spec), B.Measurement(4, [4.0], spec),
                                  B.Measurement(1, [5.0], _spec(B, label="other"))])
    assert [m.times for m in merged] == [[2.0, 1.0], [5.0]]
    assert all(m.number_per_run == 1 and m.metadata is None for m in merged)
    assert B.select_unit(5e-9) == ("ns", 1e-9) and B.select_unit(2e-4) == ("us", 1e-6)
    assert B.select_unit(0.5) == ("ms", 1e-3) and B.select_unit(50.0) == ("s", 1)
    # computed in float32, as PyTorch does
    assert B.trim_sigfig(123456.0, 2) == 120000.0
    assert B.trim_sigfig(0.0123, 1) == pytest.approx(0.01, rel=1e-7)
    assert B.ordered_unique("abcab") == ["a", "b", "c"]
    assert B.unit_to_english("ns") == "nanosecond"


def test_timer_protocol():
    calls = []
    t = B.Timer("calls.append(1)", setup="calls.clear()", globals={"calls": calls})
    m = t.timeit(50)
    # setup runs before each block (the warm-up of max(50 // 100, 2) runs, then the timed
    # 50), as timeit's does: the 50 of the timed block remain
    assert m.number_per_run == 50 and len(m.raw_times) == 1 and len(calls) == 50
    seen = []
    m = B.Timer("sum(range(50))").blocked_autorange(
        callback=lambda n, s: seen.append((n, s)), min_run_time=0.05)
    assert sum(m.raw_times) >= 0.05 and len(seen) == len(m.raw_times)
    # block sizes are powers of ten
    assert str(m.number_per_run).rstrip("0") == "1"
    m = B.Timer("sum(range(50))").adaptive_autorange(threshold=0.5, max_run_time=1.0)
    assert len(m.raw_times) > 3 or sum(m.raw_times) > 1.0
    # the statement sees torch and torcia as torcia, and dedented multi-line code runs
    code = """
        y = torch.ones(2)
        z = torcia.zeros(2) + y
    """
    assert B.Timer(code).timeit(3).stmt == "y = torch.ones(2)\nz = torcia.zeros(2) + y"
    fake = iter(range(10 ** 6))
    t = B.Timer("pass", timer=lambda: float(next(fake)))
    assert t.timeit(5).raw_times == [1.0]  # one tick of the given clock per block


@pytest.mark.parametrize("kwargs,error,match", [
    ({"stmt": lambda: None}, ValueError, "only a `str` stmt"),
    ({"global_setup": "int x;"}, ValueError, "global_setup is C\\+\\+ only"),
    ({"language": "cpp"}, ValueError, "C\\+\\+ statements are not supported"),
    ({"language": "rust"}, ValueError, "Invalid language"),
])
def test_timer_refusals(kwargs, error, match):
    with pytest.raises(error, match=match):
        B.Timer(**kwargs)


def test_timer_refuses_what_pytorch_refuses():
    t = B.Timer("1")
    with pytest.raises(NotImplementedError, match="blocked_autorange"):
        t.repeat()
    with pytest.raises(NotImplementedError, match="blocked_autorange"):
        t.autorange()
    with pytest.raises(RuntimeError, match="Valgrind"):
        t.collect_callgrind()
    with pytest.raises(ValueError, match="Expected an instance of `Measurement`"):
        B.Compare([1.0])


def test_threads_are_restored():
    before = torcia.get_num_threads()
    B.Timer("1", num_threads=1).timeit(2)
    assert torcia.get_num_threads() == before


def test_compare_by_hand():
    results = [B.Measurement(1, [t * 1e-6] * 4, _spec(B, label="add", sub_label=s,
                                                        description=d))
               for s, d, t in [("small", "f", 1.5), ("large", "f", 12.0)]]
    text = str(B.Compare(results))
    assert text.splitlines()[0].startswith("[") and " add " in text.splitlines()[0]
    assert "1.5" in text and "12.0" in text and "Times are in microseconds (us)." in text


def test_fuzzer_constraints_and_aliases():
    fuzzer = B.Fuzzer(
        parameters=[B.FuzzedParameter("n", 2, 64, distribution="loguniform"),
                    B.FuzzedParameter("m", distribution={2: 0.5, 3: 0.5}),
                    B.FuzzedParameter("k", distribution={B.ParameterAlias("n"): 1.0})],
        tensors=[B.FuzzedTensor("x", size=("n", "m"), steps=(1, "m"),
                                max_elements=10 ** 4)],
        constraints=[lambda p: p["n"] > 4], seed=3)
    for tensors, props, params in fuzzer.take(5):
        assert params["k"] == params["n"] > 4
        assert tuple(tensors["x"].shape) == (params["n"], params["m"])
        assert props["x"]["numel"] == params["n"] * params["m"]
    assert 0 <= fuzzer.rejection_rate < 1
    with pytest.raises(ValueError, match="Duplicate names"):
        B.Fuzzer([B.FuzzedParameter("x", 1, 2, "uniform")], [B.FuzzedTensor("x", (1,))])
    with pytest.raises(AssertionError, match="Unknown distribution"):
        B.FuzzedParameter("x", 1, 2, "normal")
    with pytest.raises(AssertionError, match="not normalized"):
        B.FuzzedParameter("x", distribution={1: 0.3})
    impossible = B.Fuzzer([B.FuzzedParameter("n", 1, 2, "uniform")], [],
                          constraints=[lambda p: False], seed=0)
    with pytest.raises(ValueError, match="Failed to generate"):
        next(impossible.take(1))


def test_function_counts():
    fc = B.FunctionCounts((B.FunctionCount(9, "a"), B.FunctionCount(3, "b")), False)
    other = B.FunctionCounts((B.FunctionCount(3, "b"), B.FunctionCount(1, "c")), False)
    assert list(fc - other) == [B.FunctionCount(9, "a"), B.FunctionCount(-1, "c")]
    assert (fc * 2).sum() == 24 and len(fc.filter(lambda f: f == "a")) == 1
    assert fc.transform(lambda f: "x").sum() == 12 and fc[0].count == 9
    with pytest.raises(AssertionError, match="inclusive and exclusive"):
        fc + B.FunctionCounts((), True)


# ----- against torch.utils.benchmark --------------------------------------------------

LAYOUTS = [{"envs": ("e1", "e2"), "threads": (1, 4)}, {"envs": (None,), "threads": (1,)},
           {"envs": ("e",), "threads": (2, 1), "subs": ("only",), "descs": ("d",)},
           {"envs": ("e",), "threads": (1,), "scale": 3e-9}, {"scale": 2.5, "n_times": 1},
           {"scale": 4e-4, "n_times": 3}]
OPTIONS = [[], ["trim"], ["trim", "highlight"], ["colorize"], ["rowwise"], ["highlight"]]


@pytest.mark.torch
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("layout", range(len(LAYOUTS)))
@pytest.mark.parametrize("options", OPTIONS, ids="+".join)
def test_compare_matches_torch(seed, layout, options):
    torch_benchmark = pytest.importorskip("torch.utils.benchmark")
    tables = []
    for lib in (B, torch_benchmark):
        compare = lib.Compare(_measurements(lib, seed, **LAYOUTS[layout]))
        for option in options:
            {"trim": compare.trim_significant_figures, "highlight": compare.highlight_warnings,
             "colorize": compare.colorize,
             "rowwise": lambda c=compare: c.colorize(rowwise=True)}[option]()
        tables.append(str(compare))
    assert tables[0] == tables[1]


@pytest.mark.torch
@pytest.mark.parametrize("n", [1, 2, 3, 4, 9])
def test_measurement_matches_torch(n):
    torch_benchmark = pytest.importorskip("torch.utils.benchmark")
    times = list(RNG.uniform(1e-6, 1e-2, n))
    ours = B.Measurement(7, times, _spec(B, label="L", sub_label="s", description="d"))
    theirs = torch_benchmark.Measurement(7, times, _spec(torch_benchmark, label="L",
                                                         sub_label="s", description="d"))
    for attr in ("median", "mean", "iqr", "significant_figures", "has_warnings"):
        assert getattr(ours, attr) == pytest.approx(getattr(theirs, attr), rel=1e-12), attr
    assert repr(ours).splitlines()[1:] == repr(theirs).splitlines()[1:]


@pytest.mark.torch
def test_helpers_match_torch():
    torch_benchmark = pytest.importorskip("torch.utils.benchmark")
    for x in RNG.uniform(-12, 3, 40):
        v = 10.0 ** x
        assert B.select_unit(v) == torch_benchmark.select_unit(v)
        for figures in (1, 2, 4):
            assert B.trim_sigfig(v, figures) == torch_benchmark.trim_sigfig(v, figures)


@pytest.mark.torch
@pytest.mark.parametrize("seed", range(4))
def test_fuzzer_draws_match_torch(seed):
    torch = pytest.importorskip("torch")
    import torch.utils.benchmark as TB

    def build(lib, dtype):
        return lib.Fuzzer(
            parameters=[lib.FuzzedParameter("n", 1, 512, distribution="loguniform"),
                        lib.FuzzedParameter("m", 1, 9, distribution="uniform"),
                        lib.FuzzedParameter("q", 0.0, 1.0, distribution="uniform",
                                            strict=True)],
            tensors=[lib.FuzzedTensor("x", size=("n", "m", 3), steps=(1, 2, 1),
                                      probability_contiguous=0.4, max_elements=4096,
                                      dtype=dtype)],
            constraints=[lambda p: p["n"] * p["m"] < 2000], seed=seed)

    # (no dict distribution: PyTorch 2.13 refuses every normalised one, its check of the
    # sum being inverted)
    ours = list(build(B, torcia.float64).take(6))
    theirs = list(build(TB, torch.float64).take(6))
    for (t1, p1, q1), (t2, p2, q2) in zip(ours, theirs):
        assert q1 == q2
        assert tuple(t1["x"].shape) == tuple(t2["x"].shape)
        assert t1["x"].stride() == t2["x"].stride()
        assert p1["x"]["is_contiguous"] == p2["x"]["is_contiguous"]
        assert list(p1["x"]["order"]) == list(p2["x"]["order"])


@pytest.mark.torch
def test_function_counts_match_torch():
    pytest.importorskip("torch")
    from torch.utils.benchmark.utils.valgrind_wrapper import timer_interface as TI

    rows = [(int(c), f"/build/x/Python/f{i}.c:g [lib.so]") for i, c in
            enumerate(RNG.integers(-50, 5000, 30))]
    ours = B.FunctionCounts(tuple(B.FunctionCount(*r) for r in rows), False, _linewidth=80)
    theirs = TI.FunctionCounts(tuple(TI.FunctionCount(*r) for r in rows), False,
                               _linewidth=80)
    assert repr(ours).splitlines()[1:] == repr(theirs).splitlines()[1:]
    assert [tuple(c) for c in (ours - ours[:5]) * 1.5] == [
        tuple(c) for c in (theirs - theirs[:5]) * 1.5]


def test_timer_uses_the_default_clock():
    assert B.timer is timeit.default_timer
