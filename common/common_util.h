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

//  Copy text into out (size bytes with the NUL) as valid UTF-8 cut at a
//  character boundary, each byte that starts no valid sequence as '?': a
//  string jansson always takes, from a peer's arbitrary bytes.
void common_utf8_copy (char *out, size_t size, const char *text);

//  Length of the valid UTF-8 sequence (RFC 3629, as jansson checks it) at p
//  within left bytes: 1 to 4, or 0 when none starts there.
size_t common_utf8_len (const unsigned char *p, size_t left);
uint64_t common_now_ns (void);

#endif
