#!/usr/bin/env bash
# kgym's one entry point on a fresh Debian 12 / Ubuntu machine.
#   ./build.sh demo    install what is missing, build, run `kgym demo`
#                      (the bundled examples on the local GPU when there is one, else the CPU backend)
#   ./build.sh test    install what is missing, build, run the test suites
#   ./build.sh build   install what is missing and build only
# Build directory: $KGYM_BUILD (default ./build).
set -euo pipefail
cd "$(dirname "$0")"
action=${1:-demo}
build=${KGYM_BUILD:-build}

need_pkgs() {
    local missing=()
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "build.sh: installing ${missing[*]}" >&2
    installed=1
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq >/dev/null || true
    $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

pkgs=(gcc pkg-config meson ninja-build python3 libczmq-dev libzmq3-dev libsqlite3-dev
      libsodium-dev libjansson-dev libffi-dev libseccomp-dev libmicrohttpd-dev check python3-zmq python3-msgpack
      help2man)
# msgpack-c's dev package was renamed on newer releases.
if apt-cache show libmsgpack-c-dev >/dev/null 2>&1; then pkgs+=(libmsgpack-c-dev); else pkgs+=(libmsgpack-dev); fi
# The 'deploy' test suite: promtool (prometheus), a throwaway Slurm (slurm-wlm, munge),
# systemd-analyze (systemd), setpriv (util-linux), node and npm for the k8s checks,
# bash-completion for the installed completion, mmdebstrap, umoci, podman and runc
# for the image built from Debian's packages (deploy/docker/mkimage.sh).
if [ "$action" = test ]; then
    pkgs+=(prometheus slurm-wlm munge systemd util-linux bash-completion mmdebstrap umoci podman runc)
    # The python backend's tests: Debian's torch (CPU only), and what a load_inline candidate's
    # C++ extension builds with (torch's headers, pybind11's, a C++ compiler).
    pkgs+=(python3-torch libtorch-dev pybind11-dev g++)
    # The Python client's install test: pip install ./python into a venv.
    pkgs+=(python3-venv python3-pip python3-setuptools)
    command -v node >/dev/null && command -v npm >/dev/null || pkgs+=(nodejs npm)
fi
installed=0
need_pkgs "${pkgs[@]}"

if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" --buildtype=debugoptimized >/dev/null
elif [ $installed = 1 ]; then
    # What meson found at setup (torch for the pool's test, say) may have just arrived.
    meson setup --reconfigure "$build" >/dev/null
fi
ninja -C "$build" >/dev/null

case "$action" in
    demo)  exec "$build/client/kgym" demo ;;
    test)  meson test -C "$build" --print-errorlogs --num-processes 2 ;;
    build) ;;
    *)     echo "usage: ./build.sh demo|test|build" >&2; exit 2 ;;
esac
