"""Converting convolution weights to a memory format, as ``torch.nn.utils``."""

from __future__ import annotations


def _convert(module, memory_format, kinds):
    if isinstance(module, kinds):
        # a copy, as PyTorch's: the old storage is no longer shared with anything
        module.weight.data = module.weight.detach().clone(memory_format=memory_format)
    for child in module.children():
        _convert(child, memory_format, kinds)
    return module


def convert_conv2d_weight_memory_format(module, memory_format):
    """Give the weights of every ``Conv2d`` and ``ConvTranspose2d`` in ``module`` (itself
    included) the memory format ``memory_format``; returns ``module``.

    torcia stores every tensor in row-major (contiguous) order, so the format is accepted
    and the weights keep their values and layout: what changes, as in PyTorch, is that each
    weight is a fresh copy. A script that converts for speed runs unchanged.

    Parameters
    ----------
    module : Module
        The module to convert, recursively.
    memory_format : object
        The requested format (``torch.channels_last``, ``torch.contiguous_format``...).

    Returns
    -------
    Module
        ``module``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn.utils import convert_conv2d_weight_memory_format
    >>> net = torcia.nn.Sequential(torcia.nn.Conv2d(2, 3, 3))
    >>> before = net[0].weight.clone()
    >>> net is convert_conv2d_weight_memory_format(net, None)
    True
    >>> torcia.equal(net[0].weight, before)
    True
    """
    from torcia import nn

    return _convert(module, memory_format, (nn.Conv2d, nn.ConvTranspose2d))


def convert_conv3d_weight_memory_format(module, memory_format):
    """Give the weights of every ``Conv3d`` and ``ConvTranspose3d`` in ``module`` (itself
    included) the memory format ``memory_format``; returns ``module``.

    As :func:`convert_conv2d_weight_memory_format`, for 3-D convolutions
    (``torch.channels_last_3d``).

    Parameters
    ----------
    module : Module
        The module to convert, recursively.
    memory_format : object
        The requested format.

    Returns
    -------
    Module
        ``module``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn.utils import convert_conv3d_weight_memory_format
    >>> conv = torcia.nn.Conv3d(1, 1, 2)
    >>> convert_conv3d_weight_memory_format(conv, None) is conv
    True
    """
    from torcia import nn

    return _convert(module, memory_format, (nn.Conv3d, nn.ConvTranspose3d))
