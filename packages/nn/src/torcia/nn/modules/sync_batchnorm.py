"""SyncBatchNorm: batch normalisation whose statistics are those of the whole batch across
the processes of a group, as ``torch.nn.SyncBatchNorm``."""

from __future__ import annotations

import torcia
from torcia.nn import functional as F
from torcia.nn.modules.normalization import _BatchNorm

__all__ = ["SyncBatchNorm"]


class SyncBatchNorm(_BatchNorm):
    """Batch normalisation over dimension 1 of an input of any rank (at least 2-D), whose
    training-mode mean and variance are computed over the batches of every process of
    ``process_group`` (the default group when None), as if one process had seen them all.

    Synchronisation happens in training mode when torcia-distributed is installed and a
    process group of more than one process is initialised; otherwise (one process, or
    eval mode) the layer is exactly :class:`BatchNorm1d`/``2d``/``3d``. The per-channel
    sums travel in one all-reduce whose backward all-reduces the gradients, so every
    process gets the gradient of the whole batch's loss with respect to its own inputs.

    Parameters
    ----------
    num_features : int
    eps : float, default 1e-5
    momentum : float or None, default 0.1
    affine : bool, default True
    track_running_stats : bool, default True
    process_group : process group, optional
    device, dtype : optional
    bias : bool, default True

    Examples
    --------
    >>> import torcia
    >>> bn = torcia.nn.SyncBatchNorm(3)
    >>> bn(torcia.randn(4, 3, 5, 5)).shape      # one process: plain batch norm
    torcia.Size([4, 3, 5, 5])
    """

    #: Set by torcia-distributed: ``reducer(process_group)`` returns a differentiable
    #: sum over the group's processes, or None when there is nothing to synchronise.
    _reducer = None

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, process_group=None,
                 device=None, dtype=None, *, bias: bool = True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         dtype, bias=bias)
        self.process_group = process_group

    @classmethod
    def register_reducer(cls, reducer) -> None:
        """Install ``reducer(process_group)`` (torcia-distributed does, on import): it
        returns a function summing a tensor over the group's processes, differentiably,
        or None when no synchronisation is needed.

        Examples
        --------
        >>> import torcia
        >>> before = torcia.nn.SyncBatchNorm._reducer
        >>> torcia.nn.SyncBatchNorm.register_reducer(lambda group: None)
        >>> torcia.nn.SyncBatchNorm.register_reducer(before)
        """
        cls._reducer = staticmethod(reducer) if reducer is not None else None

    def _check_input_dim(self, input) -> None:
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")
        if input.shape[1] != self.num_features:
            raise ValueError(f"SyncBatchNorm: expected input with {self.num_features} "
                             f"channels in dimension 1, got shape {list(input.shape)}")

    def forward(self, input):
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                factor = 1.0 / float(self.num_batches_tracked)
        bn_training = self.training or (self.running_mean is None and self.running_var is None)
        keep = not self.training or self.track_running_stats
        running_mean = self.running_mean if keep else None
        running_var = self.running_var if keep else None
        reduce = None
        if bn_training and self.training and SyncBatchNorm._reducer is not None:
            reduce = SyncBatchNorm._reducer(self.process_group)
        if reduce is None:
            return F.batch_norm(input, running_mean, running_var, self.weight, self.bias,
                                bn_training, factor, self.eps)
        return self._synced(input, reduce, running_mean, running_var, factor)

    def _synced(self, input, reduce, running_mean, running_var, factor):
        c = self.num_features
        dims = (0, *range(2, input.dim()))
        count = input.numel() // c
        local = torcia.cat([input.sum(dims), (input * input).sum(dims),
                            torcia.full((1,), float(count), dtype=input.dtype,
                                        device=input.device)])
        total = reduce(local)
        n = total[2 * c]
        mean = total[:c] / n
        var = (total[c:2 * c] / n - mean * mean).clamp(min=0)
        shape = (1, c) + (1,) * (input.dim() - 2)
        out = (input - mean.reshape(shape)) * (var + self.eps).rsqrt().reshape(shape)
        if self.weight is not None:
            out = out * self.weight.reshape(shape)
        if self.bias is not None:
            out = out + self.bias.reshape(shape)
        if running_mean is not None:
            with torcia.no_grad():
                n_all = float(n.item())
                unbiased = var.detach() * (n_all / max(n_all - 1.0, 1.0))
                running_mean.mul_(1 - factor).add_(mean.detach(), alpha=factor)
                running_var.mul_(1 - factor).add_(unbiased, alpha=factor)
        return out

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """``module`` with every ``BatchNorm*D`` in it (itself included) replaced by a
        :class:`SyncBatchNorm` sharing its parameters and buffers.

        Examples
        --------
        >>> import torcia
        >>> net = torcia.nn.Sequential(torcia.nn.Conv2d(1, 2, 3), torcia.nn.BatchNorm2d(2))
        >>> type(torcia.nn.SyncBatchNorm.convert_sync_batchnorm(net)[1]).__name__
        'SyncBatchNorm'
        """
        from torcia.nn.modules.normalization import _InstanceNorm

        out = module
        if isinstance(module, _BatchNorm) and not isinstance(module, (_InstanceNorm, cls)):
            out = cls(module.num_features, module.eps, module.momentum, module.affine,
                      module.track_running_stats, process_group,
                      bias=module.bias is not None)
            if module.affine:
                out.weight = module.weight
                out.bias = module.bias
            out.running_mean = module.running_mean
            out.running_var = module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.training = module.training
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return out
