/*  kgym-worker - one worker process: one GPU, or the CPU backend.

    kgym-worker --broker EP --backend TARGET [--device N] [options]

    Signals: the first SIGTERM drains (finish the jobs held, take no new
    ones, DISCONNECT, exit 0); a second SIGTERM, or SIGINT, leaves at once
    (DISCONNECT: the broker requeues what was held). The handler only
    writes the signal number to a pipe; a small actor turns it into a
    command on the server's pipe, so the server wakes at once and never
    handles a signal itself.

    --metrics HOST:PORT serves /metrics, /healthz and /readyz (docs/metrics.md):
    /healthz says "starting" until the backend is up (CUDA initialised),
    /readyz ok while connected and taking jobs. Under systemd (Type=notify)
    READY=1 comes at that same moment, STOPPING=1 on the way out.
*/
#include "worker_server.h"
#include "worker_registry.h"
#include "common_log.h"
#include "common_util.h"
#include "common_metrics_http.h"
#include "kgym_config.h"
#include <getopt.h>
#include <signal.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>

static int s_signal_pipe [2] = { -1, -1 };     //  written by the handler, read by the actor

//  "a, b, c" from a backend's NULL-terminated names.
static void
s_names (const char *const *names, char *buf, size_t len)
{
    size_t used = 0;
    buf [0] = 0;
    for (size_t n = 0; n < COMMON_BACKEND_MAX_NAMES && names [n] && used < len; n++)
        used += (size_t) snprintf (buf + used, len - used, "%s%s", n? ", ": "", names [n]);
}

static void
s_usage (FILE *out)
{
    char targets [128];
    worker_registry_targets (targets, sizeof targets);
    fprintf (out,
        "usage: kgym-worker --broker EP --backend TARGET [--device N] [options]\n"
        "  --broker EP          the broker's worker endpoint (tcp://host:port)\n"
        "  --backend TARGET     what to grade: %s\n", targets);
    //  A row a backend: the targets it serves, its languages, what it grades.
    const worker_backend_t *const *all = worker_registry_all ();
    for (size_t i = 0; all [i]; i++) {
        char targets [128], langs [128];
        s_names (all [i]->info.targets, targets, sizeof targets);
        s_names (all [i]->info.langs, langs, sizeof langs);
        fprintf (out, "                         %s (%s): %s\n", targets, langs, all [i]->summary);
    }
    fprintf (out,
        "  --device N           device ordinal of a GPU backend (default 0)\n"
        "  --slots N            jobs running at once (default: the backend's: cpu one per core\n"
        "                       but one; a GPU backend 1)\n"
        "  --compilers N        compiles at once (default: the backend's: cpu one per run slot;\n"
        "                       cuda the GPU's share of the usable cores (affinity, cgroup quota)\n"
        "                       divided by the host's GPUs, but one)\n"
        "  --prefetch N         jobs held beyond the run slots, compiled ahead (default: compilers\n"
        "                       + slots, at most 64; at most 1024)\n"
        "  --cache PATH         compile cache file (default $KGYM_CACHE_DIR or ~/.cache/kgym)\n"
        "  --name NAME          worker name (default host:pid)\n"
        "  --heartbeat MS       heartbeat interval (default 1000)\n"
        "  --liveness N         missed heartbeats before reconnecting (default 3)\n"
        "  --curve-secret FILE  own secret certificate (kgym keygen): CURVE to the broker\n"
        "  --broker-key FILE    the broker's public certificate (with --curve-secret)\n"
        "  --fresh-runner       CUDA: a fresh runner process per job\n"
        "  --python PATH        the python backend's interpreter, with torch (default $KGYM_PYTHON,\n"
        "                       else /usr/bin/python3)\n"
        "  --max-job-memory SIZE  memory one job may need, all its parts (8G, 512M; default: half\n"
        "                       the machine's, cpu shared by its slots); a job over it is invalid\n"
        "  --metrics HOST:PORT  serve /metrics, /healthz, /readyz there (docs/metrics.md)\n"
        "  --log-format F       text, json or journal (default text, or $KGYM_LOG_FORMAT)\n"
        "  -v, --verbose        debug logging\n"
        "  --version\n"
        "SIGTERM drains (finish held jobs, then exit 0); a second SIGTERM or SIGINT exits at once.\n");
}

static void
s_on_signal (int signum)
{
    int saved = errno;
    unsigned char byte = (unsigned char) signum;
    if (write (s_signal_pipe [1], &byte, 1) < 0) {
        //  The pipe is full: a signal is pending there already.
    }
    errno = saved;
}

//  Turns signals from the pipe into commands: SIGTERM once "DRAIN", then "STOP".
static void
s_signal_actor (zsock_t *pipe, void *args)
{
    zsock_signal (pipe, 0);
    int terms = 0;
    while (true) {
        zmq_pollitem_t items [] = {
            { zsock_resolve (pipe), 0, ZMQ_POLLIN, 0 },
            { NULL, s_signal_pipe [0], ZMQ_POLLIN, 0 }
        };
        if (zmq_poll (items, 2, -1) == -1) {
            if (zmq_errno () == EINTR)
                continue;
            break;
        }
        if (items [0].revents & ZMQ_POLLIN) {
            char *command = zstr_recv (pipe);
            bool term = !command || streq (command, "$TERM");
            zstr_free (&command);
            if (term)
                break;
        }
        if (items [1].revents & ZMQ_POLLIN) {
            unsigned char byte;
            while (read (s_signal_pipe [0], &byte, 1) == 1) {
                bool drain = byte == SIGTERM && terms++ == 0;
                log_info ("worker", "%s: %s", byte == SIGTERM? "SIGTERM": "SIGINT",
                          drain? "draining (again to stop at once)": "stopping now");
                zstr_send (pipe, drain? "DRAIN": "STOP");
            }
        }
    }
}

//  A positive integer option.
static int
s_parse_u32 (const char *option, const char *text, uint32_t *value, bool zero_ok)
{
    char *end;
    errno = 0;
    unsigned long long number = strtoull (text, &end, 10);
    if (errno || end == text || *end || text [0] == '-' || (number == 0 && !zero_ok)
    ||  number > 1000000) {
        fprintf (stderr, "kgym-worker: %s wants a%s integer, not '%s'\n", option,
                 zero_ok? " non-negative": " positive", text);
        return -1;
    }
    *value = (uint32_t) number;
    return 0;
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
        { "compilers", required_argument, 0, 'C' },
        { "name", required_argument, 0, 'n' }, { "heartbeat", required_argument, 0, 'H' },
        { "liveness", required_argument, 0, 'l' },
        { "curve-secret", required_argument, 0, 'S' }, { "broker-key", required_argument, 0, 'K' },
        { "fresh-runner", no_argument, 0, 'f' }, { "verbose", no_argument, 0, 'v' },
        { "python", required_argument, 0, 'y' }, { "max-job-memory", required_argument, 0, 'M' },
        { "metrics", required_argument, 0, 'm' }, { "log-format", required_argument, 0, 'L' },
        { "help", no_argument, 0, 'h' }, { "version", no_argument, 0, 'V' }, { 0, 0, 0, 0 }
    };
    const char *metrics_address = NULL;
    int opt;
    while ((opt = getopt_long (argc, argv, "vh", options, NULL)) != -1) {
        switch (opt) {
            case 'b': cfg.broker_endpoint = optarg; break;
            case 'B': cfg.backend = optarg; break;
            case 'd': {
                uint32_t device;
                if (s_parse_u32 ("--device", optarg, &device, true)) return 2;
                cfg.device = (int) device;
                break;
            }
            case 's': if (s_parse_u32 ("--slots", optarg, &cfg.slots, false)) return 2; break;
            case 'p': if (s_parse_u32 ("--prefetch", optarg, &cfg.prefetch, true)) return 2; break;
            case 'C': if (s_parse_u32 ("--compilers", optarg, &cfg.compilers, false)) return 2; break;
            case 'c': cfg.cache_path = optarg; break;
            case 'n': cfg.name = optarg; break;
            case 'H': if (s_parse_u32 ("--heartbeat", optarg, &cfg.heartbeat_ms, false)) return 2; break;
            case 'l': if (s_parse_u32 ("--liveness", optarg, &cfg.liveness, false)) return 2; break;
            case 'S': cfg.curve_secret = optarg; break;
            case 'K': cfg.broker_key = optarg; break;
            case 'f': cfg.fresh_runner = true; break;
            case 'y':
                if (optarg [0] != '/') {
                    fprintf (stderr, "kgym-worker: --python wants an absolute path, not '%s'\n", optarg);
                    return 2;
                }
                cfg.python = optarg;
                break;
            case 'M':
                if (common_bytes_parse (optarg, &cfg.max_job_bytes)) {
                    fprintf (stderr, "kgym-worker: --max-job-memory wants a size such as 8G or 512M, "
                             "not '%s'\n", optarg);
                    return 2;
                }
                break;
            case 'm': metrics_address = optarg; break;
            case 'L': {
                common_log_format_t format;
                if (common_log_format_parse (optarg, &format)) {
                    fprintf (stderr, "kgym-worker: --log-format wants text, json or journal, not '%s'\n",
                             optarg);
                    return 2;
                }
                common_log_set_format (format);
                break;
            }
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
    if (!cfg.curve_secret != !cfg.broker_key) {
        fprintf (stderr, "kgym-worker: --curve-secret and --broker-key go together\n");
        return 2;
    }
    //  Orphaned grandchildren of killed sandboxes (a compiler's cc1) come to us
    //  to be reaped, even where PID 1 does not reap.
    prctl (PR_SET_CHILD_SUBREAPER, 1);
    //  Signals are ours (drain on the first SIGTERM), not CZMQ's.
    zsys_handler_set (NULL);
    zsys_init ();
    zsys_set_logstream (NULL);
    if (pipe2 (s_signal_pipe, O_CLOEXEC | O_NONBLOCK)) {
        fprintf (stderr, "kgym-worker: cannot make a pipe: %s\n", strerror (errno));
        return 1;
    }
    struct sigaction action;
    memset (&action, 0, sizeof (action));
    action.sa_handler = s_on_signal;
    sigemptyset (&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction (SIGTERM, &action, NULL);
    sigaction (SIGINT, &action, NULL);

    char err [512] = "";
    const worker_backend_t *backend = worker_registry_find (cfg.backend, NULL);
    if (!backend) {
        char targets [128];
        fprintf (stderr, "kgym-worker: --backend '%s' is not one this build serves (%s)\n",
                 cfg.backend, worker_registry_targets (targets, sizeof targets));
        return 2;
    }
    if (backend->device_ordinal) {
        char gpu [16];
        snprintf (gpu, sizeof gpu, "%d", cfg.device);
        common_log_set_gpu (gpu);
    }
    //  The endpoint comes up first, saying "starting" while CUDA initialises.
    common_metrics_t *metrics = NULL;
    common_metrics_http_t *http = NULL;
    common_metrics_worker_t figures;
    if (metrics_address) {
        metrics = common_metrics_new ();
        if (metrics && common_metrics_kgym_worker (metrics, &figures))
            log_warn ("worker", "some metric families could not be registered");
        http = metrics? common_metrics_http_new (metrics, metrics_address, err, sizeof err): NULL;
        if (!http) {
            fprintf (stderr, "kgym-worker: --metrics %s: %s\n", metrics_address,
                     err [0]? err: "out of memory");
            common_metrics_destroy (&metrics);
            return 1;
        }
        log_info ("worker", "metrics on http://%s/metrics", common_metrics_http_address (http));
        cfg.metrics = &figures;
        cfg.registry = metrics;
    }
    cfg.notify = true;
    worker_server_t *server = worker_server_new (&cfg, err, sizeof err);
    if (!server) {
        fprintf (stderr, "kgym-worker: %s\n", err);
        common_metrics_http_destroy (&http);
        common_metrics_destroy (&metrics);
        return 1;
    }
    //  The stall check: the loop turns at least once a heartbeat.
    common_metrics_set_stall (metrics, 30 + 3.0 * cfg.heartbeat_ms / 1000);
    zactor_t *signals = zactor_new (s_signal_actor, NULL);
    int rc = signals? worker_server_run (server, zactor_sock (signals)): -1;
    if (rc == 0 && worker_server_jobs (server) > 0) {
        //  Stopped at once with jobs still running: leave without waiting
        //  for them (the broker requeues them). A moment for the DISCONNECT
        //  to go out, as a socket's linger would give it.
        zclock_sleep (200);
        fflush (NULL);
        _exit (0);
    }
    zactor_destroy (&signals);
    worker_server_destroy (&server);
    common_metrics_http_destroy (&http);
    common_metrics_destroy (&metrics);
    return rc == 0? 0: 1;
}
