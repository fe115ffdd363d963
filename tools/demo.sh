#!/usr/bin/env bash
# The README's demo command: train the vision demo model with torcia.
#
# Creates .venv-demo (once), installs every torcia package and the C++ CPU plugin (when the
# checkout has it), and runs `torcia-train`, passing on its arguments
# (`./tools/demo.sh --help` lists them). Needs Python 3.11+ and a C++ compiler.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=${TORCIA_DEMO_VENV:-.venv-demo}
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_QUIET=${PIP_QUIET:-1}

"$PYTHON" -c 'import sys; assert sys.version_info >= (3, 11), "torcia needs Python 3.11+"'
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"

# cpu[mkl,int8]: the plugin's products on MKL on an Intel CPU (OpenBLAS, faster there, on
# others), its int8 ones on oneDNN (plugins/cpu/README.md);
# x86-64 only, skipped elsewhere
"$VENV/bin/python" tools/install_parts.py --editable packages --optional "cpu[mkl,int8]" >/dev/null
exec "$VENV/bin/torcia-train" "$@"
