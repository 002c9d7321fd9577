#!/usr/bin/env bash
# Builds everything the GPU suite needs into one folder that runs on a GPU machine without a Rust toolchain:
# the release test binaries, the bench binaries, the CLI, tests/data, the real matrices of ../shared/matrices,
# run-all.sh (tests) and gpu-suite.sh (tests and every benchmark table). Usage: scripts/gpu-bundle.sh [OUT_DIR]   (default gpu-bundle; ignored by git)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-gpu-bundle}"
export TILESPARSE_REQUIRE_NVCC=1
# The bundle is for the H100/H200 machines: sm_90 machine code (and compute_90 PTX) only, which keeps the
# binaries small enough to travel. Override with TILESPARSE_CUDA_ARCHS.
export TILESPARSE_CUDA_ARCHS="${TILESPARSE_CUDA_ARCHS:-90}"
rm -rf "$out"
mkdir -p "$out/tests" "$out/benches" "$out/bin" "$out/data" "$out/matrices"

list_executables() { # cargo's JSON messages -> "name path" for each test or bench executable
  python3 -c '
import json, sys
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["target"]["kind"][0], m["target"]["name"], m["executable"])'
}
cargo build --release --bins
cp target/release/tilesparse "$out/bin/"
cargo test --release --no-run --message-format=json 2>/dev/null | list_executables | while read -r kind name exe; do
  case "$kind" in lib) cp "$exe" "$out/tests/lib" ;; *) cp "$exe" "$out/tests/$name" ;; esac
done
cargo bench --no-run --message-format=json 2>/dev/null | list_executables | while read -r kind name exe; do
  if [ "$kind" = bench ]; then cp "$exe" "$out/benches/$name"; fi
done
cp tests/data/* "$out/data/"
shared="${TILESPARSE_MATRICES:-../shared/matrices}"
cp "$shared"/*.mtx.gz "$out/matrices/" # all of them: the SpMV suite runs over every real matrix
cp scripts/run-all.sh scripts/gpu-suite.sh "$out/"
echo "bundle in $out: $(ls "$out/tests" | wc -l) test binaries, $(ls "$out/benches" | wc -l) benches, $(du -sh "$out" | cut -f1)"
# TILESPARSE_BUNDLE_XZ=1: also pack it as $out.tar.xz for a machine that takes at most 64 MiB. The binaries embed the
# same fatbins, which xz's large dictionary stores once (137 MB -> 21 MB; gzip gives 66 MB). Where the GPU machine
# has no xz: python3 -c "import tarfile; tarfile.open('gpu-bundle.tar.xz').extractall()"
if [ "${TILESPARSE_BUNDLE_XZ:-0}" = 1 ]; then
  tar cf - -C "$(dirname "$out")" "$(basename "$out")" | xz -T2 -6e --lzma2=dict=192MiB > "$out.tar.xz"
  echo "packed: $out.tar.xz, $(du -h "$out.tar.xz" | cut -f1)"
fi
