"""download=True: files served by a local HTTP server are fetched with a progress bar and
checked against their MD5; files already there are used; a bad checksum or no network
gives a clear error and leaves nothing behind."""

import functools
import gzip
import hashlib
import http.server
import pathlib
import struct
import threading

import numpy as np
import pytest

from torcia.vision import datasets
from torcia.vision.datasets import utils


def _idx(array):
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + struct.pack(
        ">" + "I" * array.ndim, *array.shape)
    return gzip.compress(header + array.astype(np.uint8).tobytes())


@pytest.fixture
def served(tmp_path):
    """A folder of MNIST-format files behind http://127.0.0.1:<port>/ and their MD5s."""
    site = tmp_path / "site"
    site.mkdir()
    rng = np.random.default_rng(0)
    files = {
        "train-images-idx3-ubyte.gz": _idx(rng.integers(0, 255, (6, 28, 28))),
        "train-labels-idx1-ubyte.gz": _idx(np.arange(6) % 10),
        "t10k-images-idx3-ubyte.gz": _idx(rng.integers(0, 255, (3, 28, 28))),
        "t10k-labels-idx1-ubyte.gz": _idx(np.arange(3)),
    }
    for name, data in files.items():
        (site / name).write_bytes(data)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    requests = []
    original = handler.func.do_GET

    def counting(self):
        requests.append(self.path)
        return original(self)

    handler.func.do_GET = counting
    try:
        yield (f"http://127.0.0.1:{server.server_address[1]}/",
               [(n, hashlib.md5(d).hexdigest()) for n, d in files.items()], requests)
    finally:
        handler.func.do_GET = original
        server.shutdown()
        server.server_close()


def _local_mnist(url, resources):
    return type("LocalMNIST", (datasets.MNIST,), {"mirrors": [url], "resources": resources})


def test_download_fetches_checks_and_reuses(served, tmp_path, capsys):
    url, resources, requests = served
    cls = _local_mnist(url, resources)
    root = tmp_path / "data"
    train = cls(root, train=True, download=True)
    assert len(train) == 6 and train[5][1] == 5
    assert len(cls(root, train=False)) == 3
    raw = root / "LocalMNIST" / "raw"
    assert sorted(p.name for p in raw.iterdir()) == sorted(n for n, _ in resources)
    err = capsys.readouterr().err
    assert "Downloading " + url in err and "100.0%" in err
    assert len(requests) == 4
    cls(root, train=True, download=True)  # all present and intact: nothing fetched
    assert len(requests) == 4


def test_bad_checksum_is_refused(served, tmp_path):
    url, resources, _ = served
    bad = [(resources[0][0], "0" * 32)] + resources[1:]
    with pytest.raises(RuntimeError, match="expected MD5"):
        _local_mnist(url, bad)(tmp_path / "data", download=True)
    assert not any((tmp_path / "data").rglob("train-images*"))


def test_offline_error_names_url_and_where_to_put_files(tmp_path):
    # a port nothing listens on: the connection is refused at once
    cls = _local_mnist("http://127.0.0.1:9/", datasets.MNIST.resources)
    with pytest.raises(RuntimeError, match=r"could not download http://127\.0\.0\.1:9/"
                                           r"train-images.*put it at"):
        cls(tmp_path / "data", download=True)


def test_present_files_need_no_network(tmp_path):
    cls = _local_mnist("http://127.0.0.1:9/", [])
    raw = tmp_path / "LocalMNIST" / "raw"
    raw.mkdir(parents=True)
    for prefix, n in (("train", 2), ("t10k", 1)):
        (raw / f"{prefix}-images-idx3-ubyte.gz").write_bytes(_idx(np.zeros((n, 28, 28))))
        (raw / f"{prefix}-labels-idx1-ubyte.gz").write_bytes(_idx(np.zeros(n)))
    assert len(cls(tmp_path, download=True)) == 2


def test_check_integrity_and_real_checksums():
    assert not utils.check_integrity("/nonexistent")
    assert datasets.MNIST.resources[0] == ("train-images-idx3-ubyte.gz",
                                           "f68b3c2dcbeaaa9fbdd348bbdeb94873")
    assert {n for n, _ in datasets.FashionMNIST.resources} == {
        n for n, _ in datasets.KMNIST.resources}


def test_cifar10_tarball_is_downloaded_checked_and_unpacked(tmp_path, capsys):
    import sys
    import tarfile

    sys.path.insert(0, str(pathlib.Path(__file__).parent))
    from test_datasets import make_cifar10

    site = tmp_path / "site"
    make_cifar10(site / "cifar-10-batches-py")
    archive = tmp_path / "cifar-10-python.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(site / "cifar-10-batches-py", arcname="cifar-10-batches-py")
    (site / "cifar-10-python.tar.gz").write_bytes(archive.read_bytes())
    md5 = hashlib.md5(archive.read_bytes()).hexdigest()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/cifar-10-python.tar.gz"
        local = type("LocalCIFAR10", (datasets.CIFAR10,), {"url": url, "tgz_md5": md5})
        root = tmp_path / "data"
        train = local(root, train=True, download=True)
        assert len(train) == 10 and (root / "cifar-10-batches-py" / "test_batch").is_file()
        assert "Downloading " + url in capsys.readouterr().err
        bad = type("BadCIFAR10", (datasets.CIFAR10,), {"url": url, "tgz_md5": "0" * 32})
        with pytest.raises(RuntimeError, match="expected MD5"):
            bad(tmp_path / "other", download=True)
    finally:
        server.shutdown()
        server.server_close()
