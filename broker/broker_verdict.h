/*  broker_verdict - what a result says, checked against the protocol before
    the broker believes it (docs/protocol.md section 5, "Results are
    checked").

    A worker's RESULT body is the trainer's reward: with CURVE off, anyone
    who can reach the worker socket could claim {"status": "ok", "reward":
    99}. So before a result is stored, cached or forwarded the broker reads
    it in two steps:
      broker_verdict_parse: it decodes within the section-5 limits, is a
        map, its `status` is one of the seven of docs/results.md (and the
        RESULT header's, when said, is the same), `reward` and `speedup`
        are numbers or null (absent counts as null) of the kind the status
        calls for: ok: a reward, a speedup > 0 or null; compile_error,
        incorrect, runtime_error, timeout: a reward, no speedup; invalid,
        internal_error: neither.
      broker_verdict_judge: the reward is the one the job's own reward
        settings (broker_verdict_settings) give for that status and speedup
        (common_reward, the worker's own formula): a failure's fixed value
        exactly, an ok result's shaped speedup within BROKER_VERDICT_TOLERANCE
        (relative). A job whose body is not a map or whose `reward` settings
        are not valid cannot be graded: only invalid and internal_error fit.
    Results the broker makes itself (broker_verdict_make) pass both.

    Pure functions of their arguments: no state, no sockets.
*/
#ifndef BROKER_VERDICT_H
#define BROKER_VERDICT_H

#include <czmq.h>
#include <jansson.h>
#include <stdbool.h>
#include "common_task.h"

#define BROKER_VERDICT_TOLERANCE 1e-6   //  relative: an ok result's reward against the shaped speedup
#define BROKER_VERDICT_STATUSES 7       //  the statuses of docs/results.md

//  Those statuses, in the order of docs/results.md.
extern const char *const broker_verdict_statuses [BROKER_VERDICT_STATUSES];

//  What the broker reads of a result: read once per evaluation, handed to
//  every job that takes that result.
typedef struct {
    char status [16];           //  a docs/results.md status, "unknown", or "" when unreadable
    double reward, speedup;     //  NAN: null
} broker_verdict_t;

//  The job's reward settings (its body's `reward`, with the defaults of
//  docs/task-format.md), from the decoded body. 0, or -1 when the body is
//  not a map or its `reward` is not valid (a worker calls such a job
//  invalid).
int broker_verdict_settings (json_t *job, common_reward_t *params);

//  Step one: read a result body (data, size) and its RESULT header's status
//  ("" or NULL: not said) into verdict. 0, or -1 with what is wrong in err
//  (verdict then holds what could be read, status "" when none).
int broker_verdict_parse (const void *data, size_t size, const char *header_status,
                          broker_verdict_t *verdict, char *err, size_t errlen);

//  Step two: whether a parsed verdict carries the reward the job's settings
//  give (params NULL: the job cannot be graded). 0, or -1 with why in err.
int broker_verdict_judge (const broker_verdict_t *verdict, const common_reward_t *params,
                          char *err, size_t errlen);

//  The status's index in broker_verdict_statuses, or BROKER_VERDICT_STATUSES
//  when it is none of them (or NULL).
size_t broker_verdict_status_index (const char *status);

//  Whether the status carries a reward (ok and the kernel's failures), so
//  that judging it needs the job's settings.
bool broker_verdict_rewarded (const char *status);

//  A result the broker makes itself: {"status": "internal_error", "reward":
//  null, "speedup": null, "message": message}. A new frame, or NULL when out
//  of memory.
zframe_t *broker_verdict_make (const char *message);

//  A lenient read, for results that were checked already (the cache, a
//  kept result): what the map says, "unknown" for a status outside the
//  list, "" without one.
void broker_verdict_of (json_t *doc, broker_verdict_t *verdict);

#endif
