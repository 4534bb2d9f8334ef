#!/usr/bin/env bash
# The python backend on a GPU (device tool): grade bench/pygpu's candidates on `cuda`
# with `kgym eval` and print status, speedup, library share and the message of each.
#   bench/python_gpu.sh BUILD_DIR   (KGYM_PYTHON names the interpreter with torch)
set -u
B=${1:?usage: python_gpu.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
export KGYM_PYRUNNER=${KGYM_PYRUNNER:-$here/../worker/python/kgym_pyrunner.py}
for c in triton_relu wrapper nosync events inline_relu; do
    /usr/bin/time -f "%e s" "$B/client/kgym" eval --backend cuda --timeout 30 "$here/pygpu/relu.py" "$here/pygpu/$c.py" 2>&1 |
    python3 -c '
import json, sys
for line in sys.stdin:
    line = line.strip()
    try:
        r = json.loads(line)
    except ValueError:
        print("   ", line[-300:]); continue
    p = r.get("profile") or {}
    print(r["candidate"].split("/")[-1], r["status"], "speedup", r.get("speedup"), "library_share", p.get("library_share"),
          "fallbacks", p.get("timing_fallbacks"), p.get("timing_fallback_why"), "|", r["message"][:200])
    print("   phases", r["phases"], "kernels", [(k["name"][:40], round(k["total_us"]), k["origin"]) for k in p.get("kernels", [])][:4])
    if r["status"] not in ("ok", "incorrect", "invalid"): print("   log:", r.get("compile_log", "")[-600:])
'
done
