/*  proto_mpk - msgpack <-> jansson bridge with hard limits.

    Job and result bodies travel as msgpack maps with the same keys as the
    JSON files. msgpack-c's C API has no limits of its own (a 5-byte map
    header asks for 4 billion entries), so decoding does not use its
    unpacker: it walks the bytes with the bounded reader proto_mpr (counts
    checked against the bytes left) after the buffer size is bounded, and
    rejects a document deeper, wider or longer than the limits before each
    allocation of the jansson tree. Binary strings decode as strings when
    valid UTF-8 (else rejected); extension types are rejected; non-string
    and duplicate map keys are rejected; integers beyond int64 and
    non-finite reals are rejected; trailing bytes are rejected. Encoding
    uses msgpack-c's packer.
*/
#ifndef PROTO_MPK_H
#define PROTO_MPK_H

#include <stddef.h>
#include <jansson.h>

typedef struct {
    size_t max_bytes;           //  whole document (default 16 MiB)
    size_t max_depth;           //  nesting of maps and arrays (default 32)
    size_t max_items;           //  entries of one map or array (default 65536)
    size_t max_total;           //  nodes in the whole document (default 1 << 20)
    size_t max_string;          //  bytes of one string (default 4 MiB)
} proto_mpk_limits_t;

//  Fill the defaults above.
void proto_mpk_limits_default (proto_mpk_limits_t *limits);

//  Decode data into a jansson value (new reference) or NULL with a reason.
json_t *proto_mpk_decode (const void *data, size_t size, const proto_mpk_limits_t *limits,
                          char *err, size_t errlen);

//  Encode a jansson value; returns 0 and a malloc'd buffer (caller frees), or
//  -1 (a real that is NaN/inf is encoded as msgpack float, which is fine;
//  -1 only on allocation failure).
int proto_mpk_encode (json_t *json, char **data, size_t *size);

#endif
