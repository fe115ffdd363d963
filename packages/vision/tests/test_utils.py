"""make_grid and save_image: exact layouts and pixel values."""

import numpy as np
import pytest
from PIL import Image

import torcia
from torcia.vision.utils import make_grid, save_image


def test_grid_layout_by_hand():
    # three 1x1x2 images (one channel), two per row, one pixel of padding valued 9
    batch = torcia.tensor([[[[1.0, 2.0]]], [[[3.0, 4.0]]], [[[5.0, 6.0]]]])
    grid = make_grid(batch, nrow=2, padding=1, pad_value=9.0)
    expected = np.array([
        [9, 9, 9, 9, 9, 9, 9],
        [9, 1, 2, 9, 3, 4, 9],
        [9, 9, 9, 9, 9, 9, 9],
        [9, 5, 6, 9, 9, 9, 9],
        [9, 9, 9, 9, 9, 9, 9],
    ], np.float32)
    assert tuple(grid.shape) == (3, 5, 7)
    for c in range(3):  # grey images are repeated into RGB
        np.testing.assert_array_equal(grid.numpy()[c], expected)


def test_list_and_single_images():
    images = [torcia.zeros(3, 2, 2), torcia.ones(3, 2, 2)]
    assert tuple(make_grid(images, padding=0).shape) == (3, 2, 4)
    single = torcia.rand(3, 4, 5)
    np.testing.assert_array_equal(make_grid(single).numpy(), single.numpy())
    assert tuple(make_grid(torcia.rand(4, 5)).shape) == (3, 4, 5)
    with pytest.raises(TypeError, match="tensor or list of tensors"):
        make_grid([np.zeros((3, 2, 2))])


def test_normalize():
    batch = torcia.tensor([[[[0.0, 2.0]]], [[[4.0, 8.0]]]])
    together = make_grid(batch, padding=0, normalize=True).numpy()[0]
    np.testing.assert_allclose(together, [[0.0, 0.25, 0.5, 1.0]])
    each = make_grid(batch, padding=0, normalize=True, scale_each=True).numpy()[0]
    np.testing.assert_allclose(each, [[0.0, 1.0, 0.0, 1.0]])
    clipped = make_grid(batch, padding=0, normalize=True, value_range=(0.0, 4.0)).numpy()[0]
    np.testing.assert_allclose(clipped, [[0.0, 0.5, 1.0, 1.0]])


def test_save_image_round_trip(tmp_path):
    batch = torcia.tensor([[[[0.0, 1.0]], [[0.5, 0.25]], [[1.0, 0.0]]]])  # 1 RGB image, 1x2
    path = tmp_path / "x.png"
    save_image(batch, path)
    image = Image.open(path)
    assert image.format == "PNG" and image.mode == "RGB" and image.size == (2, 1)
    # value * 255 + 0.5, truncated
    assert image.getpixel((0, 0)) == (0, 128, 255)
    assert image.getpixel((1, 0)) == (255, 64, 0)
