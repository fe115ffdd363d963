"""torcia-cpu: native kernels for torcia's "cpu" device.

The plugin overrides core's NumPy reference kernels where native code is faster
(convolution, pooling, embedding backward, activations, LayerNorm and BatchNorm, the
LSTM layer's time loop, float matrix products, multi-tensor optimizer updates), through
the same ``torcia_register_kernels`` hook as any plugin. Float32/float64 products run on
the extension's own OpenBLAS (scipy-openblas32), or on MKL where it is installed (see
``_provider`` and :func:`blas_library`); others stay on NumPy's BLAS, on one thread unless
large (see ``_blas``).
Results agree with the reference kernels to float tolerance; blocking the plugin
(``TORCIA_DISABLE_PLUGINS=cpu``) falls back to them.
"""

import os

# libgomp's idle threads spin this many rounds (about half a millisecond) before they sleep.
# A training step's parallel regions come tens of microseconds apart, and a wake-up through
# the kernel cost more than that on a VM (sleeping at once: an MLP step at 2 threads took
# 5.4 ms, 4.3 ms with this spin); libgomp's own default spins 30 times as long, which keeps a
# core from the other processes of a busy machine after every region. Read when the runtime
# loads with the extension, so set here; a user's OMP_WAIT_POLICY or GOMP_SPINCOUNT wins.
SPIN_COUNT = 10_000
if "OMP_WAIT_POLICY" not in os.environ:
    os.environ.setdefault("GOMP_SPINCOUNT", str(SPIN_COUNT))

# the OpenBLAS the extension calls: loaded (and its symbols made global) before the extension
import scipy_openblas32  # noqa: E402, F401


def blas_library() -> str:
    """The BLAS library that runs the plugin's float32/float64 matrix products.

    ``"openblas"``, or MKL's version string where the ``mkl`` package is installed and
    ``TORCIA_CPU_BLAS`` is not ``openblas``. Asking makes the choice, as the plugin's first
    kernel would.

    Examples
    --------
    >>> import torcia_cpu
    >>> torcia_cpu.blas_library().split()[0] in ("openblas", "Intel(R)")
    True
    """
    from torcia_cpu import _provider

    return _provider.choose()
