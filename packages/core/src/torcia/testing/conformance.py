"""The device conformance suite, a pytest plugin shipped with torcia-core.

``pytest --torcia-device NAME`` runs core's op checks against the installed device
``NAME``: for every op record with a sample input, the op's values on the device against
the NumPy reference kernels (float32 and float64, integers where the op takes them,
broadcast operands, non-contiguous inputs), and its gradients through the device against
those on "cpu". At the end it reports, op by op, how the device runs each op (natively,
through its declared fallback, through the op's decomposition, or not at all) and which
checks failed. The plugin is registered through the ``pytest11`` entry point of
torcia-core, so any environment with torcia-core and pytest has it.

Sample inputs come from three places: generated ones for the ops whose inputs are plain
tensors (elementwise ops, activations, reductions...), the calls core's own docstring
examples make, and a small workload of NN ops (a convolution, pooling, normalisation, an
LSTM cell and a loss, forward and backward). Each sample is recorded as the op's kernel
receives it, through a dispatch mode (``torcia.library.DispatchMode``), and kept only if
it runs on "cpu" and matches the reference there; an op without one is reported as
untested.

Examples
--------
A device plugin's CI runs::

    pytest --torcia-device example

and reads the summary (``-v`` prints one line per op)::

    torcia conformance: device 'example'
    native (3): add, mul, relu
    fallback (215): abs, acos, ...
    failed (0)
"""

from __future__ import annotations

import contextlib
import dataclasses
import pathlib
import warnings

import numpy as np
import pytest

#: The test module the option adds to the run.
_TESTS = pathlib.Path(__file__).with_name("_conformance_tests.py")

#: What ``library.device_ops`` says, in the order the summary lists them.
_KINDS = ("native", "fallback", "decomposed", "missing")


@dataclasses.dataclass
class Sample:
    """One call of an op's kernel: host arrays (and other arguments) and parameters."""

    op: str
    variant: str
    args: tuple
    params: dict


def pytest_addoption(parser):
    """Add ``--torcia-device NAME`` (pytest hook)."""
    group = parser.getgroup("torcia", "torcia device conformance")
    group.addoption("--torcia-device", dest="torcia_device", default=None, metavar="NAME",
                    help="run torcia's op conformance checks against device type NAME "
                         "(an installed device plugin's) and report its op coverage")


def pytest_configure(config):
    """With ``--torcia-device``: check the device exists, run the conformance checks and
    report at the end (pytest hook); without it, nothing."""
    device = config.getoption("torcia_device")
    if not device:
        return
    from torcia import library

    try:
        library.get_backend(device)
    except RuntimeError as exc:
        raise pytest.UsageError(f"--torcia-device {device}: {exc}") from None
    # the checks replace the default collection; paths given on the command line join them
    if config.args_source == pytest.Config.ArgsSource.ARGS:
        config.args.append(str(_TESTS))
    else:
        config.args[:] = [str(_TESTS)]
    config.pluginmanager.register(Report(device), "torcia-conformance-report")


# ---------------------------------------------------------------------------------------
# samples
# ---------------------------------------------------------------------------------------


class _Recorder:
    """Records the calls of every op's kernel (a dispatch mode, made on first use)."""

    def __init__(self):
        from torcia import library

        class Mode(library.DispatchMode):
            order = 10**6  # innermost: what the kernel itself receives

            def __init__(self, calls):
                self.calls = calls

            def around_kernel(self, op, kernel, device):
                calls = self.calls

                def recording(*args, **params):
                    calls.setdefault(op, []).append((args, params))
                    return kernel(*args, **params)

                return recording

        self.calls: dict = {}
        self.mode = Mode(self.calls)


def _rng():
    return np.random.default_rng(0)


def _generated(records) -> list[Sample]:
    """Samples for the ops whose inputs are plain tensors and whose parameters all have
    defaults: each input (3, 4) float, and variants."""
    rng = _rng()
    out = []
    for name, record in records.items():
        if not record.inputs or any(i.startswith("*") for i in record.inputs):
            continue
        n = len(record.inputs)
        # positive, below 1: inside the domain of log, sqrt, atanh, acos...
        base = [rng.uniform(0.2, 0.9, (3, 4)).astype(np.float32) for _ in range(n)]
        variants = {"float32": base, "float64": [a.astype(np.float64) for a in base],
                    # made on the device as a transposed view (see ``run``)
                    "noncontiguous": base,
                    "int64": [rng.integers(1, 5, (3, 4)) for _ in range(n)]}
        if n == 2:
            variants["broadcast"] = [base[0][:, :1], base[1][:1, :]]
        for variant, args in variants.items():
            out.append(Sample(name, variant, tuple(args), {}))
        # ops along a dimension (scans, reductions, flips): the last one, then the first
        for key, value in (("dim", 1), ("dim", 0), ("dims", (1,))):
            if key in record.params:
                params = {k: v for k, v in record.params.items() if v is not None}
                out.append(Sample(name, f"{key}={value}", tuple(base), {**params, key: value}))
    return out


def _doc_examples(recorder) -> None:
    """Run the docstring examples of core's public modules, recording the kernels."""
    import doctest
    import importlib

    import torcia

    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(verbose=False, optionflags=doctest.ELLIPSIS)
    modules = [importlib.import_module(m) for m in
               ("torcia", "torcia.linalg", "torcia.fft", "torcia.special", "torcia.library")]
    with recorder.mode:
        for obj in [*modules, torcia.Tensor]:
            for test in finder.find(obj):
                runner.run(test, out=lambda text: None)


def _nn_workload(recorder) -> None:
    """A convolution, pooling, normalisation, an embedding, an LSTM cell and losses,
    forward and (with torcia-autograd) backward, recording the kernels."""
    import torcia
    from torcia import library

    try:
        library.autograd_engine()
        grad = True
    except RuntimeError:
        grad = False
    torcia.manual_seed(0)
    x = torcia.randn(2, 3, 6, 6, requires_grad=grad)
    w = torcia.randn(4, 3, 3, 3, requires_grad=grad)
    with recorder.mode:
        y = library.conv2d(x, w, padding=1)
        y = library.batch_norm(y, torcia.zeros(4), torcia.ones(4), training=True)
        y = library.max_pool2d(y, 2) + library.avg_pool2d(y, 2)
        y = library.layer_norm(library.gelu(y), (3,))
        y = library.rms_norm(y, (3,), torcia.full((3,), 0.5)).flatten(1)
        z = library.log_softmax(library.silu(y), dim=1)
        loss = z.sum()
        t = library.conv_transpose2d(x, torcia.randn(3, 2, 2, 2), stride=2)
        loss = loss + library.softmax(t, dim=1).mean()
        emb = library.embedding(torcia.tensor([[0, 2], [1, 1]]),
                                torcia.randn(3, 4, requires_grad=grad))
        loss = loss + emb.sum() + library.call(
            "cross_entropy", (y, torcia.tensor([1, 0]), None),
            {"reduction": "mean", "ignore_index": -100, "label_smoothing": 0.0})
        gates = torcia.randn(2, 8, requires_grad=grad)
        h, c, _ = library.call("lstm_cell", (gates, torcia.randn(2, 2)), {})
        loss = loss + h.sum() + c.sum()
        # products and indexing the docstring examples leave out
        a = torcia.randn(3, 4, requires_grad=grad)
        b = torcia.randn(4, 2, requires_grad=grad)
        for part in (torcia.einsum("ij,jk->ik", a, b), torcia.addmm(torcia.randn(3, 2), a, b),
                     library.call("linear", (a, b.t(), torcia.randn(2)), {}),
                     torcia.tensordot(a, b, 1), a.index_select(1, torcia.tensor([0, 2])),
                     a.gather(1, torcia.tensor([[0], [1], [2]])), a.topk(2)[0],
                     a.kthvalue(2, 1)[0], torcia.stack([a, a]), a.permute(1, 0),
                     a.repeat(2, 1), a.unfold(1, 2, 1)):
            loss = loss + part.sum()
        if grad:
            loss.backward()


_SAMPLES: dict | None = None


def samples() -> dict[str, list[Sample]]:
    """op -> its samples (made once per process), each checked on "cpu" first."""
    global _SAMPLES
    if _SAMPLES is not None:
        return _SAMPLES
    from torcia import library

    records = library.op_records()
    found = _generated(records)
    recorder = _Recorder()
    _doc_examples(recorder)
    _nn_workload(recorder)
    for op, calls in recorder.calls.items():
        for i, (args, params) in enumerate(calls[:3]):
            found.append(Sample(op, f"example{i}", args, params))
    kept: dict[str, list[Sample]] = {}
    for sample in found:
        if sample.op in records and _runs_on_cpu(sample):
            kept.setdefault(sample.op, []).append(sample)
    _SAMPLES = kept
    return kept


def _copy(x):
    if isinstance(x, np.ndarray):
        return x.copy()
    if isinstance(x, (list, tuple)):
        return type(x)(_copy(v) for v in x)
    return x


def _runs_on_cpu(sample) -> bool:
    try:
        want = reference(sample)
        got = run(sample, "cpu")
        compare(got, want, sample)
    except Exception:  # noqa: BLE001 - a sample the reference or "cpu" refuses is no sample
        return False
    return True


# ---------------------------------------------------------------------------------------
# running and comparing
# ---------------------------------------------------------------------------------------


def reference(sample):
    """The reference kernel's result, on host arrays."""
    from torcia import library

    record = library.op_records()[sample.op]
    with _quiet():
        return record.kernel(*_copy(sample.args), **_copy(sample.params))


class Unsupported(Exception):
    """A sample the device cannot even be given (it has no kernel to make the input)."""


@contextlib.contextmanager
def _quiet():
    """Sample inputs outside an op's domain give NaN (or drop imaginary parts) on both
    sides alike: no warnings for them."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _to_device(x, device, requires_grad=False, transposed=False):
    import torcia

    if isinstance(x, np.ndarray):
        if transposed and x.ndim == 2:
            # the device's own strided view: its kernels receive a non-contiguous array
            t = torcia.from_numpy(np.ascontiguousarray(x.T)).to(device)
            try:
                t = t.transpose(0, 1)
            except NotImplementedError as exc:
                raise Unsupported(f"no transposed view on {device!r}: {exc}") from None
        else:
            t = torcia.from_numpy(x.copy()).to(device)
        if requires_grad and x.dtype.kind == "f":
            t.requires_grad_(True)
        return t
    return x


def run(sample, device, requires_grad=False):
    """Run the op on ``device`` through torcia's dispatch; its outputs as host arrays."""
    from torcia import library

    transposed = sample.variant == "noncontiguous"
    inputs = tuple(_to_device(a, device, requires_grad, transposed) for a in sample.args)
    with _quiet():
        out = library.call(sample.op, inputs, _copy(sample.params))
    if requires_grad:
        return inputs, out
    return _host(out)


def _host(out):
    import torcia

    if isinstance(out, tuple):
        return tuple(_host(o) for o in out)
    if isinstance(out, torcia.Tensor):
        return out.detach().to("cpu").numpy()
    return out


def compare(got, want, sample) -> None:
    """Same structure, shapes, dtypes and values (within float tolerance)."""
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want), (
            f"{sample.op}: {len(want)} outputs expected, got {got!r:.200}")
        for g, w in zip(got, want):
            compare(g, w, sample)
        return
    if not isinstance(want, np.ndarray):
        want = np.asarray(want)
    got = np.asarray(got)
    assert got.shape == want.shape, f"{sample.op}: shape {got.shape}, expected {want.shape}"
    assert got.dtype == want.dtype, f"{sample.op}: dtype {got.dtype}, expected {want.dtype}"
    if want.dtype.kind in "fc":
        tol = 1e-5 if want.dtype in (np.float32, np.complex64) else 1e-10
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True,
                                   err_msg=f"{sample.op} ({sample.variant})")
    else:
        np.testing.assert_array_equal(got, want, err_msg=f"{sample.op} ({sample.variant})")


def gradients(sample, device):
    """The gradients of a fixed weighted sum of the op's float outputs with respect to
    its float inputs, computed on ``device``; None where nothing is differentiable. The
    outputs cross to "cpu" before the sum, so that the device runs the op and its
    backward formula only."""
    import torcia

    inputs, out = run(sample, device, requires_grad=True)
    outs = out if isinstance(out, tuple) else (out,)
    leaves = [t for t in inputs if isinstance(t, torcia.Tensor) and t.requires_grad]
    rng = _rng()
    total = None
    for o in outs:
        if isinstance(o, torcia.Tensor) and o.requires_grad and o.dtype.is_floating_point:
            w = torcia.from_numpy(rng.uniform(-1, 1, tuple(o.shape)).astype(
                str(o.dtype).removeprefix("torcia.")))
            term = (o.to("cpu") * w).sum()
            total = term if total is None else total + term
    if total is None or not leaves:
        return None
    with _quiet():
        grads = torcia.autograd.grad(total, leaves, allow_unused=True)
    return tuple(None if g is None else g.detach().to("cpu").numpy() for g in grads)


# ---------------------------------------------------------------------------------------
# the report
# ---------------------------------------------------------------------------------------


class Report:
    """Collects each check's outcome by op and prints the coverage summary."""

    def __init__(self, device):
        self.device = device
        self.ops: dict[str, str] = {}
        self.selected: set[str] = set()
        self.outcomes: dict[str, dict[str, str]] = {}

    def pytest_collection_finish(self, session):
        from torcia import library

        self.ops = library.device_ops(self.device)
        # what -k or -m left to run
        self.selected = {item.callspec.params["op"] for item in session.items
                         if hasattr(item, "callspec") and "op" in item.callspec.params}

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report):
        op = dict(report.user_properties).get("torcia_op")
        if op is None or (report.when != "call" and report.passed):
            return
        check = dict(report.user_properties).get("torcia_check", "?")
        outcome = "failed" if report.failed else "skipped" if report.skipped else "passed"
        done = self.outcomes.setdefault(op, {})
        if done.get(check) != "failed":
            done[check] = outcome

    def failed_ops(self) -> dict[str, list[str]]:
        """op -> the checks that failed, for the ops the device runs (a missing op's
        checks fail too; the summary lists those as missing)."""
        out = {}
        for op, checks in sorted(self.outcomes.items()):
            bad = sorted(c for c, o in checks.items() if o == "failed")
            if bad and self.ops.get(op) != "missing":
                out[op] = bad
        return out

    def pytest_terminal_summary(self, terminalreporter):
        write = terminalreporter.write_line
        terminalreporter.section(f"torcia conformance: device {self.device!r}")
        by_kind = {kind: sorted(op for op, k in self.ops.items() if k == kind)
                   for kind in _KINDS}
        for kind in _KINDS:
            write(f"{kind} ({len(by_kind[kind])}): {', '.join(by_kind[kind])}")
        failed = self.failed_ops()
        write(f"failed ({len(failed)}): " + ", ".join(
            f"{op} [{', '.join(checks)}]" for op, checks in failed.items()))
        untested = sorted(op for op, how in self.ops.items() if op not in failed and
                          how != "missing" and op in self.selected and
                          self.outcomes.get(op, {}).get("values") != "passed")
        write(f"untested, no sample input ({len(untested)}): {', '.join(untested)}")
        unselected = len(set(self.ops) - self.selected)
        if unselected:
            write(f"not selected (-k, -m): {unselected} ops")
        if terminalreporter.config.option.verbose > 0:
            for op in sorted(self.ops):
                result = ("failed: " + ", ".join(failed[op]) if op in failed
                          else "not selected" if op not in self.selected
                          else "failed" if self.ops[op] == "missing"
                          else "untested" if op in untested else "passed")
                write(f"  {op:32} {self.ops[op]:10} {result}")
