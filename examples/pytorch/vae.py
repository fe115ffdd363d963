"""Variational auto-encoder in the style of PyTorch's VAE example, on synthetic binary
images (noisy copies of a few templates) held in a TensorDataset."""

import argparse
import os
import tempfile

import torch
import torch.utils.data
from torch import nn, optim
from torch.nn import functional as F


class VAE(nn.Module):
    def __init__(self, dim=64, hidden=64, latent=4):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc21 = nn.Linear(hidden, latent)
        self.fc22 = nn.Linear(hidden, latent)
        self.fc3 = nn.Linear(latent, hidden)
        self.fc4 = nn.Linear(hidden, dim)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z):
        return torch.sigmoid(self.fc4(F.relu(self.fc3(z))))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, 64))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


def loss_function(recon_x, x, mu, logvar):
    bce = F.binary_cross_entropy(recon_x, x.view(-1, 64), reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce + kld


def main():
    parser = argparse.ArgumentParser(description="VAE example")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    templates = (torch.rand(5, 64) > 0.5).float()
    labels = torch.randint(0, 5, (1024,))
    flips = (torch.rand(1024, 64) < 0.05).float()
    data = (templates[labels] - flips).abs()
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(data), batch_size=
                                         args.batch_size, shuffle=True)
    model = VAE().to(device)
    optimizer = optim.Adam(model.parameters(), lr=1e-2)
    for epoch in range(1, args.epochs + 1):
        model.train()
        for i, (x,) in enumerate(loader):
            x = x.to(device)
            optimizer.zero_grad(set_to_none=True)
            recon, mu, logvar = model(x)
            loss = loss_function(recon, x, mu, logvar)
            loss.backward()
            optimizer.step()
            if i % 8 == 0:
                print(f"epoch {epoch} step {i} loss {loss.item() / len(x):.4f}")
        with torch.no_grad():
            sample = model.decode(torch.randn(8, 4).to(device))
        print(f"epoch {epoch} sample mean {sample.mean().item():.3f}")
    torch.save(model.state_dict(), os.path.join(tempfile.mkdtemp(), "vae.pt"))


if __name__ == "__main__":
    main()
