"""``parameters_to_vector`` and ``vector_to_parameters``."""

from __future__ import annotations

from torcia import Tensor


def _check_device(param: Tensor, device):
    if device is None:
        return param.device
    if param.device != device:
        raise TypeError(
            "Found two parameters on different devices, this is currently not supported "
            f"({device} and {param.device})"
        )
    return device


def parameters_to_vector(parameters) -> Tensor:
    """All parameters flattened and concatenated into one 1-D tensor (gradients flow back).

    Examples
    --------
    >>> import torcia
    >>> fc = torcia.nn.Linear(3, 2)
    >>> torcia.nn.utils.parameters_to_vector(fc.parameters()).shape
    torcia.Size([8])
    """
    import torcia

    device = None
    parts = []
    for p in parameters:
        device = _check_device(p, device)
        parts.append(p.reshape(-1))
    return torcia.cat(parts)


def vector_to_parameters(vec: Tensor, parameters) -> None:
    """Make consecutive slices of the 1-D ``vec`` the parameters' data (the inverse of
    :func:`parameters_to_vector`); as in PyTorch, the parameters then share ``vec``'s
    storage.

    Examples
    --------
    >>> import torcia
    >>> fc = torcia.nn.Linear(3, 2)
    >>> torcia.nn.utils.vector_to_parameters(torcia.zeros(8), fc.parameters())
    >>> float(fc.weight.abs().sum())
    0.0
    """
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torcia.Tensor, but got: {type(vec).__name__}")
    params = list(parameters)
    total = sum(p.numel() for p in params)
    if vec.dim() != 1 or vec.numel() != total:
        raise ValueError(f"vec must be a 1-D tensor of {total} elements (the parameters' "
                         f"total), got shape {list(vec.shape)}")
    device = None
    offset = 0
    for p in params:
        device = _check_device(p, device)
        n = p.numel()
        p.data = vec[offset:offset + n].view_as(p).detach()
        offset += n
