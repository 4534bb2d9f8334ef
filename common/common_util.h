/*  common_util - the small things every module needs: a clock, an error
    setter, UTF-8 copies and sizes in words.  */
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

//  A size in bytes from text: a number (decimals allowed) with an optional
//  binary unit K, M, G or T (either case, optionally followed by "iB" or
//  "B"): "8G", "512MiB", "1.5g", "4096". 0, or -1 when the text is not such
//  a size, is 0, or does not fit in 64 bits.
int common_bytes_parse (const char *text, uint64_t *bytes);

//  Run fn on each of n parts (an array of n items of size bytes each), part
//  0 on this thread and the others on threads of their own; a part whose
//  thread cannot start runs here instead, so it never fails. At most 64 parts.
void common_run_parts (void *(*fn) (void *), void *parts, size_t size, unsigned n);

#endif
