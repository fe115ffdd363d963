"""Settings kept per thread, as PyTorch keeps them (a DataLoader worker thread does not see
the trainer's settings): autocast's dtypes and nesting, the profiler's recording,
``safe_globals``' allowlists, each a :class:`Switches`.

Three per-thread states read on every op stay plain ``threading.local`` subclasses with
the same shape (class attributes as defaults): the grad mode (``_grad_mode.STATE``, which
the C extensions read too), autocast's region (``_tensor.AUTOCAST``) and the dispatch modes
entered (``_tensor.MODES``). A class between them and ``threading.local`` costs 1-2 ns per
read (about 3%, measured in one process, alternating), which ops would pay.
"""

from __future__ import annotations

import contextlib
import threading


class Switches(threading.local):
    """Per-thread settings: a subclass declares each one as a class attribute, its value
    in a thread that has not set it (a setting that must be a fresh mutable object in each
    thread is made in ``__init__``, which runs once per thread).

    A setting is read and written as an attribute; :meth:`switched` changes some for the
    length of a ``with`` block.

    Examples
    --------
    >>> from torcia._switches import Switches
    >>> class Flags(Switches):
    ...     verbose = False
    >>> flags = Flags()
    >>> with flags.switched(verbose=True):
    ...     flags.verbose
    True
    >>> flags.verbose
    False
    """

    @contextlib.contextmanager
    def switched(self, **values):
        """``values`` on this thread within the block, the previous ones after it; a
        name the class does not declare is an AttributeError."""
        previous = {name: getattr(self, name) for name in values}
        for name, value in values.items():
            setattr(self, name, value)
        try:
            yield self
        finally:
            for name, value in previous.items():
                setattr(self, name, value)
