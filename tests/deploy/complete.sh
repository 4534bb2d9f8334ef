#!/usr/bin/env bash
# Drives the bash completion as readline would: tests/deploy/complete.sh FILE
# with the kgym binaries first in PATH. Exit 1 and the differences on a miss.
set -u
[ -f /usr/share/bash-completion/bash_completion ] && source /usr/share/bash-completion/bash_completion
source "${1:?usage: complete.sh COMPLETION_FILE}"
bad=0
# The candidates offered for the line $1 (its last word is being completed).
offered() {
    COMP_LINE=$1; COMP_POINT=${#1}
    read -ra COMP_WORDS <<< "$1"
    [[ $1 == *" " ]] && COMP_WORDS+=("")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=()
    _kgym_complete
    printf '%s\n' "${COMPREPLY[@]}" | sort -u | tr '\n' ' '
}
# $1 the line; the rest: words that must be offered.
expect() {
    local line=$1 got w; shift
    got=" $(offered "$line")"
    for w in "$@"; do
        [[ $got == *" $w "* ]] || { echo "  '$line<TAB>': no '$w' in:$got"; bad=1; }
    done
}
# Every subcommand kgym --help lists, and nothing else for a prefix.
mapfile -t subs < <(kgym --help 2>&1 | sed -n 's/^  \([a-z][a-z-]*\)\( .*\)\{0,1\}$/\1/p' | sort -u)
[ ${#subs[@]} -ge 10 ] || { echo "  only ${#subs[@]} subcommands in kgym --help"; bad=1; }
expect "kgym " "${subs[@]}"
[ "$(offered "kgym sub")" = "submit " ] || { echo "  'kgym sub<TAB>': '$(offered "kgym sub")'"; bad=1; }
expect "kgym submit --" --broker --batch --cache --timeout --group
expect "kgym submit --cache " use refresh bypass
expect "kgym eval --" --timeout --seed --trials
expect "kgym cache " stats clear
expect "kgym-worker --" --broker --backend --metrics --cache
expect "kgym-worker --backend " cpu cuda
expect "kgym-broker --" --clients --workers --db --metrics
expect "kgym-broker --sync " normal full
# Options of one subcommand only: submit's --batch is not eval's.
[[ " $(offered "kgym eval --")" == *" --batch "* ]] && { echo "  'kgym eval --<TAB>' offers submit's --batch"; bad=1; }
# File arguments complete file names.
dir=$(mktemp -d); touch "$dir/task.json"
expect "kgym eval $dir/ta" "$dir/task.json"
expect "kgym submit --batch $dir/" "$dir/task.json"
rm -rf "$dir"
exit $bad
