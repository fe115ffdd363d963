"""Sparse functions (PyTorch's name for them): ``embedding_bag``, ``one_hot``."""

from __future__ import annotations

import torcia
from torcia.library.functional import embedding


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2,
                  scale_grad_by_freq=False, mode="mean", sparse=False,
                  per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """Sums, means or maxima of bags of embedding rows: ``input`` (B, L) is B bags of L
    indices, or 1-D with ``offsets`` marking where each bag starts; ``per_sample_weights``
    scale the rows (mode "sum"); indices equal to ``padding_idx`` are left out; an empty
    bag gives zeros.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> w = torcia.tensor([[1.0, 0.0], [0.0, 2.0], [4.0, 4.0]])
    >>> F.embedding_bag(torcia.tensor([0, 1, 2]), w, torcia.tensor([0, 2]), mode="sum")
    tensor([[1., 2.],
            [4., 4.]])
    """
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"mode has to be one of sum, mean or max, got {mode}")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. "
                                  f"per_sample_weights is only supported for mode='sum' "
                                  f"(got mode='{mode}'). Please open a feature request on "
                                  "GitHub.")
    dev = weight.device
    # bags and padding as tensors, not NumPy reads of the values: vmap maps them
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is "
                             "treated is a mini-batch of fixed length sequences.")
        bags, length = input.shape
        bag_of = torcia.arange(bags, device=dev).repeat_interleave(length)
        flat = input.reshape(-1)
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.reshape(-1)
    elif input.ndim == 1:
        if offsets is None or offsets.ndim != 1:
            raise ValueError("offsets has to be a 1D Tensor but got None" if offsets is None
                             else f"offsets has to be a 1D Tensor but got {offsets.ndim}D")
        starts = offsets.long()
        if include_last_offset:
            starts = starts[:-1]
        bags = starts.shape[0]
        bag_of = torcia.searchsorted(starts, torcia.arange(input.shape[0], device=dev),
                                     right=True) - 1
        flat = input
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension "
                         f"{input.ndim}")
    rows = embedding(flat, weight, None, max_norm, norm_type, scale_grad_by_freq, sparse)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.unsqueeze(1)
    # the padding rows take no part: the lowest value in a max, zero in a sum, no count
    left_out = None if padding_idx is None else \
        (flat == padding_idx % weight.shape[0]).unsqueeze(1)
    out = torcia.zeros(bags, weight.shape[1], dtype=weight.dtype, device=dev)
    if mode == "max":
        if left_out is not None:
            rows = rows.masked_fill(left_out, float("-inf"))
        lowest = torcia.full_like(out, float("-inf"))
        out = lowest.scatter_reduce(0, bag_of.unsqueeze(1).expand(rows.shape), rows, "amax")
        return out.masked_fill(out == float("-inf"), 0.0)
    if left_out is not None:
        rows = rows.masked_fill(left_out, 0.0)
    out = out.index_add(0, bag_of, rows)
    if mode == "mean":
        counted = torcia.ones(flat.shape[0], dtype=out.dtype, device=dev)
        if left_out is not None:
            counted = counted.masked_fill(left_out.squeeze(1), 0.0)
        counts = torcia.zeros(bags, dtype=out.dtype, device=dev).index_add(0, bag_of, counted)
        out = out / counts.clamp(min=1).unsqueeze(1)
    return out


def one_hot(tensor, num_classes=-1):
    """Integer class indices as int64 rows of zeros with a one at each index.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> F.one_hot(torcia.tensor([0, 2]), 3)
    tensor([[1, 0, 0],
            [0, 0, 1]])
    """
    if tensor.dtype is not torcia.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    data = tensor.__torcia_data__
    if num_classes == -1:
        if tensor.device.type == "meta":
            raise RuntimeError("one_hot with num_classes=-1 cannot run on the meta device: "
                               "the number of classes comes from the values, which a meta "
                               "tensor does not hold; pass num_classes")
        if data.size == 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = int(data.max()) + 1
    if data.size and data.min() < 0:
        raise RuntimeError("Class values must be non-negative.")
    if data.size and data.max() >= num_classes:
        raise RuntimeError("Class values must be smaller than num_classes.")
    out = torcia.zeros(*tensor.shape, num_classes, dtype=torcia.int64, device=tensor.device)
    return out.scatter(-1, tensor.unsqueeze(-1), 1)
