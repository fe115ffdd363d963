"""Run the op database (tests/opinfo) by hand and report what it finds.

Usage::

    python tools/opinfo.py              # the CI subset: agreement with torch, findings
    python tools/opinfo.py --long       # every sample of every record (tens of minutes)
    python tools/opinfo.py --open       # rewrite tests/opinfo/open.txt from the CI subset

Prints the cases compared with torch 2.13 and how many agree (equal values, or both
refuse), then the findings: documented ones (tests/opinfo/known.py) and the rest, grouped
by property and kind. ``--open`` records the open findings of the CI subset as the
baseline tests/test_opinfo.py accepts: a record that finds anything new fails.
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from opinfo import RECORDS, runner  # noqa: E402
from opinfo.known import OPEN_FILE, open_key  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--long", action="store_true", help="every sample (slow)")
    parser.add_argument("--open", action="store_true",
                        help="rewrite tests/opinfo/open.txt from the CI subset")
    parser.add_argument("names", nargs="*", help="records to run (all by default)")
    args = parser.parse_args(argv)
    mode = "long" if args.long else "ci"
    names = args.names or sorted(RECORDS)
    cases = agree = 0
    known = collections.Counter()
    found = collections.Counter()
    keys = set()
    for name in names:
        report = runner.run(RECORDS[name], mode, baseline=not args.open)
        cases += report.cases
        agree += report.agree
        for f, k in report.known:
            known[(k.category, f.prop, f.what)] += 1
        for _dtype, _kind, f in report.failures:
            found[(f.prop, f.what)] += 1
            keys.add(open_key(name, f))
    lenient = sum(n for (category, prop, _), n in known.items() if prop == "torch")
    print(f"{len(names)} records, mode {mode}: {cases} cases against torch, {agree} agree "
          f"({100 * agree / max(cases, 1):.1f}%); with the documented differences "
          f"({lenient}): {100 * (agree + lenient) / max(cases, 1):.1f}%")
    print("documented findings (category, property, kind):")
    for key, n in sorted(known.items()):
        print(f"  {n:6d}  {' / '.join(key)}")
    print("other findings (property, kind):")
    for key, n in sorted(found.items()):
        print(f"  {n:6d}  {' / '.join(key)}")
    if args.open:
        lines = "".join("\t".join(k) + "\n" for k in sorted(keys))
        OPEN_FILE.write_text(OPEN_FILE.read_text().split("\n\n", 1)[0] + "\n\n" + lines)
        print(f"wrote {len(keys)} open findings to {OPEN_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
