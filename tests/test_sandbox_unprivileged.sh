#!/bin/sh
# The sandbox's tests again as an unprivileged worker would run them: uid and
# gid 65534, no groups, so every runner takes the user-namespace path (no
# cgroups, rlimits only; docs/sandbox.md "root versus not root").
#   test_sandbox_unprivileged.sh TEST_BINARY...
# Exits 77 (skip) when not root or without setpriv: it needs root to drop.
[ "$(id -u)" = 0 ] || { echo "not root: nothing to drop from"; exit 77; }
command -v setpriv >/dev/null || { echo "setpriv missing"; exit 77; }
status=0
for test in "$@"; do
    echo "== $test as 65534"
    setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=/tmp "$test" || status=1
done
exit $status
