"""Lazy modules: layers whose input size is read from their first input, as PyTorch's
``LazyLinear``, ``LazyConv*``, ``LazyConvTranspose*``, ``LazyBatchNorm*`` and
``LazyInstanceNorm*``.

A lazy layer holds :class:`~torcia.nn.UninitializedParameter` placeholders; a forward
pre-hook sizes them on the first call (``materialize``, in place, so an optimizer built
before keeps them), initialises them as the eager layer would, and turns the module into
that layer's class (``LazyLinear`` becomes ``Linear``).
"""

from __future__ import annotations

import torcia
from torcia.nn.modules.conv import (
    Conv1d,
    Conv2d,
    Conv3d,
    ConvTranspose1d,
    ConvTranspose2d,
    ConvTranspose3d,
)
from torcia.nn.modules.linear import Linear
from torcia.nn.modules.normalization import (
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
    _InstanceNorm,
)
from torcia.nn.parameter import UninitializedBuffer, UninitializedParameter, is_lazy

__all__ = [
    "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d", "LazyConv1d", "LazyConv2d",
    "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d",
    "LazyInstanceNorm1d", "LazyInstanceNorm2d", "LazyInstanceNorm3d", "LazyLinear",
    "LazyModuleMixin",
]


class LazyModuleMixin:
    """The machinery of lazy modules: a forward pre-hook that calls
    ``initialize_parameters(*args, **kwargs)`` on the first forward, then becomes
    ``cls_to_become``. A state dict with materialised tensors loads into a lazy
    module too (its placeholders take the saved shapes).

    Examples
    --------
    >>> import torcia
    >>> fc = torcia.nn.LazyLinear(4)
    >>> fc.has_uninitialized_params()
    True
    >>> fc(torcia.ones(2, 3)).shape, type(fc).__name__, fc.in_features
    (torcia.Size([2, 4]), 'Linear', 3)
    """

    cls_to_become = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._initialize_hook = self.register_forward_pre_hook(self._infer_parameters,
                                                               with_kwargs=True)

    def has_uninitialized_params(self) -> bool:
        """Whether a parameter or buffer is still a placeholder."""
        return any(is_lazy(t) for t in (*self._parameters.values(), *self._buffers.values()))

    def initialize_parameters(self, *args, **kwargs) -> None:
        """Size and initialise the placeholders from the forward's arguments."""
        raise NotImplementedError(f"initialize_parameters is not implemented for "
                                  f"{type(self).__name__}")

    @staticmethod
    def _infer_parameters(module, args, kwargs=None):
        module.initialize_parameters(*args, **(kwargs or {}))
        if module.has_uninitialized_params():
            raise RuntimeError(f"module {type(module).__name__} has not been fully "
                               "initialized")
        module._initialize_hook.remove()
        del module._initialize_hook
        if module.cls_to_become is not None:
            module.__class__ = module.cls_to_become

    def _sizes_from_parameters(self) -> None:
        """Set the inferred sizes from parameters a state dict materialised."""

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict,
                              missing_keys, unexpected_keys, error_msgs):
        loaded = False
        for table in (self._parameters, self._buffers):
            for name, value in table.items():
                saved = state_dict.get(prefix + name)
                if is_lazy(value) and isinstance(saved, torcia.Tensor) and not is_lazy(saved):
                    with torcia.no_grad():
                        value.materialize(saved.shape)
                    loaded = True
        if loaded and not self.has_uninitialized_params():
            self._sizes_from_parameters()
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict,
                                      missing_keys, unexpected_keys, error_msgs)

    def _apply(self, fn, recurse=True):
        # a placeholder has no shape to convert: it takes the converted device and dtype
        lazy = {}
        for table in (self._parameters, self._buffers):
            for name, value in list(table.items()):
                if is_lazy(value):
                    lazy[name] = (table, value)
                    table[name] = None
        try:
            super()._apply(fn, recurse)
        finally:
            for name, (table, value) in lazy.items():
                probe = fn(torcia.empty(0, device=value.device, dtype=value.dtype))
                value.data = probe
                table[name] = value
        return self


# ---------------------------------------------------------------------------------------
# Linear
# ---------------------------------------------------------------------------------------


class LazyLinear(LazyModuleMixin, Linear):
    """A :class:`Linear` whose ``in_features`` is the last dimension of its first input.

    Parameters
    ----------
    out_features : int
    bias : bool, default True
    device, dtype : optional

    Examples
    --------
    >>> import torcia
    >>> fc = torcia.nn.LazyLinear(2)
    >>> fc(torcia.ones(5, 7)).shape, fc.weight.shape
    (torcia.Size([5, 2]), torcia.Size([2, 7]))
    """

    cls_to_become = Linear

    def __init__(self, out_features: int, bias: bool = True, device=None, dtype=None):
        super().__init__(0, 0, False)
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_features = out_features
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def _sizes_from_parameters(self) -> None:
        self.in_features = self.weight.shape[1]

    def initialize_parameters(self, input, *args, **kwargs) -> None:
        if self.has_uninitialized_params():
            with torcia.no_grad():
                self.in_features = input.shape[-1]
                self.weight.materialize((self.out_features, self.in_features))
                if self.bias is not None:
                    self.bias.materialize((self.out_features,))
                self.reset_parameters()


# ---------------------------------------------------------------------------------------
# convolutions
# ---------------------------------------------------------------------------------------


class _LazyConvMixin(LazyModuleMixin):
    _spatial = 2

    def _lazy_init(self, out_channels, bias, device, dtype):
        # the eager class's __init__ ran with zero channels; LazyModuleMixin's did not
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_channels = out_channels
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)
        self._initialize_hook = self.register_forward_pre_hook(self._infer_parameters,
                                                               with_kwargs=True)

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def _sizes_from_parameters(self) -> None:
        w = self.weight.shape
        self.in_channels = w[0] if self.transposed else w[1] * self.groups

    def _get_in_channels(self, input) -> int:
        unbatched = self._spatial + 1
        if input.dim() not in (unbatched, unbatched + 1):
            raise RuntimeError(f"Expected {unbatched}D (unbatched) or {unbatched + 1}D "
                               f"(batched) input to {type(self).__name__}, but got input of "
                               f"size: {list(input.shape)}")
        return input.shape[1] if input.dim() == unbatched + 1 else input.shape[0]

    def initialize_parameters(self, input, *args, **kwargs) -> None:
        if self.has_uninitialized_params():
            self.in_channels = self._get_in_channels(input)
            if self.in_channels % self.groups != 0:
                raise ValueError("in_channels must be divisible by groups")
            with torcia.no_grad():
                if self.transposed:
                    shape = (self.in_channels, self.out_channels // self.groups)
                else:
                    shape = (self.out_channels, self.in_channels // self.groups)
                self.weight.materialize((*shape, *self.kernel_size))
                if self.bias is not None:
                    self.bias.materialize((self.out_channels,))
                self.reset_parameters()


def _lazy_conv(name, base, spatial, transposed):
    if transposed:
        def __init__(self, out_channels, kernel_size, stride=1, padding=0, output_padding=0,
                     groups=1, bias=True, dilation=1, padding_mode="zeros", device=None,
                     dtype=None):
            base.__init__(self, 0, 0, kernel_size, stride, padding, output_padding, groups,
                          False, dilation, padding_mode, device, dtype)
            self._lazy_init(out_channels, bias, device, dtype)
    else:
        def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                     groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
            base.__init__(self, 0, 0, kernel_size, stride, padding, dilation, groups, False,
                          padding_mode, device, dtype)
            self._lazy_init(out_channels, bias, device, dtype)

    doc = (f"A :class:`{base.__name__}` whose ``in_channels`` is read from its first input "
           f"(dimension 1, or 0 when unbatched).\n\n"
           f"Parameters are those of :class:`{base.__name__}` without ``in_channels``.\n\n"
           f"Examples\n--------\n>>> import torcia\n"
           f">>> conv = torcia.nn.{name}(4, 3)\n"
           f">>> y = conv(torcia.ones(1, 2{', 5' * spatial}))\n"
           f">>> type(conv).__name__, conv.in_channels\n('{base.__name__}', 2)\n")
    return type(name, (_LazyConvMixin, base), {
        "__init__": __init__, "__doc__": doc, "cls_to_become": base, "_spatial": spatial,
        "__module__": __name__})


LazyConv1d = _lazy_conv("LazyConv1d", Conv1d, 1, False)
LazyConv2d = _lazy_conv("LazyConv2d", Conv2d, 2, False)
LazyConv3d = _lazy_conv("LazyConv3d", Conv3d, 3, False)
LazyConvTranspose1d = _lazy_conv("LazyConvTranspose1d", ConvTranspose1d, 1, True)
LazyConvTranspose2d = _lazy_conv("LazyConvTranspose2d", ConvTranspose2d, 2, True)
LazyConvTranspose3d = _lazy_conv("LazyConvTranspose3d", ConvTranspose3d, 3, True)


# ---------------------------------------------------------------------------------------
# normalisation
# ---------------------------------------------------------------------------------------


class _LazyNormMixin(LazyModuleMixin):
    def _sizes_from_parameters(self) -> None:
        for t in (self.weight, self.running_mean):
            if t is not None:
                self.num_features = t.shape[0]
    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input, *args, **kwargs) -> None:
        # without affine parameters or running statistics there is nothing to size, but
        # the layer still learns its number of features, as PyTorch's does
        if self.has_uninitialized_params() or self.num_features == 0:
            unbatched = isinstance(self, _InstanceNorm) and input.dim() == self._dims[0]
            self.num_features = input.shape[0 if unbatched else 1]
            with torcia.no_grad():
                for name in ("weight", "bias", "running_mean", "running_var"):
                    value = getattr(self, name)
                    if is_lazy(value):
                        value.materialize((self.num_features,))
                self.reset_parameters()


def _lazy_norm(name, base, instance):
    default_affine, default_track = (False, False) if instance else (True, True)

    def __init__(self, eps=1e-5, momentum=0.1, affine=default_affine,
                 track_running_stats=default_track, device=None, dtype=None):
        base.__init__(self, 0, eps, momentum, False, False, device, dtype)
        self.affine = affine
        self._bias = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = UninitializedParameter(device=device, dtype=dtype)
            self.bias = UninitializedParameter(device=device, dtype=dtype)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(device=device, dtype=dtype)
            self.running_var = UninitializedBuffer(device=device, dtype=dtype)
            self.num_batches_tracked = torcia.tensor(0, dtype=torcia.int64, device=device)
        self._initialize_hook = self.register_forward_pre_hook(self._infer_parameters,
                                                               with_kwargs=True)

    what = "instance" if instance else "batch"
    doc = (f"A :class:`{base.__name__}` whose ``num_features`` is read from its first "
           f"input (dimension 1).\n\nParameters are those of :class:`{base.__name__}` "
           f"without ``num_features`` ({what} normalisation).\n\n"
           f"Examples\n--------\n>>> import torcia\n>>> norm = torcia.nn.{name}()\n"
           f">>> y = norm(torcia.randn(2, 3{', 4' * int(name[-2])}))\n"
           f">>> type(norm).__name__, norm.num_features\n('{base.__name__}', 3)\n")
    return type(name, (_LazyNormMixin, base), {
        "__init__": __init__, "__doc__": doc, "cls_to_become": base, "__module__": __name__})


LazyBatchNorm1d = _lazy_norm("LazyBatchNorm1d", BatchNorm1d, False)
LazyBatchNorm2d = _lazy_norm("LazyBatchNorm2d", BatchNorm2d, False)
LazyBatchNorm3d = _lazy_norm("LazyBatchNorm3d", BatchNorm3d, False)
LazyInstanceNorm1d = _lazy_norm("LazyInstanceNorm1d", InstanceNorm1d, True)
LazyInstanceNorm2d = _lazy_norm("LazyInstanceNorm2d", InstanceNorm2d, True)
LazyInstanceNorm3d = _lazy_norm("LazyInstanceNorm3d", InstanceNorm3d, True)
