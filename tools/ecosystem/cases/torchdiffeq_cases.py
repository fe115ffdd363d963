"""torchdiffeq: ODE solves and gradients through them (backprop and adjoint)."""

from common import grads, numpy, randn, seed_weights


class _Field:
    def __new__(cls):
        import torch

        class Field(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.net = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(),
                                               torch.nn.Linear(8, 3))

            def forward(self, t, y):
                return self.net(y)

        return seed_weights(Field(), scale=0.3)


def case_odeint_rk4():
    import torch
    from torchdiffeq import odeint

    field = _Field()
    ys = odeint(field, randn(2, 3, seed=1), torch.linspace(0, 1, 5), method="rk4",
                options={"step_size": 0.1})
    ys.sum().backward()
    return {"ys": numpy(ys), **grads(field)}


def case_odeint_dopri5_backprop():
    import torch
    from torchdiffeq import odeint

    field = _Field()
    ys = odeint(field, randn(2, 3, seed=1), torch.linspace(0, 1, 4), method="dopri5",
                rtol=1e-6, atol=1e-8)
    ys.square().sum().backward()
    return {"ys": numpy(ys), **grads(field)}


def case_odeint_adjoint():
    import torch
    from torchdiffeq import odeint_adjoint

    field = _Field()
    ys = odeint_adjoint(field, randn(2, 3, seed=1), torch.linspace(0, 1, 4),
                        rtol=1e-6, atol=1e-8)
    ys.square().sum().backward()
    return {"ys": numpy(ys), **grads(field)}
