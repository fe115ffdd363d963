"""Utilities; ``torcia.utils.data`` is torcia-data's ``torcia.data`` under PyTorch's name,
``torcia.utils.safetensors`` reads and writes safetensors files."""


def __getattr__(name):
    # ``torcia.utils.data`` without an explicit import, as ``torch.utils.data`` works
    if name in ("data", "safetensors"):
        import importlib

        return importlib.import_module(f"torcia.utils.{name}")
    raise AttributeError(f"module 'torcia.utils' has no attribute {name!r}")
