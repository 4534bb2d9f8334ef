#!/bin/sh
# runtime-packages.sh ROOT - the packages an image needs for the programs
# installed under ROOT (a `meson install --destdir ROOT`): every shared library
# they load (ldd), mapped to the package that holds it here (dpkg -S), one
# package a line. Run it where kgym was built (a Dockerfile's build stage,
# mkimage.sh's host): the names are that release's, so the image's release
# must be the same. libcuda.so.1 is left out: the NVIDIA driver's, mounted
# into GPU containers by the NVIDIA container toolkit.
set -eu
root=${1:?usage: runtime-packages.sh ROOT}
tab=$(printf '\t')

libs=$(find "$root" -type f -perm -u+x | while IFS= read -r f; do
    # Not ELF (a script, an example): nothing to load.
    [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = "177ELF" ] || continue
    ldd "$f" | sed -n "s/^[ $tab]*\([^ ]*\) => \(.*\) (0x[0-9a-f]*)\$/\1 \2/p; s/^[ $tab]*\([^ ]*\) => not found\$/\1 NOTFOUND/p"
done | sort -u)

# Every name dpkg may know each library by (merged /usr: with or without the
# /usr prefix, or its target's), asked in one dpkg-query call.
names=$(echo "$libs" | while read -r name path; do
    if [ -z "$name" ] || [ "$path" = NOTFOUND ]; then continue; fi
    for p in "$path" "$(readlink -f "$path")"; do printf '%s\n%s\n%s\n' "$p" "/usr$p" "${p#/usr}"; done
done | sort -u)
# "package[:arch]: path" lines.
# shellcheck disable=SC2086  # one argument per path (library paths have no spaces)
owners=$(dpkg-query -S $names 2>/dev/null || true)

pkgs=
while read -r name path; do
    [ -n "$name" ] || continue
    if [ "$path" = NOTFOUND ]; then
        [ "$name" = libcuda.so.1 ] && continue
        echo "runtime-packages: $name is needed but not found here" >&2; exit 1
    fi
    pkg=
    for p in "$path" "$(readlink -f "$path")"; do
        for q in "$p" "/usr$p" "${p#/usr}"; do
            [ -z "$pkg" ] || break
            pkg=$(echo "$owners" | awk -v q="$q" '{ p = $NF } p == q { sub(/[:,].*/, "", $1); print $1; exit }')
        done
    done
    [ -n "$pkg" ] || { echo "runtime-packages: no package holds $path ($name)" >&2; exit 1; }
    pkgs="$pkgs$pkg
"
done <<END
$libs
END
printf '%s' "$pkgs" | sort -u
