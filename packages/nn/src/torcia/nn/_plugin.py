"""torcia-nn's built-in plugin: registers its losses through its own hook, the way any
plugin distribution does (entry point ``nn`` in torcia-nn's ``pyproject.toml``)."""

from __future__ import annotations

import torcia
from torcia.nn import functional
from torcia.nn._func import vmap
from torcia.nn.modules import loss as _loss
from torcia.nn.parameter import Parameter

LOSSES = {
    "mse": _loss.MSELoss,
    "l1": _loss.L1Loss,
    "smooth_l1": _loss.SmoothL1Loss,
    "huber": _loss.HuberLoss,
    "cross_entropy": _loss.CrossEntropyLoss,
    "nll": _loss.NLLLoss,
    "bce": _loss.BCELoss,
    "bce_with_logits": _loss.BCEWithLogitsLoss,
    "kl_div": _loss.KLDivLoss,
    "cosine_embedding": _loss.CosineEmbeddingLoss,
    "margin_ranking": _loss.MarginRankingLoss,
    "triplet_margin": _loss.TripletMarginLoss,
    "hinge_embedding": _loss.HingeEmbeddingLoss,
    "soft_margin": _loss.SoftMarginLoss,
    "poisson_nll": _loss.PoissonNLLLoss,
    "multi_margin": _loss.MultiMarginLoss,
}


@torcia.hookimpl
def torcia_register_losses(registry):
    for name, cls in LOSSES.items():
        registry.add(name, cls)


@torcia.hookimpl
def torcia_register_names(registry):
    # core shows these under PyTorch's names; it may not import torcia-nn
    registry.add("torcia.nn.functional", functional)  # torch.kl_div and its kin
    registry.add("torcia.nn.Parameter", Parameter)  # a saved Parameter loads as one
    registry.add("torcia.vmap", vmap)
