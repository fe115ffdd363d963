"""``torcia.onnx``: export a model to ONNX by tracing its forward pass.

Tracing runs the model once on example inputs with every kernel of the "cpu" table
wrapped: each op that runs becomes ONNX nodes, each parameter an initializer, each array
the trace did not produce (a constant built inside ``forward``) an initializer too. Module
forward hooks keep the path of the module running, so an op with no ONNX translation is
reported with the module that used it.

Examples
--------
>>> import tempfile, pathlib, torcia
>>> model = torcia.nn.Sequential(torcia.nn.Linear(4, 3), torcia.nn.ReLU())
>>> path = pathlib.Path(tempfile.mkdtemp()) / "m.onnx"
>>> torcia.onnx.export(model, (torcia.randn(2, 4),), path, input_names=["x"],
...                    dynamic_axes={"x": {0: "batch"}})
>>> path.exists()
True
"""

__all__ = ["UnsupportedOperatorError", "export"]


def __getattr__(name):
    # importing onnx takes about 0.7 s of CPU, and plugin discovery loads this package with
    # torcia's first op: the names are bound on their first use instead
    if name not in __all__:
        raise AttributeError(f"module 'torcia.onnx' has no attribute {name!r}")
    from torcia.onnx import _export

    value = globals()[name] = getattr(_export, name)
    return value


def __dir__():
    return sorted({*globals(), *__all__})
