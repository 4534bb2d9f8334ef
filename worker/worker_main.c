/*  kgym-worker - one worker process: one GPU, or the CPU backend.

    kgym-worker --broker EP --backend cpu|cuda [--device N] [options]
*/
#include "worker_server.h"
#include "common_log.h"
#include "kgym_config.h"
#include <getopt.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>

static void
s_usage (FILE *out)
{
    fprintf (out,
        "usage: kgym-worker --broker EP --backend cpu|cuda [--device N] [options]\n"
        "  --broker EP         the broker's worker endpoint (tcp://host:port)\n"
        "  --backend B         cpu or cuda\n"
        "  --device N          CUDA device ordinal (default 0)\n"
        "  --slots N           jobs running at once (default: cpu 2, cuda 1)\n"
        "  --prefetch N        extra jobs taken to compile ahead (default 1)\n"
        "  --cache PATH        compile cache file (default $KGYM_CACHE_DIR or ~/.cache/kgym)\n"
        "  --name NAME         worker name (default host:pid)\n"
        "  --heartbeat MS      heartbeat interval (default 1000)\n"
        "  --fresh-runner      CUDA: a fresh runner process per job\n"
        "  -v, --verbose       debug logging\n"
        "  --version\n");
}

int
main (int argc, char **argv)
{
    worker_config_t cfg;
    worker_config_default (&cfg);
    cfg.backend = NULL;
    static struct option options[] = {
        { "broker", required_argument, 0, 'b' }, { "backend", required_argument, 0, 'B' },
        { "device", required_argument, 0, 'd' }, { "slots", required_argument, 0, 's' },
        { "prefetch", required_argument, 0, 'p' }, { "cache", required_argument, 0, 'c' },
        { "name", required_argument, 0, 'n' }, { "heartbeat", required_argument, 0, 'H' },
        { "fresh-runner", no_argument, 0, 'f' }, { "verbose", no_argument, 0, 'v' },
        { "help", no_argument, 0, 'h' }, { "version", no_argument, 0, 'V' }, { 0, 0, 0, 0 }
    };
    int opt;
    while ((opt = getopt_long (argc, argv, "vh", options, NULL)) != -1) {
        switch (opt) {
            case 'b': cfg.broker_endpoint = optarg; break;
            case 'B': cfg.backend = optarg; break;
            case 'd': cfg.device = atoi (optarg); break;
            case 's': cfg.slots = (uint32_t) atoi (optarg); break;
            case 'p': cfg.prefetch = (uint32_t) atoi (optarg); break;
            case 'c': cfg.cache_path = optarg; break;
            case 'n': cfg.name = optarg; break;
            case 'H': cfg.heartbeat_ms = (uint32_t) atoi (optarg); break;
            case 'f': cfg.fresh_runner = true; break;
            case 'v': common_log_set_level (LOG_LEVEL_DEBUG); break;
            case 'V': printf ("kgym-worker %s\n", KGYM_VERSION); return 0;
            case 'h': s_usage (stdout); return 0;
            default: s_usage (stderr); return 2;
        }
    }
    if (!cfg.broker_endpoint || !cfg.backend) {
        fprintf (stderr, "kgym-worker: --broker and --backend are required\n");
        return 2;
    }
    //  Orphaned grandchildren of killed sandboxes (a compiler's cc1) come to us
    //  to be reaped, even where PID 1 does not reap.
    prctl (PR_SET_CHILD_SUBREAPER, 1);
    zsys_init ();
    zsys_set_logstream (NULL);
    zsys_catch_interrupts ();
    char err [512] = "";
    worker_server_t *server = worker_server_new (&cfg, err, sizeof err);
    if (!server) {
        fprintf (stderr, "kgym-worker: %s\n", err);
        return 1;
    }
    int rc = worker_server_run (server, NULL);
    worker_server_destroy (&server);
    return rc == 0? 0: 1;
}
