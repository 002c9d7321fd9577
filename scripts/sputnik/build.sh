#!/usr/bin/env bash
# Builds scripts/sputnik/sputnik_bench.cu (Sputnik's fp32 SpMM and cuSPARSE, timed as tilesparse times; see the
# file's header) against a Sputnik source tree that this repository does not contain or fetch.
#
#   SPUTNIK_DIR=/path/to/sputnik scripts/sputnik/build.sh OUT_BINARY
#
# SPUTNIK_DIR holds sputnik/spmm/cuda_spmm.cu.cc and the headers it includes (a checkout of
# github.com/google-research/sputnik). Sputnik's cuda_utils.h includes glog and cuBLAS for error macros that the
# SpMM code never expands; where those headers are missing, empty stand-ins are put first on the include path
# (glog's CHECK macros as no-ops, no cuBLAS declarations), so neither library is needed. cusparse.h and
# libcusparse come from CUSPARSE_HOME (include/, lib/) when set, else from the CUDA toolkit nvcc belongs to.
# nvcc 13.0, sm_90 only (the H100); one static binary but for libcusparse.
set -euo pipefail
out=${1:?usage: SPUTNIK_DIR=... $0 OUT_BINARY}
: "${SPUTNIK_DIR:?set SPUTNIK_DIR to a Sputnik source tree}"
src=$SPUTNIK_DIR/sputnik/spmm/cuda_spmm.cu.cc
[ -f "$src" ] || { echo "$src not found" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
shim=$(mktemp -d)
trap 'rm -rf "$shim"' EXIT
mkdir -p "$shim/glog"
cat > "$shim/glog/logging.h" <<'EOF'
// Stand-in for glog: Sputnik's SpMM never expands the macros that use it. The standard headers are those that
// Sputnik's sources get from glog's logging.h and do not include themselves.
#pragma once
#include <cstdint>
#include <cstring>
#include <functional>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>
using std::string;
struct NullLog { template <typename T> NullLog& operator<<(const T&) { return *this; } };
#define CHECK_EQ(a, b) NullLog()
#define CHECK_LE(a, b) NullLog()
#define CHECK_GE(a, b) NullLog()
#define CHECK_GT(a, b) NullLog()
#define CHECK(a) NullLog()
EOF
inc=(-I"$SPUTNIK_DIR" -I"$shim")
if [ -n "${CUSPARSE_HOME:-}" ]; then
  inc+=(-I"$CUSPARSE_HOME/include")
  libs=(-L"$CUSPARSE_HOME/lib" -Xlinker --allow-shlib-undefined)
else
  libs=()
fi
# cuBLAS's header is only named by Sputnik's error macros; stand in for it where the toolkit has none.
if ! echo '#include <cublas_v2.h>' | nvcc "${inc[@]}" -x cu -E - -o /dev/null 2>/dev/null; then
  echo '#pragma once' > "$shim/cublas_v2.h"
fi
# libcusparse.so.12 may be the only name the library has (pip wheels).
if [ -n "${CUSPARSE_HOME:-}" ] && [ ! -e "$CUSPARSE_HOME/lib/libcusparse.so" ]; then
  mkdir -p "$shim/lib" && ln -s "$CUSPARSE_HOME/lib/libcusparse.so.12" "$shim/lib/libcusparse.so"
  libs+=(-L"$shim/lib")
fi
# The pip wheels' nvcc keeps cudart in lib/, where its profile does not look.
nvcc_lib=$(dirname "$(command -v nvcc)")/../lib
[ -e "$nvcc_lib/libcudart_static.a" ] && libs+=(-L"$nvcc_lib")
nvcc -O3 -std=c++17 -arch=sm_90 "${inc[@]}" -o "$out" -x cu "$here/sputnik_bench.cu" "$src" "${libs[@]}" -lcusparse
echo "built $out"
