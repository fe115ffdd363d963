"""Utilities; ``torcia.utils.data`` is torcia-data's ``torcia.data`` and
``torcia.utils.checkpoint`` torcia-autograd's ``torcia.autograd.checkpoint``, under PyTorch's
names; ``torcia.utils.safetensors`` reads and writes safetensors files; ``torcia.utils.pytree``
flattens and maps nested containers; ``dlpack`` exchanges memory with other array libraries."""


def __getattr__(name):
    # ``torcia.utils.data`` without an explicit import, as ``torch.utils.data`` works
    if name in ("data", "checkpoint", "safetensors", "pytree", "dlpack", "hooks", "benchmark",
                "tensorboard"):
        import importlib

        return importlib.import_module(f"torcia.utils.{name}")
    raise AttributeError(f"module 'torcia.utils' has no attribute {name!r}")
