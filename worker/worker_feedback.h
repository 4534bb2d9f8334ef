/*  worker_feedback - a short plain-text message about a result, for a model.

    A multi-turn policy reads this to revise its kernel: the compiler's first
    errors with the offending source lines; for a wrong result which output,
    how many elements, the first few with their coordinates, expected and
    got, and whether they cluster at the tail of a dimension (the classic
    missing bound check); for a fault or timeout what happened; for a
    correct kernel the speedup, where the time goes and the single most
    useful hint the profile supports. Written from the result object alone
    (plus the job, for shapes and source lines), so it also works on
    recorded results.
*/
#ifndef WORKER_FEEDBACK_H
#define WORKER_FEEDBACK_H

#include <stddef.h>
#include <jansson.h>
#include "common_task.h"

#define WORKER_FEEDBACK_DEFAULT 2048

//  The feedback text (malloc'd, at most max_bytes bytes plus NUL, cut at a
//  line or character boundary). job may be NULL. Never NULL except out of memory.
char *worker_feedback (json_t *result, const common_job_t *job, size_t max_bytes);

#endif
