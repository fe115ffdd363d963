"""Build facts, as ``torch.version``: torcia's version, and the CUDA and ROCm toolkits it
was built against (None: torcia is pure Python over NumPy; its "cuda" device runs through
CuPy, whose own build says which CUDA it uses).

Examples
--------
>>> import torcia
>>> torcia.version.__version__ == torcia.__version__, torcia.version.cuda, torcia.version.hip
(True, None, None)
"""

from torcia import __version__  # noqa: F401

cuda = None
hip = None
debug = False
