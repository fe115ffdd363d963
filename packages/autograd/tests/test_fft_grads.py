"""Gradients through torcia.fft and stft/istft against torch's (real and complex inputs,
every norm mode), and gradcheck through stft/istft."""

import numpy as np
import pytest

import torcia
from torcia.autograd import gradcheck

RNG = np.random.default_rng(9)
X = RNG.standard_normal((3, 8))
Z = RNG.standard_normal((3, 5)) + 1j * RNG.standard_normal((3, 5))

LOSSES = {
    "fft": (lambda L, x, m: L.fft.fft(x, n=6, norm=m).abs().sum(), Z),
    "ifft2": (lambda L, x, m: L.fft.ifft2(x, norm=m).real.pow(2).sum(), Z),
    "rfft": (lambda L, x, m: L.fft.rfft(x, norm=m).abs().pow(2).sum(), X),
    "rfftn": (lambda L, x, m: (L.fft.rfftn(x, s=(4, 6), norm=m).angle() * 1.5).sum(), X),
    "irfft": (lambda L, x, m: (L.fft.irfft(x, n=8, norm=m) * L.arange(8)).sum(), Z),
    "irfft_odd": (lambda L, x, m: L.fft.irfft(x, n=9, norm=m).sin().sum(), Z),
    "hfft": (lambda L, x, m: L.fft.hfft(x, norm=m).pow(2).sum(), Z),
    "ihfft": (lambda L, x, m: L.fft.ihfft(x, norm=m).imag.sum(), X),
    "irfft2": (lambda L, x, m: L.fft.irfft2(x, s=(3, 6), norm=m).exp().sum(), Z),
}


@pytest.mark.torch
@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_fft_gradients_match_torch(name, norm):
    torch = pytest.importorskip("torch")
    fn, data = LOSSES[name]
    ours = torcia.tensor(data, requires_grad=True)
    fn(torcia, ours, norm).backward()
    theirs = torch.tensor(data, requires_grad=True)
    fn(torch, theirs, norm).backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.resolve_conj().numpy(),
                               rtol=1e-9, atol=1e-10)


def _spectrogram(L, x, w):
    return L.stft(x, 8, hop_length=2, window=w, return_complex=True).abs().pow(2).sum()


def _round_trip(L, x, w):
    spec = L.stft(x, 8, hop_length=2, window=w, return_complex=True) * 1.5
    return L.istft(spec, 8, hop_length=2, window=w, length=x.shape[-1]).pow(3).sum()


@pytest.mark.torch
@pytest.mark.parametrize("fn", [_spectrogram, _round_trip])
def test_stft_istft_gradients_match_torch(fn):
    torch = pytest.importorskip("torch")
    data = RNG.standard_normal((2, 24))
    ours = torcia.tensor(data, requires_grad=True)
    fn(torcia, ours, torcia.hann_window(8, dtype=torcia.float64)).backward()
    theirs = torch.tensor(data, requires_grad=True)
    fn(torch, theirs, torch.hann_window(8, dtype=torch.float64)).backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-9, atol=1e-10)


def test_stft_istft_gradcheck():
    w = torcia.hann_window(8, dtype=torcia.float64)
    x = torcia.tensor(RNG.standard_normal(20), requires_grad=True)
    assert gradcheck(lambda t: torcia.stft(t, 8, hop_length=2, window=w, return_complex=True),
                     (x,))
    spec = torcia.stft(x.detach(), 8, hop_length=2, window=w, return_complex=True)
    assert gradcheck(lambda s: torcia.istft(s, 8, hop_length=2, window=w, length=20),
                     (spec.requires_grad_(),))
