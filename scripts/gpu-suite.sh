#!/usr/bin/env bash
# Inside a bundle from scripts/gpu-bundle.sh, on the GPU machine: the whole test suite (with compute-sanitizer)
# and every benchmark table, each step under its own time limit, logs in LOG_DIR.
#   ./gpu-suite.sh LOG_DIR [STEP...]     steps: tests spmm spmv spgemm (default: all, about 13 minutes)
set -u -o pipefail
here="$(cd "$(dirname "$0")" && pwd)"
logs="${1:-$here/logs}"
shift || true
steps="${*:-tests spmm spmv spgemm}"
mkdir -p "$logs"
export TILESPARSE_MATRICES="$here/matrices"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv > "$logs/gpu.txt" 2>&1
step() { # step NAME SECONDS COMMAND...: runs one step, keeps its log, prints one status line
  local name="$1" limit="$2"
  shift 2
  local start=$SECONDS
  timeout "$limit" "$@" > "$logs/$name.log" 2>&1
  echo "$name: rc=$? in $((SECONDS - start)) s"
}
for s in $steps; do
  case "$s" in
    tests)
      step tests 300 "$here/run-all.sh" --sanitize
      grep -E "^(==|FAILED)|test result|panicked|ERROR SUMMARY|RACECHECK SUMMARY|passed, " "$logs/tests.log" > "$logs/tests-summary.txt" ;;
    spmm)
      # --verify: every result timed is first checked against the f64 oracle (about 1.7x the time; NOTES step 44).
      for dtype in f32 f16 bf16; do
        step "bench-spmm-$dtype" 300 "$here/bin/tilesparse" bench spmm --dtype "$dtype" --verify --iters 20 --warmup 5 \
          --json "$logs/spmm-$dtype.json"
      done ;;
    spmv) step bench-spmv 120 "$here/bin/tilesparse" bench spmv --json "$logs/spmv.json" ;;
    spgemm)
      step bench-spgemm-suite 240 "$here/bin/tilesparse" bench spgemm-suite --json "$logs/spgemm.json"
      step bench-spgemm-ladder 90 "$here/bin/tilesparse" bench spgemm --matrix "$here/matrices/4elt.mtx.gz" --svg "$logs/spgemm-k4-grid.svg" ;;
    *) echo "unknown step $s (tests spmm spmv spgemm)"; exit 2 ;;
  esac
done
