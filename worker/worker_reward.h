/*  worker_reward - the gated reward of one graded candidate.

    Gate first, then shape: a failure gets its fixed (non-positive) value,
    a correct kernel min(speedup, clip) or log(1 + min(speedup, clip)), which
    is always > 0, so no failure ever outscores a correct kernel. invalid and
    internal_error are not the kernel's fault: they carry no reward at all
    (has_reward false), so a trainer is never taught by an infrastructure
    fault.
*/
#ifndef WORKER_REWARD_H
#define WORKER_REWARD_H

#include <stdbool.h>
#include "common_task.h"
#include "worker_outcome.h"

//  Reward for status and speedup (speedup <= 0 means "not timed": counted
//  as 1.0). Returns false when the status carries no reward.
bool worker_reward (const common_reward_t *params, worker_status_t status, double speedup,
                    double *reward);

#endif
