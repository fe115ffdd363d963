"""Weight averaging, as ``torch.optim.swa_utils``: stochastic weight averaging (SWA) and
exponential moving averages (EMA) of a model's weights.

:class:`AveragedModel` keeps a copy of a model whose parameters (and, with
``use_buffers=True``, buffers) are the running average of the model's over the calls of
:meth:`AveragedModel.update_parameters`: the equal-weight mean by default (SWA), or the
average that ``avg_fn`` / ``multi_avg_fn`` computes (:func:`get_ema_multi_avg_fn` for an
EMA). :class:`SWALR` anneals each group's learning rate to a constant ``swa_lr``, and
:func:`update_bn` recomputes the BatchNorm statistics of the averaged weights with one pass
over the data.

The averaged model is a :class:`torcia.nn.Module`, so this module needs torcia-nn (the
``swa`` extra of torcia-optim); the rest of torcia.optim does not.

Examples
--------
>>> import torcia
>>> from torcia.optim.swa_utils import AveragedModel, SWALR
>>> model = torcia.nn.Linear(2, 1)
>>> swa_model = AveragedModel(model)
>>> opt = torcia.optim.SGD(model.parameters(), lr=0.1)
>>> swa_scheduler = SWALR(opt, swa_lr=0.05, anneal_epochs=2)
>>> for epoch in range(3):
...     opt.zero_grad()
...     model(torcia.ones(4, 2)).pow(2).mean().backward()
...     opt.step()
...     swa_model.update_parameters(model)
...     swa_scheduler.step()
>>> int(swa_model.n_averaged), swa_scheduler.get_last_lr()
(3, [0.05])
"""

from __future__ import annotations

import copy
import itertools
import math

import torcia
from torcia import nn
from torcia.optim.lr_scheduler import LRScheduler, _per_group

__all__ = [
    "AveragedModel", "SWALR", "get_ema_avg_fn", "get_ema_multi_avg_fn", "get_swa_avg_fn",
    "get_swa_multi_avg_fn", "update_bn",
]

#: the modules whose running statistics :func:`update_bn` recomputes: PyTorch's
#: ``_BatchNorm`` family (instance norms keep theirs)
_BATCH_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.SyncBatchNorm)


def _check_decay(decay):
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in "
                         "[0,1] range.")


def _is_float(t) -> bool:
    return t.dtype.is_floating_point or t.dtype.is_complex


def get_ema_multi_avg_fn(decay=0.999):
    r"""The EMA update of lists of averaged and current tensors, in place:
    :math:`W^{EMA} \leftarrow \text{decay}\, W^{EMA} + (1 - \text{decay})\, W^{model}`.

    Examples
    --------
    >>> import torcia
    >>> from torcia.optim.swa_utils import get_ema_multi_avg_fn
    >>> ema, cur = [torcia.tensor([1.0])], [torcia.tensor([3.0])]
    >>> get_ema_multi_avg_fn(0.75)(ema, cur, 1)
    >>> ema
    [tensor([1.5000])]
    """
    _check_decay(decay)

    @torcia.no_grad()
    def ema_update(ema_param_list, current_param_list, _):
        for p_ema, p_model in zip(ema_param_list, current_param_list, strict=True):
            if _is_float(p_ema):
                p_ema.lerp_(p_model, 1 - decay)
            else:
                p_ema.copy_(p_ema * decay + p_model * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn():
    r"""The SWA update of lists of averaged and current tensors, in place: the running
    mean :math:`W^{SWA} \leftarrow W^{SWA} + (W^{model} - W^{SWA}) / (n + 1)` after
    ``n`` models.

    Examples
    --------
    >>> import torcia
    >>> from torcia.optim.swa_utils import get_swa_multi_avg_fn
    >>> avg, cur = [torcia.tensor([1.0])], [torcia.tensor([4.0])]
    >>> get_swa_multi_avg_fn()(avg, cur, 2)
    >>> avg
    [tensor([2.])]
    """

    @torcia.no_grad()
    def swa_update(averaged_param_list, current_param_list, num_averaged):
        for p_avg, p_model in zip(averaged_param_list, current_param_list, strict=True):
            if _is_float(p_avg):
                p_avg.lerp_(p_model, float(1 / (num_averaged + 1)))
            else:
                # integer tensors: PyTorch's addcdiv rounds the step the same way
                p_avg.copy_(p_avg + (p_model - p_avg) / (num_averaged + 1))

    return swa_update


def get_ema_avg_fn(decay=0.999):
    r"""The EMA of one tensor: returns :math:`\text{decay}\, W^{EMA} + (1 - \text{decay})\,
    W^{model}`.

    Examples
    --------
    >>> import torcia
    >>> from torcia.optim.swa_utils import get_ema_avg_fn
    >>> get_ema_avg_fn(0.5)(torcia.tensor([1.0]), torcia.tensor([3.0]), 4)
    tensor([2.])
    """
    _check_decay(decay)

    @torcia.no_grad()
    def ema_update(ema_param, current_param, num_averaged):
        return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn():
    r"""The SWA running mean of one tensor after ``num_averaged`` models.

    Examples
    --------
    >>> import torcia
    >>> from torcia.optim.swa_utils import get_swa_avg_fn
    >>> get_swa_avg_fn()(torcia.tensor([1.0]), torcia.tensor([4.0]), 2)
    tensor([2.])
    """

    @torcia.no_grad()
    def swa_update(averaged_param, current_param, num_averaged):
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


class AveragedModel(nn.Module):
    """A copy of ``model`` whose weights are the average of ``model``'s over the calls of
    :meth:`update_parameters`; calling it runs the copy.

    Parameters
    ----------
    model : Module
        The model to average; it is deep-copied.
    device : torcia.device, optional
        Where the copy lives (``model``'s device by default).
    avg_fn : callable, optional
        ``avg_fn(averaged, current, num_averaged) -> Tensor``: the new average of one
        tensor.
    multi_avg_fn : callable, optional
        ``multi_avg_fn(averaged_list, current_list, num_averaged)``: updates lists of
        tensors in place (for example :func:`get_ema_multi_avg_fn`). By default, and
        without ``avg_fn``, the equal-weight running mean (SWA).
    use_buffers : bool, default False
        Average the buffers too; otherwise they are copied from ``model`` on each update.

    Attributes
    ----------
    module : Module
        The averaged copy.
    n_averaged : Tensor
        How many models were averaged (an int64 buffer, saved in the state dict).

    Examples
    --------
    An exponential moving average of the weights:

    >>> import torcia
    >>> from torcia.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
    >>> model = torcia.nn.Linear(1, 1, bias=False)
    >>> ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.5))
    >>> with torcia.no_grad():
    ...     _ = model.weight.fill_(2.0)
    ...     ema.update_parameters(model)
    ...     _ = model.weight.fill_(4.0)
    ...     ema.update_parameters(model)
    >>> ema.module.weight
    Parameter containing:
    tensor([[3.]], requires_grad=True)
    """

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None,
                 use_buffers=False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", torcia.tensor(0, dtype=torcia.long, device=device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    @torcia.no_grad()
    def update_parameters(self, model) -> None:
        """Average ``model``'s current weights in: the first call copies them, each later
        one updates the average (``n_averaged`` counts the calls).

        Examples
        --------
        >>> import torcia
        >>> from torcia.optim.swa_utils import AveragedModel
        >>> model = torcia.nn.Linear(1, 1, bias=False)
        >>> swa = AveragedModel(model)
        >>> with torcia.no_grad():
        ...     for w in (1.0, 2.0, 6.0):
        ...         _ = model.weight.fill_(w)
        ...         swa.update_parameters(model)
        >>> swa.module.weight.item()
        3.0
        """
        if self.use_buffers:
            mine = itertools.chain(self.module.parameters(), self.module.buffers())
            theirs = itertools.chain(model.parameters(), model.buffers())
        else:
            mine, theirs = self.parameters(), model.parameters()
        averaged, current = [], []
        first = int(self.n_averaged) == 0
        for p_avg, p_model in zip(mine, theirs):
            p_model = p_model.detach().to(p_avg.device)
            averaged.append(p_avg.detach())
            current.append(p_model)
            if first:
                p_avg.detach().copy_(p_model)
        if not first:
            if self.multi_avg_fn is not None:
                # by device and dtype, as PyTorch groups them for its multi-tensor kernels
                groups: dict = {}
                for a, c in zip(averaged, current):
                    pair = groups.setdefault((a.device, a.dtype), ([], []))
                    pair[0].append(a)
                    pair[1].append(c)
                for (device, _), (avg_list, cur_list) in groups.items():
                    self.multi_avg_fn(avg_list, cur_list, self.n_averaged.to(device))
            else:
                # the default is PyTorch's on CPU: the running mean divided by the exact
                # count, not a lerp by a float32 weight
                avg_fn = self.avg_fn or get_swa_avg_fn()
                for a, c in zip(averaged, current):
                    a.copy_(avg_fn(a, c, self.n_averaged.to(a.device)))
        if not self.use_buffers:
            # buffers are not averaged: they follow the source model
            for b_avg, b_model in zip(self.module.buffers(), model.buffers(), strict=True):
                b_avg.detach().copy_(b_model.detach().to(b_avg.device))
        self.n_averaged += 1


@torcia.no_grad()
def update_bn(loader, model, device=None) -> None:
    """Recompute the running statistics of ``model``'s BatchNorm layers with one pass over
    ``loader`` (batches are tensors, or lists/tuples whose first element is the input):
    each layer's statistics become the plain average over the batches (``momentum=None``
    during the pass). The model's train/eval mode is kept.

    Examples
    --------
    >>> import torcia
    >>> from torcia.optim.swa_utils import update_bn
    >>> model = torcia.nn.BatchNorm1d(1)
    >>> update_bn([torcia.tensor([[1.0], [3.0]]), torcia.tensor([[5.0], [7.0]])], model)
    >>> model.running_mean
    tensor([4.])
    """
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BATCH_NORMS):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    for batch in loader:
        if isinstance(batch, (list, tuple)):
            batch = batch[0]
        if device is not None:
            batch = batch.to(device)
        model(batch)
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneal each parameter group's learning rate from its current value to ``swa_lr``
    over ``anneal_epochs`` steps, then hold it there.

    Parameters
    ----------
    optimizer : Optimizer
    swa_lr : float or list of float
        The final rate, for all groups or one per group (kept in each group's
        ``"swa_lr"``).
    anneal_epochs : int, default 10
        Steps of the annealing (0: ``swa_lr`` from the first step).
    anneal_strategy : {"cos", "linear"}, default "cos"
    last_epoch : int, default -1

    Examples
    --------
    >>> import torcia
    >>> from torcia.optim.swa_utils import SWALR
    >>> opt = torcia.optim.SGD([torcia.zeros(1, requires_grad=True)], lr=1.0)
    >>> sched = SWALR(opt, swa_lr=0.5, anneal_epochs=2, anneal_strategy="linear")
    >>> rates = []
    >>> for _ in range(3):
    ...     opt.step()
    ...     sched.step()
    ...     rates.append(sched.get_last_lr()[0])
    >>> rates
    [0.75, 0.5, 0.5]
    """

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos",
                 last_epoch=-1):
        for value, group in zip(_per_group("swa_lr", optimizer, swa_lr),
                                optimizer.param_groups):
            group["swa_lr"] = value
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError("anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got "
                             f"{anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t):
        return t

    @staticmethod
    def _cosine_anneal(t):
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr, swa_lr, alpha):
        # the rate the annealing started from, recovered from the current one
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def _set_anneal_func(self, anneal_strategy):
        self._anneal_strategy = anneal_strategy
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" \
            else self._linear_anneal

    def get_lr(self):
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        span = max(1, self.anneal_epochs)
        prev_alpha = self.anneal_func(max(0, min(1, (step - 1) / span)))
        groups = self.optimizer.param_groups
        prev_lrs = [self._get_initial_lr(g["lr"], g["swa_lr"], prev_alpha) for g in groups]
        alpha = self.anneal_func(max(0, min(1, step / span)))
        return [g["swa_lr"] * alpha + lr * (1 - alpha) for g, lr in zip(groups, prev_lrs)]

    def state_dict(self) -> dict:
        """Every attribute but the optimizer and the annealing function (restored from
        the strategy's name)."""
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "anneal_func")}

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)
