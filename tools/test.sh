#!/usr/bin/env bash
# The README's test command: run every test of the repository in a fresh environment.
#
# Creates .venv-test (once), installs every package and plugin of the checkout (editable)
# with the test requirements, runs the fast tests, then the slow ones within a time bound,
# then the multi-process ones within another.
# Needs Python 3.11+ (set PYTHON to pick one) and, for the C++ plugin, a C++ compiler.
# The parity checks against PyTorch run when TORCIA_TORCH names the torch to install
# (e.g. TORCIA_TORCH="torch==2.13.*"); without it they are skipped.
# Arguments are passed to both pytest runs, e.g. `./tools/test.sh -x packages/nn`.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=${TORCIA_TEST_VENV:-.venv-test}
SLOW_TIMEOUT=${TORCIA_SLOW_TIMEOUT:-900}
MULTIPROCESS_TIMEOUT=${TORCIA_MULTIPROCESS_TIMEOUT:-1200}
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_QUIET=${PIP_QUIET:-1}

"$PYTHON" -c 'import sys; assert sys.version_info >= (3, 11), "torcia needs Python 3.11+"'
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
py="$VENV/bin/python"

# build output in a part's folder (build/, *.egg-info) is read by every environment that
# installs the part editable, as a second copy of it: no install, by the tools or by a
# test, may leave any (tests build from copies of the parts)
build_output() { find packages plugins -maxdepth 3 \( -name build -o -name '*.egg-info' \) | sort; }
before=$(build_output)

"$py" -m pip install -r tools/requirements-test.txt
if [ -n "${TORCIA_TORCH:-}" ]; then "$py" -m pip install "$TORCIA_TORCH"; fi
# --with-tests: what the parts' test extras name too, e.g. the MPI that pip installs (mpich),
# which the MPI backend is tested against rather than a system one
# cpu[mkl,int8]: the C++ plugin's products run on MKL here, its int8 ones on oneDNN; each part
# alone (tools/test_isolated.py) tests it on OpenBLAS
"$py" tools/install_parts.py --editable --with-tests packages plugins "cpu[mkl,int8]" >/dev/null
# on MKL whatever the CPU: left to choose, the plugin keeps OpenBLAS on a CPU that is not Intel's
export TORCIA_CPU_BLAS=${TORCIA_CPU_BLAS:-mkl}

# pytest exits 5 when it collects no test: an error here, never a pass
run_pytest() {
    local rc=0
    "$@" || rc=$?
    if [ "$rc" -eq 5 ]; then
        echo "test.sh: no tests were collected by: $*" >&2
        return 1
    fi
    return "$rc"
}

echo "== fast tests"
run_pytest "$py" -m pytest -q -m "not slow" "$@"
echo "== slow tests (at most ${SLOW_TIMEOUT}s)"
if [ "$#" -gt 0 ]; then
    # paths given on the command line may hold no slow test, and that is fine
    timeout "$SLOW_TIMEOUT" "$py" -m pytest -q -m "slow and not multiprocess" "$@" \
        || [ "$?" -eq 5 ]
else
    run_pytest timeout "$SLOW_TIMEOUT" "$py" -m pytest -q -m "slow and not multiprocess"
fi
# jobs of several processes (spawn, torcia-run, FSDP, checkpoints): bounded on their own
echo "== multi-process tests (at most ${MULTIPROCESS_TIMEOUT}s)"
if [ "$#" -gt 0 ]; then
    timeout "$MULTIPROCESS_TIMEOUT" "$py" -m pytest -q -m multiprocess "$@" || [ "$?" -eq 5 ]
else
    run_pytest timeout "$MULTIPROCESS_TIMEOUT" "$py" -m pytest -q -m multiprocess
fi

left=$(comm -13 <(echo "$before") <(build_output))
if [ -n "$left" ]; then
    echo "test.sh: the run left build output in the checkout (build from a copy instead):" >&2
    echo "$left" >&2
    exit 1
fi
