/*  common_util - the two small things every module needs: a clock and an
    error setter.  */
#ifndef COMMON_UTIL_H
#define COMMON_UTIL_H

#include <stddef.h>
#include <stdint.h>

//  printf into err (errlen bytes, always NUL-terminated); nothing when err is NULL or errlen 0.
void common_seterr (char *err, size_t errlen, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

//  Monotonic clock in seconds / nanoseconds.
double common_now_s (void);
uint64_t common_now_ns (void);

#endif
