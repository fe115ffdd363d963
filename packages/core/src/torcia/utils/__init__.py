"""Utilities; ``torcia.utils.data`` is torcia-data's ``torcia.data`` under PyTorch's name."""
