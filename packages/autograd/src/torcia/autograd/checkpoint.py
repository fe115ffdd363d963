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

import torcia
from torcia.autograd.function import Function
from torcia.autograd.graph import saved_tensors_hooks

__all__ = ["CheckpointError", "checkpoint", "checkpoint_sequential", "noop_context_fn"]


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

    def __init__(self, fn, args, kwargs, rng_state, context_fn, check):
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.rng_state = rng_state
        self.context_fn = context_fn
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

        _, recompute_ctx = self.context_fn()
        with _rng_restored(self.rng_state), torcia.enable_grad(), recompute_ctx, \
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


class _CheckpointFunction(Function):
    """The reentrant variant: forward without a graph, backward reruns and backpropagates."""

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
        return _CheckpointFunction.apply(function, preserve_rng_state, *args)
    rng_state = torcia.random.get_rng_state() if preserve_rng_state else None
    frame = _Frame(function, args, kwargs, rng_state, context_fn,
                   determinism_check == "default")
    forward_ctx, _ = context_fn()
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
