#!/usr/bin/env bash
# Installs nvcc 13.0 from NVIDIA's pip wheels into a cache folder (no CUDA toolkit, no GPU needed) and prints
# the line that puts it on PATH. All five wheels are pinned to 13.0: an unpinned nvidia-nvvm brings a newer
# cicc whose PTX the 13.0 ptxas (and the GPU machines' CUDA 13.0 driver) rejects.
#
#   eval "$(scripts/install-cuda-toolchain.sh)"     # installs if needed, then exports PATH
set -euo pipefail
prefix="${TILESPARSE_CUDA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tilesparse-cuda}"
bin="$prefix/site/nvidia/cu13/bin"
if [ ! -x "$bin/nvcc" ]; then
  python3 -m pip install --quiet --disable-pip-version-check --target "$prefix/site" \
    "nvidia-cuda-nvcc==13.0.*" "nvidia-cuda-runtime==13.0.*" "nvidia-cuda-cccl==13.0.*" \
    "nvidia-nvvm==13.0.*" "nvidia-cuda-crt==13.0.*" >&2
fi
"$bin/nvcc" --version | tail -n 1 >&2
echo "export PATH=\"$bin:\$PATH\""
