"""Image grids and PNG output."""

from __future__ import annotations

import math

import numpy as np
from PIL import Image

import torcia


def _as_batch(tensor) -> np.ndarray:
    if isinstance(tensor, (list, tuple)):
        if not all(isinstance(t, torcia.Tensor) for t in tensor):
            raise TypeError("tensor or list of tensors expected, got a list holding "
                            f"{sorted({type(t).__name__ for t in tensor})}")
        arr = np.stack([t.detach().cpu().numpy() for t in tensor])
    elif isinstance(tensor, torcia.Tensor):
        arr = tensor.detach().cpu().numpy()
    else:
        raise TypeError(f"tensor or list of tensors expected, got {type(tensor)}")
    if arr.ndim == 2:
        arr = arr[None]
    if arr.ndim == 3:
        arr = arr[None] if arr.shape[0] in (1, 3) else arr[:, None]
    if arr.ndim != 4:
        raise ValueError(f"Expected a 2D, 3D or 4D tensor or a list of 3D tensors, got shape "
                         f"{list(arr.shape)}")
    if arr.shape[1] == 1:  # grey images are shown as RGB, so that grids can mix them
        arr = np.repeat(arr, 3, axis=1)
    return arr.astype(np.float32)


def _rescale(arr: np.ndarray, value_range) -> np.ndarray:
    low, high = (float(arr.min()), float(arr.max())) if value_range is None else value_range
    return (np.clip(arr, low, high) - low) / max(high - low, 1e-5)


def make_grid(tensor, nrow: int = 8, padding: int = 2, normalize: bool = False,
              value_range=None, scale_each: bool = False, pad_value: float = 0.0):
    """Lay images out in a grid, ``nrow`` per row, with ``padding`` pixels between them.

    Parameters
    ----------
    tensor : Tensor or list of Tensor
        A batch (B, C, H, W), one image (C, H, W) or (H, W), or a list of (C, H, W)
        images of one size. One-channel images are repeated into three.
    nrow : int
        Images per row.
    padding : int
        Pixels of ``pad_value`` around and between images.
    normalize : bool
        Shift and scale to [0, 1] from ``value_range`` (default: the images' min and max;
        each image's own with ``scale_each``).

    Returns
    -------
    Tensor
        (3, rows * (H + padding) + padding, nrow * (W + padding) + padding); a single image
        comes back without padding.

    Examples
    --------
    >>> import torcia
    >>> from torcia.vision.utils import make_grid
    >>> make_grid(torcia.zeros(5, 1, 4, 4), nrow=3).shape
    torcia.Size([3, 14, 20])
    """
    arr = _as_batch(tensor)
    if normalize:
        if scale_each:
            arr = np.stack([_rescale(a, value_range) for a in arr])
        else:
            arr = _rescale(arr, value_range)
    if arr.shape[0] == 1:
        return torcia.from_numpy(np.ascontiguousarray(arr[0]))
    n, c, h, w = arr.shape
    cols = min(nrow, n)
    rows = math.ceil(n / cols)
    grid = np.full((c, rows * (h + padding) + padding, cols * (w + padding) + padding),
                   pad_value, np.float32)
    for k in range(n):
        y, x = divmod(k, cols)
        top, left = y * (h + padding) + padding, x * (w + padding) + padding
        grid[:, top:top + h, left:left + w] = arr[k]
    return torcia.from_numpy(grid)


def to_uint8_image(grid) -> Image.Image:
    """A (C, H, W) float tensor in [0, 1] as an 8-bit PIL image (values rounded).

    Examples
    --------
    >>> import numpy as np
    >>> import torcia
    >>> from torcia.vision.utils import to_uint8_image
    >>> image = to_uint8_image(torcia.tensor([[[0.0, 0.5, 1.0]]]))
    >>> image.mode, image.size, np.asarray(image).tolist()
    ('L', (3, 1), [[0, 128, 255]])
    """
    arr = grid.detach().cpu().numpy() if isinstance(grid, torcia.Tensor) else np.asarray(grid)
    arr = np.clip(arr * 255 + 0.5, 0, 255).astype(np.uint8).transpose(1, 2, 0)
    return Image.fromarray(arr[:, :, 0] if arr.shape[2] == 1 else arr)


def save_image(tensor, fp, format=None, **kwargs) -> None:
    """Save a tensor (or batch, laid out with :func:`make_grid` and its ``kwargs``) as an
    image file, PNG unless ``fp``'s suffix or ``format`` says otherwise.

    Examples
    --------
    >>> import os, tempfile, torcia
    >>> from PIL import Image
    >>> from torcia.vision.utils import save_image
    >>> path = os.path.join(tempfile.mkdtemp(), "grid.png")
    >>> save_image(torcia.ones(4, 3, 2, 2), path, nrow=2, padding=1)
    >>> Image.open(path).size
    (7, 7)
    """
    to_uint8_image(make_grid(tensor, **kwargs)).save(fp, format=format)
