#!/usr/bin/env bash
# Regenerate requirements.lock: one universal lock for every supported Python and OS (environment markers pick
# the lines that apply), resolved by uv with the current pins as constraints, so a pin changes only on purpose.
# Usage: bash tools/relock.sh [extra uv options, e.g. --upgrade-package numpy]   (needs uv: pip install uv).
# It rewrites environment.yml's pip list to match (tests/test_environment.py checks the two agree).
# torch's CUDA libraries are left out (pip adds them with the PyPI build; the CPU build has none), and so is
# setuptools (the Makefile installs it first), as in every lock before this one.
set -euo pipefail
cd "$(dirname "$0")/.."
UV=${UV:-uv}
LEFT_OUT=(setuptools triton cuda-bindings cuda-pathfinder cuda-toolkit nvidia-cublas nvidia-cuda-cupti
  nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile nvidia-curand nvidia-cusolver
  nvidia-cusparse nvidia-cusparselt-cu13 nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx)
new=$(mktemp)
{
  echo "# Exact versions the course is tested with, one lock for Python 3.11-3.13 on Linux, macOS and Windows"
  echo "# (a line's environment marker says where it applies). Install with: pip install -r requirements.lock"
  echo "# Regenerate only on purpose, with tools/relock.sh: a change here can change what the notebooks print."
  grep -v '^#' requirements.lock > "$new.cons"
  "$UV" pip compile pyproject.toml --extra lab --extra test --universal --python-version 3.11 -c "$new.cons" \
    --index-url https://pypi.org/simple --no-header --no-annotate --quiet \
    "${LEFT_OUT[@]/#/--no-emit-package=}" "$@"
} > "$new"
mv "$new" requirements.lock
rm -f "$new.cons"
{ sed -n '/^  - pip:$/q;p' environment.yml; echo "  - pip:"; grep -v '^#' requirements.lock | sed 's/^/      - /'; } > "$new"
mv "$new" environment.yml
