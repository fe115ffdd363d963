"""``torcia-train-lm``: train a small GPT on a text corpus that is already on the machine.

By default the corpus is the docstrings of Python's standard library (English prose that
every machine with Python has; nothing is downloaded); ``--corpus FILE`` uses a text file.
A byte-level BPE tokenizer is trained on the training split, the model trains with a
progress bar per epoch, the validation perplexity is reported each epoch beside the
unigram baseline of the same corpus, and samples are printed at the end.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
from tqdm import tqdm

import torcia
from torcia.data import DataLoader
from torcia.nn import functional as F
from torcia.text.datasets import LanguageModelDataset, python_docs_corpus, read_text
from torcia.text.models import GPT
from torcia.text.tokenizers import ByteLevelBPETokenizer


def unigram_perplexity(train_ids, val_ids, vocab_size) -> float:
    """Perplexity on ``val_ids`` of token frequencies counted on ``train_ids`` (add-one).

    Examples
    --------
    With counts 3 and 2 (add-one), the two tokens have probabilities 0.6 and 0.4:

    >>> from torcia.text.train_lm import unigram_perplexity
    >>> round(unigram_perplexity([0, 0, 1], [0, 1], vocab_size=2), 4)
    2.0412
    """
    counts = np.bincount(np.asarray(train_ids), minlength=vocab_size) + 1.0
    logp = np.log(counts / counts.sum())
    return float(np.exp(-logp[np.asarray(val_ids)].mean()))


@torcia.no_grad()
def evaluate(model, loader) -> float:
    """Perplexity: exp of the mean next-token cross-entropy over ``loader``."""
    model.eval()
    total, count = 0.0, 0
    for x, y in loader:
        logits = model(x)
        total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1),
                                 reduction="sum").item()
        count += y.numel()
    model.train()
    return math.exp(total / max(count, 1))


def build_parser():
    """The command line of ``torcia-train-lm``: corpus, tokenizer, model size, steps...

    Examples
    --------
    >>> from torcia.text.train_lm import build_parser
    >>> args = build_parser().parse_args(["--max-chars", "1000"])
    >>> args.max_chars
    1000
    """
    p = argparse.ArgumentParser(prog="torcia-train-lm", description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", type=Path, help="a UTF-8 text file (default: Python's docs)")
    p.add_argument("--max-chars", type=int, default=300_000, help="corpus characters used")
    p.add_argument("--vocab-size", type=int, default=512)
    p.add_argument("--block-size", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--steps-per-epoch", type=int, default=120)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--samples", type=int, default=2)
    p.add_argument("--prompt", default="Return the")
    p.add_argument("--out", type=Path, default=Path("out-lm"),
                   help="where the tokenizer and the model are saved")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    torcia.manual_seed(args.seed)
    text = read_text(args.corpus) if args.corpus else python_docs_corpus(args.max_chars)
    text = text[: args.max_chars]
    cut = int(len(text) * 0.9)
    train_text, val_text = text[:cut], text[cut:]
    tokenizer = ByteLevelBPETokenizer.train(train_text.splitlines(), vocab_size=args.vocab_size)
    train_ids, val_ids = tokenizer.encode(train_text), tokenizer.encode(val_text)
    baseline = unigram_perplexity(train_ids, val_ids, tokenizer.vocab_size)
    print(f"corpus: {len(text):,} characters, {len(train_ids):,} training tokens, "
          f"{len(val_ids):,} validation tokens, vocabulary {tokenizer.vocab_size}")
    print(f"unigram baseline perplexity: {baseline:.1f}")

    train_set = LanguageModelDataset(train_ids, args.block_size, stride=args.block_size // 2)
    val_set = LanguageModelDataset(val_ids, args.block_size)
    generator = torcia.Generator().manual_seed(args.seed)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True,
                              drop_last=True, generator=generator)
    val_loader = DataLoader(val_set, batch_size=args.batch_size)
    model = GPT(tokenizer.vocab_size, args.block_size, args.layers, args.heads, args.d_model,
                dropout=0.0)
    opt = torcia.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    total_steps = args.epochs * args.steps_per_epoch
    sched = torcia.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=total_steps)

    history = []
    for epoch in range(1, args.epochs + 1):
        batches = iter(train_loader)
        bar = tqdm(range(args.steps_per_epoch), desc=f"epoch {epoch}/{args.epochs}",
                   file=sys.stdout, dynamic_ncols=True)
        for _ in bar:
            try:
                x, y = next(batches)
            except StopIteration:
                batches = iter(train_loader)
                x, y = next(batches)
            logits = model(x)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
            opt.zero_grad()
            loss.backward()
            torcia.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            bar.set_postfix(loss=f"{loss.item():.3f}")
        perplexity = evaluate(model, val_loader)
        history.append(perplexity)
        print(f"epoch {epoch}: validation perplexity {perplexity:.1f} "
              f"(unigram baseline {baseline:.1f})")

    args.out.mkdir(parents=True, exist_ok=True)
    tokenizer.save(args.out / "tokenizer.json")
    torcia.save(model.state_dict(), args.out / "model.tcia")
    prompt = torcia.tensor([tokenizer.encode(args.prompt)])
    for i in range(args.samples):
        out = model.generate(prompt, max_new_tokens=40, temperature=0.8, top_k=40,
                             seed=args.seed + i)
        print(f"sample {i + 1}: {tokenizer.decode(out[0])!r}")
    return 0 if history and history[-1] < baseline else 1


if __name__ == "__main__":
    sys.exit(main())
