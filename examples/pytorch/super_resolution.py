"""Single-image super-resolution with a sub-pixel convolution network (ESPCN, as PyTorch's
super_resolution example): low-resolution inputs are made by bicubic downscaling of
smooth synthetic images, and nn.PixelShuffle upsamples by 2."""

import argparse
import os
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.nn.init as init
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self, upscale_factor):
        super().__init__()
        self.relu = nn.ReLU()
        self.conv1 = nn.Conv2d(1, 32, (5, 5), (1, 1), (2, 2))
        self.conv2 = nn.Conv2d(32, 32, (3, 3), (1, 1), (1, 1))
        self.conv3 = nn.Conv2d(32, upscale_factor ** 2, (3, 3), (1, 1), (1, 1))
        self.pixel_shuffle = nn.PixelShuffle(upscale_factor)
        self._initialize_weights()

    def forward(self, x):
        x = self.relu(self.conv1(x))
        x = self.relu(self.conv2(x))
        return self.pixel_shuffle(self.conv3(x))

    def _initialize_weights(self):
        init.orthogonal_(self.conv1.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv2.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv3.weight)


def smooth_images(n, size):
    noise = torch.randn(n, 1, size // 4, size // 4)
    return torch.sigmoid(F.interpolate(noise, size=(size, size), mode="bilinear",
                                       align_corners=False) * 2)


def main():
    parser = argparse.ArgumentParser(description="ESPCN super-resolution")
    parser.add_argument("--upscale_factor", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=0.003)
    parser.add_argument("--seed", type=int, default=123)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    high = smooth_images(192, 16)
    low = F.interpolate(high, scale_factor=1 / args.upscale_factor, mode="bicubic",
                        align_corners=False).clamp(0, 1)
    loader = DataLoader(TensorDataset(low, high), batch_size=args.batch_size, shuffle=True)
    model = Net(upscale_factor=args.upscale_factor).to(device)
    criterion = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    for epoch in range(1, args.epochs + 1):
        for step, (inp, target) in enumerate(loader):
            inp, target = inp.to(device), target.to(device)
            optimizer.zero_grad(set_to_none=True)
            loss = criterion(model(inp), target)
            loss.backward()
            optimizer.step()
            if step % 3 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.5f}")
        with torch.no_grad():
            mse = criterion(model(low.to(device)), high.to(device)).item()
        print(f"epoch {epoch} PSNR {10 * torch.log10(torch.tensor(1 / mse)).item():.2f} dB")
    torch.save(model.state_dict(), os.path.join(tempfile.mkdtemp(), "espcn.pth"))


if __name__ == "__main__":
    main()
