"""Draw the site's diagrams with matplotlib; ``conf.py`` runs :func:`write` at each build.

- ``parts.svg``: every installed part and the arrows its ``pyproject.toml`` allows (a part
  may import only the parts it declares), read from the installed distributions' metadata,
  so a new part or dependency shows up without editing a picture;
- ``op_path.svg``: the path of one op, ``a * b`` with ``requires_grad``, from the Python call
  to the backward pass.
"""

from __future__ import annotations

import re
from pathlib import Path

import apigen
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402


def dependencies() -> dict[str, set[str]]:
    """Each installed torcia distribution and the torcia distributions it requires."""
    graph = {}
    for dist in apigen.installed().values():
        name = dist.metadata["Name"]
        needs = set()
        for req in dist.requires or []:
            if "extra ==" in req:
                continue
            dep = re.split(r"[\s<>=!~;\[(]", req, maxsplit=1)[0]
            if dep.startswith("torcia"):
                needs.add(dep)
        graph[name] = needs
    for needs in list(graph.values()):
        needs.intersection_update(graph)
    return graph


def reduced(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph without the arrows that a longer path already implies."""

    def reach(name, seen):
        for dep in graph[name]:
            if dep not in seen:
                seen.add(dep)
                reach(dep, seen)
        return seen

    out = {}
    for name, needs in graph.items():
        implied = set()
        for dep in needs:
            implied |= reach(dep, set())
        out[name] = needs - implied
    return out


def _layers(graph: dict[str, set[str]]) -> list[list[str]]:
    depth = {}

    def level(name, seen=()):
        if name not in depth:
            depth[name] = 1 + max((level(d, (*seen, name)) for d in graph[name]
                                   if d not in seen), default=-1)
        return depth[name]

    for name in graph:
        level(name)
    layers = [[] for _ in range(max(depth.values()) + 1)]
    for name in sorted(graph):
        layers[depth[name]].append(name)
    return layers


def _box(ax, x, y, text, width, height=0.5, color="#dbe9f6"):
    ax.add_patch(FancyBboxPatch((x - width / 2, y - height / 2), width, height,
                                boxstyle="round,pad=0.04", fc=color, ec="#2b4a6f", lw=1))
    ax.text(x, y, text, ha="center", va="center", fontsize=8)


def _arrow(ax, start, end, color="#555555", style="-|>", rad=0.0):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle=style, mutation_scale=9, color=color,
                                 lw=0.8, connectionstyle=f"arc3,rad={rad}"))


def draw_parts(path: Path) -> None:
    graph = reduced(dependencies())
    layers = _layers(graph)
    width = max(len(layer) for layer in layers)
    fig, ax = plt.subplots(figsize=(max(8, 1.9 * width), 1.25 * len(layers) + 1))
    where = {}
    for row, layer in enumerate(layers):
        for col, name in enumerate(layer):
            x = (col - (len(layer) - 1) / 2) * 1.9
            where[name] = (x, -row * 1.25)
    for name, needs in graph.items():
        for dep in needs:
            (x0, y0), (x1, y1) = where[name], where[dep]
            _arrow(ax, (x0, y0 + 0.27), (x1, y1 - 0.27))
    for name, (x, y) in where.items():
        plugin = not name.startswith("torcia-") or name.removeprefix("torcia-") not in {
            "core", "autograd", "nn", "optim", "data", "distributed", "vision", "text",
            "distributions"}
        _box(ax, x, y, name, 1.7, color="#fde9c9" if plugin else "#dbe9f6")
    ax.set_xlim(-width * 0.95 - 0.2, width * 0.95 + 0.2)
    ax.set_ylim(-(len(layers) - 1) * 1.25 - 0.6, 0.6)
    ax.set_title("The installed parts; an arrow means 'may import' (declared in its "
                 "pyproject.toml;\narrows implied by a longer path are left out). "
                 "Blue: packages; orange: plugins",
                 fontsize=9)
    ax.axis("off")
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)


OP_PATH = [
    ("Python call", "c = a * b\nTensor.__mul__\ncalls the op 'mul'"),
    ("dispatch modes", "autocast, profiler,\ntracing for export\n(only when active)"),
    ("kernel lookup", "the device's kernel\ntable: the highest\npriority wins"),
    ("kernel", "NumPy reference,\nC++ (torcia-cpu) or\nCuPy (torcia-cuda)"),
    ("autograd record", "node MulBackward0\nsaves a, b and their\nversions: c.grad_fn"),
    ("backward", "the engine runs the\nnodes in reverse;\nAccumulateGrad\nfills a.grad"),
]


def draw_op_path(path: Path) -> None:
    fig, ax = plt.subplots(figsize=(12, 2.9))
    step = 1.85
    for i, (title, body) in enumerate(OP_PATH):
        x = i * step
        _box(ax, x, 0, "", 1.65, height=1.3, color="#e4f2e1" if i < 4 else "#f6dede")
        ax.text(x, 0.45, title, ha="center", va="center", fontsize=8.5, weight="bold")
        ax.text(x, -0.12, body, ha="center", va="center", fontsize=7.5)
        if i:
            _arrow(ax, (x - step + 0.86, 0), (x - 0.86, 0), color="#333333")
    _arrow(ax, ((len(OP_PATH) - 1) * step, -0.68), (2 * step, -0.68), color="#b03030", rad=-0.2)
    ax.text((len(OP_PATH) + 1) * step / 2, -1.25,
            "backward calls the derivative formulas, which are torcia ops dispatched the same way",
            ha="center", fontsize=7.5, color="#b03030")
    ax.set_xlim(-1, (len(OP_PATH) - 1) * step + 1)
    ax.set_ylim(-1.45, 0.8)
    ax.axis("off")
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)


def write(outdir: Path) -> None:
    outdir.mkdir(parents=True, exist_ok=True)
    draw_parts(outdir / "parts.svg")
    draw_op_path(outdir / "op_path.svg")


if __name__ == "__main__":
    write(Path(__file__).parent / "_static" / "diagrams")
