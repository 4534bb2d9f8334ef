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

worker_status_t
worker_status_from_name (const char *name)
{
    for (size_t i = 0; name && i < sizeof s_status_names / sizeof s_status_names [0]; i++)
        if (strcmp (name, s_status_names [i]) == 0)
            return (worker_status_t) i;
    return STATUS_INTERNAL_ERROR;
}
