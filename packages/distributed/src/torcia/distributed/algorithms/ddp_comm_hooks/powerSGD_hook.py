"""PowerSGD gradient compression (Vogels et al., NeurIPS 2019) as a DDP communication
hook, as ``torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook``.

A gradient matrix M (n x m; a tensor of more dimensions is viewed as its first dimension
by the rest) is approximated by P Q^T of rank r: P = M Q is all-reduced and
orthonormalised, Q = M^T P is all-reduced, and every rank then holds the same
approximation of the averaged gradient. Moving (n + m) r numbers instead of n m
is the saving. Q is kept from one step to the next (*warm start*), which makes one power
iteration per step enough; what the approximation missed is added back to the next
step's gradient (*error feedback*), so that nothing is lost over time. Vectors, and
matrices that would not shrink by ``min_compression_rate``, are all-reduced as they are.
The first ``start_powerSGD_iter`` steps are plain averaging.
"""

from __future__ import annotations

import math

import numpy as np

import torcia
from torcia.distributed import collectives as C
from torcia.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torcia.futures import Future

__all__ = ["PowerSGDState", "batched_powerSGD_hook", "powerSGD_hook"]


class PowerSGDState:
    """What PowerSGD keeps between steps, and its settings (PyTorch's names).

    Parameters
    ----------
    process_group : process group or None
    matrix_approximation_rank : int
        r: the rank of the approximations (1 or 2 are typical).
    start_powerSGD_iter : int
        Steps of plain averaging first (the first steps' gradients change fast).
    min_compression_rate : float
        Compress a matrix only when n m / ((n + m) r) reaches this.
    use_error_feedback, warm_start : bool
    orthogonalization_epsilon : float
        Added to the norms while orthonormalising (guards against zero columns).
    random_seed : int
        Seeds the initial Q, the same on every rank.
    compression_stats_logging_frequency : int
        Accepted for PyTorch's signature; :meth:`compression_stats` reports on demand.
    batch_tensors_with_same_shape : bool
        Accepted; each matrix is compressed on its own.

    Examples
    --------
    >>> from torcia.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powerSGD
    >>> state = powerSGD.PowerSGDState(None, matrix_approximation_rank=2,
    ...                                start_powerSGD_iter=10)
    >>> state.iter, state.matrix_approximation_rank
    (0, 2)
    """

    def __init__(self, process_group, matrix_approximation_rank=1, start_powerSGD_iter=1_000,
                 min_compression_rate=2, use_error_feedback=True, warm_start=True,
                 orthogonalization_epsilon=0, random_seed=0,
                 compression_stats_logging_frequency=10_000,
                 batch_tensors_with_same_shape: bool = False):
        if matrix_approximation_rank < 1:
            raise ValueError("matrix_approximation_rank must be at least 1")
        self.process_group = process_group
        self.matrix_approximation_rank = matrix_approximation_rank
        self.start_powerSGD_iter = start_powerSGD_iter
        self.min_compression_rate = min_compression_rate
        self.use_error_feedback = use_error_feedback
        self.warm_start = warm_start
        self.orthogonalization_epsilon = orthogonalization_epsilon
        self.random_seed = random_seed
        self.rng = np.random.RandomState(random_seed)
        self.compression_stats_logging_frequency = compression_stats_logging_frequency
        self.batch_tensors_with_same_shape = batch_tensors_with_same_shape
        self.error_dict = {}
        self.p_memory_dict = {}
        self.q_memory_dict = {}
        self.iter = 0
        self.total_numel_before_compression = 0
        self.total_numel_after_compression = 0

    def maybe_increase_iter(self, bucket) -> None:
        """Count a step when the step's last bucket is reduced."""
        if bucket.is_last():
            self.iter += 1

    def compression_stats(self) -> tuple:
        """(compression rate, numbers before, numbers after) over all compressed steps."""
        after = self.total_numel_after_compression
        rate = self.total_numel_before_compression / after if after else 0
        return rate, self.total_numel_before_compression, after

    def __getstate__(self):
        state = dict(vars(self))
        state.pop("process_group")
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.process_group = None


def _orthonormalize(out: np.ndarray, eps: float) -> None:
    """Gram-Schmidt on the columns of ``out``, in place (in float64: the columns of a
    low-precision product are nearly dependent often enough)."""
    matrix = out.astype(np.float64)
    for i in range(matrix.shape[1]):
        col = matrix[:, i]
        norm = np.linalg.norm(col)
        col /= norm + eps if eps else (norm if norm > 0 else 1.0)
        if i + 1 < matrix.shape[1]:
            rest = matrix[:, i + 1:]
            rest -= np.outer(col, col @ rest)
    out[...] = matrix


def _all_reduce_array(arr: np.ndarray, group) -> None:
    t = torcia.from_numpy(arr)
    C.all_reduce(t, group=group)


def _done(value) -> Future:
    future = Future()
    future.set_result(value)
    return future


def _compress(state, bucket, matrices):
    """Replace each (index, n, m) slice of the bucket's buffer by its rank-r average."""
    group, rank = state.process_group, state.matrix_approximation_rank
    world = C.get_world_size(group)
    flat = bucket.buffer().__torcia_data__
    index = bucket.index()
    ps, qs = [], []
    for k, (start, n, m) in enumerate(matrices):
        r = min(n, m, rank)
        key = (index, k)
        q = state.q_memory_dict.get(key) if state.warm_start else None
        if q is None or q.shape != (m, r):
            q = state.rng.standard_normal((m, r)).astype(flat.dtype)
            _orthonormalize(q, state.orthogonalization_epsilon)
        ps.append(flat[start:start + n * m].reshape(n, m) @ q)
        qs.append(q)
        state.total_numel_before_compression += n * m
        state.total_numel_after_compression += (n + m) * r
    if ps:
        packed = np.concatenate([p.reshape(-1) for p in ps])
        _all_reduce_array(packed, group)
        offset = 0
        for p in ps:
            p[...] = packed[offset:offset + p.size].reshape(p.shape)
            offset += p.size
            _orthonormalize(p, state.orthogonalization_epsilon)
        for k, (start, n, m) in enumerate(matrices):
            qs[k] = flat[start:start + n * m].reshape(n, m).T @ ps[k]
        packed = np.concatenate([q.reshape(-1) for q in qs])
        _all_reduce_array(packed, group)
        offset = 0
        for k, (start, n, m) in enumerate(matrices):
            q = packed[offset:offset + qs[k].size].reshape(qs[k].shape) / world
            offset += q.size
            flat[start:start + n * m] = (ps[k] @ q.T).reshape(-1)
            if state.warm_start:
                state.q_memory_dict[(index, k)] = q.copy()


def _with_error_feedback(state, bucket, compress):
    buffer = bucket.buffer()
    index = bucket.index()
    if state.use_error_feedback:
        error = state.error_dict.get(index)
        if error is not None and error.shape == buffer.__torcia_data__.shape:
            buffer.__torcia_data__ += error
        before = buffer.__torcia_data__.copy()
    compress()
    if state.use_error_feedback:
        # what this rank's gradient had that the average it got lacks, as PyTorch keeps it
        state.error_dict[index] = before - buffer.__torcia_data__
    state.maybe_increase_iter(bucket)
    return _done(buffer)


def powerSGD_hook(state: PowerSGDState, bucket):
    """The PowerSGD hook: each gradient matrix of the bucket compressed to rank
    ``state.matrix_approximation_rank`` (see the module's documentation).

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> from torcia.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powerSGD
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> model = dist.DistributedDataParallel(torcia.nn.Linear(8, 8, bias=False))
    >>> state = powerSGD.PowerSGDState(None, start_powerSGD_iter=0, min_compression_rate=1)
    >>> model.register_comm_hook(state, powerSGD.powerSGD_hook)
    >>> x = torcia.ones(4, 8)
    >>> model(x).sum().backward()      # the gradient, 4 * ones, is of rank 1: kept exactly
    >>> torcia.allclose(model.module.weight.grad, torcia.full((8, 8), 4.0))
    True
    >>> dist.destroy_process_group()
    """
    if state.iter < state.start_powerSGD_iter:
        state.maybe_increase_iter(bucket)
        return allreduce_hook(state.process_group, bucket)
    world = C.get_world_size(state.process_group)
    buffer = bucket.buffer()

    def compress():
        matrices, plain, start = [], [], 0
        for grad in bucket.gradients():
            numel = grad.numel()
            n = grad.shape[0] if grad.ndim > 1 else 1
            m = numel // max(n, 1)
            r = min(n, m, state.matrix_approximation_rank)
            worth = grad.ndim > 1 and n * m >= state.min_compression_rate * (n + m) * r
            (matrices.append((start, n, m)) if worth else plain.append((start, numel)))
            start += numel
        if plain:
            flat = buffer.__torcia_data__
            packed = np.concatenate([flat[s:s + k] for s, k in plain])
            _all_reduce_array(packed, state.process_group)
            offset = 0
            for s, k in plain:
                flat[s:s + k] = packed[offset:offset + k] / world
                offset += k
        _compress(state, bucket, matrices)

    return _with_error_feedback(state, bucket, compress)


def batched_powerSGD_hook(state: PowerSGDState, bucket):
    """PowerSGD on the whole bucket at once: its flat gradients, zero-padded to a square
    matrix, compressed to rank ``state.matrix_approximation_rank`` (fewer, larger
    products; a coarser approximation than :func:`powerSGD_hook`).

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> from torcia.distributed import GradBucket
    >>> from torcia.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powerSGD
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> state = powerSGD.PowerSGDState(None, start_powerSGD_iter=0)
    >>> bucket = GradBucket(0, torcia.ones(9), [], True)  # a 3 x 3 matrix of rank 1
    >>> torcia.allclose(powerSGD.batched_powerSGD_hook(state, bucket).wait(), torcia.ones(9))
    True
    >>> dist.destroy_process_group()
    """
    if state.iter < state.start_powerSGD_iter:
        state.maybe_increase_iter(bucket)
        return allreduce_hook(state.process_group, bucket)
    buffer = bucket.buffer()
    numel = buffer.numel()
    side = math.ceil(math.sqrt(numel))

    def compress():
        square = np.zeros(side * side, dtype=buffer.__torcia_data__.dtype)
        square[:numel] = buffer.__torcia_data__
        padded = torcia.from_numpy(square)
        inner = type(bucket)(bucket.index(), padded, [], bucket.is_last())
        _compress(state, inner, [(0, side, side)])
        buffer.__torcia_data__[...] = square[:numel]

    return _with_error_feedback(state, bucket, compress)
