#!/usr/bin/env bash
# mkimage.sh - the kgym image (broker, kgym CLI, CPU workers: what
# deploy/docker/Dockerfile makes) from Debian's packages alone, no container
# registry: mmdebstrap lays a minimal Debian root with the libraries kgym
# links and the C compiler CPU workers use, kgym goes in with
# `meson install --destdir`, and umoci writes both as an OCI image layout.
#
#   deploy/docker/mkimage.sh [--cache DIR] [--tag TAG] OUT
#   podman pull oci:OUT:TAG       # or: skopeo copy oci:OUT:TAG docker-daemon:kgym:TAG
#   podman run --rm IMAGE         # kgym demo
#
# OUT          the OCI layout to write (replaced); TAG defaults to kgym's version
# --cache DIR  keeps the Debian layer between runs, keyed by everything that
#              makes it (release, packages, sources, this recipe); default
#              $KGYM_IMAGE_CACHE, else build/image-cache in the tree. Delete it
#              to take Debian's newest updates.
# Environment: KGYM_IMAGE_MIRROR  apt sources for the image (a URL, a
#              sources file, or "deb ..." lines; default the host's Debian
#              sources, else mmdebstrap's default mirror).
#
# Runs as root on Debian, whose release the image gets (the binaries are
# built here, against this release's libraries). Needs mmdebstrap, umoci,
# meson and ninja and kgym's build dependencies (build.sh installs them).
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
cache=${KGYM_IMAGE_CACHE:-$src/build/image-cache}
tag=
out=
while [ $# -gt 0 ]; do
    case $1 in
        --cache) cache=${2:?--cache DIR}; shift 2 ;;
        --tag)   tag=${2:?--tag TAG}; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        -*)      echo "mkimage: unknown option $1" >&2; exit 2 ;;
        *)       [ -z "$out" ] || { echo "mkimage: one OUT only" >&2; exit 2; }; out=$1; shift ;;
    esac
done
[ -n "$out" ] || { echo "usage: mkimage.sh [--cache DIR] [--tag TAG] OUT" >&2; exit 2; }
log() { echo "mkimage: $*" >&2; }
die() { log "$*"; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (mmdebstrap lays the root as root)"
for tool in mmdebstrap umoci meson ninja dpkg-query; do
    command -v "$tool" >/dev/null || die "$tool not installed"
done
# shellcheck disable=SC1091
. /etc/os-release
if [ "${ID:-}" != debian ] || [ -z "${VERSION_CODENAME:-}" ]; then
    die "build on Debian: the image gets this host's release and its libraries (this is ${PRETTY_NAME:-unknown})"
fi
suite=$VERSION_CODENAME
version=$(meson introspect --projectinfo "$src/meson.build" \
          | python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])')
tag=${tag:-$version}

scratch=$(mktemp -d /tmp/kgym-mkimage.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
started=$SECONDS

# 1. kgym, built for /usr without CUDA (the GPU image is Dockerfile.cuda), as
#    the Dockerfile builds it.
log "building kgym $version (CPU backend, prefix /usr)"
meson setup "$scratch/build" "$src" --prefix=/usr --buildtype=release -Dtests=false \
    -Dcuda=disabled -Dman=disabled > "$scratch/setup.log" 2>&1 \
    || { cat "$scratch/setup.log" >&2; die "meson setup failed"; }
ninja -C "$scratch/build" > "$scratch/ninja.log" 2>&1 || { tail -30 "$scratch/ninja.log" >&2; die "build failed"; }
mkdir -m 755 "$scratch/root"
meson install -C "$scratch/build" --destdir "$scratch/root" --quiet > "$scratch/install.log" 2>&1 \
    || { cat "$scratch/install.log" >&2; die "meson install failed"; }
built=$SECONDS

# 2. The Debian layer: the libraries kgym loads, and cc for CPU candidates.
packages=$("$src/deploy/docker/runtime-packages.sh" "$scratch/root") || die "cannot list the runtime packages"
packages=$(printf '%s\ngcc\nlibc6-dev\n' "$packages" | sort -u | paste -sd, -)
mirrors=()
if [ -n "${KGYM_IMAGE_MIRROR:-}" ]; then
    mirrors=("$KGYM_IMAGE_MIRROR")
elif [ -f /etc/apt/sources.list.d/debian.sources ]; then
    mirrors=(/etc/apt/sources.list.d/debian.sources)
elif [ -s /etc/apt/sources.list ]; then
    mirrors=(/etc/apt/sources.list)
fi
dpkgopts=('path-exclude=/usr/share/man/*' 'path-exclude=/usr/share/locale/*'
          'path-exclude=/usr/share/doc/*' 'path-include=/usr/share/doc/*/copyright')
recipe="kgym-mkimage base v1
suite=$suite arch=$(dpkg --print-architecture) variant=apt
packages=$packages
dpkg=${dpkgopts[*]}
sources=${mirrors[*]-}
$(for m in "${mirrors[@]}"; do [ -f "$m" ] && cat "$m"; done)"
key=$(printf '%s' "$recipe" | sha256sum | cut -c1-16)
base=$cache/base-$key
if [ -f "$base/index.json" ]; then
    log "Debian layer from the cache ($base)"
else
    log "Debian $suite layer: $packages"
    args=(--variant=apt --include="$packages")
    for o in "${dpkgopts[@]}"; do args+=(--dpkgopt="$o"); done
    mmdebstrap "${args[@]}" "$suite" "$scratch/base.tar" "${mirrors[@]}" > "$scratch/mmdebstrap.log" 2>&1 \
        || { tail -30 "$scratch/mmdebstrap.log" >&2; die "mmdebstrap failed"; }
    mkdir -p "$cache"
    rm -rf "$base.tmp"
    umoci init --layout "$base.tmp"
    umoci new --image "$base.tmp:base"
    umoci raw add-layer --image "$base.tmp:base" --history.created_by "mmdebstrap $suite: $packages" \
        "$scratch/base.tar"
    printf '%s\n' "$recipe" > "$base.tmp/kgym-recipe"
    # One base kept: an older one is from other inputs.
    find "$cache" -maxdepth 1 -name 'base-*' ! -name "base-$key.tmp" -exec rm -rf {} +
    mv "$base.tmp" "$base"
fi
layered=$SECONDS

# 3. kgym on top, and the image's settings.
rm -rf "$out"
mkdir -p "$(dirname "$out")"
cp -a "$base" "$out"
rm -f "$out/kgym-recipe"
umoci insert --image "$out:base" --tag "$tag" --history.created_by "meson install kgym $version" \
    "$scratch/root" /
umoci config --image "$out:$tag" \
    --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --config.cmd kgym --config.cmd demo \
    --config.label org.opencontainers.image.title=kgym \
    --config.label "org.opencontainers.image.version=$version" \
    --config.label "org.opencontainers.image.description=kgym broker, CLI and CPU workers (Debian $suite)"
umoci rm --image "$out:base"
umoci gc --layout "$out"
log "image $out:$tag in $((SECONDS - started)) s (build $((built - started)) s, Debian layer $((layered - built)) s, kgym layer $((SECONDS - layered)) s)"
