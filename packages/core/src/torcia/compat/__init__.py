"""Run unmodified PyTorch programs on torcia: ``torch`` imports resolve to torcia's modules.

:func:`install` puts an import hook on ``sys.meta_path`` that maps ``torch``, ``torch.*``,
``torchvision``, ``torchvision.*`` and ``torchtext`` onto torcia's modules (``torch.nn`` to
``torcia.nn``, ``torch.utils.data`` to ``torcia.data``, ``torchvision`` to ``torcia.vision``,
``torch.distributions`` to ``torcia.distributions`` where that part is installed, ...). From
the command line, ``python -m torcia.compat script.py [args]`` runs a script with the hook
installed, as ``python script.py [args]`` would.

``torch.__version__`` (and ``torch.version``) is the PyTorch release whose API torcia
follows, :data:`TORCH_VERSION`, so that libraries requiring a recent PyTorch accept torcia,
and ``torchvision.__version__`` the torchvision release made with it,
:data:`TORCHVISION_VERSION`; ``torcia.__version__`` stays torcia's own. ``torch._C`` answers
the few probes libraries make of PyTorch's extension (:mod:`torcia.compat._C`).

What torcia lacks is never replaced by a stand-in: importing a PyTorch module torcia has no
counterpart for raises :class:`ModuleNotFoundError`, and reading a missing name raises
:class:`AttributeError`, both naming the PyTorch API (``torch.foo.bar``) that is missing.

The parts are optional distributions, so this module reaches them only by importing them by
name when a script asks for them.

Examples
--------
>>> import torcia.compat
>>> torcia.compat.install()
>>> import torch
>>> torch.ones(2).sum().item()
2.0
>>> torcia.compat.uninstall()
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import types

from torcia.compat.version import TORCH_VERSION, TORCHVISION_VERSION

__all__ = ["TORCHVISION_VERSION", "TORCH_VERSION", "install", "installed", "torcia_name",
           "uninstall"]

#: PyTorch module prefixes whose torcia counterpart is not ``torcia`` + the same suffix.
#: Longest prefix wins; the rest of the dotted name is kept.
PREFIXES = {
    "torch": "torcia",
    "torch.utils.data": "torcia.data",
    "torch.utils.data.datapipes": None,
    "torch.quantization": "torcia.ao.quantization",
    # torch.nn's legacy aliases of torch.ao.nn's quantization modules
    "torch.nn.quantized": "torcia.ao.nn.quantized",
    "torch.nn.quantizable": "torcia.ao.nn.quantizable",
    "torch.nn.intrinsic": "torcia.ao.nn.intrinsic",
    "torch.nn.qat": "torcia.ao.nn.qat",
    "torch._C": "torcia.compat._C",
    "torch.ops": "torcia.compat.ops",
    "torch.version": "torcia.compat.version",
    "torch.torch_version": "torcia.compat.version",
    "torch.utils._pytree": "torcia.utils.pytree",
    "torch._dynamo": "torcia.compiler.dynamo",
    "torch._dynamo._trace_wrapped_higher_order_op": "torcia.compiler.dynamo",
    "torchvision": "torcia.vision",
    "torchtext": "torcia.text",
    "torchtext.data.utils": "torcia.text.tokenizers",
}

_ROOTS = ("torch", "torchvision", "torchtext")
#: what the packages present as their versions: the PyTorch release torcia follows and the
#: torchvision release made with it
_VERSIONS = {"torch": TORCH_VERSION, "torchvision": TORCHVISION_VERSION}


def torcia_name(name: str) -> str | None:
    """The torcia module that serves the PyTorch module ``name`` (None: none does).

    Examples
    --------
    >>> from torcia.compat import torcia_name
    >>> torcia_name("torch.utils.data.sampler")
    'torcia.data.sampler'
    >>> torcia_name("torchvision.transforms")
    'torcia.vision.transforms'
    """
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        prefix = ".".join(parts[:cut])
        if prefix in PREFIXES:
            target = PREFIXES[prefix]
            if target is None:
                return None
            return ".".join([target, *parts[cut:]])
    return None


def _missing_module(name: str, detail: str = "") -> ModuleNotFoundError:
    return ModuleNotFoundError(
        f"No module named {name!r}: torcia has no counterpart of PyTorch's {name}"
        f"{detail} (run under torcia.compat)",
        name=name,
    )


class TorchModule(types.ModuleType):
    """A PyTorch module name bound to the torcia module that serves it.

    Reads and writes go to the torcia module, so ``torch.backends.cudnn.benchmark = True``
    sets torcia's flag; a name torcia lacks raises an AttributeError that names the PyTorch
    API. Submodules read as attributes come back under their PyTorch names too.
    """

    def __init__(self, name: str, target: types.ModuleType):
        super().__init__(name, getattr(target, "__doc__", None))
        object.__setattr__(self, "_torcia_target", target)
        for attr in ("__file__", "__path__", "__all__"):
            if hasattr(target, attr):
                object.__setattr__(self, attr, getattr(target, attr))

    def __getattr__(self, attr):
        target = object.__getattribute__(self, "_torcia_target")
        if attr.startswith("__") and attr.endswith("__"):
            try:
                return getattr(target, attr)
            except AttributeError:
                raise AttributeError(
                    f"module {self.__name__!r} has no attribute {attr!r}") from None
        try:
            value = getattr(target, attr)
        except AttributeError:
            sub = f"{self.__name__}.{attr}"
            if torcia_name(sub) is not None and hasattr(target, "__path__"):
                try:
                    return importlib.import_module(sub)
                except ModuleNotFoundError as exc:
                    if exc.name != sub:
                        raise
            raise AttributeError(
                f"module {self.__name__!r} has no attribute {attr!r}: torcia does not "
                f"implement PyTorch's {self.__name__}.{attr} (looked in {target.__name__})"
            ) from None
        if isinstance(value, types.ModuleType) and not isinstance(value, TorchModule):
            sub = f"{self.__name__}.{attr}"
            # the PyTorch name, also where it maps elsewhere than the torcia attribute
            # (torch.version is torcia.compat.version, not torcia.version)
            if torcia_name(sub) is not None and value.__name__.split(".")[0] == "torcia":
                return importlib.import_module(sub)
        return value

    def __setattr__(self, attr, value):
        if isinstance(value, TorchModule) or attr in ("__spec__", "__loader__", "__package__",
                                                     "__name__", "__path__", "__file__"):
            object.__setattr__(self, attr, value)
        else:
            setattr(object.__getattribute__(self, "_torcia_target"), attr, value)

    def __delattr__(self, attr):
        delattr(object.__getattribute__(self, "_torcia_target"), attr)

    def __dir__(self):
        return sorted(set(dir(object.__getattribute__(self, "_torcia_target"))))

    def __repr__(self):
        target = object.__getattribute__(self, "_torcia_target")
        return f"<module {self.__name__!r} (torcia.compat: {target.__name__})>"


class _TorchFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """First on ``sys.meta_path`` while installed: answers for the PyTorch names only."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] not in _ROOTS:
            return None
        dest = torcia_name(fullname)
        if dest is None:
            raise _missing_module(fullname)
        try:
            module = importlib.import_module(dest)
        except ModuleNotFoundError as exc:
            if exc.name is not None and dest.startswith(exc.name):
                raise _missing_module(fullname, f" ({exc})") from None
            raise
        # a PyTorch package served by a plain module (torch._dynamo) is still a package
        # when other names map below it
        below = any(p.startswith(fullname + ".") for p in PREFIXES)
        spec = importlib.util.spec_from_loader(
            fullname, self, is_package=hasattr(module, "__path__") or below)
        spec.loader_state = module
        return spec

    def create_module(self, spec):
        module = TorchModule(spec.name, spec.loader_state)
        if spec.name in _VERSIONS:
            object.__setattr__(module, "__version__", _VERSIONS[spec.name])
        return module

    def exec_module(self, module):
        return None


_finder = _TorchFinder()


def install() -> None:
    """Make ``import torch`` (and ``torchvision``, ``torchtext``) import torcia.

    Modules already imported under those names (a real PyTorch) are set aside, and
    :func:`uninstall` puts them back. Idempotent.

    Examples
    --------
    >>> import torcia.compat
    >>> torcia.compat.install()
    >>> import torch.nn as nn
    >>> nn.Linear(2, 3).weight.shape
    torcia.Size([3, 2])
    >>> torcia.compat.uninstall()
    """
    if _finder not in sys.meta_path:
        _set_aside.update(_take_torch_modules())
        sys.meta_path.insert(0, _finder)


def uninstall() -> None:
    """Undo :func:`install`: drop the hook and the ``torch`` modules it made, and restore
    the modules it set aside."""
    if _finder in sys.meta_path:
        sys.meta_path.remove(_finder)
        _take_torch_modules()
        sys.modules.update(_set_aside)
        _set_aside.clear()


def installed() -> bool:
    """Whether the import hook is in place.

    Examples
    --------
    >>> import torcia
    >>> torcia.compat.installed()
    False
    """
    return _finder in sys.meta_path


#: A real PyTorch's modules, out of ``sys.modules`` while the hook is installed (a C
#: extension cannot be imported twice in one process).
_set_aside: dict = {}


def _take_torch_modules() -> dict:
    taken = {}
    for name in list(sys.modules):
        if name.split(".")[0] in _ROOTS:
            taken[name] = sys.modules.pop(name)
    return taken
