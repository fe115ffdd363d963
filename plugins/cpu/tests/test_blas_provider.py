"""The BLAS library behind the extension's products: OpenBLAS, or MKL where installed.

Every product of the plugin (matmul, linear, a batch of attention products read through
transposed views, convolution and its gradients, the LSTM layer's time loop) is computed
in a child process on each library and compared with float64 NumPy; the choice itself
(``TORCIA_CPU_BLAS``) and a library that is not MKL are checked too.
"""

import os
import subprocess
import sys

import numpy as np
import pytest
from torcia_cpu import _native, _provider

pytest.importorskip("torcia.autograd")

HAS_MKL = _provider.find_mkl() is not None
needs_mkl = pytest.mark.skipif(not HAS_MKL, reason="the mkl package is not installed")

# each product in float32 and float64, through the plugin's kernels; the inputs come from
# a fixed NumPy seed so both children see the same ones
PRODUCTS = r"""
import sys
import numpy as np
import torcia, torcia_cpu
import torcia.nn.functional as F

rng = np.random.default_rng(0)
out = {}
for dt in ("float32", "float64"):
    def t(*shape, grad=False):
        return torcia.tensor(rng.standard_normal(shape).astype(dt), requires_grad=grad)
    a, b = t(37, 53), t(53, 29)
    out[f"mm_{dt}"] = (a @ b).numpy()
    out[f"mm_ref_{dt}"] = a.numpy().astype(np.float64) @ b.numpy().astype(np.float64)
    q, k = t(3, 4, 17, 8), t(3, 4, 17, 8)
    att = q @ k.transpose(-2, -1)
    out[f"att_{dt}"] = att.numpy()
    out[f"att_ref_{dt}"] = (q.numpy().astype(np.float64)
                            @ np.swapaxes(k.numpy(), -1, -2).astype(np.float64))
    # one row or one column (the matrix-vector path), each operand plain or transposed
    for name, (l, r) in {"row": (t(1, 53), b), "row_t": (t(53, 1).mT, t(29, 53).mT),
                         "col": (a, t(53, 1)), "col_t": (t(53, 37).mT, t(1, 53).mT)}.items():
        out[f"mv{name}_{dt}"] = (l @ r).numpy()
        out[f"mv{name}_ref_{dt}"] = l.numpy().astype(np.float64) @ r.numpy().astype(np.float64)
    x1, w1 = t(1, 33), t(21, 33)
    out[f"mvlinear_{dt}"] = F.linear(x1, w1, None).numpy()
    out[f"mvlinear_ref_{dt}"] = x1.numpy().astype(np.float64) @ w1.numpy().T.astype(np.float64)
    x, w, bias = t(5, 7, 33, grad=True), t(21, 33, grad=True), t(21)
    y = F.linear(x, w, bias)
    y.sum().backward()
    out[f"linear_{dt}"], out[f"linear_dw_{dt}"] = y.detach().numpy(), w.grad.numpy()
    out[f"linear_ref_{dt}"] = (x.detach().numpy().astype(np.float64)
                               @ w.detach().numpy().T.astype(np.float64) + bias.numpy())
    img, kern = t(2, 3, 9, 11, grad=True), t(4, 3, 3, 3, grad=True)
    c = F.conv2d(img, kern, padding=1)
    (c * c).sum().backward()
    out[f"conv_{dt}"], out[f"conv_dx_{dt}"] = c.detach().numpy(), img.grad.numpy()
    out[f"conv_dw_{dt}"] = kern.grad.numpy()
    torcia.manual_seed(0)
    lstm = torcia.nn.LSTM(6, 10).to(getattr(torcia, dt))
    seq = t(7, 3, 6)
    h, _ = lstm(seq)
    h.sum().backward()
    out[f"lstm_{dt}"], out[f"lstm_dw_{dt}"] = h.detach().numpy(), lstm.weight_hh_l0.grad.numpy()
np.savez(sys.argv[1], **out)
print(torcia_cpu.blas_library())
"""


def _run(code, env, *args):
    return subprocess.run([sys.executable, "-c", code, *map(str, args)],
                          env={**os.environ, **env}, capture_output=True, text=True)


def _products(tmp_path, choice):
    path = tmp_path / f"{choice}.npz"
    proc = _run(PRODUCTS, {"TORCIA_CPU_BLAS": choice}, path)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1], dict(np.load(path))


def _tol(key):
    return (2e-4, 2e-4) if key.endswith("float32") else (1e-10, 1e-10)


def test_openblas_products_match_float64(tmp_path):
    name, out = _products(tmp_path, "openblas")
    assert name == "openblas"
    for key in ("mm", "att", "linear", "mvrow", "mvrow_t", "mvcol", "mvcol_t", "mvlinear"):
        for dt in ("float32", "float64"):
            rtol, atol = _tol(dt)
            np.testing.assert_allclose(out[f"{key}_{dt}"], out[f"{key}_ref_{dt}"], rtol, atol)


@needs_mkl
def test_mkl_products_match_openblas_and_float64(tmp_path):
    name, mkl = _products(tmp_path, "mkl")
    assert name.startswith("Intel(R)") and "Math Kernel Library" in name, name
    _, openblas = _products(tmp_path, "openblas")
    assert mkl.keys() == openblas.keys()
    for key, value in mkl.items():
        rtol, atol = _tol(key)
        np.testing.assert_allclose(value, openblas[key], rtol, atol, err_msg=key)
        if "_ref_" in key:
            np.testing.assert_allclose(mkl[key.replace("_ref", "")], value, rtol, atol)


AUTO_ON = """
from torcia_cpu import _provider
_provider.cpu_vendor = lambda: {vendor!r}
print(_provider.choose())
"""


@needs_mkl
@pytest.mark.parametrize("vendor", ["GenuineIntel", ""])
def test_auto_prefers_mkl_where_installed_on_intel_and_unknown_cpus(vendor):
    proc = _run(AUTO_ON.format(vendor=vendor), {"TORCIA_CPU_BLAS": ""})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Intel(R)")


@needs_mkl
@pytest.mark.parametrize("vendor", ["AuthenticAMD", "HygonGenuine"])
def test_auto_keeps_openblas_on_other_vendors_cpus(vendor):
    proc = _run(AUTO_ON.format(vendor=vendor), {"TORCIA_CPU_BLAS": "auto"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "openblas"


def test_the_cpu_vendor_is_read_from_the_kernel():
    vendor = _provider.cpu_vendor()
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as info:
            assert f": {vendor}" in info.read()
    else:
        assert vendor == ""


def test_an_unknown_choice_is_an_error_naming_it():
    proc = _run("import torcia_cpu; torcia_cpu.blas_library()", {"TORCIA_CPU_BLAS": "atlas"})
    assert proc.returncode != 0
    assert "TORCIA_CPU_BLAS='atlas'" in proc.stderr and "openblas" in proc.stderr


def test_asking_for_mkl_without_it_is_an_error(monkeypatch):
    monkeypatch.setattr(_provider, "find_mkl", lambda: None)
    monkeypatch.setattr(_provider, "_chosen", [])
    monkeypatch.setenv("TORCIA_CPU_BLAS", "mkl")
    with pytest.raises(RuntimeError, match=r"mkl package is not installed.*torcia-cpu\[mkl\]"):
        _provider.choose()


def test_a_library_that_is_not_mkl_leaves_openblas_in_place():
    # OpenBLAS's own library has the CBLAS products but none of MKL's service functions
    code = """
import numpy as np, scipy_openblas32, torcia_cpu._native as N
lib = scipy_openblas32.get_lib_dir() + '/lib' + scipy_openblas32.get_library() + '.so'
for path in (lib, '/nonexistent/libmkl_rt.so.2'):
    try:
        N.use_mkl(path)
    except RuntimeError as exc:
        print(exc)
a = np.arange(12, dtype=np.float32).reshape(3, 4)
assert np.array_equal(N.matmul_batched(a, a.T), a @ a.T)
print(N.blas_name())
"""
    proc = _run(code, {"TORCIA_CPU_BLAS": "openblas"})
    assert proc.returncode == 0, proc.stderr
    no_symbol, no_file, name = proc.stdout.strip().splitlines()
    assert "has no symbol MKL_Set_Interface_Layer" in no_symbol
    assert "cannot load /nonexistent/libmkl_rt.so.2" in no_file
    assert name == "openblas"


def test_an_unloadable_mkl_warns_and_keeps_openblas_when_auto():
    code = """
import warnings
from torcia_cpu import _provider
_provider.find_mkl = lambda: '/nonexistent/libmkl_rt.so.2'
_provider.cpu_vendor = lambda: 'GenuineIntel'
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    print(_provider.choose())
print(caught[0].message)
"""
    proc = _run(code, {"TORCIA_CPU_BLAS": "auto"})
    assert proc.returncode == 0, proc.stderr
    name, message = proc.stdout.strip().splitlines()
    assert name == "openblas"
    assert "MKL could not be loaded" in message and "/nonexistent/libmkl_rt.so.2" in message


@needs_mkl
def test_mkl_is_switched_to_once():
    code = """
import torcia_cpu
from torcia_cpu import _native, _provider
torcia_cpu.blas_library()
try:
    _native.use_mkl(_provider.find_mkl())
except RuntimeError as exc:
    print(exc)
"""
    proc = _run(code, {"TORCIA_CPU_BLAS": "mkl"})
    assert proc.returncode == 0, proc.stderr
    assert "MKL is already in use" in proc.stdout


def test_the_blas_name_reports_the_library_in_use():
    assert _native.blas_name() == "openblas" or _native.blas_name().startswith("Intel(R)")
