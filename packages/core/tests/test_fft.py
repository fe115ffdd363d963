"""torcia.fft against torch (every name; n/s, dim, norm; float and complex dtypes), round
trips and Parseval's theorem per norm mode, the windows, and stft/istft."""

import numpy as np
import pytest

import torcia
from torcia import fft as F

RNG = np.random.default_rng(4)
NORMS = ("backward", "ortho", "forward")
X = RNG.standard_normal((3, 6, 5))
Z = RNG.standard_normal((3, 6, 5)) + 1j * RNG.standard_normal((3, 6, 5))

CASES = {
    "fft": lambda m, x, nm: m.fft.fft(x, norm=nm),
    "fft_n_pad": lambda m, x, nm: m.fft.fft(x, n=8, dim=1, norm=nm),
    "fft_n_cut": lambda m, x, nm: m.fft.fft(x, n=3, dim=0, norm=nm),
    "ifft": lambda m, x, nm: m.fft.ifft(x, n=7, norm=nm),
    "fft2": lambda m, x, nm: m.fft.fft2(x, norm=nm),
    "ifft2": lambda m, x, nm: m.fft.ifft2(x, s=(4, 6), dim=(0, 2), norm=nm),
    "fftn": lambda m, x, nm: m.fft.fftn(x, norm=nm),
    "fftn_s": lambda m, x, nm: m.fft.fftn(x, s=(4, 3), norm=nm),
    "ifftn": lambda m, x, nm: m.fft.ifftn(x, dim=(0, 1), norm=nm),
    "hfft": lambda m, x, nm: m.fft.hfft(x, norm=nm),
    "hfft_n": lambda m, x, nm: m.fft.hfft(x, n=7, dim=1, norm=nm),
    "hfft2": lambda m, x, nm: m.fft.hfft2(x, norm=nm),
    "hfftn": lambda m, x, nm: m.fft.hfftn(x, s=(5, 6), norm=nm),
    "irfft": lambda m, x, nm: m.fft.irfft(x, norm=nm),
    "irfft_n": lambda m, x, nm: m.fft.irfft(x, n=9, dim=0, norm=nm),
    "irfft2": lambda m, x, nm: m.fft.irfft2(x, norm=nm),
    "irfftn": lambda m, x, nm: m.fft.irfftn(x, s=(4, 5, 7), norm=nm),
}
REAL_CASES = {
    "rfft": lambda m, x, nm: m.fft.rfft(x, norm=nm),
    "rfft_n": lambda m, x, nm: m.fft.rfft(x, n=9, dim=1, norm=nm),
    "rfft2": lambda m, x, nm: m.fft.rfft2(x, norm=nm),
    "rfftn": lambda m, x, nm: m.fft.rfftn(x, s=(2, 7), norm=nm),
    "ihfft": lambda m, x, nm: m.fft.ihfft(x, norm=nm),
    "ihfft2": lambda m, x, nm: m.fft.ihfft2(x, s=(5, 4), norm=nm),
    "ihfftn": lambda m, x, nm: m.fft.ihfftn(x, norm=nm),
    "fft_of_real": lambda m, x, nm: m.fft.fft(x, norm=nm),
    "irfft_of_real": lambda m, x, nm: m.fft.irfft(x, norm=nm),
}
DTYPES = {"float32": 2e-5, "float64": 1e-10}
CDTYPES = {"complex64": 2e-5, "complex128": 1e-10}


def _check(ours, theirs, tol):
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_allclose(ours.numpy(), theirs.resolve_conj().numpy(), rtol=tol,
                               atol=tol * 10)


PARITY = [(name, dtype) for name in sorted(CASES) for dtype in sorted(CDTYPES)] + [
    (name, dtype) for name in sorted(REAL_CASES) for dtype in sorted(DTYPES)]


@pytest.mark.torch
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("name, dtype", PARITY)
def test_matches_torch(name, dtype, norm):
    torch = pytest.importorskip("torch")
    fn = CASES.get(name) or REAL_CASES[name]
    data = (Z if name in CASES else X).astype(dtype)
    _check(fn(torcia, torcia.tensor(data), norm), fn(torch, torch.tensor(data), norm),
           {**CDTYPES, **DTYPES}[dtype])


@pytest.mark.torch
def test_every_torch_fft_name_exists_and_helpers_match():
    torch = pytest.importorskip("torch")
    names = {n for n in dir(torch.fft) if not n.startswith("_")} - {
        "Tensor", "torch", "common_args", "factory_common_args"}
    assert sorted(n for n in names if not hasattr(F, n)) == []
    for n in (1, 4, 5):
        for d in (1.0, 0.5):
            np.testing.assert_allclose(F.fftfreq(n, d).numpy(), torch.fft.fftfreq(n, d).numpy())
            np.testing.assert_allclose(F.rfftfreq(n, d).numpy(),
                                       torch.fft.rfftfreq(n, d).numpy())
    x = np.arange(30.0).reshape(5, 6)
    for dim in (None, 0, (1,), (0, 1)):
        for fn in ("fftshift", "ifftshift"):
            np.testing.assert_array_equal(getattr(F, fn)(torcia.tensor(x), dim=dim).numpy(),
                                          getattr(torch.fft, fn)(torch.tensor(x), dim=dim))
    assert torcia.fft.fft(torcia.tensor([1, 2])).dtype is torcia.complex64


@pytest.mark.parametrize("norm", NORMS)
def test_round_trips_and_parseval(norm):
    x = torcia.tensor(X)
    for n in (5, 8):
        x_n = x if n == 5 else F.irfft(F.rfft(x, n=n), n=n)  # x zero-padded to 8
        assert torcia.allclose(F.irfft(F.rfft(x_n, n=n, norm=norm), n, norm=norm), x_n)
    z = torcia.tensor(Z)
    assert torcia.allclose(F.ifft(F.fft(z, norm=norm), norm=norm), z)
    assert torcia.allclose(F.ifftn(F.fftn(z, norm=norm), norm=norm), z)
    assert torcia.allclose(F.irfftn(F.rfftn(x, norm=norm), s=x.shape, norm=norm), x)
    assert torcia.allclose(F.hfft(F.ihfft(x, norm=norm), n=5, norm=norm), x)
    # Parseval: sum |x|^2 = scale * sum |X|^2, with scale n, 1, 1/n for the three modes
    n = z.shape[-1]
    energy = (z.abs() ** 2).sum()
    spectrum = (F.fft(z, norm=norm).abs() ** 2).sum()
    scale = {"backward": 1 / n, "ortho": 1.0, "forward": float(n)}[norm]
    assert torcia.allclose(spectrum * scale, energy)
    n2 = z.shape[-2] * z.shape[-1]
    spectrum2 = (F.fft2(z, norm=norm).abs() ** 2).sum()
    scale2 = {"backward": 1 / n2, "ortho": 1.0, "forward": float(n2)}[norm]
    assert torcia.allclose(spectrum2 * scale2, energy)


def test_errors():
    with pytest.raises(ValueError, match='Invalid normalization mode: "nope"'):
        F.fft(torcia.ones(4), norm="nope")
    with pytest.raises(RuntimeError, match="Unsupported dtype Half"):
        F.fft(torcia.ones(4, dtype=torcia.float16))
    with pytest.raises(RuntimeError, match="expects a real input tensor"):
        F.rfft(torcia.ones(4, dtype=torcia.complex64))
    with pytest.raises(RuntimeError, match="Invalid number of data points"):
        F.fft(torcia.ones(4), n=0)
    with pytest.raises(RuntimeError, match="must have the same length"):
        F.fftn(torcia.ones(4, 4), s=(2, 2), dim=(0,))


WINDOWS = ("hann_window", "hamming_window", "blackman_window", "bartlett_window",
           "kaiser_window")


@pytest.mark.torch
@pytest.mark.parametrize("name", WINDOWS)
def test_windows_match_torch(name):
    torch = pytest.importorskip("torch")
    for periodic in (True, False):
        for n in (0, 1, 2, 7, 8):
            ours = getattr(torcia, name)(n, periodic=periodic, dtype=torcia.float64)
            theirs = getattr(torch, name)(n, periodic=periodic, dtype=torch.float64)
            np.testing.assert_allclose(ours.numpy(), theirs.numpy(), atol=1e-12)
    assert getattr(torcia, name)(5).dtype is torcia.float32



@pytest.mark.torch
@pytest.mark.parametrize("name", WINDOWS[:4])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_half_precision_windows_have_torchs_bits(name, dtype):
    """Half precision windows are PyTorch's bit for bit, signs of zero included (its
    sequence of rounded ops); float32 ones within an ulp (its vectorised cos), Bartlett's
    exactly."""
    torch = pytest.importorskip("torch")
    for periodic in (True, False):
        for n in range(64):
            ours = getattr(torcia, name)(n, periodic=periodic, dtype=getattr(torcia, dtype))
            theirs = getattr(torch, name)(n, periodic=periodic, dtype=getattr(torch, dtype))
            a, b = ours.double().numpy(), theirs.double().numpy()
            if dtype == "float32" and name != "bartlett_window":
                np.testing.assert_allclose(a, b, rtol=0, atol=2.4e-7)
            else:
                np.testing.assert_array_equal(a, b)
            np.testing.assert_array_equal(np.signbit(a), np.signbit(b))

STFT = [dict(n_fft=16, hop_length=4, window="hann"),
        dict(n_fft=16, hop_length=3, win_length=10, window="hamming", normalized=True),
        dict(n_fft=15, center=False, window="kaiser"),
        dict(n_fft=16, onesided=False, window="hann"),
        dict(n_fft=16, pad_mode="constant", window="bartlett")]


@pytest.mark.torch
@pytest.mark.filterwarnings("ignore:The length of signal is shorter")
@pytest.mark.parametrize("i", range(len(STFT)))
def test_stft_istft_match_torch(i):
    torch = pytest.importorskip("torch")
    kw = dict(STFT[i])
    name = kw.pop("window") + "_window"
    length = kw.get("win_length", kw["n_fft"])
    x = RNG.standard_normal((2, 50))
    ours = torcia.stft(torcia.tensor(x), window=getattr(torcia, name)(
        length, dtype=torcia.float64), return_complex=True, **kw)
    theirs = torch.stft(torch.tensor(x), window=getattr(torch, name)(
        length, dtype=torch.float64), return_complex=True, **kw)
    _check(ours, theirs, 1e-10)
    kw.pop("pad_mode", None)
    back = torcia.istft(ours, window=getattr(torcia, name)(length, dtype=torcia.float64),
                        length=50, **kw)
    want = torch.istft(theirs, window=getattr(torch, name)(length, dtype=torch.float64),
                       length=50, **kw)
    _check(back, want, 1e-10)
    if kw.get("center", True):  # without centering the tail frames do not cover x's end
        np.testing.assert_allclose(back.numpy(), x, atol=1e-10)


def test_stft_errors_and_real_view():
    with pytest.raises(RuntimeError, match="requires the return_complex parameter"):
        torcia.stft(torcia.ones(32), 8)
    spec = torcia.stft(torcia.ones(32), 8, return_complex=False)
    assert spec.shape == (5, 17, 2) and spec.dtype is torcia.float32
    with pytest.raises(RuntimeError, match="requires a complex-valued input"):
        torcia.istft(torcia.ones(5, 3), 8)
