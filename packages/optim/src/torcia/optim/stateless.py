"""Running an optimizer's step on other parameters and state, as ``torch.optim``."""

from __future__ import annotations

import contextlib
from collections import defaultdict


def _prepare(optimizer, swapin_parameters, swapin_optim_state):
    """Check the swap-in state against the live optimizer; returns the state by packed id
    and, per group, (live group, swap-in group, swap-in parameters)."""
    if not optimizer.state:
        raise RuntimeError(
            "swap_in_optimizer_params_and_state requires initialized optimizer state.")
    if not isinstance(swapin_optim_state, dict):
        raise RuntimeError(
            "swap_in_optimizer_params_and_state requires a DCP-style optimizer state_dict.")
    state = swapin_optim_state.get("state")
    groups = swapin_optim_state.get("param_groups")
    if not isinstance(state, dict):
        raise RuntimeError("swap_in_optimizer_params_and_state requires "
                           "swapin_optim_state['state'] to be a dict.")
    if not isinstance(groups, list) or len(groups) != len(optimizer.param_groups):
        raise RuntimeError(
            "swap_in_optimizer_params_and_state requires swapin_optim_state['param_groups'] "
            f"to be a list of {len(optimizer.param_groups)} groups, as optimizer.param_groups.")
    flat = list(swapin_parameters.values())
    offset = 0
    seen = set()
    infos = []
    for idx, (live, swapin) in enumerate(zip(optimizer.param_groups, groups)):
        ids = swapin.get("params")
        if not isinstance(ids, list) or len(ids) != len(live["params"]):
            raise RuntimeError(
                f"swap_in_optimizer_params_and_state: param group {idx} has "
                f"{len(live['params'])} parameters in the optimizer but "
                f"{len(ids) if isinstance(ids, list) else 'no'} packed ids in the state.")
        seen.update(ids)
        if offset + len(ids) > len(flat):
            raise RuntimeError(
                "swap_in_optimizer_params_and_state requires the explicit parameter state to "
                "match optimizer.param_groups ordering.")
        infos.append((live, swapin, flat[offset:offset + len(ids)]))
        offset += len(ids)
    extra = [k for k in state if k not in seen]
    if extra:
        raise RuntimeError(
            "swap_in_optimizer_params_and_state requires swapin_optim_state['state'] to be "
            "keyed only by packed parameter ids from param_groups[*]['params']; got extra "
            f"keys {extra!r}.")
    return state, infos


@contextlib.contextmanager
def swap_in_optimizer_params_and_state(optimizer, swapin_parameters, swapin_optim_state):
    """Run the optimizer on other parameters and state inside the block, then restore it.

    Parameters
    ----------
    optimizer : Optimizer
        The live optimizer; its state must already exist (one step taken).
    swapin_parameters : dict of str to Tensor
        The parameters to use, in the order of the optimizer's parameters (typically
        ``model.named_parameters()`` order).
    swapin_optim_state : dict
        Shaped as ``optimizer.state_dict()``: ``"state"`` keyed by packed parameter ids,
        ``"param_groups"`` with those ids as ``"params"`` and the hyperparameters to use.
        In-place changes to its tensors (a step's buffer updates) are what reaches it.

    Examples
    --------
    >>> import torcia
    >>> w = torcia.nn.Parameter(torcia.ones(2))
    >>> opt = torcia.optim.SGD([w], lr=0.1, momentum=0.9)
    >>> w.sum().backward(); opt.step()
    >>> other = torcia.nn.Parameter(torcia.zeros(2)); other.grad = torcia.ones(2)
    >>> sd = {"state": {0: {"momentum_buffer": torcia.zeros(2)}},
    ...       "param_groups": [dict(opt.param_groups[0], params=[0], lr=1.0)]}
    >>> with torcia.optim.swap_in_optimizer_params_and_state(opt, {"w": other}, sd):
    ...     opt.step()
    >>> other.tolist(), w.tolist(), opt.param_groups[0]["lr"]
    ([-1.0, -1.0], [0.8999999761581421, 0.8999999761581421], 0.1)
    """
    state, infos = _prepare(optimizer, swapin_parameters, swapin_optim_state)
    original_state = optimizer.state
    snapshots = [dict(g) for g in optimizer.param_groups]
    try:
        swapped = defaultdict(dict)
        for live, swapin, params in infos:
            live["params"] = params
            for key, value in swapin.items():
                if key != "params":
                    live[key] = value
            for p, pid in zip(params, swapin["params"]):
                # a shallow copy: buffers updated in place reach the caller's dict, a
                # buffer replaced by a new tensor does not
                swapped[p] = dict(state.get(pid, {}))
        optimizer.state = swapped
        yield
    finally:
        for group, snapshot in zip(optimizer.param_groups, snapshots):
            group.clear()
            group.update(snapshot)
        optimizer.state = original_state
