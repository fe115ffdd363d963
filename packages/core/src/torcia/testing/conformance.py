"""The device conformance suite, a pytest plugin shipped with torcia-core.

``pytest --torcia-device NAME`` checks every op of the installed device ``NAME`` on its own
against the NumPy reference kernels, and says which ops are wrong. For every op record with
a sample input:

- **values**: its results on the device against the reference kernel's (shape, dtype,
  values), for float32 and float64, integers where the op takes them, signed inputs,
  broadcast operands, non-contiguous inputs, vectors and batches of matrices, reductions
  with and without ``keepdim``; creation ops (``zeros``, ``arange``, ``eye``...) with their
  own samples, random ones (``rand``, ``randperm``...) by what their values may be (the
  ``draws`` their records declare);
- **aliasing**: the contracts on memory an op must keep: an out-of-place op leaves its
  inputs as they were and returns memory of its own, a view op (``transpose``,
  ``narrow``...) returns a view of its input where the reference kernel does;
- **gradients**: its gradients through the device against those on "cpu".

Each check records which of the device's kernels the op ran (a composite runs the ops of
its decomposition, a fallback kernel may call the device's own ones), and the checks run
primitives first, composites after. A check that fails while an op it ran has failed is
not blamed on the op: it is reported as explained by that op (pytest shows it skipped), and
the summary ends with the **root causes**, the fewest ops whose failures explain every
failure. The plugin is registered through the ``pytest11`` entry point of torcia-core, so
any environment with torcia-core and pytest has it.

Sample inputs come from four places: generated ones for the ops whose inputs are plain
tensors (elementwise ops, activations, reductions, products...), those an op's record
declares (:attr:`torcia._opdef.OpDef.samples`: the creation ops, ops taking indices,
windows or sequences, a plugin's op given ``samples=``), the calls core's own docstring
examples make, and a small workload of NN ops (a convolution, pooling, normalisation, an
LSTM cell and a loss, forward and backward). Each
sample is recorded as the op's kernel receives it, through a dispatch mode
(``torcia.library.DispatchMode``), and kept only if it runs on "cpu" and matches the
reference there; an op without one is reported as untested.

Examples
--------
A device plugin's CI runs::

    pytest --torcia-device example

and reads the summary (``-v`` prints one line per op)::

    torcia conformance: device 'example'
    native (3): add, mul, relu
    fallback (215): abs, acos, ...
    failed (0)
    root causes (0)
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import pathlib
import threading
import warnings

import numpy as np
import pytest

import torcia
from torcia import _oprecords, _tensor, ops, plugins
from torcia import backend as _backend
from torcia._ops import nn_activation, nn_conv, nn_loss, nn_norm, nn_pool


@contextlib.contextmanager
def primitives_only(name: str = "prims"):
    """A device ``name`` for the block whose kernels are the reference kernels of the
    primitives only, as a new backend that has written just what it owes: every composite
    runs through its decomposition there. It holds NumPy arrays in memory of its own
    (transfers copy); the plugin that adds it is registered on entry and the plugins are
    reset on exit.

    Examples
    --------
    >>> import torcia
    >>> from torcia.testing.conformance import primitives_only
    >>> with primitives_only("prims") as device:
    ...     torcia.tensor([-1.0, 2.0], device=device).relu().to("cpu")
    tensor([0., 2.])
    """
    def copy(array, index=None):
        return np.array(array, copy=True)

    class PrimitivesOnly:
        @torcia.hookimpl
        def torcia_register_backends(self, registry):
            registry.add(_backend.Backend(name, np, to_host=copy, from_host=copy))

        @torcia.hookimpl
        def torcia_register_kernels(self, registry):
            reference = _oprecords.ReferenceKernels().table()
            for op in _oprecords.primitives():
                if op in reference:
                    registry.add(op, name, reference[op])

    plugin = PrimitivesOnly()
    plugins.manager().register(plugin, name=f"primitives-only-{name}")
    for registry in list(plugins._state.registries.values()):
        registry.reset()  # the tables fill again, with the device's
    try:
        yield name
    finally:
        plugins.manager().unregister(plugin)
        plugins.reset()


#: The test module the option adds to the run.
_TESTS = pathlib.Path(__file__).with_name("_conformance_tests.py")

#: What ``torcia.library.device_ops`` says, in the order the summary lists them.
_KINDS = ("native", "fallback", "decomposed", "missing")


@dataclasses.dataclass
class Sample:
    """One call of an op's kernel: host arrays (and other arguments) and parameters. A
    parameter ``rng`` is given a fresh generator, seeded alike, at each call."""

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
    try:
        _backend.get_backend(device)
    except RuntimeError as exc:
        raise pytest.UsageError(f"--torcia-device {device}: {exc}") from None
    # the checks replace the default collection; paths given on the command line join them
    if config.args_source == pytest.Config.ArgsSource.ARGS:
        config.args.append(str(_TESTS))
    else:
        config.args[:] = [str(_TESTS)]
    config.pluginmanager.register(Report(device), "torcia-conformance-report")


def report(config) -> Report:
    """The run's :class:`Report`."""
    return config.pluginmanager.get_plugin("torcia-conformance-report")


# ---------------------------------------------------------------------------------------
# samples
# ---------------------------------------------------------------------------------------


class _Recorder:
    """Records the calls of every op's kernel (a dispatch mode, made on first use)."""

    def __init__(self):
        class Mode(_tensor.DispatchMode):
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


#: Groups whose ops take vectors or batches of matrices as well as (3, 4) matrices.
_PRODUCTS = ("linalg",)

#: Ops whose first input is a sequence sorted along its last dim, the others values with
#: the same leading dims: on another sequence the result is undefined (PyTorch's
#: ``searchsorted``), so their generated samples sort it and do not broadcast.
_SORTED_FIRST = ("searchsorted",)


def _generated(records) -> list[Sample]:
    """Samples for the ops whose inputs are plain tensors and whose parameters all have
    defaults: each input (3, 4) float, and variants (integers only for the ops whose
    kernels are given integers: see ``torcia.ops.FLOATING_INPUTS``)."""
    rng = _rng()
    out = []
    for name, record in records.items():
        if not record.inputs or any(i.startswith("*") for i in record.inputs) or \
                record.group == "creation":
            continue
        n = len(record.inputs)
        # positive, below 1: inside the domain of log, sqrt, atanh, acos...
        base = [rng.uniform(0.2, 0.9, (3, 4)).astype(np.float32) for _ in range(n)]
        variants = {"float32": base, "float64": [a.astype(np.float64) for a in base],
                    # made on the device as a transposed view (see ``run``)
                    "noncontiguous": base}
        # drawn for every op, so that the samples after it stay the same
        integers = [rng.integers(1, 5, (3, 4)) for _ in range(n)]
        if name not in ops.FLOATING_INPUTS:
            variants["int64"] = integers
        if n == 1:
            # both signs: an op that writes into its input shows it (relu, abs)
            variants["signed"] = [rng.uniform(-1, 1, (3, 4)).astype(np.float32)]
        if n == 2:
            variants["broadcast"] = [base[0][:, :1], base[1][:1, :]]
        if record.group in _PRODUCTS and n == 2:
            variants["vectors"] = [rng.uniform(-1, 1, 4).astype(np.float32) for _ in range(2)]
            variants["batched"] = [rng.uniform(-1, 1, (2, 3, 4)).astype(np.float32),
                                   rng.uniform(-1, 1, (2, 4, 3)).astype(np.float32)]
            variants["batch broadcast"] = [rng.uniform(-1, 1, (2, 3, 4)).astype(np.float32),
                                           rng.uniform(-1, 1, (4, 5)).astype(np.float32)]
        if name in _SORTED_FIRST:
            variants = {k: [np.sort(v[0], -1), *v[1:]] for k, v in variants.items()
                        if k != "broadcast"}
        for variant, args in variants.items():
            out.append(Sample(name, variant, tuple(args), {}))
        # ops along a dimension (scans, reductions, flips): the last one, then the first,
        # (and both, for reductions), with and without keepdim
        params = {k: v for k, v in record.params.items() if v is not None}
        dims = [("dim", 1), ("dim", 0), ("dims", (1,))]
        if record.group == "reduce":
            dims.append(("dim", (0, 1)))
        for key, value in dims:
            if key in record.params:
                out.append(Sample(name, f"{key}={value}", tuple(base), {**params, key: value}))
                if "keepdim" in record.params:
                    out.append(Sample(name, f"{key}={value}, keepdim", tuple(base),
                                      {**params, key: value, "keepdim": True}))
    return out


def _declared(records) -> list[Sample]:
    """The samples the ops declare (:attr:`torcia._opdef.OpDef.samples`): the calls of
    those whose inputs the generated samples cannot make (index tensors, windows,
    sequences, losses, fused backward ops) and of the creation ops."""
    rng = _rng()
    return [Sample(name, f"declared{i}", tuple(args), dict(params))
            for name, record in records.items() if record.samples is not None
            for i, (args, params) in enumerate(record.samples(rng))]


def _doc_examples(recorder) -> None:
    """Run the docstring examples of core's public modules, recording the kernels."""
    import doctest
    import importlib

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
    try:
        _tensor.load_autograd()
        grad = True
    except RuntimeError:
        grad = False
    torcia.manual_seed(0)
    x = torcia.randn(2, 3, 6, 6, requires_grad=grad)
    w = torcia.randn(4, 3, 3, 3, requires_grad=grad)
    with recorder.mode:
        y = nn_conv.conv2d(x, w, padding=1)
        y = nn_norm.batch_norm(y, torcia.zeros(4), torcia.ones(4), training=True)
        y = nn_pool.max_pool2d(y, 2) + nn_pool.avg_pool2d(y, 2)
        y = nn_norm.layer_norm(nn_activation.gelu(y), (3,))
        y = nn_norm.rms_norm(y, (3,), torcia.full((3,), 0.5)).flatten(1)
        z = nn_norm.log_softmax(nn_activation.silu(y), dim=1)
        loss = z.sum()
        t = nn_conv.conv_transpose2d(x, torcia.randn(3, 2, 2, 2), stride=2)
        loss = loss + nn_norm.softmax(t, dim=1).mean()
        emb = nn_loss.embedding(torcia.tensor([[0, 2], [1, 1]]),
                                torcia.randn(3, 4, requires_grad=grad))
        loss = loss + emb.sum() + _tensor.call(
            "cross_entropy", (y, torcia.tensor([1, 0]), None),
            {"reduction": "mean", "ignore_index": -100, "label_smoothing": 0.0})
        gates = torcia.randn(2, 8, requires_grad=grad)
        h, c, _ = _tensor.call("lstm_cell", (gates, torcia.randn(2, 2)), {})
        loss = loss + h.sum() + c.sum()
        # a whole LSTM layer and a CTC loss: their fused backward ops run in backward
        out, _, _ = _tensor.call("lstm_layer", (
            torcia.randn(3, 2, 8, requires_grad=grad), torcia.randn(2, 2),
            torcia.randn(2, 2), torcia.randn(2, 8)), {})
        log_probs = nn_norm.log_softmax(torcia.randn(5, 1, 3, requires_grad=grad), dim=2)
        loss = loss + out.sum() + _tensor.call("ctc_loss", (
            log_probs, torcia.tensor([[1, 2]]), torcia.tensor([5]), torcia.tensor([2])),
            {"blank": 0}).sum()
        # products and indexing the docstring examples leave out
        a = torcia.randn(3, 4, requires_grad=grad)
        b = torcia.randn(4, 2, requires_grad=grad)
        for part in (torcia.einsum("ij,jk->ik", a, b), torcia.addmm(torcia.randn(3, 2), a, b),
                     _tensor.call("linear", (a, b.t(), torcia.randn(2)), {}),
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
    records = _oprecords.op_records()
    found = _generated(records) + _declared(records)
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
    if isinstance(x, dict):
        return {k: _rng() if k == "rng" else _copy(v) for k, v in x.items()}
    return x


def _runs_on_cpu(sample) -> bool:
    try:
        check(sample, "cpu")
    except Exception:  # noqa: BLE001 - a sample the reference or "cpu" refuses is no sample
        return False
    return True


# ---------------------------------------------------------------------------------------
# tracing: which of the device's kernels an op ran
# ---------------------------------------------------------------------------------------


class _Tracer:
    """Wraps every kernel of a device (and the device's kernels a ``"reference"``
    fallback calls from within) so that :meth:`trace` can say which ops ran."""

    def __init__(self, device: str):
        self.local = threading.local()
        backend = _backend.get_backend(device)
        for op, kernel in list(backend.kernels.items()):
            backend.kernels[op] = self._wrap(op, kernel)
        # an op the device lacks counts as run when something asks for it
        local = self.local

        class Traced(type(backend.kernels)):
            def __missing__(self, op):
                ran = getattr(local, "ran", None)
                if ran is not None:
                    ran.add(op)
                return super().__missing__(op)

        backend.kernels.__class__ = Traced
        # a "reference" fallback runs the reference kernels with the device's own kernels
        # bound on one object for their inner calls (``self.matmul(...)`` in conv)
        inner = {id(getattr(k, "__self__", None)): k.__self__
                 for k in backend._fallbacks.values() if hasattr(k, "__self__")}
        for holder in inner.values():
            for op, kernel in list(vars(holder).items()):
                if callable(kernel) and op in backend.kernels:
                    setattr(holder, op, self._wrap(op, kernel))

    def _wrap(self, op, kernel):
        local = self.local

        def traced(*args, **params):
            ran = getattr(local, "ran", None)
            if ran is not None:
                ran.add(op)
            return kernel(*args, **params)

        traced.__wrapped__ = kernel
        return traced

    @contextlib.contextmanager
    def trace(self):
        """Collect, in the set it yields, the ops the device runs meanwhile."""
        ran = self.local.ran = set()
        try:
            yield ran
        finally:
            self.local.ran = None


_TRACERS: dict[str, _Tracer] = {}


def tracer(device: str) -> _Tracer:
    if device not in _TRACERS:
        _TRACERS[device] = _Tracer(device)
    return _TRACERS[device]


# ---------------------------------------------------------------------------------------
# running and comparing
# ---------------------------------------------------------------------------------------


def reference(sample):
    """The reference kernel's result, on host arrays."""
    record = _oprecords.op_records()[sample.op]
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


@dataclasses.dataclass
class Ran:
    """An op run on a device: its inputs and outputs there."""

    inputs: tuple
    out: object


def execute(sample, device, requires_grad=False) -> Ran:
    """Run the op on ``device``: through torcia's dispatch, or for a creation op through
    the device's kernel, as ``torcia.zeros`` and friends call it."""
    transposed = sample.variant == "noncontiguous"
    inputs = tuple(_to_device(a, device, requires_grad, transposed) for a in sample.args)
    with _quiet():
        record = _oprecords.op_records()[sample.op]
        creation = record.group == "creation" or record.random
        if creation or not any(isinstance(a, np.ndarray) for a in sample.args):
            dev = torcia.device(device)
            kernels = _backend.get_backend(dev.type).kernels
            decomposition = _tensor.DECOMPOSITIONS.get(sample.op) if creation else None
            if decomposition is not None and sample.op not in kernels:
                # a composite (zeros, uniform...) the device lacks: its decomposition there
                return Ran(inputs, decomposition(*inputs, device=dev, **_copy(sample.params)))
            kernel = kernels[sample.op]
            arrays = [t._data if isinstance(t, torcia.Tensor) else t for t in inputs]
            return Ran(inputs, torcia.Tensor._make(kernel(*arrays, **_copy(sample.params)),
                                                   dev))
        return Ran(inputs, _tensor.call(sample.op, inputs, _copy(sample.params)))


def run(sample, device, requires_grad=False):
    """Run the op on ``device``; its outputs as host arrays (with ``requires_grad``, the
    device tensors: ``(inputs, outputs)``)."""
    ran = execute(sample, device, requires_grad)
    if requires_grad:
        return ran.inputs, ran.out
    return _host(ran.out)


def _host(out):
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
    where = f"{sample.op} ({sample.variant})"
    assert got.shape == want.shape, f"{where}: shape {got.shape}, expected {want.shape}"
    assert got.dtype == want.dtype, f"{where}: dtype {got.dtype}, expected {want.dtype}"
    if want.dtype.kind in "fc":
        tol = 1e-5 if want.dtype in (np.float32, np.complex64) else 1e-10
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True,
                                   err_msg=where)
    else:
        np.testing.assert_array_equal(got, want, err_msg=where)


def _random_values(got, want, sample, record) -> None:
    """A random op's draws (or ``empty``'s values): the reference's shape and dtype, and
    values the op could draw (its record's ``draws``)."""
    where = f"{sample.op} ({sample.variant})"
    assert got.shape == want.shape, f"{where}: shape {got.shape}, expected {want.shape}"
    assert got.dtype == want.dtype, f"{where}: dtype {got.dtype}, expected {want.dtype}"
    wrong = record.draws(got, *sample.args, **sample.params) if record.draws else None
    assert wrong is None, f"{where}: {wrong}"


def _arrays(x) -> list:
    if isinstance(x, tuple):
        return [a for o in x for a in _arrays(o)]
    return [x._data] if isinstance(x, torcia.Tensor) else []


def _aliasing(ran: Ran, sample, device, host_args, want) -> None:
    """The memory contracts: inputs as they were, outputs of their own, views views.
    ``host_args`` and ``want``: the reference kernel's arguments and result."""
    where = f"{sample.op} ({sample.variant})"
    for i, (given, t) in enumerate(zip(sample.args, ran.inputs)):
        if isinstance(given, np.ndarray):
            after = _host(t)
            assert after.shape == given.shape and np.array_equal(
                after, given, equal_nan=given.dtype.kind in "fc"), (
                f"{where}: wrote into its input {i} (an out-of-place op leaves its inputs "
                "as they were)")
    shares = getattr(_backend.get_backend(device).xp, "may_share_memory", None)
    if shares is None:
        return  # an array module that cannot say: aliasing is not checked
    outs, ins = _arrays(ran.out), _arrays(ran.inputs)
    aliased = any(shares(o, i) for o in outs for i in ins)
    want_arrays = [w for w in (want if isinstance(want, tuple) else (want,))
                   if isinstance(w, np.ndarray)]
    expected = any(np.may_share_memory(w, a) for w in want_arrays for a in host_args
                   if isinstance(a, np.ndarray))
    if expected and not aliased and sample.op in ops.VIEW and not _host_copies(
            sample.op, device):
        raise AssertionError(f"{where}: returned a copy where PyTorch returns a view of "
                             "its input")
    if aliased and not expected:
        raise AssertionError(f"{where}: returned memory of its input (an out-of-place op "
                             "returns memory of its own)")


def _host_copies(op: str, device: str) -> bool:
    """Whether ``op`` runs on ``device`` through the host fallback, which copies: a view
    there is a copy by design (the summary lists those ops)."""
    return op in _host_fallback_ops(device)


@functools.cache
def _host_fallback_ops(device: str) -> frozenset:
    if _backend.get_backend(device).fallback != "host":
        return frozenset()
    return frozenset(op for op, how in _oprecords.device_ops(device).items() if how == "fallback")


def check(sample, device) -> None:
    """The values and aliasing checks of one sample on ``device``; an AssertionError
    saying what differs."""
    host_args = _copy(sample.args)
    record = _oprecords.op_records()[sample.op]
    with _quiet():
        want = record.kernel(*host_args, **_copy(sample.params))
    ran = execute(sample, device)
    got = _host(ran.out)
    if record.random or sample.op == "empty":
        _random_values(got, want, sample, record)
    else:
        compare(got, want, sample)
    _aliasing(ran, sample, device, host_args, want)


def gradients(sample, device):
    """The gradients of a fixed weighted sum of the op's float outputs with respect to
    its float inputs, computed on ``device``; None where nothing is differentiable. The
    outputs cross to "cpu" before the sum, so that the device runs the op and its
    backward formula only."""
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
    """Collects each check's outcome and the ops it ran, orders the checks (primitives
    first) and prints the coverage summary and the root causes."""

    def __init__(self, device):
        self.device = device
        self.ops: dict[str, str] = {}
        self.selected: set[str] = set()
        self.outcomes: dict[str, dict[str, str]] = {}
        #: (op, check) -> the ops of the device its first failing sample ran
        self.ran: dict[tuple[str, str], set[str]] = {}

    def pytest_collection_modifyitems(self, session, config, items):
        self.ops = _oprecords.device_ops(self.device)
        rank = {"creation": 0, "native": 1, "fallback": 2, "decomposed": 3, "missing": 4}
        records = _oprecords.op_records()

        def order(item):
            op = item.callspec.params.get("op") if hasattr(item, "callspec") else None
            if op is None:
                return (2, 0, 0, "")
            first = self.ops.get(op)
            if records[op].group == "creation" and first != "decomposed":
                # a composite one (uniform...) runs primitives: it comes after them
                first = "creation"
            # views first: the checks make their non-contiguous inputs with transpose
            return (0 if item.originalname == "test_values" else 1, rank.get(first, 4),
                    op not in ops.VIEW, op)

        items.sort(key=order)

    def pytest_collection_finish(self, session):
        # what -k or -m left to run
        self.selected = {item.callspec.params["op"] for item in session.items
                         if hasattr(item, "callspec") and "op" in item.callspec.params}

    def ran_when_failing(self, op: str, check: str, ran: set[str]) -> None:
        """Record the ops the failing sample of ``op``'s ``check`` ran on the device."""
        self.ran[(op, check)] = set(ran)

    def _failing(self) -> set[str]:
        return {op for op, checks in self.outcomes.items()
                if any(o in ("failed", "explained") for o in checks.values())} | {
            op for op, how in self.ops.items() if how == "missing"}

    def causes(self, op: str, check: str) -> list[str]:
        """The failed (or missing) ops, other than ``op``, that the failing sample of
        ``op``'s ``check`` ran: what explains its failure, as far as known now."""
        return sorted((self.ran.get((op, check), set()) & self._failing()) - {op})

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report):
        op = dict(report.user_properties).get("torcia_op")
        if op is None or (report.when != "call" and report.passed):
            return
        check = dict(report.user_properties).get("torcia_check", "?")
        explained = dict(report.user_properties).get("torcia_explained")
        outcome = ("explained" if explained else "failed" if report.failed
                   else "skipped" if report.skipped else "passed")
        done = self.outcomes.setdefault(op, {})
        if done.get(check) != "failed":
            done[check] = outcome

    def _checks(self):
        """``(op, check, causes)`` of every failing check, with what explains each once
        every check has run."""
        out = []
        for op, checks in sorted(self.outcomes.items()):
            if self.ops.get(op) == "missing":
                continue
            for check, outcome in sorted(checks.items()):
                if outcome in ("failed", "explained"):
                    out.append((op, check, self.causes(op, check)))
        return out

    def failed_ops(self) -> dict[str, list[str]]:
        """op -> its failing checks (``"gradients <- sum"`` where another op's failure
        explains one), for the ops the device runs (a missing op's checks fail too; the
        summary lists those as missing)."""
        out = {}
        for op, check, causes in self._checks():
            out.setdefault(op, []).append(f"{check} <- {', '.join(causes)}" if causes
                                          else check)
        return out

    def root_causes(self) -> dict[str, list[str]]:
        """The fewest ops whose failures explain every failure, each with the checks of
        other ops it explains: an op with a check that fails on its own, and a missing op
        that others need."""
        checks = self._checks()
        own = {op for op, _, causes in checks if not causes}
        explained: dict[str, list[str]] = {}
        for op, check, causes in checks:
            if causes:
                for root in self._roots_of(causes, own) or [op]:
                    explained.setdefault(root, []).append(f"{op} [{check}]")
        return {op: explained.get(op, []) for op in sorted(own | set(explained))}

    def _roots_of(self, causes, own) -> list[str]:
        # an explaining op that failed only because of others hands the blame on
        found, todo, seen = set(), list(causes), set()
        while todo:
            op = todo.pop()
            if op in seen:
                continue
            seen.add(op)
            if op in own or self.ops.get(op) == "missing":
                found.add(op)
            else:
                todo.extend(c for check in self.outcomes.get(op, {})
                            for c in self.causes(op, check))
        return sorted(found)

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
        copies = sorted(op for op in ops.VIEW if _host_copies(op, self.device))
        if copies:
            write(f"views the host fallback copies ({len(copies)}; writing into one leaves "
                  f"its input alone, unlike PyTorch's): {', '.join(copies)}")
        roots = self.root_causes()
        write(f"root causes ({len(roots)}): the fewest ops whose failures explain every "
              "failure")
        for op, explains in roots.items():
            what = "missing" if self.ops.get(op) == "missing" else ", ".join(
                c for c in failed.get(op, []) if "<-" not in c)
            write(f"  {op} [{what}]" + (f" explains {len(explains)}: {', '.join(explains)}"
                                        if explains else ""))
        if terminalreporter.config.option.verbose > 0:
            for op in sorted(self.ops):
                result = ("failed: " + ", ".join(failed[op]) if op in failed
                          else "not selected" if op not in self.selected
                          else "failed" if self.ops[op] == "missing"
                          else "untested" if op in untested else "passed")
                write(f"  {op:32} {self.ops[op]:10} {result}")
