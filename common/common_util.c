/*  common_util - the small things every module needs.  */
#include "common_util.h"
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
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

size_t
common_utf8_len (const unsigned char *p, size_t left)
{
    if (left == 0)
        return 0;
    if (p [0] < 0x80)
        return 1;
    size_t len = p [0] >= 0xF0 && p [0] <= 0xF4? 4: p [0] >= 0xE0? 3: p [0] >= 0xC2 && p [0] < 0xE0? 2: 0;
    if (len == 0 || p [0] > 0xF4 || len > left)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((p [i] & 0xC0) != 0x80)
            return 0;
    //  Overlong three- and four-byte forms, surrogates, beyond U+10FFFF.
    if ((p [0] == 0xE0 && p [1] < 0xA0) || (p [0] == 0xED && p [1] >= 0xA0)
    ||  (p [0] == 0xF0 && p [1] < 0x90) || (p [0] == 0xF4 && p [1] >= 0x90))
        return 0;
    return len;
}

void
common_utf8_copy (char *out, size_t size, const char *text)
{
    if (size == 0)
        return;
    const unsigned char *in = (const unsigned char *) text;
    size_t used = 0, left = strlen (text);
    while (left) {
        size_t len = common_utf8_len (in, left);
        if (used + (len? len: 1) > size - 1)
            break;
        if (len) {
            memcpy (out + used, in, len);
            used += len;
            in += len;
            left -= len;
        }
        else {
            out [used++] = '?';
            in++;
            left--;
        }
    }
    out [used] = 0;
}

int
common_bytes_parse (const char *text, uint64_t *bytes)
{
    //  Digits and one point only: no sign, blank, exponent, hex, "inf" or "nan".
    size_t digits = text? strspn (text, "0123456789."): 0;
    if (!digits || !isdigit ((unsigned char) text [0])
    ||  memchr (text, '.', digits) != memrchr (text, '.', digits))
        return -1;
    char *end;
    errno = 0;
    double value = strtod (text, &end);
    if (errno || end != text + digits)
        return -1;
    static const char units [] = "kmgt";
    const char *unit = *end? strchr (units, tolower ((unsigned char) *end)): NULL;
    if (unit) {
        value *= pow (1024, (double) (unit - units + 1));
        end++;
        if (strcmp (end, "iB") == 0 || strcmp (end, "B") == 0)
            end += strlen (end);
    }
    //  2^64 itself does not fit.
    if (*end || !isfinite (value) || value < 1 || value >= 18446744073709551616.0)
        return -1;
    *bytes = (uint64_t) value;
    return 0;
}

void
common_run_parts (void *(*fn) (void *), void *parts, size_t size, unsigned n)
{
    pthread_t ids [64];
    bool started [64] = { false };
    if (n > 64)
        n = 64;
    uint8_t *at = parts;
    for (unsigned i = 1; i < n; i++)
        started [i] = pthread_create (&ids [i], NULL, fn, at + i * size) == 0;
    if (n)
        fn (at);
    for (unsigned i = 1; i < n; i++)
        if (started [i])
            pthread_join (ids [i], NULL);
        else
            fn (at + i * size);
}
