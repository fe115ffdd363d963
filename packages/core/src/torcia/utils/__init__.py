"""Utilities; ``torcia.utils.data`` is torcia-data's ``torcia.data`` under PyTorch's name."""


def __getattr__(name):
    # ``torcia.utils.data`` without an explicit import, as ``torch.utils.data`` works
    if name == "data":
        import importlib

        return importlib.import_module("torcia.utils.data")
    raise AttributeError(f"module 'torcia.utils' has no attribute {name!r}")
