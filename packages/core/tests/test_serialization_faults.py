"""Faults while saving never cost the previous checkpoint: a full disk (RLIMIT_FSIZE), an
object found unsavable half-way, a writer killed mid-save, and two processes saving to the
same path at once."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import torcia

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and rlimits")


def _state(value, n=1000):
    return {"w": torcia.full((n,), float(value)), "step": int(value)}


def _assert_holds(path, values, n=1000):
    out = torcia.load(path)
    assert out["step"] in values
    np.testing.assert_array_equal(out["w"].numpy(), np.full(n, float(out["step"]), np.float32))
    return out["step"]


def _leftovers(folder):
    return [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


def _python(code, **kw):
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], **kw)


def test_a_full_disk_leaves_the_previous_checkpoint(tmp_path):
    path = tmp_path / "ckpt.pt"
    torcia.save(_state(1), path)
    proc = _python(f"""
        import resource, signal, sys, torcia
        big = {{"w": torcia.zeros(1_000_000)}}
        # the limit comes after the imports: plugins may write shared-memory files
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # write() fails with EFBIG instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))
        try:
            torcia.save(big, {str(path)!r})
        except OSError as exc:
            print(exc)
            sys.exit(3)
        """, stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 3, out
    assert "torcia.save" in out and "the previous file, if any, is unchanged" in out
    assert _assert_holds(path, {1}) == 1
    assert _leftovers(tmp_path) == []


def test_an_unsavable_object_leaves_the_previous_checkpoint(tmp_path):
    path = tmp_path / "ckpt.pt"
    torcia.save(_state(1), path)
    before = path.read_bytes()
    with pytest.raises(Exception, match="lambda"):
        torcia.save({**_state(2), "late": [1, 2, lambda: 0]}, path)
    assert path.read_bytes() == before and _leftovers(tmp_path) == []


@pytest.mark.parametrize("delay", [0.05, 0.2, 0.5])
def test_a_killed_writer_leaves_a_whole_checkpoint(tmp_path, delay):
    path = tmp_path / "ckpt.pt"
    n = 1_000_000  # 4 MB per save, so that a kill lands mid-write
    torcia.save(_state(0, n), path)
    proc = _python(f"""
        import torcia
        i = 0
        while True:
            i += 1
            torcia.save({{"w": torcia.full(({n},), float(i % 7)), "step": i % 7}}, {str(path)!r})
            if i == 1:
                print("saved", flush=True)
        """, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "saved\n"  # killed while it saves again and again
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdout.close()
    _assert_holds(path, set(range(7)), n)


def test_two_concurrent_writers_never_leave_a_corrupt_file(tmp_path):
    path = tmp_path / "ckpt.pt"
    torcia.save(_state(0), path)
    code = """
        import torcia
        for _ in range(40):
            torcia.save({{"w": torcia.full((1000,), {v}.0), "step": {v}}}, {p!r})
        """
    writers = [_python(code.format(v=v, p=str(path))) for v in (1, 2)]
    seen = set()
    while any(w.poll() is None for w in writers):
        seen.add(_assert_holds(path, {0, 1, 2}))  # every read in between is whole
    assert [w.returncode for w in writers] == [0, 0]
    assert _assert_holds(path, {1, 2}) in {1, 2}
    assert _leftovers(tmp_path) == []
    assert os.stat(path).st_mode & 0o777 == 0o666 & ~_umask()


def _umask():
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_a_symlinked_checkpoint_is_written_through_the_link(tmp_path):
    target = tmp_path / "real.pt"
    torcia.save(_state(1), target)
    link = tmp_path / "latest.pt"
    link.symlink_to(target)
    torcia.save(_state(2), link)
    assert link.is_symlink() and _assert_holds(target, {2}) == 2
