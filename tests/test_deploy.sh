#!/usr/bin/env bash
# test_deploy - checks of deploy/ (meson suite 'deploy'), one part per call:
#
#   tests/test_deploy.sh systemd      systemd-analyze verify and security on the units (as
#                                     configured for the build's prefix); the worker run
#                                     under the unit's capability bounding set
#   tests/test_deploy.sh k8s          the kustomize trees validated offline (kubernetes-models
#                                     schemas + unknown keys + kgym's rules), as rendered here
#                                     and by `kubectl kustomize` where kubectl exists
#   tests/test_deploy.sh prometheus   promtool check config / rules, promtool test rules
#   tests/test_deploy.sh slurm        a real Slurm (munge, slurmctld, two slurmd as two nodes
#                                     on this host, fake GPU devices) runs deploy/slurm's
#                                     scripts with CPU workers: a batch graded, then drained
#   tests/test_deploy.sh install      meson install --destdir: binaries, units and the docs
#                                     they name, man pages, bash completion, examples
#   tests/test_deploy.sh image        the image from Debian's packages (deploy/docker/mkimage.sh)
#                                     run with podman: kgym demo, the sandbox, and a broker and
#                                     a worker container under the manifests' security contexts
#   tests/test_deploy.sh dockerfile   deploy/docker/Dockerfile built with podman (its base stood in
#                                     for by mmdebstrap) and kgym demo run in it
#   tests/test_deploy.sh grafana      every query of deploy/grafana/kgym.json names metrics and
#                                     labels a real broker's and CPU worker's /metrics carry
#
# Environment: KGYM_SOURCE_DIR (the tree), KGYM_BUILD_DIR (a meson build with the binaries).
# Exit: 0 passed, 77 skipped (a tool is missing: the reason is printed), 1 failed.
set -uo pipefail
part=${1:?usage: test_deploy.sh systemd|k8s|prometheus|slurm|install|image|dockerfile|grafana}
src=${KGYM_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=${KGYM_BUILD_DIR:-$src/build}
deploy=$src/deploy
tmp=$(mktemp -d /tmp/kgym-deploy.XXXXXX)
chmod 755 "$tmp"
failures=0
cleanup_steps=()

cleanup() {
    local i
    for ((i = ${#cleanup_steps[@]} - 1; i >= 0; i--)); do eval "${cleanup_steps[$i]}" >/dev/null 2>&1; done
    rm -rf "$tmp"
}
trap cleanup EXIT

say()  { echo "test_deploy $part: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok()   { echo "ok: $*"; }
skip() {
    echo "SKIP: $*"
    [ "$failures" -gt 0 ] && { echo "$failures check(s) failed before that"; exit 1; }
    exit 77
}
finish() {
    if [ "$failures" -gt 0 ]; then echo "$failures check(s) failed"; exit 1; fi
    echo "all checks passed"; exit 0
}

# Wait up to $1 seconds for the command after it to succeed.
wait_for() {
    local limit=$1; shift
    local end=$((SECONDS + limit))
    until "$@" >/dev/null 2>&1; do
        [ $SECONDS -ge $end ] && return 1
        sleep 0.2
    done
}

# A free TCP port on loopback.
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Grade examples/cpu/rmsnorm_f32 through a broker; each status must match expected.json.
# $1: client endpoint. Prints the results to $tmp/results.jsonl.
grade_examples() {
    local task=$src/examples/cpu/rmsnorm_f32
    timeout 120 "$build/client/kgym" submit --broker "$1" "$task/task.json" "$task"/candidates/*.json \
        > "$tmp/results.jsonl" 2> "$tmp/submit.err" || { cat "$tmp/submit.err"; return 1; }
    python3 - "$task/expected.json" "$tmp/results.jsonl" <<'EOF'
import json, os, sys
expected = json.load(open(sys.argv[1]))
results = [json.loads(line) for line in open(sys.argv[2])]
bad = 0
for r in results:
    name = os.path.splitext(os.path.basename(r["candidate"]))[0]
    if r["status"] != expected.get(name):
        print(f"  {name}: status {r['status']}, expected {expected.get(name)} ({r.get('message', '')[:120]})")
        bad += 1
want = {k for k, v in expected.items() if isinstance(v, str)}
got = {os.path.splitext(os.path.basename(r["candidate"]))[0] for r in results}
if want != got:
    print(f"  results for {sorted(got)}, expected {sorted(want)}")
    bad += 1
print(f"  {len(results)} results, {bad} wrong")
sys.exit(1 if bad else 0)
EOF
}

# ---------------------------------------------------------------------------
part_systemd() {
    command -v systemd-analyze >/dev/null || skip "systemd-analyze not installed"
    # The units as configured for this build's prefix (deploy/meson.build),
    # with stand-in binaries where they expect the real ones (verify checks
    # that ExecStart= names an executable).
    local units=$build/deploy bindir
    bindir=$(sed -n 's#^ExecStart=\(.*\)/kgym-broker .*#\1#p' "$units/kgym-broker.service")
    [ -n "$bindir" ] || { fail "no configured kgym-broker.service in $units (meson setup?)"; return; }
    mkdir -p "$tmp/bin" "$tmp/units"
    for b in kgym-broker kgym-worker; do printf '#!/bin/sh\nexit 0\n' > "$tmp/bin/$b"; chmod +x "$tmp/bin/$b"; done
    for f in "$units"/*.service "$units"/*.target; do
        sed "s#$bindir/#$tmp/bin/#g" "$f" > "$tmp/units/$(basename "$f")"
    done
    cp "$tmp/units/kgym-worker@.service" "$tmp/units/kgym-worker@0.service"
    cp "$tmp/units/kgym-worker@.service" "$tmp/units/kgym-worker@GPU-5c2ee7a4-0000-1111-2222-333344445555.service"
    cp "$tmp/units/kgym-cpu-worker@.service" "$tmp/units/kgym-cpu-worker@0.service"
    # verify runs `man` on each man: in Documentation=: this build's pages.
    mkdir -p "$tmp/man/man1"
    for f in "$build"/man/*.1; do [ -f "$f" ] && ln -s "$f" "$tmp/man/man1/"; done
    export MANPATH=$tmp/man
    local out
    for unit in kgym-broker.service kgym-worker@.service kgym-worker@0.service \
                kgym-worker@GPU-5c2ee7a4-0000-1111-2222-333344445555.service \
                kgym-cpu-worker@.service kgym-cpu-worker@0.service kgym-workers.target; do
        if out=$(cd "$tmp/units" && systemd-analyze verify "./$unit" 2>&1) && [ -z "$out" ]; then
            ok "systemd-analyze verify $unit: clean"
        else
            fail "systemd-analyze verify $unit:"; echo "$out"
        fi
    done
    # Exposure as systemd scores it (0 best, 10 worst). The workers are root
    # by design (their sandbox needs it, see the units): bounded, not minimal.
    local unit limit score
    for pair in kgym-broker.service:2.0 kgym-worker@0.service:6.0 kgym-cpu-worker@0.service:6.0; do
        unit=${pair%%:*}; limit=${pair##*:}
        out=$(cd "$tmp/units" && systemd-analyze security --offline=yes "./$unit" 2>&1)
        score=$(echo "$out" | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
        if [ -n "$score" ] && python3 -c "import sys; sys.exit(0 if $score <= $limit else 1)"; then
            ok "systemd-analyze security $unit: exposure $score (limit $limit)"
        else
            fail "systemd-analyze security $unit: exposure '${score:-?}' over $limit"; echo "$out" | tail -5
        fi
    done
    # Both worker units allow the namespaces the sandbox makes, with the same caps.
    local gpu_caps cpu_caps
    gpu_caps=$(sed -n 's/^CapabilityBoundingSet=//p' "$units/kgym-worker@.service")
    cpu_caps=$(sed -n 's/^CapabilityBoundingSet=//p' "$units/kgym-cpu-worker@.service")
    [ "$gpu_caps" = "$cpu_caps" ] || fail "the CPU worker unit's capabilities ($cpu_caps) differ from the GPU one's ($gpu_caps)"
    for f in "$units/kgym-worker@.service" "$units/kgym-cpu-worker@.service"; do
        for ns in net ipc mnt; do
            grep -q "^RestrictNamespaces=.*\b$ns\b" "$f" \
                || fail "$(basename "$f"): RestrictNamespaces= refuses '$ns', which the sandbox unshares"
        done
    done
    # The worker unit's CapabilityBoundingSet= must be enough for the sandbox:
    # a worker under exactly that set grades the CPU examples with the same
    # confinement as an unrestricted one.
    [ -x "$build/worker/kgym-worker" ] || { fail "no $build/worker/kgym-worker"; return; }
    command -v setpriv >/dev/null || { say "setpriv missing: capability check skipped"; return; }
    [ "$(id -u)" = 0 ] || { say "not root: capability check skipped (the worker runs as root)"; return; }
    local caps
    caps=$(sed -n 's/^CapabilityBoundingSet=//p' "$units/kgym-worker@.service" | tr 'A-Z' 'a-z' \
           | sed 's/cap_//g; s/ /,+/g')
    "$build/broker/kgym-broker" --clients 'tcp://127.0.0.1:*' --workers 'tcp://127.0.0.1:*' \
        > "$tmp/broker.log" 2>&1 &
    local broker=$!
    cleanup_steps+=("kill $broker")
    wait_for 10 grep -q 'clients on' "$tmp/broker.log" || { fail "broker did not start"; cat "$tmp/broker.log"; return; }
    local clients workers
    clients=$(sed -n 's/.*clients on \(tcp:[^,]*\), workers on \(tcp:[^,]*\).*/\1/p' "$tmp/broker.log")
    workers=$(sed -n 's/.*clients on \(tcp:[^,]*\), workers on \(tcp:[^,]*\).*/\2/p' "$tmp/broker.log")
    KGYM_CACHE_DIR=$tmp/cache setpriv --bounding-set "-all,+$caps" --no-new-privs \
        "$build/worker/kgym-worker" --broker "$workers" --backend cpu --name capcheck > "$tmp/worker.log" 2>&1 &
    local worker=$!
    cleanup_steps+=("kill $worker")
    say "worker under bounding set +$caps"
    if grade_examples "$clients"; then
        ok "worker under the unit's CapabilityBoundingSet graded the examples as expected"
    else
        fail "worker under the unit's CapabilityBoundingSet"; tail -20 "$tmp/worker.log"
    fi
    # Same confinement as without the bound (kgym eval, unrestricted).
    local task=$src/examples/cpu/rmsnorm_f32
    KGYM_CACHE_DIR=$tmp/cache2 "$build/client/kgym" eval "$task/task.json" "$task/candidates/naive.json" \
        > "$tmp/free.jsonl" 2>/dev/null
    if python3 - "$tmp/free.jsonl" "$tmp/results.jsonl" <<'EOF'
import json, sys
keys = ("netns", "pidns", "seccomp", "cgroup", "userns", "root", "capabilities")
free = json.loads(open(sys.argv[1]).readline())["sandbox"]
bound = [r["sandbox"] for r in map(json.loads, open(sys.argv[2])) if r["candidate"].endswith("naive.json")][0]
a = {k: free.get(k) for k in keys}; b = {k: bound.get(k) for k in keys}
# Each runner has a uid of its own (docs/sandbox.md): never root, never nobody.
a["own uid"], b["own uid"] = (isinstance(s.get("uid"), int) and s["uid"] > 65535 for s in (free, bound))
print(f"  unrestricted {a}\n  bounded      {b}")
sys.exit(0 if a == b and a["own uid"] else 1)
EOF
    then ok "same sandbox confinement under the bounding set"
    else fail "the bounding set weakened the sandbox"; fi
}

# ---------------------------------------------------------------------------
part_k8s() {
    # Image names agree: each container's image is one deploy/docker builds
    # (its title label), and the kustomization points each at the registry.
    local built used img
    built=$(sed -n 's/.*org\.opencontainers\.image\.title=\([a-z0-9-]*\).*/\1/p' \
            "$deploy"/docker/Dockerfile* "$deploy/docker/mkimage.sh" | sort -u | tr '\n' ' ')
    used=$(sed -n 's/^ *image: *\([^ ]*\) *$/\1/p' "$deploy"/k8s/base/*.yaml | sort -u | tr '\n' ' ')
    for img in $used; do
        [[ " $built" == *" $img "* ]] || fail "k8s uses image '$img'; deploy/docker builds: $built"
        grep -q "^  - name: $img\$" "$deploy/k8s/base/kustomization.yaml" \
            || fail "kustomization.yaml has no images: entry for '$img'"
    done
    [ -n "$used" ] && say "images: the manifests use $used; deploy/docker builds $built"
    command -v node >/dev/null && command -v npm >/dev/null || skip "node/npm not installed"
    # kubernetes-models and yaml, installed into the build dir (never the tree).
    local dir=$build/deploy-node
    mkdir -p "$dir"
    if ! cmp -s "$src/tests/deploy/package-lock.json" "$dir/package-lock.json" || [ ! -d "$dir/node_modules" ]; then
        cp "$src/tests/deploy/package.json" "$src/tests/deploy/package-lock.json" "$dir/"
        if ! (cd "$dir" && timeout 300 npm ci --no-audit --no-fund --loglevel=error) > "$tmp/npm.log" 2>&1; then
            cat "$tmp/npm.log"
            rm -f "$dir/package-lock.json"
            skip "npm ci failed (no registry?): the k8s manifests were not validated"
        fi
    fi
    cp "$src/tests/deploy/validate_k8s.cjs" "$dir/"
    local args=()
    for tree in "$deploy/k8s" "$deploy/k8s/hpa" "$deploy/k8s/monitoring"; do
        args+=(--kustomize "$tree")
        if command -v kubectl >/dev/null; then
            local name
            name=$(basename "$tree").yaml
            if kubectl kustomize "$tree" > "$tmp/$name" 2> "$tmp/kubectl.err"; then
                args+=(--rendered "$tmp/$name")
            else
                fail "kubectl kustomize $tree"; cat "$tmp/kubectl.err"
            fi
        fi
    done
    command -v kubectl >/dev/null || say "kubectl not installed: validated this checker's own rendering only"
    if (cd "$src" && node "$dir/validate_k8s.cjs" "${args[@]}"); then
        ok "k8s manifests: schema, unknown keys and kgym rules"
    else
        fail "k8s manifests"
    fi
}

# ---------------------------------------------------------------------------
part_prometheus() {
    command -v promtool >/dev/null || skip "promtool not installed (Debian package prometheus)"
    local p=$deploy/prometheus out
    if out=$(promtool check config "$p/prometheus.yml" 2>&1); then ok "promtool check config prometheus.yml"
    else fail "promtool check config prometheus.yml"; echo "$out"; fi
    if out=$(promtool check config "$p/prometheus-k8s.yml" 2>&1); then
        ok "promtool check config prometheus-k8s.yml"
    elif echo "$out" | grep -q 'field kubernetes_sd_configs not found'; then
        # Debian builds promtool without Kubernetes discovery: check the rest
        # (relabelling, rules) with the discovery swapped for a static target.
        python3 - "$p/prometheus-k8s.yml" "$tmp/prometheus-k8s-static.yml" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
text = re.sub(r"    kubernetes_sd_configs:\n(      .*\n)+", "    static_configs:\n      - targets: ['pod:9556']\n", text)
open(sys.argv[2], "w").write(text)
EOF
        cp "$p/kgym-alerts.yml" "$tmp/"
        if out=$(promtool check config "$tmp/prometheus-k8s-static.yml" 2>&1); then
            ok "promtool check config prometheus-k8s.yml (this promtool lacks kubernetes_sd: checked with a static target)"
        else fail "promtool check config prometheus-k8s.yml"; echo "$out"; fi
    else
        fail "promtool check config prometheus-k8s.yml"; echo "$out"
    fi
    if out=$(promtool check rules "$p/kgym-alerts.yml" 2>&1); then ok "promtool check rules: $(echo "$out" | grep -o '[0-9]* rules found')"
    else fail "promtool check rules"; echo "$out"; fi
    if out=$(cd "$p" && promtool test rules kgym-alerts.test.yml 2>&1); then ok "promtool test rules kgym-alerts.test.yml"
    else fail "promtool test rules"; echo "$out"; fi
    # Every alert in the rules has at least one test case.
    local alert
    for alert in $(sed -n 's/^ *- alert: //p' "$p/kgym-alerts.yml"); do
        grep -q "alertname: $alert\$" "$p/kgym-alerts.test.yml" || fail "alert $alert has no test in kgym-alerts.test.yml"
    done
    # Every metric the rules use is one kgym exports (docs/metrics.md lists them).
    local metric
    for metric in $(grep -o 'kgym_[a-z_]*' "$p/kgym-alerts.yml" | sed 's/_bucket$//' | sort -u); do
        grep -q "\`$metric\`" "$src/docs/metrics.md" || fail "rules use $metric, which docs/metrics.md does not list"
    done
}

# ---------------------------------------------------------------------------
# meson install into a scratch root: binaries, units, the docs they point at,
# man pages, bash completion and the examples.
part_install() {
    local dest=$tmp/dest prefix
    if ! meson install -C "$build" --destdir "$dest" --quiet > "$tmp/install.log" 2>&1; then
        fail "meson install --destdir"; tail -20 "$tmp/install.log"; return
    fi
    prefix=$(meson introspect "$build" --buildoptions \
             | python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')
    local root=$dest$prefix
    say "installed under $dest (prefix $prefix)"
    local f missing=0
    for f in bin/kgym bin/kgym-broker bin/kgym-worker libexec/kgym-runner; do
        [ -x "$root/$f" ] || { fail "not installed: $prefix/$f"; missing=1; }
    done
    [ $missing = 0 ] && ok "binaries and the runner installed"

    # Units: every placeholder filled, ExecStart= and Documentation= name installed files.
    local units=() unit target doc bad
    mapfile -t units < <(find "$dest" -path '*/systemd/system/*' -type f | sort)
    [ ${#units[@]} = 4 ] || fail "${#units[@]} units installed, want 4: ${units[*]}"
    for unit in "${units[@]}"; do
        bad=
        grep -q '@[A-Z_]*@' "$unit" && bad+=" unfilled @placeholders@;"
        target=$(sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' "$unit")
        [ -z "$target" ] || [ -x "$dest$target" ] || bad+=" ExecStart $target not installed;"
        for doc in $(sed -n 's/^Documentation=//p' "$unit"); do
            case $doc in
                file://*) [ -f "$dest${doc#file://}" ] || bad+=" $doc not installed;" ;;
                man:*)    f=${doc#man:}; f="${f%%(*}.${f##*(}"; f=${f%)}
                          [ -f "$root/share/man/man${f##*.}/$f" ] || bad+=" $doc not installed;" ;;
                *)        bad+=" $doc is neither file:// nor man:;" ;;
            esac
        done
        [ -n "$(sed -n 's/^Documentation=//p' "$unit")" ] || bad+=" no Documentation=;"
        if [ -z "$bad" ]; then ok "$(basename "$unit"): ExecStart= and Documentation= are installed files"
        else fail "$(basename "$unit"):$bad"; fi
    done

    # Man pages: each lists every option its program's --help gives.
    local prog page opts
    for prog in kgym kgym-broker kgym-worker; do
        page=$root/share/man/man1/$prog.1
        [ -f "$page" ] || { fail "no man page $prog.1"; continue; }
        opts=$("$root/bin/$prog" --help 2>&1 | grep -o -- '--[a-z][a-z0-9-]*' | sort -u)
        bad=
        for f in $opts; do
            sed 's/\\-/-/g; s/\\f[BIRP]//g' "$page" | grep -q -- "$f" || bad+=" $f"
        done
        if [ -z "$bad" ] && [ -n "$opts" ] && grep -q "^$prog \\\\- " "$page"; then
            ok "man page $prog.1: $(echo "$opts" | wc -w) options, as --help says"
        else fail "man page $prog.1 lacks:${bad:- its NAME line}"; fi
    done

    # Completion, against the installed binaries.
    local comp=$root/share/bash-completion/completions
    if [ -f "$comp/kgym" ] && [ -L "$comp/kgym-worker" ] && [ -L "$comp/kgym-broker" ]; then
        PATH=$root/bin:$PATH bash "$src/tests/deploy/complete.sh" "$comp/kgym" \
            && ok "bash completion: subcommands, options and their values" || fail "bash completion"
    else
        fail "bash completion not installed in $comp (kgym, kgym-broker, kgym-worker)"
    fi

    # Examples: every bundled task and candidate, and one graded from there.
    local want got
    want=$(cd "$src/examples" && find . -type f \( -name '*.json' -o -name '*.c' -o -name '*.cu' \) | sort | md5sum)
    got=$(cd "$root/share/kgym/examples" 2>/dev/null && find . -type f \( -name '*.json' -o -name '*.c' -o -name '*.cu' \) | sort | md5sum)
    [ "$want" = "$got" ] && ok "examples installed in $prefix/share/kgym/examples" \
        || fail "$prefix/share/kgym/examples differs from examples/"
    local task=$root/share/kgym/examples/cpu/rmsnorm_f32
    if KGYM_CACHE_DIR=$tmp/cache "$root/bin/kgym" eval "$task/task.json" "$task/candidates/naive.json" \
         "$task/candidates/tail_bug.json" > "$tmp/eval.jsonl" 2> "$tmp/eval.err" \
       && [ "$(python3 -c 'import json,sys; print(" ".join(json.loads(l)["status"] for l in open(sys.argv[1])))' "$tmp/eval.jsonl")" = "ok incorrect" ]; then
        ok "the installed kgym grades an installed example (naive ok, tail_bug incorrect)"
    else
        fail "grading an installed example"; cat "$tmp/eval.jsonl" "$tmp/eval.err" | tail -5
    fi
}

# ---------------------------------------------------------------------------
# podman as the image tests use it, storage under $1 (graph root) and $2 (run
# root): sets pm (the command), run (`run` and its options) and worker_sec
# (the worker's Kubernetes security context as podman options). runc where
# there is one: crun refuses hosts with cgroup v1 and v2 controllers mixed.
# Limits below this host's hard ones (podman's defaults may be above them).
podman_setup() {
    pm=(podman --root "$1" --runroot "$2")
    command -v runc >/dev/null && pm+=(--runtime runc)
    local nofile nproc cap manifest=$deploy/k8s/base/worker-deployment.yaml
    nofile=$(ulimit -Hn); { [ "$nofile" = unlimited ] || [ "$nofile" -gt 65536 ]; } && nofile=65536
    nproc=$(ulimit -Hu); { [ "$nproc" = unlimited ] || [ "$nproc" -gt 16384 ]; } && nproc=16384
    limits=(--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc")
    run=(run --rm --pull=never "${limits[@]}")
    worker_sec=(--cap-drop ALL)
    for cap in $(sed -n 's/^ *add: \[\(.*\)\]$/\1/p' "$manifest" | tr -d '" ' | tr ',' ' '); do
        worker_sec+=(--cap-add "$cap")
    done
    grep -q 'type: Unconfined' "$manifest" && worker_sec+=(--security-opt seccomp=unconfined)
    worker_sec+=(--security-opt no-new-privileges)
}

# kgym demo in image $1 grades every bundled CPU example as expected.
demo_in_image() {
    if "${pm[@]}" "${run[@]}" --network none "${worker_sec[@]}" "$1" kgym demo --timeout 15 \
         > "$tmp/demo.log" 2>&1 \
       && grep -qi "grading the cpu examples" "$tmp/demo.log" \
       && python3 - "$tmp/demo.log" <<'PY'
import re, sys
m = re.search(r"(\d+) candidates graded; (\d+) of (\d+) with an expected status got it", open(sys.argv[1]).read())
print(f"  demo: {m.group(0) if m else 'no summary line'}")
sys.exit(0 if m and int(m.group(1)) >= 20 and m.group(2) == m.group(3) else 1)
PY
    then return 0
    else tail -40 "$tmp/demo.log"; return 1; fi
}

# The image from Debian's packages (deploy/docker/mkimage.sh), run with podman:
# `kgym demo` in it, then a broker and a worker container under the
# Kubernetes manifests' security contexts grading a batch from the host.
part_image() {
    [ "$(id -u)" = 0 ] || skip "not root: mmdebstrap and podman run as root here; the image was not built"
    for tool in mmdebstrap umoci podman; do
        command -v "$tool" >/dev/null || skip "$tool not installed (Debian packages mmdebstrap, umoci, podman): the image was not built"
    done
    local cache=${KGYM_IMAGE_CACHE:-$build/image-cache}
    # podman names an image pulled from a layout after its path: lower case only.
    local oci=/tmp/kgym-image-$$-$RANDOM
    cleanup_steps+=("rm -rf $oci")
    if ! "$deploy/docker/mkimage.sh" --cache "$cache" --tag test "$oci" 2> "$tmp/mkimage.log"; then
        fail "mkimage.sh"; tail -20 "$tmp/mkimage.log"; return
    fi
    say "$(grep -h 'Debian layer from\|image .* in ' "$tmp/mkimage.log" | tr '\n' ' ')"
    local pm run limits worker_sec image
    podman_setup "$tmp/podman/root" "$tmp/podman/run"
    cleanup_steps+=("${pm[*]} rm --all --force; ${pm[*]} system reset --force")
    if ! image=$("${pm[@]}" pull -q "oci:$oci:test" 2> "$tmp/pull.err"); then
        fail "podman pull oci:$oci:test"; cat "$tmp/pull.err"; return
    fi
    say "worker's security context: ${worker_sec[*]}"

    # 1. kgym demo grades every bundled CPU example as expected.
    if demo_in_image "$image"; then ok "kgym demo in the image: every example as expected"
    else fail "kgym demo in the image"; fi

    # 2. The sandbox in the image is as confined as on the host.
    local task=/usr/share/kgym/examples/cpu/rmsnorm_f32
    "${pm[@]}" "${run[@]}" --network none "${worker_sec[@]}" "$image" \
        kgym eval "$task/task.json" "$task/candidates/naive.json" > "$tmp/eval.jsonl" 2> "$tmp/eval.err"
    if python3 - "$tmp/eval.jsonl" <<'PY'
import json, sys
try:
    r = json.loads(open(sys.argv[1]).readline())
except ValueError:
    print("  no result line"); sys.exit(1)
s = r.get("sandbox", {})
print(f"  status {r.get('status')}, sandbox {s}")
uid = s.get("uid")
sys.exit(0 if r.get("status") == "ok" and s.get("netns") and s.get("pidns") and s.get("seccomp")
         and s.get("root") == "empty" and isinstance(uid, int) and uid > 65535 else 1)
PY
    then ok "sandbox in the image: own netns and pid namespace, seccomp, empty root, a uid of its own"
    else fail "sandbox in the image"; tail -5 "$tmp/eval.err"; fi

    # 3. A broker as the manifest runs it (uid 65532, read-only root, no
    #    capabilities, its store on a volume) and a worker container, on the
    #    host's network; a batch from the host's kgym.
    local cport wport store=$tmp/store
    cport=$(free_port); wport=$(free_port)
    mkdir -p "$store" && chown 65532:65532 "$store"
    "${pm[@]}" "${run[@]}" -d --name kgym-test-broker --network host --user 65532:65532 --read-only \
        --cap-drop ALL --security-opt no-new-privileges -v "$store:/var/lib/kgym" "$image" \
        kgym-broker "--clients=tcp://127.0.0.1:$cport" "--workers=tcp://127.0.0.1:$wport" \
        --db=/var/lib/kgym/jobs.db > /dev/null 2> "$tmp/broker.err" \
        || { fail "the broker container did not start"; cat "$tmp/broker.err"; return; }
    "${pm[@]}" "${run[@]}" -d --name kgym-test-worker --network host "${worker_sec[@]}" "$image" \
        kgym-worker "--broker=tcp://127.0.0.1:$wport" --backend=cpu --name=container \
        > /dev/null 2> "$tmp/worker.err" \
        || { fail "the worker container did not start"; cat "$tmp/worker.err"; return; }
    if wait_for 30 bash -c "${pm[*]} logs kgym-test-broker 2>&1 | grep -q ' ready: backend cpu'" \
       && grade_examples "tcp://127.0.0.1:$cport"; then
        ok "broker and worker containers (the manifests' security contexts) graded a batch"
    else
        fail "broker and worker containers"
        "${pm[@]}" logs kgym-test-broker 2>&1 | tail -10; "${pm[@]}" logs kgym-test-worker 2>&1 | tail -10
    fi
    if [ -s "$store/jobs.db" ]; then ok "the broker's job store is on its volume"
    else fail "no jobs.db on the broker's volume"; fi
    "${pm[@]}" stop --time 30 kgym-test-worker kgym-test-broker > /dev/null 2>&1
}

# ---------------------------------------------------------------------------
# deploy/docker/Dockerfile built with podman and run. No registry is reached:
# its base, debian:<release>-slim, is stood in for by a minimal Debian root
# mmdebstrap lays from the host's apt sources (as the official one is made);
# its RUN steps fetch their packages from those sources. The stand-in's tar
# is kept in the image cache; podman's storage is not (an unpacked image
# holds executables named kgym, which a `find BUILD -name kgym` would meet).
part_dockerfile() {
    [ "$(id -u)" = 0 ] || skip "not root: podman builds as root here; the Dockerfile was not built"
    for tool in mmdebstrap podman; do
        command -v "$tool" >/dev/null || skip "$tool not installed (Debian packages mmdebstrap, podman): the Dockerfile was not built"
    done
    # shellcheck disable=SC1091
    . /etc/os-release
    [ "${ID:-}" = debian ] || skip "not Debian: no stand-in for debian:*-slim here"
    local cache=${KGYM_IMAGE_CACHE:-$build/image-cache} suite=$VERSION_CODENAME
    local pm run limits worker_sec base slim started=$SECONDS sources=()
    podman_setup "$tmp/podman/root" "$tmp/podman/run"
    cleanup_steps+=("${pm[*]} rm --all --force; ${pm[*]} system reset --force")
    [ -f /etc/apt/sources.list.d/debian.sources ] && sources=(/etc/apt/sources.list.d/debian.sources)
    base=docker.io/library/debian:$suite-slim
    slim=$cache/slim-$suite-$(cat "${sources[@]}" /dev/null | sha256sum | cut -c1-12).tar
    if [ ! -s "$slim" ]; then
        mkdir -p "$cache"
        mmdebstrap --variant=minbase "$suite" "$tmp/slim.tar" "${sources[@]}" > "$tmp/mmdebstrap.log" 2>&1 \
            || { fail "a stand-in for $base"; tail -10 "$tmp/mmdebstrap.log"; return; }
        find "$cache" -maxdepth 1 -name "slim-$suite-*.tar" -delete
        mv "$tmp/slim.tar" "$slim"
        say "stood in for $base ($((SECONDS - started)) s)"
    fi
    "${pm[@]}" import "$slim" "$base" > /dev/null 2>&1 || { fail "podman import $slim"; return; }
    local built=$SECONDS
    if "${pm[@]}" build --pull=never --network host "${limits[@]}" \
         -f "$deploy/docker/Dockerfile" --ignorefile "$deploy/docker/Dockerfile.dockerignore" \
         -t kgym:dockerfile-test "$src" > "$tmp/build.log" 2>&1; then
        ok "podman build -f deploy/docker/Dockerfile ($((SECONDS - built)) s)"
    else
        fail "podman build -f deploy/docker/Dockerfile"; tail -30 "$tmp/build.log"; return
    fi
    if demo_in_image localhost/kgym:dockerfile-test; then ok "kgym demo in the Dockerfile's image: every example as expected"
    else fail "kgym demo in the Dockerfile's image"; fi
}

# ---------------------------------------------------------------------------
# deploy/grafana: every query names a metric that a real broker and CPU
# worker export (their /metrics pages after a graded batch), with labels they
# carry; promtool parses each query.
part_grafana() {
    local dash=$deploy/grafana/kgym.json
    for b in broker/kgym-broker worker/kgym-worker client/kgym; do
        [ -x "$build/$b" ] || { fail "no $build/$b"; return; }
    done
    "$build/broker/kgym-broker" --clients 'tcp://127.0.0.1:*' --workers 'tcp://127.0.0.1:*' \
        --metrics 127.0.0.1:0 > "$tmp/broker.log" 2>&1 &
    cleanup_steps+=("kill $!")
    wait_for 10 grep -q 'metrics on http' "$tmp/broker.log" || { fail "broker did not start"; cat "$tmp/broker.log"; return; }
    local clients workers bmetrics wmetrics
    clients=$(sed -n 's/.*clients on \(tcp:[^,]*\), workers on \(tcp:[^,]*\).*/\1/p' "$tmp/broker.log")
    workers=$(sed -n 's/.*clients on \(tcp:[^,]*\), workers on \(tcp:[^,]*\).*/\2/p' "$tmp/broker.log")
    bmetrics=$(sed -n 's#.*metrics on \(http://[^ ]*/metrics\).*#\1#p' "$tmp/broker.log" | head -1)
    KGYM_CACHE_DIR=$tmp/cache "$build/worker/kgym-worker" --broker "$workers" --backend cpu --name grafana \
        --metrics 127.0.0.1:0 > "$tmp/worker.log" 2>&1 &
    cleanup_steps+=("kill $!")
    wait_for 10 grep -q 'metrics on http' "$tmp/worker.log" || { fail "worker did not start"; cat "$tmp/worker.log"; return; }
    wmetrics=$(sed -n 's#.*metrics on \(http://[^ ]*/metrics\).*#\1#p' "$tmp/worker.log" | head -1)
    grade_examples "$clients" > /dev/null || fail "grading a batch before the scrape"
    local url n=0
    for url in "$bmetrics" "$wmetrics"; do
        n=$((n + 1))
        /usr/bin/python3 -c "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())" \
            "$url" > "$tmp/page$n.txt" || { fail "scrape $url"; return; }
    done
    say "scraped $bmetrics and $wmetrics"
    if KGYM_DASHBOARD_RULES=$tmp/dashboard-rules.yml python3 "$src/tests/deploy/check_dashboard.py" "$dash" \
         "$deploy/prometheus/kgym-alerts.yml" "$src/common/common_metrics_kgym.c" "$tmp/page1.txt" "$tmp/page2.txt"; then
        ok "grafana/kgym.json: every query names metrics and labels the broker and worker export"
    else fail "grafana/kgym.json queries"; fi
    if command -v promtool >/dev/null; then
        local out
        if out=$(promtool check rules "$tmp/dashboard-rules.yml" 2>&1); then ok "promtool parses every dashboard query"
        else fail "promtool on the dashboard's queries"; echo "$out" | tail -10; fi
    else
        say "promtool not installed: the queries' syntax was not checked"
    fi
    # The check catches a wrong metric and a wrong label.
    sed 's/kgym_queue_depth)/kgym_queue_depths)/; s/by (reason)/by (reasons)/' "$dash" > "$tmp/broken.json"
    if python3 "$src/tests/deploy/check_dashboard.py" "$tmp/broken.json" "$deploy/prometheus/kgym-alerts.yml" \
         "$src/common/common_metrics_kgym.c" "$tmp/page1.txt" "$tmp/page2.txt" > "$tmp/broken.out" 2>&1; then
        fail "the dashboard check passed a dashboard with a wrong metric and label"
    elif grep -q "kgym_queue_depths" "$tmp/broken.out" && grep -q "'reasons'" "$tmp/broken.out"; then
        ok "the check refuses a misnamed metric and label"
    else fail "the check missed the misnamed metric or label"; cat "$tmp/broken.out"; fi
}

# ---------------------------------------------------------------------------
# Slurm: a throwaway cluster of two nodes (two slurmd) on this host.
slurm_up() {
    for tool in munged slurmctld slurmd sbatch squeue scancel scontrol; do
        command -v "$tool" >/dev/null || skip "$tool not installed (Debian packages munge, slurm-wlm): the Slurm scripts were not run"
    done
    [ "$(id -u)" = 0 ] || skip "not root: cannot start slurmd here; the Slurm scripts were not run"
    local T=$tmp/slurm host
    host=$(hostname -s)
    mkdir -p "$T"/{state,spool/"$host",spool/"$host-b",gpu,run,bin}
    chmod 755 "$T"
    dd if=/dev/urandom of="$T/munge.key" bs=1024 count=1 2>/dev/null
    chmod 400 "$T/munge.key"
    munged --socket="$T/munge.sock" --key-file="$T/munge.key" --pid-file="$T/munged.pid" \
        --log-file="$T/munged.log" --seed-file="$T/munge.seed" --force > "$T/munged.out" 2>&1 \
        || { cat "$T/munged.out"; skip "munged would not start here: the Slurm scripts were not run"; }
    cleanup_steps+=("kill \$(cat $T/munged.pid)")
    # Fake GPUs: character devices Slurm can bind one per task (it sets
    # CUDA_VISIBLE_DEVICES from them); the workers use the CPU backend.
    if ! { mknod "$T/gpu/nvidia0" c 1 3 && mknod "$T/gpu/nvidia1" c 1 3; } 2>/dev/null; then
        skip "cannot make device nodes for fake GPUs here: the Slurm scripts were not run"
    fi
    local ctld_port d1 d2
    ctld_port=$(free_port); d1=$(free_port); d2=$(free_port)
    cat > "$T/slurm.conf" <<EOF
ClusterName=kgymtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$T/munge.sock
CredType=cred/munge
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool/%n
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd-%n.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
GresTypes=gpu
SlurmdParameters=config_overrides
KillWait=60
NodeName=$host NodeAddr=127.0.0.1 Port=$d1 CPUs=2 RealMemory=2000 Gres=gpu:2 State=UNKNOWN
NodeName=$host-b NodeAddr=127.0.0.1 Port=$d2 CPUs=2 RealMemory=2000 Gres=gpu:2 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
    cat > "$T/gres.conf" <<EOF
AutoDetect=off
NodeName=$host,$host-b Name=gpu File=$T/gpu/nvidia[0-1]
EOF
    export SLURM_CONF=$T/slurm.conf
    slurmctld -f "$SLURM_CONF" > "$T/ctld.out" 2>&1 || { cat "$T/ctld.out"; skip "slurmctld would not start here"; }
    cleanup_steps+=("kill \$(cat $T/slurmctld.pid)")
    for node in "$host" "$host-b"; do
        slurmd -N "$node" -f "$SLURM_CONF" > "$T/slurmd-$node.out" 2>&1 \
            || { cat "$T/slurmd-$node.out"; skip "slurmd would not start here"; }
        cleanup_steps+=("kill \$(cat $T/slurmd-$node.pid)")
    done
    if ! wait_for 30 bash -c "[ \"\$(sinfo -h -N -t idle -o %N | wc -l)\" = 2 ]"; then
        sinfo -N; tail -5 "$T/slurmctld.log" "$T"/slurmd-*.log
        skip "the Slurm nodes did not come up idle: the Slurm scripts were not run"
    fi
    ln -s "$build/broker/kgym-broker" "$build/worker/kgym-worker" "$T/bin/"
    say "Slurm up: $(sinfo -h -N -o '%N %t' | tr '\n' ' ')(slurm $(sinfo --version | cut -d' ' -f2))"
}

# Submit one script (sbatch args in "$@"), grade a batch through it, drain it.
slurm_run() {
    local label=$1; shift
    local T=$tmp/slurm job state mport
    rm -f "$T"/run/*
    mport=$(free_port)
    # The nodes' own name where it resolves (as on a real cluster), else loopback.
    local broker_host=
    getent hosts "$(hostname -f)" >/dev/null 2>&1 || broker_host=127.0.0.1
    # The store: by default node-local ($TMPDIR, a directory standing for a
    # node's disk), saved to the submit directory at the end; the het job
    # gives KGYM_STATE_DIR (the override).
    local store=("KGYM_STATE_DIR=$T/kstate-$label")
    [ "$label" = sbatch ] && { mkdir -p "$T/local"; store=("TMPDIR=$T/local"); }
    job=$(cd "$T/run" && env "${store[@]}" KGYM_BROKER_HOST="$broker_host" KGYM_BIN="$T/bin" KGYM_BACKEND=cpu \
          KGYM_CLIENT_PORT="$(free_port)" KGYM_WORKER_PORT="$(free_port)" KGYM_CACHE_DIR="$T/cache" \
          KGYM_METRICS_PORT=$mport KGYM_WORKER_METRICS_PORT=0 sbatch --parsable --time=10 "$@")
    [ -n "$job" ] || { fail "$label: sbatch refused the script"; return; }
    say "$label: job $job"
    if ! wait_for 60 test -s "$T/run/kgym-$job.env"; then
        fail "$label: the broker's endpoints never appeared"; squeue; cat "$T/run/kgym-$job.log"; scancel "$job"; return
    fi
    # shellcheck disable=SC1090
    . "$T/run/kgym-$job.env"
    # Both workers registered before the batch (one per task).
    wait_for 30 bash -c "[ \$(grep -c ' ready: backend cpu' '$T/run/kgym-$job.log') -ge 2 ]" \
        || { fail "$label: workers did not register"; cat "$T/run/kgym-$job.log"; scancel "$job"; return; }
    if grade_examples "$KGYM_CLIENTS"; then ok "$label: a batch graded through the Slurm job"
    else fail "$label: grading through the Slurm job"; fi
    # The broker's /metrics saw the batch.
    if /usr/bin/python3 -c "import urllib.request,sys; t=urllib.request.urlopen('http://127.0.0.1:$mport/metrics',timeout=5).read().decode(); sys.exit(0 if 'kgym_jobs_completed_total{status=' in t else 1)"; then
        ok "$label: the broker's /metrics counts the batch"
    else fail "$label: no completed jobs on the broker's /metrics (port $mport)"; fi
    # CUDA_VISIBLE_DEVICES: one fake GPU per task.
    local gpus
    gpus=$(for p in $(pgrep -f "kgym-worker --broker $KGYM_WORKERS"); do
               tr '\0' '\n' < "/proc/$p/environ" | sed -n 's/^CUDA_VISIBLE_DEVICES=//p'; done | sort | tr '\n' ' ')
    say "$label: workers' CUDA_VISIBLE_DEVICES: $gpus"
    [ "$label" = sbatch ] && slurm_scale "$job"
    scancel --signal=TERM --batch "$job"
    if wait_for 90 bash -c "! squeue -h -j $job | grep -q ."; then
        state=$(scontrol show job "$job" 2>/dev/null | sed -n 's/.*JobState=\([A-Z]*\).*/\1/p' | head -1)
        local drained want_drained=2
        [ "$label" = sbatch ] && want_drained=3        # with the scaled-down one
        drained=$(grep -c 'left: drained' "$T/run/kgym-$job.log")
        if [ "$drained" -ge "$want_drained" ] && grep -q 'broker stopped (exit 0)' "$T/run/kgym-$job.log" \
           && [ "$state" = COMPLETED ]; then
            ok "$label: SIGTERM drained $drained workers, then the broker stopped; job $state"
        else
            fail "$label: drain (drained $drained, job ${state:-?})"; tail -15 "$T/run/kgym-$job.log"
        fi
    else
        fail "$label: the job did not end after SIGTERM"; scancel "$job"; tail -15 "$T/run/kgym-$job.log"
    fi
    if [ "$label" = sbatch ]; then
        if grep -q "job store: $T/local/kgym-$job/jobs.db" "$T/run/kgym-$job.log" \
           && [ "$(head -c 15 "$T/run/kgym-state/jobs.db" 2>/dev/null)" = "SQLite format 3" ] \
           && [ ! -e "$T/local/kgym-$job" ]; then
            ok "$label: the store ran on node-local disk and was saved to the submit directory"
        else
            fail "$label: node-local store"; grep 'job store' "$T/run/kgym-$job.log"; ls -la "$T/local" "$T/run/kgym-state"
        fi
    elif grep -q "job store: $T/kstate-$label/jobs.db\$" "$T/run/kgym-$job.log"; then
        ok "$label: KGYM_STATE_DIR placed the store, nothing saved elsewhere"
    else
        fail "$label: KGYM_STATE_DIR not used"; grep 'job store' "$T/run/kgym-$job.log"
    fi
}

# Scale up and down on Slurm: a workers-only job (KGYM_BROKER) joins the running
# broker of job $1, then drains away while that job goes on.
slurm_scale() {
    local T=$tmp/slurm main=$1 extra before
    before=$(grep -c ' ready: backend cpu' "$T/run/kgym-$main.log")
    extra=$(cd "$T/run" && KGYM_BIN=$T/bin KGYM_BACKEND=cpu KGYM_BROKER=$KGYM_WORKERS \
            KGYM_WORKER_METRICS_PORT=0 sbatch --parsable --time=10 --nodes=1 --ntasks-per-node=1 --cpus-per-task=1 \
            --output="$T/run/extra-%j.log" "$deploy/slurm/kgym.sbatch")
    if wait_for 60 bash -c "[ \$(grep -c ' ready: backend cpu' '$T/run/kgym-$main.log') -gt $before ]"; then
        ok "scale up: a workers-only job ($extra) joined the running broker"
    else
        fail "scale up: the workers-only job's worker never registered"; cat "$T/run/extra-$extra.log"
    fi
    grade_examples "$KGYM_CLIENTS" > /dev/null || fail "grading with the extra worker"
    scancel --signal=TERM --batch "$extra"
    if wait_for 60 bash -c "! squeue -h -j $extra | grep -q ." \
       && [ "$(grep -c 'left: drained' "$T/run/kgym-$main.log")" -ge 1 ] && squeue -h -j "$main" | grep -q ' R '; then
        ok "scale down: the extra worker drained and left; job $main runs on"
    else
        fail "scale down"; tail -5 "$T/run/extra-$extra.log" "$T/run/kgym-$main.log"
    fi
}

part_slurm() {
    # The het-job script's body must stay the plain script's.
    if diff <(sed -n '/^set -uo pipefail/,$p' "$deploy/slurm/kgym.sbatch") \
            <(sed -n '/^set -uo pipefail/,$p' "$deploy/slurm/kgym-hetjob.sbatch") > "$tmp/het.diff"; then
        ok "kgym-hetjob.sbatch has kgym.sbatch's body"
    else fail "kgym-hetjob.sbatch's body differs from kgym.sbatch's"; cat "$tmp/het.diff"; fi
    bash -n "$deploy/slurm/kgym.sbatch" && bash -n "$deploy/slurm/kgym-hetjob.sbatch" || fail "bash -n"
    for b in broker/kgym-broker worker/kgym-worker client/kgym; do
        [ -x "$build/$b" ] || { fail "no $build/$b"; finish; }
    done
    slurm_up
    # Two nodes, one worker (one fake GPU) on each; the broker on the first.
    slurm_run sbatch --nodes=2 --ntasks-per-node=1 --cpus-per-task=1 "$deploy/slurm/kgym.sbatch"
    # Heterogeneous: the broker's component on one node, two workers on the other.
    slurm_run hetjob --cpus-per-task=1 --mem=100 : --nodes=1 --ntasks-per-node=2 --cpus-per-task=1 --mem=100 \
        "$deploy/slurm/kgym-hetjob.sbatch"
}

case $part in
    systemd)    part_systemd ;;
    k8s)        part_k8s ;;
    prometheus) part_prometheus ;;
    slurm)      part_slurm ;;
    install)    part_install ;;
    image)      part_image ;;
    grafana)    part_grafana ;;
    dockerfile) part_dockerfile ;;
    *)          echo "unknown part '$part'" >&2; exit 2 ;;
esac
finish
