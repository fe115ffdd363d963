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
  while it is, and reported by ``tools/opinfo.py``. Besides the entries here, the
  findings of the CI subset not yet triaged are listed, one (record, property, kind) a
  line, in ``open.txt`` (``python tools/opinfo.py --open`` rewrites it): a record that
  finds anything else fails.

``docs/opinfo.rst`` lists them (``python tools/opinfo.py --doc``).
"""

from __future__ import annotations

import dataclasses
import fnmatch
from pathlib import Path


@dataclasses.dataclass(frozen=True)
class Known:
    ops: tuple
    what: tuple  # kinds of finding: "accepted", "refused", "dtype", "value", "nan", ...
    category: str  # "lenient", "design" or "open"
    reason: str
    prop: str = "torch"
    dtypes: tuple = ()  # the sample's dtypes ("": any)
    kinds: tuple = ()  # the sample's kinds ("": any)
    detail: str = ""  # words the finding's detail holds ("": any)


KNOWN: list[Known] = []


def known(ops, what, category, reason, **kw):
    KNOWN.append(Known(tuple(ops) if not isinstance(ops, str) else (ops,),
                       tuple(what) if not isinstance(what, str) else (what,),
                       category, reason, **kw))


known("*", "accepted", "lenient",
      "torch 2.13 has no CPU kernel for the dtype ('\"kernel\" not implemented for ...'): "
      "torcia computes the value the op defines in it", detail="not implemented for '")
known("*", "accepted", "lenient",
      "torch 2.13 refuses half precision in linalg on the CPU; torcia computes in float32 "
      "and rounds", detail="Low precision dtypes not supported")
# torch 2.13 refusing a dtype on the CPU in an op's own words rather than "not implemented
# for": the same leniency, torcia computes the op in it (half precision in float32, rounded)
for _words in ("doesn't handle types other than float and double",
               "of float, double, cfloat or cdouble types",
               "linalg.vander supports floating point, complex, and integer tensors",
               "input tensor must be either float or double dtype",
               "on CPU does not support complex inputs",
               "Unsupported input type encountered for isin()",
               "does not support bool dtypes on CPU",
               "received a bool input for",
               "expected common dtype to be floating point"):
    known("*", "accepted", "lenient",
          "torch 2.13 has no CPU kernel for the dtype, in the op's own words ('... does not "
          "support ...', '... must be either float or double ...'): torcia computes the value "
          "the op defines in it", detail=_words)
known("*", ("accepted", "error class"), "lenient",
      "torch 2.13's binding wants a tensor for this argument ('must be Tensor, not int'); "
      "torcia takes a Python number as a 0-dim tensor, as the operators do (and refuses it "
      "for what the op cannot do with it, the dtype, where torch names the type)",
      detail="must be Tensor, not")
known("Tensor.numpy", "accepted", "lenient",
      "NumPy has no bfloat16 of its own (torch refuses); torcia's arrays hold bfloat16 "
      "through ml_dtypes, and numpy() returns one", detail="unsupported ScalarType BFloat16")
known("nn.functional.fractional_max_pool2d", "accepted", "lenient",
      "torch 2.13's fractional_max_pool2d calls len() on the number output_ratio its docs "
      "allow (TypeError; its 3-D version takes it); torcia takes the number for both dims",
      detail="object of type 'float' has no len()")
known(("linalg.matrix_exp", "matrix_exp"), "nan", "design",
      "torch 2.13's CPU matrix_exp in half precision overflows to NaN on matrices of norm "
      "above ~1 (its Taylor terms in float16); torcia computes in float32 and rounds the "
      "finite exponential", dtypes=("float16", "bfloat16"))
known("batch_norm_*", "accepted", "lenient",
      "torch 2.13 has these SyncBatchNorm kernels on CUDA only; torcia runs them on every "
      "device", detail="Could not run 'aten::batch_norm_")
known("*", "raised", "design",
      "an output whose shape depends on the values (nonzero, unique, masked_select) cannot "
      "be made on the meta device, which holds no values; torch raises too",
      prop="meta", detail="cannot run on the meta device")


#: the open findings not yet triaged: "record<TAB>property<TAB>kind" lines after a header
OPEN_FILE = Path(__file__).with_name("open.txt")
OPEN = Known(("open.txt",), (), "open", "found by the database and not yet triaged or fixed: "
             "tests/opinfo/open.txt, rewritten by python tools/opinfo.py --open")


def open_key(name, finding) -> tuple:
    return (name, finding.prop, finding.what)


def _open_keys() -> frozenset:
    body = OPEN_FILE.read_text().split("\n\n", 1)[1] if OPEN_FILE.exists() else ""
    return frozenset(tuple(line.split("\t")) for line in body.splitlines() if line)


_OPEN_KEYS = _open_keys()


def match(name, finding, dtype, kind, baseline=True):
    """The documented difference ``finding`` is, or None; ``baseline``: open.txt's too."""
    for k in KNOWN:
        if k.prop != finding.prop or finding.what not in k.what:
            continue
        if k.dtypes and dtype not in k.dtypes:
            continue
        if k.kinds and kind not in k.kinds:
            continue
        if k.detail not in finding.detail:
            continue
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in k.ops):
            return k
    if baseline and open_key(name, finding) in _OPEN_KEYS:
        return OPEN
    return None
