"""The canonical PyTorch script (mp.spawn, init_process_group("gloo", ...) through env://,
DistributedDataParallel) run unmodified through ``python -m torcia.compat``, on 2 and 4
processes; its trained weights are checked against one process training on every rank's
data."""

import os
import socket
import subprocess
import sys

import numpy as np
import pytest

import torcia
import torcia.distributed as dist

HERE = os.path.dirname(__file__)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.multiprocess,
    pytest.mark.skipif(not dist.is_backend_available("gloo"),
                       reason="needs the 'gloo' backend (torcia-mpi with mpich)"),
]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _one_process_reference(world):
    """The weights after the script's 5 steps, trained on the data of all ranks at once:
    DDP averages the ranks' gradients of equally sized batches, which is the gradient of
    the mean loss over all of them."""
    layer = torcia.nn.Linear(4, 1)
    with torcia.no_grad():
        layer.weight.copy_(torcia.linspace(-1.0, 1.0, 4).reshape(1, 4))
        layer.bias.fill_(0.5)
    opt = torcia.optim.SGD(layer.parameters(), lr=0.1)
    x = torcia.cat([torcia.arange(32.0).reshape(8, 4).sin() + r for r in range(world)])
    y = torcia.cat([torcia.arange(8.0).reshape(8, 1).cos() * (r + 1) for r in range(world)])
    for _ in range(5):
        opt.zero_grad()
        ((layer(x) - y) ** 2).mean().backward()
        opt.step()
    return np.concatenate([layer.weight.detach().numpy().reshape(-1),
                           layer.bias.detach().numpy()])


@pytest.mark.parametrize("world", [2, 4])
def test_the_canonical_spawn_script_runs_unmodified(world):
    cmd = [sys.executable, "-m", "torcia.compat", os.path.join(HERE, "canonical_spawn.py"),
           str(world), str(_free_port())]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=HERE)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT"))
    _, size, total, *params = line.split()
    assert int(size) == world and float(total) == sum(range(world))
    np.testing.assert_allclose(np.array(params, dtype=float), _one_process_reference(world),
                               rtol=1e-5, atol=1e-6)
