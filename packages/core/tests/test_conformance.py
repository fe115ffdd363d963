"""The device conformance suite (``pytest --torcia-device NAME``, torcia.testing.conformance)
against a deliberately wrong and incomplete device: an out-of-tree plugin distribution
written here, whose ``add`` is off by one and which has kernels for three ops only, and
no fallback. The suite must fail, name ``add`` as the failing op, and list the ops the
device lacks. (plugins/example's tests run it against the example device, which passes.)
"""

import itertools
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import torcia
from torcia import library, plugins
from torcia.testing import conformance

BAD_DEVICE = """
    import numpy as np

    import torcia
    from torcia.library import Backend


    def _copy(array, index=None):
        return np.array(array, copy=True)


    def _wrong_add(a, b):
        return np.add(a, b) + 1  # the right shape and dtype, the wrong values


    @torcia.hookimpl
    def torcia_register_backends(registry):
        registry.add(Backend("baddev", np, to_host=_copy, from_host=_copy))


    @torcia.hookimpl
    def torcia_register_kernels(registry):
        registry.add("add", "baddev", _wrong_add)
        registry.add("mul", "baddev", np.multiply)
        registry.add("neg", "baddev", np.negative)
"""


def _suite(tmp_path, device: str, source: str, *flags):
    """Install the device plugin ``<device>-dist`` (module ``<device>_mod``) into a site on
    PYTHONPATH and run the suite against it in a fresh pytest."""
    site = tmp_path / "site"
    info = site / f"{device}_dist-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {device}-dist\n"
                                   "Version: 1.0\n")
    (info / "entry_points.txt").write_text(f"[torcia]\n{device} = {device}_mod\n")
    (site / f"{device}_mod.py").write_text(textwrap.dedent(source))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(site), *filter(None, [os.environ.get("PYTHONPATH")])]))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *flags,
         "--torcia-device", device],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)


def _summary(out: str) -> dict[str, str]:
    """The summary's lines, by their first word ("native", "failed", "missing"...)."""
    section = out.split("torcia conformance: device 'baddev'", 1)[1]
    lines = {}
    for line in section.splitlines():
        head, _, rest = line.partition(" (")
        if rest:
            lines.setdefault(head.strip(), rest)
    return lines


@pytest.mark.slow
def test_the_suite_names_the_failing_and_the_missing_ops(tmp_path):
    run = _suite(tmp_path, "baddev", BAD_DEVICE, "-v")
    out = run.stdout
    assert run.returncode == 1, out[-3000:]
    summary = _summary(out)
    assert summary["native"] == "3): add, mul, neg"
    # add is wrong: its values check fails, by name; mul and neg pass
    failed = dict(entry.rstrip("]").split(" [") for entry in
                  summary["failed"].split("): ", 1)[1].split("], "))
    assert "values" in failed["add"] and "neg" not in failed
    # mul's values pass; its gradient of a broadcast product needs sum, which is missing
    assert "values" not in failed.get("mul", "")
    assert "FAILED" in out and "test_values[add]" in out
    assert any("test_values[mul] PASSED" in line for line in out.splitlines())
    # no fallback declared: primitives without a kernel are missing, composites decompose
    missing = summary["missing"].split("): ", 1)[1].split(", ")
    assert {"exp", "div", "sum", "matmul"} <= set(missing)
    assert "add" not in missing and "mul" not in missing
    assert "conv" in summary["decomposed"]
    # one line per op with -v
    assert any(line.split()[:3] == ["add", "native", "failed:"] for line in out.splitlines())
    assert any(line.split()[:3] == ["exp", "missing", "failed"] for line in out.splitlines())
    assert any(line.split()[:3] == ["neg", "native", "passed"] for line in out.splitlines())


def test_without_the_option_the_plugin_adds_nothing(tmp_path):
    (tmp_path / "test_one.py").write_text("def test_one():\n    assert True\n")
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0 and "1 passed" in run.stdout
    assert "torcia conformance" not in run.stdout
    usage = subprocess.run([sys.executable, "-m", "pytest", "--help"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=600).stdout
    assert "--torcia-device=NAME" in usage


#: A device with the reference kernels of every primitive (composites decompose into
#: them), and the kernels of BUGS in their place.
PRIMITIVES = """
    import numpy as np

    import torcia
    from torcia import library
    from torcia.library import Backend

    ref = library.ReferenceKernels().table()
    BUGS = {}


    def _copy(array, index=None):
        return np.array(array, copy=True)


    @torcia.hookimpl
    def torcia_register_backends(registry):
        registry.add(Backend("kitdev", np, to_host=_copy, from_host=_copy))


    @torcia.hookimpl
    def torcia_register_kernels(registry):
        for name in library.primitives():
            if name in ref:
                registry.add(name, "kitdev", BUGS.get(name, ref[name]))
"""


@pytest.mark.slow
def test_a_device_of_the_reference_primitives_passes(tmp_path):
    """Every composite decomposes into the primitives' reference kernels with its own
    reference kernel's values, dtypes, memory contracts and gradients, on every sample."""
    run = _suite(tmp_path, "kitdev", PRIMITIVES, "-q")
    out = run.stdout
    assert run.returncode == 0, out[-3000:]
    assert "\nfailed (0)" in out and "\nroot causes (0)" in out


#: That device with ten planted bugs, one per kind of fault the suite must localise.
PLANTED = PRIMITIVES + """
    def add(a, b, **params):  # values: off by one
        return ref["add"](a, b, **params) + 1


    def sum(x, dim=None, keepdim=False, dtype=None):  # ignores keepdim
        return ref["sum"](x, dim=dim, keepdim=False, dtype=dtype)


    def sqrt(a):  # writes into its input
        np.sqrt(a, out=a)
        return a


    def full(shape, fill_value, dtype):  # creation: ones
        return np.ones(shape, dtype)


    def matmul(a, b):  # batches in the wrong order
        out = ref["matmul"](a, b)
        return np.ascontiguousarray(out[::-1]) if out.ndim > 2 else out


    def as_strided(x, size, stride, storage_offset=0):  # a copy where a view is expected
        return ref["as_strided"](x, size=size, stride=stride,
                                 storage_offset=storage_offset).copy()


    def exp(a):  # float64 whatever the input
        return np.exp(a.astype(np.float64))


    def amax(x, dim=None, keepdim=False):  # the minimum
        return ref["amin"](x, dim=dim, keepdim=keepdim)


    def arange(start, end, step, dtype):  # one element short
        return ref["arange"](start, end, step, dtype)[:-1]


    def cumsum(x, dim, dtype=None):  # along the other dim
        return ref["cumsum"](x, dim=(dim + 1) % x.ndim if x.ndim > 1 else dim, dtype=dtype)


    BUGS.update({f.__name__: f for f in (add, sum, sqrt, full, matmul, as_strided, exp, amax,
                                         arange, cumsum)})
"""


@pytest.mark.slow
def test_the_suite_names_ten_planted_bugs_as_the_root_causes(tmp_path):
    run = _suite(tmp_path, "kitdev", PLANTED, "-q")
    out = run.stdout
    assert run.returncode == 1, out[-3000:]
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("root causes ("))
    section = lines[header + 1:]
    # the roots are the indented lines right under the header; pytest's own summaries
    # (warnings too, whose lines are indented as well) follow after them
    section = list(itertools.takewhile(lambda line: line.startswith("  ") and line.strip(),
                                       section))
    roots = {line.split()[0]: line for line in section}
    # every planted bug, and nothing else: the other failures are theirs
    assert sorted(roots) == sorted(["add", "sum", "sqrt", "full", "matmul", "as_strided",
                                    "exp", "amax", "arange", "cumsum"]), "\n".join(section)
    assert "wrote into its input" in out or "returned memory of its input" in out  # sqrt
    assert "returned a copy where PyTorch returns a view" in out  # as_strided
    # permute is strides arithmetic over as_strided: the copy is as_strided's fault
    assert "permute [" in roots["as_strided"], roots["as_strided"]
    # the composites that run a planted bug are explained by it, not blamed
    assert "softmax [values]" in roots["sum"] or "softmax [values]" in roots["exp"]
    assert "conv [values]" in roots["matmul"] or "conv [values]" in roots["add"]
    failed_tests = [line for line in out.splitlines() if line.startswith("FAILED")]
    blamed = {line.split("[", 1)[1].split("]", 1)[0] for line in failed_tests}
    assert blamed <= set(roots), failed_tests


class _Picking:
    """A plugin op whose index input no generated sample makes: it declares its samples."""

    @torcia.hookimpl
    def torcia_register_ops(self, registry):
        registry.define(
            "picked(Tensor x, Tensor index) -> Tensor", lambda x, index: np.take(x, index),
            samples=lambda rng: [((rng.uniform(-1, 1, 5).astype(np.float32),
                                   np.array([4, 0, 4])), {})])


def test_an_ops_declared_samples_are_what_the_suite_runs_it_on():
    records = library.op_records()
    declared = [s for s in conformance._declared(records) if s.op == "pad"]
    assert [s.params["mode"] for s in declared] == ["constant", "reflect"]
    # a creation op's samples are its parameters alone; a random one gets its generator
    zeros = [s for s in conformance._declared(records) if s.op == "zeros"]
    assert zeros[0].args == () and zeros[0].params["shape"] == (2, 3)
    assert "rng" in [s for s in conformance._declared(records) if s.op == "rand"][0].params
    # every declared sample runs on "cpu" and matches the reference there
    assert all(conformance._runs_on_cpu(s) for s in conformance._declared(records))


def test_a_plugin_ops_samples_reach_the_suite():
    pm = plugins.manager()
    plugin = _Picking()
    pm.register(plugin, name="test-picking")
    for registry in list(plugins._state.registries.values()):
        registry.reset()  # the tables fill again, with the plugin's op
    try:
        records = library.op_records()
        assert records["picked"].samples is not None
        (sample,) = [s for s in conformance._declared(records) if s.op == "picked"]
        assert sample.args[1].tolist() == [4, 0, 4]
        assert conformance._runs_on_cpu(sample)
    finally:
        pm.unregister(plugin)
        plugins.reset()
    assert "picked" not in library.op_records()


def test_define_refuses_samples_that_are_not_callable():
    with pytest.raises(TypeError, match="samples of op 'listed' must be callable"):
        library.plugin_ops.define("listed", np.negative, samples=[((np.zeros(2),), {})])


class _Coin:
    """A plugin random op that says what its draws may be."""

    @torcia.hookimpl
    def torcia_register_ops(self, registry):
        registry.define(
            "coin(*, int[] shape=(4,), Generator rng=None) -> Tensor",
            lambda shape=(4,), rng=None: rng.integers(0, 2, shape).astype(np.float32),
            random=True, samples=lambda rng: [((), {"shape": (3,), "rng": None})],
            draws=lambda values, **params: None if np.isin(values, (0, 1)).all()
            else "a side other than 0 and 1")


@pytest.mark.parametrize("op, good, bad, params, wrong", [
    ("rand", [0.0, 0.5], [0.0, 1.0], {"shape": (2,)}, "values outside [0, 1)"),
    ("randint", [-3, 4], [-3, 5], {"low": -3, "high": 5}, "values outside [-3, 5)"),
    ("uniform", [-2.0, 3.0], [-2.0, 3.5], {"low": -2.0, "high": 3.0},
     "values outside [-2.0, 3.0]"),
    ("randperm", [2, 0, 1], [0, 2, 2], {"n": 3}, "not a permutation"),
    ("normal", [0.0, -1e30], [0.0, np.inf], {}, "values that are not finite"),
    ("dropout_mask", [0.0, 2.0], [0.0, 1.0], {"p": 0.5}, "values other than 0 and 1 / (1 - p)"),
])
def test_a_random_ops_declaration_says_what_it_cannot_draw(op, good, bad, params, wrong):
    draws = library.op_records()[op].draws
    assert draws(np.array(bad), **params) == wrong
    assert draws(np.array(good), **params) is None


def test_multinomial_without_replacement_never_draws_a_category_twice():
    draws = library.op_records()["multinomial"].draws
    w = np.ones((1, 3))
    assert draws(np.array([[0, 2]]), w, num_samples=2, replacement=False) is None
    assert draws(np.array([[2, 2]]), w, num_samples=2, replacement=False) == \
        "a category drawn twice without replacement"
    assert draws(np.array([[2, 2]]), w, num_samples=2, replacement=True) is None
    assert draws(np.array([[3, 0]]), w, num_samples=2, replacement=True) == \
        "an index outside the categories"


def test_a_plugin_random_ops_draws_are_checked_by_its_own_rule():
    pm = plugins.manager()
    plugin = _Coin()
    pm.register(plugin, name="test-coin")
    for registry in list(plugins._state.registries.values()):
        registry.reset()
    try:
        record = library.op_records()["coin"]
        (sample,) = [s for s in conformance._declared(library.op_records()) if s.op == "coin"]
        conformance.check(sample, "cpu")
        want = np.zeros(3, np.float32)
        with pytest.raises(AssertionError, match=r"coin \(.*\): a side other than 0 and 1"):
            conformance._random_values(want + 2, want, sample, record)
    finally:
        pm.unregister(plugin)
        plugins.reset()


def test_define_refuses_draws_that_are_not_callable_or_not_on_a_random_op():
    with pytest.raises(TypeError, match="draws of op 'listed' must be callable"):
        library.plugin_ops.define("listed", np.negative, random=True, draws="0 or 1")
    with pytest.raises(TypeError, match="op 'listed' gives draws= but is not declared random"):
        library.plugin_ops.define("listed", np.negative, draws=lambda values: None)
