"""``torcia.backends.cuda``: ``matmul.allow_tf32`` and friends, and the scaled-dot-product
attention kernel switches.

``matmul.allow_tf32`` (default False) is what :func:`torcia.set_float32_matmul_precision`
sets, as in PyTorch: with it on, the CUDA plugin's float32 GEMMs (cuBLAS, through CuPy)
run on TF32 tensor cores; the plugin follows the flag through
:func:`register_matmul_hook`. The ``enable_*_sdp`` switches are
checked (at least one must stay on, as PyTorch requires of a call) and torcia's single
attention implementation serves whichever are enabled.

Examples
--------
>>> import torcia
>>> torcia.backends.cuda.matmul.allow_tf32 = True
>>> torcia.backends.cuda.matmul.allow_tf32
True
>>> torcia.backends.cuda.matmul.allow_tf32 = False
>>> torcia.backends.cuda.flash_sdp_enabled()
True
"""

import contextlib

from torcia import backend
from torcia.utils.hooks import RemovableHandle


class _MatmulFlags:
    """``torcia.backends.cuda.matmul``: only PyTorch's attribute names can be set."""

    __slots__ = ("allow_tf32", "allow_fp16_reduced_precision_reduction",
                 "allow_bf16_reduced_precision_reduction", "fp32_precision")

    def __init__(self):
        self.allow_tf32 = False
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True
        self.fp32_precision = "ieee"

    def __setattr__(self, name, value):
        if name not in self.__slots__:
            raise AttributeError(f"Unknown attribute {name}")
        object.__setattr__(self, name, value)
        for hook in list(_matmul_hooks.values()):
            hook(self)


_matmul_hooks: dict = {}
matmul = _MatmulFlags()


def register_matmul_hook(hook):
    """Call ``hook(torcia.backends.cuda.matmul)`` now and whenever one of its flags is
    set: how a device plugin applies ``allow_tf32`` to its GEMMs. Returns a handle whose
    ``remove()`` stops the calls.

    Examples
    --------
    >>> import torcia
    >>> seen = []
    >>> handle = torcia.backends.cuda.register_matmul_hook(
    ...     lambda flags: seen.append(flags.allow_tf32))
    >>> torcia.backends.cuda.matmul.allow_tf32 = True
    >>> torcia.backends.cuda.matmul.allow_tf32 = False
    >>> handle.remove()
    >>> seen
    [False, True, False]
    """
    handle = RemovableHandle(_matmul_hooks)
    _matmul_hooks[handle.id] = hook
    hook(matmul)
    return handle

_sdp = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True}
preferred_linalg_library_name = "default"


def is_built() -> bool:
    """Whether a CUDA device plugin is installed (torcia-cuda).

    Examples
    --------
    >>> import torcia
    >>> isinstance(torcia.backends.cuda.is_built(), bool)
    True
    """
    return "cuda" in backend.backends.build()


def preferred_linalg_library(backend=None) -> str:
    """Accepted and inert: torcia's CUDA linear algebra comes from CuPy.

    Examples
    --------
    >>> import torcia
    >>> torcia.backends.cuda.preferred_linalg_library()
    'default'
    """
    global preferred_linalg_library_name
    if backend is not None:
        if backend not in ("default", "cusolver", "magma"):
            raise RuntimeError(f"Unknown input value: {backend}")
        preferred_linalg_library_name = backend
    return preferred_linalg_library_name


def _switch(kind):
    def enable(enabled: bool) -> None:
        _sdp[kind] = bool(enabled)

    def is_enabled() -> bool:
        return _sdp[kind]

    enable.__name__, is_enabled.__name__ = f"enable_{kind}_sdp", f"{kind}_sdp_enabled"
    example = (f"\n\nExamples\n--------\n>>> import torcia\n"
               f">>> torcia.backends.cuda.enable_{kind}_sdp(False)\n"
               f">>> torcia.backends.cuda.{kind}_sdp_enabled()\nFalse\n"
               f">>> torcia.backends.cuda.enable_{kind}_sdp(True)\n"
               f">>> torcia.backends.cuda.{kind}_sdp_enabled()\nTrue\n")
    enable.__doc__ = (f"Allow the {kind} attention kernel (torcia has one implementation)."
                      + example)
    is_enabled.__doc__ = f"Whether the {kind} attention kernel is allowed." + example
    return enable, is_enabled


enable_flash_sdp, flash_sdp_enabled = _switch("flash")
enable_mem_efficient_sdp, mem_efficient_sdp_enabled = _switch("mem_efficient")
enable_math_sdp, math_sdp_enabled = _switch("math")
enable_cudnn_sdp, cudnn_sdp_enabled = _switch("cudnn")


@contextlib.contextmanager
def sdp_kernel(enable_flash=True, enable_math=True, enable_mem_efficient=True,
               enable_cudnn=True):
    """Set the attention kernel switches for a ``with`` block.

    Examples
    --------
    >>> import torcia
    >>> with torcia.backends.cuda.sdp_kernel(enable_flash=False):
    ...     torcia.backends.cuda.flash_sdp_enabled()
    False
    >>> torcia.backends.cuda.flash_sdp_enabled()
    True
    """
    saved = dict(_sdp)
    _sdp.update(flash=enable_flash, math=enable_math, mem_efficient=enable_mem_efficient,
                cudnn=enable_cudnn)
    try:
        yield
    finally:
        _sdp.update(saved)
