#!/usr/bin/env bash
# The checks that need a GPU (issues 41 and 42), as one run for a session lent one (the device tool):
#     run(command="bash benchmarks/gpu_checks.sh", timeout_s=560)
# About 7 minutes on an H200. Each step has its own time limit, so one that hangs costs only its share; logs
# and the new GPU record land in $OUT (else /tmp/gpu_checks). Afterwards, here: copy cuda_record.json over
# course_utils/chapters/results/cuda_h100.json if its tests pass (tests/test_gpu_figures.py), rebuild
# chapters 1, 5 and 7, and record the figures in benchmarks/README.md.
set -u
out=${OUT:-/tmp/gpu_checks}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
py=${PYTHON:-python3}

step() {   # step NAME SECONDS COMMAND...: run it under a limit, keep its log, show its end
    local name=$1 limit=$2 start=$SECONDS rc
    shift 2
    echo "== $name (limit ${limit} s)"
    timeout "$limit" "$@" >"$out/$name.log" 2>&1
    rc=$?
    tail -n "${TAIL:-14}" "$out/$name.log"
    echo "== $name: exit $rc after $((SECONDS - start)) s"
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
$py -c "import sys, torch; print('python', sys.version.split()[0], '| torch', torch.__version__, '| cuda', torch.version.cuda)"

# 1. CUDA tests: no sync between two updates (sync debug mode "error"), the guard's bitwise skip on CUDA, the
#    recorded figures and the quick live measurements (chapter 5's new ones among them)
step tests 150 $py -m pytest -q -p no:cacheprovider -x tests/test_production_overhead.py \
    tests/test_production_guard.py tests/test_gpu_figures.py
# 2. issue 41's figure: fit against the plain loop per update at >= 10 ms of device work, batches fetched whole
#    (the loader's host cost below the device's), epochs long enough that each checkpoint's write ends in time
TAIL=8 step overhead_whole 170 $py benchmarks/bench_production.py --only overhead --device cuda --repeats 3 \
    --fetch whole --n-train 262144 --epochs 2
# 3. the GPU record the chapters print (chapter 5's model moved after an Adam step and its 0-d copies added)
TAIL=3 step bench_cuda 230 $py benchmarks/bench_cuda.py --out "$out/cuda_record.json"
$py - "$out/cuda_record.json" <<'EOF'
import json, sys
record = json.load(open(sys.argv[1]))
print("moved_after_step:", record.get("moved_after_step"))
print("zero_dim_copies:", record.get("zero_dim_copies"))
print("sync_stall:", record.get("sync_stall"))
EOF
