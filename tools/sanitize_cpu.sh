#!/usr/bin/env bash
# torcia-cpu's tests, its differential fuzz test included, against a build of the plugin
# with AddressSanitizer and UndefinedBehaviorSanitizer: any out-of-bounds access,
# use-after-free or undefined behaviour in the native kernels ends the run with a report.
#
# The build and its environment are throwaway (a temporary folder, removed at the end):
# the sanitized extension needs libasan loaded before anything else in the process, which
# the normal test environment must not have. Python's own allocations are not leak-checked
# (detect_leaks=0): the interpreter keeps much of its memory until exit on purpose.
#
# Environment: PYTHON (3.11+, default python3), TORCIA_SANITIZE_TIMEOUT (seconds for the
# test run, default 900). Arguments go to pytest, e.g. `tools/sanitize_cpu.sh -x -k pool`.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
LIMIT=${TORCIA_SANITIZE_TIMEOUT:-900}
CXX=${CXX:-g++}
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_QUIET=${PIP_QUIET:-1}

asan=$("$CXX" -print-file-name=libasan.so)
if [ ! -e "$asan" ]; then
    echo "sanitize_cpu.sh: $CXX has no libasan.so (install the compiler's sanitizer runtime)" >&2
    exit 1
fi
# the C++ runtime preloaded too: Python does not link it, and ASan must find its
# __cxa_throw at start-up to intercept the exceptions the kernels raise
preload="$asan $("$CXX" -print-file-name=libstdc++.so)"

work=$(mktemp -d "${TMPDIR:-/tmp}/torcia-sanitize.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$PYTHON" -m venv "$work/venv"
py="$work/venv/bin/python"

# what the plugin's tests import: the parts its test extra names, and the test tools
"$py" -m pip install "pytest>=8" "hypothesis>=6.100" "ml_dtypes>=0.4" "setuptools>=77"
"$py" tools/install_parts.py --python "$py" ao nn optim >/dev/null
# -fno-sanitize-recover: an undefined-behaviour report fails the run instead of scrolling by
flags="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g"
# with the int8 extra: oneDNN loaded, so that the quantized kernels' oneDNN paths (the
# integer GEMM, the convolution primitive) run under the sanitizers too
"$py" -m pip install "plugins/cpu[int8]" \
    --config-settings "build-dir=$work/build" \
    --config-settings "cmake.define.CMAKE_CXX_FLAGS=$flags" \
    --config-settings "cmake.define.CMAKE_SHARED_LINKER_FLAGS=-fsanitize=address,undefined"
LD_PRELOAD="$preload" ASAN_OPTIONS=detect_leaks=0 "$py" - <<'EOF'
import torcia_cpu._native as n
with open(n.__file__, "rb") as f:
    assert b"__asan_init" in f.read(), f"{n.__file__} is not built with AddressSanitizer"
EOF

echo "== torcia-cpu's tests under ASan + UBSan (at most ${LIMIT}s)"
# the reports go to files: pytest captures a test's stderr, and loses it when the
# sanitizer aborts the process
export ASAN_OPTIONS=detect_leaks=0:halt_on_error=1:abort_on_error=1:log_path=$work/asan
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:log_path=$work/ubsan
# OpenMP's threads stay in the process: passive waiting keeps them off the sanitizer's path
export OMP_WAIT_POLICY=PASSIVE
start=$SECONDS
rc=0
LD_PRELOAD="$preload" timeout "$LIMIT" "$py" -m pytest -q -p no:cacheprovider plugins/cpu/tests \
    "$@" || rc=$?
reports=$(find "$work" -maxdepth 1 -name 'asan.*' -o -maxdepth 1 -name 'ubsan.*')
if [ -n "$reports" ]; then
    # shellcheck disable=SC2086
    cat $reports >&2
    echo "sanitize_cpu.sh: the sanitizers reported the findings above" >&2
    exit 1
fi
if [ "$rc" -ne 0 ]; then
    echo "sanitize_cpu.sh: the tests failed (status $rc) under the sanitizers" >&2
    exit "$rc"
fi
echo "== sanitized tests passed in $((SECONDS - start))s, no sanitizer finding"
