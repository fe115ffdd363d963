"""The checks ``pytest --torcia-device NAME`` runs (see :mod:`torcia.testing.conformance`):
one test per op and kind of check, parametrized over the op records, primitives first.

A check that fails while an op it ran on the device has failed is skipped as explained by
that op; the summary's root causes say which ops to fix first."""

import numpy as np
import pytest

from torcia import _oprecords, _tensor
from torcia.testing import conformance


def _device(config):
    return config.getoption("torcia_device")


def pytest_generate_tests(metafunc):
    if "op" not in metafunc.fixturenames:
        return
    ops = sorted(_oprecords.op_records())
    if metafunc.function.__name__ == "test_gradients":
        ops = [op for op in ops if _oprecords.op_records()[op].backward is not None]
    metafunc.parametrize("op", ops)


@pytest.fixture
def device(request):
    return _device(request.config)


def _label(request, op, check):
    request.node.user_properties.append(("torcia_op", op))
    request.node.user_properties.append(("torcia_check", check))


def _how(device, op):
    how = _oprecords.device_ops(device)[op]
    if how == "missing":
        pytest.fail(f"op {op!r} is missing on device {device!r}: no kernel, no fallback "
                    "and no decomposition", pytrace=False)
    return how


class _Checks:
    """Runs one op's samples on the device, tracing the ops each runs; keeps the first
    failure and what its sample ran."""

    def __init__(self, request, device, op, check):
        self.request, self.device, self.op, self.check = request, device, op, check
        self.tracer = conformance.tracer(device)
        self.failure = None
        self.ran = 0

    def run(self, fn, sample):
        with self.tracer.trace() as ran:
            try:
                fn(sample)
            except conformance.Unsupported:
                return
            except Exception as exc:  # noqa: BLE001 - a kernel that raises fails the check
                if self.failure is None:
                    self.failure = exc
                    conformance.report(self.request.config).ran_when_failing(
                        self.op, self.check, ran)
        self.ran += 1

    def finish(self, what):
        if self.failure is not None:
            causes = conformance.report(self.request.config).causes(self.op, self.check)
            if causes:
                self.request.node.user_properties.append(("torcia_explained", causes))
                pytest.skip(f"explained by {', '.join(causes)}, which failed on "
                            f"{self.device!r} and which {self.op!r} ran: {self.failure}")
            raise self.failure
        if not self.ran:
            pytest.skip(f"no {what} for op {self.op!r} can be made on {self.device!r}")


def test_values(request, device, op):
    """The op's values, dtypes and shapes on the device equal the reference kernel's,
    for each sample input (dtypes, signs, broadcasting, non-contiguous inputs, vectors and
    batches, reductions with keepdim, creation ops), and it keeps the aliasing contracts:
    inputs left as they were, memory of its own, views where PyTorch returns views."""
    _label(request, op, "values")
    _how(device, op)
    found = conformance.samples().get(op)
    if not found:
        pytest.skip(f"no sample input for op {op!r}")
    checks = _Checks(request, device, op, "values")
    for sample in found:
        checks.run(lambda s: conformance.check(s, device), sample)
    checks.finish("sample input")


def test_gradients(request, device, op):
    """Gradients through the device equal those on "cpu"."""
    _label(request, op, "gradients")
    _how(device, op)
    try:
        _tensor.load_autograd()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    found = [s for s in conformance.samples().get(op, ()) if s.variant != "int64"]
    if not found:
        pytest.skip(f"no sample input for op {op!r}")
    checks = _Checks(request, device, op, "gradients")
    for sample in found:
        try:
            want = conformance.gradients(sample, "cpu")
        except Exception:  # noqa: BLE001 - not differentiable at this sample on "cpu"
            continue
        if want is not None:
            checks.run(lambda s, want=want: _same_gradients(s, device, want), sample)
    checks.finish("differentiable sample")


def _same_gradients(sample, device, want):
    got = conformance.gradients(sample, device)
    assert got is not None, f"{sample.op} ({sample.variant}): no gradient on {device!r}"
    for g, w in zip(got, want):
        assert (g is None) == (w is None), f"{sample.op}: a gradient is missing"
        if w is not None:
            tol = 1e-4 if w.dtype == np.float32 else 1e-8
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol, equal_nan=True,
                                       err_msg=f"gradient of {sample.op} ({sample.variant})")
