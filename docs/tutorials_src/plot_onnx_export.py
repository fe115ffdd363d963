"""
Exporting to ONNX and running in onnxruntime
============================================

torcia-onnx adds :func:`torcia.onnx.export`, which traces the forward pass into an ONNX
graph. onnxruntime then runs the model without torcia; the outputs agree.
"""

import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import onnxruntime

import torcia
from torcia import nn

torcia.manual_seed(0)
model = nn.Sequential(nn.Linear(1, 32), nn.Tanh(), nn.Linear(32, 1))

# %%
# Fit a curve first, so the exported model computes something worth looking at.
xs = torcia.linspace(-3, 3, 128).reshape(-1, 1)
ys = torcia.sin(xs)
optimizer = torcia.optim.Adam(model.parameters(), lr=0.02)
for _ in range(300):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(xs), ys)
    loss.backward()
    optimizer.step()
print(f"final training loss {loss.item():.4f}")

# %%
# Export: an example input fixes the shapes, ``dynamic_axes`` frees the batch size.
path = Path(tempfile.mkdtemp()) / "sine.onnx"
model.eval()
torcia.onnx.export(model, (xs,), str(path), input_names=["x"], output_names=["y"],
                   dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
print(path.name, path.stat().st_size, "bytes")

# %%
# Run it in onnxruntime, on inputs the export never saw.
session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
grid = np.linspace(-4, 4, 200, dtype=np.float32).reshape(-1, 1)
(onnx_out,) = session.run(None, {"x": grid})
with torcia.no_grad():
    torcia_out = model(torcia.from_numpy(grid)).numpy()
print("largest difference:", float(np.abs(onnx_out - torcia_out).max()))

fig, ax = plt.subplots(figsize=(7, 3))
ax.plot(grid, np.sin(grid), "k:", label="sin")
ax.plot(grid, torcia_out, label="torcia")
ax.plot(grid[::8], onnx_out[::8], "o", ms=3, label="onnxruntime")
ax.legend()
ax.set(xlabel="x", ylabel="y")
fig.tight_layout()
