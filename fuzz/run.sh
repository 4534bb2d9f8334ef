#!/bin/sh
# Run one fuzz target for a while, in one process (docs/fuzzing.md).
#
#   fuzz/run.sh TARGET [SECONDS] [BUILD_DIR] [extra libFuzzer flags...]
#
# TARGET is mpk, msg, job_json, job_mpk, expr or cache_key; SECONDS defaults to 300;
# BUILD_DIR to build-fuzz (set up with CC=clang meson setup build-fuzz
# -Dfuzz=enabled). The corpus grows in BUILD_DIR/fuzz/corpus-TARGET, seeded
# from fuzz/corpus/TARGET (left untouched); crashes land in
# BUILD_DIR/fuzz/crashes-TARGET/. Any allocation over 64 MiB is a failure:
# no input of a few KiB has a reason to ask for that much.
set -eu
target=$1
seconds=${2:-300}
build=${3:-build-fuzz}
shift $(( $# < 3 ? $# : 3 ))
root=$(cd "$(dirname "$0")/.." && pwd)
case $target in
    mpk|job_mpk|cache_key) dict=msgpack.dict ;;
    msg)         dict=msg.dict ;;
    job_json)    dict=job_json.dict ;;
    expr)        dict=expr.dict ;;
    *)           echo "unknown target '$target'" >&2; exit 2 ;;
esac
case $build in /*) ;; *) build=$root/$build ;; esac
work=$build/fuzz/corpus-$target
crashes=$build/fuzz/crashes-$target
mkdir -p "$work" "$crashes"
ninja -C "$build" "fuzz/fuzz_$target" >/dev/null
exec "$build/fuzz/fuzz_$target" \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=64 \
    -max_len=16384 -use_value_profile=1 -print_final_stats=1 \
    -dict="$root/fuzz/dict/$dict" -artifact_prefix="$crashes/" \
    "$@" "$work" "$root/fuzz/corpus/$target"
