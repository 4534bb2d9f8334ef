/*  common_compare - compare an output against the reference's.

    The correctness gate of the reward: the worker compares every output
    and inout tensor element by element. The rule is in common_compare.h;
    here it is applied in one pass that also gathers the error statistics
    shown to the user (largest errors, first failing elements).
*/
#include "common_compare.h"
#include <math.h>
#include <string.h>

//  True when got is within tolerance of expected.
static bool
s_close (double expected, double got, double atol, double rtol)
{
    if (isnan (expected) || isnan (got))
        return false;
    if (isinf (expected) || isinf (got))
        return expected == got;
    //  A difference that overflows to inf fails here too, as it should.
    return fabs (got - expected) <= atol + rtol * fabs (expected);
}

void
common_compare (common_dtype_t dtype, const void *expected, const void *got, size_t count,
                double atol, double rtol, common_compare_t *out)
{
    memset (out, 0, sizeof *out);
    out->count = count;
    for (size_t i = 0; i < count; i++) {
        double e = common_dtype_get (dtype, expected, i);
        double g = common_dtype_get (dtype, got, i);
        if (isfinite (e) && isfinite (g)) {
            double diff = fabs (g - e);
            if (diff > out->max_abs)
                out->max_abs = diff;
            if (e != 0) {
                double rel = diff / fabs (e);
                if (rel > out->max_rel)
                    out->max_rel = rel;
            }
        }
        if (s_close (e, g, atol, rtol))
            continue;
        if (out->nfirst < COMMON_COMPARE_KEEP) {
            out->first [out->nfirst].index = i;
            out->first [out->nfirst].expected = e;
            out->first [out->nfirst].got = g;
            out->nfirst++;
        }
        out->bad++;
    }
}
