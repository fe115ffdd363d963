"""Learning-rate schedulers: each adjusts the ``"lr"`` of its optimizer's parameter groups
when ``step()`` is called (once per epoch or per batch, after ``optimizer.step()``).

As in PyTorch, building a scheduler performs its first step (``last_epoch`` becomes 0), and
a scheduler's ``state_dict`` holds every attribute except the optimizer. Schedulers with a
closed form (``_get_closed_form_lr``) use it when ``step(epoch)`` is given an epoch.

Schedulers are also registered by name: :func:`create` builds one from ``"cosine_annealing"``
or ``"CosineAnnealingLR"``; plugins add more through ``torcia_register_lr_schedulers``.
"""

from __future__ import annotations

import math
import types
import warnings
from bisect import bisect_right
from collections import Counter

from torcia import plugins
from torcia.optim.optimizer import Optimizer

__all__ = [
    "LRScheduler", "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR",
    "LinearLR", "ExponentialLR", "PolynomialLR", "CosineAnnealingLR",
    "CosineAnnealingWarmRestarts", "CyclicLR", "OneCycleLR", "SequentialLR",
    "ChainedScheduler", "ReduceLROnPlateau", "create", "schedulers",
]

_EPOCH_DEPRECATION = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being deprecated "
    "where possible. Please use `scheduler.step()` to step the scheduler. During the "
    "deprecation, if epoch is different from None, the closed form is used instead of the "
    "new chainable form, where available."
)

_STEP_ORDER = (
    "Detected call of `lr_scheduler.step()` before `optimizer.step()`. Call them in the "
    "opposite order: `optimizer.step()` before `lr_scheduler.step()`. Otherwise the first "
    "value of the learning rate schedule is skipped."
)

schedulers = plugins.Registry("lr scheduler", "torcia_register_lr_schedulers")


def create(name: str, optimizer, *args, **kwargs):
    """Build the scheduler registered as ``name`` (or whose class is named ``name``).

    Examples
    --------
    >>> import torcia
    >>> w = torcia.tensor([1.0], requires_grad=True)
    >>> opt = torcia.optim.SGD([w], lr=0.1)
    >>> sched = torcia.optim.lr_scheduler.create("step", opt, step_size=2, gamma=0.5)
    >>> type(sched).__name__
    'StepLR'
    """
    from torcia.optim import _lookup

    return _lookup(schedulers, name)(optimizer, *args, **kwargs)


def _current_lrs(optimizer) -> list:
    return [group["lr"] for group in optimizer.param_groups]


def _per_group(name: str, optimizer, value) -> list:
    """One value per parameter group: a list as given (of the right length), or a scalar
    repeated."""
    if isinstance(value, (list, tuple)):
        if len(value) != len(optimizer.param_groups):
            raise ValueError(
                f"{name} must have the same length as optimizer.param_groups. {name} has "
                f"{len(value)} values, param_groups has {len(optimizer.param_groups)}."
            )
        return list(value)
    return [value] * len(optimizer.param_groups)


def _check_optimizer(optimizer) -> None:
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")


class LRScheduler:
    """Base class of schedulers; subclasses compute the next rates in :meth:`get_lr`.

    Parameters
    ----------
    optimizer : Optimizer
    last_epoch : int, default -1
        The index of the last epoch; other than -1 only when resuming, which needs
        ``"initial_lr"`` in every parameter group.

    Examples
    --------
    A scheduler that halves the rate every epoch:

    >>> import torcia
    >>> from torcia.optim.lr_scheduler import LRScheduler
    >>> class Halving(LRScheduler):
    ...     def get_lr(self):
    ...         return [group["initial_lr"] * 0.5 ** self.last_epoch
    ...                 for group in self.optimizer.param_groups]
    >>> opt = torcia.optim.SGD([torcia.zeros(1, requires_grad=True)], lr=1.0)
    >>> scheduler = Halving(opt)
    >>> for _ in range(3):
    ...     opt.step()
    ...     scheduler.step()
    >>> scheduler.get_last_lr()
    [0.125]
    """

    _is_initial = False

    def __init__(self, optimizer, last_epoch: int = -1):
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] when "
                        "resuming an optimizer"
                    )
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self) -> None:
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self) -> list:
        """The rates for ``last_epoch``, computed from the current ones where chainable."""
        raise NotImplementedError

    def get_last_lr(self) -> list:
        """The rates the last ``step`` set."""
        return self._last_lr

    def step(self, epoch=None) -> None:
        """Advance one epoch (or, deprecated, jump to ``epoch``) and set the new rates."""
        if self._step_count == 1 and not getattr(self.optimizer, "_opt_called", False):
            warnings.warn(_STEP_ORDER, UserWarning, stacklevel=2)
        self._step_count += 1
        if epoch is not None:
            warnings.warn(_EPOCH_DEPRECATION, UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch=None) -> None:
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            self.last_epoch = epoch
            closed_form = getattr(self, "_get_closed_form_lr", None)
            values = closed_form() if closed_form is not None else self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = _current_lrs(self.optimizer)

    def state_dict(self) -> dict:
        """Every attribute but the optimizer."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update(state_dict)


class LambdaLR(LRScheduler):
    """Set each group's rate to its initial rate times ``lr_lambda(epoch)``.

    Parameters
    ----------
    optimizer : Optimizer
    lr_lambda : callable or list of callables
        A function of the epoch, or one per parameter group.
    last_epoch : int, default -1

    Examples
    --------
    >>> import torcia
    >>> opt = torcia.optim.SGD([torcia.tensor([1.0], requires_grad=True)], lr=1.0)
    >>> sched = torcia.optim.lr_scheduler.LambdaLR(opt, lambda e: 0.5 ** e)
    >>> opt.step(); sched.step(); opt.step(); sched.step()
    >>> sched.get_last_lr()
    [0.25]
    """

    def __init__(self, optimizer, lr_lambda, last_epoch: int = -1):
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != len(optimizer.param_groups):
                raise ValueError(
                    f"Expected {len(optimizer.param_groups)} lr_lambdas, but got "
                    f"{len(lr_lambda)}"
                )
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * len(optimizer.param_groups)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [base * fn(self.last_epoch) for fn, base in zip(self.lr_lambdas, self.base_lrs)]

    def state_dict(self) -> dict:
        """Every attribute but the optimizer; of the lambdas, only the attributes of callable
        objects are kept (functions cannot be saved)."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        state["lr_lambdas"] = [
            None if _is_function(fn) else dict(fn.__dict__) for fn in self.lr_lambdas
        ]
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        state_dict = dict(state_dict)
        saved = state_dict.pop("lr_lambdas")
        self.__dict__.update(state_dict)
        for fn, attrs in zip(self.lr_lambdas, saved):
            if attrs is not None:
                fn.__dict__.update(attrs)


def _is_function(fn) -> bool:
    return isinstance(fn, types.FunctionType) or not hasattr(fn, "__dict__")


class MultiplicativeLR(LambdaLR):
    """Multiply each group's rate by ``lr_lambda(epoch)`` every epoch (after the first).

    Examples
    --------
    >>> import torcia
    >>> opt = torcia.optim.SGD([torcia.tensor([1.0], requires_grad=True)], lr=1.0)
    >>> sched = torcia.optim.lr_scheduler.MultiplicativeLR(opt, lambda e: 0.5)
    >>> opt.step(); sched.step(); opt.step(); sched.step()
    >>> sched.get_last_lr()
    [0.25]
    """

    def get_lr(self):
        if self._is_initial:
            return _current_lrs(self.optimizer)
        return [
            group["lr"] * fn(self.last_epoch)
            for fn, group in zip(self.lr_lambdas, self.optimizer.param_groups)
        ]


class StepLR(LRScheduler):
    """Multiply the rate by ``gamma`` every ``step_size`` epochs.

    Examples
    --------
    >>> import torcia
    >>> opt = torcia.optim.SGD([torcia.tensor([1.0], requires_grad=True)], lr=1.0)
    >>> sched = torcia.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.1)
    >>> lrs = []
    >>> for _ in range(4):
    ...     lrs.append(round(sched.get_last_lr()[0], 6)); opt.step(); sched.step()
    >>> lrs
    [1.0, 1.0, 0.1, 0.1]
    """

    def __init__(self, optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1):
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return _current_lrs(self.optimizer)
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base * self.gamma ** (self.last_epoch // self.step_size) for base in self.base_lrs]


class MultiStepLR(LRScheduler):
    """Multiply the rate by ``gamma`` at each milestone epoch.

    Examples
    --------
    >>> import torcia
    >>> opt = torcia.optim.SGD([torcia.tensor([1.0], requires_grad=True)], lr=1.0)
    >>> sched = torcia.optim.lr_scheduler.MultiStepLR(opt, milestones=[1, 3], gamma=0.5)
    >>> for _ in range(3):
    ...     opt.step(); sched.step()
    >>> sched.get_last_lr()
    [0.25]
    """

    def __init__(self, optimizer, milestones, gamma: float = 0.1, last_epoch: int = -1):
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch not in self.milestones:
            return _current_lrs(self.optimizer)
        factor = self.gamma ** self.milestones[self.last_epoch]
        return [group["lr"] * factor for group in self.optimizer.param_groups]

    def load_state_dict(self, state_dict: dict) -> None:
        super().load_state_dict(state_dict)
        # an archive hands the milestone counts back as a plain dict
        self.milestones = Counter(self.milestones)

    def _get_closed_form_lr(self):
        milestones = sorted(self.milestones.elements())
        return [
            base * self.gamma ** bisect_right(milestones, self.last_epoch)
            for base in self.base_lrs
        ]


class ConstantLR(LRScheduler):
    """Multiply the rate by ``factor`` until epoch ``total_iters``, then restore it.

    Examples
    --------
    >>> import torcia
    >>> opt = torcia.optim.SGD([torcia.tensor([1.0], requires_grad=True)], lr=1.0)
    >>> sched = torcia.optim.lr_scheduler.ConstantLR(opt, factor=0.5, total_iters=2)
    >>> lrs = []
    >>> for _ in range(3):
    ...     lrs.append(sched.get_last_lr()[0]); opt.step(); sched.step()
    >>> lrs
    [0.5, 0.5, 1.0]
    """

    def __init__(self, optimizer, factor: float = 1.0 / 3, total_iters: int = 5,
                 last_epoch: int = -1):
        if factor > 1.0 or factor < 0:
            raise ValueError("Constant multiplicative factor expected to be between 0 and 1.")
        self.factor = factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0:
            return [group["lr"] * self.factor for group in self.optimizer.param_groups]
        if self.last_epoch != self.total_iters:
            return _current_lrs(self.optimizer)
        return [group["lr"] * (1.0 / self.factor) for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [
            base * (self.factor + (self.last_epoch >= self.total_iters) * (1 - self.factor))
            for base in self.base_lrs
        ]


class LinearLR(LRScheduler):
    """Scale the rate by a factor going linearly from ``start_factor`` to ``end_factor``
    over ``total_iters`` epochs.

    Examples
    --------
    >>> import torcia
    >>> opt = torcia.optim.SGD([torcia.tensor([1.0], requires_grad=True)], lr=1.0)
    >>> sched = torcia.optim.lr_scheduler.LinearLR(opt, start_factor=0.5, total_iters=2)
    >>> lrs = []
    >>> for _ in range(3):
    ...     lrs.append(sched.get_last_lr()[0]); opt.step(); sched.step()
    >>> lrs
    [0.5, 0.75, 1.0]
    """

    def __init__(self, optimizer, start_factor: float = 1.0 / 3, end_factor: float = 1.0,
                 total_iters: int = 5, last_epoch: int = -1):
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError(
                "Starting multiplicative factor expected to be greater than 0 and less or "
                "equal to 1."
            )
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0:
            return [group["lr"] * self.start_factor for group in self.optimizer.param_groups]
        if self._is_initial or self.last_epoch > self.total_iters:
            return _current_lrs(self.optimizer)
        change = self.end_factor - self.start_factor
        # the ratio of this epoch's factor to the last one's
        ratio = 1.0 + change / (
            self.total_iters * self.start_factor + (self.last_epoch - 1) * change
        )
        return [group["lr"] * ratio for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        change = self.end_factor - self.start_factor
        return [
            base * (self.start_factor
                    + change * min(self.total_iters, self.last_epoch) / self.total_iters)
            for base in self.base_lrs
        ]


class ExponentialLR(LRScheduler):
    """Multiply the rate by ``gamma`` every epoch.

    Examples
    --------
    >>> import torcia
    >>> opt = torcia.optim.SGD([torcia.tensor([1.0], requires_grad=True)], lr=1.0)
    >>> sched = torcia.optim.lr_scheduler.ExponentialLR(opt, gamma=0.5)
    >>> opt.step(); sched.step(); opt.step(); sched.step()
    >>> sched.get_last_lr()
    [0.25]
    """

    def __init__(self, optimizer, gamma: float, last_epoch: int = -1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self._is_initial:
            return _current_lrs(self.optimizer)
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base * self.gamma**self.last_epoch for base in self.base_lrs]


class PolynomialLR(LRScheduler):
    """Decay the rate as ``(1 - epoch / total_iters) ** power`` until ``total_iters``.

    Examples
    --------
    >>> import torcia
    >>> opt = torcia.optim.SGD([torcia.tensor([1.0], requires_grad=True)], lr=1.0)
    >>> sched = torcia.optim.lr_scheduler.PolynomialLR(opt, total_iters=4, power=1.0)
    >>> opt.step(); sched.step(); opt.step(); sched.step()
    >>> sched.get_last_lr()
    [0.5]
    """

    def __init__(self, optimizer, total_iters: int = 5, power: float = 1.0,
                 last_epoch: int = -1):
        self.total_iters = total_iters
        self.power = power
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self._is_initial or self.last_epoch > self.total_iters:
            return _current_lrs(self.optimizer)
        factor = (
            (1.0 - self.last_epoch / self.total_iters)
            / (1.0 - (self.last_epoch - 1) / self.total_iters)
        ) ** self.power
        return [group["lr"] * factor for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [
            base * (1.0 - min(self.total_iters, self.last_epoch) / self.total_iters)
            ** self.power
            for base in self.base_lrs
        ]


class CosineAnnealingLR(LRScheduler):
    r"""Anneal the rate along a cosine from its initial value to ``eta_min`` over ``T_max``
    epochs (SGDR without restarts, Loshchilov & Hutter, 2017).

    ``step()`` uses the recursive form, which follows changes made to the rate from
    outside; ``_get_closed_form_lr`` gives
    :math:`\eta_{min} + (\eta_0 - \eta_{min})(1 + \cos(\pi t / T_{max})) / 2`.
    Past ``T_max`` the rate climbs back along the cosine.

    Examples
    --------
    >>> import torcia
    >>> opt = torcia.optim.SGD([torcia.tensor([1.0], requires_grad=True)], lr=1.0)
    >>> sched = torcia.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=2)
    >>> opt.step(); sched.step()
    >>> round(sched.get_last_lr()[0], 6)
    0.5
    """

    def __init__(self, optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1):
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self._is_initial:
            return _current_lrs(self.optimizer)
        t, T = self.last_epoch, self.T_max
        if (t - 1 - T) % (2 * T) == 0:
            # at the bottom of the cosine the ratio below is 0/0: step up by the increment
            return [
                group["lr"] + (base - self.eta_min) * (1 - math.cos(math.pi / T)) / 2
                for base, group in zip(self.base_lrs, self.optimizer.param_groups)
            ]
        ratio = (1 + math.cos(math.pi * t / T)) / (1 + math.cos(math.pi * (t - 1) / T))
        return [
            ratio * (group["lr"] - self.eta_min) + self.eta_min
            for group in self.optimizer.param_groups
        ]

    def _get_closed_form_lr(self):
        return [
            self.eta_min
            + (base - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
            for base in self.base_lrs
        ]


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing restarted every ``T_i`` epochs, the period growing by ``T_mult``
    after each restart (SGDR). ``step(epoch)`` accepts fractional epochs.

    Examples
    --------
    >>> import torcia
    >>> opt = torcia.optim.SGD([torcia.tensor([1.0], requires_grad=True)], lr=1.0)
    >>> sched = torcia.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2)
    >>> lrs = []
    >>> for _ in range(4):
    ...     lrs.append(round(sched.get_last_lr()[0], 6)); opt.step(); sched.step()
    >>> lrs
    [1.0, 0.5, 1.0, 0.5]
    """

    def __init__(self, optimizer, T_0: int, T_mult: int = 1, eta_min: float = 0.0,
                 last_epoch: int = -1):
        if T_0 <= 0 or not isinstance(T_0, int):
            raise ValueError(f"Expected positive integer T_0, but got {T_0}")
        if T_mult < 1 or not isinstance(T_mult, int):
            raise ValueError(f"Expected integer T_mult >= 1, but got {T_mult}")
        if not isinstance(eta_min, (float, int)):
            raise ValueError(
                f"Expected float or int eta_min, but got {eta_min} of type {type(eta_min)}"
            )
        self.T_0 = T_0
        self.T_i = T_0
        self.T_mult = T_mult
        self.eta_min = eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [
            self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * self.T_cur / self.T_i))
            / 2
            for base in self.base_lrs
        ]

    def step(self, epoch=None) -> None:
        """Advance one epoch, or go to ``epoch`` (a float is allowed: a fraction of an
        epoch, for per-batch updates)."""
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur += 1
            if self.T_cur >= self.T_i:
                self.T_cur -= self.T_i
                self.T_i *= self.T_mult
        else:
            if epoch < 0:
                raise ValueError(f"Expected non-negative epoch, but got {epoch}")
            if epoch >= self.T_0:
                if self.T_mult == 1:
                    self.T_cur = epoch % self.T_0
                else:
                    # which restart period the epoch falls in: sum of T_0 T_mult^k up to n
                    n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
                    self.T_cur = epoch - self.T_0 * (self.T_mult**n - 1) / (self.T_mult - 1)
                    self.T_i = self.T_0 * self.T_mult**n
            else:
                self.T_i = self.T_0
                self.T_cur = epoch
        self.last_epoch = math.floor(epoch)
        for group, lr in zip(self.optimizer.param_groups, self.get_lr()):
            group["lr"] = lr
        self._last_lr = _current_lrs(self.optimizer)


class CyclicLR(LRScheduler):
    """Cycle the rate between ``base_lr`` and ``max_lr`` (Smith, 2017), stepping once per
    batch, and the momentum (or Adam's ``beta1``) inversely between ``max_momentum`` and
    ``base_momentum``.

    Parameters
    ----------
    optimizer : Optimizer
    base_lr, max_lr : float or list of float
        Bounds of the cycle, per group.
    step_size_up : int, default 2000
        Steps of the rising half.
    step_size_down : int, optional
        Steps of the falling half (default: ``step_size_up``).
    mode : {"triangular", "triangular2", "exp_range"}
        Amplitude constant, halved each cycle, or scaled by ``gamma ** iteration``.
    gamma : float, default 1.0
    scale_fn : callable, optional
        A custom amplitude scale of one argument (overrides ``mode``).
    scale_mode : {"cycle", "iterations"}
        What ``scale_fn`` is given.
    cycle_momentum : bool, default True
    base_momentum, max_momentum : float or list of float, default 0.8 and 0.9
    last_epoch : int, default -1

    Examples
    --------
    >>> import torcia
    >>> opt = torcia.optim.SGD([torcia.tensor([1.0], requires_grad=True)], lr=1.0,
    ...                        momentum=0.9)
    >>> sched = torcia.optim.lr_scheduler.CyclicLR(opt, 0.1, 1.0, step_size_up=2)
    >>> lrs = []
    >>> for _ in range(5):
    ...     lrs.append(round(sched.get_last_lr()[0], 6)); opt.step(); sched.step()
    >>> lrs
    [0.1, 0.55, 1.0, 0.55, 0.1]
    """

    def __init__(self, optimizer, base_lr, max_lr, step_size_up: int = 2000,
                 step_size_down: int | None = None, mode: str = "triangular",
                 gamma: float = 1.0, scale_fn=None, scale_mode: str = "cycle",
                 cycle_momentum: bool = True, base_momentum=0.8, max_momentum=0.9,
                 last_epoch: int = -1):
        _check_optimizer(optimizer)
        base_lrs = _per_group("base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups):
                group["lr"] = lr
        self.max_lrs = _per_group("max_lr", optimizer, max_lr)
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size = up + down
        self.step_ratio = up / self.total_size
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError("mode is invalid and scale_fn is None")
        self.mode = mode
        self.gamma = gamma
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode if scale_fn is not None else (
            "iterations" if mode == "exp_range" else "cycle")
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError(
                    "optimizer must support momentum or beta1 with `cycle_momentum` option "
                    "enabled"
                )
            self.use_beta1 = "betas" in optimizer.defaults
            self.base_momentums = _per_group("base_momentum", optimizer, base_momentum)
            self.max_momentums = _per_group("max_momentum", optimizer, max_momentum)
            if last_epoch == -1:
                for top, bottom, group in zip(self.max_momentums, self.base_momentums,
                                              optimizer.param_groups):
                    _set_momentum(group, top, self.use_beta1)
                    group["max_momentum"] = top
                    group["base_momentum"] = bottom
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def scale_fn(self, x) -> float:
        """The amplitude scale at cycle (or iteration) ``x``."""
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma**x

    def get_lr(self):
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        if x <= self.step_ratio:
            scale_factor = x / self.step_ratio
        else:
            scale_factor = (x - 1) / (self.step_ratio - 1)
        scale = self.scale_fn(cycle if self.scale_mode == "cycle" else self.last_epoch)
        lrs = [base + (top - base) * scale_factor * scale
               for base, top in zip(self.base_lrs, self.max_lrs)]
        if self.cycle_momentum:
            for bottom, top, group in zip(self.base_momentums, self.max_momentums,
                                          self.optimizer.param_groups):
                _set_momentum(group, top - (top - bottom) * scale_factor * scale, self.use_beta1)
        return lrs

    def state_dict(self) -> dict:
        """Every attribute but the optimizer and a custom ``scale_fn`` (a function cannot
        be saved; pass it again when rebuilding)."""
        state = super().state_dict()
        state.pop("_scale_fn_custom")
        return state


def _set_momentum(group: dict, value, use_beta1: bool) -> None:
    if use_beta1:
        group["betas"] = (value, *group["betas"][1:])
    else:
        group["momentum"] = value


class OneCycleLR(LRScheduler):
    """The 1cycle policy (Smith & Topin, 2018): the rate rises from ``max_lr / div_factor``
    to ``max_lr`` and anneals to ``max_lr / (div_factor * final_div_factor)`` over
    ``total_steps`` batches, the momentum moving the opposite way.

    Parameters
    ----------
    optimizer : Optimizer
    max_lr : float or list of float
    total_steps : int, optional
        Or give ``epochs`` and ``steps_per_epoch``.
    epochs, steps_per_epoch : int, optional
    pct_start : float, default 0.3
        Fraction of the steps spent rising.
    anneal_strategy : {"cos", "linear"}
    cycle_momentum : bool, default True
    base_momentum, max_momentum : float or list of float, default 0.85 and 0.95
    div_factor : float, default 25
    final_div_factor : float, default 1e4
    three_phase : bool, default False
        Fall back to the initial rate symmetrically, then anneal to the minimum.
    last_epoch : int, default -1

    Examples
    --------
    >>> import torcia
    >>> opt = torcia.optim.SGD([torcia.tensor([1.0], requires_grad=True)], lr=1.0,
    ...                        momentum=0.9)
    >>> sched = torcia.optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=10)
    >>> round(sched.get_last_lr()[0], 6)
    0.04
    >>> for _ in range(2):
    ...     opt.step(); sched.step()
    >>> round(sched.get_last_lr()[0], 6)
    1.0
    """

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None,
                 pct_start: float = 0.3, anneal_strategy: str = "cos",
                 cycle_momentum: bool = True, base_momentum=0.85, max_momentum=0.95,
                 div_factor: float = 25.0, final_div_factor: float = 1e4,
                 three_phase: bool = False, last_epoch: int = -1):
        _check_optimizer(optimizer)
        if total_steps is not None:
            if total_steps <= 0 or not isinstance(total_steps, int):
                raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            if not isinstance(epochs, int) or epochs <= 0:
                raise ValueError(f"Expected positive integer epochs, but got {epochs}")
            if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
                raise ValueError(
                    f"Expected positive integer steps_per_epoch, but got {steps_per_epoch}"
                )
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("You must define either total_steps OR (epochs AND steps_per_epoch)")
        if pct_start < 0 or pct_start > 1 or not isinstance(pct_start, float):
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(
                f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}"
            )
        rise_end = float(pct_start * self.total_steps) - 1
        if three_phase:
            phases = [
                (rise_end, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (float(2 * pct_start * self.total_steps) - 2, "max_lr", "initial_lr",
                 "base_momentum", "max_momentum"),
                (self.total_steps - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum"),
            ]
        else:
            phases = [
                (rise_end, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (self.total_steps - 1, "max_lr", "min_lr", "base_momentum", "max_momentum"),
            ]
        keys = ("end_step", "start_lr", "end_lr", "start_momentum", "end_momentum")
        self._schedule_phases = [dict(zip(keys, phase)) for phase in phases]
        self._anneal_func_type = anneal_strategy
        max_lrs = _per_group("max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for top, group in zip(max_lrs, optimizer.param_groups):
                group["initial_lr"] = top / div_factor
                group["max_lr"] = top
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError(
                    "optimizer must support momentum or beta1 with `cycle_momentum` option "
                    "enabled"
                )
            self.use_beta1 = "betas" in optimizer.defaults
            max_momentums = _per_group("max_momentum", optimizer, max_momentum)
            base_momentums = _per_group("base_momentum", optimizer, base_momentum)
            if last_epoch == -1:
                for top, bottom, group in zip(max_momentums, base_momentums,
                                              optimizer.param_groups):
                    _set_momentum(group, top, self.use_beta1)
                    group["max_momentum"] = top
                    group["base_momentum"] = bottom
        super().__init__(optimizer, last_epoch)

    def _anneal(self, start, end, pct):
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self):
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(
                f"Tried to step {step} times. The specified number of total steps is "
                f"{self.total_steps}"
            )
        lrs = []
        last = len(self._schedule_phases) - 1
        for group in self.optimizer.param_groups:
            start_step = 0.0
            for i, phase in enumerate(self._schedule_phases):
                end_step = phase["end_step"]
                if step <= end_step or i == last:
                    pct = (step - start_step) / (end_step - start_step)
                    lr = self._anneal(group[phase["start_lr"]], group[phase["end_lr"]], pct)
                    if self.cycle_momentum:
                        momentum = self._anneal(group[phase["start_momentum"]],
                                                group[phase["end_momentum"]], pct)
                    break
                start_step = end_step
            lrs.append(lr)
            if self.cycle_momentum:
                _set_momentum(group, momentum, self.use_beta1)
        return lrs


def _check_members(owner: str, optimizer, members) -> None:
    for i, sched in enumerate(members):
        if not hasattr(sched, "optimizer"):
            raise TypeError(f"{owner} at index {i} should have `optimizer` as its attribute.")
        if isinstance(sched, ReduceLROnPlateau):
            raise ValueError(
                f"{owner} does not support `ReduceLROnPlateau` scheduler as it requires "
                "additional kwargs to be specified when calling `step`, but got one at index "
                f"{i} in the given schedulers sequence."
            )
        if optimizer is not sched.optimizer:
            raise ValueError(
                f"{owner} expects all schedulers to belong to the same optimizer, but got "
                f"scheduler {type(sched).__name__} at index {i} has {sched.optimizer}, which "
                f"is different from {type(optimizer).__name__}."
            )


class _Composite(LRScheduler):
    """State-dict handling shared by schedulers made of other schedulers."""

    def state_dict(self) -> dict:
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        state_dict = dict(state_dict)
        members = state_dict.pop("_schedulers")
        self.__dict__.update(state_dict)
        for sched, saved in zip(self._schedulers, members):
            sched.load_state_dict(saved)


class SequentialLR(_Composite):
    """Run ``schedulers`` one after the other, switching at the ``milestones`` epochs; each
    one starts from its own epoch 0 at its milestone.

    Examples
    --------
    >>> import torcia
    >>> from torcia.optim import lr_scheduler as S
    >>> opt = torcia.optim.SGD([torcia.tensor([1.0], requires_grad=True)], lr=1.0)
    >>> warmup = S.ConstantLR(opt, factor=0.1, total_iters=2)
    >>> decay = S.ExponentialLR(opt, gamma=0.5)
    >>> sched = S.SequentialLR(opt, [warmup, decay], milestones=[2])
    >>> lrs = []
    >>> for _ in range(4):
    ...     lrs.append(round(sched.get_last_lr()[0], 6)); opt.step(); sched.step()
    >>> lrs
    [0.1, 0.1, 1.0, 0.5]
    """

    def __init__(self, optimizer, schedulers, milestones, last_epoch: int = -1):
        if len(schedulers) < 1:
            raise ValueError(
                f"{type(self).__name__} expects at least one scheduler, but got no scheduler."
            )
        _check_members(type(self).__name__, optimizer, schedulers)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(
                "Sequential Schedulers expects number of schedulers provided to be one more "
                "than the number of milestone points, but got number of schedulers "
                f"{len(schedulers)} and the number of milestones to be equal to "
                f"{len(milestones)}"
            )
        self._schedulers = list(schedulers)
        self._milestones = list(milestones)
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        # each member stepped once when it was built: undo that, then start the first
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"]
        self._undo(self)
        first = self._schedulers[bisect_right(self._milestones, 0)]
        first._initial_step()
        self._last_lr = first.get_last_lr()

    def _undo(self, sched) -> None:
        if hasattr(sched, "_schedulers"):
            for member in sched._schedulers:
                self._undo(member)
        elif hasattr(sched, "last_epoch"):
            sched.last_epoch -= 1

    def step(self) -> None:
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        sched = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            sched._update_lr(0)
        else:
            sched.step()
        self._last_lr = sched.get_last_lr()


class ChainedScheduler(_Composite):
    """Step several schedulers together each epoch; their effects compose.

    Examples
    --------
    >>> import torcia
    >>> from torcia.optim import lr_scheduler as S
    >>> opt = torcia.optim.SGD([torcia.tensor([1.0], requires_grad=True)], lr=1.0)
    >>> sched = S.ChainedScheduler([S.ConstantLR(opt, factor=0.5, total_iters=1),
    ...                             S.ExponentialLR(opt, gamma=0.5)])
    >>> opt.step(); sched.step()
    >>> sched.get_last_lr()
    [0.5]
    """

    def __init__(self, schedulers, optimizer=None):
        if len(schedulers) < 1:
            raise ValueError(
                f"{type(self).__name__} expects at least one scheduler to be chained, but got "
                "no scheduler."
            )
        optimizer = optimizer or schedulers[0].optimizer
        _check_members(type(self).__name__, optimizer, schedulers)
        self._schedulers = list(schedulers)
        self.optimizer = optimizer
        self._last_lr = _current_lrs(self._schedulers[-1].optimizer)

    def step(self) -> None:
        for sched in self._schedulers:
            sched.step()
        self._last_lr = _current_lrs(self._schedulers[-1].optimizer)


class ReduceLROnPlateau(LRScheduler):
    """Multiply the rate by ``factor`` when a metric has stopped improving for more than
    ``patience`` epochs; ``step(metric)`` is called with the metric each epoch.

    Parameters
    ----------
    optimizer : Optimizer
    mode : {"min", "max"}, default "min"
        Whether the metric should fall or rise.
    factor : float, default 0.1
    patience : int, default 10
        Epochs without improvement tolerated.
    threshold : float, default 1e-4
        How much better counts as improvement.
    threshold_mode : {"rel", "abs"}, default "rel"
    cooldown : int, default 0
        Epochs to wait after a reduction before counting again.
    min_lr : float or list of float, default 0
    eps : float, default 1e-8
        Smaller changes of the rate are skipped.

    Examples
    --------
    >>> import torcia
    >>> opt = torcia.optim.SGD([torcia.tensor([1.0], requires_grad=True)], lr=1.0)
    >>> sched = torcia.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=1, factor=0.5)
    >>> for loss in [1.0, 1.0, 1.0]:
    ...     sched.step(loss)
    >>> sched.get_last_lr()
    [0.5]
    """

    def __init__(self, optimizer, mode: str = "min", factor: float = 0.1, patience: int = 10,
                 threshold: float = 1e-4, threshold_mode: str = "rel", cooldown: int = 0,
                 min_lr=0, eps: float = 1e-8):
        if factor >= 1.0:
            raise ValueError("Factor should be < 1.0.")
        _check_optimizer(optimizer)
        self.factor = factor
        self.optimizer = optimizer
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != len(optimizer.param_groups):
                raise ValueError(
                    f"expected {len(optimizer.param_groups)} min_lrs, got {len(min_lr)}"
                )
            self.default_min_lr = None
            self.min_lrs = list(min_lr)
        else:
            self.default_min_lr = min_lr
            self.min_lrs = [min_lr] * len(optimizer.param_groups)
        self.patience = patience
        self.cooldown = cooldown
        self.eps = eps
        self.last_epoch = 0
        self._last_lr = _current_lrs(optimizer)
        self._init_is_better(mode, threshold, threshold_mode)
        self._reset()

    def _init_is_better(self, mode, threshold, threshold_mode) -> None:
        if mode not in ("min", "max"):
            raise ValueError("mode " + mode + " is unknown!")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError("threshold mode " + threshold_mode + " is unknown!")
        self.mode = mode
        self.threshold = threshold
        self.threshold_mode = threshold_mode
        self.mode_worse = math.inf if mode == "min" else -math.inf

    def _reset(self) -> None:
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    @property
    def in_cooldown(self) -> bool:
        return self.cooldown_counter > 0

    def is_better(self, a, best) -> bool:
        """Whether metric value ``a`` improves on ``best`` by more than the threshold."""
        if self.mode == "min":
            bound = best * (1.0 - self.threshold) if self.threshold_mode == "rel" else (
                best - self.threshold)
            return a < bound
        bound = best * (self.threshold + 1.0) if self.threshold_mode == "rel" else (
            best + self.threshold)
        return a > bound

    def step(self, metrics, epoch=None) -> None:
        current = float(metrics)
        if epoch is None:
            epoch = self.last_epoch + 1
        else:
            warnings.warn(_EPOCH_DEPRECATION, UserWarning, stacklevel=2)
        self.last_epoch = epoch
        if self.is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0  # bad epochs in cooldown do not count
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = _current_lrs(self.optimizer)

    def _reduce_lr(self) -> None:
        if len(self.optimizer.param_groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(
                    "The number of param groups in the `optimizer` "
                    f"({len(self.optimizer.param_groups)}) differs from when "
                    f"`ReduceLROnPlateau` was initialized ({len(self.min_lrs)}), usually due "
                    "to a new param group being added to the optimizer. Please modify the "
                    "`min_lrs` field to match the length of the `optimizer` param groups."
                )
            self.min_lrs = [self.default_min_lr] * len(self.optimizer.param_groups)
        for group, min_lr in zip(self.optimizer.param_groups, self.min_lrs):
            old = float(group["lr"])
            new = max(old * self.factor, min_lr)
            if old - new > self.eps:
                group["lr"] = new

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update(state_dict)
        self._init_is_better(self.mode, self.threshold, self.threshold_mode)


# names under which torcia-optim's plugin registers each scheduler
BUILTIN = {
    "lambda": LambdaLR,
    "multiplicative": MultiplicativeLR,
    "step": StepLR,
    "multi_step": MultiStepLR,
    "constant": ConstantLR,
    "linear": LinearLR,
    "exponential": ExponentialLR,
    "polynomial": PolynomialLR,
    "cosine_annealing": CosineAnnealingLR,
    "cosine_annealing_warm_restarts": CosineAnnealingWarmRestarts,
    "cyclic": CyclicLR,
    "one_cycle": OneCycleLR,
    "sequential": SequentialLR,
    "chained": ChainedScheduler,
    "reduce_on_plateau": ReduceLROnPlateau,
}
