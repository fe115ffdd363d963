"""Downloading dataset files, as ``torchvision.datasets.utils``: :func:`download_url`
fetches a file with a progress bar and checks its MD5, :func:`check_integrity` checks one
already there, :func:`download_and_extract_archive` also unpacks a tarball.

Files already present (and intact) are never fetched again. Without a network, the error
names the URL, the reason and where to put the files by hand.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import sys
import tarfile
import urllib.error
import urllib.request

__all__ = ["calculate_md5", "check_integrity", "download_and_extract_archive",
           "download_url", "extract_archive"]

_CHUNK = 1 << 16


def calculate_md5(fpath, chunk_size: int = 1024 * 1024) -> str:
    """The MD5 hex digest of the file ``fpath``.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from torcia.vision.datasets.utils import calculate_md5
    >>> with tempfile.TemporaryDirectory() as root:
    ...     path = pathlib.Path(root, 'empty')
    ...     path.touch()
    ...     calculate_md5(path)
    'd41d8cd98f00b204e9800998ecf8427e'
    """
    md5 = hashlib.md5(usedforsecurity=False)
    with open(fpath, "rb") as f:
        while chunk := f.read(chunk_size):
            md5.update(chunk)
    return md5.hexdigest()


def check_integrity(fpath, md5: str | None = None) -> bool:
    """Whether ``fpath`` exists and (when ``md5`` is given) has that digest.

    Examples
    --------
    >>> from torcia.vision.datasets.utils import check_integrity
    >>> check_integrity("/nonexistent/file")
    False
    """
    if not os.path.isfile(fpath):
        return False
    return md5 is None or calculate_md5(fpath) == md5


def _progress(done: int, total: int | None, stream) -> None:
    if total:
        frac = done / total
        bar = "#" * int(frac * 30)
        stream.write(f"\r{frac:6.1%} |{bar:<30}| {done / 1e6:.1f}/{total / 1e6:.1f} MB")
    else:
        stream.write(f"\r{done / 1e6:.1f} MB")
    stream.flush()


def download_url(url: str, root, filename: str | None = None, md5: str | None = None,
                 max_redirect_hops: int = 3, timeout: float = 30.0) -> pathlib.Path:
    """Download ``url`` into ``root/filename`` (default: the URL's last part) unless an
    intact copy is there, showing progress on stderr, and check its MD5.

    Raises
    ------
    RuntimeError
        When the download fails (offline, HTTP error) or the file's MD5 is not ``md5``;
        a partial or corrupt file is removed.
    """
    root = pathlib.Path(root).expanduser()
    fpath = root / (filename or os.path.basename(url.rstrip("/")))
    if check_integrity(fpath, md5):
        return fpath
    root.mkdir(parents=True, exist_ok=True)
    partial = fpath.with_name(fpath.name + ".part")
    sys.stderr.write(f"Downloading {url} to {fpath}\n")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response, \
                open(partial, "wb") as out:
            length = response.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
            done = 0
            while chunk := response.read(_CHUNK):
                out.write(chunk)
                done += len(chunk)
                _progress(done, total, sys.stderr)
        sys.stderr.write("\n")
    except (urllib.error.URLError, OSError) as exc:
        partial.unlink(missing_ok=True)
        reason = getattr(exc, "reason", exc)
        raise RuntimeError(
            f"could not download {url}: {reason}. If this machine is offline, fetch the file "
            f"elsewhere and put it at {fpath}") from exc
    if md5 is not None and calculate_md5(partial) != md5:
        partial.unlink(missing_ok=True)
        raise RuntimeError(f"{url}: the downloaded file does not have the expected MD5 "
                           f"{md5} (corrupt download or a changed file); nothing was kept")
    partial.replace(fpath)
    return fpath


def extract_archive(from_path, to_path=None, remove_finished: bool = False) -> pathlib.Path:
    """Unpack a ``.tar``/``.tar.gz``/``.tgz`` archive into ``to_path`` (its folder by
    default), refusing members that would land outside it.

    Examples
    --------
    >>> import pathlib, tarfile, tempfile
    >>> from torcia.vision.datasets.utils import extract_archive
    >>> with tempfile.TemporaryDirectory() as root:
    ...     data = pathlib.Path(root, 'data.txt')
    ...     _ = data.write_text('hello')
    ...     with tarfile.open(pathlib.Path(root, 'data.tar.gz'), 'w:gz') as tar:
    ...         tar.add(data, arcname='inner/data.txt')
    ...     out = extract_archive(pathlib.Path(root, 'data.tar.gz'), pathlib.Path(root, 'out'))
    ...     (out / 'inner' / 'data.txt').read_text()
    'hello'
    """
    from_path = pathlib.Path(from_path)
    to_path = pathlib.Path(to_path) if to_path is not None else from_path.parent
    if not tarfile.is_tarfile(from_path):
        raise RuntimeError(f"{from_path} is not a tar archive")
    with tarfile.open(from_path) as tar:
        tar.extractall(to_path, filter="data")
    if remove_finished:
        from_path.unlink()
    return to_path


def download_and_extract_archive(url: str, download_root, extract_root=None,
                                 filename: str | None = None, md5: str | None = None,
                                 remove_finished: bool = False) -> None:
    """:func:`download_url` then :func:`extract_archive`."""
    path = download_url(url, download_root, filename, md5)
    extract_archive(path, extract_root or download_root, remove_finished)


def download_resources(name: str, folder, mirrors, resources) -> None:
    """Fetch each ``(filename, md5)`` of ``resources`` into ``folder`` from the first
    mirror that serves it; files already there and intact are kept."""
    folder = pathlib.Path(folder)
    for filename, md5 in resources:
        if check_integrity(folder / filename, md5):
            continue
        errors = []
        for mirror in mirrors:
            try:
                download_url(mirror + filename, folder, filename, md5)
                break
            except RuntimeError as exc:
                errors.append(str(exc))
        else:
            raise RuntimeError(f"{name}: could not download {filename}:\n  "
                               + "\n  ".join(errors))
