"""How tensors travel between processes of :mod:`multiprocessing`: through shared memory.

Registered with multiprocessing's pickler (``ForkingPickler``), which every queue, pipe,
pool and process start of the standard library uses: a CPU tensor is moved into shared
memory (``share_memory_()``, in place, as PyTorch does) and what travels is a duplicate of
the segment's file descriptor with the tensor's dtype, shape, strides and offset. The
receiver maps the same memory, so writes on either side are seen by the other. Plain
``pickle`` (``torcia.save``...) is not affected and still copies.
"""

from __future__ import annotations

from multiprocessing.reduction import DupFd, ForkingPickler

from torcia import _shared_memory
from torcia._tensor import Tensor

#: the strategies :func:`torcia.multiprocessing.set_sharing_strategy` accepts
STRATEGIES = frozenset({"file_descriptor"})


def rebuild_tensor(fd, size, dtype, shape, strides, offset, requires_grad):
    segment = _shared_memory.map_segment(fd.detach(), size)
    t = _shared_memory.tensor_in(segment, dtype, shape, strides, offset)
    if requires_grad:
        t.requires_grad_(True)
    return t


def reduce_tensor(t: Tensor):
    if t.requires_grad and t.grad_fn is not None:
        raise RuntimeError(
            "Cowardly refusing to serialize non-leaf tensor which requires_grad, since "
            "autograd does not support crossing process boundaries.  If you just want to "
            "transfer the data, call detach() on the tensor before serializing (e.g., "
            "putting it on the queue).")
    if t.device.type != "cpu":
        raise RuntimeError(f"a {t.device.type} tensor cannot be sent to another process by "
                           "torcia.multiprocessing; send it from the host (.cpu())")
    _shared_memory.share([t])
    segment = _shared_memory.segment_of(t._data)
    arr = t._data
    return (rebuild_tensor,
            (DupFd(segment.fd), len(segment), t.dtype, arr.shape, arr.strides,
             _shared_memory.offset_in(arr, segment), t.requires_grad))


def init_reductions() -> None:
    """Register the tensor reduction with multiprocessing's pickler (once per process;
    registering again replaces it by itself)."""
    ForkingPickler.register(Tensor, reduce_tensor)
