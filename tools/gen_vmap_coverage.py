"""Write docs/vmap_coverage.rst: the ops torcia.func.vmap runs with a native batching rule,
grouped by the kind of rule, and those that fall back to the per-sample loop.

Run ``python tools/gen_vmap_coverage.py`` after adding or removing a rule;
``--check`` exits 1 when the page is stale (packages/nn/tests/test_vmap_rules.py checks
the same).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from torcia.nn import _vmap

PAGE = Path(__file__).resolve().parent.parent / "docs" / "vmap_coverage.rst"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="only check the page is current")
    args = parser.parse_args()
    text = _vmap.coverage_rst()
    if args.check:
        if not PAGE.exists() or PAGE.read_text() != text:
            print(f"{PAGE} is stale: run python tools/gen_vmap_coverage.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text)
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
