/*  bench_worker - per-job overhead of the CPU backend, cache hit vs miss.

    Grades a trivial job (one 1-element size, one trial, one timed run, no
    warm-up) through worker_eval, the same library kgym-worker uses, and
    reports wall time per job: with the compile cache warm (hit) and with a
    fresh source every job (miss). The kernel's own time is ~0, so what is
    measured is kgym's overhead: runners started and sandboxed, inputs
    generated, reference and candidate run, outputs compared.

    bench_worker [JOBS]      (default 200)
*/
#include "worker_eval.h"
#include <czmq.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static json_t *
s_job (int variant)
{
    char source [512];
    //  A distinct constant per variant gives a distinct source, so a miss.
    snprintf (source, sizeof source,
              "void scale(const float *x, float *y, float a, int n) { for (int i = 0; i < n; i++) y[i] = a * x[i] + %d.0f * 0.0f; }",
              variant);
    json_error_t error;
    json_t *job = json_loads (
        "{\"task\": {\"name\": \"scale\", \"backend\": \"cpu\", \"args\": ["
        " {\"name\": \"x\", \"kind\": \"input\", \"dtype\": \"f32\", \"shape\": [\"N\"]},"
        " {\"name\": \"y\", \"kind\": \"output\", \"dtype\": \"f32\", \"shape\": [\"N\"]},"
        " {\"name\": \"a\", \"kind\": \"scalar\", \"dtype\": \"f32\", \"value\": 2.0},"
        " {\"name\": \"N\", \"kind\": \"scalar\", \"dtype\": \"i32\", \"value\": \"N\"}],"
        " \"sizes\": [{\"N\": 1}],"
        " \"reference\": {\"source\": \"void ref(const float *x, float *y, float a, int n) { for (int i = 0; i < n; i++) y[i] = a * x[i]; }\", \"launches\": [{\"kernel\": \"ref\"}]}},"
        " \"eval\": {\"trials\": 1, \"warmup\": 0, \"timed\": 1}}", 0, &error);
    json_object_set_new (job, "candidate", json_pack ("{s:s, s:[{s:s}]}", "source", source,
                                                      "launches", "kernel", "scale"));
    return job;
}

static int
s_cmp (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

static void
s_report (const char *what, double *ms, int n, double *run_ms)
{
    qsort (ms, (size_t) n, sizeof (double), s_cmp);
    qsort (run_ms, (size_t) n, sizeof (double), s_cmp);
    printf ("%-10s jobs %4d  wall per job: p50 %.2f ms  p90 %.2f ms  min %.2f ms   (run phase p50 %.2f ms)\n",
            what, n, ms [n / 2], ms [(n * 9) / 10], ms [0], run_ms [n / 2]);
}

int
main (int argc, char **argv)
{
    int jobs = argc > 1? atoi (argv [1]): 200;
    if (jobs < 1 || jobs > 1000000) {
        fprintf (stderr, "usage: bench_worker [JOBS]   (1 to 1000000, default 200)\n");
        return 2;
    }
    char dir [] = "/tmp/kgym-bench-XXXXXX";
    if (!mkdtemp (dir))
        return 1;
    char cache [256];
    snprintf (cache, sizeof cache, "%s/modules.sqlite", dir);
    worker_eval_config_t cfg;
    worker_eval_config_default (&cfg);
    cfg.backend = "cpu";
    cfg.cache_path = cache;
    char err [512];
    worker_eval_t *eval = worker_eval_new (&cfg, err, sizeof err);
    if (!eval) {
        fprintf (stderr, "bench_worker: %s\n", err);
        return 1;
    }
    printf ("bench_worker: %s, %ld cores\n", worker_eval_device (eval), sysconf (_SC_NPROCESSORS_ONLN));
    double *ms = calloc ((size_t) jobs, sizeof (double));
    double *run_ms = calloc ((size_t) jobs, sizeof (double));
    for (int pass = 0; pass < 2; pass++) {
        bool hit = pass == 0;
        int n = hit? jobs: jobs / 4 > 10? jobs / 4: 10;
        //  Warm the cache (and the page cache) once for the hit pass.
        if (hit)
            json_decref (worker_eval_run (eval, s_job (0)));
        for (int i = 0; i < n; i++) {
            json_t *job = s_job (hit? 0: 1000 + i);
            int64_t start = zclock_usecs ();
            json_t *result = worker_eval_run (eval, job);
            ms [i] = (double) (zclock_usecs () - start) / 1000.0;
            const char *status = json_string_value (json_object_get (result, "status"));
            if (!status || strcmp (status, "ok")) {
                fprintf (stderr, "bench_worker: job %d: %s\n", i, json_dumps (result, JSON_COMPACT));
                return 1;
            }
            run_ms [i] = 1000.0 * json_real_value (json_object_get (json_object_get (result, "phases"), "run_s"));
            json_decref (result);
            json_decref (job);
        }
        s_report (hit? "cache hit": "cache miss", ms, n, run_ms);
    }
    worker_eval_destroy (&eval);
    free (ms);
    free (run_ms);
    char command [300];
    snprintf (command, sizeof command, "rm -rf %s", dir);
    return system (command) == 0? 0: 1;
}
