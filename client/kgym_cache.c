/*  kgym_cache - `kgym cache stats|clear [--cache PATH]`: the local compile
    cache (worker_cache) that kgym eval, kgym compile and the workers
    share. With --broker, `kgym cache stats` is the broker's result cache
    instead (client_query).
*/
#include "kgym_cache.h"
#include "worker_cache.h"
#include <czmq.h>
#include <jansson.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

static void
s_usage (FILE *out)
{
    fprintf (out,
        "usage: kgym cache [stats|clear] [--cache PATH]\n"
        "  the local compile cache that kgym eval, kgym compile and the workers share:\n"
        "  stats (the default) prints {\"path\", \"entries\", \"bytes\"}, clear empties it\n"
        "usage: kgym cache stats --broker EP [--json]\n"
        "  the broker's result cache (kgym cache --broker EP --help)\n");
}

int
kgym_cache_main (int argc, char **argv)
{
    static struct option options[] = {
        { "cache", required_argument, 0, 'c' }, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 }
    };
    const char *explicit_path = NULL;
    int opt;
    optind = 1;
    while ((opt = getopt_long (argc, argv, "h", options, NULL)) != -1) {
        if (opt == 'c')
            explicit_path = optarg;
        else
        if (opt == 'h') {
            s_usage (stdout);
            return 0;
        }
        else {
            s_usage (stderr);
            return 2;
        }
    }
    if (argc - optind > 1) {
        fprintf (stderr, "kgym cache: one action at most ('%s' is one too many)\n", argv [optind + 1]);
        return 2;
    }
    const char *action = optind < argc? argv [optind]: "stats";
    if (!streq (action, "stats") && !streq (action, "clear")) {
        fprintf (stderr, "kgym cache: unknown action '%s' (stats or clear)\n", action);
        return 2;
    }
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
        //  jansson writes the path escaped (a quote in it keeps the line JSON).
        json_t *line = json_pack ("{s:s?, s:I, s:I}", "path", path, "entries",
                                  (json_int_t) entries, "bytes", (json_int_t) bytes);
        char *text = line? json_dumps (line, JSON_COMPACT | JSON_PRESERVE_ORDER): NULL;
        if (text)
            printf ("%s\n", text);
        else {
            fprintf (stderr, "kgym cache: cannot write the figures of %s\n", path);
            rc = 1;
        }
        free (text);
        json_decref (line);
    }
    else {
        rc = worker_cache_clear (cache) == 0? 0: 1;
        if (rc)
            fprintf (stderr, "kgym cache: could not clear %s\n", path);
    }
    worker_cache_destroy (&cache);
    free (path);
    return rc;
}

