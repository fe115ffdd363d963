"""Variable-length sequence classification that leans on PyTorch's smaller subsystems: a
sparse embedding trained by SparseAdam, attention under ``sdpa_kernel`` with a window from
``torch.signal.windows``, selective activation checkpointing, a masked loss
(``torch.masked``), stochastic weight averaging (``torch.optim.swa_utils``), the profiler
with a schedule and ``record_function``, TensorBoard event files, a ``torch.utils.benchmark``
timing, nested (jagged) tensors and ``flex_attention`` in evaluation, ``torch.testing``'s
``make_tensor``, DLPack, ``torch.autograd.graph`` hooks and ``torch.nn.utils.rnn``.

Task: a sequence of tokens (lengths 4..12) is labelled by which of two "signal" tokens it
holds more of (by one); the rest are noise tokens. Prints ``loss`` every four batches.
"""

import argparse
import io
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from torch.autograd.graph import register_multi_grad_hook
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.flex_attention import create_block_mask, flex_attention
from torch.nn.utils.rnn import pad_sequence
from torch.optim.swa_utils import SWALR, AveragedModel, update_bn
from torch.profiler import (
    ProfilerActivity,
    profile,
    record_function,
    schedule,
    tensorboard_trace_handler,
)
from torch.testing import make_tensor
from torch.utils.benchmark import Timer
from torch.utils.checkpoint import (
    CheckpointPolicy,
    checkpoint,
    create_selective_checkpoint_contexts,
)
from torch.utils.tensorboard import SummaryWriter

VOCAB, DIM, MAXLEN = 50, 32, 12


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM, padding_idx=0, sparse=True)
        self.qkv = nn.Linear(DIM, 3 * DIM)
        self.norm = nn.BatchNorm1d(DIM)
        self.head = nn.Linear(DIM, 2)
        # positions near the middle of the window weigh more: a fixed attention bias
        self.register_buffer("position_bias", torch.signal.windows.gaussian(MAXLEN, std=4.0))

    def attend(self, x, pad):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        bias = self.position_bias[: x.shape[1]].log().expand(x.shape[1], -1)
        mask = bias.masked_fill(pad[:, None, :], float("-inf"))
        with sdpa_kernel([SDPBackend.MATH, SDPBackend.FLASH_ATTENTION]):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    def forward(self, tokens):
        pad = tokens == 0
        x = self.embed(tokens)
        x = checkpoint(self.attend, x, pad, use_reentrant=False,
                       context_fn=lambda: create_selective_checkpoint_contexts(
                           _recompute_all_but_matmul))
        keep = (~pad).unsqueeze(-1).float()
        pooled = (x * keep).sum(1) / keep.sum(1)
        return self.head(F.relu(self.norm(pooled)))


def _recompute_all_but_matmul(ctx, op, *args, **kwargs):
    # the op's name ("aten.mm.default" on PyTorch): products are kept, the rest recomputed
    if any(name in str(op) for name in ("mm", "matmul", "linear")):
        return CheckpointPolicy.MUST_SAVE
    return CheckpointPolicy.PREFER_RECOMPUTE


def make_data(n, rng):
    """Token sequences built in NumPy and handed over through DLPack, padded with rnn."""
    seqs, labels = [], []
    for _ in range(n):
        length = int(rng.integers(4, MAXLEN + 1))
        tokens = rng.integers(3, VOCAB, length)
        label = int(rng.integers(0, 2))
        fewer = int(rng.integers(0, length // 2))
        where = rng.choice(length, 2 * fewer + 1, replace=False)
        tokens[where[: fewer + 1]] = 1 + label          # one more of the label's token
        tokens[where[fewer + 1:]] = 2 - label
        seqs.append(torch.from_dlpack(tokens.astype(np.int64)))
        labels.append(label)
    return pad_sequence(seqs, batch_first=True), torch.tensor(labels)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    tokens, labels = make_data(512, rng)
    test_tokens, test_labels = make_data(256, rng)

    model = Classifier()
    sparse_opt = torch.optim.SparseAdam(list(model.embed.parameters()), lr=0.02)
    dense = [p for n, p in model.named_parameters() if not n.startswith("embed")]
    dense_opt = torch.optim.Adam(dense, lr=0.01)
    swa_model = AveragedModel(model)
    swa_start = args.epochs // 2
    swa_sched = SWALR(dense_opt, swa_lr=0.005, anneal_epochs=1)
    backward_calls = []
    register_multi_grad_hook(dense, lambda grads: backward_calls.append(len(grads)))

    logdir = tempfile.mkdtemp()
    writer = SummaryWriter(logdir)
    prof = profile(activities=[ProfilerActivity.CPU],
                   schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
                   on_trace_ready=tensorboard_trace_handler(logdir))
    step = 0
    with prof:
        for epoch in range(args.epochs):
            order = torch.randperm(len(labels))
            total, seen = 0.0, 0
            for start in range(0, len(labels), args.batch_size):
                idx = order[start:start + args.batch_size]
                with record_function("train_step"):
                    logits = model(tokens[idx])
                    per_sample = F.cross_entropy(logits, labels[idx], reduction="none")
                    # only the samples the model still gets wrong or barely right count
                    hard = per_sample > 0.05
                    loss = torch.masked.mean(per_sample, mask=hard) if hard.any() \
                        else per_sample.mean()
                    sparse_opt.zero_grad()
                    dense_opt.zero_grad()
                    loss.backward()
                    sparse_opt.step()
                    dense_opt.step()
                prof.step()
                total += per_sample.sum().item()
                seen += len(idx)
                step += 1
                if step % 4 == 0:
                    writer.add_scalar("train/loss", total / seen, step)
                    print(f"epoch {epoch} step {step} loss {total / seen:.4f}")
                    total, seen = 0.0, 0
            if epoch >= swa_start:
                swa_model.update_parameters(model)
                swa_sched.step()
    writer.close()
    events = EventAccumulator(logdir)
    events.Reload()
    traces = [f for f in os.listdir(logdir) if ".pt.trace.json" in f]
    print(f"tensorboard read back {len(events.Scalars('train/loss'))} points of train/loss; "
          f"{len(traces)} profiler trace")

    update_bn([(tokens[i:i + 64],) for i in range(0, len(labels), 64)], swa_model)
    swa_model.eval()
    with torch.no_grad():
        accuracy = (swa_model(test_tokens).argmax(1) == test_labels).float().mean().item()
    print(f"swa test accuracy {accuracy:.3f}")
    assert len(backward_calls) == step, (len(backward_calls), step)

    # evaluation paths: nested (jagged) sequences and flex_attention against sdpa
    model.eval()
    with torch.no_grad():
        x = model.embed(test_tokens[:4])
        q, k, v = model.qkv(x).chunk(3, dim=-1)
        lengths = (test_tokens[:4] != 0).sum(1)
        sdpa = model.attend(x, test_tokens[:4] == 0)

        def keep_valid(b, h, q_idx, kv_idx):
            return kv_idx < lengths[b]

        def position_bias(score, b, h, q_idx, kv_idx):
            return score + model.position_bias[kv_idx].log()

        block_mask = create_block_mask(keep_valid, 4, None, MAXLEN, MAXLEN, device="cpu")
        flex = flex_attention(q[:, None], k[:, None], v[:, None], score_mod=position_bias,
                              block_mask=block_mask)[:, 0]
        nested = torch.nested.nested_tensor([x[i, : lengths[i]] for i in range(4)],
                                            layout=torch.jagged)
        padded = nested.to_padded_tensor(0.0)
    valid = test_tokens[:4] != 0
    print(f"flex vs sdpa max difference {(flex - sdpa)[valid].abs().max().item():.2e}")
    expected = (x * valid[..., None])[:, : padded.shape[1]]
    print(f"nested round trip max difference {(padded - expected).abs().max():.1e}")

    features = make_tensor((64, DIM), dtype=torch.float32, device="cpu", low=-1, high=1)
    timer = Timer("head(features)", globals={"head": model.head, "features": features})
    print(f"head timing {timer.timeit(20).mean * 1e6:.1f} us")

    buffer = io.BytesIO()
    torch.save(swa_model.module.state_dict(), buffer)
    buffer.seek(0)
    restored = Classifier()
    restored.load_state_dict(torch.load(buffer, weights_only=True))
    restored.eval()
    with torch.no_grad():
        same = torch.equal(restored(test_tokens), swa_model(test_tokens))
    print(f"checkpoint restores the averaged model: {same}")


if __name__ == "__main__":
    main()
