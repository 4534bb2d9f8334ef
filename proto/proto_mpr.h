/*  proto_mpr - a bounded msgpack reader over a byte buffer.

    The one place that parses msgpack from the wire: proto_mpk builds jansson
    values with it and proto_msg reads headers with it. It never allocates
    and never trusts a length or count: a string longer than the bytes left
    is truncated input, and a map or array whose count could not fit in the
    bytes left (each entry takes at least one byte) is rejected before
    anybody sizes anything by it. Every call returns 0, or -2 on malformed
    or truncated input with a reason in the reader.
*/
#ifndef PROTO_MPR_H
#define PROTO_MPR_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

typedef enum {
    MPR_NIL = 0,
    MPR_BOOL,
    MPR_UINT,                   //  a non-negative integer (any int format)
    MPR_INT,                    //  a negative integer
    MPR_FLOAT,                  //  float32 or float64
    MPR_STR,
    MPR_BIN,
    MPR_ARRAY,
    MPR_MAP,
    MPR_EXT                     //  ext and timestamps (callers reject them)
} proto_mpr_type_t;

//  One decoded token. Strings point into the buffer (not NUL-terminated).
typedef struct {
    proto_mpr_type_t type;      //  what was read
    bool b;                     //  MPR_BOOL
    uint64_t u;                 //  MPR_UINT
    int64_t i;                  //  MPR_INT (and MPR_UINT when <= INT64_MAX)
    double f;                   //  MPR_FLOAT
    const char *str;            //  MPR_STR, MPR_BIN, MPR_EXT: the bytes
    uint32_t len;               //  MPR_STR, MPR_BIN, MPR_EXT: byte count
    uint32_t count;             //  MPR_ARRAY: items; MPR_MAP: key/value pairs
} proto_mpr_item_t;

//  The reader: a cursor over borrowed bytes.
typedef struct {
    const uint8_t *data;        //  the buffer (borrowed)
    size_t size;                //  its size
    size_t pos;                 //  next byte to read
    const char *reason;         //  why the last call returned -2 (static string)
} proto_mpr_t;

//  Start reading size bytes at data.
void proto_mpr_init (proto_mpr_t *self, const void *data, size_t size);

//  Read one token (a container's header, not its contents). 0 or -2.
int proto_mpr_next (proto_mpr_t *self, proto_mpr_item_t *item);

//  Skip one whole value, containers included, no deeper than max_depth. 0 or -2.
int proto_mpr_skip (proto_mpr_t *self, size_t max_depth);

//  Bytes not read yet.
size_t proto_mpr_left (const proto_mpr_t *self);

#endif
