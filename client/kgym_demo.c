/*  kgym_demo - `kgym demo`: the whole service on loopback, in one process.

    Starts a broker and local workers (threads, real TCP sockets on
    127.0.0.1), grades every bundled example task with its bundled
    candidates through the client library, and prints a table with each
    verdict next to the status the example expects. On a host with a GPU
    (and a CUDA build) it grades the CUDA examples on it; otherwise the CPU
    examples on the CPU backend. When the build grades Python on that
    target, the PyTorch pool (examples/pytorch) too: each task's
    task.<target>.json with the candidates its expected.json lists for the
    target, graded with that target's "eval" settings.
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
    char task[160];                 //  task folder name ("pytorch/<task>" in the pool)
    char candidate[128];            //  candidate file stem
    char expected[96];              //  expected status, or statuses joined by '|' ("" = not listed)
    bool slow;                      //  must not be measured faster than its baseline
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
        json_t *task = kgym_cli_load (path, "task", NULL);
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
            json_t *candidate = kgym_cli_load (cpath, "candidate", NULL);
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

//  The expected status (a string, or an array of the statuses accepted) as text.
static void
s_expected_text (json_t *want, char *text, size_t size)
{
    text [0] = 0;
    if (json_is_string (want))
        snprintf (text, size, "%s", json_string_value (want));
    size_t i;
    json_t *item;
    json_array_foreach (want, i, item) {
        size_t used = strlen (text);
        if (json_is_string (item) && used + 1 < size)
            snprintf (text + used, size - used, "%s%s", i? "|": "", json_string_value (item));
    }
}

//  Submit the PyTorch pool's candidates that root/pytorch/<task>/expected.json
//  lists for target, each with the target's eval settings (--timeout, when
//  given, replaces theirs). Rows filled; *longest_s: the longest budget asked.
static void
s_submit_pool (client_kgym_t *client, const char *root, const char *target, double timeout,
               s_row_t *rows, size_t *nrows, double *longest_s)
{
    char dir [1200];
    snprintf (dir, sizeof dir, "%s/pytorch", root);
    char **tasks;
    size_t ntasks = s_list (dir, "", &tasks);
    for (size_t t = 0; t < ntasks; t++) {
        char path [1600];
        snprintf (path, sizeof path, "%s/%s/task.%s.json", dir, tasks [t], target);
        if (access (path, R_OK) != 0)
            continue;                   //  not a task for this target
        json_t *task = kgym_cli_load (path, "task", target);
        snprintf (path, sizeof path, "%s/%s/expected.json", dir, tasks [t]);
        json_t *all = task? kgym_cli_load (path, "expected statuses", NULL): NULL;
        json_t *expected = json_object_get (all, target);
        json_t *eval = json_deep_copy (json_object_get (expected, "eval"));
        if (!json_is_object (eval)) {
            json_decref (eval);
            eval = json_object ();
        }
        if (timeout > 0)
            json_object_set_new (eval, "timeout", json_real (timeout));
        double budget = json_number_value (json_object_get (eval, "timeout"))
                      + json_number_value (json_object_get (eval, "compile_timeout"));
        snprintf (path, sizeof path, "%s/%s/candidates", dir, tasks [t]);
        char **cands;
        size_t ncands = s_list (path, ".json", &cands);
        for (size_t c = 0; c < ncands && json_is_object (expected) && *nrows < DEMO_MAX_JOBS; c++) {
            s_row_t *row = &rows [*nrows];
            memset (row, 0, sizeof *row);
            snprintf (row->candidate, sizeof row->candidate, "%.*s",
                      (int) (strlen (cands [c]) - 5), cands [c]);
            json_t *want = json_object_get (expected, row->candidate);
            if (!want || !strcmp (row->candidate, "eval") || !strcmp (row->candidate, "fast")
            ||  !strcmp (row->candidate, "slow"))
                continue;               //  not graded on this target
            char cpath [2000];
            snprintf (cpath, sizeof cpath, "%s/%s", path, cands [c]);
            json_t *candidate = kgym_cli_load (cpath, "candidate", NULL);
            if (!candidate)
                continue;
            snprintf (row->task, sizeof row->task, "pytorch/%s", tasks [t]);
            s_expected_text (want, row->expected, sizeof row->expected);
            size_t i;
            json_t *name;
            json_array_foreach (json_object_get (expected, "slow"), i, name)
                row->slow |= json_is_string (name) && !strcmp (json_string_value (name), row->candidate);
            json_t *job = kgym_cli_job (task, candidate, eval);
            char err [256];
            if (client_kgym_submit (client, *nrows + 1, job, err, sizeof err) == 0) {
                (*nrows)++;
                if (budget > *longest_s)
                    *longest_s = budget;
            }
            else
                fprintf (stderr, "kgym demo: cannot submit %s: %s\n", cpath, err);
            json_decref (job);
            json_decref (candidate);
        }
        s_free_list (cands, ncands);
        json_decref (eval);
        json_decref (all);
        json_decref (task);
    }
    s_free_list (tasks, ntasks);
}

//  True when status is one of expected's ('|'-separated) statuses.
static bool
s_status_in (const char *status, const char *expected)
{
    size_t len = strlen (status);
    for (const char *at = expected; *at; ) {
        const char *bar = strchr (at, '|');
        size_t n = bar? (size_t) (bar - at): strlen (at);
        if (n == len && strncmp (at, status, n) == 0)
            return true;
        at += n + (bar != NULL);
    }
    return false;
}

//  The table; returns how many candidates with an expected status missed it.
//  A "slow" one (a timing attack) misses it too when measured at 1x or faster.
static size_t
s_print_table (s_row_t *rows, size_t nrows)
{
    size_t matched = 0, listed = 0;
    printf ("%-30s %-22s %-14s %-16s %8s %8s\n", "task", "candidate", "status", "expected",
            "reward", "speedup");
    for (size_t i = 0; i < nrows; i++) {
        s_row_t *row = &rows [i];
        const char *status = json_string_value (json_object_get (row->result, "status"));
        json_t *reward = json_object_get (row->result, "reward");
        json_t *speedup = json_object_get (row->result, "speedup");
        char rtext [32] = "-", stext [32] = "-", etext [128];
        if (json_is_number (reward))
            snprintf (rtext, sizeof rtext, "%.3f", json_number_value (reward));
        if (json_is_number (speedup))
            snprintf (stext, sizeof stext, "%.2fx", json_number_value (speedup));
        bool match = status && row->expected [0] && s_status_in (status, row->expected);
        bool fooled = match && row->slow && !strcmp (status, "ok") && json_is_number (speedup)
                   && json_number_value (speedup) >= 1;
        match &= !fooled;
        listed += row->expected [0] != 0;
        matched += match;
        snprintf (etext, sizeof etext, "%s%s", row->expected, row->slow? ", slow": "");
        printf ("%-30s %-22s %-14s %-16s %8s %8s\n", row->task, row->candidate,
                status? status: "(none)", match? "as expected": (fooled? "slow, not <1x": etext),
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
        "  examples (and the PyTorch pool, examples/pytorch, when this build grades Python), print\n"
        "  a table; exit 1 when a candidate misses its expected status (--timeout: the C examples'\n"
        "  budget, default 2 s; the pool's tasks bring their own unless it is given)\n",
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
    bool timeout_given = false;     //  the pool's own eval settings unless --timeout
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
                timeout_given = true;
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
        double longest_s = 0;
        char pool [1200];
        snprintf (pool, sizeof pool, "%s/pytorch", root);
        if (access (pool, R_OK) == 0 && !worker_registry_find (backend, "python"))
            printf ("kgym demo: this build grades no Python on %s: the PyTorch pool is left out\n",
                    backend);
        else
        if (access (pool, R_OK) == 0)
            s_submit_pool (client, root, backend, timeout_given? timeout: 0, rows, &nrows, &longest_s);
        fflush (stdout);
        //  Every job has a timeout; a long silence means something is wrong.
        int64_t silence_ms = (int64_t) (longest_s > 240? longest_s + 60: 300) * 1000;
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
            if (zclock_mono () - quiet_since > silence_ms) {
                fprintf (stderr, "kgym demo: no result for %d s; giving up\n",
                         (int) (silence_ms / 1000));
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
