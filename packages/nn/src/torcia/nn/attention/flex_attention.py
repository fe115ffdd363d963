"""FlexAttention, as ``torch.nn.attention.flex_attention``: scaled-dot-product attention
whose scores a user function rewrites (``score_mod``) and whose pattern a mask function
restricts (``mask_mod``, held by a :class:`BlockMask`).

``score_mod(score, b, h, q_idx, kv_idx)`` and ``mask_mod(b, h, q_idx, kv_idx)`` are
written for one element, as in PyTorch; torcia calls them once with index tensors that
broadcast over the whole (batch, head, query, key) grid (``b`` of shape ``(B, 1, 1, 1)``,
``kv_idx`` of shape ``(1, 1, 1, S)``...), which is what vectorising them over the four
indices computes for the elementwise and indexing code such functions hold. The result
is differentiable in the inputs and in tensors the functions capture.

torcia computes the attention eagerly, as PyTorch's reference (its ``math_attention``)
does, in float32 (float64 for float64 inputs), with one difference: the blocks a
:class:`BlockMask` leaves out are masked too, as PyTorch's compiled kernels mask them
(its eager reference applies the mask function alone). For masks made by
:func:`create_block_mask` the two agree.

Examples
--------
>>> import torcia
>>> from torcia.nn.attention.flex_attention import create_block_mask, flex_attention
>>> def causal(b, h, q_idx, kv_idx):
...     return q_idx >= kv_idx
>>> def relative_bias(score, b, h, q_idx, kv_idx):
...     return score + 0.1 * (kv_idx - q_idx)
>>> mask = create_block_mask(causal, None, None, 4, 4, device="cpu", BLOCK_SIZE=2)
>>> q = k = v = torcia.randn(1, 2, 4, 8)
>>> out, lse = flex_attention(q, k, v, score_mod=relative_bias, block_mask=mask,
...                           return_lse=True)
>>> out.shape, lse.shape
(torcia.Size([1, 2, 4, 8]), torcia.Size([1, 2, 4]))
"""

from __future__ import annotations

import inspect
import itertools
import math
from typing import NamedTuple, TypedDict

import torcia

__all__ = [
    "AuxOutput", "AuxRequest", "BlockMask", "FlexKernelOptions", "and_masks",
    "create_block_mask", "create_mask", "flex_attention", "noop_mask", "or_masks",
]

_DEFAULT_SPARSE_BLOCK_SIZE = 128


class FlexKernelOptions(TypedDict, total=False):
    """Tuning options of PyTorch's compiled kernels (block sizes, warps, stages...);
    torcia's eager computation takes and ignores them, as PyTorch's eager path does."""

    BLOCK_M: int
    BLOCK_N: int
    num_warps: int
    num_stages: int
    ROWS_GUARANTEED_SAFE: bool
    PRESCALE_QK: bool
    OUTPUT_LOGSUMEXP: bool
    OUTPUT_MAX: bool
    FORCE_USE_FLEX_ATTENTION: bool
    BACKEND: str


class AuxRequest(NamedTuple):
    """Which auxiliary outputs :func:`flex_attention` returns with ``return_aux``.

    Examples
    --------
    >>> from torcia.nn.attention.flex_attention import AuxRequest
    >>> AuxRequest(lse=True)
    AuxRequest(lse=True, max_scores=False)
    """

    lse: bool = False
    max_scores: bool = False


class AuxOutput(NamedTuple):
    """The auxiliary outputs: the log-sum-exp of each query's scores (natural log) and
    their maximum, (B, H, L) each, or None where not asked for."""

    lse: torcia.Tensor | None = None
    max_scores: torcia.Tensor | None = None


def noop_mask(b, h, q_idx, kv_idx):
    """The mask that allows every position.

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn.attention.flex_attention import noop_mask
    >>> noop_mask(*[torcia.tensor(0)] * 4)
    tensor(True)
    """
    return b.new_ones((), dtype=torcia.bool)


def _combined(mask_mods, start: bool, name: str):
    """The mask of ``mask_mods`` joined by & (``start`` True) or | (``start`` False)."""
    if not all(callable(m) for m in mask_mods):
        raise RuntimeError(f"All inputs should be callable mask_mods: {mask_mods}")

    def combined(b, h, q_idx, kv_idx):
        result = b.new_full((), start, dtype=torcia.bool)
        for mask in mask_mods:
            allowed = mask(b, h, q_idx, kv_idx)
            result = result & allowed if start else result | allowed
        return result

    combined.__name__ = name
    return combined


def or_masks(*mask_mods):
    """The mask allowing a position that any of ``mask_mods`` allows.

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn.attention.flex_attention import create_mask, or_masks
    >>> diagonal = or_masks(lambda b, h, q, kv: q == kv, lambda b, h, q, kv: kv == 0)
    >>> create_mask(diagonal, 1, 1, 3, 3, device="cpu")[0, 0].int()
    tensor([[1, 0, 0],
            [1, 1, 0],
            [1, 0, 1]], dtype=torcia.int32)
    """
    return _combined(mask_mods, False, "or_mask")


def and_masks(*mask_mods):
    """The mask allowing a position that all of ``mask_mods`` allow.

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn.attention.flex_attention import and_masks, create_mask
    >>> band = and_masks(lambda b, h, q, kv: q >= kv, lambda b, h, q, kv: q - kv < 2)
    >>> create_mask(band, 1, 1, 3, 3, device="cpu")[0, 0].int()
    tensor([[1, 0, 0],
            [1, 1, 0],
            [0, 1, 1]], dtype=torcia.int32)
    """
    return _combined(mask_mods, True, "and_mask")


def _positional_count(fn) -> int:
    code = getattr(fn, "__code__", None)
    if code is not None:
        return code.co_argcount - len(getattr(fn, "__defaults__", None) or ())
    return sum(1 for p in inspect.signature(fn).parameters.values()
               if p.default is inspect.Parameter.empty)


def _is_score_mod(fn) -> bool:
    """PyTorch's rule: five positional parameters make a score_mod, four a mask_mod."""
    n = _positional_count(fn)
    if n not in (4, 5):
        raise AssertionError(f"Expected 4 or 5 positional args, got {n}")
    return n == 5


def _grid(B, H, M, N, device):
    """Index tensors broadcasting over the (B, H, M, N) grid."""
    def idx(n, axis):
        shape = [1, 1, 1, 1]
        shape[axis] = n
        return torcia.arange(n, device=device).reshape(shape)
    return idx(B, 0), idx(H, 1), idx(M, 2), idx(N, 3)


def _evaluate_mask(mask_mod, B, H, M, N, device):
    """``mask_mod`` over the whole grid, as a (B, H, M, N) bool tensor."""
    out = mask_mod(*_grid(B, H, M, N, device))
    if not isinstance(out, torcia.Tensor):
        out = torcia.tensor(bool(out), device=device)
    return out.to(torcia.bool).expand(B, H, M, N)


def create_mask(mod_fn, B, H, Q_LEN, KV_LEN, device="cuda"):
    """The dense (B, H, Q_LEN, KV_LEN) bool mask of a mask_mod, or of a score_mod (the
    positions it does not set to -inf). ``B``/``H`` None mean 1.

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn.attention.flex_attention import create_mask
    >>> create_mask(lambda b, h, q, kv: q >= kv, None, None, 2, 2, device="cpu")
    tensor([[[[ True, False],
              [ True,  True]]]])
    """
    B, H = B or 1, H or 1
    device = torcia.device(device)
    if _is_score_mod(mod_fn):
        scores = torcia.zeros(B, H, Q_LEN, KV_LEN, device=device)
        out = mod_fn(scores, *_grid(B, H, Q_LEN, KV_LEN, device))
        return torcia.where(torcia.isneginf(out), False, True).expand(B, H, Q_LEN, KV_LEN)
    return _evaluate_mask(mod_fn, B, H, Q_LEN, KV_LEN, device)


# ----- BlockMask ------------------------------------------------------------------------


def _ordered_to_dense(num_blocks, indices, num_cols):
    """(..., rows) counts and (..., rows, k) column lists as a (..., rows, num_cols) int32
    0/1 block matrix: the first ``num_blocks`` entries of each row are its blocks."""
    k = indices.shape[-1]
    used = torcia.arange(k, device=indices.device) < num_blocks.unsqueeze(-1)
    # unused entries are written one past the last column, then cut off
    cols = torcia.where(used, indices.long(), num_cols)
    dense = torcia.zeros(*indices.shape[:-1], num_cols + 1, dtype=torcia.int32,
                         device=indices.device)
    dense.scatter_(-1, cols, 1)
    return dense[..., :num_cols].contiguous()


def _dense_to_ordered(dense):
    dense = dense.to(torcia.int32)
    counts = dense.sum(dim=-1).to(torcia.int32)
    order = torcia.argsort(dense, dim=-1, descending=True, stable=True).to(torcia.int32)
    return counts, order


def _transpose_ordered(num_blocks, indices):
    dense = _ordered_to_dense(num_blocks, indices, indices.shape[-1])
    return _dense_to_ordered(dense.transpose(-2, -1))


def _sliced_mask_mod_error(b, h, q_idx, kv_idx):
    raise RuntimeError("Cannot use mask_mod from a sliced BlockMask. When you index a "
                       "BlockMask using [], the mask_mod function is no longer valid: "
                       "create the block mask for the slice instead")


class BlockMask:
    """Which (query block, key block) tiles of the attention matrix are computed, and the
    ``mask_mod`` applied inside the tiles that are only partly allowed.

    ``kv_num_blocks`` (B, H, query blocks) counts each query block's partial key blocks and
    ``kv_indices`` (B, H, query blocks, key blocks) lists them first; ``full_kv_*`` do the
    same for the fully allowed blocks; the ``q_*`` fields are the transposed lists.
    :func:`create_block_mask` builds one from a mask function.

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn.attention.flex_attention import create_block_mask
    >>> bm = create_block_mask(lambda b, h, q, kv: q >= kv, None, None, 4, 4, device="cpu",
    ...                        BLOCK_SIZE=2)
    >>> bm.shape, bm.kv_num_blocks, bm.full_kv_num_blocks
    ((1, 1, 4, 4), tensor([[[1, 1]]], dtype=torcia.int32), tensor([[[0, 1]]], dtype=torcia.int32))
    >>> bm.sparsity()
    25.0
    """

    def __init__(self, seq_lengths, kv_num_blocks, kv_indices, full_kv_num_blocks,
                 full_kv_indices, q_num_blocks, q_indices, full_q_num_blocks, full_q_indices,
                 BLOCK_SIZE=(_DEFAULT_SPARSE_BLOCK_SIZE, _DEFAULT_SPARSE_BLOCK_SIZE),
                 mask_mod=noop_mask):
        if kv_indices.dim() < 2:
            raise RuntimeError("BlockMask must have at least 2 dimensions")
        if (full_kv_num_blocks is None) != (full_kv_indices is None):
            raise AssertionError("full_kv_num_blocks and full_kv_indices must be both "
                                 "provided or omitted")
        if (full_q_num_blocks is None) != (full_q_indices is None):
            raise AssertionError("full_q_num_blocks and full_q_indices must be both provided "
                                 "or omitted")
        self.seq_lengths = tuple(seq_lengths)
        self.kv_num_blocks = kv_num_blocks
        self.kv_indices = kv_indices
        self.full_kv_num_blocks = full_kv_num_blocks
        self.full_kv_indices = full_kv_indices
        self.q_num_blocks = q_num_blocks
        self.q_indices = q_indices
        self.full_q_num_blocks = full_q_num_blocks
        self.full_q_indices = full_q_indices
        self.BLOCK_SIZE = tuple(BLOCK_SIZE)
        self.mask_mod = mask_mod

    @classmethod
    def from_kv_blocks(cls, kv_num_blocks, kv_indices, full_kv_num_blocks=None,
                       full_kv_indices=None, BLOCK_SIZE=_DEFAULT_SPARSE_BLOCK_SIZE,
                       mask_mod=None, seq_lengths=None, compute_q_blocks=True):
        """A BlockMask from its key-block lists (the query-block lists are derived).

        Examples
        --------
        >>> import torcia
        >>> from torcia.nn.attention.flex_attention import BlockMask
        >>> bm = BlockMask.from_kv_blocks(torcia.tensor([[[1, 2]]], dtype=torcia.int32),
        ...                               torcia.tensor([[[[0, 1], [0, 1]]]], dtype=torcia.int32),
        ...                               BLOCK_SIZE=2)
        >>> bm.shape, bm.q_num_blocks
        ((1, 1, 4, 4), tensor([[[2, 1]]], dtype=torcia.int32))
        """
        if kv_indices.dim() < 2:
            raise RuntimeError("BlockMask must have at least 2 dimensions")
        if (full_kv_num_blocks is None) != (full_kv_indices is None):
            raise AssertionError("full_kv_num_blocks and full_kv_indices must be both "
                                 "provided or omitted")
        q = (None, None)
        full_q = (None, None)
        if compute_q_blocks:
            q = _transpose_ordered(kv_num_blocks, kv_indices)
            if full_kv_num_blocks is not None:
                full_q = _transpose_ordered(full_kv_num_blocks, full_kv_indices)
        if isinstance(BLOCK_SIZE, int):
            BLOCK_SIZE = (BLOCK_SIZE, BLOCK_SIZE)
        if seq_lengths is None:
            seq_lengths = (kv_indices.shape[-2] * BLOCK_SIZE[0],
                           kv_indices.shape[-1] * BLOCK_SIZE[1])
        return cls(seq_lengths, kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices,
                   q[0], q[1], full_q[0], full_q[1], BLOCK_SIZE,
                   mask_mod if mask_mod is not None else noop_mask)

    def as_tuple(self, flatten: bool = True) -> tuple:
        """The fields in PyTorch's order (lengths, the eight block tensors, the block
        size, the mask function)."""
        sizes = self.BLOCK_SIZE if flatten else (self.BLOCK_SIZE,)
        lengths = self.seq_lengths if flatten else (self.seq_lengths,)
        return (*lengths, self.kv_num_blocks, self.kv_indices, self.full_kv_num_blocks,
                self.full_kv_indices, self.q_num_blocks, self.q_indices,
                self.full_q_num_blocks, self.full_q_indices, *sizes, self.mask_mod)

    @property
    def shape(self) -> tuple:
        return tuple(self.kv_indices.shape[:-2]) + self.seq_lengths

    def numel(self) -> int:
        return math.prod(self.shape)

    def sparsity(self) -> float:
        """The share (in percent) of the attention matrix in blocks that are skipped."""
        computed = int(self.kv_num_blocks.sum())
        if self.full_kv_num_blocks is not None:
            computed += int(self.full_kv_num_blocks.sum())
        return 100 * (1 - computed * self.BLOCK_SIZE[0] * self.BLOCK_SIZE[1] / self.numel())

    def to_dense(self):
        """The (B, H, query blocks, key blocks) int32 0/1 matrix of computed blocks."""
        dense = _ordered_to_dense(self.kv_num_blocks, self.kv_indices, self.kv_indices.shape[-1])
        if self.full_kv_num_blocks is not None:
            dense = dense | _ordered_to_dense(self.full_kv_num_blocks, self.full_kv_indices,
                                              self.full_kv_indices.shape[-1])
        return dense

    def _allowed(self, B, H, L, S, device):
        """The (B, H, L, S) bool mask flex_attention applies: inside partial blocks the
        mask function, inside full blocks everything, elsewhere nothing."""
        qb, kb = self.BLOCK_SIZE
        n_q, n_k = self.kv_indices.shape[-2], self.kv_indices.shape[-1]
        partial = _ordered_to_dense(self.kv_num_blocks, self.kv_indices, n_k).bool()
        full = None
        if self.full_kv_num_blocks is not None:
            full = _ordered_to_dense(self.full_kv_num_blocks, self.full_kv_indices, n_k).bool()

        def expand(blocks):  # (b, h, n_q, n_k) -> (b, h, L, S)
            rows = torcia.arange(L, device=device) // qb
            cols = torcia.arange(S, device=device) // kb
            if int(rows.max()) >= n_q or int(cols.max()) >= n_k:
                raise ValueError(f"block_mask covers {n_q * qb} x {n_k * kb} positions, "
                                 f"fewer than the {L} x {S} of the inputs")
            return blocks.to(device)[..., rows, :][..., cols]

        allowed = expand(partial) & _evaluate_mask(self.mask_mod, B, H, L, S, device)
        if full is not None:
            allowed = allowed | expand(full)
        return allowed.expand(B, H, L, S)

    def __getitem__(self, index):
        """The mask of a batch and/or head (ints keep their dimension); its mask
        function cannot be used any more, as in PyTorch."""
        index = index if isinstance(index, tuple) else (index,)
        padded = (*index, slice(None), slice(None), slice(None))[:3]
        sizes = self.kv_num_blocks.shape[:3]
        index = tuple((slice(i % n, i % n + 1) if isinstance(i, int) else i)
                      for i, n in zip(padded, sizes))
        full = (None, None) if self.full_kv_num_blocks is None else (
            self.full_kv_num_blocks[index], self.full_kv_indices[index])
        return BlockMask.from_kv_blocks(
            self.kv_num_blocks[index], self.kv_indices[index], *full,
            BLOCK_SIZE=self.BLOCK_SIZE, mask_mod=_sliced_mask_mod_error,
            seq_lengths=self.seq_lengths, compute_q_blocks=self.q_indices is not None)

    def _adjust(self, new_q_len: int, new_kv_len: int):
        """The mask cut to shorter sequences."""
        rows = -(-new_q_len // self.BLOCK_SIZE[0])
        cols = -(-new_kv_len // self.BLOCK_SIZE[1])

        def cut(num_blocks, indices):
            indices = indices[..., :rows, :cols]
            num_blocks = num_blocks[..., :rows].clamp(max=cols)
            counts = (indices < num_blocks.unsqueeze(-1)).sum(-1).to(torcia.int32)
            return counts, indices

        full = (None, None) if self.full_kv_num_blocks is None else cut(
            self.full_kv_num_blocks, self.full_kv_indices)
        return self.from_kv_blocks(*cut(self.kv_num_blocks, self.kv_indices), *full,
                                   BLOCK_SIZE=self.BLOCK_SIZE, mask_mod=self.mask_mod,
                                   seq_lengths=(new_q_len, new_kv_len),
                                   compute_q_blocks=self.q_indices is not None)

    def to(self, device):
        """The mask with its tensors on ``device``."""
        def move(t):
            return None if t is None else t.to(device)
        return BlockMask(self.seq_lengths, *(move(t) for t in self.as_tuple()[2:10]),
                         self.BLOCK_SIZE, self.mask_mod)

    def to_string(self, grid_size=(20, 20), limit: int = 4) -> str:
        """A picture of the computed blocks per batch and head: full, partial or empty
        cells (one per group of blocks when there are more than ``grid_size``)."""
        dense = self.to_dense()
        *batch_dims, num_rows, num_cols = dense.shape
        if isinstance(grid_size, int):
            max_rows = max_cols = grid_size
        elif grid_size == -1:
            max_rows, max_cols = num_rows, num_cols
        else:
            max_rows, max_cols = grid_size
        row_step = max(1, -(-num_rows // max_rows))
        col_step = max(1, -(-num_cols // max_cols))
        pictures = []
        for i, batch_idx in enumerate(itertools.product(*[range(n) for n in batch_dims])):
            if i == limit:
                pictures += ["...", "To print out more, set BlockMask.to_string(limit=N)",
                             "You can also index (BlockMask[batch, head]) to choose a specific "
                             "batch or head"]
                break
            mask = dense[batch_idx]
            lines = [f"{batch_idx}"]
            for r in range(0, num_rows, row_step):
                cells = ""
                for c in range(0, num_cols, col_step):
                    share = mask[r:r + row_step, c:c + col_step].float().mean().item()
                    cells += ("█" if share == 1 else " " if share == 0 else "░") * 2
                lines.append(cells)
            pictures.append("\n".join(lines) + "\n")
        return "\n".join(pictures)

    def __str__(self) -> str:
        return (f"BlockMask(shape={self.shape}, sparsity={self.sparsity():.2f}%, \n"
                f"{self.to_string().strip()}\n)")

    def __repr__(self) -> str:
        def shape(t):
            return None if t is None else t.shape
        name = getattr(self.mask_mod, "__name__", self.mask_mod)
        return ("BlockMask(\n"
                f"    kv_num_blocks={self.kv_num_blocks.shape},\n"
                f"    kv_indices={self.kv_indices.shape},\n"
                f"    full_kv_num_blocks={shape(self.full_kv_num_blocks)},\n"
                f"    full_kv_indices={shape(self.full_kv_indices)},\n"
                f"    q_num_blocks={shape(self.q_num_blocks)},\n"
                f"    q_indices={shape(self.q_indices)},\n"
                f"    full_q_num_blocks={shape(self.full_q_num_blocks)},\n"
                f"    full_q_indices={shape(self.full_q_indices)},\n"
                f"    BLOCK_SIZE={self.BLOCK_SIZE},\n"
                f"    shape={self.shape},\n"
                f"    sparsity={self.sparsity():.2f}%,\n"
                f"    mask_mod={name}\n)")


def create_block_mask(mask_mod, B, H, Q_LEN, KV_LEN, device="cuda",
                      BLOCK_SIZE=_DEFAULT_SPARSE_BLOCK_SIZE, _compile=False):
    """The :class:`BlockMask` of ``mask_mod`` for sequences of ``Q_LEN`` queries and
    ``KV_LEN`` keys: blocks where it allows nothing are skipped, blocks where it allows
    everything are full, the rest partial. ``B``/``H`` None give a mask broadcast over
    batches/heads.

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn.attention.flex_attention import create_block_mask
    >>> def sliding_window(b, h, q_idx, kv_idx):
    ...     return (q_idx - kv_idx).abs() <= 2
    >>> bm = create_block_mask(sliding_window, 2, None, 8, 8, device="cpu", BLOCK_SIZE=2)
    >>> bm.shape, bm.to_dense()[0, 0].tolist()[0]
    ((2, 1, 8, 8), [1, 1, 0, 0])
    """
    if _is_score_mod(mask_mod):
        raise AssertionError("create_block_mask requires a mask_mod function! Got a "
                             "score_mod function")
    B, H = B or 1, H or 1
    device = torcia.device(device)
    q_block, kv_block = (BLOCK_SIZE, BLOCK_SIZE) if isinstance(BLOCK_SIZE, int) else BLOCK_SIZE
    mask = _evaluate_mask(mask_mod, B, H, Q_LEN, KV_LEN, device)
    rows, cols = -(-Q_LEN // q_block), -(-KV_LEN // kv_block)
    padded = torcia.zeros(B, H, rows * q_block, cols * kv_block, dtype=torcia.int32,
                          device=device)
    padded[:, :, :Q_LEN, :KV_LEN] = mask.to(torcia.int32)
    counts = padded.reshape(B, H, rows, q_block, cols, kv_block).sum((3, 5))
    full = counts == q_block * kv_block
    partial = (counts > 0) & ~full
    kv_num, kv_idx = _dense_to_ordered(partial)
    full_num, full_idx = _dense_to_ordered(full)
    return BlockMask.from_kv_blocks(kv_num, kv_idx, full_num, full_idx,
                                    BLOCK_SIZE=(q_block, kv_block), mask_mod=mask_mod,
                                    seq_lengths=(Q_LEN, KV_LEN))


# ----- flex_attention -------------------------------------------------------------------


def _check_inputs(query, key, value, enable_gqa, block_mask):
    if query.dim() != 4 or key.dim() != 4 or value.dim() != 4:
        raise NotImplementedError("NYI: query, key, and value must be 4D tensors")
    (bq, hq, _, e), (bkv, hkv, s, ek) = query.shape, key.shape
    if e != ek:
        raise ValueError(f"Expect query and key/value to have the same embedding dimension "
                         f"but got E={e} and E={ek}.")
    if value.shape[-2] != s or value.shape[1] != hkv or value.shape[0] != bkv:
        raise RuntimeError(f"Expected key and value to agree in batch, heads and length, got "
                           f"{list(key.shape)} and {list(value.shape)}")
    if bq != bkv and not (bkv == 1 or block_mask is not None):
        raise ValueError(f"Expect query and key/value to have the same batch size, or "
                         f"non-none block_mask, but got block_mask={block_mask}, Bq={bq}, "
                         f"and Bkv={bkv}.")
    if hq != hkv:
        if not enable_gqa:
            raise ValueError(f"Expect query and key/value to have the same number of heads "
                             f"but got Hq={hq} and Hkv={hkv}. Try setting enable_gqa=True "
                             "for GQA.")
        if hq % hkv:
            raise ValueError(f"Expect number of query heads to be a multiple of kv heads for "
                             f"GQA but got Hq={hq} and Hkv={hkv}.")


def flex_attention(query, key, value, score_mod=None, block_mask=None, scale=None,
                   enable_gqa=False, return_lse=False, kernel_options=None, *,
                   return_aux=None):
    """Attention of ``query`` (B, Hq, L, E) over ``key`` (B, Hkv, S, E) and ``value``
    (B, Hkv, S, Ev): ``softmax(mask(score_mod(q @ k^T * scale))) @ v``.

    Parameters
    ----------
    score_mod : callable, optional
        ``score_mod(score, b, h, q_idx, kv_idx) -> score``.
    block_mask : BlockMask, optional
        Which positions may attend (:func:`create_block_mask`); a query allowed nothing
        gets a zero output (and a log-sum-exp of -inf).
    scale : float, optional
        ``1 / sqrt(E)`` by default.
    enable_gqa : bool
        Allow ``Hq`` a multiple of ``Hkv`` (grouped-query attention).
    return_lse : bool
        Also return the log-sum-exp of each query's scores, (B, Hq, L).
    kernel_options : dict, optional
        PyTorch's compiled-kernel options; ignored.
    return_aux : AuxRequest, optional
        Return ``(output, AuxOutput)`` with the requested log-sum-exp and maximum scores.

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn.attention.flex_attention import flex_attention
    >>> import torcia.nn.functional as F
    >>> q, k, v = torcia.randn(2, 3, 4, 8), torcia.randn(2, 3, 5, 8), torcia.randn(2, 3, 5, 6)
    >>> bool(torcia.allclose(flex_attention(q, k, v),
    ...                      F.scaled_dot_product_attention(q, k, v), atol=1e-6))
    True
    """
    _check_inputs(query, key, value, enable_gqa, block_mask)
    if return_lse and return_aux is not None:
        raise ValueError("Cannot specify both return_lse and return_aux. return_lse is "
                         "deprecated, please use return_aux=AuxRequest(lse=True)")
    B, hq, L, E = query.shape
    hkv, S = key.shape[1], key.shape[2]
    if block_mask is not None and tuple(block_mask.seq_lengths) != (L, S):
        bl, bs = block_mask.seq_lengths
        if bl < L or bs < S:
            raise ValueError(f"block_mask was created for block_mask.shape={block_mask.shape}"
                             f" but got q_len={L} and kv_len={S}. As the block mask was "
                             "created for a smaller length than you're using it for, you "
                             "likely need to create a new block mask.")
        raise ValueError(f"block_mask was created for block_mask.shape={block_mask.shape} but "
                         f"got q_len={L} and kv_len={S}. As the block mask was created for a "
                         "larger length than you're using it for, you can either 1. create a "
                         "new block mask with the correct length, or 2. 'adjust' the existing "
                         "block mask to the correct length by calling block_mask._adjust("
                         "q_len, kv_len). This essentially 'crops' the block mask to the "
                         "upper left corner, which does not work for all mask_mods!")
    scale = 1.0 / math.sqrt(E) if scale is None else scale
    working = torcia.float64 if query.dtype is torcia.float64 else torcia.float32
    if hq != hkv:
        key = key.repeat_interleave(hq // hkv, dim=1)
        value = value.repeat_interleave(hq // hkv, dim=1)
    key, value = key.expand(B, *key.shape[1:]), value.expand(B, *value.shape[1:])
    scores = (query.to(working) @ key.to(working).transpose(-2, -1)) * scale
    if score_mod is not None:
        scores = score_mod(scores, *_grid(B, hq, L, S, query.device))
        scores = scores.to(working).expand(B, hq, L, S)
    if block_mask is not None:
        allowed = block_mask._allowed(B, hq, L, S, query.device)
        scores = scores.masked_fill(~allowed, float("-inf"))
    # a row allowed nothing gets zero weights, without a NaN in the graph (the softmax
    # of a row of -inf is NaN, and so would be its gradient)
    empty = torcia.isneginf(scores).all(dim=-1, keepdim=True)
    safe = scores.masked_fill(empty, 0.0)
    weights = torcia.softmax(safe, dim=-1).masked_fill(empty, 0.0)
    out = weights.to(query.dtype) @ value.to(query.dtype)
    want_lse = return_lse or (return_aux is not None and return_aux.lse)
    want_max = return_aux is not None and return_aux.max_scores
    lse = safe.logsumexp(dim=-1).masked_fill(empty.squeeze(-1), float("-inf")) \
        if want_lse else None
    if return_aux is not None:
        max_scores = scores.amax(dim=-1) if want_max else None
        return out, AuxOutput(lse=lse, max_scores=max_scores)
    return (out, lse) if return_lse else out
