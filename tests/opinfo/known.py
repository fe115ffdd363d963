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
known("Tensor.to", "raised", "design",
      "a meta tensor has no values to copy to the CPU: torch 2.13 raises too ('Cannot copy "
      "out of meta tensor; no data!')", prop="meta", detail="Cannot copy out of meta tensor")
for _prop in ("grad", "gradgrad"):
    known(("pow", "op:pow"), "mismatch", "design",
          "the gradient of a power with a bool exponent: torch 2.13's backward raises the "
          "same error (its formula subtracts 1 from the exponent)", prop=_prop,
          detail="with a bool tensor is not supported")


_CX = ("complex64", "complex128")
known(("add", "sub", "rsub", "op:add", "op:sub", "nn.functional.tanhshrink"), "nan", "design",
      "torch 2.13's CPU add/sub of complex numbers multiply the second operand by alpha as a "
      "complex number even when alpha is 1, so a NaN or infinite part spreads to the other "
      "part (0 + (nan+1j) is nan+nanj, 0 - (-inf+0j) is inf+nanj; tanhshrink is x - tanh(x)); "
      "torcia adds part by part, as NumPy and C99 do", dtypes=_CX, kinds=("edge",))
known("op:pow", "nan", "design",
      "torch 2.13 computes a complex power as exp(y log x), so x ** 0 is NaN for an infinite or "
      "NaN x; torcia gives 1, as for real numbers and NumPy", dtypes=_CX, kinds=("edge",))
known("sgn", "nan", "design",
      "torch 2.13's sgn of a complex number with an infinite part depends on where the element "
      "falls in its vectorised loop (sgn(inf+0j) is nan+0j or nan+nanj by the tensor's length "
      "and the element's position); torcia gives nan+nanj wherever it is", dtypes=_CX,
      kinds=("edge",))
known("nn.functional.gelu", "nan", "design",
      "torch 2.13's vectorised gelu gives NaN at +inf in float32, bfloat16 and float16 (a "
      "lone element and float64 give inf); torcia gives gelu(inf) = inf everywhere",
      dtypes=("float32", "bfloat16", "float16"), kinds=("edge",))
known(("copysign", "signbit"), "value", "design",
      "torch 2.13's vectorised float32 -> bfloat16 conversion writes NaN as 0xFFFF, with the "
      "sign bit set, so a positive NaN converted to bfloat16 reads as negative; torcia keeps "
      "the NaN's sign", dtypes=("bfloat16",), kinds=("edge",))
known(("mode", "nanmedian", "median"), "value", "design",
      "among elements that compare equal (0.0 and -0.0), torch 2.13 returns the index its "
      "unstable std::sort / nth_element happens to leave (implementation-defined); torcia the "
      "one its own order gives", kinds=("edge",), detail="result[1]")
known(("mode", "nanmedian", "median"), "value", "design",
      "the same choice among equal elements decides the value's sign of zero: torch 2.13 "
      "returns the -0.0 or 0.0 its unstable std::sort / nth_element leaves at the index it "
      "picks; torcia the element at the index its own order gives", kinds=("edge",),
      detail="(the sign of zero)")
known(("neg", "op:neg"), "value", "design",
      "torch 2.13's vectorised complex negation is 0 - z, which gives +0 for a part that is "
      "+0 or -0, while its scalar path (a lone element, the tail of a vector loop) gives -z: "
      "the sign depends on the element's position (zeros(5, dtype=complex128).neg() gives "
      "+0 for the first four, -0 for the fifth); torcia negates exactly, -z everywhere, as "
      "the real negation", dtypes=_CX, kinds=("edge",), detail="(the sign of zero)")
known("acos", "value", "design",
      "torch 2.13 computes complex128 acos as pi/2 - asin(z) (its vectorised formula, used "
      "for a lone element too), whose imaginary part 0 - asin(z).imag is +0 where C's cacos "
      "and torch's own complex64 give -0 (cacos(0.5+0j) is 1.047-0j); torcia gives "
      "cacos's sign in both precisions", dtypes=("complex128",), kinds=("edge",),
      detail="(the sign of zero)")
known("nn.functional.softshrink", "value", "design",
      "inside [-lambd, lambd] torch 2.13's vectorised softshrink gives +0 and its scalar "
      "path (a lone element, the tail of a vector loop) input * 0, -0 for a negative input: "
      "the sign depends on the element's position (softshrink of 17 -0.2's in float32 is 16 "
      "+0's and a -0); torcia gives +0 everywhere, the vectorised answer",
      detail="(the sign of zero)")
known(("fft.*", "stft"), "value", "design",
      "an FFT output's part that comes out exactly 0 (the imaginary part of a bin where the "
      "terms cancel) carries the sign of the transform's order of additions: torch 2.13's "
      "pocketfft/MKL plans and NumPy's pocketfft (torcia's) add in different orders, so such "
      "a zero may be +0 in one and -0 in the other; the values are equal",
      detail="(the sign of zero)")
known(("cholesky", "linalg.cholesky", "linalg.cholesky_ex"), "value", "design",
      "the diagonal of a complex Cholesky factor is real; the sign of its imaginary zero is "
      "the LAPACK build's (torch 2.13's MKL zpotrf leaves -0 in some diagonal elements, "
      "NumPy's LAPACK, torcia's, +0)", dtypes=_CX, detail="(the sign of zero)")
known("addbmm", "value", "design",
      "torch 2.13's CPU addbmm in half precision adds the batch's products one addmm_() at a "
      "time, rounding to half after each; torcia accumulates in float32 and rounds once (a "
      "closer answer)", dtypes=("float16", "bfloat16"))
known(("special.airy_ai", "special.bessel_j0", "special.bessel_j1", "special.bessel_y1"),
      "value", "design",
      "torch 2.13 computes these in float32 for float32 (and integer) input, whose phase of a "
      "large argument (beyond about +-3e4) has no digit left (bessel_j0(2**31) is 4.1e-6 in "
      "float32, "
      "-8.9e-6 in float64); torcia computes in float64 and rounds",
      dtypes=("int16", "int32", "int64", "float32"), kinds=("edge",))
known("special.airy_ai", "value", "design",
      "torch 2.13's float64 airy_ai is off by up to 2e-5 relative for negative arguments "
      "near -2.5 (airy_ai(-2.2620753206696858) is 0.0531975 in torch, 0.0531965 in torcia and "
      "mpmath); torcia's (SciPy's Cephes airy) agrees with mpmath to an ulp",
      dtypes=("float64",))
known("prod", "value", "design",
      "torch 2.13's CPU prod in half precision rounds to half after each product (26.86 for "
      "a row whose exact product is 26.888); torcia accumulates in float32 and rounds once "
      "(26.89)", dtypes=("float16", "bfloat16"))
known("special.zeta", "nan", "design",
      "torch 2.13's float32 zeta overflows in its Euler-Maclaurin terms for an order x of "
      "~1e19 and gives NaN where the value underflows to 0; torcia computes in float64 and "
      "rounds", dtypes=("int64", "float32"), kinds=("edge",))
known("argsort", ("accepted", "error class"), "lenient",
      "torch 2.13's binding of argsort takes stable= only with dim and descending as keywords "
      "(argsort(x, 0, stable=True) is a TypeError, though its documented signature has them "
      "all positional-or-keyword); torcia takes the documented signature",
      detail="takes from 2 to 1 positional arguments")
known("nn.functional.lp_pool3d", "value", "design",
      "torch 2.13 has no half-precision avg_pool3d on the CPU; torcia computes lp_pool3d as "
      "torch computes lp_pool1d and lp_pool2d in half precision (power, average and root each "
      "rounded to the dtype), up to 2 ulps from the float32 answer rounded once",
      dtypes=("float16", "bfloat16"), detail="float32 answer, rounded")
known("nn.functional.instance_norm", "value", "design",
      "torch 2.13's CPU instance_norm in half precision differs from torcia's by an ulp or "
      "two; torcia computes in float32 and rounds once, nearer the exact value of the same "
      "inputs (on the CI sample: at most 0.00096 off, torch 0.00136)",
      dtypes=("float16", "bfloat16"))
known(("nn.functional.conv_transpose1d", "nn.functional.conv_transpose2d",
       "nn.functional.conv_transpose3d"), "value", "design",
      "torch 2.13 computes half-precision conv_transpose through oneDNN, rounding once, only "
      "where the CPU has half-precision instructions (AVX512-FP16); elsewhere its "
      "slow_conv_transpose sums the overlapping columns in the dtype (17% off a small value "
      "of float16 measured); torcia computes in float32 and rounds once everywhere",
      dtypes=("float16", "bfloat16"))
known(("complex", "view_as_complex"), "refused", "design",
      "torch 2.13 makes complex32 (ComplexHalf) of float16 parts; torcia has no complex32 "
      "dtype (NumPy has none) and refuses them in PyTorch's words for other dtypes",
      dtypes=("float16",))
known(("conv_tbc", "nn.functional.conv_tbc", "gru", "nn.functional.multi_head_attention_forward"),
      "value", "design",
      "half precision through several matrix products: where each product's sum is rounded "
      "to half (and in what order it is summed) differs between torch 2.13's CPU kernels "
      "(its BLAS, its blocking) and torcia's, by a few ulps either way; both are as far "
      "from the exact value of the same inputs", dtypes=("float16", "bfloat16"))
known("getitem", "raised", "design",
      "indexing with a boolean mask gives as many elements as the mask has True values: "
      "torch 2.13 refuses it on the meta device too (its nonzero has no meta kernel)",
      prop="meta", detail="with a boolean mask")
known("getitem", "raised", "design",
      "indexing with a batched boolean mask gives each sample its own length: torch 2.13's "
      "vmap refuses it too ('Attempting to batch over indexing with a boolean mask')",
      prop="vmap", detail="values were read as one plain array")
known("repeat_interleave", "raised", "design",
      "with a tensor of repeats the length comes from their values: torch 2.13's meta "
      "device refuses it too ('cannot repeat_interleave a meta tensor without output_size')",
      prop="meta", detail="cannot repeat_interleave a meta tensor")
known("histogramdd", "raised", "design",
      "torch 2.13 has no meta kernel for it either (NotImplementedError: 'no fake impl "
      "or Meta kernel registered'): its bins come from the values", prop="meta")
known("unique_consecutive", "raised", "design",
      "an output whose shape depends on the values cannot be batched: torch 2.13's vmap "
      "refuses it too ('We do not support batching operators that can output dynamic "
      "shape')", prop="vmap")

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
