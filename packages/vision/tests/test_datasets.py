"""Dataset readers on small files in the real formats, written by the tests themselves."""

import gzip
import os
import pickle

import numpy as np
import pytest
from PIL import Image

import torcia
from torcia.vision import datasets
from torcia.vision.datasets import (
    CIFAR10,
    CIFAR100,
    KMNIST,
    MNIST,
    DatasetFolder,
    Digits,
    FakeData,
    FashionMNIST,
    ImageFolder,
    read_idx,
)


def write_idx(path, array, compress=False):
    """IDX as published: zero bytes, type code, rank, big-endian dims, big-endian data."""
    codes = {np.uint8: 0x08, np.int32: 0x0C, np.float32: 0x0D}
    header = bytes([0, 0, codes[array.dtype.type], array.ndim])
    header += np.asarray(array.shape, ">u4").tobytes()
    blob = header + array.astype(array.dtype.newbyteorder(">")).tobytes()
    path.parent.mkdir(parents=True, exist_ok=True)
    with (gzip.open if compress else open)(path, "wb") as f:
        f.write(blob)


def make_mnist(folder, n=5, compress=True, prefix="train"):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, n).astype(np.uint8)
    suffix = ".gz" if compress else ""
    write_idx(folder / f"{prefix}-images-idx3-ubyte{suffix}", images, compress)
    write_idx(folder / f"{prefix}-labels-idx1-ubyte{suffix}", labels, compress)
    return images, labels


# ---------------------------------------------------------------------------------------
# IDX / MNIST family
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("compress", [True, False])
def test_mnist_reads_torchvision_layout(tmp_path, compress):
    images, labels = make_mnist(tmp_path / "MNIST" / "raw", compress=compress)
    ds = MNIST(tmp_path, train=True)
    assert len(ds) == 5
    image, label = ds[3]
    assert image.mode == "L" and image.size == (28, 28)
    np.testing.assert_array_equal(np.asarray(image), images[3])
    assert label == int(labels[3]) and type(label) is int
    assert ds.data.dtype == torcia.uint8 and tuple(ds.data.shape) == (5, 28, 28)
    assert ds.targets.tolist() == labels.tolist()


def test_mnist_files_directly_in_root_and_test_split(tmp_path):
    images, labels = make_mnist(tmp_path, n=3, compress=False, prefix="t10k")
    ds = MNIST(tmp_path, train=False, transform=np.asarray, target_transform=lambda t: -t)
    image, label = ds[2]
    np.testing.assert_array_equal(image, images[2])
    assert label == -int(labels[2])


@pytest.mark.parametrize("cls", [FashionMNIST, KMNIST])
def test_mnist_variants_use_their_own_folder(tmp_path, cls):
    make_mnist(tmp_path / cls.__name__ / "raw")
    assert len(cls(tmp_path)) == 5
    assert len(cls.classes) == 10
    with pytest.raises(FileNotFoundError):
        MNIST(tmp_path)


def test_read_idx_other_dtypes(tmp_path):
    values = np.arange(6, dtype=np.float32).reshape(2, 3) / 4
    write_idx(tmp_path / "f.idx", values)
    out = read_idx(tmp_path / "f.idx")
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, values)


def test_missing_file_says_which_where_and_where_to_get_it(tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        MNIST(tmp_path)
    msg = str(info.value)
    assert "train-images-idx3-ubyte" in msg
    assert str(tmp_path / "MNIST" / "raw") in msg
    assert "download=True" in msg and "https://" in msg


def test_download_true_fetches_only_what_is_missing(tmp_path, monkeypatch):
    make_mnist(tmp_path)
    # the test files are missing: download=True tries the (here unreachable) mirrors
    monkeypatch.setattr(MNIST, "mirrors", ["http://127.0.0.1:9/"])
    with pytest.raises(RuntimeError, match="could not download.*t10k-images"):
        MNIST(tmp_path, download=True)


def test_truncated_idx_file(tmp_path):
    make_mnist(tmp_path, compress=False)
    path = tmp_path / "train-images-idx3-ubyte"
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(RuntimeError, match="train-images-idx3-ubyte is truncated"):
        MNIST(tmp_path)


def test_corrupt_gzip_file(tmp_path):
    make_mnist(tmp_path)
    path = tmp_path / "train-labels-idx1-ubyte.gz"
    path.write_bytes(path.read_bytes()[:15])
    with pytest.raises(RuntimeError, match="train-labels-idx1-ubyte.gz is corrupt"):
        MNIST(tmp_path)


def test_not_an_idx_file(tmp_path):
    (tmp_path / "x").write_bytes(b"hello world")
    with pytest.raises(RuntimeError, match="not an IDX file"):
        read_idx(tmp_path / "x")


def test_images_and_labels_must_agree(tmp_path):
    make_mnist(tmp_path, n=4, compress=False)
    write_idx(tmp_path / "train-labels-idx1-ubyte", np.zeros(3, np.uint8))
    with pytest.raises(RuntimeError, match="do not match"):
        MNIST(tmp_path)


# ---------------------------------------------------------------------------------------
# CIFAR
# ---------------------------------------------------------------------------------------


def write_batch(path, obj, protocol=2):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=protocol)


def make_cifar10(folder, per_batch=2, protocol=2):
    rng = np.random.default_rng(1)
    batches = {}
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        data = rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8)
        labels = rng.integers(0, 10, per_batch).tolist()
        write_batch(folder / name, {"batch_label": name.encode(), "data": data,
                                    "labels": labels}, protocol)
        batches[name] = (data, labels)
    write_batch(folder / "batches.meta", {"label_names": [f"c{i}" for i in range(10)]})
    return batches


@pytest.mark.parametrize("protocol", [2, 5])
def test_cifar10_reads_batches(tmp_path, protocol):
    batches = make_cifar10(tmp_path / "cifar-10-batches-py", protocol=protocol)
    train = CIFAR10(tmp_path, train=True)
    assert len(train) == 10 and train.classes[3] == "c3"
    data, labels = batches["data_batch_2"]
    image, label = train[3]  # the second image of the second batch
    assert image.mode == "RGB" and image.size == (32, 32)
    # one row per image: 1024 red values, then green, then blue, each row-major
    x, y = 5, 7
    assert image.getpixel((x, y)) == tuple(int(data[1, c * 1024 + y * 32 + x]) for c in range(3))
    assert label == labels[1]
    test = CIFAR10(tmp_path / "cifar-10-batches-py", train=False)
    assert len(test) == 2 and test.targets == batches["test_batch"][1]


def test_cifar100_fine_labels(tmp_path):
    folder = tmp_path / "cifar-100-python"
    data = np.arange(2 * 3072, dtype=np.int64).astype(np.uint8).reshape(2, 3072)
    for name in ("train", "test"):
        write_batch(folder / name, {"data": data, "fine_labels": [42, 7], "coarse_labels": [1, 2]})
    write_batch(folder / "meta", {"fine_label_names": [f"f{i}" for i in range(100)]})
    ds = CIFAR100(tmp_path)
    assert [ds[i][1] for i in range(2)] == [42, 7]
    assert len(ds.classes) == 100


class _Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_malicious_cifar_pickle_is_refused_without_running(tmp_path):
    folder = tmp_path / "cifar-10-batches-py"
    make_cifar10(folder)
    marker = tmp_path / "pwned"
    write_batch(folder / "data_batch_1", {"data": _Payload(marker), "labels": [0]})
    with pytest.raises(pickle.UnpicklingError, match="refusing to load global .*system"):
        CIFAR10(tmp_path)
    assert not marker.exists()


def test_cifar_refuses_other_classes(tmp_path):
    from torcia.vision.datasets.cifar import load_batch

    write_batch(tmp_path / "b", {"data": {1, 2}})  # a set: builtins.set is not allowed
    with pytest.raises(pickle.UnpicklingError, match=r"builtin\w*\.set"):
        load_batch(tmp_path / "b")


def test_truncated_cifar_batch(tmp_path):
    folder = tmp_path / "cifar-10-batches-py"
    make_cifar10(folder)
    path = folder / "data_batch_3"
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(RuntimeError, match="data_batch_3 is truncated or corrupt"):
        CIFAR10(tmp_path)


def test_cifar_missing_batch(tmp_path):
    folder = tmp_path / "cifar-10-batches-py"
    make_cifar10(folder)
    (folder / "data_batch_4").unlink()
    with pytest.raises(FileNotFoundError, match="data_batch_4 not found.*cifar-10-python"):
        CIFAR10(tmp_path)


# ---------------------------------------------------------------------------------------
# Folders
# ---------------------------------------------------------------------------------------


def make_folder(root):
    colours = {"cat": [(10, 20, 30), (40, 50, 60)], "dog": [(70, 80, 90)]}
    for name, values in colours.items():
        (root / name / "sub").mkdir(parents=True)
        for i, value in enumerate(values):
            Image.new("RGB", (3, 2), value).save(root / name / ("sub" if i else "") / f"{i}.png")
    (root / "dog" / "notes.txt").write_text("not an image")
    return colours


def test_image_folder(tmp_path):
    make_folder(tmp_path)
    ds = ImageFolder(tmp_path, transform=np.asarray)
    assert ds.classes == ["cat", "dog"] and ds.class_to_idx == {"cat": 0, "dog": 1}
    assert len(ds) == 3 and ds.targets == [0, 0, 1]
    pixels = [tuple(ds[i][0][0, 0]) for i in range(3)]
    assert pixels == [(10, 20, 30), (40, 50, 60), (70, 80, 90)]


def test_dataset_folder_with_is_valid_file(tmp_path):
    make_folder(tmp_path)
    ds = DatasetFolder(tmp_path, loader=lambda p: os.path.basename(p),
                       is_valid_file=lambda p: p.endswith(".txt"), allow_empty=True)
    assert [ds[i] for i in range(len(ds))] == [("notes.txt", 1)]
    with pytest.raises(FileNotFoundError, match="Found no valid file for the classes cat"):
        DatasetFolder(tmp_path, loader=open, is_valid_file=lambda p: p.endswith(".txt"))


def test_folder_without_classes(tmp_path):
    with pytest.raises(FileNotFoundError, match="Couldn't find any class folder"):
        ImageFolder(tmp_path)


def test_corrupt_image_names_the_file(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "bad.png").write_bytes(b"\x89PNG\r\n\x1a\n broken")
    ds = ImageFolder(tmp_path)
    with pytest.raises(RuntimeError, match="bad.png"):
        ds[0]


# ---------------------------------------------------------------------------------------
# FakeData and Digits
# ---------------------------------------------------------------------------------------


def test_fake_data_is_stable_and_leaves_the_default_generator_alone():
    ds = FakeData(size=3, image_size=(1, 5, 4), num_classes=4)
    torcia.manual_seed(0)
    a = np.asarray(ds[1][0])
    after = torcia.rand(1).item()
    torcia.manual_seed(0)
    assert after == torcia.rand(1).item()
    assert a.shape == (5, 4)
    np.testing.assert_array_equal(a, np.asarray(ds[1][0]))
    assert not np.array_equal(a, np.asarray(ds[2][0]))
    assert all(0 <= ds[i][1] < 4 for i in range(3))
    with pytest.raises(IndexError):
        ds[3]


def test_digits_split_and_pixels():
    from torcia.vision.datasets.digits import _load

    images, targets = _load()
    assert images.shape == (1797, 8, 8) and images.max() == 16
    train, test = Digits(train=True), Digits(train=False)
    assert (len(train), len(test)) == (1437, 360)
    # the two splits partition the 1,797 images exactly
    rows = {(bytes(i.tobytes()), int(t)) for i, t in zip(images, targets)}
    scaled = {(bytes(((i.astype(np.uint16) * 255 + 8) // 16).astype(np.uint8).tobytes()), int(t))
              for i, t in zip(images, targets)}
    assert len(rows) == len(scaled)
    got = [(np.asarray(ds[k][0]).tobytes(), ds[k][1]) for ds in (train, test)
           for k in range(len(ds))]
    assert sorted(got) == sorted((a, b) for a, b in
                                 [(bytes(((i.astype(np.uint16) * 255 + 8) // 16)
                                         .astype(np.uint8).tobytes()), int(t))
                                  for i, t in zip(images, targets)])
    # every digit is in the test split, and the split does not follow torcia's seed
    assert set(test.targets.tolist()) == set(range(10))
    torcia.manual_seed(123)
    assert Digits(train=False).targets.tolist() == test.targets.tolist()
    assert Digits(train=False, split_seed=1).targets.tolist() != test.targets.tolist()


def test_dataset_registry():
    assert {"digits", "mnist", "cifar10", "fashion_mnist"} <= set(datasets.list_datasets())
    assert len(datasets.get_dataset("digits", None, train=False)) == 360
    with pytest.raises(KeyError, match="no dataset named 'svhn'"):
        datasets.get_dataset("svhn", None)
