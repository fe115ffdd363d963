"""torcia-cuda: the "cuda" device on CuPy.

Installing this distribution (with a CuPy wheel: ``pip install 'torcia-cuda[cuda12]'``)
makes ``torcia.device("cuda")`` usable: tensors hold ``cupy.ndarray``, core's reference
kernels run unchanged on CuPy (they are written against the array module ``xp``), and
``torcia.cuda`` reaches this plugin's runtime for streams, events and memory statistics.
"""

from torcia_cuda.kernels import cupy_kernels
from torcia_cuda.plugin import make_backend

__all__ = ["cupy_kernels", "make_backend"]
