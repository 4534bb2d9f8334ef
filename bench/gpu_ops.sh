#!/usr/bin/env bash
# The operator's view on a GPU machine (device tool): a broker and one CUDA worker
# per GPU, each with --metrics; the bundled CUDA examples submitted twice (the
# second time from the broker's result cache), then kgym workers / stats /
# tasks / cache stats and both /metrics pages, and a check that the worker's
# UUID label is the GPU's own (nvidia-smi). Logs in $OUT.
#   bench/gpu_ops.sh BUILD_DIR
set -u
B=${1:?usage: bench/gpu_ops.sh BUILD_DIR}
OUT=${OUT:-/tmp}
fail=0
say() { echo "ops: $*"; }
get() {   # GET 127.0.0.1:$1$2 (no curl needed)
    exec 3<>"/dev/tcp/127.0.0.1/$1" || return 1
    printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' "$2" >&3
    sed '1,/^\r$/d' <&3
    exec 3>&-
}
status() {
    exec 3<>"/dev/tcp/127.0.0.1/$1" || { echo 0; return; }
    printf 'GET %s HTTP/1.0\r\n\r\n' "$2" >&3
    head -1 <&3 | awk '{print $2}'
    exec 3>&-
}
gpus=$(nvidia-smi -L | wc -l)
$B/broker/kgym-broker --clients tcp://127.0.0.1:5755 --workers tcp://127.0.0.1:5756 \
    --metrics 127.0.0.1:9755 --db "$OUT/ops-jobs.db" > "$OUT/ops-broker.log" 2>&1 &
pids=$!
for g in $(seq 0 $((gpus - 1))); do
    $B/worker/kgym-worker --broker tcp://127.0.0.1:5756 --backend cuda --device "$g" \
        --metrics 127.0.0.1:$((9760 + g)) --log-format json > "$OUT/ops-worker$g.log" 2>&1 &
    pids="$pids $!"
done
for _ in $(seq 1 120); do
    [ "$(status 9760 /readyz)" = 200 ] && break
    sleep 0.5
done
say "worker 0 /healthz $(status 9760 /healthz), /readyz $(status 9760 /readyz); broker /readyz $(status 9755 /readyz)"

pass() {
    for t in examples/cuda/*/; do
        cands=$(ls "$t"/candidates/{naive,optimised,tail_bug}.json 2>/dev/null)
        [ -n "$cands" ] || continue
        $B/client/kgym submit --broker tcp://127.0.0.1:5755 --timeout 20 "$t/task.json" $cands
    done
}
t0=$(date +%s.%N); pass > "$OUT/ops-pass1.jsonl"; t1=$(date +%s.%N)
pass > "$OUT/ops-pass2.jsonl"; t2=$(date +%s.%N)
n1=$(wc -l < "$OUT/ops-pass1.jsonl"); n2=$(wc -l < "$OUT/ops-pass2.jsonl")
c2=$(grep -c '"cached":true' "$OUT/ops-pass2.jsonl")
say "pass 1: $n1 results in $(awk "BEGIN {print $t1 - $t0}") s; pass 2: $n2 results in $(awk "BEGIN {print $t2 - $t1}") s, $c2 cached"
[ "$n1" -gt 0 ] && [ "$n1" = "$n2" ] && [ "$c2" = "$n2" ] || { say "FAIL: pass 2 should be all cached"; fail=1; }
# Same verdicts both times.
diff <(grep -o '"status":"[a-z_]*"' "$OUT/ops-pass1.jsonl" | sort | uniq -c) \
     <(grep -o '"status":"[a-z_]*"' "$OUT/ops-pass2.jsonl" | sort | uniq -c) \
    && say "verdicts identical across passes: $(grep -o '"status":"[a-z_]*"' "$OUT/ops-pass1.jsonl" | sort | uniq -c | tr -s ' ' | tr '\n' ';')" \
    || { say "FAIL: verdicts differ"; fail=1; }

echo "--- kgym workers";      $B/client/kgym workers --broker tcp://127.0.0.1:5755
echo "--- kgym stats";        $B/client/kgym stats --broker tcp://127.0.0.1:5755
echo "--- kgym cache stats";  $B/client/kgym cache stats --broker tcp://127.0.0.1:5755
echo "--- kgym tasks";        $B/client/kgym tasks --broker tcp://127.0.0.1:5755 --table

get 9755 /metrics > "$OUT/ops-broker.prom"
get 9760 /metrics > "$OUT/ops-worker0.prom"
echo "--- broker /metrics (kgym_*)"; grep -E '^kgym_(jobs_completed|cache_hits|jobs_submitted|jobs_dispatched|workers\{)' "$OUT/ops-broker.prom"
echo "--- worker 0 /metrics (kgym_worker_*)"; grep -E '^kgym_worker_(info|busy|jobs_total|faults|compile_cache|state)' "$OUT/ops-worker0.prom"
smi=$(nvidia-smi --query-gpu=index,uuid --format=csv,noheader | awk -F', ' '$1==0 {print $2}')
label=$(grep -o 'kgym_worker_info{gpu="0",UUID="[^"]*"' "$OUT/ops-worker0.prom" | sed 's/.*UUID="//; s/"$//')
if [ -n "$smi" ] && [ "$smi" = "$label" ]; then say "UUID label matches nvidia-smi: $label"
else say "FAIL: UUID label '$label', nvidia-smi '$smi'"; fail=1; fi

kill -TERM $pids 2>/dev/null; wait 2>/dev/null
say "exit $fail"
exit $fail
