/*  worker_outcome - what a backend found about one candidate.  */
#include "worker_outcome.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *s_status_names[] = {
    "ok", "compile_error", "incorrect", "runtime_error", "timeout", "invalid", "internal_error"
};

const char *
worker_status_name (worker_status_t status)
{
    if ((unsigned) status < sizeof s_status_names / sizeof s_status_names [0])
        return s_status_names [status];
    return "internal_error";
}

void
worker_outcome_init (worker_outcome_t *outcome)
{
    memset (outcome, 0, sizeof *outcome);
    outcome->status = STATUS_OK;
    outcome->baseline_kind = "reference";
    strcpy (outcome->sandbox, "{}");
}

void
worker_outcome_clear (worker_outcome_t *outcome)
{
    free (outcome->compile_log);
    json_decref (outcome->extra);
    worker_outcome_init (outcome);
}

void
worker_outcome_fail (worker_outcome_t *outcome, worker_status_t status, const char *fmt, ...)
{
    outcome->status = status;
    va_list args;
    va_start (args, fmt);
    vsnprintf (outcome->message, sizeof outcome->message, fmt, args);
    va_end (args);
}

static int
s_compare_double (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

void
worker_timing_from (worker_timing_t *timing, double *samples_us, size_t n)
{
    memset (timing, 0, sizeof *timing);
    if (n == 0)
        return;
    qsort (samples_us, n, sizeof (double), s_compare_double);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += samples_us [i];
    double mean = sum / (double) n;
    double var = 0;
    for (size_t i = 0; i < n; i++)
        var += (samples_us [i] - mean) * (samples_us [i] - mean);
    timing->n = (uint32_t) n;
    timing->mean_us = mean;
    timing->std_us = n > 1? sqrt (var / (double) (n - 1)): 0;
    timing->min_us = samples_us [0];
    timing->max_us = samples_us [n - 1];
    timing->median_us = n % 2? samples_us [n / 2]
                              : 0.5 * (samples_us [n / 2 - 1] + samples_us [n / 2]);
}
