"""A GAN learning a ring of eight Gaussians in 2-D (the classic toy problem), with the
training loop of PyTorch's DCGAN example (BCELoss, real/fake labels, two Adam optimizers).

The printed ``loss`` is how far the generated samples are from the data (the distance
between their means and covariances): the adversarial losses themselves do not fall.
"""

import argparse
import math

import torch
import torch.nn as nn
import torch.optim as optim


def sample_ring(n, generator=None):
    k = torch.randint(0, 8, (n,), generator=generator)
    angle = k.float() * (2 * math.pi / 8)
    centres = torch.stack([torch.cos(angle), torch.sin(angle)], dim=1) * 2.0
    return centres + 0.05 * torch.randn(n, 2, generator=generator)


def moments_distance(a, b):
    ca = torch.cov(a.T)
    cb = torch.cov(b.T)
    return ((a.mean(0) - b.mean(0)).norm() + (ca - cb).norm()).item()


def main():
    parser = argparse.ArgumentParser(description="toy GAN")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--nz", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    netG = nn.Sequential(nn.Linear(args.nz, 64), nn.ReLU(True), nn.Linear(64, 64),
                         nn.ReLU(True), nn.Linear(64, 2)).to(device)
    netD = nn.Sequential(nn.Linear(2, 64), nn.LeakyReLU(0.2, inplace=True), nn.Linear(64, 64),
                         nn.LeakyReLU(0.2, inplace=True), nn.Linear(64, 1),
                         nn.Sigmoid()).to(device)
    criterion = nn.BCELoss()
    optimizerD = optim.Adam(netD.parameters(), lr=2e-3, betas=(0.5, 0.999))
    optimizerG = optim.Adam(netG.parameters(), lr=2e-3, betas=(0.5, 0.999))
    real_label, fake_label = 1.0, 0.0
    fixed_noise = torch.randn(512, args.nz, device=device)
    reference = sample_ring(512).to(device)
    with torch.no_grad():
        print(f"epoch 0 loss {moments_distance(netG(fixed_noise), reference):.4f}")
    for epoch in range(1, args.epochs + 1):
        for _ in range(args.steps):
            real = sample_ring(args.batch_size).to(device)
            netD.zero_grad(set_to_none=True)
            label = torch.full((args.batch_size,), real_label, dtype=torch.float, device=device)
            errD_real = criterion(netD(real).view(-1), label)
            errD_real.backward()
            noise = torch.randn(args.batch_size, args.nz, device=device)
            fake = netG(noise)
            label.fill_(fake_label)
            errD_fake = criterion(netD(fake.detach()).view(-1), label)
            errD_fake.backward()
            optimizerD.step()

            netG.zero_grad(set_to_none=True)
            label.fill_(real_label)
            errG = criterion(netD(fake).view(-1), label)
            errG.backward()
            optimizerG.step()
        with torch.no_grad():
            distance = moments_distance(netG(fixed_noise), reference)
        print(f"epoch {epoch} Loss_D {(errD_real + errD_fake).item():.4f} "
              f"Loss_G {errG.item():.4f}")
        print(f"epoch {epoch} loss {distance:.4f}")


if __name__ == "__main__":
    main()
