/*  common_util - the two small things every module needs.  */
#include "common_util.h"
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

void
common_seterr (char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list args;
    va_start (args, fmt);
    vsnprintf (err, errlen, fmt, args);
    va_end (args);
}

double
common_now_s (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

uint64_t
common_now_ns (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
}
