"""The :class:`Optimizer` base: parameter groups, state, state dicts, step hooks, and the
choice between a device's multi-tensor kernel and the per-parameter reference path."""

from __future__ import annotations

import functools
from collections import OrderedDict, defaultdict

import torcia
from torcia import Tensor
from torcia.library import RemovableHandle, bump_version, zero_grad


class _RequiredParameter:
    """Marks a hyperparameter that has no default and must be given (``lr`` of SGD once)."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


def check_value(ok: bool, what: str, value) -> None:
    """Raise PyTorch's ``ValueError("Invalid <what>: <value>")`` unless ``ok``.

    Examples
    --------
    >>> from torcia.optim.optimizer import check_value
    >>> try:
    ...     check_value(False, "learning rate", -1.0)
    ... except ValueError as error:
    ...     print(error)
    Invalid learning rate: -1.0
    """
    if not ok:
        raise ValueError(f"Invalid {what}: {value}")


def check_betas(betas) -> None:
    """Raise PyTorch's ``ValueError`` unless both Adam betas lie in ``[0, 1)``.

    Examples
    --------
    >>> from torcia.optim.optimizer import check_betas
    >>> check_betas((0.9, 0.999))
    >>> try:
    ...     check_betas((0.9, 1.0))
    ... except ValueError as error:
    ...     print(error)
    Invalid beta parameter at index 1: 1.0
    """
    for i in (0, 1):
        check_value(0.0 <= betas[i] < 1.0, f"beta parameter at index {i}", betas[i])


def _with_step_hooks(step):
    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        for hook in list(self._step_pre_hooks.values()):
            result = hook(self, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError(
                        f"{hook} must return None or a tuple of (new_args, new_kwargs), but "
                        f"got {result}."
                    )
                args, kwargs = result
        out = step(self, *args, **kwargs)
        self._opt_called = True  # lets a scheduler tell whether it is stepped too early
        for hook in list(self._step_post_hooks.values()):
            hook(self, args, kwargs)
        return out

    wrapper._with_hooks = True
    return wrapper


class Optimizer:
    """Base class of optimizers.

    Parameters
    ----------
    params : iterable of Tensor, of (str, Tensor) or of dict
        The tensors to optimize (``named_parameters()`` too: the names are kept in the
        group's ``"param_names"``), or parameter groups: dicts with a ``"params"`` entry and
        per-group hyperparameters overriding ``defaults``.
    defaults : dict
        Hyperparameter defaults of every group.

    Examples
    --------
    >>> import torcia
    >>> w = torcia.tensor([1.0, 2.0], requires_grad=True)
    >>> b = torcia.tensor([0.5], requires_grad=True)
    >>> opt = torcia.optim.SGD([{"params": [w]}, {"params": [b], "lr": 0.5}], lr=0.1)
    >>> [g["lr"] for g in opt.param_groups]
    [0.1, 0.5]
    """

    def __init__(self, params, defaults: dict):
        self.defaults = defaults
        self._step_pre_hooks: OrderedDict = OrderedDict()
        self._step_post_hooks: OrderedDict = OrderedDict()
        if isinstance(params, Tensor):
            raise TypeError(
                "params argument given to the optimizer should be an iterable of Tensors or "
                f"dicts, but got {params.type()}"
            )
        if isinstance(params, (set, frozenset)):
            raise TypeError(
                "optimizer parameters need to be organized in ordered collections, but the "
                "ordering of tensors in sets will change between runs. Please use a list "
                "instead."
            )
        self.state: defaultdict = defaultdict(dict)
        self.param_groups: list[dict] = []
        param_groups = list(params)
        if not param_groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        step = cls.__dict__.get("step")
        if step is not None and not getattr(step, "_with_hooks", False):
            cls.step = _with_step_hooks(step)

    def __repr__(self):
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {k}: {group[k]}" for k in sorted(group) if k != "params"]
        return "\n".join(lines) + "\n)"

    # ----- parameter groups -------------------------------------------------------------
    def add_param_group(self, param_group: dict) -> None:
        """Add a group of parameters (fine-tuning a layer that was frozen, say); missing
        hyperparameters are taken from ``defaults``."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            param_group["params"] = [params]
        elif isinstance(params, (set, frozenset)):
            raise TypeError(
                "optimizer parameters need to be organized in ordered collections, but the "
                "ordering of tensors in sets will change between runs. Please use a list "
                "instead."
            )
        else:
            param_group["params"] = list(params)
        _split_names(param_group)
        for p in param_group["params"]:
            if not isinstance(p, Tensor):
                kind = type(p).__qualname__
                if type(p).__module__ not in ("", "builtins"):
                    kind = f"{type(p).__module__}.{kind}"
                raise TypeError(
                    f"optimizer can only optimize Tensors, but one of the params is {kind}"
                )
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(
                    "parameter group didn't specify a value of required optimization "
                    f"parameter {name}"
                )
            param_group.setdefault(name, default)
        ids = [id(p) for p in param_group["params"]]
        if len(set(ids)) != len(ids):
            # PyTorch only warns ("in future, this will cause an error"); a parameter
            # updated twice per step is never what was meant
            raise ValueError("optimizer contains a parameter group with duplicate parameters")
        seen = {id(p) for group in self.param_groups for p in group["params"]}
        if seen & set(ids):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of all parameters: to None (the default), or to zeros."""
        zero_grad((p for group in self.param_groups for p in group["params"]), set_to_none)

    def step(self, closure=None):
        """Update the parameters once; ``closure`` re-evaluates the model and returns the
        loss (needed by LBFGS, optional elsewhere)."""
        raise NotImplementedError

    # ----- hooks ------------------------------------------------------------------------
    def register_step_pre_hook(self, hook) -> RemovableHandle:
        """Call ``hook(optimizer, args, kwargs)`` before each ``step``; it may return
        ``(new_args, new_kwargs)`` to replace the step's arguments."""
        handle = RemovableHandle(self._step_pre_hooks)
        self._step_pre_hooks[handle.id] = hook
        return handle

    def register_step_post_hook(self, hook) -> RemovableHandle:
        """Call ``hook(optimizer, args, kwargs)`` after each ``step``."""
        handle = RemovableHandle(self._step_post_hooks)
        self._step_post_hooks[handle.id] = hook
        return handle

    # ----- state dicts ------------------------------------------------------------------
    def state_dict(self) -> dict:
        """The optimizer's state in PyTorch's layout.

        ``"state"`` maps a parameter's index (counting through all groups in order) to its
        state; ``"param_groups"`` holds each group's hyperparameters with ``"params"`` as
        those indices. Values are tensors, numbers, lists and dicts, so :func:`torcia.save`
        can store it. The tensors are the live buffers, not copies.
        """
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            packed["params"] = [index.setdefault(id(p), len(index)) for p in group["params"]]
            groups.append(packed)
        state = {index[id(p)]: s for p, s in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Load a state made by :meth:`state_dict` (of this optimizer class).

        State tensors are copied, moved to their parameter's device and, except the step
        counts, cast to its dtype; hyperparameters are replaced by the saved ones.
        """
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        for group, saved in zip(self.param_groups, saved_groups):
            if len(group["params"]) != len(saved["params"]):
                raise ValueError(
                    "loaded state dict contains a parameter group that doesn't match the size "
                    "of optimizer's group"
                )
        by_index = {
            i: (p, group)
            for group, saved in zip(self.param_groups, saved_groups)
            for i, p in zip(saved["params"], group["params"])
        }
        state: defaultdict = defaultdict(dict)
        for key, value in state_dict["state"].items():
            # a JSON-based archive may hand the indices back as strings
            key = int(key) if isinstance(key, str) and key.isdigit() else key
            if key in by_index:
                param, group = by_index[key]
                state[param] = {k: _cast(param, v, k) for k, v in value.items()}
                self._check_loaded_state(key, param, group, state[param])
            else:
                state[key] = value
        self.state = state
        new_groups = []
        for group, saved in zip(self.param_groups, saved_groups):
            updated = {k: _plain(v, group.get(k)) for k, v in saved.items() if k != "params"}
            updated["params"] = group["params"]
            new_groups.append(updated)
        self.param_groups = new_groups

    def _check_loaded_state(self, index, param: Tensor, group: dict, state: dict) -> None:
        """Raise if a loaded state cannot serve ``param`` (called by :meth:`load_state_dict`
        after the cast to the parameter's dtype and device). The base class checks nothing;
        an optimizer whose update reads its buffers element by element checks their sizes,
        since a checkpoint is untrusted input and a native update trusts the sizes."""

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._step_pre_hooks = OrderedDict()
        self._step_post_hooks = OrderedDict()

    # ----- helpers for subclasses -------------------------------------------------------
    @staticmethod
    def _with_grads(group: dict) -> list[Tensor]:
        """The group's parameters that received a gradient."""
        return [p for p in group["params"] if p.grad is not None]

    @staticmethod
    def _kernel(op: str, params: list[Tensor], foreach):
        """The multi-tensor kernel ``op`` of the parameters' device, or None for the
        per-parameter path (``foreach=False``, mixed devices, or no such kernel)."""
        if foreach is False or not params:
            return None
        dev = params[0].device
        kernel = dev.backend.kernels.get(op)
        if any(p.device is not dev for p in params):
            kernel = None
        if kernel is None and foreach:
            raise RuntimeError(
                f"foreach=True needs the multi-tensor kernel {op!r} for device type "
                f"{dev.type!r} and all parameters of a group on one device"
            )
        return kernel


def _split_names(param_group: dict) -> None:
    """Accept ``named_parameters()``: (name, tensor) pairs become the tensors, and the names
    go to the group's ``"param_names"``."""
    names = [p[0] for p in param_group["params"] if isinstance(p, tuple)]
    if not names:
        return
    if len(names) != len(param_group["params"]):
        raise ValueError(
            "all optimizer params should be with/without names. Some param names are missing"
        )
    param_group["params"] = [p[1] for p in param_group["params"]]
    param_group["param_names"] = names


def _closure_loss(closure):
    """What ``step(closure)`` returns: the closure's loss, evaluated with grad mode on
    whatever mode the step runs in, or None without a closure."""
    if closure is None:
        return None
    with torcia.enable_grad():
        return closure()


def step_tensor() -> Tensor:
    """A fresh step count: a float32 scalar, as PyTorch keeps it.

    Examples
    --------
    >>> from torcia.optim.optimizer import step_tensor
    >>> step = step_tensor()
    >>> step, step.dtype
    (tensor(0.), torcia.float32)
    """
    return torcia.tensor(0.0, dtype=torcia.float32)


def bump_steps(states: list[dict]) -> list[float]:
    """Add one to each state's ``"step"`` and return the new counts as Python floats.

    Examples
    --------
    >>> import torcia
    >>> from torcia.optim.optimizer import bump_steps
    >>> states = [{"step": torcia.tensor(1.0)}]
    >>> bump_steps(states), states[0]["step"]
    ([2.0], tensor(2.))
    """
    out = []
    for s in states:
        t = s["step"]
        t.__torcia_data__ += 1
        bump_version(t)
        out.append(float(t.__torcia_data__))
    return out


def bump_versions(tensors) -> None:
    """Mark tensors a kernel wrote into, so autograd sees the in-place change.

    Examples
    --------
    >>> import torcia
    >>> from torcia.optim.optimizer import bump_versions
    >>> p = torcia.zeros(1)
    >>> before = p._version
    >>> bump_versions([p])
    >>> p._version - before
    1
    """
    for t in tensors:
        bump_version(t)


def arrays(tensors) -> list:
    """The device arrays under ``tensors`` (shared, not copied): what a kernel updates.

    Examples
    --------
    >>> import torcia
    >>> from torcia.optim.optimizer import arrays
    >>> p = torcia.tensor([1.0, 2.0])
    >>> arrays([p])[0] *= 10
    >>> p
    tensor([10., 20.])
    """
    return [t.__torcia_data__ for t in tensors]


def _cast(param: Tensor, value, key):
    if isinstance(value, Tensor):
        if key == "step":
            return value.clone()
        dtype = param.dtype if param.is_floating_point() else value.dtype
        return value.detach().to(device=param.device, dtype=dtype, copy=True)
    if isinstance(value, dict):
        return {k: _cast(param, v, k) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(param, v, key) for v in value)
    return value


def _plain(value, current):
    """A saved hyperparameter; a tuple (betas) that an archive stored as a list is a tuple
    again."""
    if isinstance(value, list) and isinstance(current, tuple):
        return tuple(value)
    return value
