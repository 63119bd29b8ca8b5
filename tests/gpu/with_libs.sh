#!/usr/bin/env bash
# tests/gpu/with_libs.sh — run a command on the GPU machine with the libraries the packed
# binaries need: those in $DEV/lib (default .dev/lib, made by tests/gpu/pack.sh) and cuBLASLt
# from the image (the CUDA toolkit, or the wheel PyTorch uses), as run_on_device.sh finds them.
#   tests/gpu/with_libs.sh .dev/bin/gpu_kernels --bench-gemm
set -uo pipefail
DEV=${DEV:-.dev}
CUBLAS_DIRS=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib
PYCUBLAS=$(python3 -c 'import nvidia.cublas as m, os
print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null || true)
LIBS="$PWD/$DEV/lib:$CUBLAS_DIRS${PYCUBLAS:+:$PYCUBLAS}"
export LD_LIBRARY_PATH="$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec "$@"
