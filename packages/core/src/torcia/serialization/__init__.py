"""``torcia.save`` and ``torcia.load``: PyTorch's checkpoint format, loaded safely.

**The format.** :func:`save` writes PyTorch's zip format, so ``torch.load(path,
weights_only=True)`` reads a torcia checkpoint and :func:`load` reads one written by
``torch.save``, without importing torch. The archive holds, under ``archive/``:

- ``data.pkl``: the object, pickled with protocol 2 by default. A tensor pickles as
  ``torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks)``
  and a storage as the persistent id ``("storage", torch.FloatStorage, key, location,
  numel)``, exactly as PyTorch writes them; views of one array share one storage.
- ``data/<key>``: each storage's raw bytes, aligned to 64 bytes.
- ``byteorder``, ``version``, ``.format_version``, ``.storage_alignment``: PyTorch's records.
- ``.data/torcia_manifest.json``: the sha256 of every other record, which PyTorch ignores.

The zip comment holds ``torcia-sha256:<hex>``, the sha256 of every byte before it but the
records' data, which the manifest covers. Loading a torcia-written file checks that digest,
the manifest and every record's CRC-32 before it unpickles anything, so a flipped bit
anywhere in the file is a :class:`RuntimeError` (``torch.load`` notices about a third of
random bit flips in its own files). Files from ``torch.save`` have no manifest; for them the
zip's CRC-32 of each record is verified.

**Why PyTorch's format is the default.** Checkpoints travel: people bring weights saved by
PyTorch and take torcia's to PyTorch. The risk of a pickle is in *loading* it, and
:func:`load` removes that risk the way PyTorch 2.6 does: ``weights_only=True`` (the default)
unpickles through an allowlist of globals (the tensor rebuild functions, storages, dtypes,
``torch.Size``, ``torch.device``, ``OrderedDict`` and the primitive containers) and refuses
anything else *without calling it*. The allowlist is extended with :func:`add_safe_globals`
or :func:`safe_globals`.

:func:`load` also reads PyTorch's legacy format (before PyTorch 1.6, still the format of
many published checkpoints) with the same allowlist, and the files written by earlier torcia
versions (the ``torcia-archive`` format: ``structure.json`` and ``.npy`` arrays).

**Safe writes.** The whole object is pickled in memory before the file is touched: an
unsavable object found late leaves the previous file as it was. A path is written to a
temporary file in the same directory, flushed and fsynced, then renamed over the target with
:func:`os.replace`, so a full disk, a killed process or two processes saving at once never
leave a corrupt checkpoint (a killed process may leave its ``.<name>.*.tmp`` file behind).

The package's modules hold, by content: ``_format`` the constants and limits,
``_allowlist`` the safe-globals allowlist, ``_save`` saving, ``_load`` loading PyTorch's
zip and legacy formats, ``_legacy`` torcia's earlier format and ``_names`` the rest of
``torch.serialization``'s names.
"""

from __future__ import annotations

from torcia.serialization._allowlist import (
    add_safe_globals,
    clear_safe_globals,
    get_safe_globals,
    safe_globals,
)
from torcia.serialization._format import (
    DEFAULT_PROTOCOL,
)
from torcia.serialization._load import (
    _get_layout,
    get_unsafe_globals_in_checkpoint,
    load,
)
from torcia.serialization._names import (
    LoadEndianness,
    SourceChangeWarning,
    StorageType,
    check_module_version_greater_or_equal,
    default_restore_location,
    get_crc32_options,
    get_default_load_endianness,
    get_default_mmap_options,
    location_tag,
    mkdtemp,
    normalize_storage_type,
    register_package,
    set_crc32_options,
    set_default_load_endianness,
    set_default_mmap_options,
    skip_data,
    storage_to_tensor_type,
    validate_cuda_device,
    validate_hpu_device,
)
from torcia.serialization._save import (
    _rebuild_subclass,
    _replace_atomically,
    save,
)

__all__ = [
    "DEFAULT_PROTOCOL", "LoadEndianness", "SourceChangeWarning", "StorageType",
    "add_safe_globals", "check_module_version_greater_or_equal", "clear_safe_globals",
    "default_restore_location", "get_crc32_options", "get_default_load_endianness",
    "get_default_mmap_options", "get_safe_globals", "get_unsafe_globals_in_checkpoint",
    "load", "location_tag", "mkdtemp", "normalize_storage_type", "register_package",
    "safe_globals", "save", "set_crc32_options", "set_default_load_endianness",
    "set_default_mmap_options", "skip_data", "storage_to_tensor_type", "validate_cuda_device",
    "validate_hpu_device",
]
