#!/usr/bin/env bash
# Grade the PyTorch pool (examples/pytorch) on one target with `kgym eval`, every candidate
# the pool expects there, and print each one's status against its expectation.
#   bench/pytorch_pool.sh [TASK | TASK:CANDIDATE]...       (default: every task)
# Environment:
#   KGYM     the kgym binary (default .devbuild/client/kgym, else build/client/kgym)
#   TARGET   cuda (default) or cpu
#   PYTHON   the interpreter the runners use (default /opt/torch/.venv/bin/python3 when it
#            exists): exported as KGYM_PYTHON, and given as --python when kgym eval has it
#   OUT      where the per-candidate results go (pytorch_pool.jsonl; default /tmp)
#   POOL_UNTIL  a deadline (seconds since the epoch): a task's kgym eval still running then
#            is stopped and the candidates it graded so far are reported
# One kgym eval per task (its candidates share one evaluator, so the runner stays warm),
# with the task's eval settings for the target (timeout, compile_timeout). On the H200 the
# whole pool takes longer than one 10-minute device call: give it a few tasks at a time, e.g.
#   bench/pytorch_pool.sh l1_relu
#   bench/pytorch_pool.sh l1_gelu l1_softmax l1_sum_rows
#   bench/pytorch_pool.sh l1_matmul l2_rmsnorm l2_bias_gelu_residual
#   bench/pytorch_pool.sh l3_mlp l3_attention
# Exit 1 when a candidate misses its expected status, or when a "slow" one (a timing
# attack) is measured at 1x or faster.
set -u
cd "$(dirname "$0")/.."
if [ -d .devlibs/lib ]; then
    export LD_LIBRARY_PATH=$PWD/.devlibs/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
if [ -z "${KGYM:-}" ]; then
    KGYM=build/client/kgym
    [ -x .devbuild/client/kgym ] && KGYM=.devbuild/client/kgym
fi
if [ -z "${PYTHON:-}" ] && [ -x /opt/torch/.venv/bin/python3 ]; then
    PYTHON=/opt/torch/.venv/bin/python3
fi
export KGYM TARGET=${TARGET:-cuda} OUT=${OUT:-/tmp} KGYM_PYTHON=${PYTHON:-}
# Where the build's runners are, as device_verify.sh says them.
if [ -d .devbuild ]; then
    export KGYM_SOURCE_DIR=$PWD KGYM_RUNNER=$PWD/.devbuild/worker/cpu/kgym-runner \
           KGYM_CUDA_RUNNER=$PWD/.devbuild/worker/cuda/kgym-cuda-runner \
           KGYM_NVRTC=$PWD/.devbuild/worker/cuda/kgym-nvrtc
fi
[ -x "$KGYM" ] || { echo "pytorch_pool.sh: no kgym at $KGYM (set KGYM)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "pytorch_pool.sh: needs python3 (standard library)" >&2; exit 1; }
exec python3 - "$@" <<'EOF'
import glob, json, os, subprocess, sys, time

kgym, target, out_dir, python = (os.environ[k] for k in ("KGYM", "TARGET", "OUT", "KGYM_PYTHON"))
pool = os.path.join("examples", "pytorch")
wanted = {}
for arg in sys.argv[1:]:
    task, _, cand = arg.partition(":")
    wanted.setdefault(task, set())
    if cand:
        wanted[task].add(cand)
help_text = subprocess.run([kgym, "eval", "--help"], capture_output=True, text=True).stdout
extra = ["--python", python] if python and "--python" in help_text else []
if "--compile-timeout" not in help_text:
    sys.exit("pytorch_pool.sh: this kgym eval has no --compile-timeout")
os.makedirs(out_dir, exist_ok=True)
log = open(os.path.join(out_dir, "pytorch_pool.jsonl"), "w")
print("%-22s %-22s %-14s %-16s %8s %8s %7s" % ("task", "candidate", "status", "expected",
                                             "reward", "speedup", "wall s"))
misses = graded = 0
for task_file in sorted(glob.glob(os.path.join(pool, "*", "task.%s.json" % target))):
    taskdir = os.path.dirname(task_file)
    task = os.path.basename(taskdir)
    if wanted and task not in wanted:
        continue
    with open(os.path.join(taskdir, "expected.json")) as f:
        expected = json.load(f)[target]
    names = [n for n in sorted(expected) if n not in ("eval", "fast", "slow")
             and (not wanted.get(task) or n in wanted[task])]
    if not names:
        continue
    ev = expected.get("eval", {})
    cmd = [kgym, "eval"] + extra
    if "timeout" in ev:
        cmd += ["--timeout", str(ev["timeout"])]
    if "compile_timeout" in ev:
        cmd += ["--compile-timeout", str(ev["compile_timeout"])]
    cmd += [task_file] + [os.path.join(taskdir, "candidates", n + ".json") for n in names]
    limit = len(names) * (ev.get("timeout", 10) + ev.get("compile_timeout", 30) + 60)
    if os.environ.get("POOL_UNTIL"):    # a deadline (epoch s): what finished by then is reported
        limit = max(1, min(limit, float(os.environ["POOL_UNTIL"]) - time.time()))
    start = time.time()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
        lines, why = proc.stdout.splitlines(), proc.stderr.strip()[-400:]
        # The worker's log (KGYM_LOG=debug: each request's time) beside the results.
        with open(os.path.join(out_dir, "pytorch_pool.%s.log" % task), "w") as err_log:
            err_log.write(proc.stderr)
    except subprocess.TimeoutExpired as e:
        lines, why = (e.stdout or b"").decode(errors="replace").splitlines(), "no end in %d s" % limit
    wall = (time.time() - start) / len(names)
    results = {}
    for line in lines:
        try:
            result = json.loads(line)
        except ValueError:
            continue
        results[os.path.basename(str(result.get("candidate", ""))).removesuffix(".json")] = result
    for name in names:
        result = results.get(name, {})
        status = result.get("status", "(none)")
        want = expected[name] if isinstance(expected[name], list) else [expected[name]]
        speedup = result.get("speedup")
        slow = name in expected.get("slow", [])
        fooled = slow and status == "ok" and isinstance(speedup, (int, float)) and speedup >= 1
        match = status in want and not fooled
        graded += 1
        misses += not match
        note = "as expected" if match else ("slow, not <1x" if fooled else "|".join(want))
        if not match and name in expected.get("fast", []):
            note += " (fast)"
        print("%-22s %-22s %-14s %-16s %8s %8s %7.1f" % (
            task, name, status, note,
            "%.3f" % result["reward"] if isinstance(result.get("reward"), (int, float)) else "-",
            "%.2fx" % speedup if isinstance(speedup, (int, float)) else "-", wall))
        if not match:
            text = result.get("feedback") or result.get("message") or why
            print("    " + str(text).replace("\n", "\n    ")[:600])
        log.write(json.dumps({"task": task, "candidate": name, "expected": want, "slow": slow,
                              "result": result}) + "\n")
        sys.stdout.flush()
print("\n%d candidate(s) graded on %s; %d missed their expected status" % (graded, target, misses))
sys.exit(1 if misses else 0)
EOF
