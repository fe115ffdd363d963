"""A variational autoencoder (Kingma and Welling, 2014) trained with ``Normal.rsample`` and
``kl_divergence``, as a PyTorch script writes it.

The data are 12-dimensional points on a noisy curved 2-D manifold. The encoder gives the
mean and log-variance of q(z | x); a reparameterised sample goes through the decoder, whose
output is the mean of an ``Independent(Normal(...), 1)`` likelihood; the loss is the
negative ELBO: reconstruction negative log-likelihood plus KL(q(z | x) || N(0, I)).

    python examples/vae.py --steps 300

Needs torcia-nn and torcia-optim besides torcia-distributions.
"""

from __future__ import annotations

import argparse

import torcia as torch
from torcia import nn, optim
from torcia.distributions import Independent, Normal, kl_divergence


def make_data(n, dim, seed):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, 2, generator=g)
    mix = torch.randn(2, dim, generator=g)
    return torch.tanh(z @ mix) + 0.05 * torch.randn(n, dim, generator=g)


class VAE(nn.Module):
    def __init__(self, dim, latent=2, hidden=32):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(),
                                     nn.Linear(hidden, 2 * latent))
        self.decoder = nn.Sequential(nn.Linear(latent, hidden), nn.ReLU(),
                                     nn.Linear(hidden, dim))
        self.log_noise = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        mu, log_var = self.encoder(x).chunk(2, dim=-1)
        q = Normal(mu, torch.exp(0.5 * log_var))
        z = q.rsample()
        likelihood = Independent(Normal(self.decoder(z), self.log_noise.exp()), 1)
        prior = Normal(torch.zeros_like(mu), torch.ones_like(mu))
        kl = kl_divergence(q, prior).sum(-1)
        return (-likelihood.log_prob(x) + kl).mean()


def main(argv=None) -> list[float]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    data = make_data(1024, 12, args.seed)
    torch.manual_seed(args.seed)
    model = VAE(12)
    opt = optim.Adam(model.parameters(), lr=args.lr)
    losses = []
    for step in range(args.steps):
        idx = torch.randint(0, len(data), (args.batch,))
        loss = model(data[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 50 == 0 or step == args.steps - 1:
            print(f"step {step:4d}  negative ELBO {loss.item():.3f}")
    return losses


if __name__ == "__main__":
    main()
