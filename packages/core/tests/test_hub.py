"""torcia.hub against a local HTTP server on 127.0.0.1: PyTorch's cache layout under
$TORCIA_HOME, the sha256 prefix check (a corrupted copy refused and not cached), offline
mode, the progress bar, and downloads that fail."""

import functools
import hashlib
import http.server
import io
import threading

import pytest

import torcia


@pytest.fixture
def server(tmp_path):
    """(folder served, base URL, list of requested paths)."""
    root = tmp_path / "served"
    root.mkdir()
    requests = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            requests.append(self.path)
            super().do_GET()

    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{httpd.server_address[1]}", requests
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCIA_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TORCIA_HUB_OFFLINE", raising=False)
    return tmp_path / "home"


def _publish(root, state, stem="tiny"):
    buf = io.BytesIO()
    torcia.save(state, buf)
    name = f"{stem}-{hashlib.sha256(buf.getvalue()).hexdigest()[:8]}.pth"
    (root / name).write_bytes(buf.getvalue())
    return name


def test_download_once_into_pytorchs_cache_layout(server, home):
    root, base, requests = server
    name = _publish(root, {"w": torcia.arange(3.0)})
    out = torcia.hub.load_state_dict_from_url(f"{base}/{name}", progress=False,
                                              check_hash=True)
    assert out["w"].tolist() == [0.0, 1.0, 2.0]
    assert torcia.hub.get_dir() == str(home / "hub")
    assert (home / "hub" / "checkpoints" / name).read_bytes() == (root / name).read_bytes()
    again = torcia.hub.load_state_dict_from_url(f"{base}/{name}", progress=False,
                                                check_hash=True, map_location="cpu")
    assert again["w"].tolist() == [0.0, 1.0, 2.0] and requests == [f"/{name}"]
    assert [p.name for p in (home / "hub" / "checkpoints").iterdir()] == [name]


def test_a_corrupted_copy_is_refused_and_not_cached(server, home):
    root, base, _ = server
    name = _publish(root, {"w": torcia.arange(3.0)})
    data = bytearray((root / name).read_bytes())
    data[-40] ^= 1
    (root / name).write_bytes(bytes(data))
    with pytest.raises(RuntimeError, match='invalid hash value \\(expected "'):
        torcia.hub.load_state_dict_from_url(f"{base}/{name}", progress=False, check_hash=True)
    assert list((home / "hub" / "checkpoints").iterdir()) == []
    # a cached copy that went bad is refused too
    (home / "hub" / "checkpoints" / name).write_bytes(bytes(data))
    with pytest.raises(RuntimeError, match="the cached .* is corrupted; delete it"):
        torcia.hub.load_state_dict_from_url(f"{base}/{name}", progress=False, check_hash=True)


def test_model_dir_file_name_and_a_name_without_a_hash(server, home, tmp_path):
    root, base, _ = server
    name = _publish(root, {"w": torcia.ones(1)})
    out = torcia.hub.load_state_dict_from_url(f"{base}/{name}", model_dir=tmp_path / "m",
                                              progress=False, file_name="mine.pth")
    assert out["w"].tolist() == [1.0] and (tmp_path / "m" / "mine.pth").exists()
    with pytest.raises(ValueError, match="needs a file name with a hash prefix"):
        torcia.hub.load_state_dict_from_url(f"{base}/{name}", progress=False,
                                            check_hash=True, file_name="plain.pth")


def test_offline_mode_uses_the_cache_and_names_what_is_missing(server, home, monkeypatch):
    root, base, requests = server
    name = _publish(root, {"w": torcia.ones(1)})
    monkeypatch.setenv("TORCIA_HUB_OFFLINE", "1")
    with pytest.raises(RuntimeError, match=f"{name} is not in the cache and "
                                           "TORCIA_HUB_OFFLINE is set"):
        torcia.hub.load_state_dict_from_url(f"{base}/{name}", progress=False)
    assert requests == []
    monkeypatch.delenv("TORCIA_HUB_OFFLINE")
    torcia.hub.load_state_dict_from_url(f"{base}/{name}", progress=False)
    monkeypatch.setenv("TORCIA_HUB_OFFLINE", "1")
    assert torcia.hub.load_state_dict_from_url(f"{base}/{name}")["w"].tolist() == [1.0]
    assert len(requests) == 1


def test_progress_is_reported_on_stderr(server, home, capsys):
    root, base, _ = server
    name = _publish(root, {"w": torcia.ones(10_000)})
    torcia.hub.load_state_dict_from_url(f"{base}/{name}", progress=True)
    err = capsys.readouterr().err
    try:
        import tqdm  # noqa: F401
    except ImportError:
        assert f'Downloading: "{base}/{name}"' in err
    else:
        assert "100%" in err


def test_a_missing_file_is_a_clear_error(server, home):
    _, base, _ = server
    with pytest.raises(RuntimeError, match="cannot download .*404"):
        torcia.hub.load_state_dict_from_url(f"{base}/absent-12345678.pth", progress=False)
    assert list((home / "hub" / "checkpoints").iterdir()) == []
