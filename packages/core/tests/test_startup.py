"""Start-up cost: ``import torcia`` imports no optional library and no plugin; bfloat16
brings in ml_dtypes (most of a second to import) on first use, and discovery happens when
a registry or a device is first needed. Each check runs in a fresh interpreter."""

import importlib.metadata
import json
import subprocess
import sys

import pytest


def _fresh(code):
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def _plugin_modules():
    return sorted({ep.module for ep in importlib.metadata.entry_points(group="torcia")})


def test_import_loads_no_optional_library_and_no_plugin():
    plugins = _plugin_modules()
    state = _fresh(f"""
import json, sys
import torcia
plugins = {plugins!r}
print(json.dumps({{"ml_dtypes": "ml_dtypes" in sys.modules,
                   "metadata": "importlib.metadata" in sys.modules,
                   "plugins": [m for m in plugins if m in sys.modules],
                   "dtype": repr(torcia.bfloat16)}}))
""")
    # naming the dtype is not using it
    assert state == {"ml_dtypes": False, "metadata": False, "plugins": [],
                     "dtype": "torcia.bfloat16"}


def test_the_first_autocast_region_resolves_its_lists_without_the_op_records():
    state = _fresh("""
import json
import torcia
from torcia import _oprecords
with torcia.autocast("cpu"):
    pass
print(json.dumps({"built": _oprecords._records.builtin is not None}))
""")
    assert state == {"built": False}


def test_import_defers_serialization_amp_and_their_libraries():
    state = _fresh("""
import sys
import torcia
deferred = ("torcia.serialization", "torcia.amp", "json", "zlib")
before = [m for m in deferred if m in sys.modules]
import json
import torcia.amp, torcia.serialization
print(json.dumps({
    "before": before,
    # the lazy names are the modules' own objects, listed as the others are
    "same": [n for n in ("save", "load", "autocast", "GradScaler", "is_autocast_enabled")
             if getattr(torcia, n) is getattr(
                 torcia.serialization if n in ("save", "load") else torcia.amp, n)],
    "listed": all(n in dir(torcia) for n in ("save", "load", "set_autocast_gpu_dtype")),
}))
""")
    assert state == {"before": [], "same": ["save", "load", "autocast", "GradScaler",
                                            "is_autocast_enabled"], "listed": True}


def test_bfloat16_loads_ml_dtypes_on_first_use():
    pytest.importorskip("ml_dtypes")
    state = _fresh("""
import json, sys
import torcia
before = "ml_dtypes" in sys.modules
x = torcia.ones(2, dtype=torcia.bfloat16)
print(json.dumps({"before": before, "after": "ml_dtypes" in sys.modules,
                  "dtype": repr(x.dtype), "sum": (x + x).tolist()}))
""")
    assert state == {"before": False, "after": True, "dtype": "torcia.bfloat16",
                     "sum": [2.0, 2.0]}


def test_bfloat16_array_from_a_user_who_imported_ml_dtypes_first():
    pytest.importorskip("ml_dtypes")
    state = _fresh("""
import json
import ml_dtypes, numpy as np
import torcia
t = torcia.from_numpy(np.ones(3, dtype=ml_dtypes.bfloat16))
print(json.dumps({"dtype": repr(t.dtype), "float": t.float().tolist()}))
""")
    assert state == {"dtype": "torcia.bfloat16", "float": [1.0, 1.0, 1.0]}


#: a fresh process's mode that lists the names of the functions it sees, in ``seen``
_LOG_MODE = """
from torcia.overrides import TorchFunctionMode
seen = []
class Log(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        seen.append(func.__name__)
        return func(*args, **(kwargs or {}))
"""


def test_a_name_bound_on_first_use_is_routed_as_the_others():
    # a mode switches __torch_function__ dispatch on before torcia.is_autocast_enabled is
    # first asked for: the mode sees it as it sees torcia.add
    state = _fresh("""
import json
import torcia
""" + _LOG_MODE + """
with Log():
    torcia.is_autocast_enabled()
    torcia.add(torcia.ones(1), 1)
print(json.dumps({"seen": seen,
                  "same": torcia.is_autocast_enabled is torcia.amp.is_autocast_enabled}))
""")
    assert state == {"seen": ["is_autocast_enabled", "ones", "add"], "same": True}


def test_a_namespace_imported_after_dispatch_is_on_is_routed():
    # torcia.fft loads on first use: a mode entered before that sees torcia.fft.fft as
    # it would had the module been loaded first, and the module's source stays readable
    state = _fresh("""
import inspect, json, sys
import torcia
""" + _LOG_MODE + """
x = torcia.ones(4)
loaded = "torcia.fft" in sys.modules
with Log():
    import torcia.fft
    torcia.fft.fft(x)
print(json.dumps({"loaded_before": loaded, "seen": seen,
                  "source": "def fft" in inspect.getsource(torcia.fft)}))
""")
    assert state == {"loaded_before": False, "seen": ["fft"], "source": True}
