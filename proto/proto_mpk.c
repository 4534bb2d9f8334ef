/*  proto_mpk - msgpack <-> jansson bridge with hard limits.

    Decoding walks the bytes with the bounded reader (proto_mpr) and builds
    jansson values directly, checking size, depth, width, node count and
    string length before each allocation; encoding uses msgpack-c's packer
    into an sbuffer whose data is handed to the caller.
*/
#include "proto_mpk.h"
#include "proto_mpr.h"
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>

#define MPK_ENCODE_MAX_DEPTH 1024   //  jansson values can form cycles: stop somewhere

void
proto_mpk_limits_default (proto_mpk_limits_t *limits)
{
    limits->max_bytes = 16u << 20;
    limits->max_depth = 32;
    limits->max_items = 65536;
    limits->max_total = 1u << 20;
    limits->max_string = 4u << 20;
}

//  Decoding state shared by the recursion.
typedef struct {
    proto_mpr_t reader;             //  the cursor
    const proto_mpk_limits_t *limits;   //  borrowed
    size_t total;                   //  nodes built so far
    char *err;                      //  caller's reason buffer, or NULL
    size_t errlen;                  //  its size
} s_decoder_t;

static json_t *
s_fail (s_decoder_t *self, const char *fmt, ...)
{
    if (self->err && self->errlen) {
        char what [200];
        va_list args;
        va_start (args, fmt);
        vsnprintf (what, sizeof (what), fmt, args);
        va_end (args);
        snprintf (self->err, self->errlen, "msgpack: %s at byte %zu", what, self->reader.pos);
    }
    return NULL;
}

//  Check a string's length against the limit.
static int
s_check_string (s_decoder_t *self, const proto_mpr_item_t *item)
{
    if (item->len > self->limits->max_string) {
        s_fail (self, "string of %u bytes over the limit of %zu", item->len,
                self->limits->max_string);
        return -1;
    }
    return 0;
}

static json_t *s_decode_value (s_decoder_t *self, size_t depth);

//  The entries of a map whose header was just read.
static json_t *
s_decode_map (s_decoder_t *self, uint32_t count, size_t depth)
{
    json_t *object = json_object ();
    if (!object)
        return s_fail (self, "out of memory");
    for (uint32_t i = 0; i < count; i++) {
        proto_mpr_item_t key;
        if (proto_mpr_next (&self->reader, &key)) {
            json_decref (object);
            return s_fail (self, "%s", self->reader.reason);
        }
        if (key.type != MPR_STR) {
            json_decref (object);
            return s_fail (self, "map key is not a string");
        }
        if (s_check_string (self, &key)) {
            json_decref (object);
            return NULL;
        }
        if (json_object_getn (object, key.str, key.len)) {
            json_decref (object);
            return s_fail (self, "duplicate map key");
        }
        json_t *value = s_decode_value (self, depth + 1);
        if (!value) {
            json_decref (object);
            return NULL;
        }
        //  Validates the key as UTF-8; steals value either way.
        if (json_object_setn_new (object, key.str, key.len, value)) {
            json_decref (object);
            return s_fail (self, "map key is not valid UTF-8");
        }
    }
    return object;
}

static json_t *
s_decode_array (s_decoder_t *self, uint32_t count, size_t depth)
{
    json_t *array = json_array ();
    if (!array)
        return s_fail (self, "out of memory");
    for (uint32_t i = 0; i < count; i++) {
        json_t *value = s_decode_value (self, depth + 1);
        if (!value || json_array_append_new (array, value)) {
            json_decref (array);
            return value? s_fail (self, "out of memory"): NULL;
        }
    }
    return array;
}

//  One value; depth counts the containers around it.
static json_t *
s_decode_value (s_decoder_t *self, size_t depth)
{
    proto_mpr_item_t item;
    if (proto_mpr_next (&self->reader, &item))
        return s_fail (self, "%s", self->reader.reason);
    if (++self->total > self->limits->max_total)
        return s_fail (self, "more than %zu values", self->limits->max_total);

    json_t *value = NULL;
    switch (item.type) {
        case MPR_NIL:
            return json_null ();
        case MPR_BOOL:
            return json_boolean (item.b);
        case MPR_UINT:
            if (item.u > INT64_MAX)
                return s_fail (self, "integer %llu beyond int64", (unsigned long long) item.u);
            value = json_integer ((json_int_t) item.u);
            break;
        case MPR_INT:
            value = json_integer ((json_int_t) item.i);
            break;
        case MPR_FLOAT:
            //  jansson refuses NaN and infinities: so does the decoder
            value = json_real (item.f);
            if (!value)
                return s_fail (self, "real is not finite");
            return value;
        case MPR_STR:
        case MPR_BIN:
            if (s_check_string (self, &item))
                return NULL;
            value = json_stringn (item.str, item.len);
            if (!value)
                return s_fail (self, "string is not valid UTF-8");
            return value;
        case MPR_EXT:
            return s_fail (self, "extension types are not accepted");
        case MPR_ARRAY:
        case MPR_MAP:
            if (depth + 1 > self->limits->max_depth)
                return s_fail (self, "nested deeper than %zu", self->limits->max_depth);
            if (item.count > self->limits->max_items)
                return s_fail (self, "%u entries over the limit of %zu", item.count,
                               self->limits->max_items);
            return item.type == MPR_MAP? s_decode_map (self, item.count, depth)
                                       : s_decode_array (self, item.count, depth);
    }
    if (!value)
        return s_fail (self, "out of memory");
    return value;
}

json_t *
proto_mpk_decode (const void *data, size_t size, const proto_mpk_limits_t *limits,
                  char *err, size_t errlen)
{
    proto_mpk_limits_t defaults;
    if (!limits) {
        proto_mpk_limits_default (&defaults);
        limits = &defaults;
    }
    s_decoder_t decoder = { .limits = limits, .err = err, .errlen = errlen };
    proto_mpr_init (&decoder.reader, data, size);
    if (err && errlen)
        err [0] = 0;
    if (!data || size == 0)
        return s_fail (&decoder, "empty document");
    if (size > limits->max_bytes)
        return s_fail (&decoder, "document of %zu bytes over the limit of %zu",
                       size, limits->max_bytes);
    json_t *json = s_decode_value (&decoder, 0);
    if (json && proto_mpr_left (&decoder.reader) > 0) {
        json_decref (json);
        return s_fail (&decoder, "%zu trailing bytes", proto_mpr_left (&decoder.reader));
    }
    return json;
}

//  --------------------------------------------------------------------------
//  Encoding

static int
s_encode (msgpack_packer *pk, json_t *json, size_t depth)
{
    if (depth > MPK_ENCODE_MAX_DEPTH)
        return -1;
    switch (json_typeof (json)) {
        case JSON_NULL:
            return msgpack_pack_nil (pk);
        case JSON_TRUE:
            return msgpack_pack_true (pk);
        case JSON_FALSE:
            return msgpack_pack_false (pk);
        case JSON_INTEGER:
            return msgpack_pack_int64 (pk, (int64_t) json_integer_value (json));
        case JSON_REAL:
            return msgpack_pack_double (pk, json_real_value (json));
        case JSON_STRING: {
            size_t len = json_string_length (json);
            if (len > UINT32_MAX)
                return -1;
            if (msgpack_pack_str (pk, len))
                return -1;
            return msgpack_pack_str_body (pk, json_string_value (json), len);
        }
        case JSON_ARRAY: {
            size_t n = json_array_size (json);
            if (n > UINT32_MAX || msgpack_pack_array (pk, n))
                return -1;
            for (size_t i = 0; i < n; i++)
                if (s_encode (pk, json_array_get (json, i), depth + 1))
                    return -1;
            return 0;
        }
        case JSON_OBJECT: {
            size_t n = json_object_size (json);
            if (n > UINT32_MAX || msgpack_pack_map (pk, n))
                return -1;
            for (void *iter = json_object_iter (json); iter;
                 iter = json_object_iter_next (json, iter)) {
                size_t len = json_object_iter_key_len (iter);
                if (msgpack_pack_str (pk, len)
                ||  msgpack_pack_str_body (pk, json_object_iter_key (iter), len)
                ||  s_encode (pk, json_object_iter_value (iter), depth + 1))
                    return -1;
            }
            return 0;
        }
    }
    return -1;
}

int
proto_mpk_encode (json_t *json, char **data, size_t *size)
{
    if (!json || !data || !size)
        return -1;
    msgpack_sbuffer sbuf;
    msgpack_sbuffer_init (&sbuf);
    msgpack_packer pk;
    msgpack_packer_init (&pk, &sbuf, msgpack_sbuffer_write);
    if (s_encode (&pk, json, 0)) {
        msgpack_sbuffer_destroy (&sbuf);
        return -1;
    }
    *size = sbuf.size;
    *data = msgpack_sbuffer_release (&sbuf);
    if (!*data) {
        //  An empty buffer is impossible for a value, but never hand out NULL with 0.
        return -1;
    }
    return 0;
}
