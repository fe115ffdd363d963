"""Training steps on the "cuda" device, in torcia and (where installed with CUDA) PyTorch,
timed in one run with the device synchronized; run by ``tools/gpu_check``."""

from __future__ import annotations

import time


def _workloads(lib, dev):
    nn = lib.nn
    lib.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                        nn.Linear(512, 10)).to(dev)
    cnn = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(),
                        nn.Linear(128, 10)).to(dev)
    return {
        "mlp": (mlp, lib.optim.SGD(mlp.parameters(), lr=0.01, momentum=0.9),
                lib.randn(128, 784).to(dev), lib.randint(0, 10, (128,)).to(dev)),
        "cnn": (cnn, lib.optim.Adam(cnn.parameters()), lib.randn(64, 1, 28, 28).to(dev),
                lib.randint(0, 10, (64,)).to(dev)),
    }


def _time(lib, sync, model, opt, x, y, repeat=10):
    def step():
        opt.zero_grad()
        lib.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    step()
    sync()
    start = time.perf_counter()
    for _ in range(repeat):
        step()
    sync()
    return (time.perf_counter() - start) / repeat


def main():
    import torcia

    results = {"torcia": {k: _time(torcia, torcia.cuda.synchronize, *v)
                          for k, v in _workloads(torcia, "cuda").items()}}
    try:
        import torch

        if torch.cuda.is_available():
            results["pytorch"] = {k: _time(torch, torch.cuda.synchronize, *v)
                                  for k, v in _workloads(torch, "cuda").items()}
    except ImportError:
        pass
    print(f"{'workload':<10}" + "".join(f"{lib:>14}" for lib in results) + f"{'ratio':>10}")
    for name in results["torcia"]:
        cells = [results[lib][name] * 1e3 for lib in results]
        ratio = f"{cells[0] / cells[1]:9.2f}x" if len(cells) > 1 else ""
        print(f"{name:<10}" + "".join(f"{c:11.2f} ms" for c in cells) + f"{ratio:>10}")


if __name__ == "__main__":
    main()
