/*  kgym_demo - `kgym demo`: the whole service on loopback, in one process.

    Starts a broker and local workers (threads, real TCP sockets on
    127.0.0.1), grades every bundled example task with its bundled
    candidates through the client library, and prints a table with each
    verdict next to the status the example expects. On a host with a GPU
    (and a CUDA build) it grades the CUDA examples on it; otherwise the CPU
    examples on the CPU backend.
*/
#include "kgym_demo.h"
#include "kgym_cli.h"
#include "client_options.h"
#include "client_kgym.h"
#include "broker_server.h"
#include "worker_server.h"
#include "worker_registry.h"
#include "common_log.h"
#include "kgym_config.h"
#include <dirent.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEMO_MAX_JOBS 1024
#define DEMO_MAX_WORKERS 16

//  One graded example.
typedef struct {
    char task[128];                 //  task folder name
    char candidate[128];            //  candidate file stem
    char expected[32];              //  expected status ("" = not listed)
    json_t *result;                 //  result object, NULL until it arrives
} s_row_t;

static int
s_name_cmp (const void *a, const void *b)
{
    return strcmp (*(char *const *) a, *(char *const *) b);
}

//  Sorted entry names of a directory matching suffix ("" = folders). Caller frees.
static size_t
s_list (const char *dir, const char *suffix, char ***names_p)
{
    DIR *handle = opendir (dir);
    *names_p = NULL;
    if (!handle)
        return 0;
    size_t count = 0, max = 0;
    char **names = NULL;
    struct dirent *entry;
    while ((entry = readdir (handle))) {
        if (entry->d_name [0] == '.')
            continue;
        size_t len = strlen (entry->d_name), slen = strlen (suffix);
        if (slen && (len <= slen || strcmp (entry->d_name + len - slen, suffix)))
            continue;
        if (count == max) {
            max = max? max * 2: 16;
            char **grown = realloc (names, max * sizeof (char *));
            if (!grown)
                break;
            names = grown;
        }
        names [count++] = strdup (entry->d_name);
    }
    closedir (handle);
    qsort (names, count, sizeof (char *), s_name_cmp);
    *names_p = names;
    return count;
}

static void
s_free_list (char **names, size_t count)
{
    for (size_t i = 0; i < count; i++)
        free (names [i]);
    free (names);
}

static const char *
s_examples_dir (const char *given)
{
    static char path [1024];
    struct stat st;
    if (given)
        return given;
    const char *candidates[] = { getenv ("KGYM_EXAMPLES"), KGYM_SOURCE_DIR "/examples",
                                 KGYM_DATADIR "/examples" };
    for (size_t i = 0; i < 3; i++)
        if (candidates [i] && stat (candidates [i], &st) == 0 && S_ISDIR (st.st_mode)) {
            snprintf (path, sizeof path, "%s", candidates [i]);
            return path;
        }
    return NULL;
}

//  Submit every candidate of every task under root/backend; rows filled.
static int
s_submit_all (client_kgym_t *client, const char *root, const char *backend, double timeout,
              s_row_t *rows, size_t *nrows)
{
    char dir [1200];
    snprintf (dir, sizeof dir, "%s/%s", root, backend);
    char **tasks;
    size_t ntasks = s_list (dir, "", &tasks);
    for (size_t t = 0; t < ntasks; t++) {
        char path [1600];
        snprintf (path, sizeof path, "%s/%s/task.json", dir, tasks [t]);
        json_t *task = kgym_cli_load (path, "task");
        if (!task)
            continue;
        snprintf (path, sizeof path, "%s/%s/expected.json", dir, tasks [t]);
        json_t *expected = json_load_file (path, 0, NULL);
        snprintf (path, sizeof path, "%s/%s/candidates", dir, tasks [t]);
        char **cands;
        size_t ncands = s_list (path, ".json", &cands);
        for (size_t c = 0; c < ncands && *nrows < DEMO_MAX_JOBS; c++) {
            char cpath [2000];
            snprintf (cpath, sizeof cpath, "%s/%s", path, cands [c]);
            json_t *candidate = kgym_cli_load (cpath, "candidate");
            if (!candidate)
                continue;
            s_row_t *row = &rows [*nrows];
            memset (row, 0, sizeof *row);
            snprintf (row->task, sizeof row->task, "%s", tasks [t]);
            snprintf (row->candidate, sizeof row->candidate, "%.*s",
                      (int) (strlen (cands [c]) - 5), cands [c]);
            const char *want = json_string_value (json_object_get (expected, row->candidate));
            snprintf (row->expected, sizeof row->expected, "%s", want? want: "");
            json_t *eval = json_pack ("{s:f}", "timeout", timeout);
            json_t *job = kgym_cli_job (task, candidate, eval);
            char err [256];
            if (client_kgym_submit (client, *nrows + 1, job, err, sizeof err) == 0)
                (*nrows)++;
            else
                fprintf (stderr, "kgym demo: cannot submit %s: %s\n", cpath, err);
            json_decref (job);
            json_decref (eval);
            json_decref (candidate);
        }
        s_free_list (cands, ncands);
        json_decref (expected);
        json_decref (task);
    }
    s_free_list (tasks, ntasks);
    return 0;
}

//  The table; returns how many candidates with an expected status missed it.
static size_t
s_print_table (s_row_t *rows, size_t nrows)
{
    size_t matched = 0, listed = 0;
    printf ("%-16s %-16s %-14s %-14s %8s %8s\n", "task", "candidate", "status", "expected",
            "reward", "speedup");
    for (size_t i = 0; i < nrows; i++) {
        s_row_t *row = &rows [i];
        const char *status = json_string_value (json_object_get (row->result, "status"));
        json_t *reward = json_object_get (row->result, "reward");
        json_t *speedup = json_object_get (row->result, "speedup");
        char rtext [32] = "-", stext [32] = "-";
        if (json_is_number (reward))
            snprintf (rtext, sizeof rtext, "%.3f", json_number_value (reward));
        if (json_is_number (speedup))
            snprintf (stext, sizeof stext, "%.2fx", json_number_value (speedup));
        bool match = status && row->expected [0] && strcmp (status, row->expected) == 0;
        listed += row->expected [0] != 0;
        matched += match;
        printf ("%-16s %-16s %-14s %-14s %8s %8s\n", row->task, row->candidate,
                status? status: "(none)", row->expected [0]? (match? "as expected": row->expected): "",
                rtext, stext);
    }
    printf ("\n%zu candidates graded; %zu of %zu with an expected status got it.\n",
            nrows, matched, listed);
    return listed - matched;
}

static void
s_usage (FILE *out)
{
    fprintf (out,
        "usage: kgym demo [--workers N] [--examples DIR] [--backend TARGET] [--timeout S]\n"
        "  start a broker and local workers (N: 1..%d CPU workers, default 1), grade the bundled\n"
        "  examples, print a table; exit 1 when a candidate misses its expected status\n",
        DEMO_MAX_WORKERS);
}

int
kgym_demo_main (int argc, char **argv)
{
    static struct option options[] = {
        { "workers", required_argument, 0, 'w' }, { "examples", required_argument, 0, 'e' },
        { "backend", required_argument, 0, 'b' }, { "timeout", required_argument, 0, 't' },
        { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 }
    };
    int nworkers = 1;          //  each takes a slot per core but one
    const char *examples = NULL, *backend = NULL;
    double timeout = 2.0;
    long long number;
    int opt;
    optind = 1;
    while ((opt = getopt_long (argc, argv, "h", options, NULL)) != -1) {
        switch (opt) {
            case 'w':
                if (client_options_int ("demo", "--workers", optarg, 1, DEMO_MAX_WORKERS, &number))
                    return 2;
                nworkers = (int) number;
                break;
            case 'e': examples = optarg; break;
            case 'b': backend = optarg; break;
            case 't':
                if (client_options_real ("demo", "--timeout", optarg, 0, true,
                                         CLIENT_OPTIONS_MAX_TIMEOUT, "seconds", &timeout))
                    return 2;
                break;
            case 'h':
                s_usage (stdout);
                return 0;
            default:
                s_usage (stderr);
                return 2;
        }
    }
    const char *root = s_examples_dir (examples);
    if (!root) {
        fprintf (stderr, "kgym demo: no examples folder found (use --examples DIR)\n");
        return 1;
    }
    zsys_init ();
    zsys_set_logstream (NULL);

    broker_config_t bcfg;
    broker_config_default (&bcfg);
    bcfg.clients_endpoint = "tcp://127.0.0.1:*";
    bcfg.workers_endpoint = "tcp://127.0.0.1:*";
    zactor_t *broker = zactor_new (broker_server_actor, &bcfg);
    if (!broker) {
        fprintf (stderr, "kgym demo: cannot start the broker\n");
        return 1;
    }
    zstr_send (broker, "ENDPOINTS");
    char *client_ep = zstr_recv (broker);
    char *worker_ep = zstr_recv (broker);

    //  A GPU backend's worker when this host has a device it can use (the
    //  registry's order), else the CPU backend's workers.
    zactor_t *workers [DEMO_MAX_WORKERS + 1] = { NULL };
    int started = 0;
    worker_config_t wcfg;
    worker_config_default (&wcfg);
    wcfg.broker_endpoint = worker_ep;
    wcfg.heartbeat_ms = 500;
    char err [512] = "";
    const worker_backend_t *const *all = worker_registry_all ();
    for (size_t i = 0; all [i] && !started; i++) {
        const char *target = all [i]->info.targets [0];
        if (!all [i]->device_ordinal || (backend && strcmp (backend, target) != 0))
            continue;
        wcfg.backend = target;
        wcfg.name = "demo-gpu0";
        worker_server_t *server = worker_server_new (&wcfg, err, sizeof err);
        if (server) {
            printf ("kgym demo: grading on %s\n", worker_server_device (server));
            workers [started++] = zactor_new (worker_server_actor, server);
            backend = target;
        }
        else
        if (backend) {
            fprintf (stderr, "kgym demo: no usable device for %s: %s\n", target, err);
            goto fail;
        }
    }
    if (!started) {
        const char *cpu = NULL;
        for (size_t i = 0; all [i] && !cpu; i++)
            if (!all [i]->device_ordinal && (!backend || strcmp (backend, all [i]->info.targets [0]) == 0))
                cpu = all [i]->info.targets [0];
        if (!cpu) {
            fprintf (stderr, "kgym demo: this build has no backend '%s'\n", backend? backend: "cpu");
            goto fail;
        }
        if (!backend)
            printf ("kgym demo: no GPU found (%s); grading the %s examples on the %s backend\n",
                    err [0]? err: "no GPU backend in this build", cpu, cpu);
        backend = cpu;
        wcfg.backend = cpu;
        for (int i = 0; i < nworkers; i++) {
            char name [32];
            snprintf (name, sizeof name, "demo-cpu%d", i);
            wcfg.name = name;
            worker_server_t *server = worker_server_new (&wcfg, err, sizeof err);
            if (!server) {
                fprintf (stderr, "kgym demo: cannot start a CPU worker: %s\n", err);
                goto fail;
            }
            if (i == 0)
                printf ("kgym demo: %d CPU worker%s on %s\n", nworkers, nworkers == 1? "": "s",
                        worker_server_device (server));
            workers [started++] = zactor_new (worker_server_actor, server);
        }
    }
    fflush (stdout);

    client_kgym_t *client = client_kgym_new (client_ep);
    s_row_t *rows = calloc (DEMO_MAX_JOBS, sizeof (s_row_t));
    size_t nrows = 0;
    int rc = 0;
    if (!client || !rows) {
        fprintf (stderr, "kgym demo: cannot start the client\n");
        rc = 1;
    }
    else {
        s_submit_all (client, root, backend, timeout, rows, &nrows);
        size_t received = 0;
        bool noticed = false;           //  the demo's workers serve one backend: said once
        int64_t quiet_since = zclock_mono ();
        while (received < nrows && !zsys_interrupted) {
            client_event_t event;
            if (client_kgym_recv (client, 1000, &event) == 0) {
                quiet_since = zclock_mono ();
                if (event.type == CLIENT_EVENT_RESULT && event.ref >= 1 && event.ref <= nrows
                &&  !rows [event.ref - 1].result) {
                    rows [event.ref - 1].result = json_incref (event.result);
                    received++;
                }
                else
                if (event.type == CLIENT_EVENT_NOTICE && !noticed) {
                    fprintf (stderr, "kgym demo: %s\n", event.reason);
                    noticed = true;
                }
                else
                if (event.type == CLIENT_EVENT_ERROR) {
                    fprintf (stderr, "kgym demo: broker error %u: %s\n", event.code, event.reason);
                    if (event.ref >= 1 && event.ref <= nrows && !rows [event.ref - 1].result) {
                        rows [event.ref - 1].result = json_pack ("{s:s}", "status", "(error)");
                        received++;
                    }
                }
                client_event_clear (&event);
            }
            //  Every job has a timeout; a long silence means something is wrong.
            if (zclock_mono () - quiet_since > 300000) {
                fprintf (stderr, "kgym demo: no result for 300 s; giving up\n");
                rc = 1;
                break;
            }
        }
        size_t missed = s_print_table (rows, nrows);
        if (missed) {
            fprintf (stderr, "kgym demo: %zu candidate(s) missed the status their example expects\n",
                     missed);
            rc = 1;
        }
    }
    for (size_t i = 0; i < nrows; i++)
        json_decref (rows [i].result);
    free (rows);
    client_kgym_destroy (&client);
    for (int i = 0; i < started; i++)
        zactor_destroy (&workers [i]);
    zactor_destroy (&broker);
    zstr_free (&client_ep);
    zstr_free (&worker_ep);
    return rc;
fail:
    for (int i = 0; i < started; i++)
        zactor_destroy (&workers [i]);
    zactor_destroy (&broker);
    zstr_free (&client_ep);
    zstr_free (&worker_ep);
    return 1;
}
