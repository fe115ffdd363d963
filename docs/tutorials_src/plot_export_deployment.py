"""
Deploying a model: torcia.export and torcia.jit
===============================================

:func:`torcia.export.export` captures a model as one graph of ops with its signature,
parameters and buffers; sizes named with :class:`~torcia.export.Dim` stay dynamic and are
checked on every call. :func:`torcia.export.save` writes it to one file that a process
without the model's code loads and runs. :mod:`torcia.jit` offers TorchScript's names
(``trace``, ``script``, ``save``, ``load``, ``freeze``) on the same programs.
"""

import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import matplotlib.pyplot as plt

import torcia
from torcia import nn
from torcia.export import Dim

torcia.manual_seed(0)


class TinyLM(nn.Module):
    """A one-block causal transformer over a vocabulary of 32 tokens."""

    def __init__(self, vocab=32, d=32, context=16):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(context, d)
        self.block = nn.TransformerEncoderLayer(d, 4, 64, dropout=0.0, batch_first=True)
        self.head = nn.Linear(d, vocab)

    def forward(self, ids):
        t = ids.shape[1]
        x = self.tok(ids) + self.pos(torcia.arange(t))
        mask = torcia.ones(t, t, dtype=torcia.bool).triu(1)
        return self.head(self.block(x, src_mask=mask))


model = TinyLM().eval()
ids = torcia.randint(0, 32, (2, 8))

# %%
# Export with a dynamic batch and sequence length. The graph lists every op with its
# shape, written in the dimensions' names, and the line of the model it came from.
batch, seq = Dim("batch", max=64), Dim("seq", min=2, max=16)
ep = torcia.export.export(model, (ids,), dynamic_shapes={"ids": {0: batch, 1: seq}})
print(ep.range_constraints)
print("\n".join(str(ep.graph).splitlines()[:2] + [line for line in str(ep.graph).splitlines()
                                                  if "reshape" in line][:3]))

# %%
# The program agrees with the model at other sizes, and refuses what it was not made for.
module = ep.module()
with torcia.no_grad():
    for shape in [(1, 3), (5, 16)]:
        x = torcia.randint(0, 32, shape)
        print(shape, (module(x) - model(x)).abs().max().item())
try:
    module(torcia.randint(0, 32, (2, 20)))
except AssertionError as err:
    print(err)

# %%
# Save, then load in a fresh Python process that has never seen ``TinyLM``.
folder = Path(tempfile.mkdtemp())
torcia.export.save(ep, folder / "tiny_lm.pt2")
torcia.save({"ids": ids}, folder / "ids.pt")
script = textwrap.dedent(f"""
    import torcia, torcia.export
    program = torcia.export.load({str(folder / 'tiny_lm.pt2')!r})
    ids = torcia.load({str(folder / 'ids.pt')!r})["ids"]
    with torcia.no_grad():
        print(program.module()(ids).argmax(-1).tolist())
""")
print(subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                     check=True).stdout.strip())
with torcia.no_grad():
    print(model(ids).argmax(-1).tolist())

# %%
# :func:`~torcia.export.unflatten` gives the program back its model's module hierarchy:
# each submodule runs the ops its call ran, and the parent calls it with the model's
# arguments, so a submodule can be called alone or replaced by another module.
unflat = torcia.export.unflatten(torcia.export.load(folder / "tiny_lm.pt2"))
print([name for name, _ in unflat.named_children()], type(unflat.head).__name__)
with torcia.no_grad():
    h = torcia.randn(2, 8, 32)
    print("head alone:", (unflat.head(h) - model.head(h)).abs().max().item())
    unflat.head = model.head  # the eager layer swapped in
    print("swapped:", (unflat(ids) - model(ids)).abs().max().item())

# %%
# Control flow that depends on values cannot be one graph: export names the line.
class Gate(nn.Module):
    def forward(self, x):
        if x.mean() > 0:
            return x.relu()
        return x


try:
    torcia.export.export(Gate(), (torcia.randn(4),))
except torcia.export.ExportError as err:
    print(str(err).splitlines()[-1].strip())

# %%
# TorchScript's names: ``trace`` keeps every size it can dynamic, ``script`` reads the
# source first and refuses the same ``if``, ``freeze`` folds BatchNorm into convolutions.
cnn = nn.Sequential(nn.Conv2d(1, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(),
                    nn.Linear(8 * 6 * 6, 10)).eval()
traced = torcia.jit.trace(cnn, torcia.randn(4, 1, 8, 8))
frozen = torcia.jit.freeze(traced)
print([n.op for n in traced.graph.nodes])
print([n.op for n in frozen.graph.nodes])
try:
    torcia.jit.script(Gate())
except torcia.jit.NotSupportedError as err:
    print(str(err).splitlines()[0])

# %%
# Across batch sizes the exported program's logits are the eager model's.
sizes = [1, 2, 4, 8, 16, 32]
diffs = []
with torcia.no_grad():
    for b in sizes:
        x = torcia.randint(0, 32, (b, 12))
        diffs.append((module(x) - model(x)).abs().max().item() + 1e-12)
fig, ax = plt.subplots(figsize=(5, 3))
ax.semilogy(sizes, diffs, "o-")
ax.set_xlabel("batch size (exported with batch 2)")
ax.set_ylabel("max |program - eager|")
ax.set_title("one exported program, every batch size")
fig.tight_layout()
