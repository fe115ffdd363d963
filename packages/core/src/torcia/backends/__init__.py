"""``torcia.backends``: the switches ``torch.backends`` offers, as flags user code can read
and set.

Each submodule keeps PyTorch's names and defaults. Flags torcia acts on say so; the rest
belong to libraries torcia does not use (cuDNN, oneDNN/MKLDNN, opt_einsum) and are
*accepted and inert*: setting them is allowed, as common training scripts do, and changes
nothing. The submodules are ``cpu``, ``cuda``, ``cudnn``, ``mha``, ``mkl``, ``mkldnn``,
``mps``, ``openmp``, ``opt_einsum`` and ``quantized``.

Examples
--------
>>> import torcia
>>> torcia.backends.cudnn.benchmark = True
>>> torcia.backends.cuda.matmul.allow_tf32
False
>>> torcia.backends.mps.is_available()
False
"""

from torcia.backends import (
    cpu,
    cuda,
    cudnn,
    mha,
    mkl,
    mkldnn,
    mps,
    openmp,
    opt_einsum,
    quantized,
)

__all__ = ["cpu", "cuda", "cudnn", "mha", "mkl", "mkldnn", "mps", "openmp", "opt_einsum",
           "quantized"]
