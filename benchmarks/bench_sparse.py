"""Sparse @ dense at graph scale: a 100,000 x 100,000 matrix at 1% density (about 100
million stored entries) times a dense 100,000 x 64 matrix, in torcia and PyTorch, in one
run on the same arrays (the indices and values are shared with both through NumPy, no
copy).

The dense form of that matrix would take 40 GB of float32; the product runs on the stored
entries only (torcia's ``sparse_mm`` op through SciPy's compressed-row product). Printed:
the time of each product (best and median of the repeats, and the first, which for torcia
includes making the compressed-row index of a COO tensor once), torcia's time over PyTorch's,
the agreement of the results, and the peak memory the process reached.

Run: ``python benchmarks/bench_sparse.py`` (``--rows 20000 --density 0.01`` for a quick
one); ``--layout csr`` multiplies compressed-row tensors instead of COO ones.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time

import numpy as np

import torcia


def random_pattern(rows, cols, density, seed):
    """The coordinates of a random matrix with about ``density`` of its entries stored,
    sorted row-major and unique (coalesced): per row, columns are a cumulative sum of
    random gaps (mean ``1 / density``), cut at the last column."""
    rng = np.random.default_rng(seed)
    per_row = max(1, int(round(cols * density)))
    mean_gap = cols / per_row
    row_parts, col_parts = [], []
    for start in range(0, rows, 4096):  # in blocks of rows: bounded temporaries
        stop = min(rows, start + 4096)
        gaps = rng.integers(1, int(2 * mean_gap), size=(stop - start, per_row))
        c = np.cumsum(gaps, axis=1) - 1
        keep = c < cols
        row_parts.append(np.repeat(np.arange(start, stop), keep.sum(1)))
        col_parts.append(c[keep])
    return np.stack([np.concatenate(row_parts), np.concatenate(col_parts)])


def timed(fn, repeats):
    out, times = None, []
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return out, times


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--density", type=float, default=0.01)
    parser.add_argument("--columns", type=int, default=64, help="of the dense operand")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--layout", choices=["coo", "csr"], default="coo")
    args = parser.parse_args()
    n = args.rows

    start = time.perf_counter()
    idx = random_pattern(n, n, args.density, seed=0)
    rng = np.random.default_rng(1)
    values = rng.standard_normal(idx.shape[1], dtype=np.float32)
    dense = rng.standard_normal((n, args.columns), dtype=np.float32)
    nnz = idx.shape[1]
    print(f"sparse {n} x {n}, {nnz:,} entries ({nnz / n / n:.2%}), {args.layout}; dense "
          f"{n} x {args.columns}; float32 (made in {time.perf_counter() - start:.1f} s)")
    print(f"a dense copy of the sparse matrix would take {n * n * 4 / 1e9:.0f} GB")

    ours = torcia.sparse_coo_tensor(torcia.from_numpy(idx), torcia.from_numpy(values), (n, n),
                                    is_coalesced=True)
    if args.layout == "csr":
        ours = ours.to_sparse_csr()
    x = torcia.from_numpy(dense)
    result, times = timed(lambda: torcia.sparse.mm(ours, x), args.repeats)
    report = [("torcia", times)]
    ours_out = result.numpy()

    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        theirs = torch.sparse_coo_tensor(torch.from_numpy(idx), torch.from_numpy(values),
                                         (n, n), is_coalesced=True)
        if args.layout == "csr":
            theirs = theirs.to_sparse_csr()
        tx = torch.from_numpy(dense)
        theirs_out, ttimes = timed(lambda: torch.sparse.mm(theirs, tx), args.repeats)
        report.append(("PyTorch " + torch.__version__, ttimes))
        diff = np.abs(ours_out - theirs_out.numpy()).max()
        scale = np.abs(theirs_out.numpy()).max()
        print(f"results agree: max |torcia - PyTorch| = {diff:.2e} (of values up to "
              f"{scale:.1f})")
    for name, t in report:
        print(f"{name:24s} best {min(t):8.3f} s   median {statistics.median(t):8.3f} s   "
              f"first {t[0]:8.3f} s")
    if len(report) == 2:
        ratio = min(report[0][1]) / min(report[1][1])
        print(f"torcia / PyTorch: {ratio:.2f}x (best of {args.repeats})")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"peak memory of the process: {peak:.1f} GB")


if __name__ == "__main__":
    main()
