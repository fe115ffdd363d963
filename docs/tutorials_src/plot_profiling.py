"""
Profiling a training step and reading the Chrome trace
======================================================

:class:`torcia.profiler.profile` records every op of a block with its time; the table
aggregates them, and the Chrome trace (open it in ``chrome://tracing`` or Perfetto) shows
them on a timeline. Here we read the trace back as JSON and draw that timeline.
"""

import json
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt

import torcia
from torcia import nn

torcia.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
optimizer = torcia.optim.SGD(model.parameters(), lr=0.1)
x, y = torcia.randn(32, 64), torcia.randint(0, 10, (32,))

# %%
# Profile one step; :func:`torcia.profiler.record_function` labels a region.
with torcia.profiler.profile() as prof:
    with torcia.profiler.record_function("forward"):
        loss = nn.functional.cross_entropy(model(x), y)
    with torcia.profiler.record_function("backward"):
        loss.backward()
    with torcia.profiler.record_function("step"):
        optimizer.step()
print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=8))

# %%
# The Chrome trace is a JSON list of events with a start (``ts``) and a duration
# (``dur``), in microseconds.
trace = Path(tempfile.mkdtemp()) / "step.json"
prof.export_chrome_trace(str(trace))
data = json.loads(trace.read_text())
records = data["traceEvents"] if isinstance(data, dict) else data
events = [e for e in records if e.get("ph") == "X"]
print(len(events), "events; the first:", {k: events[0][k] for k in ("name", "ts", "dur")})

# %%
# The timeline: the labelled regions on the top row, the ops below.
start = min(e["ts"] for e in events)
regions = [e for e in events if e["name"] in ("forward", "backward", "step")]
ops = [e for e in events if e not in regions]
colour = {name: f"C{i % 10}" for i, name in enumerate(dict.fromkeys(e["name"] for e in events))}
fig, ax = plt.subplots(figsize=(9, 2.8))
for row, group in ((1, regions), (0, ops)):
    ax.broken_barh([(e["ts"] - start, max(e["dur"], 1)) for e in group], (row - 0.4, 0.8),
                   facecolors=[colour[e["name"]] for e in group])
span = max(e["ts"] + e["dur"] for e in events) - start
for row, group in ((1, regions), (0, ops)):
    labelled_to = 0.0
    for e in sorted(group, key=lambda e: e["ts"]):
        # label the bars wide enough to hold a name and not inside one already labelled
        if e["dur"] > 0.04 * span and e["ts"] >= labelled_to:
            labelled_to = e["ts"] + e["dur"]
            ax.text(e["ts"] - start + e["dur"] / 2, row, e["name"], ha="center", va="center",
                    fontsize=8 if row else 6.5, rotation=0 if row else 90)
ax.set(yticks=[0, 1], yticklabels=["ops", "regions"], xlabel="time (µs)")
fig.tight_layout()
