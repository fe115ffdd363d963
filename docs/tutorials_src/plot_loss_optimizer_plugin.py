"""
Writing a loss and an optimizer plugin
======================================

A plugin adds a loss or an optimizer by name: implement torcia-nn's
``torcia_register_losses`` and torcia-optim's ``torcia_register_optimizers`` hooks, and
everyone who asks ``torcia.nn.losses.get(name)`` or ``torcia.optim.create(name, ...)``
gets yours. Here the plugin is registered in-process; shipped as a distribution, it names
its module in the ``torcia`` entry-point group instead (see :doc:`/plugin_guide`):

.. code-block:: toml

   [project.entry-points.torcia]
   my_plugin = "my_plugin"
"""

import matplotlib.pyplot as plt

import torcia
from torcia import nn

# %%
# The loss: log-cosh, quadratic near zero and linear far away, so outliers pull less.


class LogCoshLoss(nn.Module):
    """Mean of ``log(cosh(input - target))``."""

    def forward(self, input, target):
        d = input - target
        # log(cosh(d)) = |d| + log1p(exp(-2|d|)) - log(2), stable for large |d|
        return (d.abs() + torcia.log1p(torcia.exp(-2 * d.abs())) - 0.6931471805599453).mean()


# %%
# The optimizer: sign descent, each parameter moved by ``lr`` against its gradient's sign.


class SignSGD(torcia.optim.Optimizer):
    """Move each parameter by ``lr`` against the sign of its gradient."""

    def __init__(self, params, lr=0.01):
        super().__init__(params, dict(lr=lr))

    @torcia.no_grad()
    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.add_(p.grad.sign(), alpha=-group["lr"])
        return loss


# %%
# The plugin: hook implementations, marked with ``torcia.hookimpl`` (a pluggy
# ``HookimplMarker``), that fill the registries. Any object (usually a module) holding
# them can be registered.


class MyPlugin:
    @torcia.hookimpl
    def torcia_register_losses(self, registry):
        registry.add("log_cosh", LogCoshLoss)

    @torcia.hookimpl
    def torcia_register_optimizers(self, registry):
        registry.add("sign_sgd", SignSGD)


plugin = MyPlugin()
torcia.plugins.manager().register(plugin, name="my-plugin")
# the registries are filled once, on first use; rebuild them to include the new plugin
torcia.nn.losses.REGISTRY.reset()
torcia.optim.optimizers.reset()
print("log_cosh from", torcia.nn.losses.provider("log_cosh"),
      "| sign_sgd from", torcia.optim.optimizers.provider("sign_sgd"))

# %%
# Use them by name: fit a line to data with a few gross outliers, with the plugin's loss
# and optimizer, and with MSE and SGD for comparison.
torcia.manual_seed(0)
xs = torcia.linspace(-1, 1, 64).reshape(-1, 1)
ys = 3 * xs + 0.5 + 0.1 * torcia.randn(64, 1)
ys[::9] += 6.0  # outliers


def fit(loss_name, optimizer_name, lr):
    torcia.manual_seed(1)
    model = nn.Linear(1, 1)
    loss_fn = torcia.nn.losses.get(loss_name)
    optimizer = torcia.optim.create(optimizer_name, model.parameters(), lr=lr)
    history = []
    for _ in range(200):
        optimizer.zero_grad()
        loss = loss_fn(model(xs), ys)
        loss.backward()
        optimizer.step()
        history.append(loss.item())
    return model, history


robust, robust_history = fit("log_cosh", "sign_sgd", lr=0.02)
plain, plain_history = fit("mse", "sgd", lr=0.1)

fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.2))
left.plot(robust_history, label="log_cosh + sign_sgd")
left.plot(plain_history, label="mse + sgd")
left.set(xlabel="step", ylabel="training loss", yscale="log")
left.legend()
right.scatter(xs.numpy(), ys.numpy(), s=8, c="gray")
with torcia.no_grad():
    right.plot(xs.numpy(), robust(xs).numpy(), label="log_cosh + sign_sgd")
    right.plot(xs.numpy(), plain(xs).numpy(), label="mse + sgd")
right.legend()
fig.tight_layout()

# %%
# Unregister, so the rest of the process sees the installed plugins only.
torcia.plugins.manager().unregister(plugin)
torcia.nn.losses.REGISTRY.reset()
torcia.optim.optimizers.reset()
