"""einops: rearrange/reduce/repeat/pack/einsum on tensors, its layers in a model."""

from common import grads, numpy, randn, seed_weights


def case_functions():
    import einops

    x = randn(2, 3, 4, 6, seed=1)
    packed, shapes = einops.pack([x, randn(2, 5, seed=2)], "b *")
    a, b = einops.unpack(packed, shapes, "b *")
    return {
        "rearrange": numpy(einops.rearrange(x, "b c (h p) w -> b (c p) h w", p=2)),
        "reduce": numpy(einops.reduce(x, "b c h w -> b c", "mean")),
        "max": numpy(einops.reduce(x, "b c (h h2) (w w2) -> b c h w", "max", h2=2, w2=2)),
        "repeat": numpy(einops.repeat(x[0, 0], "h w -> h w k", k=3)),
        "einsum": numpy(einops.einsum(x, x, "b c h w, b d h w -> b c d")),
        "pack": numpy(packed), "unpack": numpy(a) - numpy(x),
        "unpack_b": numpy(b),
    }


def case_layers_backward():
    import torch
    from einops.layers.torch import EinMix, Rearrange, Reduce

    model = torch.nn.Sequential(
        Rearrange("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=2, p2=2),
        EinMix("b t c -> b t d", weight_shape="c d", bias_shape="d", c=12, d=8),
        Reduce("b t d -> b d", "mean"),
    )
    seed_weights(model)
    x = randn(2, 3, 4, 4, seed=3)
    out = model(x)
    out.square().sum().backward()
    return {"out": numpy(out), **grads(model)}
