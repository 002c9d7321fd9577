#!/usr/bin/env bash
# Runs the whole GPU suite from a bundle made by scripts/gpu-bundle.sh, with TILESPARSE_REQUIRE_GPU=1 so
# that a missing GPU fails instead of skipping. Prints "N passed, N failed" last.
#   ./run-all.sh                 tests only
#   ./run-all.sh --sanitize      also compute-sanitizer memcheck and racecheck over the kernel tests
set -u -o pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export TILESPARSE_REQUIRE_GPU=1 TILESPARSE_TEST_DATA="$here/data" TILESPARSE_MATRICES="$here/matrices" TILESPARSE_BIN="$here/bin/tilesparse"
# cuBLAS may only be installed inside a Python wheel on the GPU machine.
if ! ldconfig -p 2>/dev/null | grep -q 'libcublas\.so'; then
  lib="$(find / -xdev -name 'libcublas.so.1[0-9]*' 2>/dev/null | head -n 1)"
  [ -n "$lib" ] && export LD_LIBRARY_PATH="$(dirname "$lib"):${LD_LIBRARY_PATH:-}"
fi
"$here/bin/tilesparse" info > "$here/info.txt" && head -n 3 "$here/info.txt"
pass=0
fail=0
for t in "$here"/tests/*; do
  echo "== $(basename "$t")"
  if "$t" --test-threads=1; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAILED: $(basename "$t")"; fi
done
if [ "${1:-}" = "--sanitize" ]; then
  for tool in memcheck racecheck; do
    for t in spmm spmv spgemm sddmm softmax; do
      [ -x "$here/tests/$t" ] || continue
      echo "== compute-sanitizer --tool $tool $t"
      if compute-sanitizer --tool "$tool" --error-exitcode 99 "$here/tests/$t" --test-threads=1 sanitizer_ 2>&1 | tail -n 5; then
        pass=$((pass + 1))
      else
        fail=$((fail + 1)); echo "FAILED: $tool $t"
      fi
    done
  done
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
