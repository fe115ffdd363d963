"""Reading and writing image files, as ``torchvision.io``: images are ``uint8`` tensors of
shape (C, H, W), files and encoded images 1-D ``uint8`` tensors of their bytes.

torchvision decodes with libpng and libjpeg; here Pillow (a dependency of torcia-vision)
does, converting as torchvision asks those libraries to: PNG's grey from colour is libpng's
weighted sum (0.2989, 0.587 and the rest, in 15-bit fixed point, truncated), a palette PNG
read UNCHANGED gives its indices, a 16-bit grey PNG ``uint16`` values; JPEG's grey is
libjpeg's own luma output (Pillow wraps libjpeg too), and JPEG reads UNCHANGED, GRAY or RGB
only. GIF and WebP decode as torchvision's ``decode_gif`` and ``decode_webp`` do. 16-bit
colour PNGs (Pillow reads them as 8 bits) and videos are not read here.

Examples
--------
>>> import torcia
>>> from torcia.vision import io
>>> img = torcia.arange(24, dtype=torcia.uint8).reshape(2, 3, 4).repeat(3, 1, 1)[:3]
>>> data = io.encode_png(img)
>>> data.dtype, data.dim()
(torcia.uint8, 1)
>>> bool(io.decode_image(data).equal(img)), io.decode_image(data, mode="GRAY").shape
(True, torcia.Size([1, 3, 4]))
"""

from __future__ import annotations

import enum
import io as _bytes_io
import os

import numpy as np
from PIL import Image, ImageOps

import torcia

__all__ = ["ImageReadMode", "decode_gif", "decode_image", "decode_jpeg", "decode_png",
           "decode_webp", "encode_jpeg", "encode_png", "read_file", "read_image",
           "write_file", "write_jpeg", "write_png"]


class ImageReadMode(enum.Enum):
    """The channels a decoder returns (torchvision's ``ImageReadMode``).

    ``UNCHANGED``: the file's own (grey 1, grey+alpha 2, colour 3, colour+alpha 4; a
    palette expands to colour); ``GRAY``, ``GRAY_ALPHA``, ``RGB``, ``RGB_ALPHA`` (also
    ``RGBA``) convert to those channels, an absent alpha being opaque (255). The decoders
    also take the members' names as strings (``mode="RGB"``).

    Examples
    --------
    >>> from torcia.vision.io import ImageReadMode
    >>> ImageReadMode.RGBA is ImageReadMode.RGB_ALPHA, ImageReadMode["GRAY"].value
    (True, 1)
    """

    UNCHANGED = 0
    GRAY = 1
    GRAY_ALPHA = 2
    RGB = 3
    RGB_ALPHA = 4
    RGBA = RGB_ALPHA


def _mode(mode) -> ImageReadMode:
    if isinstance(mode, str):
        try:
            return ImageReadMode[mode.upper()]
        except KeyError:
            raise ValueError(f"Unknown image read mode {mode!r}; expected one of "
                             f"{', '.join(ImageReadMode.__members__)}") from None
    if not isinstance(mode, ImageReadMode):
        raise TypeError(f"mode must be an ImageReadMode or its name, got "
                        f"{type(mode).__name__}")
    return mode


# ---------------------------------------------------------------------------------------
# files
# ---------------------------------------------------------------------------------------


def read_file(path) -> torcia.Tensor:
    """The bytes of the file at ``path`` as a 1-D ``uint8`` tensor.

    Examples
    --------
    >>> import os, tempfile
    >>> import torcia
    >>> from torcia.vision import io
    >>> path = os.path.join(tempfile.mkdtemp(), "b.bin")
    >>> io.write_file(path, torcia.tensor([104, 105], dtype=torcia.uint8))
    >>> io.read_file(path).tolist(), open(path, "rb").read()
    ([104, 105], b'hi')
    """
    with open(os.fspath(path), "rb") as f:
        data = f.read()
    return torcia.from_numpy(np.frombuffer(data, dtype=np.uint8).copy())


def _check_bytes(data, what: str = "input") -> np.ndarray:
    if not isinstance(data, torcia.Tensor):
        raise TypeError(f"{what} must be a 1-D uint8 tensor, got {type(data).__name__}")
    if data.dtype != torcia.uint8:
        raise RuntimeError("Expected a torch.uint8 tensor")
    if data.dim() != 1 or data.numel() == 0:
        raise RuntimeError("Expected a non empty 1-dimensional tensor")
    return np.ascontiguousarray(data.detach().cpu().numpy())


def write_file(filename, data) -> None:
    """Write the bytes of ``data`` (a 1-D ``uint8`` tensor) to ``filename``."""
    arr = _check_bytes(data, "data")
    with open(os.fspath(filename), "wb") as f:
        f.write(arr.tobytes())


# ---------------------------------------------------------------------------------------
# decoding
# ---------------------------------------------------------------------------------------


def _open(data: np.ndarray, fmt: str | None = None) -> Image.Image:
    try:
        img = Image.open(_bytes_io.BytesIO(data.tobytes()))
    except Exception as exc:  # Pillow's error for bytes no decoder recognises
        raise RuntimeError(f"Unsupported image file: {exc}") from None
    if fmt is not None and img.format != fmt:
        raise RuntimeError(f"Expected {fmt} data, got {img.format or 'unknown'} data")
    return img


# libpng's weights for torchvision's png_set_rgb_to_gray(0.2989, 0.587), out of 2**15 (its
# fixed-point conversion truncates; so does the weighted sum)
_PNG_GREY = (9794, 19234, 3740)


def _png_grey(rgb: np.ndarray) -> np.ndarray:
    r, g, b = _PNG_GREY
    rgb = rgb.astype(np.uint32)
    grey = (rgb[..., 0] * r + rgb[..., 1] * g + rgb[..., 2] * b) >> 15
    return grey.astype(np.uint8)[..., None]


def _png_channels(img: Image.Image, mode: ImageReadMode) -> np.ndarray:
    """A PNG's pixels as (H, W, C), converted as torchvision asks libpng to: a palette
    stays indices in UNCHANGED, expands (with its transparency) otherwise; the
    transparency chunk of a grey or colour image is not an alpha channel."""
    if img.mode in ("I;16", "I;16B", "I;16L", "I"):  # 16-bit grey: uint16 values
        grey = np.asarray(img).astype(np.uint16)[..., None]
        return _channels_of_grey(grey, mode, 65535)
    if mode is ImageReadMode.UNCHANGED:
        return _hwc(img)
    if img.mode == "P":
        img = img.convert("RGBA" if "transparency" in img.info else "RGB")
    if img.mode in ("1", "L", "LA"):
        grey = _hwc(img.convert("L"))
        alpha = _hwc(img)[..., 1:] if img.mode == "LA" else None
        return _channels_of_grey(grey, mode, 255, alpha)
    rgb = _hwc(img)
    alpha = rgb[..., 3:] if img.mode == "RGBA" else np.full_like(rgb[..., :1], 255)
    if mode is ImageReadMode.GRAY:
        return _png_grey(rgb)
    if mode is ImageReadMode.GRAY_ALPHA:
        return np.concatenate([_png_grey(rgb), alpha], axis=-1)
    if mode is ImageReadMode.RGB:
        return rgb[..., :3]
    return np.concatenate([rgb[..., :3], alpha], axis=-1)


def _channels_of_grey(grey: np.ndarray, mode: ImageReadMode, opaque: int,
                      alpha: np.ndarray | None = None) -> np.ndarray:
    if mode is ImageReadMode.UNCHANGED:
        return grey if alpha is None else np.concatenate([grey, alpha], axis=-1)
    if mode is ImageReadMode.GRAY:
        return grey
    if alpha is None:
        alpha = np.full_like(grey, opaque)
    if mode is ImageReadMode.GRAY_ALPHA:
        return np.concatenate([grey, alpha], axis=-1)
    rgb = np.repeat(grey, 3, axis=-1)
    return rgb if mode is ImageReadMode.RGB else np.concatenate([rgb, alpha], axis=-1)


def _hwc(img: Image.Image) -> np.ndarray:
    arr = np.asarray(img)
    if arr.dtype == bool:  # a 1-bit image: libpng expands it to 0 and 255
        arr = arr.astype(np.uint8) * 255
    return arr[..., None] if arr.ndim == 2 else arr


def _as_chw(arr: np.ndarray) -> torcia.Tensor:
    return torcia.from_numpy(np.ascontiguousarray(arr.transpose(2, 0, 1)))


def _decode(data: np.ndarray, mode, apply_exif_orientation: bool, fmt=None) -> torcia.Tensor:
    mode = _mode(mode)
    img = _open(data, fmt)
    kind = img.format
    if kind == "GIF":
        return _gif(img)
    if kind == "JPEG":
        if mode not in (ImageReadMode.UNCHANGED, ImageReadMode.GRAY, ImageReadMode.RGB):
            raise RuntimeError("The provided mode is not supported for JPEG files")
        if mode is ImageReadMode.GRAY and img.mode != "L":
            img.draft("L", img.size)  # libjpeg's own greyscale output, as torchvision's
    elif kind == "WEBP":
        if mode not in (ImageReadMode.UNCHANGED, ImageReadMode.RGB, ImageReadMode.RGB_ALPHA):
            raise RuntimeError(f"Unsupported mode {mode.name} for WebP: RGB or RGB_ALPHA")
    elif kind != "PNG":
        raise RuntimeError(f"Unsupported image file ({kind}). Only jpeg, png, webp "
                           "and gif are currently supported.")
    if apply_exif_orientation:
        img = ImageOps.exif_transpose(img)
    img.load()
    if kind == "PNG":
        return _as_chw(_png_channels(img, mode))
    if mode is ImageReadMode.UNCHANGED:
        return _as_chw(_hwc(img if img.mode in ("L", "RGB", "RGBA") else img.convert("RGB")))
    return _as_chw(_hwc(img.convert({ImageReadMode.GRAY: "L", ImageReadMode.RGB: "RGB",
                                     ImageReadMode.RGB_ALPHA: "RGBA"}[mode])))


def decode_png(input, mode=ImageReadMode.UNCHANGED,
               apply_exif_orientation: bool = False) -> torcia.Tensor:
    """Decode PNG bytes (a 1-D ``uint8`` tensor) into a (C, H, W) tensor: ``uint8``, or
    ``uint16`` for a 16-bit image.

    Examples
    --------
    >>> import torcia
    >>> from torcia.vision import io
    >>> img = torcia.tensor([[[0, 255], [10, 20]]], dtype=torcia.uint8)
    >>> io.decode_png(io.encode_png(img)).tolist()
    [[[0, 255], [10, 20]]]
    """
    return _decode(_check_bytes(input), mode, apply_exif_orientation, "PNG")


def decode_jpeg(input, mode=ImageReadMode.UNCHANGED, device="cpu",
                apply_exif_orientation: bool = False):
    """Decode JPEG bytes (a 1-D ``uint8`` tensor, or a list of them) into (C, H, W)
    ``uint8`` tensors, on ``device``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.vision import io
    >>> img = torcia.full((3, 8, 8), 128, dtype=torcia.uint8)
    >>> out = io.decode_jpeg(io.encode_jpeg(img, quality=95))
    >>> out.shape, int((out.int() - 128).abs().max()) <= 1
    (torcia.Size([3, 8, 8]), True)
    """
    if isinstance(input, (list, tuple)):
        return [decode_jpeg(x, mode, device, apply_exif_orientation) for x in input]
    out = _decode(_check_bytes(input), mode, apply_exif_orientation, "JPEG")
    return out.to(device)


def _gif(img: Image.Image) -> torcia.Tensor:
    frames = []
    for index in range(getattr(img, "n_frames", 1)):
        img.seek(index)
        frames.append(_hwc(img.convert("RGB")).transpose(2, 0, 1))
    arr = frames[0] if len(frames) == 1 else np.stack(frames)
    return torcia.from_numpy(np.ascontiguousarray(arr))


def decode_gif(input) -> torcia.Tensor:
    """Decode GIF bytes into RGB ``uint8`` pixels: (C, H, W) for one frame, (N, C, H, W)
    for an animation of N frames.

    Examples
    --------
    >>> import io as bytes_io
    >>> import torcia
    >>> from PIL import Image
    >>> from torcia.vision import io
    >>> buf = bytes_io.BytesIO()
    >>> Image.new("RGB", (4, 2), (255, 0, 0)).save(buf, format="GIF")
    >>> gif = torcia.tensor(list(buf.getvalue()), dtype=torcia.uint8)
    >>> io.decode_gif(gif)[:, 0, 0].tolist()
    [255, 0, 0]
    """
    return _gif(_open(_check_bytes(input), "GIF"))


def decode_webp(input, mode=ImageReadMode.UNCHANGED) -> torcia.Tensor:
    """Decode WebP bytes into (C, H, W) ``uint8`` pixels (3 channels, 4 with alpha)."""
    return _decode(_check_bytes(input), mode, False, "WEBP")


def decode_image(input, mode=ImageReadMode.UNCHANGED,
                 apply_exif_orientation: bool = False) -> torcia.Tensor:
    """Decode an image (PNG, JPEG, GIF, WebP and what else Pillow reads) given as its bytes
    (a 1-D ``uint8`` tensor) or as a path, into a (C, H, W) tensor.

    Examples
    --------
    >>> import torcia
    >>> from torcia.vision import io
    >>> img = torcia.zeros(1, 2, 2, dtype=torcia.uint8)
    >>> io.decode_image(io.encode_png(img), mode=io.ImageReadMode.RGB).shape
    torcia.Size([3, 2, 2])
    """
    if isinstance(input, (str, os.PathLike)):
        input = read_file(input)
    return _decode(_check_bytes(input), mode, apply_exif_orientation)


def read_image(path, mode=ImageReadMode.UNCHANGED,
               apply_exif_orientation: bool = False) -> torcia.Tensor:
    """Read an image file into a (C, H, W) tensor: :func:`decode_image` of its bytes.

    Examples
    --------
    >>> import os, tempfile
    >>> import torcia
    >>> from torcia.vision import io
    >>> path = os.path.join(tempfile.mkdtemp(), "x.png")
    >>> io.write_png(torcia.full((3, 2, 5), 7, dtype=torcia.uint8), path)
    >>> io.read_image(path).shape, io.read_image(path, mode="GRAY").unique().tolist()
    (torcia.Size([3, 2, 5]), [7])
    """
    return decode_image(read_file(path), mode, apply_exif_orientation)


# ---------------------------------------------------------------------------------------
# encoding
# ---------------------------------------------------------------------------------------


def _check_image(input, what: str) -> np.ndarray:
    if not isinstance(input, torcia.Tensor):
        raise TypeError(f"{what} expects a tensor, got {type(input).__name__}")
    if input.dtype != torcia.uint8:
        raise RuntimeError(f"Input tensor dtype should be uint8, got {input.dtype}")
    if input.dim() != 3:
        raise RuntimeError(f"Input data should be a 3-dimensional tensor, got "
                           f"{input.dim()} dims.")
    if input.shape[0] not in (1, 3):
        raise RuntimeError(f"The number of channels should be 1 or 3, got: {input.shape[0]}")
    arr = np.ascontiguousarray(input.detach().cpu().numpy().transpose(1, 2, 0))
    return arr[..., 0] if arr.shape[2] == 1 else arr


def _encode(input, what: str, format: str, **options) -> torcia.Tensor:
    """The checked (C, H, W) image encoded by Pillow in ``format``, as a 1-d uint8 tensor."""
    buf = _bytes_io.BytesIO()
    Image.fromarray(_check_image(input, what)).save(buf, format=format, **options)
    return torcia.from_numpy(np.frombuffer(buf.getvalue(), dtype=np.uint8).copy())


def encode_png(input, compression_level: int = 6) -> torcia.Tensor:
    """Encode a (C, H, W) ``uint8`` image of 1 or 3 channels as PNG bytes, with zlib's
    ``compression_level`` (0-9): lossless, so :func:`decode_png` gives the image back.

    Examples
    --------
    >>> import torcia
    >>> from torcia.vision import io
    >>> data = io.encode_png(torcia.zeros(3, 4, 4, dtype=torcia.uint8))
    >>> bytes(data[1:4].tolist())
    b'PNG'
    """
    if not 0 <= compression_level <= 9:
        raise RuntimeError("Compression level should be between 0 and 9")
    return _encode(input, "encode_png", "PNG", compress_level=int(compression_level))


def write_png(input, filename, compression_level: int = 6) -> None:
    """Write a (C, H, W) ``uint8`` image as a PNG file (:func:`encode_png`)."""
    write_file(filename, encode_png(input, compression_level))


def encode_jpeg(input, quality: int = 75):
    """Encode a (C, H, W) ``uint8`` image of 1 or 3 channels (or a list of them) as JPEG
    bytes of ``quality`` 1-100.

    Examples
    --------
    >>> import torcia
    >>> from torcia.vision import io
    >>> data = io.encode_jpeg(torcia.zeros(1, 8, 8, dtype=torcia.uint8))
    >>> data[:2].tolist()
    [255, 216]
    """
    if not 1 <= quality <= 100:
        raise ValueError("Image quality should be a positive number between 1 and 100")
    if isinstance(input, (list, tuple)):
        if not input:
            raise ValueError("encode_jpeg requires at least one input tensor when a list is "
                             "passed")
        return [encode_jpeg(x, quality) for x in input]
    return _encode(input, "encode_jpeg", "JPEG", quality=int(quality))


def write_jpeg(input, filename, quality: int = 75) -> None:
    """Write a (C, H, W) ``uint8`` image as a JPEG file (:func:`encode_jpeg`)."""
    write_file(filename, encode_jpeg(input, quality))
