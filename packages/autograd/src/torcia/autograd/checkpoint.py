"""Activation checkpointing, served as ``torcia.utils.checkpoint`` (PyTorch's name).

A checkpointed function keeps none of its intermediate results for backward: backward runs
it again (with the random state it first saw, so dropout draws the same mask) and uses the
recomputed values. Memory falls from the activations of every layer to those of one
segment, for about one extra forward pass.

Two implementations, as in PyTorch. The default (``use_reentrant=False``) packs every
tensor the function saves through :class:`torcia.autograd.graph.saved_tensors_hooks` as a
placeholder and recomputes on the first unpack; it supports ``torcia.autograd.grad`` and
inputs that do not require grad. ``use_reentrant=True`` wraps the function in a custom
:class:`~torcia.autograd.Function` whose backward reruns it and calls backward inside.
"""

from __future__ import annotations

import contextlib
import enum
import threading
import warnings

import torcia
from torcia.autograd.function import Function
from torcia.autograd.graph import saved_tensors_hooks
from torcia.library import DispatchMode, ModeOrder

__all__ = [
    "CheckpointError", "CheckpointFunction", "CheckpointPolicy", "DefaultDeviceType",
    "GraphExecGroup", "SAC_IGNORED_OPS", "SelectiveCheckpointContext",
    "check_backward_validity", "checkpoint", "checkpoint_sequential",
    "create_selective_checkpoint_contexts", "detach_variable", "get_device_states",
    "noop_context_fn", "set_checkpoint_debug_enabled", "set_checkpoint_early_stop",
    "set_device_states",
]


class CheckpointError(RuntimeError):
    """The recomputation did not reproduce what the first forward pass saved.

    Examples
    --------
    >>> import torcia
    >>> issubclass(torcia.autograd.checkpoint.CheckpointError, RuntimeError)
    True
    """


def noop_context_fn():
    """The default ``context_fn``: no context around either pass.

    Examples
    --------
    >>> import torcia
    >>> from torcia.autograd.checkpoint import checkpoint, noop_context_fn
    >>> x = torcia.tensor([1.0, 2.0], requires_grad=True)
    >>> y = checkpoint(torcia.sin, x, use_reentrant=False, context_fn=noop_context_fn)
    >>> y.sum().backward()
    >>> x.grad
    tensor([ 0.5403, -0.4161])
    """
    return contextlib.nullcontext(), contextlib.nullcontext()


class _Recomputing(saved_tensors_hooks):
    # the placeholder stands for a value recomputed later, so its version does not matter
    _check_version = False


class _Frame:
    """What one checkpointed call shares between its pack and unpack hooks."""

    def __init__(self, fn, args, kwargs, rng_state, recompute_ctx, check):
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.rng_state = rng_state
        self.recompute_ctx = recompute_ctx
        self.check = check
        self.metadata = []
        self.recomputed = None

    def pack(self, t):
        self.metadata.append((tuple(t.shape), t.dtype, t.device))
        return len(self.metadata) - 1

    def unpack(self, index):
        if self.recomputed is None:
            self._recompute()
        return self.recomputed[index]

    def _recompute(self):
        values = []

        def keep(t):
            # the alias itself is the packed value: an in-place op later in the function
            # then gives it a copy of the old values (see graph.snapshot_packed)
            values.append(t.detach())
            return values[-1]

        with _rng_restored(self.rng_state), torcia.enable_grad(), self.recompute_ctx, \
                _Recomputing(keep, lambda v: v):
            self.fn(*self.args, **self.kwargs)
        if len(values) < len(self.metadata):
            raise CheckpointError(
                "torcia.utils.checkpoint: A different number of tensors was saved during the "
                f"original forward and recomputation.\nNumber of tensors saved during forward: "
                f"{len(self.metadata)}\nNumber of tensors saved during recomputation: "
                f"{len(values)}")
        if self.check:
            got = [(tuple(v.shape), v.dtype, v.device) for v in values]
            bad = [i for i, meta in enumerate(self.metadata) if meta != got[i]]
            if bad:
                lines = "\n".join(f"tensor at position {i}:\nsaved metadata: "
                                  f"{self.metadata[i]}\nrecomputed metadata: {got[i]}"
                                  for i in bad)
                raise CheckpointError(
                    "torcia.utils.checkpoint: Recomputed values for the following tensors "
                    f"have different metadata than during the forward pass.\n{lines}")
        self.recomputed = values


@contextlib.contextmanager
def _rng_restored(state):
    """Run the block from ``state`` of the default generator, then put the current one back."""
    if state is None:
        yield
        return
    current = torcia.random.get_rng_state()
    torcia.random.set_rng_state(state)
    try:
        yield
    finally:
        torcia.random.set_rng_state(current)


class CheckpointFunction(Function):
    """The reentrant variant (``use_reentrant=True``): forward without a graph, backward
    reruns the function and backpropagates through it.

    Examples
    --------
    >>> import torcia
    >>> from torcia.utils.checkpoint import CheckpointFunction
    >>> x = torcia.tensor([1.0, 2.0], requires_grad=True)
    >>> CheckpointFunction.apply(lambda t: t * t, True, x).sum().backward()
    >>> x.grad
    tensor([2., 4.])
    """

    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, *args):
        ctx.run_function = run_function
        ctx.rng_state = torcia.random.get_rng_state() if preserve_rng_state else None
        ctx.tensor_slots = [i for i, a in enumerate(args) if isinstance(a, torcia.Tensor)]
        ctx.inputs = [None if isinstance(a, torcia.Tensor) else a for a in args]
        ctx.save_for_backward(*(args[i] for i in ctx.tensor_slots))
        with torcia.no_grad():
            return run_function(*args)

    @staticmethod
    def backward(ctx, *grads):
        inputs = list(ctx.inputs)
        for i, t in zip(ctx.tensor_slots, ctx.saved_tensors):
            inputs[i] = t.detach().requires_grad_(t.requires_grad)
        with _rng_restored(ctx.rng_state), torcia.enable_grad():
            outputs = ctx.run_function(*inputs)
        if isinstance(outputs, torcia.Tensor):
            outputs = (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, grads)
                 if isinstance(o, torcia.Tensor) and o.requires_grad and g is not None]
        if not pairs:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is "
                               "not necessary")
        torcia.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
        return (None, None) + tuple(a.grad if isinstance(a, torcia.Tensor) else None
                                    for a in inputs)


def checkpoint(function, *args, use_reentrant=None, context_fn=noop_context_fn,
               determinism_check="default", debug=False, preserve_rng_state=True, **kwargs):
    """Run ``function(*args, **kwargs)`` without keeping its intermediate results; backward
    recomputes them.

    Parameters
    ----------
    function : callable
        The part of the model to checkpoint. Running it twice must do the same thing.
    *args
        Its inputs.
    use_reentrant : bool, optional
        ``False`` (the default here; PyTorch recommends it) packs saved tensors as
        placeholders; ``True`` uses the older custom-Function variant, which needs an
        input that requires grad and supports neither keyword arguments nor
        ``torcia.autograd.grad``.
    context_fn : callable
        Returns two context managers: one around the first pass, one around the
        recomputation (non-reentrant only).
    determinism_check : {"default", "none"}
        ``"default"`` raises :class:`CheckpointError` when the recomputation saves tensors
        of another shape, dtype or device than the first pass did.
    debug : bool
        Accepted for PyTorch compatibility; the error messages are the same either way.
    preserve_rng_state : bool
        Replay the random state of the first pass during the recomputation, so random ops
        (dropout) draw the same numbers (default ``True``).
    **kwargs
        Keyword arguments for ``function`` (non-reentrant only).

    Returns
    -------
    object
        What ``function`` returns.

    Examples
    --------
    >>> import torcia
    >>> from torcia.utils.checkpoint import checkpoint
    >>> x = torcia.tensor([1.0, 2.0], requires_grad=True)
    >>> y = checkpoint(lambda t: (t.sin() * t).sum(), x)
    >>> y.backward()
    >>> torcia.allclose(x.grad, x.detach().sin() + x.detach() * x.detach().cos())
    True
    """
    if determinism_check not in ("default", "none"):
        raise ValueError("determinism_check should be one of ['default', 'none'], but got "
                         f"{determinism_check}")
    if use_reentrant:
        if kwargs:
            raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
        if context_fn is not noop_context_fn:
            raise ValueError("Passing context_fn or debug is only supported when "
                             "use_reentrant=False.")
        return CheckpointFunction.apply(function, preserve_rng_state, *args)
    rng_state = torcia.random.get_rng_state() if preserve_rng_state else None
    # one call: the two contexts of selective checkpointing share what the first saves
    forward_ctx, recompute_ctx = context_fn()
    frame = _Frame(function, args, kwargs, rng_state, recompute_ctx,
                   determinism_check == "default")
    with forward_ctx, _Recomputing(frame.pack, frame.unpack):
        return function(*args, **kwargs)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Run a sequence of modules (or functions) in ``segments`` checkpointed chunks; the
    last chunk runs normally, since backward needs its results at once.

    Parameters
    ----------
    functions : Sequential or list of callables
        Applied in order, each to the previous one's output.
    segments : int
        How many chunks to split ``functions`` into.
    input : Tensor
        The input of the first function.
    use_reentrant : bool, optional
        As in :func:`checkpoint`.
    **kwargs
        ``preserve_rng_state`` (default ``True``).

    Returns
    -------
    Tensor
        The output of the last function.

    Examples
    --------
    >>> import torcia
    >>> from torcia.utils.checkpoint import checkpoint_sequential
    >>> model = torcia.nn.Sequential(*[torcia.nn.Linear(4, 4) for _ in range(4)])
    >>> x = torcia.randn(2, 4, requires_grad=True)
    >>> checkpoint_sequential(model, 2, x).shape
    torcia.Size([2, 4])
    """
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    if hasattr(functions, "children"):
        functions = list(functions.children())
    functions = list(functions)
    if not isinstance(segments, int) or segments < 1:
        raise ValueError(f"segments must be a positive integer, got {segments}")

    def run(start, end):
        def forward(x):
            for j in range(start, end + 1):
                x = functions[j](x)
            return x
        return forward

    size = len(functions) // segments
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant,
                           preserve_rng_state=preserve)
    return run(end + 1, len(functions) - 1)(input)


# ---------------------------------------------------------------------------------------
# selective checkpointing: keep the results of some ops, recompute the others
# ---------------------------------------------------------------------------------------


class CheckpointPolicy(enum.Enum):
    """What selective checkpointing does with an op's result: keep it from the forward
    pass (SAVE), or compute it again in the recomputation (RECOMPUTE); the MUST variants
    are the user's, the PREFER ones a default a compiler may override. torcia's tensors
    live where their device keeps them, so CPU_OFFLOAD saves like SAVE.

    Examples
    --------
    >>> from torcia.utils.checkpoint import CheckpointPolicy
    >>> CheckpointPolicy.MUST_SAVE.value, CheckpointPolicy.PREFER_RECOMPUTE.value
    (0, 3)
    """

    MUST_SAVE = 0
    PREFER_SAVE = 1
    MUST_RECOMPUTE = 2
    PREFER_RECOMPUTE = 3
    MUST_CPU_OFFLOAD = 4
    PREFER_CPU_OFFLOAD = 5


_SAVING = (CheckpointPolicy.MUST_SAVE, CheckpointPolicy.PREFER_SAVE,
           CheckpointPolicy.MUST_CPU_OFFLOAD, CheckpointPolicy.PREFER_CPU_OFFLOAD)

#: ops whose results are metadata or aliases: never cached, whatever the policy says
SAC_IGNORED_OPS = frozenset({"detach_view", "view", "reshape", "getitem", "expand",
                             "contiguous"})


class SelectiveCheckpointContext:
    """What a policy function is told: whether the op runs in the recomputation.

    Examples
    --------
    >>> from torcia.utils.checkpoint import SelectiveCheckpointContext
    >>> SelectiveCheckpointContext(is_recompute=True).is_recompute
    True
    """

    def __init__(self, *, is_recompute: bool):
        self.is_recompute = is_recompute


def _policy_of(policy_fn_or_list):
    if callable(policy_fn_or_list):
        return policy_fn_or_list
    if isinstance(policy_fn_or_list, (list, tuple, set, frozenset)):
        names = set()
        for op in policy_fn_or_list:
            name = op if isinstance(op, str) else getattr(op, "__name__", None)
            if name is None:
                raise ValueError(f"Expected op names (or torcia functions) in the list, got "
                                 f"{op!r}")
            names.add(name)

        def policy(ctx, op, *args, **kwargs):
            return CheckpointPolicy.MUST_SAVE if op in names else \
                CheckpointPolicy.PREFER_RECOMPUTE
        return policy
    raise TypeError("policy_fn_or_list must be either a function or a list of ops.")


class _CachingMode(DispatchMode):
    """During the first pass, keeps the results of the ops the policy saves; during the
    recomputation, hands them back instead of running those ops again."""

    order = ModeOrder.CHECKPOINT

    def __init__(self, policy, cache, recompute, allow_mutation):
        self.policy = policy
        self.cache = cache
        self.recompute = recompute
        self.allow_mutation = allow_mutation
        self.ctx = SelectiveCheckpointContext(is_recompute=recompute)

    def around_kernel(self, op, kernel, device):
        if op in SAC_IGNORED_OPS:
            return kernel
        decision = self.policy(self.ctx, op)
        if not isinstance(decision, CheckpointPolicy):
            raise TypeError(f"policy_fn must return a CheckpointPolicy, got {decision!r}")
        if decision not in _SAVING:
            return kernel
        queue = self.cache.setdefault(op, [])
        if self.recompute:
            def cached(*args, **params):
                if not queue:
                    raise CheckpointError(f"torcia.utils.checkpoint: the recomputation ran "
                                          f"{op!r} more often than the forward pass saved it")
                out, copy = queue.pop(0)
                if copy is not None and not _same(out, copy):
                    raise CheckpointError(f"torcia.utils.checkpoint: the saved result of "
                                          f"{op!r} was changed in place after it was saved; "
                                          "pass allow_cache_entry_mutation=True to allow it")
                return out
            return cached

        def saving(*args, **params):
            out = kernel(*args, **params)
            queue.append((out, None if self.allow_mutation else _copy(out)))
            return out
        return saving


def _copy(out):
    return tuple(o.copy() for o in out) if isinstance(out, tuple) else out.copy()


def _same(out, copy):
    pairs = zip(out, copy) if isinstance(out, tuple) else [(out, copy)]
    return all((a == b).all() for a, b in pairs)


def create_selective_checkpoint_contexts(policy_fn_or_list, allow_cache_entry_mutation=False):
    """The two contexts (``context_fn`` of :func:`checkpoint`) of selective checkpointing:
    the ops the policy saves keep their results from the forward pass, and the
    recomputation reuses them (only the cheap ops run twice).

    Parameters
    ----------
    policy_fn_or_list : callable or list
        ``policy_fn(ctx, op, *args, **kwargs) -> CheckpointPolicy``, ``op`` being torcia's
        op name (``"mm"``, ``"matmul"``, ``"conv"``...), or a list of the ops to save
        (names or torcia functions: ``[torcia.mm]``).
    allow_cache_entry_mutation : bool
        Allow a saved result to be changed in place before it is reused (otherwise that
        is an error).

    Examples
    --------
    >>> import functools
    >>> import torcia
    >>> from torcia.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts
    >>> context_fn = functools.partial(create_selective_checkpoint_contexts, ["matmul"])
    >>> w = torcia.randn(4, 4, requires_grad=True)
    >>> x = torcia.randn(2, 4)
    >>> y = checkpoint(lambda x: (x @ w).relu().sum(), x, use_reentrant=False,
    ...                context_fn=context_fn)
    >>> y.backward()
    >>> w.grad.shape
    torcia.Size([4, 4])
    """
    policy = _policy_of(policy_fn_or_list)
    cache: dict = {}
    return (_CachingMode(policy, cache, False, allow_cache_entry_mutation),
            _CachingMode(policy, cache, True, allow_cache_entry_mutation))


# ---------------------------------------------------------------------------------------
# PyTorch's helpers of the reentrant variant and its switches
# ---------------------------------------------------------------------------------------


def check_backward_validity(inputs) -> None:
    """Warn when no tensor of ``inputs`` requires grad (the checkpoint would give no
    gradient).

    Examples
    --------
    >>> import warnings
    >>> import torcia
    >>> from torcia.utils.checkpoint import check_backward_validity
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     check_backward_validity([torcia.ones(1)])
    >>> str(caught[0].message)
    'None of the inputs have requires_grad=True. Gradients will be None'
    """
    if not any(isinstance(x, torcia.Tensor) and x.requires_grad for x in inputs):
        warnings.warn("None of the inputs have requires_grad=True. Gradients will be None",
                      stacklevel=2)


def detach_variable(inputs: tuple) -> tuple:
    """The tensors of the tuple ``inputs``, detached, keeping ``requires_grad``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.utils.checkpoint import detach_variable
    >>> x = torcia.ones(2, requires_grad=True) * 2
    >>> (d,) = detach_variable((x,))
    >>> d.requires_grad, d.grad_fn is None
    (True, True)
    """
    if not isinstance(inputs, tuple):
        raise RuntimeError("Only tuple of tensors is supported. Got Unsupported input type: "
                           f"{type(inputs).__name__}")
    out = []
    for x in inputs:
        if not isinstance(x, torcia.Tensor):
            out.append(x)
            continue
        d = x.detach()
        d.requires_grad = x.requires_grad
        out.append(d)
    return tuple(out)


class DefaultDeviceType:
    """The device type whose random state checkpointing preserves besides the CPU's
    (``"cuda"`` by default, as in PyTorch).

    Examples
    --------
    >>> from torcia.utils.checkpoint import DefaultDeviceType
    >>> DefaultDeviceType.get_device_type()
    'cuda'
    """

    _default_device_type = "cuda"

    @staticmethod
    def set_device_type(device: str = "cuda") -> None:
        DefaultDeviceType._default_device_type = device

    @staticmethod
    def get_device_type() -> str:
        return DefaultDeviceType._default_device_type


def get_device_states(*args) -> tuple:
    """The devices (indices) of the accelerator tensors among ``args`` and their random
    states: empty lists for CPU tensors, whose state is the default generator's.

    Examples
    --------
    >>> import torcia
    >>> from torcia.utils.checkpoint import get_device_states
    >>> get_device_states(torcia.ones(1))
    ([], [])
    """
    devices = sorted({x.device.index or 0 for x in args if isinstance(x, torcia.Tensor)
                      and x.device.type not in ("cpu", "meta")})
    module = getattr(torcia, DefaultDeviceType.get_device_type(), None)
    states = [module.get_rng_state(d) for d in devices] if devices else []
    return devices, states


def set_device_states(devices, states, *, device_type=None) -> None:
    """Restore random states that :func:`get_device_states` returned."""
    module = getattr(torcia, device_type or DefaultDeviceType.get_device_type())
    for device, state in zip(devices, states):
        module.set_rng_state(state, device)


class _Switch(threading.local):
    early_stop = True
    debug = None


_SWITCHES = _Switch()


@contextlib.contextmanager
def set_checkpoint_early_stop(enable: bool):
    """PyTorch stops a recomputation once it has every tensor backward needs; torcia
    recomputes the whole function either way (the results are the same). The switch is
    kept for code that sets it.

    Examples
    --------
    >>> from torcia.utils.checkpoint import set_checkpoint_early_stop
    >>> with set_checkpoint_early_stop(False):
    ...     pass
    """
    saved = _SWITCHES.early_stop
    _SWITCHES.early_stop = enable
    try:
        yield
    finally:
        _SWITCHES.early_stop = saved


@contextlib.contextmanager
def set_checkpoint_debug_enabled(enabled):
    """PyTorch's switch for the ``debug`` output of checkpoint errors; torcia's errors
    carry the same detail either way.

    Examples
    --------
    >>> from torcia.utils.checkpoint import set_checkpoint_debug_enabled
    >>> with set_checkpoint_debug_enabled(True):
    ...     pass
    """
    saved = _SWITCHES.debug
    _SWITCHES.debug = enabled
    try:
        yield
    finally:
        _SWITCHES.debug = saved


class GraphExecGroup:
    """Backward calls under one instance recompute each checkpointed region at most once:
    torcia's non-reentrant checkpoint keeps a region's recomputed values for all the
    backward calls that need them, so this holds with or without the group.

    Examples
    --------
    >>> from torcia.utils.checkpoint import GraphExecGroup
    >>> with GraphExecGroup():
    ...     pass
    """

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

