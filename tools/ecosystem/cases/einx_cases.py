"""einx: its notation on tensors (the torch backend)."""

from common import numpy, randn


def case_operations():
    import einx

    x = randn(2, 3, 4, seed=1)
    w = randn(4, 5, seed=2)
    return {
        "dot": numpy(einx.dot("b t [c], [c] d -> b t d", x, w)),
        "sum": numpy(einx.sum("b [t] c", x)),
        "rearrange": numpy(einx.rearrange("b t c -> c (b t)", x)),
        "add": numpy(einx.add("b t c, c", x, randn(4, seed=3))),
        "softmax": numpy(einx.softmax("b [t] c", x)),
    }
