"""Which public callables the records cover: every function of ``torcia``,
``torcia.nn.functional``, ``torcia.linalg``, ``torcia.fft``, ``torcia.special`` and every
method of ``torcia.Tensor`` is an op with a record (under its name or as an alias), the
same function object as a recorded one, or listed in ``NOT_OPS`` with why."""

from __future__ import annotations

import inspect
import types

import torcia

from .records import NOT_OPS, RECORDS

NAMESPACES = {"": "torcia", "nn.functional.": "torcia.nn.functional",
              "linalg.": "torcia.linalg", "fft.": "torcia.fft", "special.": "torcia.special"}


def public_names() -> dict:
    """Dotted public name -> the object, for every public callable that is no class."""
    import importlib

    out = {}
    for prefix, module_name in NAMESPACES.items():
        module = importlib.import_module(module_name)
        names = getattr(module, "__all__", None) or [n for n in dir(module)
                                                     if not n.startswith("_")]
        for n in names:
            obj = getattr(module, n, None)
            if callable(obj) and not inspect.isclass(obj) and not isinstance(
                    obj, types.ModuleType):
                out[prefix + n] = obj
    for n in dir(torcia.Tensor):
        if n.startswith("_") or n in ("grad_fn",):
            continue
        obj = getattr(torcia.Tensor, n)
        if callable(obj) and not inspect.isclass(obj):
            out["Tensor." + n] = obj
    return out


def covered() -> dict:
    """Public name -> how it is covered ("record", "alias", "same", "not an op")."""
    names = public_names()
    by_object = {}
    for name in RECORDS:
        obj = names.get(name)
        if obj is not None:
            by_object.setdefault(id(obj), name)
    out = {}
    aliases = {a for info in RECORDS.values() for a in info.aliases}
    for name, obj in names.items():
        if name in RECORDS:
            out[name] = "record"
        elif name in aliases:
            out[name] = "alias"
        elif id(obj) in by_object:
            out[name] = "same"
        elif name in NOT_OPS:
            out[name] = "not an op"
    return out


def uncovered() -> list:
    return sorted(set(public_names()) - set(covered()))
