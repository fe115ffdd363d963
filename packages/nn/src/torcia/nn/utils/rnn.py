"""Batches of sequences of different lengths: padding and packing.

A :class:`PackedSequence` stores the steps of every sequence time-major, longest
sequences first: step t holds ``batch_sizes[t]`` rows, one per sequence still running.
Packing and unpacking are one gather and one scatter (both differentiable).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

import torcia
from torcia import Tensor


class PackedSequence(NamedTuple):
    """``data`` ``(sum of lengths, *)``, ``batch_sizes`` ``(max length,)`` int64, and the
    permutation that sorted the batch by decreasing length (and its inverse).

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn.utils.rnn import pack_padded_sequence
    >>> padded = torcia.tensor([[1, 2, 3], [4, 5, 0]]).T
    >>> packed = pack_padded_sequence(padded, torcia.tensor([3, 2]))
    >>> packed.data, packed.batch_sizes
    (tensor([1, 4, 2, 5, 3]), tensor([2, 2, 1]))
    """

    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None = None
    unsorted_indices: Tensor | None = None

    def to(self, *args, **kwargs):
        return self._replace(data=self.data.to(*args, **kwargs))

    @property
    def is_cuda(self) -> bool:
        return self.data.is_cuda


def _lengths_array(lengths) -> np.ndarray:
    if isinstance(lengths, Tensor):
        if lengths.device.type != "cpu":
            raise RuntimeError("'lengths' argument should be a 1D CPU int64 tensor, but got "
                               f"1D {lengths.device} Long tensor")
        lengths = lengths.tolist()
    arr = np.asarray(lengths, dtype=np.int64)
    if arr.ndim != 1:
        raise ValueError(f"lengths must be 1-D, got shape {list(arr.shape)}")
    if arr.size and arr.min() <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an "
                           "element in 'lengths' that is <= 0")
    return arr


def _positions(lengths: np.ndarray):
    """For sorted decreasing lengths: (time index, batch index) of every packed row, and
    batch_sizes."""
    steps = int(lengths[0]) if lengths.size else 0
    batch_sizes = (lengths[None, :] > np.arange(steps)[:, None]).sum(1)
    t_idx = np.repeat(np.arange(steps), batch_sizes)
    b_idx = np.concatenate([np.arange(b) for b in batch_sizes]) if steps else np.zeros(0, int)
    return t_idx, b_idx, batch_sizes


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Pack a padded batch (``L, N, *`` or ``N, L, *``) of sequences of ``lengths``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn.utils.rnn import pack_padded_sequence
    >>> x = torcia.tensor([[1, 2, 3], [4, 5, 0]]).T
    >>> p = pack_padded_sequence(x, [3, 2])
    >>> p.data, p.batch_sizes
    (tensor([1, 4, 2, 5, 3]), tensor([2, 2, 1]))
    """
    lens = _lengths_array(lengths)
    if batch_first:
        input = input.transpose(0, 1)
    if lens.size != input.shape[1]:
        raise ValueError(f"Expected `len(lengths)` to be equal to batch_size, but got "
                         f"{lens.size} (batch_size={input.shape[1]})")
    if lens.size and lens.max() > input.shape[0]:
        raise RuntimeError(f"a length of {lens.max()} exceeds the sequence length "
                           f"{input.shape[0]} of the input")
    sorted_indices = unsorted_indices = None
    if enforce_sorted:
        if np.any(np.diff(lens) > 0):
            raise RuntimeError("`lengths` array must be sorted in decreasing order when "
                               "`enforce_sorted` is True. You can pass `enforce_sorted=False` "
                               "to pack_padded_sequence and/or pack_sequence to sidestep this "
                               "requirement if you do not need ONNX exportability.")
    else:
        order = np.argsort(-lens, kind="stable")
        lens = lens[order]
        sorted_indices = torcia.tensor(order, device=input.device)
        unsorted_indices = torcia.tensor(np.argsort(order), device=input.device)
        input = input.index_select(1, sorted_indices)
    t_idx, b_idx, batch_sizes = _positions(lens)
    data = input[torcia.tensor(t_idx), torcia.tensor(b_idx)]
    return PackedSequence(data, torcia.tensor(batch_sizes), sorted_indices, unsorted_indices)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """Undo :func:`pack_padded_sequence`: returns the padded batch and the lengths (int64,
    in the original batch order).

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn.utils.rnn import pack_sequence, pad_packed_sequence
    >>> packed = pack_sequence([torcia.tensor([1, 2, 3]), torcia.tensor([4, 5])])
    >>> pad_packed_sequence(packed, batch_first=True)
    (tensor([[1, 2, 3],
            [4, 5, 0]]), tensor([3, 2]))
    """
    data, batch_sizes, sorted_indices, unsorted_indices = sequence
    sizes = np.asarray(batch_sizes.tolist(), dtype=np.int64)
    steps = sizes.size
    batch = int(sizes[0]) if steps else 0
    lens = (sizes[None, :] > np.arange(batch)[:, None]).sum(1)
    if total_length is not None:
        if total_length < steps:
            raise ValueError(f"Expected total_length to be at least the length of the longest "
                             f"sequence in input, but got total_length={total_length} and max "
                             f"sequence length being {steps}")
        steps = total_length
    t_idx, b_idx, _ = _positions(lens)
    padded = torcia.full((steps, batch) + tuple(data.shape[1:]), padding_value, dtype=data.dtype,
                         device=data.device)
    padded = padded.index_put((torcia.tensor(t_idx), torcia.tensor(b_idx)), data)
    lengths = torcia.tensor(lens)
    if unsorted_indices is not None:
        padded = padded.index_select(1, unsorted_indices)
        lengths = lengths[unsorted_indices]
    if batch_first:
        padded = padded.transpose(0, 1)
    return padded, lengths


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stack sequences of different lengths (each ``L_i, *``) into one padded tensor.

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn.utils.rnn import pad_sequence
    >>> pad_sequence([torcia.tensor([1, 2, 3]), torcia.tensor([4])], batch_first=True)
    tensor([[1, 2, 3],
            [4, 0, 0]])
    """
    if padding_side not in ("left", "right"):
        raise ValueError(f"Expected padding_side to be one of left or right, but got "
                         f"{padding_side}.")
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    longest = max(s.shape[0] for s in sequences)
    rows = []
    for s in sequences:
        missing = longest - s.shape[0]
        if missing:
            fill = torcia.full((missing,) + tuple(s.shape[1:]), padding_value, dtype=s.dtype,
                               device=s.device)
            s = torcia.cat([s, fill] if padding_side == "right" else [fill, s])
        rows.append(s)
    return torcia.stack(rows, 0 if batch_first else 1)


def pack_sequence(sequences, enforce_sorted=True):
    """Pack a list of sequences (each ``L_i, *``).

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn.utils.rnn import pack_sequence
    >>> packed = pack_sequence([torcia.tensor([1, 2, 3]), torcia.tensor([4, 5])])
    >>> packed.data
    tensor([1, 4, 2, 5, 3])
    >>> packed.batch_sizes
    tensor([2, 2, 1])
    """
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """Split a padded batch back into a list of its sequences.

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn.utils.rnn import pad_sequence, unpad_sequence
    >>> padded = pad_sequence([torcia.tensor([1, 2, 3]), torcia.tensor([4, 5])], batch_first=True)
    >>> unpad_sequence(padded, torcia.tensor([3, 2]), batch_first=True)
    [tensor([1, 2, 3]), tensor([4, 5])]
    """
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    return [seq[: int(n)] for seq, n in zip(padded_sequences, lengths)]


def unpack_sequence(packed_sequences):
    """The list of sequences a :class:`PackedSequence` holds (the inverse of :func:`pack_sequence`).

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn.utils.rnn import pack_sequence, unpack_sequence
    >>> packed = pack_sequence([torcia.tensor([1, 2, 3]), torcia.tensor([4, 5])])
    >>> unpack_sequence(packed)
    [tensor([1, 2, 3]), tensor([4, 5])]
    """
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)


def invert_permutation(permutation):
    """The inverse of a permutation (``out[permutation[i]] = i``); None stays None.

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn.utils.rnn import invert_permutation
    >>> invert_permutation(torcia.tensor([2, 0, 1]))
    tensor([1, 2, 0])
    """
    if permutation is None:
        return None
    out = torcia.empty_like(permutation)
    return out.scatter_(0, permutation,
                        torcia.arange(permutation.numel(), device=permutation.device))
