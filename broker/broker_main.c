/*  kgym-broker - the broker process: options in, broker_server actor out.

    kgym-broker [--clients EP] [--workers EP] [--heartbeat MS] [--liveness N]
                [--max-queue N] [--max-client-jobs N] [--max-attempts N]
                [--db PATH [--sync normal|full]] [--keep-results N] [--keep-seconds S]
                [--cache-entries N] [--cache-mb N] [--task-window N] [--no-worker-grace S]
                [--curve-secret FILE --trainer-keys DIR --worker-keys DIR]
                [--metrics HOST:PORT] [--log-format text|json|journal] [-v|--verbose]
    Stops cleanly on SIGINT/SIGTERM (CZMQ's handler interrupts the actor's
    poll); exits 1 with a one-line reason when it cannot start (bind,
    database, keys, metrics address). With --metrics it owns the registry
    and its HTTP server (docs/metrics.md) and lends the figures to the
    actor; under systemd it says READY=1 once bound and STOPPING=1 on exit.
*/
#include "broker_server.h"
#include "common_log.h"
#include "common_metrics_http.h"
#include "common_notify.h"
#include <getopt.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void
s_usage (FILE *out)
{
    fprintf (out,
        "usage: kgym-broker [options]\n"
        "  --clients EP         endpoint clients connect to (default tcp://*:5555)\n"
        "  --workers EP         endpoint workers connect to (default tcp://*:5556)\n"
        "  --heartbeat MS       heartbeat interval (default 1000)\n"
        "  --liveness N         missed heartbeats before a worker is dropped (default 3)\n"
        "  --max-queue N        jobs waiting across all clients (default 100000)\n"
        "  --max-client-jobs N  unfinished jobs one client may have (default: no own limit)\n"
        "  --max-attempts N     workers a job may lose before it fails as internal_error (default 3)\n"
        "  --db PATH            keep jobs in this SQLite file: they survive a broker restart\n"
        "  --sync normal|full   normal: survives a killed broker; full: power loss too (default normal)\n"
        "  --keep-results N     finished results kept for reconnecting clients (default 100000)\n"
        "  --cache-entries N    results kept in the result cache (default 10000; 0: no cache)\n"
        "  --cache-mb N         ... within this many MiB (default 256)\n"
        "  --task-window N      results per task in its statistics (default 100)\n"
        "  --keep-seconds S     ... for at most S seconds (default 3600)\n"
        "  --no-worker-grace S  a job no connected worker serves waits S seconds for one, then\n"
        "                       fails as internal_error (default 60; 0: at once)\n"
        "  --curve-secret FILE  the broker's secret certificate (kgym keygen): CURVE on both sockets\n"
        "  --trainer-keys DIR   public certificates of the clients allowed in (with --curve-secret)\n"
        "  --worker-keys DIR    public certificates of the workers allowed in (with --curve-secret)\n"
        "  --metrics HOST:PORT  serve /metrics, /healthz, /readyz there (docs/metrics.md)\n"
        "  --log-format F       text, json or journal (default text, or $KGYM_LOG_FORMAT)\n"
        "  -v, --verbose        log every job\n");
}

//  A positive integer option that fits in uint32_t.
static int
s_parse_u32 (const char *option, const char *text, uint32_t *value)
{
    char *end;
    errno = 0;
    unsigned long long number = strtoull (text, &end, 10);
    if (errno || end == text || *end || text [0] == '-' || number == 0 || number > UINT32_MAX) {
        fprintf (stderr, "kgym-broker: %s wants a positive integer, not '%s'\n", option, text);
        return -1;
    }
    *value = (uint32_t) number;
    return 0;
}

int
main (int argc, char **argv)
{
    broker_config_t cfg;
    broker_config_default (&cfg);
    static const struct option options [] = {
        { "clients", required_argument, NULL, 'c' },
        { "workers", required_argument, NULL, 'w' },
        { "heartbeat", required_argument, NULL, 'H' },
        { "liveness", required_argument, NULL, 'l' },
        { "max-queue", required_argument, NULL, 'q' },
        { "max-client-jobs", required_argument, NULL, 'Q' },
        { "max-attempts", required_argument, NULL, 'a' },
        { "db", required_argument, NULL, 'd' },
        { "sync", required_argument, NULL, 'S' },
        { "keep-results", required_argument, NULL, 'k' },
        { "cache-entries", required_argument, NULL, 'C' },
        { "cache-mb", required_argument, NULL, 'M' },
        { "task-window", required_argument, NULL, 'T' },
        { "keep-seconds", required_argument, NULL, 'K' },
        { "no-worker-grace", required_argument, NULL, 'G' },
        { "curve-secret", required_argument, NULL, 's' },
        { "trainer-keys", required_argument, NULL, 't' },
        { "worker-keys", required_argument, NULL, 'W' },
        { "metrics", required_argument, NULL, 'm' },
        { "log-format", required_argument, NULL, 'L' },
        { "verbose", no_argument, NULL, 'v' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 }
    };
    const char *metrics_address = NULL;
    int opt;
    while ((opt = getopt_long (argc, argv, "vh", options, NULL)) != -1) {
        switch (opt) {
            case 'c': cfg.clients_endpoint = optarg; break;
            case 'w': cfg.workers_endpoint = optarg; break;
            case 'H': if (s_parse_u32 ("--heartbeat", optarg, &cfg.heartbeat_ms)) return 2; break;
            case 'l': if (s_parse_u32 ("--liveness", optarg, &cfg.liveness)) return 2; break;
            case 'q': if (s_parse_u32 ("--max-queue", optarg, &cfg.max_queue)) return 2; break;
            case 'Q': if (s_parse_u32 ("--max-client-jobs", optarg, &cfg.max_client_jobs)) return 2; break;
            case 'a': if (s_parse_u32 ("--max-attempts", optarg, &cfg.max_attempts)) return 2; break;
            case 'k': if (s_parse_u32 ("--keep-results", optarg, &cfg.keep_results)) return 2; break;
            case 'C':
                if (streq (optarg, "0"))
                    cfg.cache_entries = 0;      //  no result cache
                else
                if (s_parse_u32 ("--cache-entries", optarg, &cfg.cache_entries))
                    return 2;
                break;
            case 'M': {
                uint32_t mib;
                if (s_parse_u32 ("--cache-mb", optarg, &mib)) return 2;
                cfg.cache_bytes = (uint64_t) mib << 20;
                break;
            }
            case 'T':
                if (s_parse_u32 ("--task-window", optarg, &cfg.task_window)) return 2;
                if (cfg.task_window == 0 || cfg.task_window > 100000) {
                    fprintf (stderr, "kgym-broker: --task-window wants 1 to 100000\n");
                    return 2;
                }
                break;
            case 'K': if (s_parse_u32 ("--keep-seconds", optarg, &cfg.keep_s)) return 2; break;
            case 'G':
                if (streq (optarg, "0"))
                    cfg.no_worker_grace_s = 0;      //  fail at once
                else
                if (s_parse_u32 ("--no-worker-grace", optarg, &cfg.no_worker_grace_s))
                    return 2;
                break;
            case 'd': cfg.db_path = optarg; break;
            case 'S':
                if (!streq (optarg, "normal") && !streq (optarg, "full")) {
                    fprintf (stderr, "kgym-broker: --sync wants normal or full, not '%s'\n", optarg);
                    return 2;
                }
                cfg.db_full_sync = streq (optarg, "full");
                break;
            case 's': cfg.curve_secret = optarg; break;
            case 't': cfg.trainer_keys = optarg; break;
            case 'W': cfg.worker_keys = optarg; break;
            case 'm': metrics_address = optarg; break;
            case 'L': {
                common_log_format_t format;
                if (common_log_format_parse (optarg, &format)) {
                    fprintf (stderr, "kgym-broker: --log-format wants text, json or journal, not '%s'\n",
                             optarg);
                    return 2;
                }
                common_log_set_format (format);
                break;
            }
            case 'v': common_log_set_level (LOG_LEVEL_DEBUG); break;
            case 'h': s_usage (stdout); return 0;
            default: s_usage (stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf (stderr, "kgym-broker: unexpected argument '%s'\n", argv [optind]);
        return 2;
    }
    if ((cfg.trainer_keys || cfg.worker_keys) && !cfg.curve_secret) {
        fprintf (stderr, "kgym-broker: --trainer-keys and --worker-keys need --curve-secret\n");
        return 2;
    }
    if (cfg.curve_secret && (!cfg.trainer_keys || !cfg.worker_keys)) {
        fprintf (stderr, "kgym-broker: --curve-secret needs --trainer-keys DIR and --worker-keys DIR\n");
        return 2;
    }
    zsys_init ();
    common_metrics_t *metrics = NULL;
    common_metrics_http_t *http = NULL;
    common_metrics_broker_t figures;
    if (metrics_address) {
        char err [256] = "";
        metrics = common_metrics_new ();
        if (metrics && common_metrics_kgym_broker (metrics, &figures))
            log_warn ("broker", "some metric families could not be registered");
        http = metrics? common_metrics_http_new (metrics, metrics_address, err, sizeof err): NULL;
        if (!http) {
            fprintf (stderr, "kgym-broker: --metrics %s: %s\n", metrics_address,
                     err [0]? err: "out of memory");
            common_metrics_destroy (&metrics);
            return 1;
        }
        //  Alive from here on; the stall check catches a wedged actor loop.
        common_metrics_set_alive (metrics, true, NULL);
        common_metrics_set_stall (metrics, 30 + 3.0 * cfg.heartbeat_ms / 1000);
        cfg.metrics = &figures;
        cfg.registry = metrics;
    }
    cfg.notify = true;
    zactor_t *broker = zactor_new (broker_server_actor, &cfg);
    if (!broker) {
        fprintf (stderr, "kgym-broker: cannot start the broker\n");
        common_metrics_http_destroy (&http);
        common_metrics_destroy (&metrics);
        return 1;
    }
    zstr_send (broker, "ENDPOINTS");
    char *clients = NULL, *workers = NULL;
    if (zstr_recvx (broker, &clients, &workers, NULL) != 2 || !clients || !*clients) {
        fprintf (stderr, "kgym-broker: %s\n", workers && *workers? workers: "cannot start the broker");
        zstr_free (&clients);
        zstr_free (&workers);
        zactor_destroy (&broker);
        common_metrics_http_destroy (&http);
        common_metrics_destroy (&metrics);
        return 1;
    }
    fprintf (stderr, "kgym-broker: clients on %s, workers on %s%s%s%s\n", clients, workers,
             cfg.db_path? ", jobs in ": "", cfg.db_path? cfg.db_path: "",
             cfg.curve_secret? ", CURVE on": "");
    if (http)
        fprintf (stderr, "kgym-broker: metrics on http://%s/metrics\n",
                 common_metrics_http_address (http));
    zstr_free (&clients);
    zstr_free (&workers);
    //  Sockets bound and the store open: ready.
    common_metrics_set_ready (metrics, true, NULL);
    common_notify_ready ("serving");

    //  The actor stops itself on SIGINT/SIGTERM; wait for that.
    zpoller_t *poller = zpoller_new (broker, NULL);
    while (!zsys_interrupted) {
        void *which = zpoller_wait (poller, 1000);
        if (which) {
            char *unexpected = zstr_recv (broker);
            zstr_free (&unexpected);
        }
        else
        if (zpoller_terminated (poller))
            break;
    }
    zpoller_destroy (&poller);
    common_notify_stopping ("stopping");
    common_metrics_set_ready (metrics, false, "stopping");
    zactor_destroy (&broker);
    common_metrics_http_destroy (&http);
    common_metrics_destroy (&metrics);
    fprintf (stderr, "kgym-broker: stopped\n");
    return 0;
}
