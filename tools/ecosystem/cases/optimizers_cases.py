"""Optimizer libraries: schedulefree and torch-optimizer (whose updates use PyTorch's
deprecated ``add_(scalar, tensor)`` overloads)."""

from common import case, params, randn, seed_weights


def _steps(opt_factory, steps=3):
    import torch

    model = seed_weights(torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(),
                                             torch.nn.Linear(5, 2)))
    opt = opt_factory(model.parameters())
    if hasattr(opt, "train"):
        opt.train()
    for step in range(steps):
        opt.zero_grad()
        model(randn(4, 6, seed=step)).square().mean().backward()
        opt.step()
    if hasattr(opt, "eval"):
        opt.eval()
    return model


@case(library="schedulefree")
def case_schedulefree():
    import schedulefree

    out = {}
    for name, factory in (("adamw", lambda p: schedulefree.AdamWScheduleFree(p, lr=1e-2)),
                          ("sgd", lambda p: schedulefree.SGDScheduleFree(p, lr=1e-2))):
        out.update(params(_steps(factory), f"{name}."))
    return out


@case(library="torch-optimizer")
def case_torch_optimizer():
    import torch_optimizer as optim

    out = {}
    for name in ("Lamb", "RAdam", "AdaBound", "DiffGrad", "Yogi"):
        out.update(params(_steps(lambda p, n=name: getattr(optim, n)(p, lr=1e-2)),
                          f"{name}."))
    return out
