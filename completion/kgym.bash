# bash completion for kgym, kgym-broker and kgym-worker.
#
# Subcommands, options and option values are read from the programs' own
# --help when a word is completed, so they follow the installed binary:
#   kgym <TAB>                  the subcommands `kgym --help` lists
#   kgym submit --<TAB>         the options `kgym --help` and `kgym submit --help` give it
#   kgym submit --cache <TAB>   the values its help spells a|b|c (use refresh bypass)
#   --batch, --cache PATH, TASK ...: file names
# Installed as bash-completion's completions/kgym (and links for the others).

# The help lines about subcommand $2 of program $1 (all of them when $2 is
# empty): usage lines naming another subcommand, and what follows them, are
# left out.
_kgym_help() {
    { "$1" --help; [ -n "$2" ] && timeout 2 "$1" "$2" --help; } 2>&1 </dev/null |
        awk -v cmd="$2" '
            cmd == "" { print; next }
            match($0, /kgym +[a-z][a-z-]*/) {
                w = substr($0, RSTART, RLENGTH); sub(/^kgym +/, "", w); own = (w == cmd)
            }
            RLENGTH < 0 && /^  [a-z]/ { own = ($1 == cmd) }
            own'
}

# Subcommands: the rows of `kgym --help` that start with a lower-case word.
_kgym_subcommands() {
    "$1" --help 2>&1 </dev/null | sed -n 's/^  \([a-z][a-z-]*\)\( .*\)\{0,1\}$/\1/p' | sort -u
}

# Options in help text on stdin.
_kgym_options() {
    grep -o -- '--[a-z][a-z0-9-]*' | sort -u
}

# What option $1 takes, from help text on stdin: "choice a b c" (spelled
# a|b|c, or listed at the end of its row after a colon), "file" or "value"
# (some other argument), or nothing when it takes none.
_kgym_argument() {
    awk -v opt="$1" '
        {
            for (i = 1; i < NF; i++) {
                w = $i; gsub(/^[[(]+/, "", w); sub(/[=].*$/, "", w)
                if (w != opt) continue
                a = $(i + 1); gsub(/[])]+$/, "", a)
                if (a ~ /^[a-z0-9_-]+(\|[a-z0-9_-]+)+$/) { gsub(/\|/, " ", a); choice = a }
                else if (a ~ /^(FILE|PATH|DIR)(\|-)?$/) file = 1
                else if (a ~ /^[A-Z][A-Z_,]*$/) value = 1
                # An option row whose text ends in a list: "--backend TARGET  what to grade: cpu, cuda".
                if (i == 1 && a ~ /^[A-Z][A-Z_]*$/ && match($0, /: *[a-z0-9_-]+(, *[a-z0-9_-]+)+ *$/)) {
                    l = substr($0, RSTART + 1); gsub(/[ ,]+/, " ", l); sub(/^ /, "", l); sub(/ $/, "", l)
                    listed = l
                }
            }
        }
        END {
            if (choice != "") print "choice " choice
            else if (listed != "") print "choice " listed
            else if (file) print "file"
            else if (value) print "value"
        }'
}

_kgym_complete() {
    local cur prev words cword
    if declare -F _init_completion >/dev/null; then
        _init_completion || return
    else
        cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD - 1]}
        words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD
    fi
    local prog=${words[0]} cmd= i
    # The subcommand: kgym's first word that is not an option.
    if [ "${prog##*/}" = kgym ]; then
        for ((i = 1; i < cword; i++)); do
            case ${words[i]} in -*) ;; *) cmd=${words[i]}; break ;; esac
        done
        if [ -z "$cmd" ] && [[ $cur != -* ]]; then
            mapfile -t COMPREPLY < <(compgen -W "$(_kgym_subcommands "$prog")" -- "$cur")
            return
        fi
    fi
    local help
    help=$(_kgym_help "$prog" "$cmd")
    if [[ $prev == --* ]]; then
        local kind
        kind=$(printf '%s\n' "$help" | _kgym_argument "$prev")
        case $kind in
            choice\ *) mapfile -t COMPREPLY < <(compgen -W "${kind#choice }" -- "$cur"); return ;;
            file) mapfile -t COMPREPLY < <(compgen -f -- "$cur"); compopt -o filenames 2>/dev/null; return ;;
            value) return ;;
        esac
    fi
    if [[ $cur == -* ]]; then
        mapfile -t COMPREPLY < <(compgen -W "$(printf '%s\n' "$help" | _kgym_options)" -- "$cur")
        return
    fi
    # kgym cache stats|clear
    if [ "$cmd" = cache ] && [ "${words[cword - 1]}" = cache ]; then
        mapfile -t COMPREPLY < <(compgen -W "stats clear" -- "$cur")
        return
    fi
    # Anything else is a task, a candidate or another file.
    mapfile -t COMPREPLY < <(compgen -f -- "$cur")
    compopt -o filenames 2>/dev/null
}

complete -F _kgym_complete kgym kgym-broker kgym-worker
