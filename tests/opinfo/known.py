"""Where torcia departs from PyTorch on purpose: the one documented list.

Every finding of the database that is not a defect is matched here, by op (a record name
or a ``fnmatch`` pattern), the property and kind of finding, and optionally the sample's
dtypes and kinds. Three categories:

- ``lenient``: torcia accepts input PyTorch refuses, and gives the answer the operation
  defines (a dtype PyTorch has no CPU kernel for, a Python number where it wants a
  tensor);
- ``design``: a deliberate difference documented in the package READMEs (a safer
  behaviour, a more accurate value, a dtype torcia does not have);
- ``open``: a difference that is a defect still to fix; listed so that CI stays green
  while it is, and reported by ``tools/opinfo.py``.

``docs/opinfo.rst`` lists them (``python tools/opinfo.py --doc``).
"""

from __future__ import annotations

import dataclasses
import fnmatch


@dataclasses.dataclass(frozen=True)
class Known:
    ops: tuple
    what: tuple  # kinds of finding: "accepted", "refused", "dtype", "value", "nan", ...
    category: str  # "lenient", "design" or "open"
    reason: str
    prop: str = "torch"
    dtypes: tuple = ()  # the sample's dtypes ("": any)
    kinds: tuple = ()  # the sample's kinds ("": any)


KNOWN: list[Known] = []


def known(ops, what, category, reason, **kw):
    KNOWN.append(Known(tuple(ops) if not isinstance(ops, str) else (ops,),
                       tuple(what) if not isinstance(what, str) else (what,),
                       category, reason, **kw))


def match(name, finding, dtype, kind):
    for k in KNOWN:
        if k.prop != finding.prop or finding.what not in k.what:
            continue
        if k.dtypes and dtype not in k.dtypes:
            continue
        if k.kinds and kind not in k.kinds:
            continue
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in k.ops):
            return k
    return None
