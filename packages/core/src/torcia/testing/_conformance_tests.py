"""The checks ``pytest --torcia-device NAME`` runs (see :mod:`torcia.testing.conformance`):
one test per op and kind of check, parametrized over the op records."""

import numpy as np
import pytest

from torcia.testing import conformance


def _device(config):
    return config.getoption("torcia_device")


def pytest_generate_tests(metafunc):
    if "op" not in metafunc.fixturenames:
        return
    from torcia import library

    ops = sorted(library.op_records())
    if metafunc.function.__name__ == "test_gradients":
        ops = [op for op in ops if library.op_records()[op].backward is not None]
    metafunc.parametrize("op", ops)


@pytest.fixture
def device(request):
    return _device(request.config)


def _label(request, op, check):
    request.node.user_properties.append(("torcia_op", op))
    request.node.user_properties.append(("torcia_check", check))


def _how(device, op):
    from torcia import library

    how = library.device_ops(device)[op]
    if how == "missing":
        pytest.fail(f"op {op!r} is missing on device {device!r}: no kernel, no fallback "
                    "and no decomposition", pytrace=False)
    return how


def test_values(request, device, op):
    """The op's values, dtypes and shapes on the device equal the reference kernel's,
    for each sample input (dtypes, broadcasting, non-contiguous inputs)."""
    _label(request, op, "values")
    _how(device, op)
    found = conformance.samples().get(op)
    if not found:
        pytest.skip(f"no sample input for op {op!r}")
    ran = 0
    for sample in found:
        want = conformance.reference(sample)
        try:
            got = conformance.run(sample, device)
        except conformance.Unsupported:
            continue
        conformance.compare(got, want, sample)
        ran += 1
    if not ran:
        pytest.skip(f"no sample input for op {op!r} can be made on {device!r}")


def test_gradients(request, device, op):
    """Gradients through the device equal those on "cpu"."""
    from torcia import library

    _label(request, op, "gradients")
    _how(device, op)
    try:
        library.autograd_engine()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    found = [s for s in conformance.samples().get(op, ()) if s.variant != "int64"]
    if not found:
        pytest.skip(f"no sample input for op {op!r}")
    checked = 0
    for sample in found:
        try:
            want = conformance.gradients(sample, "cpu")
        except Exception:  # noqa: BLE001 - not differentiable at this sample on "cpu"
            continue
        if want is None:
            continue
        try:
            got = conformance.gradients(sample, device)
        except conformance.Unsupported:
            continue
        checked += 1
        for g, w in zip(got, want):
            assert (g is None) == (w is None), f"{op}: a gradient is missing"
            if w is not None:
                tol = 1e-4 if w.dtype == np.float32 else 1e-8
                np.testing.assert_allclose(g, w, rtol=tol, atol=tol, equal_nan=True,
                                           err_msg=f"gradient of {op} ({sample.variant})")
    if not checked:
        pytest.skip(f"no differentiable sample for op {op!r}")
