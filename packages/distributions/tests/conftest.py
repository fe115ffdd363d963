"""Makes the shared case table (``cases``) importable from the test files, which pytest
imports with ``--import-mode=importlib``."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
