"""ZeroRedundancyOptimizer (ZeRO stage 1), as
``torch.distributed.optim.ZeroRedundancyOptimizer``: each rank keeps the optimizer state
of a share of the parameters only."""

from __future__ import annotations

import torcia
from torcia.distributed import collectives as C
from torcia.distributed.algorithms.join import Joinable, JoinHook
from torcia.optim import Optimizer

__all__ = ["ZeroRedundancyOptimizer"]


class ZeroRedundancyOptimizer(Optimizer, Joinable):
    """Wrap ``optimizer_class`` so that its state is sharded across the ranks.

    The parameters of each group are dealt out to the ranks, largest first, each to the
    rank holding the fewest elements so far. A rank's local optimizer (:attr:`optim`,
    ``optimizer_class(its share, **defaults)``) updates its share only, so optimizer
    state (Adam's two moments, say) takes about 1/N of the memory; after ``step`` every
    rank broadcasts its updated parameters (one collective per rank). Gradients must be
    averaged beforehand (DistributedDataParallel does).

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> from torcia.distributed.optim import ZeroRedundancyOptimizer
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> model = torcia.nn.Linear(2, 1)
    >>> opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torcia.optim.SGD,
    ...                               lr=0.1)
    >>> model(torcia.ones(1, 2)).sum().backward(); opt.step()
    >>> model.bias.grad, type(opt.optim).__name__
    (tensor([1.]), 'SGD')
    >>> dist.destroy_process_group()
    """

    def __init__(self, params, optimizer_class, process_group=None,
                 parameters_as_bucket_view=False, overlap_with_ddp=False, **defaults):
        if overlap_with_ddp:
            raise NotImplementedError("overlap_with_ddp is not supported: ZeroRedundancy"
                                      "Optimizer steps after the backward pass")
        self.process_group = process_group
        self.rank = C.get_rank(process_group)
        self.world_size = C.get_world_size(process_group)
        self._optimizer_class = optimizer_class
        self._defaults = defaults
        self._partition = None
        Optimizer.__init__(self, params, defaults)
        self._build()
        self._consolidated = None

    # ----- partitioning -----------------------------------------------------------------
    def _build(self):
        """Deal the parameters out and make this rank's optimizer."""
        owner = {}
        for group in self.param_groups:
            load = [0] * self.world_size
            for p in sorted(group["params"], key=lambda t: -t.numel()):
                r = min(range(self.world_size), key=load.__getitem__)
                owner[id(p)] = r
                load[r] += p.numel()
        self._owner = owner
        local = []
        for group in self.param_groups:
            mine = [p for p in group["params"] if owner[id(p)] == self.rank]
            local.append({**{k: v for k, v in group.items() if k != "params"},
                          "params": mine})
        # a rank may own nothing of a group: its optimizer still needs one entry per group
        self.optim = self._optimizer_class(
            [g for g in local if g["params"]] or [{"params": [torcia.zeros(0)]}],
            **self._defaults)
        self._local_groups = [i for i, g in enumerate(local) if g["params"]]
        # each rank's parameters in one flat order, for the broadcasts after step
        self._by_rank = [[p for group in self.param_groups for p in group["params"]
                          if owner[id(p)] == r] for r in range(self.world_size)]

    def add_param_group(self, param_group: dict) -> None:
        """Add a parameter group (dealt out like the others)."""
        Optimizer.add_param_group(self, param_group)
        if hasattr(self, "_owner"):
            self._build()

    # ----- stepping ---------------------------------------------------------------------
    def _sync_hyperparameters(self):
        # schedulers change this optimizer's groups; the local optimizer follows them
        for local, index in zip(self.optim.param_groups, self._local_groups):
            for key, value in self.param_groups[index].items():
                if key != "params":
                    local[key] = value

    def step(self, closure=None, **kwargs):
        """Update this rank's share, then receive every other rank's."""
        self._sync_hyperparameters()
        loss = self.optim.step(closure, **kwargs) if closure is not None else \
            self.optim.step(**kwargs)
        self._broadcast_params()
        return loss

    def _broadcast_params(self):
        if self.world_size == 1:
            return
        with torcia.no_grad():
            for r, params in enumerate(self._by_rank):
                if not params:
                    continue
                flat = torcia.cat([p.detach().reshape(-1) for p in params])
                C.broadcast(flat, C._global_rank(self.process_group, r),
                            group=self.process_group)
                if r != self.rank:
                    offset = 0
                    for p in params:
                        p.copy_(flat[offset:offset + p.numel()].reshape(p.shape))
                        offset += p.numel()

    # ----- state dicts ------------------------------------------------------------------
    def _local_state(self):
        """This rank's optimizer state, keyed by the global index of each parameter."""
        index = {id(p): i for i, p in enumerate(
            p for group in self.param_groups for p in group["params"])}
        return {index[id(p)]: s for p, s in self.optim.state.items() if id(p) in index}

    def consolidate_state_dict(self, to: int = 0) -> None:
        """Collect every rank's share of the optimizer state on global rank ``to``, for
        :meth:`state_dict` there (every rank must call it)."""
        gathered = [None] * self.world_size if C.get_rank() == to else None
        C.gather_object(self._local_state(), gathered, dst=to, group=self.process_group)
        if gathered is not None:
            merged = {}
            for part in gathered:
                merged.update({int(k): v for k, v in part.items()})
            self._consolidated = merged

    def state_dict(self) -> dict:
        """The whole optimizer state, in the layout of ``optimizer_class``'s state dict;
        only on the rank :meth:`consolidate_state_dict` collected it on."""
        if self._consolidated is None:
            raise RuntimeError("Optimizer state has not been consolidated on this rank. "
                               "Please call `consolidate_state_dict(to=...)` on all ranks "
                               "beforehand.")
        layout = Optimizer.state_dict(self)
        layout["state"] = dict(sorted(self._consolidated.items()))
        return layout

    def load_state_dict(self, state_dict: dict) -> None:
        """Load a whole state (from :meth:`state_dict`): each rank keeps its share."""
        params = [p for group in self.param_groups for p in group["params"]]
        for group, saved in zip(self.param_groups, state_dict["param_groups"]):
            group.update({k: v for k, v in saved.items() if k != "params"})
        local_index = {id(p): i for i, p in enumerate(
            p for group in self.optim.param_groups for p in group["params"])}
        local = self.optim.state_dict()
        local["state"] = {}
        for key, value in state_dict["state"].items():
            p = params[int(key)]
            if id(p) in local_index:
                local["state"][local_index[id(p)]] = value
        for g, index in zip(local["param_groups"], self._local_groups):
            g.update({k: v for k, v in self.param_groups[index].items() if k != "params"})
        self.optim.load_state_dict(local)

    # ----- Join -------------------------------------------------------------------------
    def join_hook(self, **kwargs):
        """On a rank that ran out of inputs: the broadcasts of the others' steps."""
        return _ZeroJoinHook(self)

    @property
    def join_device(self):
        return torcia.device("cpu")

    @property
    def join_process_group(self):
        return self.process_group


class _ZeroJoinHook(JoinHook):
    def __init__(self, zero):
        self.zero = zero

    def main_hook(self):
        self.zero._broadcast_params()
