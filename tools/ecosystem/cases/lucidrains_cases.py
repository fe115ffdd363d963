"""lucidrains' libraries: x-transformers, vector-quantize-pytorch, rotary-embedding-torch,
lion-pytorch and ema-pytorch."""

from common import case, numpy, params, randint, randn, seed_weights


@case(library="x-transformers", needs=("torcia.jit",))
def case_x_transformers():
    from x_transformers import Decoder, TransformerWrapper

    model = TransformerWrapper(num_tokens=40, max_seq_len=16,
                               attn_layers=Decoder(dim=32, depth=2, heads=4))
    seed_weights(model).eval()
    return {"logits": numpy(model(randint(40, 2, 10, seed=1)))}


@case(library="vector-quantize-pytorch", needs=("torcia.jit",))
def case_vector_quantize():
    from vector_quantize_pytorch import VectorQuantize

    vq = VectorQuantize(dim=8, codebook_size=16, decay=0.8, commitment_weight=1.0)
    seed_weights(vq)
    with __import__("torch").no_grad():
        vq._codebook.embed.copy_(randn(1, 16, 8, seed=2))
    vq.eval()
    quantized, indices, loss = vq(randn(2, 5, 8, seed=3))
    return {"quantized": numpy(quantized), "indices": numpy(indices), "loss": numpy(loss)}


@case(library="rotary-embedding-torch")
def case_rotary_embedding():
    from rotary_embedding_torch import RotaryEmbedding

    rotary = RotaryEmbedding(dim=8)
    q, k = randn(2, 4, 6, 16, seed=4), randn(2, 4, 6, 16, seed=5)
    return {"q": numpy(rotary.rotate_queries_or_keys(q)),
            "k": numpy(rotary.rotate_queries_or_keys(k))}


@case(library="lion-pytorch")
def case_lion():
    import torch
    from lion_pytorch import Lion

    model = seed_weights(torch.nn.Linear(6, 3))
    opt = Lion(model.parameters(), lr=1e-2, weight_decay=1e-2)
    for step in range(3):
        opt.zero_grad()
        model(randn(4, 6, seed=step)).square().mean().backward()
        opt.step()
    return params(model)


@case(library="ema-pytorch")
def case_ema():
    import torch
    from ema_pytorch import EMA

    model = seed_weights(torch.nn.Linear(4, 2))
    ema = EMA(model, beta=0.9, update_after_step=0, update_every=1)
    for step in range(3):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(randn(*p.shape, seed=step, scale=0.1))
        ema.update()
    return {"ema": numpy(ema(randn(3, 4, seed=9))), **params(ema.ema_model)}
