"""Integration: a small FNO-style spectral convolution (torcia.fft + complex weights held as
real parameters) learns a smoothing operator, and its loss falls."""

import math

import torcia as torch
from torcia import nn, optim


class SpectralConv1d(nn.Module):
    """Multiply the lowest ``modes`` Fourier modes of each channel by learned complex
    weights (stored as real pairs: optimizers see real parameters), then transform back."""

    def __init__(self, in_channels, out_channels, modes):
        super().__init__()
        self.modes = modes
        scale = 1 / (in_channels * out_channels)
        self.weight = nn.Parameter(scale * torch.randn(in_channels, out_channels, modes, 2))

    def forward(self, x):  # (batch, in_channels, n)
        n = x.shape[-1]
        spectrum = torch.fft.rfft(x, norm="ortho")[..., :self.modes]
        w = torch.view_as_complex(self.weight)
        mixed = torch.einsum("bim,iom->bom", spectrum, w)
        return torch.fft.irfft(mixed, n=n, norm="ortho")


class TinyFNO(nn.Module):
    def __init__(self, width=8, modes=6):
        super().__init__()
        self.lift = nn.Linear(1, width)
        self.spectral = SpectralConv1d(width, width, modes)
        self.pointwise = nn.Conv1d(width, width, 1)
        self.project = nn.Linear(width, 1)

    def forward(self, u):  # (batch, n)
        h = self.lift(u.unsqueeze(-1)).transpose(1, 2)
        h = torch.nn.functional.gelu(self.spectral(h) + self.pointwise(h))
        return self.project(h.transpose(1, 2)).squeeze(-1)


def _data(batch=32, n=32):
    """Random smooth-ish signals and their heat-equation evolution (a spectral filter)."""
    torch.manual_seed(0)
    k = torch.fft.rfftfreq(n, 1 / n)
    coeffs = torch.randn(batch, n // 2 + 1, dtype=torch.complex64) * (-(k / 4) ** 2).exp()
    u0 = torch.fft.irfft(coeffs, n=n)
    u1 = torch.fft.irfft(coeffs * (-0.01 * (2 * math.pi * k) ** 2).exp(), n=n)
    return u0 / u0.std(), u1 / u0.std()


def test_fno_spectral_layer_trains():
    u0, u1 = _data()
    model = TinyFNO()
    opt = optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(60):
        opt.zero_grad()
        loss = ((model(u0) - u1) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert model.spectral.weight.grad is not None
    assert model.spectral.weight.grad.dtype is torch.float32
    assert losses[-1] < 0.2 * losses[0], losses[::10]
