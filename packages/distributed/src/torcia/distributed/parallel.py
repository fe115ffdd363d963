"""DistributedDataParallel: one model replica per process, gradients averaged in buckets
whose all-reduce starts during backward as soon as the bucket's gradients are ready."""

from __future__ import annotations

import contextlib

import torcia
from torcia.autograd import engine
from torcia.autograd.graph import AccumulateGrad, accumulator_of
from torcia.distributed import collectives as C
from torcia.distributed.algorithms.join import Join, Joinable, JoinHook
from torcia.distributed.group import ReduceOp
from torcia.library import bump_version, wrap
from torcia.nn import Module


class _Bucket:
    __slots__ = ("params", "names", "ready", "work", "flat", "future")

    def __init__(self, params, names):
        self.params = params
        self.names = names
        self.ready = set()
        self.work = None
        self.flat = None
        self.future = None


class GradBucket:
    """What a DDP communication hook is given: one bucket of gradients, flattened into
    one tensor, as ``torch.distributed.GradBucket``.

    The hook returns a :class:`torcia.futures.Future` whose value is a tensor shaped as
    :meth:`buffer`: the gradients to use (averaged over the ranks: DDP does not divide
    what a hook returns).

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributed import GradBucket
    >>> w = torcia.nn.Parameter(torcia.zeros(2, 2))
    >>> bucket = GradBucket(0, torcia.arange(4.0), [w], is_last=True)
    >>> bucket.gradients()[0]
    tensor([[0., 1.],
            [2., 3.]])
    """

    def __init__(self, index, buffer, parameters, is_last):
        self._index = index
        self._buffer = buffer
        self._parameters = list(parameters)
        self._is_last = is_last

    def index(self) -> int:
        """The bucket's position (0: the first bucket all-reduced in a step)."""
        return self._index

    def buffer(self):
        """The bucket's gradients, flattened into one 1-D tensor."""
        return self._buffer

    def set_buffer(self, buffer) -> None:
        """Replace the flat tensor (a hook that compresses in place)."""
        self._buffer = buffer

    def gradients(self) -> list:
        """Each parameter's gradient, a view into :meth:`buffer`."""
        out, offset = [], 0
        for p in self._parameters:
            out.append(self._buffer[offset:offset + p.numel()].view(p.shape))
            offset += p.numel()
        return out

    def parameters(self) -> list:
        """The parameters whose gradients the bucket holds."""
        return list(self._parameters)

    def is_last(self) -> bool:
        """Whether this is the last bucket of the step."""
        return self._is_last


class DistributedDataParallel(Module, Joinable):
    """Wrap ``module`` so that ``backward()`` averages gradients over the process group.

    At construction the parameters and buffers of rank 0 are broadcast to every rank.
    Parameters are grouped in buckets of about ``bucket_cap_mb`` (in reverse order of
    registration, roughly the order their gradients arrive); each bucket's all-reduce is
    started, asynchronously, the moment its last gradient is accumulated, and the pass
    waits for them at its end.

    Parameters
    ----------
    module : Module
    broadcast_buffers : bool
        Copy rank 0's buffers (e.g. BatchNorm statistics) to all ranks at each forward.
    process_group : optional
        A group from :func:`torcia.distributed.new_group`; the default group when None.
    bucket_cap_mb : float
    find_unused_parameters : bool
        Walk the graph after forward and count parameters it does not reach as ready
        (with a zero gradient); without it, an unused parameter raises at the end of
        backward, naming it.

    Examples
    --------
    Inside a script launched with ``torcia-run --nproc-per-node 2``::

        dist.init_process_group("mpi")
        model = DistributedDataParallel(torcia.nn.Linear(4, 2))
        model(x).sum().backward()       # gradients now averaged over both ranks

    Run in one process:

    >>> import torcia
    >>> import torcia.distributed as dist
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> model = dist.DistributedDataParallel(torcia.nn.Linear(2, 1))
    >>> model(torcia.ones(3, 2)).sum().backward()
    >>> model.module.weight.grad.shape
    torcia.Size([1, 2])
    >>> dist.destroy_process_group()
    """

    def __init__(self, module, device_ids=None, output_device=None, dim=0,
                 broadcast_buffers=True, process_group=None, bucket_cap_mb=25,
                 find_unused_parameters=False, gradient_as_bucket_view=False,
                 static_graph=False):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel expects an nn.Module, got "
                            f"{type(module).__name__}")
        self.module = module
        self.process_group = process_group
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.require_backward_grad_sync = True
        self._pg = C._pg(process_group)
        self._sync_from_rank0()
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        self._buckets = self._make_buckets(named, bucket_cap_mb * 1024 * 1024)
        self._bucket_of = {}
        # strong references: the autograd engine caches accumulators only weakly
        self._accumulators = []
        for b, bucket in enumerate(self._buckets):
            for p in bucket.params:
                self._bucket_of[id(p)] = b
                acc = accumulator_of(p)
                acc.register_hook(self._grad_ready)
                self._accumulators.append(acc)
        self._callback_queued = False
        self._comm_hook = None
        self._comm_state = None
        self._join_config = None
        self._divide_by_initial_world_size = True
        self._active_ranks = self._pg.size

    # ----- setup ----------------------------------------------------------------------
    def _sync_from_rank0(self):
        if self._pg.size == 1:
            return
        with torcia.no_grad():
            for t in list(self.module.parameters()) + list(self.module.buffers()):
                C.broadcast(t, src=self._global(0), group=self.process_group)

    def _global(self, group_rank):
        return group_rank if self.process_group is None else self.process_group.ranks[group_rank]

    @staticmethod
    def _make_buckets(named, cap_bytes):
        buckets = []
        params, names, size, dtype = [], [], 0, None
        for name, p in reversed(named):
            if params and (size + p.nbytes > cap_bytes or p.dtype is not dtype):
                buckets.append(_Bucket(params, names))
                params, names, size = [], [], 0
            params.append(p)
            names.append(name)
            size += p.nbytes
            dtype = p.dtype
        if params:
            buckets.append(_Bucket(params, names))
        return buckets

    # ----- forward and backward ---------------------------------------------------------
    def forward(self, *inputs, **kwargs):
        if self._join_config is not None and self._join_config.enable:
            # matched, on ranks that ran out of inputs, by Join's loop
            self._active_ranks = Join.notify_join_context(self) or self._pg.size
        if self.broadcast_buffers and self._pg.size > 1:
            with torcia.no_grad():
                for buf in self.module.buffers():
                    C.broadcast(buf, src=self._global(0), group=self.process_group)
        out = self.module(*inputs, **kwargs)
        if torcia.is_grad_enabled() and self.require_backward_grad_sync:
            self._prepare(out)
        return out

    def _prepare(self, out):
        for bucket in self._buckets:
            bucket.ready = set()
            bucket.work = None
            bucket.flat = None
        self._callback_queued = False
        if self.find_unused_parameters:
            reached = _reached_accumulators(out)
            for acc in self._accumulators:
                if id(acc) not in reached:
                    self._mark(acc.variable, launch=False)

    def _grad_ready(self, param):
        if not self.require_backward_grad_sync:
            return
        if not self._callback_queued:
            engine.queue_callback(self._finish)
            self._callback_queued = True
        self._mark(param, launch=True)

    def _mark(self, param, launch):
        bucket = self._buckets[self._bucket_of[id(param)]]
        bucket.ready.add(id(param))
        # under Join every bucket starts at the end, in order, as the joined ranks shadow
        joining = self._join_config is not None and self._join_config.enable
        if launch and not joining and len(bucket.ready) == len(bucket.params):
            self._launch(bucket)

    def _launch(self, bucket, zeros=False):
        xp = self._pg.xp
        parts = []
        for p in bucket.params:
            g = None if zeros else p.grad
            data = p.__torcia_data__
            parts.append(xp.zeros(data.size, dtype=data.dtype) if g is None
                         else xp.ascontiguousarray(g.__torcia_data__).reshape(-1))
        bucket.flat = xp.concatenate(parts)
        if self._comm_hook is None:
            bucket.work = self._pg.allreduce(bucket.flat, ReduceOp.SUM)
            return
        index = self._buckets.index(bucket)
        grads = GradBucket(index, wrap(bucket.flat, bucket.params[0].device),
                           bucket.params, index == len(self._buckets) - 1)
        bucket.future = self._comm_hook(self._comm_state, grads)

    def _reduced(self, bucket):
        """The bucket's flat array once its reduction is done: the hook's result as it
        is, or the all-reduced sum divided by the ranks it averages over."""
        if bucket.future is not None:
            result = bucket.future.wait()
            bucket.future = None
            return result.__torcia_data__.reshape(-1)
        bucket.work.wait()
        bucket.work = None
        bucket.flat /= self._divisor()
        return bucket.flat

    def _divisor(self) -> int:
        config = self._join_config
        if config is not None and config.enable and not self._divide_by_initial_world_size:
            return self._active_ranks
        return self._pg.size

    def _finish(self):
        self._callback_queued = False
        for bucket in self._buckets:
            if bucket.work is None and bucket.future is None:
                missing = [n for n, p in zip(bucket.names, bucket.params)
                           if id(p) not in bucket.ready]
                if missing:
                    raise RuntimeError(
                        "Expected to have finished reduction in the prior iteration before "
                        "starting a new one. This error indicates that your module has "
                        "parameters that were not used in producing loss. You can enable "
                        "unused parameter detection by passing the keyword argument "
                        "`find_unused_parameters=True` to DistributedDataParallel. "
                        f"Parameters which did not receive grad for rank {self._pg.rank}: "
                        + ", ".join(missing)
                    )
                self._launch(bucket)
        for bucket in self._buckets:
            flat = self._reduced(bucket)
            offset = 0
            for p in bucket.params:
                n = p.__torcia_data__.size
                avg = flat[offset:offset + n].reshape(p.__torcia_data__.shape)
                offset += n
                if p.grad is None:
                    p.grad = wrap(avg.copy(), p.device)
                else:
                    p.grad.__torcia_data__[...] = avg
                    bump_version(p.grad)
            bucket.flat = None

    def _shadow_backward(self):
        """On a rank that ran out of inputs (Join): the reductions of a backward pass, on
        zeros, matching those of the ranks still training."""
        for bucket in self._buckets:
            self._launch(bucket, zeros=True)
        for bucket in self._buckets:
            self._reduced(bucket)
            bucket.flat = None

    # ----- communication hooks ----------------------------------------------------------
    def register_comm_hook(self, state, hook) -> None:
        """Reduce gradient buckets with ``hook(state, bucket)`` instead of the averaging
        all-reduce: the hook gets a :class:`GradBucket` and returns a
        :class:`torcia.futures.Future` of the bucket's new (averaged) flat gradients.
        Hooks: :mod:`torcia.distributed.algorithms.ddp_comm_hooks`.

        Examples
        --------
        >>> import torcia
        >>> import torcia.distributed as dist
        >>> from torcia.distributed.algorithms.ddp_comm_hooks import default_hooks
        >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
        >>> model = dist.DistributedDataParallel(torcia.nn.Linear(2, 1))
        >>> model.register_comm_hook(None, default_hooks.fp16_compress_hook)
        >>> model(torcia.ones(3, 2)).sum().backward()
        >>> model.module.weight.grad
        tensor([[3., 3.]])
        >>> dist.destroy_process_group()
        """
        if self._comm_hook is not None:
            raise RuntimeError("register_comm_hook can only be called once.")
        if not callable(hook):
            raise TypeError(f"hook must be callable, got {type(hook).__name__}")
        self._comm_hook = hook
        self._comm_state = state

    # ----- Join -------------------------------------------------------------------------
    def join(self, divide_by_initial_world_size: bool = True, enable: bool = True,
             throw_on_early_termination: bool = False):
        """A context manager for inputs of different lengths on different ranks: a rank
        that runs out keeps answering the others' collectives (with zero gradients)
        until every rank is done; then every rank has the parameters of the last one
        to finish. Gradients are averaged over all ranks
        (``divide_by_initial_world_size``) or over those still training.

        Examples
        --------
        Rank r trains on 5 + r batches::

            with model.join():
                for batch in loader:       # of a different length on each rank
                    model(batch).sum().backward()
                    opt.step(); opt.zero_grad()

        In one process:

        >>> import torcia
        >>> import torcia.distributed as dist
        >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
        >>> model = dist.DistributedDataParallel(torcia.nn.Linear(2, 1))
        >>> with model.join():
        ...     model(torcia.ones(1, 2)).sum().backward()
        >>> dist.destroy_process_group()
        """
        return Join([self], enable, throw_on_early_termination,
                    divide_by_initial_world_size=divide_by_initial_world_size)

    def join_hook(self, **kwargs):
        """The hook :class:`~torcia.distributed.algorithms.join.Join` runs for this module
        once this rank has run out of inputs."""
        return _DDPJoinHook(self, kwargs.get("divide_by_initial_world_size", True))

    @property
    def join_device(self):
        return self.module_device

    @property
    def module_device(self):
        first = next(iter(self.module.parameters()), None)
        return first.device if first is not None else torcia.device("cpu")

    @property
    def join_process_group(self):
        return self.process_group

    @contextlib.contextmanager
    def no_sync(self):
        """Inside, backward accumulates gradients locally without communicating; the
        first backward after it averages the accumulated gradients."""
        previous = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = previous


class _DDPJoinHook(JoinHook):
    """What a DistributedDataParallel does on a rank out of inputs: each round, a
    backward pass's reductions on zeros (and the buffers' broadcast of a forward); at the
    end, every rank takes the parameters of the last rank to finish."""

    def __init__(self, ddp, divide_by_initial_world_size):
        self.ddp = ddp
        ddp._divide_by_initial_world_size = divide_by_initial_world_size

    def main_hook(self):
        ddp = self.ddp
        if ddp.broadcast_buffers and ddp._pg.size > 1:
            with torcia.no_grad():
                for buf in ddp.module.buffers():
                    C.broadcast(buf, src=ddp._global(0), group=ddp.process_group)
        ddp._shadow_backward()

    def post_hook(self, is_last_joiner: bool):
        ddp = self.ddp
        last = torcia.tensor([ddp._pg.rank if is_last_joiner else -1])
        C.all_reduce(last, ReduceOp.MAX, ddp.process_group)
        with torcia.no_grad():
            for t in list(ddp.module.parameters()) + list(ddp.module.buffers()):
                C.broadcast(t, src=ddp._global(int(last.item())), group=ddp.process_group)


def _reached_accumulators(out) -> set:
    """ids of the AccumulateGrad nodes reachable from the tensors in ``out``."""
    stack = [t.grad_fn for t in _tensors(out) if t.grad_fn is not None]
    seen = set()
    reached = set()
    for t in _tensors(out):
        if t.grad_fn is None and t.requires_grad:
            reached.add(id(accumulator_of(t)))
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, AccumulateGrad):
            reached.add(id(node))
            continue
        for edge in node.next_functions:
            if edge is not None and edge[0] is not None:
                stack.append(edge[0])
    return reached


def _tensors(obj):
    if isinstance(obj, torcia.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            yield from _tensors(x)
    elif isinstance(obj, dict):
        for x in obj.values():
            yield from _tensors(x)


# ---------------------------------------------------------------------------------------
# the all-reduce that SyncBatchNorm's statistics travel through
# ---------------------------------------------------------------------------------------


class _AllReduceSum(torcia.autograd.Function):
    """A sum over the group's processes; its gradient is the sum of the processes'
    gradients (each process's loss depends on every process's input)."""

    @staticmethod
    def forward(ctx, tensor, group):
        ctx.group = group
        out = tensor.clone()
        C.all_reduce(out, ReduceOp.SUM, group)
        return out

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        C.all_reduce(grad, ReduceOp.SUM, ctx.group)
        return grad, None


def _sync_batchnorm_reducer(group):
    """What SyncBatchNorm synchronises with: None unless a group of several processes is
    initialised (and this process is in it)."""
    if not C.is_initialized() or group is C.GroupMember.NON_GROUP_MEMBER:
        return None
    if C.get_world_size(group) == 1:
        return None
    return lambda tensor: _AllReduceSum.apply(tensor, group)


torcia.nn.SyncBatchNorm.register_reducer(_sync_batchnorm_reducer)
