/*  kgym_cache - `kgym cache stats|clear [--cache PATH]`: the local compile
    cache (worker_cache) that kgym eval, kgym compile and the workers
    share. With --broker, `kgym cache stats` is the broker's result cache
    instead (client_query).
*/
#include "kgym_cache.h"
#include "worker_cache.h"
#include <czmq.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

int
kgym_cache_main (int argc, char **argv)
{
    static struct option options[] = {
        { "cache", required_argument, 0, 'c' }, { 0, 0, 0, 0 }
    };
    const char *explicit_path = NULL;
    int opt;
    optind = 1;
    while ((opt = getopt_long (argc, argv, "", options, NULL)) != -1) {
        if (opt == 'c')
            explicit_path = optarg;
        else
            return 2;
    }
    const char *action = optind < argc? argv [optind]: "stats";
    char *path = worker_cache_default_path (explicit_path);
    char err [256] = "";
    worker_cache_t *cache = path? worker_cache_new (path, WORKER_CACHE_DEFAULT_MAX, err, sizeof err): NULL;
    if (!cache) {
        fprintf (stderr, "kgym cache: cannot open %s: %s\n", path? path: "(no path)", err);
        free (path);
        return 1;
    }
    int rc = 0;
    if (streq (action, "stats")) {
        uint64_t entries = 0, bytes = 0, hits = 0, misses = 0;
        worker_cache_stats (cache, &entries, &bytes, &hits, &misses);
        printf ("{\"path\":\"%s\",\"entries\":%llu,\"bytes\":%llu}\n", path,
                (unsigned long long) entries, (unsigned long long) bytes);
    }
    else
    if (streq (action, "clear")) {
        rc = worker_cache_clear (cache) == 0? 0: 1;
        if (rc)
            fprintf (stderr, "kgym cache: could not clear %s\n", path);
    }
    else {
        fprintf (stderr, "kgym cache: unknown action '%s' (stats or clear)\n", action);
        rc = 2;
    }
    worker_cache_destroy (&cache);
    free (path);
    return rc;
}

