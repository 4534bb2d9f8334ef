#!/usr/bin/env bash
# Multi-GPU throughput: one broker, one kgym-worker per GPU (each pinned to its device),
# a batch of JOBS jobs over the bundled CUDA tasks from one client; the same batch on
# one GPU of the same machine first. Prints jobs/s, the scaling ratio, and checks that
# every job was graded exactly once and each worker stayed on its own GPU.
#   bench/gpu_scaling.sh BUILD_DIR [JOBS] [GPUS]
set -u
build=${1:?usage: gpu_scaling.sh BUILD_DIR [JOBS] [GPUS]}
jobs=${2:-2000}
gpus=${3:-$(nvidia-smi -L 2>/dev/null | wc -l)}
out=${OUT:-/tmp}/scaling
mkdir -p "$out"
root=$(cd "$(dirname "$0")/.." && pwd)
cache=$(mktemp -d)/modules.sqlite
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# The batch: every correct or plainly wrong candidate of every CUDA task (no hangs:
# a 6 s timeout would measure the timeout, not the service), round robin.
python3 - "$root/examples/cuda" "$jobs" > "$out/batch.jsonl" <<'PY'
import json, os, sys
root, n = sys.argv[1], int(sys.argv[2])
pool = []
for task in sorted(os.listdir(root)):
    exp = json.load(open(f"{root}/{task}/expected.json"))
    for cand, status in exp.items():
        if isinstance(status, str) and status in ("ok", "incorrect", "compile_error", "invalid"):
            pool.append((f"{root}/{task}/task.json", f"{root}/{task}/candidates/{cand}.json"))
for i in range(n):
    t, c = pool[i % len(pool)]
    print(json.dumps({"task": t, "candidate": c, "tag": f"job{i}",
                      "eval": {"trials": 2, "warmup": 1, "timed": 5, "timeout": 10}}))
PY

run() {  # NGPUS -> prints jobs/s, leaves results in $out/results-N.jsonl
    local n=$1 cp wp pids=""
    cp=$(port); wp=$(port)
    "$build/broker/kgym-broker" --clients tcp://127.0.0.1:$cp --workers tcp://127.0.0.1:$wp >"$out/broker-$n.log" 2>&1 &
    pids="$!"
    for ((g = 0; g < n; g++)); do
        "$build/worker/kgym-worker" --broker tcp://127.0.0.1:$wp --backend cuda --device $g \
            --cache "$cache" --name "gpu$g" >"$out/worker-$n-$g.log" 2>&1 &
        pids="$pids $!"
    done
    # Warm: every distinct candidate once (the pool is under 64), so neither run pays
    # compile misses or runner start (cuInit, ~0.3 s) in its figure.
    head -n 64 "$out/batch.jsonl" > "$out/warm.jsonl"
    "$build/client/kgym" submit --broker tcp://127.0.0.1:$cp --batch "$out/warm.jsonl" >/dev/null 2>&1
    local start end
    start=$(date +%s.%N)
    "$build/client/kgym" submit --broker tcp://127.0.0.1:$cp --batch "$out/batch.jsonl" \
        >"$out/results-$n.jsonl" 2>"$out/submit-$n.err"
    end=$(date +%s.%N)
    kill $pids 2>/dev/null; wait $pids 2>/dev/null
    python3 -c "print('%.2f' % ($jobs / ($end - $start)))"
}

one=$(run 1)
echo "1 GPU : $one jobs/s"
if [ "$gpus" -ge 2 ]; then
    many=$(run "$gpus")
    echo "$gpus GPUs: $many jobs/s"
    python3 -c "print('scaling: %.2f x for %d GPUs (%.2f of linear)' % ($many/$one, $gpus, $many/$one/$gpus))"
fi
python3 - "$out" "$jobs" <<'PY'
import collections, glob, json, sys
out, n = sys.argv[1], int(sys.argv[2])
for path in sorted(glob.glob(f"{out}/results-*.jsonl")):
    rs = [json.loads(l) for l in open(path) if l.strip()]
    tags = collections.Counter(r.get("tag") for r in rs)
    per = collections.defaultdict(set)
    for r in rs:
        per[r.get("worker")].add((r.get("device_ordinal"), r.get("device")))
    status = collections.Counter(r.get("status") for r in rs)
    hits = sum(1 for r in rs if r.get("cache", {}).get("candidate"))
    print(f"{path.split('/')[-1]}: {len(rs)} results for {n} jobs, {len(tags)} distinct, "
          f"{sum(c > 1 for c in tags.values())} duplicated, statuses {dict(status)}, "
          f"compile-cache hits {hits}")
    for w, devs in sorted(per.items()):
        print(f"  worker {w}: devices {sorted(devs)}")
PY
