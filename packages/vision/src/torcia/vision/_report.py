"""The training report PNG, drawn with Pillow: loss and accuracy curves per epoch, and a
grid of test images with their predicted labels (green when right, red when wrong).

Pillow is already a dependency for images; drawing a few lines and labels with it avoids
pulling in matplotlib for one figure.
"""

from __future__ import annotations

import math

import numpy as np
from PIL import Image, ImageDraw, ImageFont

COLOURS = {"train": (31, 119, 180), "test": (255, 127, 14)}
GREEN, RED, GREY, BLACK = (0, 140, 0), (200, 0, 0), (200, 200, 200), (0, 0, 0)


def _font(size: int):
    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1 has one bitmap size
        return ImageFont.load_default()


def _nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    if high - low < 1e-12:
        low, high = low - 0.5, high + 0.5
    step = 10 ** math.floor(math.log10((high - low) / count))
    for factor in (1, 2, 5, 10):
        if (high - low) / (step * factor) <= count:
            step *= factor
            break
    first = math.floor(low / step) * step
    return [first + i * step for i in range(int(math.ceil((high - first) / step)) + 1)]


def draw_chart(draw, box, title: str, series: dict, font) -> None:
    """Line chart of each ``series[name]`` (one value per epoch) inside ``box``."""
    left, top, right, bottom = box
    values = [v for vs in series.values() for v in vs]
    ticks = _nice_ticks(min(values), max(values))
    lo, hi = ticks[0], ticks[-1]
    epochs = max(len(vs) for vs in series.values())
    px0, py0, px1, py1 = left + 50, top + 24, right - 10, bottom - 40

    def xy(i, v):
        x = px0 + (px1 - px0) * (i / max(epochs - 1, 1))
        return x, py1 - (py1 - py0) * (v - lo) / (hi - lo)

    draw.text((left + 50, top + 2), title, fill=BLACK, font=font)
    for t in ticks:
        y = xy(0, t)[1]
        draw.line([(px0, y), (px1, y)], fill=GREY)
        draw.text((left + 2, y - 7), f"{t:.3g}", fill=BLACK, font=font)
    draw.rectangle([px0, py0, px1, py1], outline=BLACK)
    for i in range(epochs):
        x = xy(i, lo)[0]
        if epochs <= 12 or i % math.ceil(epochs / 12) == 0:
            draw.text((x - 4, py1 + 4), str(i + 1), fill=BLACK, font=font)
    draw.text(((px0 + px1) / 2 - 16, py1 + 16), "epoch", fill=BLACK, font=font)
    for k, (name, vs) in enumerate(series.items()):
        points = [xy(i, v) for i, v in enumerate(vs)]
        if len(points) > 1:
            draw.line(points, fill=COLOURS[name], width=2)
        for x, y in points:
            draw.ellipse([x - 2, y - 2, x + 2, y + 2], fill=COLOURS[name])
        draw.text((px1 - 60, py0 + 4 + 14 * k), name, fill=COLOURS[name], font=font)


def draw_report(path, history: dict, images: np.ndarray, labels, preds, classes) -> None:
    """Write the report PNG.

    ``history`` maps ``train_loss``, ``test_loss``, ``train_acc``, ``test_acc`` to lists
    (one value per epoch); ``images`` is (N, H, W) or (N, C, H, W) in [0, 1].
    """
    font = _font(13)
    cell, cols = 56, 8
    n = min(len(images), 32)
    rows = math.ceil(n / cols)
    grid_w = cols * cell + 20
    width, height = 440 + grid_w, max(560, rows * (cell + 18) + 40)
    canvas = Image.new("RGB", (width, height), (255, 255, 255))
    draw = ImageDraw.Draw(canvas)
    draw_chart(draw, (0, 0, 430, height // 2), "loss",
               {"train": history["train_loss"], "test": history["test_loss"]}, font)
    draw_chart(draw, (0, height // 2, 430, height), "accuracy (%)",
               {"train": [100 * a for a in history["train_acc"]],
                "test": [100 * a for a in history["test_acc"]]}, font)
    draw.text((450, 4), "test images: predicted label (true label where wrong)", fill=BLACK,
              font=font)
    for k in range(n):
        img = np.asarray(images[k], np.float32)
        img = img.transpose(1, 2, 0) if img.ndim == 3 else img
        img = np.clip(img * 255 + 0.5, 0, 255).astype(np.uint8)
        if img.ndim == 3 and img.shape[2] == 1:
            img = img[:, :, 0]
        tile = Image.fromarray(img).convert("RGB").resize((cell - 8, cell - 8),
                                                          Image.Resampling.NEAREST)
        y, x = divmod(k, cols)
        ox, oy = 450 + x * cell, 24 + y * (cell + 18)
        canvas.paste(tile, (ox, oy))
        right = int(preds[k]) == int(labels[k])
        text = str(classes[int(preds[k])])[:7]
        if not right:
            text += f" ({str(classes[int(labels[k])])[:7]})"
        draw.text((ox, oy + cell - 6), text, fill=GREEN if right else RED, font=font)
    canvas.save(path, format="PNG")
