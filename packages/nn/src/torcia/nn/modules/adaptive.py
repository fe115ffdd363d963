"""AdaptiveLogSoftmaxWithLoss: the efficient softmax of Grave et al. for large output
vocabularies, as ``torch.nn.AdaptiveLogSoftmaxWithLoss``."""

from __future__ import annotations

from collections import namedtuple

import numpy as np

import torcia
from torcia.library import host_array
from torcia.nn import functional as F
from torcia.nn.modules.container import ModuleList, Sequential
from torcia.nn.modules.linear import Linear
from torcia.nn.modules.module import Module

__all__ = ["AdaptiveLogSoftmaxWithLoss"]

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    """Adaptive softmax (Grave et al., 2016): frequent classes (below ``cutoffs[0]``) are
    scored by a head layer that also scores one entry per cluster of rarer classes; a
    class of cluster ``i`` is scored by the cluster's head entry plus a small two-layer
    projection (hidden size ``in_features // div_value ** (i + 1)``) over the cluster.

    ``forward(input, target)`` returns ``(output, loss)``: each target's log-probability
    and the mean negative log-likelihood. :meth:`log_prob` gives every class's
    log-probability, :meth:`predict` the most probable class.

    Parameters
    ----------
    in_features : int
    n_classes : int
    cutoffs : sequence of int
        Increasing, unique, between 1 and ``n_classes - 1``: where the clusters start.
    div_value : float, default 4.0
    head_bias : bool, default False
    device, dtype : optional

    Examples
    --------
    >>> import torcia
    >>> asm = torcia.nn.AdaptiveLogSoftmaxWithLoss(8, 10, cutoffs=[4, 8])
    >>> out, loss = asm(torcia.randn(5, 8), torcia.tensor([0, 3, 5, 9, 7]))
    >>> out.shape, loss.shape, asm.log_prob(torcia.randn(2, 8)).exp().sum(1).round().tolist()
    (torcia.Size([5]), torcia.Size([]), [1.0, 1.0])
    """

    def __init__(self, in_features: int, n_classes: int, cutoffs, div_value: float = 4.0,
                 head_bias: bool = False, device=None, dtype=None):
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if (cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > n_classes - 1
                or len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs)):
            raise ValueError("cutoffs should be a sequence of unique, positive integers "
                             "sorted in an increasing order, where each value is between "
                             "1 and n_classes-1")
        self.in_features = in_features
        self.n_classes = n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value = div_value
        self.head_bias = head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, device=device,
                           dtype=dtype)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hidden = int(in_features // (div_value ** (i + 1)))
            size = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(
                Linear(in_features, hidden, bias=False, device=device, dtype=dtype),
                Linear(hidden, size, bias=False, device=device, dtype=dtype)))

    def reset_parameters(self) -> None:
        """Initialise every layer again, as at construction."""
        self.head.reset_parameters()
        for i2h, h2o in self.tail:
            i2h.reset_parameters()
            h2o.reset_parameters()

    def forward(self, input_, target_):
        targ_dim = target_.dim()
        if targ_dim == 1:
            if input_.size(0) != target_.size(0):
                raise RuntimeError("Input and target should have the same size in the batch "
                                   "dimension.")
            if input_.dim() != 2:
                raise RuntimeError(f"1D target tensor expects 2D input tensors, but found "
                                   f"inputs with size {input_.size()}")
        elif targ_dim == 0:
            if input_.dim() != 1:
                raise RuntimeError(f"0D target tensor expects 1D input tensors, but found "
                                   f"inputs with size {input_.size()}")
        else:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        batched = targ_dim > 0
        input = input_ if batched else input_.unsqueeze(0)
        target = target_ if batched else target_.unsqueeze(0)
        labels = host_array(target).astype(np.int64)
        if labels.size and (labels.min() < 0 or labels.max() >= self.n_classes):
            raise RuntimeError(f"Target values should be in [0, {self.n_classes - 1}], but "
                               f"values in range [{labels.min()}, {labels.max()}] were found. ")
        # the head scores each target's class, or the cluster that holds it
        head_index = labels.copy()
        cluster_part = torcia.zeros(len(labels), dtype=input.dtype, device=input.device)
        for i in range(1, len(self.cutoffs)):
            low, high = self.cutoffs[i - 1], self.cutoffs[i]
            rows = np.nonzero((labels >= low) & (labels < high))[0]
            if rows.size == 0:
                continue
            head_index[rows] = self.shortlist_size + i - 1
            rows_t = torcia.from_numpy(rows).to(input.device)
            logprob = F.log_softmax(self.tail[i - 1](input.index_select(0, rows_t)), dim=1)
            relative = torcia.from_numpy(labels[rows] - low).to(input.device)
            cluster_part = cluster_part.index_add(
                0, rows_t, logprob.gather(1, relative.unsqueeze(1)).squeeze(1))
        head_logprob = F.log_softmax(self.head(input), dim=1)
        head_index = torcia.from_numpy(head_index).to(input.device)
        output = head_logprob.gather(1, head_index.unsqueeze(1)).squeeze(1) + cluster_part
        loss = (-output).mean()
        return _ASMoutput(output if batched else output.squeeze(0), loss)

    def _full_log_prob(self, input, head_output):
        head_logprob = F.log_softmax(head_output, dim=1)
        parts = [head_logprob[:, :self.shortlist_size]]
        for i in range(self.n_clusters):
            cluster = F.log_softmax(self.tail[i](input), dim=1)
            parts.append(cluster + head_logprob[:, self.shortlist_size + i].unsqueeze(1))
        return torcia.cat(parts, dim=1)

    def log_prob(self, input):
        """The log-probabilities of every class, ``(N, n_classes)``."""
        return self._full_log_prob(input, self.head(input))

    def predict(self, input):
        """The most probable class of each example, ``(N,)`` (the full distribution is
        computed only for rows whose best head entry is a cluster)."""
        head_output = self.head(input)
        output = head_output.argmax(dim=1)
        outside = output >= self.shortlist_size
        if not bool(outside.any()):
            return output
        rows = outside.nonzero().squeeze(1)
        full = self._full_log_prob(input.index_select(0, rows),
                                   head_output.index_select(0, rows))
        return output.index_put((rows,), full.argmax(dim=1))
