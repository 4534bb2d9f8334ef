#!/usr/bin/env bash
# A GPU (or CPU) that never waits (issue #15): one broker and one worker grade a stream of
# distinct candidates over the bundled tasks of a backend, default eval, and this prints jobs/s
# and the worker's busy ratio (the share of its run slots' wall time its jobs' execute phases
# held them, from kgym_worker_device_busy_seconds_total). Three or four runs, each on a fresh broker
# and worker sharing one compile cache:
#   mix        honest (naive, optimised), wrong (tail_bug) and broken (naive with a syntax
#              error: compile_error) candidates, 2:1:1, every source made distinct by a comment,
#              so every candidate compiles (no compile cache hit)
#   mix+slow   the same with every 20th job a correct candidate ~100x slower than naive
#              (gelu_f32 computed 100 times over); the drop in jobs/s is compared with that
#              candidate's share of the jobs
#   old-pools  the mix with the worker's pools as they were before the compile pool
#              (--compilers 2 --prefetch 1)
#   mix-skip   the mix without the tasks in STREAM_SKIP (default for cuda: sum_f32, whose
#              reference sums on one multiprocessor, ~24 ms an input set, so its jobs take
#              ~0.3 s of GPU time each whatever the candidate; none for cpu: no such run)
# Before each run one job per task warms the runner and compiles the references.
#   bench/stream.sh BUILD_DIR BACKEND [JOBS]        (BACKEND cpu or cuda; JOBS default 400)
# STREAM_EVAL='{"timed": 100}' gives every job that eval object (default: none, the defaults).
set -u
build=${1:?usage: stream.sh BUILD_DIR cpu|cuda [JOBS]}
backend=${2:?usage: stream.sh BUILD_DIR cpu|cuda [JOBS]}
jobs=${3:-400}
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-/tmp}/stream-$backend
mkdir -p "$out"
cache=$(mktemp -d)/modules.sqlite
py=python3
port() { $py -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# batch FILE JOBS SLOW_EVERY PREFIX [SKIP]: the stream, one job per line (inline candidates),
# without the tasks named in SKIP (space-separated).
batch() {
    $py - "$root/examples/$backend" "$backend" "$2" "$3" "$4" "${STREAM_EVAL:-}" "${5:-}" > "$1" <<'PY'
import json, os, sys
root, backend, n, slow_every, prefix = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
evaluation = json.loads(sys.argv[6]) if sys.argv[6] else None
skip = set(sys.argv[7].split())
tasks = sorted(t for t in os.listdir(root) if os.path.exists(f"{root}/{t}/task.json") and t not in skip)
def cand(task, name):
    return json.load(open(f"{root}/{task}/candidates/{name}.json"))
def slow():
    # gelu_f32, correct, about 100x the naive kernel's time: the whole tensor 100 times over.
    if backend == "cuda":
        src = ('extern "C" __global__ void gelu(const float *x, float *y, int N)\n{\n'
               '    for (int r = 0; r < 100; r++) {\n'
               '        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < N; i += gridDim.x * blockDim.x) {\n'
               '            float v = x[i];\n'
               '            y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));\n'
               '        }\n        asm volatile ("" ::: "memory");\n    }\n}\n')
        return {"source": src, "launches": [{"kernel": "gelu", "grid": ["min(cdiv(N,256),1056)", 1, 1],
                                             "block": [256, 1, 1]}]}
    c = cand("gelu_f32", "naive")
    c["source"] = c["source"].replace("void gelu(", "static void gelu_once(") + (
        "void gelu(const float *x, float *y, int32_t N)\n{\n"
        "    for (int r = 0; r < 100; r++) {\n        gelu_once (x, y, N);\n"
        "        __asm__ volatile (\"\" ::: \"memory\");\n    }\n}\n")
    return c
kinds = ["naive", "optimised", "tail_bug", "broken"]
for i in range(n):
    if slow_every and i % slow_every == slow_every - 1:
        task, c, kind = "gelu_f32", slow(), "slow"
    else:
        task, kind = tasks[i % len(tasks)], kinds[(i // len(tasks)) % len(kinds)]
        c = cand(task, "naive" if kind == "broken" else kind)
        if kind == "broken":
            c["source"] += "\nint kgym_broken = ;\n"
    c["source"] += f"\n// {prefix} job {i}\n"
    job = {"task": f"{root}/{task}/task.json", "candidate": c, "tag": f"{prefix}-{i}-{kind}"}
    if evaluation is not None:
        job["eval"] = evaluation
    print(json.dumps(job))
PY
}

# scrape PORT NAME: a sample's value from a worker's /metrics.
scrape() {
    $py - "$1" "$2" <<'PY'
import sys, urllib.request
page = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=10).read().decode()
print(sum(float(l.split()[-1]) for l in page.splitlines() if l.startswith(sys.argv[2] + "{") or l.startswith(sys.argv[2] + " ")))
PY
}

# run LABEL BATCH [WORKER OPTIONS...]: prints one line, leaves results in $out/LABEL.jsonl
run() {
    local label=$1 file=$2 cp wp mp pids
    shift 2
    cp=$(port) wp=$(port) mp=$(port)
    "$build/broker/kgym-broker" --clients tcp://127.0.0.1:$cp --workers tcp://127.0.0.1:$wp \
        >"$out/broker-$label.log" 2>&1 &
    pids="$!"
    "$build/worker/kgym-worker" --broker tcp://127.0.0.1:$wp --backend "$backend" --cache "$cache" \
        --name "stream-$label" --metrics 127.0.0.1:$mp "$@" >"$out/worker-$label.log" 2>&1 &
    pids="$pids $!"
    batch "$out/batch-warm-$label.jsonl" 8 0 "warm-$label-$RANDOM"
    "$build/client/kgym" submit --broker tcp://127.0.0.1:$cp --batch "$out/batch-warm-$label.jsonl" >/dev/null 2>&1
    local busy0 busy1 slots start end
    busy0=$(scrape $mp kgym_worker_device_busy_seconds_total)
    slots=$(scrape $mp kgym_worker_slots)
    start=$(date +%s.%N)
    "$build/client/kgym" submit --broker tcp://127.0.0.1:$cp --batch "$file" \
        >"$out/$label.jsonl" 2>"$out/submit-$label.err"
    end=$(date +%s.%N)
    busy1=$(scrape $mp kgym_worker_device_busy_seconds_total)
    kill $pids 2>/dev/null
    wait $pids 2>/dev/null
    $py - "$out/$label.jsonl" "$label" "$start" "$end" "$busy0" "$busy1" "$slots" <<'PY'
import collections, json, sys
path, label, start, end, b0, b1, slots = sys.argv[1:]
rs = [json.loads(l) for l in open(path) if l.strip()]
wall = float(end) - float(start)
busy = (float(b1) - float(b0)) / (wall * float(slots))
status = collections.Counter(r.get("status") for r in rs)
hits = sum(1 for r in rs if (r.get("cache") or {}).get("candidate"))
runs = collections.Counter((r.get("timings") or {}).get("stopped") for r in rs if r.get("timings"))
slow = [r for r in rs if str(r.get("tag", "")).endswith("-slow")]
slow_runs = sorted((r.get("timings") or {}).get("runs") for r in slow)
print(f"stream {label}: {len(rs)} jobs in {wall:.2f} s = {len(rs) / wall:.2f} jobs/s, busy {busy:.2f} "
      f"(statuses {dict(status)}, candidate compile-cache hits {hits}, timing stopped {dict(runs)}"
      + (f", slow candidate: {len(slow)} jobs, timed runs {slow_runs[:3]}...{slow_runs[-1:]}" if slow else "") + ")")
tag = label.replace("+", "_").replace("-", "_")
#  What the slow candidate's jobs cost in runs: the input sets each job ran on the device
#  (correctness trials, warm-ups beyond them, timed runs, the profiled re-check: gpu_phases.sets).
sets = [((r.get("gpu_phases") or {}).get("sets") or 0) for r in rs]
if slow and sum(sets):
    slow_sets = sum(((r.get("gpu_phases") or {}).get("sets") or 0) for r in slow)
    print(f"slow candidate: {slow_sets} of the {sum(sets)} input sets run "
          f"({slow_sets / sum(sets):.3f}; {slow_sets / len(slow):.1f} a job, the others' "
          f"{(sum(sets) - slow_sets) / max(1, len(rs) - len(slow)):.1f})")
    print(f"BENCH stream_slow_share_of_runs {slow_sets / sum(sets):.3f}")
print(f"BENCH stream_{tag}_jobs_s {len(rs) / wall:.2f}")
print(f"BENCH stream_{tag}_busy {busy:.3f}")
PY
}

batch "$out/batch-mix.jsonl" "$jobs" 0 "mix-$RANDOM"
batch "$out/batch-slow.jsonl" "$jobs" 20 "slow-$RANDOM"
batch "$out/batch-old.jsonl" "$jobs" 0 "old-$RANDOM"
skip=${STREAM_SKIP-$([ "$backend" = cuda ] && echo sum_f32)}
[ -n "$skip" ] && batch "$out/batch-skip.jsonl" "$jobs" 0 "skip-$RANDOM" "$skip"
echo "backend $backend, $jobs jobs per run, $(nproc) CPUs, eval ${STREAM_EVAL:-default}"
run mix "$out/batch-mix.jsonl" | tee "$out/summary-mix.txt"
run mix+slow "$out/batch-slow.jsonl" | tee "$out/summary-slow.txt"
run old-pools "$out/batch-old.jsonl" --compilers 2 --prefetch 1 | tee "$out/summary-old.txt"
[ -n "$skip" ] && { echo "mix-skip: without $skip"; run mix-skip "$out/batch-skip.jsonl" | tee "$out/summary-skip.txt"; }
$py - "$out" <<'PY'
import re, sys
def rate(name):
    m = re.search(r"= ([0-9.]+) jobs/s", open(f"{sys.argv[1]}/summary-{name}.txt").read())
    return float(m.group(1)) if m else 0.0
mix, slow = rate("mix"), rate("slow")
m = re.search(r"BENCH stream_slow_share_of_runs ([0-9.]+)", open(f"{sys.argv[1]}/summary-slow.txt").read())
runs = f", {1 - float(m.group(1)):.3f} its share of the runs" if m else ""
if mix:
    print(f"mix+slow / mix = {slow / mix:.3f} (the slow candidate is 1 job in 20: 0.950 would be its "
          f"share of the jobs{runs})")
PY
