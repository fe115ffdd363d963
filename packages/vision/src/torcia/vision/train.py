"""``torcia-train``: train an image classifier end to end.

By default a small CNN on the embedded ``Digits`` (1,437 training and 360 test images,
8x8), which reaches about 98% test accuracy in well under a minute on two cores. Each
epoch shows a progress bar, then the loss and accuracy on both splits; a checkpoint
(model, optimizer, scheduler, epoch, random-generator states and the history so far) is
written after every epoch, and ``--resume`` (with the same settings) continues from one
exactly as if the run had not stopped. At the end ``OUT/report.png`` shows the curves and
test images with the model's predictions.

Examples
--------
Shell::

    torcia-train                                  # Digits, defaults
    torcia-train --dataset mnist --root ~/data    # MNIST from its IDX files
    torcia-train --epochs 30 --resume out/checkpoint.pt

Python:

>>> from torcia.vision.train import build_parser
>>> build_parser().parse_args([]).epochs
10
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits
from tqdm import tqdm

import torcia
from torcia import nn
from torcia.data import DataLoader, Subset
from torcia.vision import _registry, datasets, models
from torcia.vision import transforms as T
from torcia.vision._report import draw_report

# per dataset: normalisation (mean, std per channel), input channels, default model
PRESETS = {
    "digits": ((0.3,), (0.4,), 1, "small_cnn"),
    "mnist": ((0.1307,), (0.3081,), 1, "lenet"),
    "fashion_mnist": ((0.2860,), (0.3530,), 1, "lenet"),
    "kmnist": ((0.1918,), (0.3483,), 1, "lenet"),
    "cifar10": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616), 3, "resnet18"),
    "cifar100": ((0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762), 3, "resnet18"),
}
CHECKPOINT = "checkpoint.pt"
# what a checkpoint must match to be resumed from (the learning-rate schedule spans --epochs)
RESUME_KEYS = ("dataset", "model", "epochs", "batch_size", "lr", "optimizer", "weight_decay",
               "limit", "seed")


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``torcia-train``: dataset, model, epochs, optimizer...

    Examples
    --------
    >>> from torcia.vision.train import build_parser
    >>> args = build_parser().parse_args(["--epochs", "3"])
    >>> args.dataset, args.epochs
    ('digits', 3)
    """
    p = argparse.ArgumentParser(
        prog="torcia-train",
        description="Train an image classifier with torcia: a small CNN on the embedded "
                    "8x8 Digits by default, or MNIST-style / CIFAR datasets from files.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--dataset", default="digits",
                   help="a registered dataset: digits (embedded), mnist, fashion_mnist, "
                        "kmnist, cifar10, cifar100, or one a plugin adds")
    p.add_argument("--root", default=None,
                   help="folder with the dataset's files (not needed for digits)")
    p.add_argument("--model", default=None,
                   help="a registered model (default: small_cnn for digits, lenet for the "
                        "MNIST family, resnet18 for CIFAR)")
    p.add_argument("--epochs", type=int, default=10, help="epochs to train in all")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=3e-3, help="peak learning rate")
    p.add_argument("--optimizer", default="adamw", help="a registered optimizer")
    p.add_argument("--weight-decay", type=float, default=1e-4)
    p.add_argument("--seed", type=int, default=0, help="seeds every random choice")
    p.add_argument("--workers", type=int, default=0, help="DataLoader worker processes")
    p.add_argument("--device", default="cpu")
    p.add_argument("--blas-threads", type=int, default=1,
                   help="threads for NumPy's matrix products; small models train fastest "
                        "on one, as BLAS threads spin and contend on small matrices")
    p.add_argument("--out", default="./out", help="folder for checkpoint.pt and report.png")
    p.add_argument("--resume", default=None, metavar="PATH",
                   help="continue from a checkpoint written by an earlier run")
    p.add_argument("--stop-after", type=int, default=None, metavar="EPOCH",
                   help="stop after this epoch, as an interrupted run would (continue it "
                        "with --resume and the same settings)")
    p.add_argument("--limit", type=int, default=None, metavar="N",
                   help="use only the first N training and N test images (quick checks)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    return p


def seed_everything(seed: int) -> None:
    """Seed torcia's, Python's and NumPy's global generators with ``seed``.

    Examples
    --------
    >>> import random
    >>> import torcia
    >>> from torcia.vision.train import seed_everything
    >>> seed_everything(0)
    >>> first = (torcia.rand(1).item(), random.random())
    >>> seed_everything(0)
    >>> first == (torcia.rand(1).item(), random.random())
    True
    """
    torcia.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)


def make_datasets(args, mean, std):
    tf = T.Compose([T.ToTensor(), T.Normalize(mean, std)])
    train = datasets.get_dataset(args.dataset, args.root, train=True, transform=tf)
    test = datasets.get_dataset(args.dataset, args.root, train=False, transform=tf)
    if args.limit is not None:
        train = Subset(train, range(min(args.limit, len(train))))
        test = Subset(test, range(min(args.limit, len(test))))
    return train, test


def classes_of(ds) -> list:
    """The class names of a dataset, or of the dataset a :class:`~torcia.data.Subset` takes
    from.

    Examples
    --------
    >>> from torcia.data import Subset
    >>> from torcia.vision.datasets import Digits
    >>> from torcia.vision.train import classes_of
    >>> classes_of(Subset(Digits(train=False), [0, 1]))[:3]
    ['0', '1', '2']
    """
    return list((ds.dataset if isinstance(ds, Subset) else ds).classes)


def run_epoch(model, loader, loss_fn, device, optimizer=None, desc="", progress=True):
    """One pass over ``loader``: training when ``optimizer`` is given. Returns
    (mean loss, accuracy)."""
    training = optimizer is not None
    model.train(training)
    total_loss, correct, seen = 0.0, 0, 0
    bar = tqdm(loader, desc=desc, unit="batch", leave=False, disable=not progress,
               file=sys.stderr)
    with torcia.set_grad_enabled(training):
        for x, y in bar:
            x, y = x.to(device), y.to(device)
            out = model(x)
            loss = loss_fn(out, y)
            if training:
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            n = len(y)
            total_loss += float(loss.item()) * n
            correct += int((out.argmax(1) == y).sum().item())
            seen += n
            bar.set_postfix(loss=f"{total_loss / seen:.4f}", acc=f"{correct / seen:.3f}")
    return total_loss / seen, correct / seen


def predict(model, images, device):
    model.eval()
    with torcia.no_grad():
        return model(images.to(device)).argmax(1).cpu()


def save_checkpoint(path, model, optimizer, scheduler, epoch, loader_gen, history, args):
    torcia.save({
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "epoch": epoch,
        "rng": {"torcia": torcia.get_rng_state(), "loader": loader_gen.get_state()},
        "history": history,
        "args": {k: getattr(args, k) for k in RESUME_KEYS},
    }, path)


def train(args) -> dict:
    """Run the training that ``args`` (from :func:`build_parser`) describes; returns the
    history (per-epoch losses and accuracies) and where the outputs went."""
    with threadpool_limits(limits=args.blas_threads, user_api="blas"):
        return _train(args)


def _train(args) -> dict:
    if args.dataset not in PRESETS and args.model is None:
        raise SystemExit(f"torcia-train: --model is required for dataset {args.dataset!r}")
    mean, std, channels, default_model = PRESETS.get(args.dataset, ((0.5,), (0.5,), 1, None))
    args.model = args.model or default_model
    seed_everything(args.seed)
    device = torcia.device(args.device)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    train_ds, test_ds = make_datasets(args, mean, std)
    classes = classes_of(test_ds)
    loader_gen = torcia.Generator().manual_seed(args.seed)
    # a last batch of one image cannot be batch-normalised in training: drop it then only
    train_loader = DataLoader(train_ds, batch_size=args.batch_size, shuffle=True,
                              num_workers=args.workers, generator=loader_gen,
                              persistent_workers=args.workers > 0,
                              drop_last=len(train_ds) % args.batch_size == 1)
    test_loader = DataLoader(test_ds, batch_size=256, num_workers=args.workers,
                             persistent_workers=args.workers > 0)

    build_kwargs = {"num_classes": len(classes)}
    if args.model in ("small_cnn", "lenet"):
        build_kwargs["in_channels"] = channels
    model = models.get_model(args.model, **build_kwargs).to(device)
    optimizer = torcia.optim.create(args.optimizer, model.parameters(), lr=args.lr,
                                    weight_decay=args.weight_decay)
    # one-cycle over all epochs: warm up, then anneal (the schedule steps per batch)
    scheduler = torcia.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=args.lr, epochs=args.epochs, steps_per_epoch=len(train_loader))
    loss_fn = nn.CrossEntropyLoss()
    history = {"train_loss": [], "train_acc": [], "test_loss": [], "test_acc": []}
    start = 0

    if args.resume:
        ckpt = torcia.load(args.resume)
        saved = ckpt["args"]
        differ = [k for k in RESUME_KEYS if saved[k] != getattr(args, k)]
        if differ:
            raise SystemExit(f"torcia-train: {args.resume} was written with other settings: "
                             + ", ".join(f"--{k.replace('_', '-')} {saved[k]!r}"
                                         for k in differ))
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        scheduler.load_state_dict(ckpt["scheduler"])
        torcia.set_rng_state(ckpt["rng"]["torcia"])
        loader_gen.set_state(ckpt["rng"]["loader"])
        history = ckpt["history"]
        start = ckpt["epoch"]
        print(f"resumed from {args.resume} after epoch {start}")

    n_params = sum(p.numel() for p in model.parameters())
    print(f"{args.model} ({n_params:,} parameters) on {args.dataset}: {len(train_ds)} train, "
          f"{len(test_ds)} test images; {args.optimizer} lr {args.lr}, batch {args.batch_size}")
    began = time.perf_counter()
    stepping = _StepPerBatch(optimizer, scheduler)
    stop = args.epochs if args.stop_after is None else min(args.stop_after, args.epochs)
    for epoch in range(start, stop):
        tag = f"epoch {epoch + 1}/{args.epochs}"
        tr_loss, tr_acc = run_epoch(model, train_loader, loss_fn, device, stepping,
                                    desc=tag, progress=not args.no_progress)
        te_loss, te_acc = run_epoch(model, test_loader, loss_fn, device, desc="test",
                                    progress=not args.no_progress)
        for key, value in zip(history, (tr_loss, tr_acc, te_loss, te_acc)):
            history[key].append(value)
        print(f"{tag}: train loss {tr_loss:.4f} acc {100 * tr_acc:5.2f}% | test loss "
              f"{te_loss:.4f} acc {100 * te_acc:5.2f}% | {time.perf_counter() - began:.1f}s",
              flush=True)
        save_checkpoint(out / CHECKPOINT, model, optimizer, scheduler, epoch + 1, loader_gen,
                        history, args)

    images, labels = next(iter(DataLoader(test_ds, batch_size=32)))
    preds = predict(model, images, device)
    shown = images.numpy() * np.asarray(std, np.float32)[:, None, None] + \
        np.asarray(mean, np.float32)[:, None, None]
    report = out / "report.png"
    if history["test_acc"]:
        draw_report(report, history, shown, labels.tolist(), preds.tolist(), classes)
        print(f"final test accuracy {100 * history['test_acc'][-1]:.2f}%; wrote "
              f"{out / CHECKPOINT} and {report}")
    return {"history": history, "checkpoint": out / CHECKPOINT, "report": report}


class _StepPerBatch:
    """The optimizer, with the one-cycle schedule stepped after every batch."""

    def __init__(self, optimizer, scheduler):
        self.optimizer, self.scheduler = optimizer, scheduler

    def zero_grad(self):
        self.optimizer.zero_grad()

    def step(self):
        self.optimizer.step()
        self.scheduler.step()


def main(argv=None) -> int:
    """Entry point of the ``torcia-train`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.epochs < 1 or args.batch_size < 1 or not math.isfinite(args.lr) or args.lr <= 0:
        parser.error("--epochs and --batch-size must be positive, --lr a positive number")
    for registry, name in ((_registry.datasets, args.dataset), (_registry.models, args.model)):
        if name is not None:
            try:
                registry.get(name)
            except KeyError as exc:  # the message lists the known names
                parser.error(exc.args[0])
    try:
        train(args)
    except FileNotFoundError as exc:  # a dataset file: the message says which and where
        parser.exit(2, f"torcia-train: error: {exc}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
