"""int8 inference against float32, in torcia and in PyTorch, on the same weights.

Three workloads, each built by the same code for both frameworks and quantized by each
framework's own eager API:

- ``bert``: a BERT-sized encoder (hidden 768, 12 heads, feed-forward 3072, 4 layers),
  batch 4 of sequences of 128, ``quantize_dynamic`` of its Linear layers;
- ``lstm``: a 2-layer LSTM (input 256, hidden 512) over 64 steps, batch 32, then a Linear
  head, ``quantize_dynamic`` of LSTM and Linear;
- ``resnet18``: ResNet-18 (10 classes) on a batch of 8 64x64 images, static post-training
  quantization (conv-bn-relu fused, the residual additions through FloatFunctional, x86's
  default qconfig: histogram activations, per-channel int8 weights), calibrated on 8
  batches.

Each prints, per variant, the median time of a forward pass (torcia float32, torcia int8,
PyTorch float32, PyTorch int8, rounds alternating), then torcia int8 against torcia
float32 (the speed-up quantization buys) and against PyTorch int8, and how far each int8
model's output is from its float32 model's (max |difference| / max |float output|).

    python benchmarks/bench_quant.py [--rounds 7] [--only bert,lstm] [--threads 1]
                                     [--clock cpu]

``--threads`` and ``--clock`` as in ``bench_training.py``: on the shared machine one thread
and the CPU clock compare the work done rather than waiting for a core.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import time
import warnings

import numpy as np

CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def _lib(name):
    if name == "torch":
        import torch

        return torch
    import torcia

    return torcia


def _quant(lib):
    return lib.ao.quantization if lib.__name__ == "torch" else __import__(
        "torcia.ao.quantization", fromlist=["quantization"])


# ---------------------------------------------------------------------------------------
# the models, framework-agnostic
# ---------------------------------------------------------------------------------------


def bert(lib, hidden=768, layers=4, heads=12, ff=3072):
    nn, F = lib.nn, lib.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv, self.proj = nn.Linear(hidden, 3 * hidden), nn.Linear(hidden, hidden)
            self.fc1, self.fc2 = nn.Linear(hidden, ff), nn.Linear(ff, hidden)
            self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.qkv(x).reshape(b, t, 3, heads, c // heads).permute(2, 0, 3, 1, 4)
            att = ((q @ k.transpose(-2, -1)) * (c // heads) ** -0.5).softmax(-1)
            y = (att @ v).transpose(1, 2).reshape(b, t, c)
            x = self.ln1(x + self.proj(y))
            return self.ln2(x + self.fc2(F.gelu(self.fc1(x))))

    return nn.Sequential(*[Block() for _ in range(layers)])


def lstm(lib):
    nn = lib.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(256, 512, num_layers=2, batch_first=True)
            self.head = nn.Linear(512, 64)

        def forward(self, x):
            return self.head(self.lstm(x)[0])

    return Net()


def resnet18(lib, num_classes=10):
    """ResNet-18 written for eager quantization: stubs, fusable conv-bn-relu, residual
    additions through FloatFunctional."""
    nn, tq = lib.nn, _quant(lib)
    ff = lib.ao.nn.quantized.FloatFunctional

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1, self.relu1 = nn.BatchNorm2d(cout), nn.ReLU()
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.down = None if stride == 1 and cin == cout else nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
            self.add = ff()

        def forward(self, x):
            identity = x if self.down is None else self.down(x)
            out = self.bn2(self.conv2(self.relu1(self.bn1(self.conv1(x)))))
            return self.add.add_relu(out, identity)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.quant, self.dequant = tq.QuantStub(), tq.DeQuantStub()
            self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
            self.bn1, self.relu = nn.BatchNorm2d(64), nn.ReLU()
            self.pool = nn.MaxPool2d(3, 2, 1)
            chans = [(64, 64, 1), (64, 128, 2), (128, 256, 2), (256, 512, 2)]
            self.layers = nn.Sequential(*[nn.Sequential(Block(a, b, s), Block(b, b, 1))
                                          for a, b, s in chans])
            self.avg, self.flat = nn.AdaptiveAvgPool2d(1), nn.Flatten()
            self.fc = nn.Linear(512, num_classes)

        def forward(self, x):
            x = self.pool(self.relu(self.bn1(self.conv1(self.quant(x)))))
            return self.dequant(self.fc(self.flat(self.avg(self.layers(x)))))

    return Net()


def _fuse_groups(model):
    groups = [["conv1", "bn1", "relu"]]
    for i, stage in enumerate(model.layers):
        for j, block in enumerate(stage):
            p = f"layers.{i}.{j}"
            groups += [[f"{p}.conv1", f"{p}.bn1", f"{p}.relu1"], [f"{p}.conv2", f"{p}.bn2"]]
            if block.down is not None:
                groups.append([f"{p}.down.0", f"{p}.down.1"])
    return groups


# ---------------------------------------------------------------------------------------
# building both frameworks' models
# ---------------------------------------------------------------------------------------


def _copy_weights(src, dst, torch):
    dst.load_state_dict({k: torch.from_numpy(v.detach().numpy().copy())
                         for k, v in src.state_dict().items()})


def _warm_bn(model, lib, shape):
    """BatchNorm statistics away from 0/1, as a trained model has."""
    model.train()
    with lib.no_grad():
        for _ in range(2):
            model(lib.randn(*shape))
    return model.eval()


def build(name, rng):
    """``{variant: (callable, input)}`` for torcia and PyTorch, float32 and int8."""
    import torch

    import torcia

    shapes = {"bert": (4, 128, 768), "lstm": (32, 64, 256), "resnet18": (8, 3, 64, 64)}
    x = rng.standard_normal(shapes[name]).astype(np.float32)
    torcia.manual_seed(0)
    mine = globals()[name](torcia)
    if name == "resnet18":
        mine = _warm_bn(mine, torcia, shapes[name])
    mine.eval()
    theirs = globals()[name](torch).eval()
    _copy_weights(mine, theirs, torch)
    models = {"torcia float32": (mine, torcia.from_numpy(x)),
              "torch float32": (theirs, torch.from_numpy(x))}
    for label, lib, model in (("torcia", torcia, mine), ("torch", torch, theirs)):
        tq = _quant(lib)
        inp = models[f"{label} float32"][1]
        if name == "resnet18":
            q = tq.fuse_modules(copy.deepcopy(model), _fuse_groups(model))
            q.qconfig = tq.get_default_qconfig("x86")
            q = tq.prepare(q)
            with lib.no_grad():
                for _ in range(8):
                    q(lib.from_numpy(rng.standard_normal(shapes[name]).astype(np.float32)))
            q = tq.convert(q)
        else:
            kinds = {lib.nn.Linear, lib.nn.LSTM} if name == "lstm" else {lib.nn.Linear}
            q = tq.quantize_dynamic(copy.deepcopy(model), kinds, dtype=lib.qint8)
        models[f"{label} int8"] = (q, inp)
    return models


def _output(out):
    return out[0] if isinstance(out, tuple) else out


def run(name, rounds, clock, rng):
    import torch

    import torcia

    models = build(name, rng)
    times = {k: [] for k in models}
    outs = {}
    with torcia.no_grad(), torch.no_grad():
        for label, (model, x) in models.items():
            outs[label] = _output(model(x)).detach().numpy()  # warm-up, and the outputs
        for _ in range(rounds):
            for label, (model, x) in models.items():
                t = clock()
                model(x)
                times[label].append(clock() - t)
    med = {k: statistics.median(v) * 1000 for k, v in times.items()}
    print(f"\n{name}")
    for label, ms in med.items():
        print(f"  {label:15s} {ms:9.2f} ms")
    speedup = med["torcia float32"] / med["torcia int8"]
    print(f"  torcia int8 vs torcia float32: {speedup:.2f}x faster")
    print(f"  torcia int8 / torch int8 time: {med['torcia int8'] / med['torch int8']:.2f}")
    for fw in ("torcia", "torch"):
        ref = outs[f"{fw} float32"]
        err = np.abs(outs[f"{fw} int8"] - ref).max() / np.abs(ref).max()
        print(f"  {fw} int8 output error (max |int8 - float32| / max |float32|): {err:.4f}")
    return med


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--only", default="", help="comma-separated: bert,lstm,resnet18")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--clock", choices=sorted(CLOCKS), default="wall")
    args = p.parse_args(argv)
    import torch

    import torcia

    warnings.filterwarnings("ignore")  # torch's deprecation notes on its eager quantization
    torch.set_num_threads(args.threads)
    torcia.set_num_threads(args.threads)
    torch.backends.quantized.engine = "x86"
    rng = np.random.default_rng(0)
    names = [n for n in args.only.split(",") if n] or ["bert", "lstm", "resnet18"]
    print(f"threads {args.threads}, clock {args.clock}, median of {args.rounds} rounds; "
          f"torcia's int8 GEMM: {_int8_library()}")
    for name in names:
        run(name, args.rounds, CLOCKS[args.clock], rng)


def _int8_library() -> str:
    try:
        from torcia_cpu import _native, _provider
    except ImportError:
        return "none (torcia-cpu not installed): NumPy reference"
    _provider.choose()
    return _native.int8_library()


if __name__ == "__main__":
    main()
