"""Training-step workloads, torcia (with its C++ plugin) against PyTorch, in one run.

The same code builds each workload for both frameworks (their APIs match), so what is
timed is the framework. Each workload runs in two child processes of its own, one per
framework, started together and then driven in alternating rounds (torcia's round, then
PyTorch's, ``--rounds`` times), so that load from other jobs falls on both alike; the
table shows each framework's median time per step over the rounds, the ratio of the
medians, and each child's peak resident memory (its whole process: interpreter, the
framework and the workload).

    python benchmarks/bench_training.py [--rounds 5] [--only gpt,lstm_lm] [--threads 1]
    python benchmarks/bench_training.py --threads sweep --blas openblas,mkl --clock cpu
    python benchmarks/bench_training.py --only gpt2_infer,gpt2_train --rounds 3  # heavy
    python benchmarks/bench_training.py --profile gpt     # cProfile of torcia's step

``--threads`` sets both frameworks' thread count: one number (default: the CPU count,
what users get), a comma-separated list, or ``sweep`` (1 to the CPU count). With several,
each round times every count in turn in the same children (``set_num_threads`` between
them), the table has a row per count, and a ``scaling`` line per workload shows each
framework's speed-up from the first count to each other one. On a machine shared with
other jobs, one thread compares the work each does without measuring how their threads
wait for each other. ``--numpy`` adds a column for torcia with its plugin blocked
(``TORCIA_DISABLE_PLUGINS=cpu``).
``--clock cpu`` times the child's CPU time (all its threads) instead of the wall clock
(so that a perfectly parallel step costs as much on N threads as on one: the sweep's
scaling is then the parallel overhead, not the speed-up).
``--blas openblas`` (or ``mkl``) runs torcia-cpu's products on that library
(``TORCIA_CPU_BLAS``); ``--blas openblas,mkl`` gives torcia a column for each, in the same
run (``openblas`` is what the default install, without the ``[mkl]`` extra, runs, and
what torcia-cpu picks with it on a CPU that is not Intel's). The last line names the
libraries used.

Workloads:

- ``overhead``: forward+backward of ``(a*b + a).sum()`` on tiny tensors;
- ``mlp``: 784-512-512-10, batch 128, SGD with momentum;
- ``cnn``: conv 1->32, pool, conv 32->64, pool, linear 3136->128->10, batch 64, Adam;
- ``transformer``: 2 ``nn.TransformerEncoderLayer`` (d=128, 4 heads, ReLU, seq 64,
  batch 16), vocab 1000, AdamW;
- ``gpt``: a GPT-style language model as small ones are written: token and position
  embeddings, 2 pre-norm blocks (d=128, 4 heads, seq 64, batch 16: 64 attention matrices
  of 64x64x32 per step) with LayerNorm, causal attention through batched matmuls and a
  masked softmax, a GELU MLP (d -> 4d -> d), AdamW;
- ``lstm``: ``nn.LSTM(64, 128)``, seq 32, batch 32, SGD;
- ``lstm_lm``: a word language model as in Zaremba et al.'s small setup: embedding 1000x200,
  2-layer ``nn.LSTM(200, 200)``, seq 35, batch 20, linear decoder, SGD;
- ``sdpa``: ``F.scaled_dot_product_attention`` forward+backward, causal, (16, 4, 64, 32);
- ``resnet18``: a ResNet-18 (BatchNorm, basic blocks) step, batch 32 of 3x64x64, 100
  classes, SGD with momentum;
- ``textcls``: ``nn.EmbeddingBag`` (vocab 20000, d 64, mean) then a linear classifier
  over 4 classes, 64 bags of about 50 tokens, Adam;
- ``gelu``, ``gelu_tanh``, ``tanh``, ``sigmoid``, ``silu``: forward+backward of the
  activation on 1M float32 elements;
- ``layer_norm``, ``rms_norm``: forward+backward over 1024 rows of 1024 float32, with
  a weight;
- ``gemm1024``, ``gemm2048``: float32 square products, printed as GFLOP/s; also timed on
  NumPy's BLAS and on each torcia column's library called directly (``cblas_sgemm`` of
  the OpenBLAS or MKL torcia-cpu loaded: the library's own rate).

Heavy workloads, run only when named in ``--only`` (minutes a round, gigabytes a child):

- ``gpt2_infer``: a GPT-2-small-sized model (124M parameters: 12 pre-norm blocks, d=768,
  12 heads, vocabulary 50257, tied embedding and head), greedy decoding with a key/value
  cache, batch 1: a 32-token prompt, then 32 tokens one at a time; printed as tokens/s;
- ``gpt2_train``: one AdamW step of that model at batch 8 x 256 tokens.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import math
import os
import pstats
import resource
import statistics
import subprocess
import sys
import time


def _lib(name, threads):
    if name == "torch":
        import torch

        torch.set_num_threads(threads)
        return torch
    if name == "numpy":
        # the BLAS ceiling on the same thread count (read when NumPy loads its OpenBLAS;
        # later counts through threadpoolctl, see _set_threads)
        os.environ["OPENBLAS_NUM_THREADS"] = str(threads)
        import numpy

        return numpy
    if name == "cblas":
        return _CBlas(threads)
    import torcia

    torcia.set_num_threads(threads)
    return torcia


class _CBlas:
    """The BLAS library torcia-cpu chose (``TORCIA_CPU_BLAS``), called straight through its
    ``cblas_sgemm``: the library's own rate, which torcia's products are measured against
    (NumPy's BLAS is another library, and on this machine's AMD CPU MKL's SGEMM runs
    slower than OpenBLAS's, so NumPy is no ceiling for torcia on MKL)."""

    __name__ = "cblas"

    def __init__(self, threads):
        import ctypes

        import torcia_cpu

        if torcia_cpu.blas_library() == "openblas":
            import scipy_openblas32

            lib = ctypes.CDLL(os.path.join(scipy_openblas32.get_lib_dir(),
                                           f"lib{scipy_openblas32.get_library()}.so"))
            self._sgemm = lib.scipy_cblas_sgemm
            self._threads = lib.scipy_openblas_set_num_threads
        else:
            # the libmkl_rt that torcia-cpu loaded (and set its threading layer on)
            with open("/proc/self/maps") as maps:
                path = next(line.split()[-1] for line in maps if "libmkl_rt" in line)
            lib = ctypes.CDLL(path)
            self._sgemm = lib.cblas_sgemm
            self._threads = lib.MKL_Set_Num_Threads
        self._sgemm.restype = None
        self._sgemm.argtypes = [ctypes.c_int] * 6 + [ctypes.c_float, ctypes.c_void_p,
                                                     ctypes.c_int, ctypes.c_void_p,
                                                     ctypes.c_int, ctypes.c_float,
                                                     ctypes.c_void_p, ctypes.c_int]
        self.set_num_threads(threads)

    def set_num_threads(self, threads):
        self._threads(threads)

    def matmul(self, a, b, out):
        """``out = a @ b`` for C-contiguous float32 matrices (row major, no transposes)."""
        m, k = a.shape
        n = b.shape[1]
        self._sgemm(101, 111, 111, m, n, k, 1.0, a.ctypes.data, k, b.ctypes.data, n, 0.0,
                    out.ctypes.data, n)


def _set_threads(lib, threads):
    """Run ``lib``'s next steps on ``threads`` threads; False where that cannot be done."""
    if lib.__name__ != "numpy":
        lib.set_num_threads(threads)
        return True
    try:
        import threadpoolctl
    except ImportError:
        return False
    threadpoolctl.threadpool_limits(threads, user_api="blas")
    return True


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def _train_step(model, opt, inputs, target, loss_fn):
    def step():
        opt.zero_grad()
        loss_fn(model(inputs), target).backward()
        opt.step()

    return step


def overhead(lib):
    a = lib.ones(4, requires_grad=True)
    b = lib.full((4,), 2.0, requires_grad=True)

    def step():
        (a * b + a).sum().backward()

    return step


def mlp(lib):
    nn = lib.nn
    lib.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 10))
    opt = lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = lib.randn(128, 784), lib.randint(0, 10, (128,))
    return _train_step(model, opt, x, y, nn.functional.cross_entropy)


def cnn(lib):
    nn = lib.nn
    lib.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = lib.optim.Adam(model.parameters(), lr=1e-3)
    x, y = lib.randn(64, 1, 28, 28), lib.randint(0, 10, (64,))
    return _train_step(model, opt, x, y, nn.functional.cross_entropy)


def transformer(lib):
    nn = lib.nn
    lib.manual_seed(0)

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(1000, 128)
            layer = nn.TransformerEncoderLayer(128, 4, dim_feedforward=512, dropout=0.0,
                                               batch_first=True, norm_first=True)
            self.body = nn.TransformerEncoder(layer, 2)
            self.head = nn.Linear(128, 1000)

        def forward(self, tokens):
            return self.head(self.body(self.embed(tokens))).reshape(-1, 1000)

    model = LM()
    opt = lib.optim.AdamW(model.parameters(), lr=1e-3)
    tokens = lib.randint(0, 1000, (16, 64))
    target = lib.randint(0, 1000, (16 * 64,))
    return _train_step(model, opt, tokens, target, nn.functional.cross_entropy)


def gpt(lib):
    nn, F = lib.nn, lib.nn.functional
    lib.manual_seed(0)
    vocab, d, heads, seq, batch, layers = 1000, 128, 4, 64, 16, 2

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)
            mask = lib.ones(seq, seq, dtype=lib.bool).tril()
            self.register_buffer("mask", mask.logical_not())

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(x).split(d, dim=2)
            q, k, v = (z.reshape(b, t, heads, d // heads).transpose(1, 2) for z in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // heads))
            att = att.masked_fill(self.mask[:t, :t], float("-inf")).softmax(dim=-1)
            y = (att @ v).transpose(1, 2).reshape(b, t, d)
            return self.proj(y)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.attn = Attention()
            self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.out(F.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
            self.blocks = nn.Sequential(*[Block() for _ in range(layers)])
            self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)
            self.register_buffer("positions", lib.arange(seq))

        def forward(self, tokens):
            x = self.tok(tokens) + self.pos(self.positions[:tokens.shape[1]])
            return self.head(self.ln(self.blocks(x))).reshape(-1, vocab)

    model = GPT()
    opt = lib.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    tokens = lib.randint(0, vocab, (batch, seq))
    target = lib.randint(0, vocab, (batch * seq,))
    return _train_step(model, opt, tokens, target, F.cross_entropy)


def lstm(lib):
    nn = lib.nn
    lib.manual_seed(0)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn, self.head = nn.LSTM(64, 128, batch_first=True), nn.Linear(128, 10)

        def forward(self, x):
            out, _ = self.rnn(x)
            return self.head(out[:, -1])

    model = Model()
    opt = lib.optim.SGD(model.parameters(), lr=0.1)
    x, y = lib.randn(32, 32, 64), lib.randint(0, 10, (32,))
    return _train_step(model, opt, x, y, nn.functional.cross_entropy)


def lstm_lm(lib):
    nn = lib.nn
    lib.manual_seed(0)
    vocab, d, seq, batch = 1000, 200, 35, 20

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, d)
            self.rnn = nn.LSTM(d, d, num_layers=2)
            self.head = nn.Linear(d, vocab)

        def forward(self, tokens):
            out, _ = self.rnn(self.embed(tokens))
            return self.head(out).reshape(-1, vocab)

    model = Model()
    opt = lib.optim.SGD(model.parameters(), lr=1.0)
    tokens = lib.randint(0, vocab, (seq, batch))
    target = lib.randint(0, vocab, (seq * batch,))
    return _train_step(model, opt, tokens, target, nn.functional.cross_entropy)


def sdpa(lib):
    lib.manual_seed(0)
    q, k, v = (lib.randn(16, 4, 64, 32, requires_grad=True) for _ in range(3))
    g = lib.randn(16, 4, 64, 32)

    def step():
        out = lib.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        out.backward(g)
        for t in (q, k, v):
            t.grad = None

    return step


def resnet18(lib):
    nn = lib.nn

    class Basic(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                          nn.BatchNorm2d(cout))

        def forward(self, x):
            y = self.bn1(self.conv1(x)).relu()
            y = self.bn2(self.conv2(y))
            return (y + (x if self.down is None else self.down(x))).relu()

    lib.manual_seed(0)
    stages, cin = [], 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        stages += [Basic(cin, cout, stride), Basic(cout, cout, 1)]
        cin = cout
    model = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                          nn.MaxPool2d(3, 2, 1), *stages, nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(512, 100))
    opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    x, y = lib.randn(32, 3, 64, 64), lib.randint(0, 100, (32,))
    return _train_step(model, opt, x, y, nn.functional.cross_entropy)


def textcls(lib):
    nn = lib.nn
    if not hasattr(nn, "EmbeddingBag"):
        raise NotImplementedError("this torcia has no nn.EmbeddingBag yet")
    lib.manual_seed(0)
    vocab, d, bags, length = 20000, 64, 64, 50

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.bag = nn.EmbeddingBag(vocab, d, mode="mean")
            self.head = nn.Linear(d, 4)

        def forward(self, batch):
            tokens, offsets = batch
            return self.head(self.bag(tokens, offsets))

    model = Model()
    opt = lib.optim.Adam(model.parameters(), lr=1e-3)
    tokens = lib.randint(0, vocab, (bags * length,))
    offsets = lib.arange(0, bags * length, length)
    target = lib.randint(0, 4, (bags,))
    return _train_step(model, opt, (tokens, offsets), target, nn.functional.cross_entropy)


def _gpt2_model(lib, ctx):
    """GPT-2 small's shape (124M parameters) as nanoGPT writes it: fused QKV projection,
    ``F.scaled_dot_product_attention``, tied token embedding and head. ``forward(tokens,
    cache)`` takes and returns a key/value cache per block (a list, None for none)."""
    nn, F = lib.nn, lib.nn.functional
    vocab, d, heads, layers = 50257, 768, 12, 12

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)

        def forward(self, x, past):
            b, t, _ = x.shape
            q, k, v = self.qkv(x).split(d, dim=2)
            q, k, v = (z.reshape(b, t, heads, d // heads).transpose(1, 2) for z in (q, k, v))
            if past is not None:
                k, v = lib.cat([past[0], k], dim=2), lib.cat([past[1], v], dim=2)
            # one query at a time attends to the whole cache: no mask
            y = F.scaled_dot_product_attention(q, k, v, is_causal=t > 1)
            return self.proj(y.transpose(1, 2).reshape(b, t, d)), (k, v)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.attn = Attention()
            self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x, past):
            y, kv = self.attn(self.ln1(x), past)
            x = x + y
            return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh")), kv

    class GPT2(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
            self.blocks = nn.ModuleList([Block() for _ in range(layers)])
            self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)
            self.head.weight = self.tok.weight

        def forward(self, tokens, cache=None):
            start = 0 if cache is None else cache[0][0].shape[2]
            positions = lib.arange(start, start + tokens.shape[1])
            x = self.tok(tokens) + self.pos(positions)
            new = []
            for i, block in enumerate(self.blocks):
                x, kv = block(x, None if cache is None else cache[i])
                new.append(kv)
            return self.head(self.ln(x)), new

    lib.manual_seed(0)
    return GPT2()


def gpt2_infer(lib):
    prompt, new_tokens = 32, gpt2_infer.tokens
    model = _gpt2_model(lib, prompt + new_tokens).eval()
    tokens = lib.randint(0, 50257, (1, prompt))

    def step():
        with lib.no_grad():
            logits, cache = model(tokens)
            for _ in range(new_tokens):
                nxt = logits[:, -1].argmax(dim=-1, keepdim=True)
                logits, cache = model(nxt, cache)

    return step


gpt2_infer.tokens = 32  # generated per step: the table adds tokens/s


def gpt2_train(lib):
    batch, seq = 8, 256
    model = _gpt2_model(lib, seq)
    opt = lib.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    tokens = lib.randint(0, 50257, (batch, seq))
    target = lib.randint(0, 50257, (batch * seq,))

    def loss_fn(out, target):
        return lib.nn.functional.cross_entropy(out[0].reshape(-1, 50257), target)

    return _train_step(model, opt, tokens, target, loss_fn)


def _activation(fn):
    def workload(lib):
        lib.manual_seed(0)
        x = lib.randn(1 << 20, requires_grad=True)
        g = lib.randn(1 << 20)

        def step():
            fn(lib, x).backward(g)
            x.grad = None

        return step

    return workload


def _gemm(n):
    def workload(lib):
        if lib.__name__ == "cblas":
            import numpy

            a = numpy.random.default_rng(0).random((n, n), dtype=numpy.float32)
            b, out = a.copy(), numpy.empty_like(a)
            return lambda: lib.matmul(a, b, out)
        if lib.__name__ == "numpy":
            a = lib.random.default_rng(0).random((n, n), dtype=lib.float32)
        else:
            a = lib.rand(n, n)
        b = a.copy() if lib.__name__ == "numpy" else a.clone()
        return lambda: a @ b

    return workload


def _norm(name):
    def workload(lib):
        lib.manual_seed(0)
        norm = getattr(lib.nn.functional, name)
        x = lib.randn(1024, 1024, requires_grad=True)
        w = lib.ones(1024, requires_grad=True)
        g = lib.randn(1024, 1024)

        def step():
            norm(x, (1024,), w).backward(g)
            x.grad = w.grad = None

        return step

    return workload


WORKLOADS = {
    "overhead": overhead, "mlp": mlp, "cnn": cnn, "transformer": transformer, "gpt": gpt,
    "lstm": lstm, "lstm_lm": lstm_lm, "sdpa": sdpa, "resnet18": resnet18,
    "textcls": textcls,
    "gelu": _activation(lambda lib, x: lib.nn.functional.gelu(x)),
    "gelu_tanh": _activation(lambda lib, x: lib.nn.functional.gelu(x, approximate="tanh")),
    "tanh": _activation(lambda lib, x: x.tanh()),
    "sigmoid": _activation(lambda lib, x: x.sigmoid()),
    "silu": _activation(lambda lib, x: lib.nn.functional.silu(x)),
    "layer_norm": _norm("layer_norm"), "rms_norm": _norm("rms_norm"),
    "gemm1024": _gemm(1024), "gemm2048": _gemm(2048),
    "gpt2_infer": gpt2_infer, "gpt2_train": gpt2_train,
}
#: Workloads run only when ``--only`` names them.
HEAVY = ("gpt2_infer", "gpt2_train")
#: Each round runs a workload's step for at least this long.
ROUND_SECONDS = 0.25
#: The pause before each round on several threads: a BLAS's threads keep spinning after
#: its last product (NumPy's OpenBLAS held a core for 0.1 s, measured), and on the previous
#: contender's cores they slowed the next one (the direct ``cblas_sgemm`` on two threads
#: ran 0.74x its one-thread speed when it followed NumPy's round, 1.9x alone).
SETTLE_SECONDS = 0.2


def _child(lib_name, name, clock_name, threads):
    """Serve rounds of one workload over stdin/stdout: a line "round N" times one round on
    N threads and answers its seconds per step (or null where N threads cannot be set);
    end of input answers the peak RSS in bytes."""
    clock = CLOCKS[clock_name]
    try:
        lib = _lib(lib_name, threads)
        step = WORKLOADS[name](lib)
    except (AttributeError, ImportError, NotImplementedError, TypeError) as exc:
        print(json.dumps({"skip": f"{type(exc).__name__}: {exc}"[:90]}), flush=True)
        return
    # the first steps fill caches and pools, and take several times a step's time: a round's
    # length is set from a step after them, or rounds would be shorter than ROUND_SECONDS
    steps, start = 0, clock()
    while steps < 2 or clock() - start < ROUND_SECONDS:
        step()
        steps += 1
    start = clock()
    step()
    number = max(1, int(ROUND_SECONDS / max(clock() - start, 1e-7)))
    print(json.dumps({"ready": number}), flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] != "round":
            break
        if not _set_threads(lib, int(words[1])):
            print(json.dumps({"seconds": None}), flush=True)
            continue
        start = clock()
        for _ in range(number):
            step()
        print(json.dumps({"seconds": (clock() - start) / number}), flush=True)
    print(json.dumps({"rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}),
          flush=True)


def _spawn(contender, name, clock_name, threads):
    """A child running ``name`` for ``contender``: "torch", "numpy", "torcia",
    "torcia-numpy" (its plugin blocked), "torcia:BLAS" (torcia-cpu's products on BLAS) or
    "cblas[:BLAS]" (that library's ``cblas_sgemm``, called directly)."""
    env = dict(os.environ)
    child, _, blas = contender.partition(":")
    if blas:
        env["TORCIA_CPU_BLAS"] = blas
    if child == "torcia-numpy":
        child = "torcia"
        env["TORCIA_DISABLE_PLUGINS"] = ",".join(
            filter(None, [env.get("TORCIA_DISABLE_PLUGINS"), "cpu"]))
    cmd = [sys.executable, __file__, "--child", child, "--only", name, "--clock", clock_name,
           "--threads", str(threads)]
    return subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env=env)


def _answer(proc):
    line = proc.stdout.readline()
    if not line:
        raise SystemExit(f"benchmark child {proc.args[3:]} failed")
    return json.loads(line)


def measure(name, contenders, rounds, clock_name, thread_counts):
    """{contender: {"median": {threads: s}, "rss": bytes} or {"skip": reason}} for one
    workload: each round runs every contender at every thread count in turn."""
    # started on the most threads: OpenBLAS (NumPy's) cannot grow past its count at load
    procs = {c: _spawn(c, name, clock_name, max(thread_counts)) for c in contenders}
    out, live = {}, {}
    for c, proc in procs.items():
        first = _answer(proc)
        if "skip" in first:
            out[c] = first
        else:
            live[c], out[c] = proc, {"times": {n: [] for n in thread_counts}}
    for _ in range(rounds):
        for n in thread_counts:
            for c, proc in live.items():
                if n > 1:
                    time.sleep(SETTLE_SECONDS)
                proc.stdin.write(f"round {n}\n")
                proc.stdin.flush()
                seconds = _answer(proc)["seconds"]
                if seconds is not None:
                    out[c]["times"][n].append(seconds)
    for c, proc in live.items():
        proc.stdin.close()
        out[c]["rss"] = _answer(proc)["rss"]
        out[c]["median"] = {n: statistics.median(t) for n, t in out[c]["times"].items() if t}
    for proc in procs.values():
        proc.wait()
    return out


def profile(name, threads, steps=20, top=25):
    """Print cProfile's top functions (by own time) over ``steps`` torcia steps."""
    step = WORKLOADS[name](_lib("torcia", threads))
    step()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(steps):
        step()
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(top)


def _ms(entry, threads):
    seconds = entry.get("median", {}).get(threads)
    return "n/a" if seconds is None else f"{seconds * 1e3:.3f} ms"


def _blas_library(blas):
    """The BLAS library torcia-cpu runs its products on in a child like the workloads'."""
    env = dict(os.environ)
    if blas:
        env["TORCIA_CPU_BLAS"] = blas
    code = "import torcia_cpu; print(torcia_cpu.blas_library())"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env)
    # MKL's version string runs on past its version ("-Product Build ... applications")
    return proc.stdout.strip().split("-Product")[0] or "NumPy's BLAS (torcia-cpu not loaded)"


def _mib(entry):
    return "" if "rss" not in entry else f"{entry['rss'] / 2 ** 20:.0f}"


def _thread_counts(text):
    cpus = os.cpu_count() or 1
    if text == "sweep":
        return list(range(1, cpus + 1))
    try:
        counts = [int(n) for n in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number, a list or 'sweep', got {text!r}") from None
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"thread counts must be at least 1, got {text!r}")
    return counts


def _extras(name, res, torcias, threads):
    """What follows a workload's row: GEMM's GFLOP/s, decoding's tokens/s."""
    if name.startswith("gemm"):
        n = int(name[4:])
        flops = {c: 2 * n ** 3 / res[c]["median"][threads] / 1e9 for c in res
                 if threads in res[c].get("median", {})}
        if "numpy" not in flops:
            return ""
        text = "   GFLOP/s " + ", ".join(f"{c} {v:.0f}" for c, v in flops.items())
        for c in torcias:
            own = "cblas" + c[6:]
            if c in flops and own in flops:
                text += f"; {c} at {flops[c] / flops[own]:.0%} of its library's own rate"
        return text
    tokens = getattr(WORKLOADS[name], "tokens", None)
    if tokens:
        rates = {c: tokens / res[c]["median"][threads] for c in res
                 if threads in res[c].get("median", {})}
        return "   tokens/s " + ", ".join(f"{c} {v:.1f}" for c, v in rates.items())
    return ""


def _scaling(res, thread_counts):
    """Each contender's speed-up from the first thread count to each other one."""
    base, parts = thread_counts[0], []
    for c, entry in res.items():
        med = entry.get("median", {})
        if base in med:
            ups = "/".join(f"{med[base] / med[n]:.2f}" if n in med else "n/a"
                           for n in thread_counts[1:])
            parts.append(f"{c} {ups}")
    counts = "/".join(str(n) for n in thread_counts[1:])
    return f"{'':<12}scaling {base}->{counts} threads: " + ", ".join(parts)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", default=",".join(w for w in WORKLOADS if w not in HEAVY),
                        help="comma-separated workloads (default: all but "
                             f"{', '.join(HEAVY)})")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="time the wall clock (default) or the process's CPU time")
    parser.add_argument("--threads", type=_thread_counts, default=[os.cpu_count() or 1],
                        help="threads for both frameworks: a number (default: the CPU "
                             "count), a comma-separated list, or 'sweep' (1 to the CPU count)")
    parser.add_argument("--numpy", action="store_true",
                        help="add torcia with its plugin blocked")
    parser.add_argument("--blas", default=None,
                        help="torcia-cpu's BLAS library: auto, openblas or mkl, or several "
                             "separated by commas, a torcia column each (default: "
                             "TORCIA_CPU_BLAS, or auto)")
    parser.add_argument("--profile", metavar="WORKLOAD",
                        help="print a cProfile of torcia's step instead of the table")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    names = [n for n in args.only.split(",") if n]
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        parser.error(f"unknown workloads {unknown}; known: {', '.join(WORKLOADS)}")
    blases = [b.strip() for b in args.blas.split(",")] if args.blas else []
    if any(b not in ("auto", "openblas", "mkl") for b in blases):
        parser.error(f"--blas: expected auto, openblas or mkl, got {args.blas!r}")
    if args.child:
        _child(args.child, names[0], args.clock, args.threads[0])
        return 0
    if args.profile:
        if len(blases) == 1:
            os.environ["TORCIA_CPU_BLAS"] = blases[0]
        profile(args.profile, args.threads[0])
        return 0
    torcias = [f"torcia:{b}" for b in blases] if len(blases) > 1 else ["torcia"]
    if len(blases) == 1:
        os.environ["TORCIA_CPU_BLAS"] = blases[0]  # the children inherit it
    contenders = torcias + ["torch"] + (["torcia-numpy"] if args.numpy else [])
    counts = args.threads
    width = max(13, *(len(c) + 2 for c in contenders))
    header = f"{'workload':<12}{'threads':>8}" + "".join(f"{c:>{width}}" for c in contenders)
    header += "".join(f"{'ratio' + c[6:]:>{max(8, len(c))}}" for c in torcias)
    rss_width = width + 4
    header += "".join(f"{'rss ' + c:>{rss_width}}" for c in contenders)
    print(header + "   (median of rounds; RSS in MiB)", flush=True)
    for name in names:
        # the ceilings: NumPy's BLAS, and each torcia column's library called directly
        extra = ["numpy"] + ["cblas" + c[6:] for c in torcias] if name.startswith("gemm") else []
        res = measure(name, contenders + extra, args.rounds, args.clock, counts)
        for n in counts:
            row = f"{name:<12}{n:>8}" + "".join(f"{_ms(res[c], n):>{width}}"
                                               for c in contenders)
            theirs = res["torch"].get("median", {}).get(n)
            for c in torcias:
                ours = res[c].get("median", {}).get(n)
                ratio = "" if ours is None or theirs is None else f"{ours / theirs:.2f}x"
                row += f"{ratio:>{max(8, len(c))}}"
            if n == counts[-1]:
                row += "".join(f"{_mib(res[c]):>{rss_width}}" for c in contenders)
            print(row + _extras(name, res, torcias, n), flush=True)
        if len(counts) > 1:
            print(_scaling(res, counts), flush=True)
        for c, entry in res.items():
            if "skip" in entry:
                print(f"{'':<12}  {c}: skipped: {entry['skip']}", flush=True)
    libraries = "; ".join(f"{c}'s products on {_blas_library(c[7:] or None)}" for c in torcias)
    print("ratio: torcia's median time / PyTorch's; below 1 means torcia is faster. "
          f"{args.rounds} alternating rounds of at least {ROUND_SECONDS} s each "
          f"({args.clock} clock), {'/'.join(map(str, counts))} thread(s) for both; "
          f"{libraries}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
