"""``torcia.hub``: download published checkpoints once and keep them in a cache.

The cache follows PyTorch's layout under ``$TORCIA_HOME`` (default ``~/.cache/torcia``):
checkpoints live in ``$TORCIA_HOME/hub/checkpoints/<file name>``. A file named
``name-<hex>.ext`` carries the first hex digits of its sha256, PyTorch's convention, which
``check_hash=True`` verifies. Downloads go to a temporary file in the cache folder and are
renamed into place only when complete (and verified), so an interrupted download never
leaves a partial checkpoint in the cache. With ``TORCIA_HUB_OFFLINE=1`` nothing is
downloaded: cached files are used and a missing one is an error naming it.

A progress bar is drawn with ``tqdm`` when it is installed (``pip install
'torcia-core[hub]'``); without it a line on stderr says what is being downloaded.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sys
import tempfile
import urllib.parse

# PyTorch's torch.hub exposes the standard library's parser under its name, and libraries
# import it from there (``from torch.hub import urlparse``)
from urllib.parse import urlparse  # noqa: F401

from torcia.serialization import load

__all__ = ["download_url_to_file", "get_dir", "load_state_dict_from_url", "set_dir"]

HASH_REGEX = re.compile(r"-([a-f0-9]*)\.")
"""The hash prefix in a file name such as ``resnet18-f37072fd.pth``."""

_OFFLINE_VARIABLE = "TORCIA_HUB_OFFLINE"
_CHUNK = 1 << 16
_hub_dir: str | None = None


def get_dir() -> str:
    """The hub folder: :func:`set_dir`'s, else ``$TORCIA_HOME/hub``, else
    ``~/.cache/torcia/hub`` (``$XDG_CACHE_HOME`` is honoured as in PyTorch).

    Examples
    --------
    >>> import torcia
    >>> torcia.hub.get_dir().endswith("hub")
    True
    """
    if _hub_dir is not None:
        return _hub_dir
    home = os.environ.get("TORCIA_HOME")
    if home is None:
        cache = os.environ.get("XDG_CACHE_HOME", os.path.join("~", ".cache"))
        home = os.path.join(cache, "torcia")
    return os.path.join(os.path.expanduser(home), "hub")


def set_dir(d) -> None:
    """Use ``d`` as the hub folder from now on.

    Examples
    --------
    >>> import os, tempfile, torcia
    >>> folder = tempfile.mkdtemp()
    >>> torcia.hub.set_dir(folder)
    >>> torcia.hub.get_dir() == folder
    True
    >>> torcia.hub.set_dir(None)  # back to $TORCIA_HOME/hub
    """
    global _hub_dir
    _hub_dir = None if d is None else os.path.expanduser(os.fspath(d))


def _offline() -> bool:
    return os.environ.get(_OFFLINE_VARIABLE, "").strip().lower() in ("1", "true", "yes", "on")


def _progress_bar(total, enabled: bool):
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, file=sys.stderr)


def download_url_to_file(url: str, dst, hash_prefix: str | None = None,
                         progress: bool = True) -> None:
    """Download ``url`` to ``dst``, replacing it only once the download is complete.

    Parameters
    ----------
    url : str
        What to download (``http``, ``https`` or ``file``).
    dst : str or os.PathLike
        Where to put it.
    hash_prefix : str, optional
        When given, the sha256 of the download must start with it, or :class:`RuntimeError`
        is raised and ``dst`` is left as it was.
    progress : bool
        Draw a progress bar on stderr (with tqdm when it is installed).

    Examples
    --------
    >>> import os, pathlib, tempfile, torcia
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> (folder / "src.bin").write_bytes(b"weights")
    7
    >>> torcia.hub.download_url_to_file((folder / "src.bin").as_uri(), folder / "dst.bin",
    ...                                 progress=False)
    >>> (folder / "dst.bin").read_bytes()
    b'weights'
    """
    if _offline():
        raise RuntimeError(f"torcia.hub: {_OFFLINE_VARIABLE} is set, so {url} is not "
                           "downloaded")
    dst = os.path.abspath(os.path.expanduser(os.fspath(dst)))
    folder = os.path.dirname(dst)
    os.makedirs(folder, exist_ok=True)
    import urllib.request  # here: importing torcia need not load the HTTP stack

    request = urllib.request.Request(url, headers={"User-Agent": "torcia.hub"})
    try:
        response = urllib.request.urlopen(request, timeout=60)  # noqa: S310 - the caller's URL
    except OSError as exc:
        raise RuntimeError(f"torcia.hub: cannot download {url} ({exc})") from None
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(dst)}.", suffix=".partial",
                               dir=folder)
    try:
        with response, os.fdopen(fd, "wb") as out:
            length = response.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
            bar = _progress_bar(total, progress)
            if progress and bar is None:
                sys.stderr.write(f'Downloading: "{url}" to {dst}\n')
            digest = hashlib.sha256()
            received = 0
            try:
                while chunk := response.read(_CHUNK):
                    out.write(chunk)
                    digest.update(chunk)
                    received += len(chunk)
                    if bar is not None:
                        bar.update(len(chunk))
            finally:
                if bar is not None:
                    bar.close()
            if total is not None and received != total:
                raise RuntimeError(f"torcia.hub: the download of {url} stopped after "
                                   f"{received} of {total} bytes")
            out.flush()
            os.fsync(out.fileno())
        if hash_prefix is not None:
            found = digest.hexdigest()
            if not found.startswith(hash_prefix):
                raise RuntimeError(f'invalid hash value (expected "{hash_prefix}", got '
                                   f'"{found}"): the download of {url} is corrupted or not '
                                   "the published file")
        os.chmod(tmp, 0o644)
        os.replace(tmp, dst)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _check_cached(path: str, hash_prefix: str) -> None:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    if not digest.hexdigest().startswith(hash_prefix):
        raise RuntimeError(f'invalid hash value (expected "{hash_prefix}", got '
                           f'"{digest.hexdigest()}"): the cached {path} is corrupted; delete '
                           "it to download it again")


def load_state_dict_from_url(url: str, model_dir=None, map_location=None, progress: bool = True,
                             check_hash: bool = False, file_name: str | None = None,
                             weights_only: bool = True):
    """Download a checkpoint into the cache (once) and :func:`torcia.load` it.

    Parameters
    ----------
    url : str
        Where the checkpoint is published.
    model_dir : str or os.PathLike, optional
        The cache folder; default ``get_dir()/checkpoints``.
    map_location : optional
        As in :func:`torcia.load`.
    progress : bool
        Draw a progress bar while downloading.
    check_hash : bool
        Verify that the file's sha256 starts with the hex digits after the last ``-`` in
        its name (``resnet18-f37072fd.pth``), for a download and for a cached copy.
    file_name : str, optional
        The name in the cache; default the last part of the URL's path.
    weights_only : bool
        As in :func:`torcia.load`. PyTorch's default here is ``False``; torcia keeps
        ``True``, since a file from a URL is the least trusted kind.

    Returns
    -------
    object
        What the checkpoint holds, usually a state dict.

    Examples
    --------
    >>> import hashlib, io, pathlib, tempfile, torcia
    >>> buf = io.BytesIO()
    >>> torcia.save({"w": torcia.ones(2)}, buf)
    >>> digest = hashlib.sha256(buf.getvalue()).hexdigest()[:8]
    >>> src = pathlib.Path(tempfile.mkdtemp()) / f"tiny-{digest}.pth"
    >>> _ = src.write_bytes(buf.getvalue())
    >>> torcia.hub.load_state_dict_from_url(src.as_uri(), model_dir=tempfile.mkdtemp(),
    ...                                     progress=False, check_hash=True)
    {'w': tensor([1., 1.])}
    """
    if model_dir is None:
        model_dir = os.path.join(get_dir(), "checkpoints")
    model_dir = os.path.expanduser(os.fspath(model_dir))
    os.makedirs(model_dir, exist_ok=True)
    filename = file_name or os.path.basename(urllib.parse.urlparse(url).path)
    if not filename:
        raise ValueError(f"torcia.hub: {url} names no file; pass file_name=")
    cached = os.path.join(model_dir, filename)
    hash_prefix = None
    if check_hash:
        match = HASH_REGEX.search(filename)
        hash_prefix = match.group(1) if match else None
        if not hash_prefix:
            raise ValueError(f"torcia.hub: check_hash=True needs a file name with a hash "
                             f"prefix, such as name-<sha256[:8]>.pth; {filename!r} has none")
    if os.path.exists(cached):
        if hash_prefix:
            _check_cached(cached, hash_prefix)
    elif _offline():
        raise RuntimeError(f"torcia.hub: {cached} is not in the cache and "
                           f"{_OFFLINE_VARIABLE} is set, so {url} is not downloaded; unset it "
                           "or put the file there")
    else:
        download_url_to_file(url, cached, hash_prefix, progress=progress)
    return load(cached, map_location=map_location, weights_only=weights_only)
