/*  common_reward - the gated reward of one graded candidate (docs/results.md).

    Gate first, then shape: a failure gets its fixed (non-positive) value,
    a correct kernel min(speedup, clip) or log(1 + min(speedup, clip)), which
    is always > 0, so no failure ever outscores a correct kernel. invalid and
    internal_error are not the kernel's fault: they carry no reward at all,
    so a trainer is never taught by an infrastructure fault.

    One implementation for both sides: the worker computes a result's
    reward with it, and the broker checks with it that a worker's result
    carries the reward the job's own settings give (docs/protocol.md 5).
    The parameters (common_reward_t, with their defaults and limits) are
    read by common_task.
*/
#ifndef COMMON_REWARD_H
#define COMMON_REWARD_H

#include <stdbool.h>
#include "common_task.h"

//  Reward for a status (a docs/results.md name: "ok", "compile_error", ...)
//  and speedup (<= 0 or not finite means "not timed": counted as 1.0).
//  Returns false when the status carries no reward (invalid,
//  internal_error, or a name outside the list); *reward is then 0.
bool common_reward_for (const common_reward_t *params, const char *status, double speedup,
                        double *reward);

#endif
