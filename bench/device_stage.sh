#!/usr/bin/env bash
# Copy the binaries of a meson build into .devbuild (git-ignored), keeping the
# build's relative layout, so the device tool can carry them (see device_verify.sh).
#   bench/device_stage.sh [BUILD_DIR]
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
rm -rf .devbuild
for d in broker worker worker/cpu worker/cuda client tests bench; do
    mkdir -p .devbuild/$d
    find "$build/$d" -maxdepth 1 -type f -perm -u+x ! -name '*.so' -exec cp {} .devbuild/$d/ \;
done
du -sh .devbuild
