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

# OpenMP threads that spin while waiting steal the core from the Python thread on a busy
# machine; passive waiting must be chosen before the runtime loads with the extension
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

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
