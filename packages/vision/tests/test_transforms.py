"""Transforms: exact outputs on small images, agreement between image kinds, seeds."""

import numpy as np
import pytest
from PIL import Image

import torcia
from torcia.vision import transforms as T
from torcia.vision.transforms import functional as F

GRID = np.arange(12, dtype=np.uint8).reshape(3, 4)  # an HW image with 3 rows, 4 columns


def kinds(hw: np.ndarray):
    """The same grey image as a PIL image, an HWC array and a CHW tensor."""
    return [Image.fromarray(hw), hw[:, :, None], torcia.from_numpy(hw[None].copy())]


def as_hw(img) -> np.ndarray:
    if isinstance(img, torcia.Tensor):
        return img.numpy()[0]
    arr = np.asarray(img)
    return arr[:, :, 0] if arr.ndim == 3 else arr


def check_all_kinds(fn, hw, expected):
    for img in kinds(hw):
        out = fn(img)
        assert isinstance(out, Image.Image) == isinstance(img, Image.Image)
        assert isinstance(out, torcia.Tensor) == isinstance(img, torcia.Tensor)
        np.testing.assert_array_equal(as_hw(out), expected, err_msg=type(img).__name__)


# ---------------------------------------------------------------------------------------
# Conversions and Normalize
# ---------------------------------------------------------------------------------------


def test_to_tensor_scales_uint8():
    out = T.ToTensor()(Image.new("RGB", (2, 1), (0, 51, 255)))
    assert out.dtype == torcia.float32 and tuple(out.shape) == (3, 1, 2)
    np.testing.assert_allclose(out.numpy(), [[[0.0, 0.0]], [[0.2, 0.2]], [[1.0, 1.0]]], rtol=1e-7)
    hwc = np.array([[[255, 0]], [[0, 255]]], np.uint8)  # H=2, W=1, C=2
    assert T.ToTensor()(hwc).tolist() == [[[1.0], [0.0]], [[0.0], [1.0]]]


def test_to_tensor_other_pil_modes():
    img16 = Image.fromarray(np.array([[0, 40000]], np.uint16))
    assert img16.mode.startswith("I;16")
    t = T.PILToTensor()(img16)
    assert t.dtype == torcia.int32 and t.tolist() == [[[0, 40000]]]
    bilevel = Image.fromarray(np.array([[True, False]]))
    assert T.ToTensor()(bilevel).tolist() == [[[1.0, 0.0]]]
    assert T.PILToTensor()(bilevel).tolist() == [[[1, 0]]]


def test_to_tensor_keeps_float_arrays():
    arr = np.full((2, 2), 3.5, np.float32)
    assert T.ToTensor()(arr).tolist() == [[[3.5, 3.5], [3.5, 3.5]]]


def test_pil_to_tensor_and_back():
    img = Image.fromarray(GRID)
    t = T.PILToTensor()(img)
    assert t.dtype == torcia.uint8 and t.numpy()[0].tolist() == GRID.tolist()
    np.testing.assert_array_equal(np.asarray(T.ToPILImage()(t)), GRID)
    assert T.ToPILImage()(torcia.full((1, 1, 1), 0.5)).getpixel((0, 0)) == 127


def test_normalize_exact_and_errors():
    x = torcia.tensor([[[0.0, 1.0]], [[2.0, 4.0]]])
    assert T.Normalize([1.0, 2.0], [0.5, 2.0])(x).tolist() == [[[-2.0, 0.0]], [[0.0, 1.0]]]
    with pytest.raises(TypeError, match="float tensor"):
        F.normalize(torcia.zeros(1, 1, 1, dtype=torcia.uint8), [0], [1])
    with pytest.raises(ValueError, match="division by zero"):
        F.normalize(x, [0, 0], [1, 0])
    with pytest.raises(TypeError, match="Tensor Image"):
        F.normalize(np.zeros((1, 1, 1)), [0], [1])


def test_normalize_inplace():
    x = torcia.ones(1, 1, 2)
    out = F.normalize(x, [1.0], [1.0], inplace=True)
    assert out is x and x.tolist() == [[[0.0, 0.0]]]


# ---------------------------------------------------------------------------------------
# Geometry
# ---------------------------------------------------------------------------------------


def test_flips_on_every_kind():
    check_all_kinds(F.hflip, GRID, GRID[:, ::-1])
    check_all_kinds(F.vflip, GRID, GRID[::-1])
    check_all_kinds(T.RandomHorizontalFlip(p=1.0), GRID, GRID[:, ::-1])
    check_all_kinds(T.RandomVerticalFlip(p=0.0), GRID, GRID)


def test_crop_and_center_crop():
    check_all_kinds(lambda im: F.crop(im, 1, 2, 2, 2), GRID, [[6, 7], [10, 11]])
    # (3 - 1) / 2 = 1 row off the top, round((4 - 2) / 2) = 1 column off the left
    check_all_kinds(T.CenterCrop((1, 2)), GRID, [[5, 6]])
    # a crop larger than the image pads with zeros, as much left/top as right/bottom
    check_all_kinds(T.CenterCrop((3, 6)), GRID, np.pad(GRID, [(0, 0), (1, 1)]))
    check_all_kinds(lambda im: F.crop(im, -1, 3, 2, 2), GRID, [[0, 0], [3, 0]])


@pytest.mark.parametrize("mode, expected", [
    ("constant", [9, 9, 1, 2, 3, 9, 9]),
    ("edge", [1, 1, 1, 2, 3, 3, 3]),
    ("reflect", [3, 2, 1, 2, 3, 2, 1]),
    ("symmetric", [2, 1, 1, 2, 3, 3, 2]),
])
def test_pad_modes(mode, expected):
    row = np.array([[1, 2, 3]], np.uint8)
    check_all_kinds(T.Pad([2, 0], fill=9, padding_mode=mode), row, [expected])


def test_pad_four_sides_and_per_channel_fill():
    out = F.pad(torcia.zeros(2, 1, 1), [1, 0, 0, 1], fill=[5.0, 7.0])
    assert out.tolist() == [[[5.0, 0.0], [5.0, 5.0]], [[7.0, 0.0], [7.0, 7.0]]]
    with pytest.raises(ValueError, match="1, 2, or 4 element"):
        T.Pad([1, 2, 3])
    with pytest.raises(ValueError, match="Padding mode"):
        T.Pad(1, padding_mode="wrap")


def test_resize_enlarging_is_bilinear():
    row = np.array([[0.0, 1.0]], np.float32)
    # output pixel centres at 0.25, 0.75, 1.25, 1.75 input pixels -> 0, .25, .75, 1
    np.testing.assert_allclose(F.resize(row, [1, 4]), [[0.0, 0.25, 0.75, 1.0]])
    t = F.resize(torcia.tensor([[[0.0, 1.0]]]), [1, 4])
    np.testing.assert_allclose(t.numpy(), [[[0.0, 0.25, 0.75, 1.0]]])


def test_resize_shrinking_averages():
    # halving with the triangle filter widened to 2 pixels: output 0 sees inputs 0, 1, 2
    # with weights .75, .75, .25, normalised
    row = np.array([[0.0, 2.0, 4.0, 6.0]], np.float32)
    out = F.resize(row, [1, 2])
    np.testing.assert_allclose(out, [[(0.75 * 2 + 0.25 * 4) / 1.75,
                                      (0.25 * 2 + 0.75 * 4 + 0.75 * 6) / 1.75]], rtol=1e-6)
    np.testing.assert_allclose(F.resize(row, [1, 2], antialias=False), [[1.0, 5.0]])
    nearest = F.resize(row, [1, 2], interpolation=T.InterpolationMode.NEAREST)
    np.testing.assert_array_equal(nearest, [[0.0, 4.0]])


def test_resize_uint8_rounds():
    out = F.resize(np.array([[0, 255]], np.uint8), [1, 4])
    assert out.dtype == np.uint8 and out.tolist() == [[0, 64, 191, 255]]


def test_resize_sizes():
    assert T.Resize(4)(Image.new("L", (16, 8))).size == (8, 4)
    assert T.Resize(4)(Image.new("L", (8, 16))).size == (4, 8)
    assert T.Resize(4, max_size=6)(Image.new("L", (16, 8))).size == (6, 3)
    assert tuple(T.Resize((2, 3))(torcia.zeros(3, 5, 5)).shape) == (3, 2, 3)
    assert tuple(T.Resize(2)(torcia.zeros(4, 3, 4, 8)).shape) == (4, 3, 2, 4)


@pytest.mark.torch
def test_resize_matches_torch():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(0).random((2, 3, 10, 13)).astype(np.float32)
    for size in [(5, 6), (20, 7), (3, 26)]:
        ref = torch.nn.functional.interpolate(torch.from_numpy(x), size=size, mode="bilinear",
                                              antialias=True, align_corners=False)
        out = F.resize(torcia.from_numpy(x), list(size))
        np.testing.assert_allclose(out.numpy(), ref.numpy(), atol=1e-6)


def test_rotate_quarter_turns():
    square = np.arange(9, dtype=np.uint8).reshape(3, 3)
    check_all_kinds(lambda im: F.rotate(im, 90), square, np.rot90(square))
    check_all_kinds(lambda im: F.rotate(im, -90), square, np.rot90(square, -1))
    check_all_kinds(lambda im: F.rotate(im, 90, expand=True), GRID, np.rot90(GRID))
    check_all_kinds(lambda im: F.rotate(im, 180), GRID, GRID[::-1, ::-1])


def test_rotate_fills_outside():
    ones = np.ones((4, 4), np.uint8)
    out = F.rotate(ones, 45, fill=7)
    assert out[0, 0] == 7 and out[2, 2] == 1


def test_rotate_matches_pil_off_grid_angles():
    img = np.random.default_rng(0).integers(0, 255, (7, 9), dtype=np.uint8)
    for angle in (30.0, -45.0, 17.5):
        for expand in (False, True):
            ref = np.asarray(Image.fromarray(img).rotate(angle, Image.NEAREST, expand=expand))
            out = F.rotate(img, angle, expand=expand)
            assert out.shape == ref.shape
            # points exactly on a pixel border may fall either side by rounding
            assert (out != ref).mean() < 0.05


def test_grayscale():
    pixel = (255, 0, 0)
    assert T.Grayscale()(Image.new("RGB", (1, 1), pixel)).getpixel((0, 0)) == 76
    t = torcia.tensor([[[1.0]], [[0.0]], [[0.0]]])
    np.testing.assert_allclose(T.Grayscale(3)(t).numpy().ravel(), [0.2989] * 3, rtol=1e-6)
    arr = np.array([[[10, 20, 30]]], np.uint8)
    # 0.2989 * 10 + 0.587 * 20 + 0.114 * 30 = 18.149, truncated
    assert F.rgb_to_grayscale(arr).tolist() == [[[18]]]


def test_color_adjustments_exact():
    px = np.array([[[0.2, 0.4, 0.8]]], np.float32)
    np.testing.assert_allclose(F.adjust_brightness(px, 2.0), [[[0.4, 0.8, 1.0]]])
    grey = 0.2989 * 0.2 + 0.587 * 0.4 + 0.114 * 0.8
    np.testing.assert_allclose(F.adjust_saturation(px, 0.0), [[[grey] * 3]], rtol=1e-6)
    np.testing.assert_allclose(F.adjust_contrast(px, 0.0), [[[grey] * 3]], rtol=1e-6)
    # a third of a turn sends red to green, green to blue
    rgb = np.array([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]], np.float32)
    np.testing.assert_allclose(F.adjust_hue(rgb, 1 / 3), [[[0, 1, 0], [0, 0, 1]]], atol=1e-6)
    np.testing.assert_allclose(F.adjust_hue(rgb, 0.0), rgb, atol=1e-6)
    with pytest.raises(ValueError, match="hue_factor"):
        F.adjust_hue(rgb, 0.7)


def test_color_on_uint8_tensor_and_pil():
    t = torcia.tensor([[[100]], [[200]], [[50]]], dtype=torcia.uint8)
    assert F.adjust_brightness(t, 1.5).numpy().ravel().tolist() == [150, 255, 75]
    img = Image.new("RGB", (1, 1), (100, 200, 50))
    assert F.adjust_brightness(img, 1.5).getpixel((0, 0)) == (150, 255, 75)
    hue = F.adjust_hue(Image.new("RGB", (1, 1), (255, 0, 0)), 1 / 3).getpixel((0, 0))
    assert hue[1] > 250 and hue[0] < 5 and hue[2] < 5


def test_lambda_and_compose():
    with pytest.raises(TypeError, match="should be callable"):
        T.Lambda(3)
    t = T.Compose([T.ToTensor(), T.Normalize([0.5], [0.5])])
    assert t(Image.new("L", (1, 1), 255)).tolist() == [[[1.0]]]
    assert "ToTensor" in repr(t) and "Normalize" in repr(t)


# ---------------------------------------------------------------------------------------
# Random transforms: torcia's default generator decides
# ---------------------------------------------------------------------------------------


RANDOM = [
    T.RandomCrop(3, padding=2, padding_mode="reflect"),
    T.RandomResizedCrop(5),
    T.RandomRotation(30),
    T.ColorJitter(0.4, 0.4, 0.4, 0.2),
    T.RandomHorizontalFlip(),
]


@pytest.mark.parametrize("transform", RANDOM, ids=lambda t: type(t).__name__)
def test_random_transforms_follow_the_seed(transform):
    img = Image.fromarray(np.random.default_rng(0).integers(0, 255, (8, 8, 3), np.uint8))
    runs = []
    for seed in (0, 0, 1):
        torcia.manual_seed(seed)
        runs.append([np.asarray(transform(img)) for _ in range(6)])
    for a, b in zip(runs[0], runs[1]):
        np.testing.assert_array_equal(a, b)
    assert any(not np.array_equal(a, b) for a, b in zip(runs[0], runs[2]))


def test_random_crop_is_a_crop_of_the_padded_image():
    torcia.manual_seed(3)
    outs = [T.RandomCrop(2, padding=1)(GRID) for _ in range(20)]
    padded = np.pad(GRID, 1)
    windows = {padded[i:i + 2, j:j + 2].tobytes() for i in range(4) for j in range(5)}
    assert all(o.tobytes() in windows for o in outs)
    assert len({o.tobytes() for o in outs}) > 3


def test_random_crop_pad_if_needed_and_error():
    out = T.RandomCrop((5, 4), pad_if_needed=True, fill=1)(GRID)
    assert out.shape == (5, 4)
    with pytest.raises(ValueError, match="larger than input image size"):
        T.RandomCrop(5)(GRID)


def test_random_resized_crop_whole_image():
    img = np.arange(16, dtype=np.float32).reshape(4, 4)
    out = T.RandomResizedCrop(4, scale=(1.0, 1.0), ratio=(1.0, 1.0))(img)
    np.testing.assert_array_equal(out, img)
    top, left, h, w = T.RandomResizedCrop.get_params(np.zeros((10, 20)), (0.5, 0.5), (2.0, 2.0))
    # half of 10 x 20 at ratio 2: w = round(sqrt(100 * 2)) = 14, h = round(sqrt(100 / 2)) = 7
    assert (h, w) == (7, 14) and 0 <= top <= 3 and 0 <= left <= 6


def test_random_rotation_range():
    square = np.arange(4, dtype=np.uint8).reshape(2, 2)
    np.testing.assert_array_equal(T.RandomRotation((90, 90))(square), np.rot90(square))
    with pytest.raises(ValueError, match="must be positive"):
        T.RandomRotation(-3)


def test_color_jitter_arguments():
    assert T.ColorJitter(brightness=0.5).brightness == (0.5, 1.5)
    assert T.ColorJitter(brightness=2).brightness == (0.0, 3.0)
    assert T.ColorJitter().hue is None
    with pytest.raises(ValueError, match="hue values should be between"):
        T.ColorJitter(hue=0.6)
