"""Image transforms as functions, on PIL images, NumPy arrays (HWC) and tensors (CHW).

Every function takes and returns the same kind of image. PIL images go through Pillow's own
operations where torchvision uses them (resize, rotate, colour enhancement), so results
match torchvision's PIL path; arrays and tensors go through the NumPy code below, which
follows torchvision's tensor path (the same formulas, roundings and clamps). Tensors may
carry leading batch dimensions (``(..., C, H, W)``).
"""

from __future__ import annotations

import enum
import math
import numbers

import numpy as np
from PIL import Image, ImageEnhance

import torcia


class InterpolationMode(enum.Enum):
    """How pixels are interpolated when an image is resized or rotated.

    Examples
    --------
    >>> from torcia.vision.transforms import InterpolationMode
    >>> InterpolationMode("nearest"), InterpolationMode.BILINEAR.value
    (<InterpolationMode.NEAREST: 'nearest'>, 'bilinear')
    """

    NEAREST = "nearest"
    NEAREST_EXACT = "nearest-exact"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"
    # PIL images only, as in torchvision
    BOX = "box"
    HAMMING = "hamming"
    LANCZOS = "lanczos"


_PIL_MODES = {
    InterpolationMode.NEAREST: Image.Resampling.NEAREST,
    InterpolationMode.BILINEAR: Image.Resampling.BILINEAR,
    InterpolationMode.BICUBIC: Image.Resampling.BICUBIC,
    # PIL's NEAREST samples pixel centres: "nearest-exact" is what it computes
    InterpolationMode.NEAREST_EXACT: Image.Resampling.NEAREST,
    InterpolationMode.BOX: Image.Resampling.BOX,
    InterpolationMode.HAMMING: Image.Resampling.HAMMING,
    InterpolationMode.LANCZOS: Image.Resampling.LANCZOS,
}


# ---------------------------------------------------------------------------------------
# Image kinds: PIL, NumPy HWC, tensor CHW -- every array path works on (..., C, H, W)
# ---------------------------------------------------------------------------------------


def _check_image(img) -> None:
    if not isinstance(img, (Image.Image, np.ndarray, torcia.Tensor)):
        raise TypeError(f"img should be PIL Image, NumPy array or Tensor. Got {type(img)}")


def _as_chw(img):
    """``img`` as a NumPy array of layout (..., C, H, W), and the function that turns such
    an array back into ``img``'s kind."""
    _check_image(img)
    if isinstance(img, torcia.Tensor):
        if img.ndim < 2:
            raise TypeError(f"Tensor is not a torch image: expected at least 2 dimensions, "
                            f"got {img.ndim}")
        arr = img.detach().cpu().numpy()
        if arr.ndim == 2:
            return arr[None], lambda a: torcia.from_numpy(np.ascontiguousarray(a[0]))
        return arr, lambda a: torcia.from_numpy(np.ascontiguousarray(a))
    if isinstance(img, np.ndarray):
        if img.ndim not in (2, 3):
            raise ValueError(f"pic should be 2/3 dimensional. Got {img.ndim} dimensions.")
        if img.ndim == 2:
            return img[None], lambda a: np.ascontiguousarray(a[0])
        return img.transpose(2, 0, 1), lambda a: np.ascontiguousarray(a.transpose(1, 2, 0))
    arr = np.asarray(img)

    def back(a):
        out = Image.fromarray(np.ascontiguousarray(a[0] if a.shape[0] == 1 and arr.ndim == 2
                                                   else a.transpose(1, 2, 0)))
        if img.mode == "P":
            out.putpalette(img.getpalette())
        return out

    return (arr[None] if arr.ndim == 2 else arr.transpose(2, 0, 1)), back


def get_dimensions(img) -> list[int]:
    """``[channels, height, width]`` of an image of any kind.

    Examples
    --------
    >>> import numpy as np
    >>> from torcia.vision.transforms import functional as F
    >>> F.get_dimensions(np.zeros((4, 5, 3), np.uint8))
    [3, 4, 5]
    """
    if isinstance(img, Image.Image):
        return [len(img.getbands()), img.height, img.width]
    arr, _ = _as_chw(img)
    return list(arr.shape[-3:])


def _bound(dtype) -> float:
    return 1.0 if np.issubdtype(dtype, np.floating) else float(np.iinfo(dtype).max)


def _cast_like(values: np.ndarray, dtype, round_ints: bool) -> np.ndarray:
    """Values computed in floating point back to ``dtype`` (integers clamped, and rounded
    or truncated as torchvision's tensor path does for that operation)."""
    if np.issubdtype(dtype, np.floating):
        return values.astype(dtype)
    info = np.iinfo(dtype)
    if round_ints:
        values = np.round(values)
    return np.clip(values, info.min, info.max).astype(dtype)


# ---------------------------------------------------------------------------------------
# Conversions
# ---------------------------------------------------------------------------------------


def _pil_array(pic) -> np.ndarray:
    """A PIL image's pixels in a dtype torcia has: bilevel images as uint8 0/1, 16-bit
    ones as int32 (torchvision's int16 would wrap values above 32767)."""
    arr = np.array(pic)
    if arr.dtype == np.bool_:
        return arr.astype(np.uint8)
    if arr.dtype.kind == "u" and arr.dtype.itemsize > 1:
        return arr.astype(np.int32)
    return arr


def to_tensor(pic) -> torcia.Tensor:
    """A PIL image or HWC array as a CHW tensor; uint8 data becomes float in [0, 1].

    Examples
    --------
    >>> import numpy as np
    >>> from torcia.vision.transforms import functional as F
    >>> F.to_tensor(np.array([[[0, 255]]], np.uint8)).tolist()
    [[[0.0]], [[1.0]]]
    """
    if isinstance(pic, Image.Image):
        arr = _pil_array(pic)
        if pic.mode == "1":
            arr = arr * 255
    elif isinstance(pic, np.ndarray):
        if pic.ndim not in (2, 3):
            raise ValueError(f"pic should be 2/3 dimensional. Got {pic.ndim} dimensions.")
        arr = pic
    else:
        raise TypeError(f"pic should be PIL Image or ndarray. Got {type(pic)}")
    if arr.ndim == 2:
        arr = arr[:, :, None]
    chw = np.ascontiguousarray(arr.transpose(2, 0, 1))
    if chw.dtype == np.uint8:
        dtype = torcia.get_default_dtype().to_numpy()
        return torcia.from_numpy(chw.astype(dtype) / dtype.type(255))
    return torcia.from_numpy(chw)


def pil_to_tensor(pic) -> torcia.Tensor:
    """A PIL image as a CHW tensor of its own dtype (uint8 for "L" and "RGB"), unscaled.

    Examples
    --------
    >>> from PIL import Image
    >>> from torcia.vision.transforms import functional as F
    >>> F.pil_to_tensor(Image.new("RGB", (2, 1), (7, 8, 9))).tolist()
    [[[7, 7]], [[8, 8]], [[9, 9]]]
    """
    if not isinstance(pic, Image.Image):
        raise TypeError(f"pic should be PIL Image. Got {type(pic)}")
    arr = _pil_array(pic)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    return torcia.from_numpy(np.ascontiguousarray(arr.transpose(2, 0, 1)))


def to_pil_image(pic, mode=None) -> Image.Image:
    """A CHW tensor or HWC array as a PIL image (float data is scaled by 255 and truncated,
    after clamping to [0, 1]).

    Examples
    --------
    >>> import torcia
    >>> from torcia.vision.transforms import functional as F
    >>> F.to_pil_image(torcia.ones(3, 2, 4)).size
    (4, 2)
    """
    if isinstance(pic, torcia.Tensor):
        if pic.ndim not in (2, 3):
            raise ValueError(f"pic should be 2/3 dimensional. Got {pic.ndim} dimensions.")
        arr = pic.detach().cpu().numpy()
        arr = arr[None] if arr.ndim == 2 else arr
        arr = arr.transpose(1, 2, 0)
    elif isinstance(pic, np.ndarray):
        if pic.ndim not in (2, 3):
            raise ValueError(f"pic should be 2/3 dimensional. Got {pic.ndim} dimensions.")
        arr = pic[:, :, None] if pic.ndim == 2 else pic
    else:
        raise TypeError(f"pic should be Tensor or ndarray. Got {type(pic)}.")
    if np.issubdtype(arr.dtype, np.floating) and mode != "F":
        arr = (np.clip(arr, 0, 1) * 255).astype(np.uint8)
    if arr.shape[2] == 1:
        arr = arr[:, :, 0]
    elif arr.shape[2] not in (2, 3, 4):
        raise ValueError(f"pic should not have > 4 channels. Got {arr.shape[2]} channels.")
    image = Image.fromarray(np.ascontiguousarray(arr))
    return image if mode is None or image.mode == mode else image.convert(mode)


def normalize(tensor, mean, std, inplace=False) -> torcia.Tensor:
    """``(tensor - mean) / std`` per channel, with torcia ops (gradients flow through).

    Examples
    --------
    >>> import torcia
    >>> from torcia.vision.transforms import functional as F
    >>> F.normalize(torcia.ones(2, 1, 1), [0.5, 0.0], [0.25, 2.0]).flatten().tolist()
    [2.0, 0.5]
    """
    if not isinstance(tensor, torcia.Tensor):
        raise TypeError(f"img should be Tensor Image. Got {type(tensor)}")
    if not tensor.is_floating_point():
        raise TypeError(f"Input tensor should be a float tensor. Got {tensor.dtype}.")
    if tensor.ndim < 3:
        raise ValueError(f"Expected tensor to be a tensor image of size (..., C, H, W). Got "
                         f"tensor.size() = {tuple(tensor.shape)}")
    mean = torcia.as_tensor(mean, dtype=tensor.dtype)
    std = torcia.as_tensor(std, dtype=tensor.dtype)
    if bool((std == 0).any()):
        raise ValueError(f"std evaluated to zero after conversion to {tensor.dtype}, leading "
                         f"to division by zero.")
    if mean.ndim == 1:
        mean = mean.reshape(-1, 1, 1)
    if std.ndim == 1:
        std = std.reshape(-1, 1, 1)
    if inplace:
        return tensor.sub_(mean).div_(std)
    return (tensor - mean) / std


# ---------------------------------------------------------------------------------------
# Geometry
# ---------------------------------------------------------------------------------------


def hflip(img):
    """Flip left to right.

    Examples
    --------
    >>> import numpy as np
    >>> from torcia.vision.transforms import functional as F
    >>> F.hflip(np.array([[1, 2, 3]]))
    array([[3, 2, 1]])
    """
    arr, back = _as_chw(img)
    return back(arr[..., ::-1])


def vflip(img):
    """Flip top to bottom.

    Examples
    --------
    >>> import numpy as np
    >>> from torcia.vision.transforms import functional as F
    >>> F.vflip(np.array([[1], [2]]))
    array([[2],
           [1]])
    """
    arr, back = _as_chw(img)
    return back(arr[..., ::-1, :])


def _parse_padding(padding) -> tuple[int, int, int, int]:
    if isinstance(padding, numbers.Number) and not isinstance(padding, bool):
        padding = [padding]
    if not isinstance(padding, (list, tuple)) or not all(isinstance(p, int) for p in padding):
        raise TypeError("Got inappropriate padding arg: expected an int or a sequence of ints")
    if len(padding) == 1:
        return (padding[0],) * 4
    if len(padding) == 2:
        return padding[0], padding[1], padding[0], padding[1]
    if len(padding) == 4:
        return tuple(padding)
    raise ValueError(f"Padding must be an int or a 1, 2, or 4 element tuple, not a "
                     f"{len(padding)} element tuple")


def _fill_array(fill, channels: int, dtype) -> np.ndarray:
    fill = 0 if fill is None else fill
    values = np.asarray(fill, dtype=np.float64).reshape(-1)
    if values.size not in (1, channels):
        raise ValueError(f"The number of elements in 'fill' does not match the number of "
                         f"channels of the image ({values.size} != {channels})")
    return np.broadcast_to(values, (channels,)).astype(dtype)


def pad(img, padding, fill=0, padding_mode="constant"):
    """Pad the borders: ``padding`` is one int, ``(left/right, top/bottom)`` or
    ``(left, top, right, bottom)``; ``padding_mode`` is "constant" (with ``fill``), "edge",
    "reflect" (without repeating the edge) or "symmetric" (repeating it).

    Examples
    --------
    >>> import numpy as np
    >>> from torcia.vision.transforms import functional as F
    >>> F.pad(np.array([[1, 2]]), [1, 0], padding_mode="reflect")
    array([[2, 1, 2, 1]])
    """
    if padding_mode not in ("constant", "edge", "reflect", "symmetric"):
        raise ValueError("Padding mode should be either constant, edge, reflect or symmetric")
    left, top, right, bottom = _parse_padding(padding)
    arr, back = _as_chw(img)
    # negative padding crops, as in torchvision
    arr = arr[..., max(-top, 0):arr.shape[-2] - max(-bottom, 0),
              max(-left, 0):arr.shape[-1] - max(-right, 0)]
    widths = [(0, 0)] * (arr.ndim - 2) + [(max(top, 0), max(bottom, 0)),
                                          (max(left, 0), max(right, 0))]
    if padding_mode != "constant":
        return back(np.pad(arr, widths, mode=padding_mode))
    fills = _fill_array(fill, arr.shape[-3], arr.dtype)
    out = np.empty(arr.shape[:-2] + tuple(s + a + b for s, (a, b) in
                                          zip(arr.shape[-2:], widths[-2:])), arr.dtype)
    out[...] = fills[:, None, None]
    out[..., widths[-2][0]:widths[-2][0] + arr.shape[-2],
        widths[-1][0]:widths[-1][0] + arr.shape[-1]] = arr
    return back(out)


def crop(img, top: int, left: int, height: int, width: int):
    """The ``height`` x ``width`` region whose top-left pixel is ``(top, left)``; parts
    outside the image are filled with 0.

    Examples
    --------
    >>> import numpy as np
    >>> from torcia.vision.transforms import functional as F
    >>> F.crop(np.arange(9).reshape(3, 3), 1, 1, 2, 2)
    array([[4, 5],
           [7, 8]])
    """
    _, h, w = get_dimensions(img)
    right, bottom = left + width, top + height
    if left < 0 or top < 0 or right > w or bottom > h:
        img = pad(img, [max(-left, 0), max(-top, 0), max(right - w, 0), max(bottom - h, 0)])
        top, left = max(top, 0), max(left, 0)
    arr, back = _as_chw(img)
    return back(arr[..., top:top + height, left:left + width])


def _pair(size, name="size") -> tuple[int, int]:
    if isinstance(size, numbers.Number):
        return int(size), int(size)
    if isinstance(size, (list, tuple)) and len(size) == 1:
        return int(size[0]), int(size[0])
    if isinstance(size, (list, tuple)) and len(size) == 2:
        return int(size[0]), int(size[1])
    raise ValueError(f"Please provide only two dimensions (h, w) for {name}.")


def center_crop(img, output_size):
    """The central ``output_size`` region (padded with 0 where the image is smaller).

    Examples
    --------
    >>> import numpy as np
    >>> from torcia.vision.transforms import functional as F
    >>> F.center_crop(np.arange(16).reshape(4, 4), 2)
    array([[ 5,  6],
           [ 9, 10]])
    """
    th, tw = _pair(output_size, "output_size")
    _, h, w = get_dimensions(img)
    if tw > w or th > h:
        img = pad(img, [(tw - w) // 2 if tw > w else 0, (th - h) // 2 if th > h else 0,
                        (tw - w + 1) // 2 if tw > w else 0, (th - h + 1) // 2 if th > h else 0])
        _, h, w = get_dimensions(img)
        if tw == w and th == h:
            return img
    return crop(img, int(round((h - th) / 2.0)), int(round((w - tw) / 2.0)), th, tw)


def _resize_output_size(h: int, w: int, size, max_size) -> tuple[int, int]:
    if isinstance(size, (list, tuple)) and len(size) == 2:
        if max_size is not None:
            raise ValueError("max_size should only be passed if size specifies the length of "
                             "the smaller edge, i.e. size should be an int or a sequence of "
                             "length 1")
        return int(size[0]), int(size[1])
    if isinstance(size, (list, tuple)):
        if len(size) != 1:
            raise ValueError(f"size must be an int or a 1 or 2 element tuple/list, not a "
                             f"{len(size)} element tuple/list")
        size = size[0]
    short, long = (w, h) if w <= h else (h, w)
    new_short, new_long = size, int(size * long / short)
    if max_size is not None:
        if max_size <= size:
            raise ValueError(f"max_size = {max_size} must be strictly greater than the "
                             f"requested size for the smaller edge size = {size}")
        if new_long > max_size:
            new_short, new_long = int(max_size * new_short / new_long), max_size
    return (new_long, new_short) if w <= h else (new_short, new_long)


def _resample_matrix(n_in: int, n_out: int, mode, antialias: bool) -> np.ndarray:
    """The (n_out, n_in) matrix that resamples one axis.

    Bilinear weights are PIL's (and ``torch.nn.functional.interpolate``'s with
    ``antialias=True``): a triangle filter centred on each output pixel, widened by the
    scale when shrinking so that every input pixel contributes. Without antialiasing, or
    when enlarging, this is plain bilinear interpolation with ``align_corners=False``.
    """
    scale = n_in / n_out
    weights = np.zeros((n_out, n_in))
    if mode in (InterpolationMode.NEAREST, InterpolationMode.NEAREST_EXACT):
        # NEAREST takes the pixel left of each output position (PyTorch's "nearest"),
        # NEAREST_EXACT the one under its centre
        offset = 0.5 if mode == InterpolationMode.NEAREST_EXACT else 0.0
        src = np.floor((np.arange(n_out) + offset) * scale).astype(int)
        weights[np.arange(n_out), np.minimum(src, n_in - 1)] = 1.0
        return weights
    if mode != InterpolationMode.BILINEAR:
        raise ValueError(f"interpolation {mode} is supported for PIL images only; tensors "
                         f"and arrays take NEAREST, NEAREST_EXACT or BILINEAR")
    widen = scale if antialias and scale > 1 else 1.0
    for i in range(n_out):
        center = scale * (i + 0.5)
        lo = max(int(center - widen + 0.5), 0)
        hi = min(int(center + widen + 0.5), n_in)
        j = np.arange(lo, hi)
        w = np.maximum(0.0, 1.0 - np.abs((j - center + 0.5) / widen))
        weights[i, lo:hi] = w / w.sum()
    return weights


def resize(img, size, interpolation=InterpolationMode.BILINEAR, max_size=None,
           antialias=True):
    """Resize to ``size``: ``(h, w)``, or one int that the smaller edge is matched to,
    keeping the aspect ratio (the longer edge capped at ``max_size``).

    Examples
    --------
    >>> import numpy as np
    >>> from torcia.vision.transforms import functional as F
    >>> F.resize(np.array([[0.0, 1.0]], np.float32), [1, 4])
    array([[0.  , 0.25, 0.75, 1.  ]], dtype=float32)
    """
    interpolation = InterpolationMode(interpolation)
    _, h, w = get_dimensions(img)
    oh, ow = _resize_output_size(h, w, size, max_size)
    if (oh, ow) == (h, w):
        return img
    if isinstance(img, Image.Image):
        return img.resize((ow, oh), _PIL_MODES[interpolation])
    arr, back = _as_chw(img)
    rows = _resample_matrix(h, oh, interpolation, antialias)
    cols = _resample_matrix(w, ow, interpolation, antialias)
    out = np.einsum("oh,...hw,pw->...op", rows, arr.astype(np.float64), cols)
    return back(_cast_like(out, arr.dtype, round_ints=True))


def resized_crop(img, top, left, height, width, size,
                 interpolation=InterpolationMode.BILINEAR, antialias=True):
    """:func:`crop`, then :func:`resize` to ``size``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.vision.transforms import functional as F
    >>> img = torcia.arange(16.0).reshape(1, 4, 4)
    >>> F.resized_crop(img, 0, 0, 2, 2, [4, 4], interpolation=F.InterpolationMode.NEAREST)
    tensor([[[0., 0., 1., 1.],
             [0., 0., 1., 1.],
             [4., 4., 5., 5.],
             [4., 4., 5., 5.]]])
    """
    return resize(crop(img, top, left, height, width), size, interpolation,
                  antialias=antialias)


def _rotation_source(h, w, angle, center, expand):
    """For each output pixel, the input coordinates (x, y) it samples, and the output size.

    Coordinates are continuous with pixel centres at ``index + 0.5``, as in PIL; a positive
    angle turns the image counter-clockwise.
    """
    theta = math.radians(angle)
    # rounded as PIL does, so that multiples of 90 degrees are exact
    cos, sin = round(math.cos(theta), 15), round(math.sin(theta), 15)
    cx, cy = (w / 2, h / 2) if center is None else (float(center[0]), float(center[1]))
    oh, ow, ocx, ocy = h, w, cx, cy
    if expand:
        corners = np.array([[0, 0], [w, 0], [w, h], [0, h]], float) - [cx, cy]
        xs = corners[:, 0] * cos + corners[:, 1] * sin
        ys = -corners[:, 0] * sin + corners[:, 1] * cos
        # a tiny tolerance so that 90 degrees (cos ~ 6e-17) does not add a pixel
        if cos in (0, 1, -1):
            # quarter turns: the image transposed, as PIL does them
            ow, oh = (w, h) if sin == 0 else (h, w)
        else:
            # PIL's size: the bounding box of the corners, widened to whole pixels
            ow = math.ceil(round(xs.max() + cx, 9)) - math.floor(round(xs.min() + cx, 9))
            oh = math.ceil(round(ys.max() + cy, 9)) - math.floor(round(ys.min() + cy, 9))
        ocx, ocy = cx + (ow - w) / 2, cy + (oh - h) / 2
    yy, xx = np.meshgrid(np.arange(oh) + 0.5 - ocy, np.arange(ow) + 0.5 - ocx, indexing="ij")
    return cx + xx * cos - yy * sin, cy + xx * sin + yy * cos, oh, ow


def rotate(img, angle, interpolation=InterpolationMode.NEAREST, expand=False, center=None,
           fill=None):
    """Rotate by ``angle`` degrees counter-clockwise about ``center`` (default: the image
    centre); pixels that come from outside the image get ``fill`` (default 0).

    Examples
    --------
    >>> import numpy as np
    >>> from torcia.vision.transforms import functional as F
    >>> F.rotate(np.array([[1, 2], [3, 4]], np.uint8), 90)
    array([[2, 4],
           [1, 3]], dtype=uint8)
    """
    interpolation = InterpolationMode(interpolation)
    if isinstance(img, Image.Image):
        if isinstance(fill, (list, tuple)) and len(fill) == 1:
            fill = fill[0]
        fillcolor = tuple(fill) if isinstance(fill, (list, tuple)) else fill
        return img.rotate(angle, _PIL_MODES[interpolation], expand, center,
                          fillcolor=fillcolor)
    arr, back = _as_chw(img)
    h, w = arr.shape[-2:]
    sx, sy = _rotation_source(h, w, angle, center, expand)[:2]
    fills = _fill_array(fill, arr.shape[-3], np.float64)[:, None, None]
    if interpolation == InterpolationMode.NEAREST:
        # the pixel whose square holds the point, as PIL picks it
        ix, iy = np.floor(sx).astype(int), np.floor(sy).astype(int)
        inside = (ix >= 0) & (ix < w) & (iy >= 0) & (iy < h)
        vals = arr[..., np.clip(iy, 0, h - 1), np.clip(ix, 0, w - 1)].astype(np.float64)
        out = np.where(inside, vals, fills)
    elif interpolation == InterpolationMode.BILINEAR:
        sx, sy = sx - 0.5, sy - 0.5  # to index coordinates, where pixel centres are whole
        x0, y0 = np.floor(sx).astype(int), np.floor(sy).astype(int)
        fx, fy = sx - x0, sy - y0
        out = 0.0
        for dy, wy in ((0, 1 - fy), (1, fy)):
            for dx, wx in ((0, 1 - fx), (1, fx)):
                x, y = x0 + dx, y0 + dy
                inside = (x >= 0) & (x < w) & (y >= 0) & (y < h)
                vals = arr[..., np.clip(y, 0, h - 1), np.clip(x, 0, w - 1)].astype(np.float64)
                out = out + wx * wy * np.where(inside, vals, fills)
    else:
        raise ValueError(f"interpolation {interpolation} is supported for PIL images only")
    return back(_cast_like(out, arr.dtype, round_ints=True))


# ---------------------------------------------------------------------------------------
# Colour
# ---------------------------------------------------------------------------------------


def _gray_chw(arr: np.ndarray) -> np.ndarray:
    """ITU-R 601-2 luma of (..., 3, H, W), truncated back to integer dtypes as torchvision's
    tensor path does; shape (..., 1, H, W)."""
    r, g, b = arr[..., 0, :, :], arr[..., 1, :, :], arr[..., 2, :, :]
    luma = 0.2989 * r.astype(np.float64) + 0.587 * g + 0.114 * b
    if not np.issubdtype(arr.dtype, np.floating):
        luma = np.floor(luma)
    return luma.astype(arr.dtype)[..., None, :, :]


def rgb_to_grayscale(img, num_output_channels: int = 1):
    """Convert to grey with 1 or 3 (identical) output channels.

    Examples
    --------
    >>> import numpy as np
    >>> from torcia.vision.transforms import functional as F
    >>> F.rgb_to_grayscale(np.array([[[100, 100, 100]]], np.uint8))[..., 0]
    array([[99]], dtype=uint8)
    """
    if num_output_channels not in (1, 3):
        raise ValueError("num_output_channels should be either 1 or 3")
    if isinstance(img, Image.Image):
        grey = img.convert("L")
        return Image.merge("RGB", [grey] * 3) if num_output_channels == 3 else grey
    arr, back = _as_chw(img)
    if arr.shape[-3] == 1:
        grey = arr
    elif arr.shape[-3] == 3:
        grey = _gray_chw(arr)
    else:
        raise TypeError(f"Input image tensor permitted channel values are [1, 3], but found "
                        f"{arr.shape[-3]}")
    return back(np.repeat(grey, num_output_channels, axis=-3))


to_grayscale = rgb_to_grayscale


def _blend(a: np.ndarray, b, ratio: float) -> np.ndarray:
    bound = _bound(a.dtype)
    out = np.clip(ratio * a.astype(np.float64) + (1.0 - ratio) * b, 0, bound)
    return _cast_like(out, a.dtype, round_ints=False)


def _check_factor(name: str, value) -> None:
    if value < 0:
        raise ValueError(f"{name} ({value}) is not non-negative.")


def adjust_brightness(img, brightness_factor: float):
    """Multiply the image by ``brightness_factor`` (0 gives black, 1 the original).

    Examples
    --------
    >>> import numpy as np
    >>> from torcia.vision.transforms import functional as F
    >>> F.adjust_brightness(np.array([[[100, 200, 50]]], np.uint8), 1.5)
    array([[[150, 255,  75]]], dtype=uint8)
    """
    _check_factor("brightness_factor", brightness_factor)
    if isinstance(img, Image.Image):
        return ImageEnhance.Brightness(img).enhance(brightness_factor)
    arr, back = _as_chw(img)
    return back(_blend(arr, 0.0, brightness_factor))


def adjust_contrast(img, contrast_factor: float):
    """Blend the image with its mean grey level (0 gives a flat grey image).

    Examples
    --------
    >>> import numpy as np
    >>> from torcia.vision.transforms import functional as F
    >>> F.adjust_contrast(np.array([[0.0, 1.0]], np.float32), 0.5)
    array([[0.25, 0.75]], dtype=float32)
    """
    _check_factor("contrast_factor", contrast_factor)
    if isinstance(img, Image.Image):
        return ImageEnhance.Contrast(img).enhance(contrast_factor)
    arr, back = _as_chw(img)
    grey = _gray_chw(arr) if arr.shape[-3] == 3 else arr
    mean = grey.astype(np.float64).mean(axis=(-3, -2, -1), keepdims=True)
    return back(_blend(arr, mean, contrast_factor))


def adjust_saturation(img, saturation_factor: float):
    """Blend the image with its grey version (0 gives grey, 1 the original).

    Examples
    --------
    >>> import numpy as np
    >>> from torcia.vision.transforms import functional as F
    >>> F.adjust_saturation(np.array([[[1.0, 0.0, 0.0]]], np.float32), 0.0).round(4)
    array([[[0.2989, 0.2989, 0.2989]]], dtype=float32)
    """
    _check_factor("saturation_factor", saturation_factor)
    if isinstance(img, Image.Image):
        return ImageEnhance.Color(img).enhance(saturation_factor)
    arr, back = _as_chw(img)
    if arr.shape[-3] == 1:
        return img
    return back(_blend(arr, _gray_chw(arr), saturation_factor))


def _rgb_to_hsv(rgb: np.ndarray) -> np.ndarray:
    r, g, b = rgb[..., 0, :, :], rgb[..., 1, :, :], rgb[..., 2, :, :]
    maxc, minc = rgb.max(axis=-3), rgb.min(axis=-3)
    delta = maxc - minc
    safe = np.where(delta == 0, 1.0, delta)
    s = delta / np.where(maxc == 0, 1.0, maxc)
    rc, gc, bc = (maxc - r) / safe, (maxc - g) / safe, (maxc - b) / safe
    h = np.where(maxc == r, bc - gc, np.where(maxc == g, 2.0 + rc - bc, 4.0 + gc - rc))
    h = np.where(delta == 0, 0.0, (h / 6.0) % 1.0)
    return np.stack([h, s, maxc], axis=-3)


def _hsv_to_rgb(hsv: np.ndarray) -> np.ndarray:
    h, s, v = hsv[..., 0, :, :], hsv[..., 1, :, :], hsv[..., 2, :, :]
    i = np.floor(h * 6.0)
    f = h * 6.0 - i
    i = i.astype(int) % 6
    p, q, t = v * (1 - s), v * (1 - s * f), v * (1 - s * (1 - f))
    table = [(v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q)]
    return np.stack([np.choose(i, [row[c] for row in table]) for c in range(3)], axis=-3)


def adjust_hue(img, hue_factor: float):
    """Shift the hue by ``hue_factor`` turns of the colour wheel, in [-0.5, 0.5].

    Examples
    --------
    >>> import numpy as np
    >>> from torcia.vision.transforms import functional as F
    >>> F.adjust_hue(np.array([[[1.0, 0.0, 0.0]]], np.float32), 1 / 3).round(4)
    array([[[0., 1., 0.]]], dtype=float32)
    """
    if not -0.5 <= hue_factor <= 0.5:
        raise ValueError(f"hue_factor ({hue_factor}) is not in [-0.5, 0.5].")
    if isinstance(img, Image.Image):
        if img.mode in ("L", "1", "I", "F"):
            return img
        h, s, v = img.convert("HSV").split()
        # uint8 arithmetic wraps around, which is what a turn of the wheel is
        shifted = np.array(h, dtype=np.uint8) + np.array(round(hue_factor * 255)).astype(
            np.uint8)
        hsv = Image.merge("HSV", (Image.fromarray(shifted.astype(np.uint8)), s, v))
        return hsv.convert(img.mode)
    arr, back = _as_chw(img)
    if arr.shape[-3] == 1:
        return img
    bound = _bound(arr.dtype)
    hsv = _rgb_to_hsv(arr.astype(np.float64) / bound)
    hsv[..., 0, :, :] = (hsv[..., 0, :, :] + hue_factor) % 1.0
    rgb = _hsv_to_rgb(hsv)
    if np.issubdtype(arr.dtype, np.floating):
        return back(rgb.astype(arr.dtype))
    # torchvision's float -> uint8 conversion: scale by just under 256, then truncate
    return back(_cast_like(rgb * (bound + 1.0 - 1e-3), arr.dtype, round_ints=False))
