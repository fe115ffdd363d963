"""The order of the dispatch modes of torcia's parts, published as
:class:`torcia.library.ModeOrder`."""

import enum


class ModeOrder(enum.IntEnum):
    """Where each mode of torcia's parts runs among the others (a mode's ``order``): lower
    runs first, outermost around the kernel; autograd's mode records last, once the kernel
    and every entered mode have run. A mode of a plugin takes a number between two of them.

    Examples
    --------
    >>> from torcia import library
    >>> library.ModeOrder.AUTOCAST < library.ModeOrder.TRACE < library.ModeOrder.AUTOGRAD
    True
    """

    AUTOCAST = 100  # casts the op's inputs (torcia.amp)
    # forward AD (torcia.autograd.forward_ad): after autocast has chosen dtypes, so that
    # tangents are computed from the values the kernels really saw
    FORWARD_AD = 120
    # vmap (torcia-nn's): after autocast, outside the profiler and the tracers, which then
    # see the physical (batched) kernels
    VMAP = 150
    # activation checkpointing's caching: after autocast has cast the inputs, before the
    # profiler times kernels
    CHECKPOINT = 150
    PROFILE = 200  # times the kernel (torcia.profiler)
    TRACE = 300  # records the kernel (the compiler's capture, the ONNX exporter)
    AUTOGRAD = 400  # records the op for gradients
