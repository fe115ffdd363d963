"""timm: models (forward, a training step), its optimizer factory, Mixup and transforms."""

from common import case, grads, numpy, params, randint, randn, seed_weights


def _forward(name, size=32, **kwargs):
    import timm

    model = seed_weights(timm.create_model(name, pretrained=False, num_classes=7, **kwargs))
    model.eval()
    return {"logits": numpy(model(randn(2, 3, size, size, seed=1)))}


@case(needs=("torcia.jit",))
def case_resnet18():
    return _forward("resnet18")


@case(needs=("torcia.jit",))
def case_vit_tiny():
    return _forward("vit_tiny_patch16_224", img_size=32, patch_size=8)


@case(needs=("torcia.jit",))
def case_convnext_atto():
    return _forward("convnext_atto")


@case(needs=("torcia.jit",))
def case_efficientnet_b0():
    return _forward("efficientnet_b0")


# train-mode batch norm over 4 small images scales the first convolutions' gradients by
# 1/std (to 17 for weights of 0.05); the float32 rounding of the sums (5e-5 of the
# gradients, as measured between the frameworks) comes to 1e-4 of the weights in two steps
@case(needs=("torcia.jit",), rtol=1e-3, atol=1e-4)
def case_optimizer_step():
    import timm
    import timm.optim
    import torch

    model = seed_weights(timm.create_model("resnet10t", pretrained=False, num_classes=5))
    model.train()
    # SGD with momentum, not Adam: Adam's first step is lr times the sign of each gradient,
    # so the many near-zero gradients of a ReLU network's weights move by lr in directions
    # their rounding picks, differently on each framework (timm's Adam family is compared
    # on a smooth problem in case_other_optimizers)
    opt = timm.optim.create_optimizer_v2(model, "sgd", lr=1e-3, momentum=0.9,
                                         weight_decay=0.05)
    x, y = randn(4, 3, 32, 32, seed=2), randint(5, 4, seed=3)
    losses = []
    for _ in range(2):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": losses, **params(model)}


@case(needs=("torcia.jit",))
def case_other_optimizers():
    import timm.optim
    import torch

    out = {}
    for name in ("lamb", "adabelief", "lion", "nadamw"):
        model = seed_weights(torch.nn.Linear(6, 3))
        opt = timm.optim.create_optimizer_v2(model, name, lr=1e-2)
        for step in range(2):
            opt.zero_grad()
            model(randn(5, 6, seed=step)).square().mean().backward()
            opt.step()
        out.update(params(model, f"{name}."))
    return out


@case(needs=("torcia.jit",))
def case_mixup():
    import torch
    from timm.data import Mixup

    mixup = Mixup(mixup_alpha=0.8, cutmix_alpha=0.0, label_smoothing=0.1, num_classes=4)
    x, y = randn(4, 3, 8, 8, seed=4), randint(4, 4, seed=5)
    # the mixing coefficient is drawn from NumPy's global generator, seeded alike
    import numpy as np

    np.random.seed(0)
    xm, ym = mixup(x.clone(), y)
    lam = float(ym.max())
    return {"x": numpy(xm), "y": numpy(ym), "lam": lam,
            "untouched": numpy(torch.flip(x, [0]))}


@case(needs=("torcia.jit",))
def case_transforms():
    import numpy as np
    from PIL import Image
    from timm.data import create_transform, resolve_data_config

    cfg = resolve_data_config({"input_size": (3, 16, 16), "interpolation": "bicubic",
                               "crop_pct": 0.875})
    transform = create_transform(**cfg, is_training=False)
    image = Image.fromarray((np.arange(20 * 24 * 3) % 251).astype(np.uint8).reshape(20, 24, 3))
    return {"image": numpy(transform(image))}


@case(needs=("torcia.jit",))
def case_training_backward():
    import timm
    import torch

    model = seed_weights(timm.create_model("vit_tiny_patch16_224", pretrained=False,
                                           num_classes=3, img_size=16, patch_size=8))
    model.train()
    loss = torch.nn.functional.cross_entropy(model(randn(2, 3, 16, 16, seed=6)),
                                             randint(3, 2, seed=7))
    loss.backward()
    return {"loss": loss.item(), **grads(model)}
