#!/usr/bin/env bash
# One prepared GPU check: the CUDA-only tests, then the GPU suite (docs/guides/speed.md,
# "The GPU suite"). Device time is scarce (minutes per task), so this is the whole run.
#
# Here, once:   bash tools/device_check.sh --prepare
#   copies the packages' .dist-info folders (their entry points feed the family registry)
#   into .devcarry/, which travels with the working tree.
# On the device (its image has torch, transformers and pytest, not ptm's environment):
#   bash tools/device_check.sh            # carry [".devcarry"], timeout about 560 s
# It imports ptm from the source tree (PYTHONPATH), runs every test marked `gpu`, then
# `python -m benchmarks.gpu_suite`, and copies the suite's results and the logs to $OUT.
# Environment: TESTS_S / SUITE_S (time limits, default 200 / 300 s), SUITE_ARGS (passed on).
set -uo pipefail
cd "$(dirname "$0")/.."

if [[ "${1:-}" == "--prepare" ]]; then
    site=$(ls -d .venv/lib/python3*/site-packages 2>/dev/null | head -1)
    if [[ -z "$site" ]]; then
        echo "no .venv here: run 'make test' (or uv sync) first" >&2
        exit 1
    fi
    rm -rf .devcarry && mkdir -p .devcarry
    cp -r "$site"/ptm*.dist-info .devcarry/
    echo "prepared .devcarry/: $(ls .devcarry | tr '\n' ' ')"
    exit 0
fi

sources=$(ls -d "$PWD"/packages/*/src | tr '\n' ':')
export PYTHONPATH="$PWD:${sources}$PWD/.devcarry${PYTHONPATH:+:$PYTHONPATH}"
out="${OUT:-$PWD/runs/device_check}"
mkdir -p "$out"

python3 - <<'EOF' | tee "$out/device.txt"
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())
if torch.cuda.is_available():
    print("device", torch.cuda.get_device_name(0))
EOF

mapfile -t gpu_tests < <(grep -rl "mark.gpu" tests | sort)
echo "gpu tests: ${gpu_tests[*]}"
timeout "${TESTS_S:-200}" python3 -m pytest -q -m gpu -p no:cacheprovider -p no:randomly \
    "${gpu_tests[@]}" 2>&1 | tee "$out/gpu_tests.log"
tests_rc=${PIPESTATUS[0]}

# shellcheck disable=SC2086  # SUITE_ARGS is a list of arguments
timeout "${SUITE_S:-300}" python3 -m benchmarks.gpu_suite --out "$out" ${SUITE_ARGS:-} 2>&1 \
    | tee "$out/gpu_suite.log"
suite_rc=${PIPESTATUS[0]}

echo "gpu tests rc=$tests_rc, gpu suite rc=$suite_rc; results in $out"
[[ $tests_rc -eq 0 && $suite_rc -eq 0 ]]
