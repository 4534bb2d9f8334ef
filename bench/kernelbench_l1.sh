#!/usr/bin/env bash
# Per-job wall of a Triton and a load_inline candidate on KernelBench level 1's ReLU shape
# (examples/pytorch/l1_relu/src/ref.py: 4096 x 393216 f32, the module file as it is), the
# figures issue #13 compares with KernelBench's harness (docs/benchmarks.md). For each
# candidate, on a fresh cache: one `kgym eval` grading it twice (job 1: nothing built, no
# runner started; job 2: the same source, its build kept, runners warm), then a new
# `kgym eval` process on the same cache (the build kept, runners cold).
#   bench/kernelbench_l1.sh [CANDIDATE...]   (default: triton_optimised cuda_optimised)
# Environment: KGYM (default .devbuild/client/kgym, else build/client/kgym), KGYM_PYTHON;
# OUT: a folder for each kgym eval's log.
set -u
cd "$(dirname "$0")/.."
if [ -z "${KGYM:-}" ]; then
    KGYM=build/client/kgym
    [ -x .devbuild/client/kgym ] && KGYM=.devbuild/client/kgym
fi
python=${KGYM_PYTHON:-/opt/torch/.venv/bin/python3}
src=examples/pytorch/l1_relu/src
report() {
    python3 -c '
import json, sys
label = sys.argv[1]
for n, line in enumerate(sys.stdin, 1):
    try:
        r = json.loads(line)
    except ValueError:
        continue
    p, t = r.get("phases", {}), r.get("timings") or {}
    print("%-28s job %d: %-9s speedup %-6s compile %6.2f s  run %6.2f s  total %6.2f s  built_ahead %s  cache %s  timed runs %s (%s)"
          % (label, n, r["status"], r.get("speedup"), p.get("compile_s", 0), p.get("run_s", 0),
             p.get("total_s", 0), r.get("built_ahead"), json.dumps(r.get("cache")),
             t.get("runs"), t.get("stopped")))
    if r["status"] != "ok":
        print("   ", r.get("message", "")[:300])
' "$1"
}
for cand in ${*:-triton_optimised cuda_optimised}; do
    cache=$(mktemp -d)
    t0=$EPOCHREALTIME
    KGYM_CACHE_DIR=$cache "$KGYM" eval --backend cuda --python "$python" --timeout 300 \
        --compile-timeout 300 $src/ref.py $src/$cand.py $src/$cand.py 2>$cache/err1 | report "$cand, one process"
    echo "  wall of that process: $(awk "BEGIN{print $EPOCHREALTIME - $t0}") s"
    t0=$EPOCHREALTIME
    KGYM_CACHE_DIR=$cache "$KGYM" eval --backend cuda --python "$python" --timeout 300 \
        --compile-timeout 300 $src/ref.py $src/$cand.py 2>$cache/err2 | report "$cand, new process"
    echo "  wall of that process: $(awk "BEGIN{print $EPOCHREALTIME - $t0}") s"
    if [ -n "${OUT:-}" ]; then      # the worker's log (KGYM_LOG=debug: each request's time)
        cp $cache/err1 "$OUT/$cand.one-process.log"; cp $cache/err2 "$OUT/$cand.new-process.log"
    fi
    rm -rf "$cache"
done
