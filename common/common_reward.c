/*  common_reward - the gated reward of one graded candidate.  */
#include "common_reward.h"
#include <math.h>
#include <string.h>

bool
common_reward_for (const common_reward_t *params, const char *status, double speedup,
                   double *reward)
{
    *reward = 0;
    if (!status)
        return false;
    if (strcmp (status, "ok") == 0) {
        //  Untimed (check-only) runs count as par with the baseline.
        double s = speedup > 0 && isfinite (speedup)? speedup: 1.0;
        double clipped = s < params->clip? s: params->clip;
        *reward = params->log_shape? log1p (clipped): clipped;
        return true;
    }
    const struct {
        const char *status;
        double value;
    } failures [] = {
        { "compile_error", params->compile_error }, { "incorrect", params->incorrect },
        { "runtime_error", params->runtime_error }, { "timeout", params->timeout }
    };
    for (size_t i = 0; i < sizeof failures / sizeof failures [0]; i++)
        if (strcmp (status, failures [i].status) == 0) {
            *reward = failures [i].value;
            return true;
        }
    return false;       //  invalid, internal_error, or not a status at all
}
