"""Processes that multiprocessing starts with "spawn" from a program run by
``python -m torcia.compat`` import the program again under the hook (issue #38: they
imported the real ``torch``, or failed where there is none)."""

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import sys
    import torch
    import torch.multiprocessing as mp


    def work(i, shared):
        if "torcia.compat" not in repr(sys.modules["torch"]):
            raise RuntimeError("the child imported another torch")
        shared[i] = float(i + 1)


    if __name__ == "__main__":
        shared = torch.zeros(2).share_memory_()
        mp.spawn(work, args=(shared,), nprocs=2)
        print("RESULT", shared.tolist(), type(shared).__module__)
""")


@pytest.mark.slow
@pytest.mark.multiprocess
def test_spawned_children_run_under_the_hook(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    proc = subprocess.run([sys.executable, "-m", "torcia.compat", str(script)],
                          capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "RESULT [1.0, 2.0] torcia._tensor" in proc.stdout, proc.stdout
