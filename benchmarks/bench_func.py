"""torcia.func against torch.func: jacfwd, jacrev, hessian, per-sample gradients and a
neural tangent kernel, in one run. Run: ``python benchmarks/bench_func.py [--rounds 5]
[--threads 1] [--only NAME] [--profile NAME]``.

Each workload is timed in alternating rounds (torcia, then torch, ``--rounds`` times) and
the best round of each is kept, as process CPU time by default (``--wall`` for wall
time): on a machine shared with other jobs, CPU time moves less with their load. Both
libraries run on ``--threads`` threads (1 by default, where CPU time is the work itself).
Every workload's results are checked equal between the two libraries first, and torcia's
must not fall back to vmap's per-sample loop (its warning is an error here). Without
torch installed, torcia's times alone are printed.
"""

from __future__ import annotations

import argparse
import importlib.util
import time
import warnings

import numpy as np

import torcia

RNG = np.random.default_rng(0)


def _arrays():
    """The workloads' inputs and weights, shared by both libraries."""
    return {
        # jacfwd of a layer of 2048 inputs (256 outputs): 2048 tangents at once
        "wide_in": RNG.standard_normal((256, 2048)) / 45, "x_in": RNG.standard_normal(2048),
        # jacrev of a layer of 2048 outputs (256 inputs): 2048 cotangents at once
        "wide_out": RNG.standard_normal((2048, 256)) / 16, "x_out": RNG.standard_normal(256),
        "b": RNG.standard_normal(2048) / 10,
        # hessian of an MLP's scalar output in its 128 inputs
        "h1": RNG.standard_normal((256, 128)) / 11, "h2": RNG.standard_normal(256) / 16,
        "x_h": RNG.standard_normal(128),
        # per-sample gradients of a small CNN (a batch of 64 28x28 images)
        "images": RNG.standard_normal((64, 1, 28, 28)), "labels": RNG.integers(0, 10, 64),
        "cnn.0.weight": RNG.standard_normal((8, 1, 3, 3)) / 3,
        "cnn.0.bias": RNG.standard_normal(8) / 3,
        "cnn.4.weight": RNG.standard_normal((10, 8 * 13 * 13)) / 37,
        "cnn.4.bias": RNG.standard_normal(10) / 37,
        # NTK of an MLP (64 -> 128 -> 10) between 20 and 5 inputs
        "ntk_x1": RNG.standard_normal((20, 64)), "ntk_x2": RNG.standard_normal((5, 64)),
        "mlp.0.weight": RNG.standard_normal((128, 64)) / 8,
        "mlp.0.bias": RNG.standard_normal(128) / 8,
        "mlp.2.weight": RNG.standard_normal((10, 128)) / 11,
        "mlp.2.bias": RNG.standard_normal(10) / 11,
    }


def workloads(lib, data):
    """``{name: callable}`` of the workloads in ``lib`` (torcia or torch)."""
    F = lib.nn.functional
    func = lib.func
    t = {k: lib.tensor(v, dtype=lib.float32) if v.dtype.kind == "f" else lib.tensor(v)
         for k, v in data.items()}

    def layer_in(x):
        return lib.tanh(F.linear(x, t["wide_in"], t["b"][:256]))

    def layer_out(x):
        return lib.tanh(F.linear(x, t["wide_out"], t["b"]))

    def mlp_scalar(x):
        return (lib.tanh(F.linear(x, t["h1"])) * t["h2"]).sum()

    cnn = lib.nn.Sequential(lib.nn.Conv2d(1, 8, 3), lib.nn.ReLU(), lib.nn.MaxPool2d(2),
                            lib.nn.Flatten(), lib.nn.Linear(8 * 13 * 13, 10))
    cnn_params = {k: t["cnn." + k] for k, _ in cnn.named_parameters()}

    def cnn_loss(p, xi, yi):
        out = func.functional_call(cnn, p, (xi.unsqueeze(0),))
        return F.cross_entropy(out, yi.unsqueeze(0))

    per_sample = func.vmap(func.grad(cnn_loss), in_dims=(None, 0, 0))
    mlp = lib.nn.Sequential(lib.nn.Linear(64, 128), lib.nn.Tanh(), lib.nn.Linear(128, 10))
    mlp_params = {k: t["mlp." + k] for k, _ in mlp.named_parameters()}

    def mlp_single(p, x):
        return func.functional_call(mlp, p, (x.unsqueeze(0),)).squeeze(0)

    def ntk(x1, x2):
        jac1 = func.vmap(func.jacrev(mlp_single), (None, 0))(mlp_params, x1)
        jac2 = func.vmap(func.jacrev(mlp_single), (None, 0))(mlp_params, x2)
        blocks = [lib.einsum("Naf,Mbf->NMab", j1.flatten(2), j2.flatten(2))
                  for j1, j2 in zip(jac1.values(), jac2.values())]
        return sum(blocks)

    return {
        "jacfwd (2048 -> 256)": lambda: func.jacfwd(layer_in)(t["x_in"]),
        "jacrev (256 -> 2048)": lambda: func.jacrev(layer_out)(t["x_out"]),
        "hessian (128 -> 1)": lambda: func.hessian(mlp_scalar)(t["x_h"]),
        "per-sample grads (CNN, 64)": lambda: per_sample(cnn_params, t["images"],
                                                         t["labels"]),
        "NTK (MLP, 20 x 5)": lambda: ntk(t["ntk_x1"], t["ntk_x2"]),
    }


def _numpy(out):
    if isinstance(out, dict):
        return np.concatenate([_numpy(v).reshape(-1) for _, v in sorted(out.items())])
    return out.detach().numpy()


def _time(fn, wall):
    clock = time.perf_counter if wall else time.process_time
    start = clock()
    fn()
    return clock() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--wall", action="store_true", help="wall time, not CPU time")
    parser.add_argument("--only", help="run the workloads whose name starts with this")
    parser.add_argument("--profile", help="cProfile torcia's run of this workload")
    args = parser.parse_args()
    torch = None
    if importlib.util.find_spec("torch") is not None:
        import torch

        torch.set_num_threads(args.threads)
    torcia.set_num_threads(args.threads)
    data = _arrays()
    ours = workloads(torcia, data)
    theirs = workloads(torch, data) if torch is not None else {}
    names = [n for n in ours if args.only is None or n.startswith(args.only)]
    if args.profile:
        import cProfile
        import pstats

        fn = ours[next(n for n in ours if n.startswith(args.profile))]
        fn()
        cProfile.runctx("fn()", globals(), {"fn": fn}, "/tmp/bench_func.prof")
        pstats.Stats("/tmp/bench_func.prof").sort_stats("cumulative").print_stats(40)
        return
    with warnings.catch_warnings():
        # vmap's warning of a per-sample fallback is an error here
        warnings.filterwarnings("error", message="There is a performance drop")
        for name in names:
            got = _numpy(ours[name]())
            if torch is not None:
                want = _numpy(theirs[name]())
                np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-5, err_msg=name)
    best = {name: [float("inf"), float("inf")] for name in names}
    for _ in range(args.rounds):
        for name in names:
            best[name][0] = min(best[name][0], _time(ours[name], args.wall))
            if torch is not None:
                best[name][1] = min(best[name][1], _time(theirs[name], args.wall))
    clock = "wall" if args.wall else "CPU"
    print(f"best of {args.rounds} alternating rounds, {clock} time, {args.threads} "
          f"thread(s); results checked equal to torch.func's")
    print("| workload | torcia ms | torch ms | ratio |\n| --- | ---: | ---: | ---: |")
    for name in names:
        mine, other = best[name]
        if torch is None:
            print(f"| {name} | {mine * 1e3:.1f} | - | - |")
        else:
            print(f"| {name} | {mine * 1e3:.1f} | {other * 1e3:.1f} | {mine / other:.2f}x |")


if __name__ == "__main__":
    main()
