"""Which BLAS library runs the extension's matrix products: OpenBLAS, or Intel's MKL.

The extension is linked against the OpenBLAS of the ``scipy-openblas32`` wheel, which is
always installed. Where the ``mkl`` wheel is installed too (``pip install
"torcia-cpu[mkl]"``) and the CPU is Intel's, its products run on MKL instead, loaded from
MKL's single dynamic library (``libmkl_rt``) when the plugin's first kernel runs. On the
Intel AVX-512 CPUs this was measured on, MKL's SGEMM runs 10-20% faster than OpenBLAS's
at the shapes of small models (a batch of 1024 token vectors of 128 by 128x512 weights),
and it is the library PyTorch's CPU builds use, so the comparison is like for like. MKL is
optional because it is large (about 300 MB with its dependencies) and comes under Intel's
Simplified Software License rather than an open-source one; OpenBLAS gives the same
results to float tolerance.

``TORCIA_CPU_BLAS`` chooses: ``auto`` (the default: MKL where installed and the CPU is
Intel's), ``openblas``, or ``mkl`` (an error where MKL is not installed or cannot be
loaded). On other vendors' CPUs MKL's SGEMM does not run its best code: on the AMD EPYC
(Zen 4) development machine, one thread, OpenBLAS reached 94-96 GFLOP/s on square products
against MKL's 82-83, and the benchmark's training steps ran 5-16% faster on it (MLP 5.5
against 6.3 ms, transformer 52 against 62 ms, ResNet-18 421 against 446 ms).

The int8 products of torcia-ao's quantized ops need an integer GEMM, which OpenBLAS does
not have. Where the ``onednn-cpu-gomp`` wheel is installed (``pip install
"torcia-cpu[int8]"``) they run on oneDNN's ``dnnl_gemm_u8s8s32``, loaded the same way;
else on MKL's ``cblas_gemm_s8u8s32`` where MKL is loaded; else on torcia-ao's NumPy
reference. oneDNN, not MKL, because it picks its code by the CPU's instruction set, not its
vendor: on the AMD EPYC (Zen 4, AVX-512 VNNI) development machine MKL's integer GEMM runs
a generic path, 8.5x slower than oneDNN's (512x768x3072: 57 ms against 6.8 ms on one
thread; MKL's SGEMM of the same shape takes 24 ms). The GNU OpenMP build threads on the
OpenMP runtime the extension itself uses; the wheel is under Apache 2.0.
"""

from __future__ import annotations

import importlib.metadata
import os
import warnings

from torcia_cpu import SPIN_COUNT, _native

CHOICES = ("auto", "openblas", "mkl")
_chosen = []
_splits = []


def _spins_long(env) -> bool:
    """Whether libgomp, reading ``env`` as it loads with the extension, has its idle threads
    spin longer than torcia_cpu/__init__.py's ``SPIN_COUNT`` before they sleep: an active
    wait policy, a larger ``GOMP_SPINCOUNT`` (or one this does not read), or libgomp's own
    default."""
    policy = env.get("OMP_WAIT_POLICY", "").strip().lower()
    count = env.get("GOMP_SPINCOUNT", "").strip()
    if count:
        try:
            return int(count) > SPIN_COUNT
        except ValueError:
            return True
    return policy != "passive"


_SPINS_LONG = _spins_long(os.environ)


def find_mkl() -> str | None:
    """The path of the installed ``mkl`` wheel's ``libmkl_rt``, or None."""
    try:
        dist = importlib.metadata.distribution("mkl")
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in dist.files or ():
        if file.name.startswith("libmkl_rt.so"):
            path = dist.locate_file(file)
            if os.path.exists(path):
                return str(path)
    return None


def find_onednn() -> str | None:
    """The path of the installed ``onednn-cpu-gomp`` wheel's ``libdnnl.so.3``, or None."""
    try:
        dist = importlib.metadata.distribution("onednn-cpu-gomp")
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in dist.files or ():
        if file.name == "libdnnl.so.3":
            path = dist.locate_file(file)
            if os.path.exists(path):
                return str(path)
    return None


def _load_int8() -> None:
    path = find_onednn()
    if path is None:
        return
    try:
        _native.use_onednn(path)
    except RuntimeError as exc:
        warnings.warn(f"torcia-cpu: oneDNN could not be loaded, int8 products use MKL or "
                      f"the reference: {exc}", RuntimeWarning, stacklevel=3)


def splits_products() -> bool:
    """Whether the extension splits a product over torcia's threads itself (panels on
    libgomp's threads, see blas.cpp's gemm_panels) rather than handing it to the
    library's threads: on OpenBLAS, whose threads spin while they wait for each other
    (see ``_blas``)."""
    if _splits:
        return _splits[0]
    splits = _native.blas_name() == "openblas"
    if _chosen:  # the library is settled: asked on every product, answered from here
        _splits.append(splits)
    return splits


def threads_spin() -> bool:
    """Whether the threads of the extension's products spin while they wait for each
    other (see ``_blas``): they are libgomp's (MKL's, or the panels OpenBLAS's products
    are split into: :func:`splits_products`), which spin briefly, then sleep, under the
    spin count the plugin sets unless the user chose another wait."""
    return _SPINS_LONG


def cpu_vendor() -> str:
    """The CPU's vendor as the kernel names it (``GenuineIntel``, ``AuthenticAMD``), or ""
    where ``/proc/cpuinfo`` does not say."""
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("vendor_id"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return ""


def choose() -> str:
    """Switch the extension to the library ``TORCIA_CPU_BLAS`` asks for (once per process)
    and return its name."""
    if _chosen:
        return _native.blas_name()
    _chosen.append(True)
    _load_int8()
    want = os.environ.get("TORCIA_CPU_BLAS", "auto").strip().lower() or "auto"
    if want not in CHOICES:
        raise ValueError(f"TORCIA_CPU_BLAS={want!r}: expected one of {', '.join(CHOICES)}")
    # an unknown vendor keeps MKL: the choice made before vendors were told apart
    if want == "openblas" or (want == "auto" and cpu_vendor() not in ("GenuineIntel", "")):
        return _native.blas_name()
    path = find_mkl()
    if path is None:
        if want == "mkl":
            raise RuntimeError("TORCIA_CPU_BLAS=mkl, but the mkl package is not installed "
                               "(pip install \"torcia-cpu[mkl]\")")
        return _native.blas_name()
    try:
        return _native.use_mkl(path)
    except RuntimeError as exc:
        if want == "mkl":
            raise
        # an unusable MKL must not stop training: OpenBLAS gives the same results
        warnings.warn(f"torcia-cpu: MKL could not be loaded, products stay on OpenBLAS: "
                      f"{exc}", RuntimeWarning, stacklevel=2)
        return _native.blas_name()
