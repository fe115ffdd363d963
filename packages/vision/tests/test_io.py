"""torcia.vision.io (torchvision.io's image functions): lossless round trips over generated
images, the conversions torchvision asks libpng and libjpeg for, derived here by hand, and
torchvision's errors."""

import io as bytes_io

import numpy as np
import pytest
from PIL import Image

import torcia
from torcia.vision import io


def _images():
    rng = np.random.default_rng(0)
    for channels in (1, 3):
        for shape in ((1, 1), (5, 7), (16, 3)):
            yield rng.integers(0, 256, (channels, *shape), dtype=np.uint8)
    yield np.zeros((3, 2, 2), dtype=np.uint8)
    yield np.full((1, 3, 3), 255, dtype=np.uint8)


def _bytes(img: Image.Image, fmt: str, **options) -> torcia.Tensor:
    buf = bytes_io.BytesIO()
    img.save(buf, format=fmt, **options)
    return torcia.tensor(list(buf.getvalue()), dtype=torcia.uint8)


@pytest.mark.parametrize("arr", list(_images()), ids=lambda a: "x".join(map(str, a.shape)))
def test_png_round_trip_is_lossless(arr, tmp_path):
    img = torcia.from_numpy(arr)
    for level in (0, 6, 9):
        assert io.decode_png(io.encode_png(img, compression_level=level)).equal(img)
    path = tmp_path / "x.png"
    io.write_png(img, str(path))
    back = io.read_image(str(path))
    assert back.dtype == torcia.uint8 and back.equal(img)
    assert io.decode_image(path).equal(img)  # a path is read too


def test_modes_convert_as_libpng_does():
    rng = np.random.default_rng(1)
    rgb = rng.integers(0, 256, (3, 6, 5), dtype=np.uint8)
    data = io.encode_png(torcia.from_numpy(rgb))
    r, g, b = (rgb[i].astype(np.uint32) for i in range(3))
    # png_set_rgb_to_gray(0.2989, 0.587): coefficients 0.2989 * 2**15 and 0.587 * 2**15
    # truncated (9794, 19234), blue the rest of 2**15 (3740); the sum shifted, not rounded
    grey = (9794 * r + 19234 * g + 3740 * b) >> 15
    assert io.decode_png(data, mode=io.ImageReadMode.GRAY)[0].numpy().tolist() == grey.tolist()
    ga = io.decode_png(data, mode="gray_alpha").numpy()
    assert ga.shape == (2, 6, 5) and (ga[1] == 255).all() and (ga[0] == grey).all()
    rgba = io.decode_png(data, mode=io.ImageReadMode.RGBA).numpy()
    assert (rgba[:3] == rgb).all() and (rgba[3] == 255).all()
    grey_png = io.encode_png(torcia.from_numpy(rgb[:1]))
    assert (io.decode_png(grey_png, mode="RGB").numpy() == np.repeat(rgb[:1], 3, 0)).all()


def test_palette_16_bit_and_alpha_pngs():
    # a palette image: UNCHANGED gives its indices, a colour mode its colours
    pal = Image.new("P", (3, 2))
    pal.putpalette([10, 20, 30, 200, 100, 0] + [0] * 762)
    pal.putdata([0, 1, 1, 0, 1, 0])
    data = _bytes(pal, "PNG")
    assert io.decode_png(data).tolist() == [[[0, 1, 1], [0, 1, 0]]]
    assert io.decode_png(data, mode="RGB")[:, 0, 1].tolist() == [200, 100, 0]
    # 16-bit grey: uint16 values
    deep = np.array([[0, 1000], [65535, 7]], dtype=np.uint16)
    data = _bytes(Image.fromarray(deep), "PNG")
    got = io.decode_png(data)
    assert got.dtype == torcia.uint16 and got[0].numpy().tolist() == deep.tolist()
    # an alpha channel is kept by UNCHANGED and RGBA, dropped by RGB
    rgba = np.random.default_rng(2).integers(0, 256, (2, 3, 4), dtype=np.uint8)
    data = _bytes(Image.fromarray(rgba, "RGBA"), "PNG")
    assert io.decode_png(data).numpy().transpose(1, 2, 0).tolist() == rgba.tolist()
    assert io.decode_png(data, mode="RGB").shape == (3, 2, 3)


def test_jpeg():
    flat = torcia.full((3, 16, 16), 100, dtype=torcia.uint8)
    flat[0] = 180  # one colour, so the decoded pixels are that colour within rounding
    data = io.encode_jpeg(flat, quality=95)
    assert data[:2].tolist() == [0xFF, 0xD8]
    got = io.decode_jpeg(data).int()
    assert got.shape == (3, 16, 16) and int((got - flat.int()).abs().max()) <= 2
    # GRAY is libjpeg's luma: 0.299 R + 0.587 G + 0.114 B
    grey = io.decode_image(data, mode="GRAY")
    assert grey.shape == (1, 16, 16)
    assert abs(int(grey[0, 8, 8]) - round(0.299 * 180 + 0.587 * 100 + 0.114 * 100)) <= 2
    assert [t.shape for t in io.decode_jpeg([data, data])] == [(3, 16, 16)] * 2
    with pytest.raises(RuntimeError, match="not supported for JPEG"):
        io.decode_jpeg(data, mode="RGBA")
    with pytest.raises(ValueError, match="between 1 and 100"):
        io.encode_jpeg(flat, quality=0)


def test_gif_frames_and_exif_orientation():
    frames = [Image.new("RGB", (4, 2), c) for c in ((255, 0, 0), (0, 0, 255))]
    buf = bytes_io.BytesIO()
    frames[0].save(buf, format="GIF", save_all=True, append_images=frames[1:])
    gif = torcia.tensor(list(buf.getvalue()), dtype=torcia.uint8)
    got = io.decode_gif(gif)
    assert got.shape == (2, 3, 2, 4)
    assert got[:, :, 0, 0].tolist() == [[255, 0, 0], [0, 0, 255]]
    # EXIF orientation 6: the stored image is shown turned 90 degrees clockwise
    arr = np.arange(6, dtype=np.uint8).reshape(2, 3) * 40
    exif = Image.Exif()
    exif[0x0112] = 6
    data = _bytes(Image.fromarray(arr), "PNG", exif=exif)
    assert io.decode_png(data)[0].numpy().tolist() == arr.tolist()
    turned = io.decode_png(data, apply_exif_orientation=True)[0].numpy()
    assert turned.tolist() == np.rot90(arr, -1).tolist()


@pytest.mark.parametrize("call, error, match", [
    (lambda: io.decode_png(torcia.zeros(4)), RuntimeError, "Expected a torch.uint8 tensor"),
    (lambda: io.decode_png(torcia.zeros(0, dtype=torcia.uint8)), RuntimeError,
     "Expected a non empty 1-dimensional tensor"),
    (lambda: io.decode_png(io.encode_jpeg(torcia.zeros(1, 2, 2, dtype=torcia.uint8))),
     RuntimeError, "Expected PNG data"),
    (lambda: io.encode_png(torcia.zeros(2, 2, 2, dtype=torcia.uint8)), RuntimeError,
     "number of channels should be 1 or 3"),
    (lambda: io.encode_png(torcia.zeros(1, 2, 2)), RuntimeError, "dtype should be uint8"),
    (lambda: io.encode_png(torcia.zeros(1, 2, 2, dtype=torcia.uint8), 10), RuntimeError,
     "Compression level should be between 0 and 9"),
    (lambda: io.decode_image(torcia.tensor([1, 2, 3], dtype=torcia.uint8)), RuntimeError,
     "Unsupported image file"),
    (lambda: io.decode_image(io.encode_png(torcia.zeros(1, 1, 1, dtype=torcia.uint8)),
                             mode="CMYK"), ValueError, "Unknown image read mode"),
])
def test_torchvision_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_files(tmp_path):
    path = tmp_path / "raw.bin"
    data = torcia.tensor([0, 255, 7], dtype=torcia.uint8)
    io.write_file(str(path), data)
    assert path.read_bytes() == bytes([0, 255, 7])
    assert io.read_file(str(path)).equal(data)
