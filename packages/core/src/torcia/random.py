"""Random number generation: ``Generator`` objects and the default generator.

A :class:`Generator` wraps NumPy's PCG64 bit generator, so streams are reproducible for a
seed on every platform. Backends for other devices draw their seeds from it.
"""

from __future__ import annotations

import threading

import numpy as np

from torcia import _tensor
from torcia.backend import device as _device

#: Held while a generator makes its NumPy generator, so that threads share one.
_MAKING = threading.Lock()


class Generator:
    """A source of random numbers, as ``torch.Generator``.

    Examples
    --------
    >>> import torcia
    >>> g = torcia.Generator().manual_seed(0)
    >>> a = torcia.rand(3, generator=g)
    >>> b = torcia.rand(3, generator=torcia.Generator().manual_seed(0))
    >>> bool((a == b).all())
    True
    """

    def __init__(self, device="cpu"):
        self.device = _device(device)
        self._seed = 67280421310721
        self._rng = None

    @property
    def rng(self):
        """The NumPy generator drawing this generator's numbers, one object for its life.

        Made with its first use, from the seed: ``import torcia`` makes the default
        generator without importing ``numpy.random``."""
        if self._rng is None:
            with _MAKING:
                if self._rng is None:
                    self._rng = np.random.Generator(np.random.PCG64(self._seed))
        return self._rng

    def manual_seed(self, seed: int) -> Generator:
        seed = int(seed)
        if seed < 0:
            seed += 1 << 64
        if not 0 <= seed < (1 << 64):
            raise RuntimeError(f"Overflow when unpacking long long: seed {seed} is out of range")
        self._seed = seed
        # reseeded in place: a program torcia.compile captured holds this NumPy generator
        # and must draw from the new stream (a fresh PCG64 state: the same numbers)
        self.rng.bit_generator.state = np.random.PCG64(seed).state
        return self

    def seed(self) -> int:
        """Seed from fresh entropy and return the seed."""
        seed = int(np.random.SeedSequence().entropy % (1 << 63))
        self.manual_seed(seed)
        return seed

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self):
        """The generator's state as a uint8 tensor (opaque; for ``set_state``)."""
        import json

        blob = json.dumps({"seed": self._seed, "state": self.rng.bit_generator.state})
        return _tensor.FACTORIES.tensor(np.frombuffer(blob.encode(), dtype=np.uint8).copy())

    def set_state(self, state) -> Generator:
        import json

        blob = bytes(np.asarray(state.numpy(), dtype=np.uint8).tobytes())
        data = json.loads(blob.decode())
        self._seed = data["seed"]
        self.rng.bit_generator.state = data["state"]
        return self

    def spawn_seed(self) -> int:
        """A 63-bit seed drawn from this stream (for workers and other devices)."""
        return int(self.rng.integers(0, 1 << 63))


default_generator = Generator()


def manual_seed(seed: int) -> Generator:
    """Seed the default generator (and every device backend's, through their hooks).

    Examples
    --------
    >>> import torcia
    >>> _ = torcia.manual_seed(0); a = torcia.randn(2)
    >>> _ = torcia.manual_seed(0); bool((a == torcia.randn(2)).all())
    True
    """
    default_generator.manual_seed(seed)
    for fn in _seed_callbacks:
        fn(int(seed))
    return default_generator


_seed_callbacks: list = []


def seed() -> int:
    """Seed the default CPU generator from a non-deterministic source; returns the seed.

    Examples
    --------
    >>> import torcia
    >>> state = torcia.get_rng_state()
    >>> s = torcia.seed()
    >>> torcia.initial_seed() == s
    True
    >>> torcia.set_rng_state(state)
    """
    return default_generator.seed()


def initial_seed() -> int:
    """The seed the default CPU generator was last seeded with.

    Examples
    --------
    >>> import torcia
    >>> state = torcia.get_rng_state()
    >>> _ = torcia.manual_seed(7)
    >>> torcia.initial_seed()
    7
    >>> torcia.set_rng_state(state)
    """
    return default_generator.initial_seed()


def get_rng_state():
    """The state of the default CPU generator, as a uint8 tensor for :func:`set_rng_state`.

    Examples
    --------
    >>> import torcia
    >>> state = torcia.get_rng_state()
    >>> a = torcia.rand(2)
    >>> torcia.set_rng_state(state)
    >>> torcia.equal(a, torcia.rand(2))
    True
    """
    return default_generator.get_state()


def set_rng_state(state) -> None:
    """Restore the default CPU generator from a state of :func:`get_rng_state`.

    Examples
    --------
    >>> import torcia
    >>> state = torcia.get_rng_state()
    >>> a = torcia.randn(3)
    >>> torcia.set_rng_state(state)
    >>> torcia.equal(a, torcia.randn(3))
    True
    """
    default_generator.set_state(state)


def rng_of(generator) -> np.random.Generator:
    """The NumPy generator behind ``generator``, or behind the default generator for None:
    what kernels draw their random numbers from.

    Examples
    --------
    >>> import torcia
    >>> from torcia.random import rng_of
    >>> g = torcia.Generator().manual_seed(0)
    >>> a = rng_of(g).integers(0, 100, 3).tolist()
    >>> a == rng_of(torcia.Generator().manual_seed(0)).integers(0, 100, 3).tolist()
    True
    """
    return (generator or default_generator).rng


def thread_safe_generator():
    """The generator a DataLoader thread worker should draw from, or None: the default
    generator. torcia's DataLoader runs its workers as processes, each with its own
    seeded default generator, so this is always None (as PyTorch outside thread workers).

    Examples
    --------
    >>> import torcia
    >>> torcia.rand(2, generator=torcia.thread_safe_generator()).shape
    torcia.Size([2])
    """
    return None

