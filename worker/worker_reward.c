/*  worker_reward - the gated reward of one graded candidate.  */
#include "worker_reward.h"
#include <math.h>

bool
worker_reward (const common_reward_t *params, worker_status_t status, double speedup,
               double *reward)
{
    switch (status) {
        case STATUS_OK: {
            //  Untimed (check-only) runs count as par with the baseline.
            double s = speedup > 0 && isfinite (speedup)? speedup: 1.0;
            double clipped = s < params->clip? s: params->clip;
            *reward = params->log_shape? log1p (clipped): clipped;
            return true;
        }
        case STATUS_COMPILE_ERROR: *reward = params->compile_error; return true;
        case STATUS_INCORRECT:     *reward = params->incorrect;     return true;
        case STATUS_RUNTIME_ERROR: *reward = params->runtime_error; return true;
        case STATUS_TIMEOUT:       *reward = params->timeout;       return true;
        case STATUS_INVALID:
        case STATUS_INTERNAL_ERROR:
        default:
            *reward = 0;
            return false;
    }
}
