"""Running the records: which samples, which properties, and what was found.

Two modes. ``"ci"``: a seeded subset (every dtype; a few samples of each; one for the
gradient checks, vmap, meta, native and no-write), bounded so the whole database runs in
CI in a few minutes. ``"long"``: every sample of every dtype for every property, by hand
(``python tools/opinfo.py --long``). The seed makes a run repeatable: ``TORCIA_OPINFO_SEED``.
"""

from __future__ import annotations

import dataclasses
import os
import zlib

import numpy as np

from . import checks
from .known import match
from .samples import samples_for

#: samples per (record, dtype) against torch in CI mode (the edge and refusal samples are
#: always among them)
CI_SAMPLES = 3


def seed() -> int:
    return int(os.environ.get("TORCIA_OPINFO_SEED", "36"))


@dataclasses.dataclass
class Report:
    """What running one record found."""

    name: str
    cases: int = 0  # samples compared with torch
    agree: int = 0  # of which torcia and torch agreed (values, or both raised)
    known: list = dataclasses.field(default_factory=list)  # (Finding, Known) expected
    failures: list = dataclasses.field(default_factory=list)  # (dtype, kind, Finding)
    checked: set = dataclasses.field(default_factory=set)  # properties exercised


def pick(info, dtype, mode, rng):
    samples = samples_for(info, dtype, rng)
    if mode == "long":
        return samples
    always = [s for s in samples if s.kind in ("edge", "refuse")][:2]
    rest = [s for s in samples if s not in always]
    chosen = [rest[i] for i in sorted(rng.choice(len(rest), min(CI_SAMPLES, len(rest)),
                                                 replace=False))] if rest else []
    return always + chosen


def _rng(name, dtype):
    return np.random.default_rng([seed(), zlib.crc32(f"{name}/{dtype}".encode())])


def run(info, mode="ci", props=None, baseline=True) -> Report:
    """Check ``info`` on its samples; ``props`` limits the properties (all by default);
    ``baseline``: the open findings of tests/opinfo/open.txt count as documented."""
    props = set(info.props if props is None else props) & set(info.props)
    report = Report(info.name)
    torch_ok = checks.torch is not None and info.torch_path is not None
    random = bool(info.arg("random"))
    once_done = set()
    # double precision first: the properties run once in CI mode run on it
    order = sorted(info.dtypes, key=lambda d: ("float64", "float32", "complex128").index(d)
                   if d in ("float64", "float32", "complex128") else 3)
    for dtype in order:
        rng = _rng(info.name, dtype)
        for sample in pick(info, dtype, mode, rng):
            found = []
            if "torch" in props and torch_ok:
                report.checked.add("torch")
                got, outcome = checks.check_torch(info, sample, random)
                report.cases += 1
                report.agree += outcome != "differ"
                found += got
            if sample.kind in ("refuse", "edge", "empty"):
                _file(report, info, dtype, sample, found, baseline)
                continue
            for prop, fn in _ONCE:
                if prop not in props or (mode == "ci" and prop in once_done):
                    continue
                if prop in ("grad", "gradgrad") and (
                        dtype not in ("float64", "complex128") or random
                        or sample.kind == "zero-dim"):
                    continue  # finite differences in double precision
                if prop in ("vmap", "native", "no_write", "meta") and random:
                    continue
                report.checked.add(prop)
                once_done.add(prop)
                try:
                    found += fn(info, sample)
                except Exception as exc:  # noqa: BLE001 - a check that cannot run is a finding
                    found.append(checks.Finding(prop, "raised",
                                                f"{checks.error_class(exc)}: {exc!s:.200}"))
            _file(report, info, dtype, sample, found, baseline)
    return report


def _file(report, info, dtype, sample, found, baseline):
    for f in found:
        known = match(info.name, f, dtype, sample.kind, baseline)
        if known is not None:
            report.known.append((f, known))
        else:
            report.failures.append((dtype, sample.kind, f))


_ONCE = (
    ("grad", lambda info, s: checks.check_grad(info, s)),
    ("gradgrad", lambda info, s: checks.check_grad(info, s, second=True)),
    ("vmap", checks.check_vmap),
    ("meta", checks.check_meta),
    ("native", checks.check_native),
    ("no_write", checks.check_no_write),
)
