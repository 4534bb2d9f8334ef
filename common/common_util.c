/*  common_util - the two small things every module needs.  */
#include "common_util.h"
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
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

//  Length of the valid UTF-8 sequence (RFC 3629, as jansson checks it) at
//  s, or 0 when s does not start one.
static size_t
s_utf8_len (const unsigned char *s)
{
    unsigned char c = s [0];
    if (c < 0x80)
        return 1;
    if (c < 0xC2 || c > 0xF4)
        return 0;
    size_t more = c < 0xE0? 1: c < 0xF0? 2: 3;
    uint32_t code = c & (more == 1? 0x1F: more == 2? 0x0F: 0x07);
    for (size_t i = 1; i <= more; i++) {
        if ((s [i] & 0xC0) != 0x80)     //  also stops at the terminating NUL
            return 0;
        code = (code << 6) | (s [i] & 0x3F);
    }
    if ((more == 2 && code < 0x800) || (more == 3 && code < 0x10000)
    ||  (code >= 0xD800 && code <= 0xDFFF) || code > 0x10FFFF)
        return 0;
    return more + 1;
}

void
common_utf8_copy (char *out, size_t size, const char *text)
{
    if (size == 0)
        return;
    const unsigned char *in = (const unsigned char *) text;
    size_t used = 0;
    while (*in) {
        size_t len = s_utf8_len (in);
        if (used + (len? len: 1) > size - 1)
            break;
        if (len) {
            memcpy (out + used, in, len);
            used += len;
            in += len;
        }
        else {
            out [used++] = '?';
            in++;
        }
    }
    out [used] = 0;
}
