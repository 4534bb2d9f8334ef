/*  kgym_cache - `kgym cache stats|clear [--cache PATH]`: the local compile cache.

    stats prints {"path", "entries", "bytes"} as one JSON line; clear
    empties it. Exit 0, 1 when the cache cannot be opened or cleared, 2 on
    a usage error.
*/
#ifndef KGYM_CACHE_H
#define KGYM_CACHE_H

//  argv [0] is the subcommand's name ("cache"). Returns the exit status.
int kgym_cache_main (int argc, char **argv);

#endif
