"""Denoising convolutional auto-encoder (Conv2d down, ConvTranspose2d up) on
torchvision.datasets.FakeData images with torchvision transforms, reconstructing each image
from a noisy copy; MultiStepLR schedule, best checkpoint kept with torch.save."""

import argparse
import os
import tempfile

import torch
import torch.nn as nn
from torch.utils.data import DataLoader
from torchvision import datasets, transforms


class AutoEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(True),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(True))
        self.decoder = nn.Sequential(
            nn.ConvTranspose2d(32, 16, 3, stride=2, padding=1, output_padding=1),
            nn.ReLU(True),
            nn.ConvTranspose2d(16, 3, 3, stride=2, padding=1, output_padding=1),
            nn.Sigmoid())

    def forward(self, x):
        return self.decoder(self.encoder(x))


def main():
    parser = argparse.ArgumentParser(description="denoising conv auto-encoder")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--noise", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    transform = transforms.Compose([transforms.RandomHorizontalFlip(), transforms.ToTensor()])
    dataset = datasets.FakeData(size=192, image_size=(3, 16, 16), num_classes=4,
                                transform=transform, random_offset=args.seed)
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True, drop_last=True)
    model = AutoEncoder().to(device)
    criterion = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, weight_decay=1e-5)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[2, 4], gamma=0.3)
    best, path = float("inf"), os.path.join(tempfile.mkdtemp(), "best.pt")
    for epoch in range(1, args.epochs + 1):
        model.train()
        for step, (images, _) in enumerate(loader):
            images = images.to(device)
            noisy = (images + args.noise * torch.randn_like(images)).clamp(0.0, 1.0)
            optimizer.zero_grad(set_to_none=True)
            loss = criterion(model(noisy), images)
            loss.backward()
            optimizer.step()
            if step % 3 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.5f}")
            if loss.item() < best:
                best = loss.item()
                torch.save(model.state_dict(), path)
        scheduler.step()
    model.load_state_dict(torch.load(path))
    print(f"best_loss {best:.5f}")


if __name__ == "__main__":
    main()
