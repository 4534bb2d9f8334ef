/*  proto_mpr - a bounded msgpack reader over a byte buffer.

    Reads the msgpack format (github.com/msgpack/msgpack/blob/master/spec.md)
    token by token. Lengths are checked against the bytes left before a
    pointer is handed out; container counts are checked against the least
    bytes their entries could take, so a 5-byte header claiming 2^32 entries
    fails here instead of sizing an allocation somewhere else.
*/
#include "proto_mpr.h"
#include <string.h>

void
proto_mpr_init (proto_mpr_t *self, const void *data, size_t size)
{
    self->data = (const uint8_t *) data;
    self->size = data ? size : 0;
    self->pos = 0;
    self->reason = NULL;
}

size_t
proto_mpr_left (const proto_mpr_t *self)
{
    return self->size - self->pos;
}

static int
s_fail (proto_mpr_t *self, const char *reason)
{
    self->reason = reason;
    return -2;
}

//  Big-endian unsigned of n bytes (1, 2, 4 or 8); caller checked the length.
static uint64_t
s_be (const uint8_t *p, size_t n)
{
    uint64_t value = 0;
    for (size_t i = 0; i < n; i++)
        value = (value << 8) | p [i];
    return value;
}

//  Take n bytes as a big-endian unsigned.
static int
s_take_be (proto_mpr_t *self, size_t n, uint64_t *value)
{
    if (proto_mpr_left (self) < n)
        return s_fail (self, "truncated");
    *value = s_be (self->data + self->pos, n);
    self->pos += n;
    return 0;
}

//  Take len bytes of payload (string, bin, ext).
static int
s_take_bytes (proto_mpr_t *self, uint64_t len, proto_mpr_item_t *item)
{
    if (proto_mpr_left (self) < len)
        return s_fail (self, "truncated");
    item->str = (const char *) self->data + self->pos;
    item->len = (uint32_t) len;
    self->pos += len;
    return 0;
}

//  A container of count entries, each at least min_bytes long.
static int
s_container (proto_mpr_t *self, proto_mpr_item_t *item, proto_mpr_type_t type,
             uint64_t count, size_t min_bytes)
{
    if (count > proto_mpr_left (self) / min_bytes)
        return s_fail (self, type == MPR_MAP? "map count exceeds the bytes left"
                                            : "array count exceeds the bytes left");
    item->type = type;
    item->count = (uint32_t) count;
    return 0;
}

static void
s_set_uint (proto_mpr_item_t *item, uint64_t value)
{
    item->type = MPR_UINT;
    item->u = value;
    item->i = value <= INT64_MAX? (int64_t) value: INT64_MAX;
}

static void
s_set_int (proto_mpr_item_t *item, int64_t value)
{
    if (value >= 0)
        s_set_uint (item, (uint64_t) value);
    else {
        item->type = MPR_INT;
        item->i = value;
    }
}

int
proto_mpr_next (proto_mpr_t *self, proto_mpr_item_t *item)
{
    memset (item, 0, sizeof (*item));
    if (proto_mpr_left (self) < 1)
        return s_fail (self, "truncated");
    uint8_t tag = self->data [self->pos++];
    uint64_t value;

    if (tag <= 0x7f) {
        s_set_uint (item, tag);
        return 0;
    }
    if (tag >= 0xe0) {
        s_set_int (item, (int8_t) tag);
        return 0;
    }
    if (tag >= 0x80 && tag <= 0x8f)
        return s_container (self, item, MPR_MAP, tag & 0x0f, 2);
    if (tag >= 0x90 && tag <= 0x9f)
        return s_container (self, item, MPR_ARRAY, tag & 0x0f, 1);
    if (tag >= 0xa0 && tag <= 0xbf) {
        item->type = MPR_STR;
        return s_take_bytes (self, tag & 0x1f, item);
    }
    switch (tag) {
        case 0xc0:
            item->type = MPR_NIL;
            return 0;
        case 0xc2:
        case 0xc3:
            item->type = MPR_BOOL;
            item->b = tag == 0xc3;
            return 0;
        case 0xc4: case 0xc5: case 0xc6:        //  bin 8/16/32
            if (s_take_be (self, (size_t) 1 << (tag - 0xc4), &value))
                return -2;
            item->type = MPR_BIN;
            return s_take_bytes (self, value, item);
        case 0xc7: case 0xc8: case 0xc9:        //  ext 8/16/32: length, type, data
            if (s_take_be (self, (size_t) 1 << (tag - 0xc7), &value))
                return -2;
            if (proto_mpr_left (self) < 1)
                return s_fail (self, "truncated");
            self->pos++;
            item->type = MPR_EXT;
            return s_take_bytes (self, value, item);
        case 0xca: {
            if (s_take_be (self, 4, &value))
                return -2;
            uint32_t bits = (uint32_t) value;
            float f;
            memcpy (&f, &bits, sizeof (f));
            item->type = MPR_FLOAT;
            item->f = f;
            return 0;
        }
        case 0xcb: {
            if (s_take_be (self, 8, &value))
                return -2;
            double d;
            memcpy (&d, &value, sizeof (d));
            item->type = MPR_FLOAT;
            item->f = d;
            return 0;
        }
        case 0xcc: case 0xcd: case 0xce: case 0xcf:     //  uint 8/16/32/64
            if (s_take_be (self, (size_t) 1 << (tag - 0xcc), &value))
                return -2;
            s_set_uint (item, value);
            return 0;
        case 0xd0: case 0xd1: case 0xd2: case 0xd3: {   //  int 8/16/32/64
            size_t n = (size_t) 1 << (tag - 0xd0);
            if (s_take_be (self, n, &value))
                return -2;
            int64_t signed_value;
            if (n == 1)
                signed_value = (int8_t) value;
            else
            if (n == 2)
                signed_value = (int16_t) value;
            else
            if (n == 4)
                signed_value = (int32_t) value;
            else
                signed_value = (int64_t) value;
            s_set_int (item, signed_value);
            return 0;
        }
        case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8:   //  fixext 1..16
            if (proto_mpr_left (self) < 1)
                return s_fail (self, "truncated");
            self->pos++;
            item->type = MPR_EXT;
            return s_take_bytes (self, (uint64_t) 1 << (tag - 0xd4), item);
        case 0xd9: case 0xda: case 0xdb:        //  str 8/16/32
            if (s_take_be (self, (size_t) 1 << (tag - 0xd9), &value))
                return -2;
            item->type = MPR_STR;
            return s_take_bytes (self, value, item);
        case 0xdc: case 0xdd:                   //  array 16/32
            if (s_take_be (self, tag == 0xdc? 2: 4, &value))
                return -2;
            return s_container (self, item, MPR_ARRAY, value, 1);
        case 0xde: case 0xdf:                   //  map 16/32
            if (s_take_be (self, tag == 0xde? 2: 4, &value))
                return -2;
            return s_container (self, item, MPR_MAP, value, 2);
        default:                                //  0xc1: never used
            return s_fail (self, "invalid type byte");
    }
}

int
proto_mpr_skip (proto_mpr_t *self, size_t max_depth)
{
    proto_mpr_item_t item;
    if (proto_mpr_next (self, &item))
        return -2;
    if (item.type != MPR_ARRAY && item.type != MPR_MAP)
        return 0;
    if (max_depth == 0)
        return s_fail (self, "nested too deep");
    //  Each entry consumes at least one byte, so this loop is bounded by size.
    uint64_t entries = item.type == MPR_MAP? 2 * (uint64_t) item.count: item.count;
    for (uint64_t i = 0; i < entries; i++)
        if (proto_mpr_skip (self, max_depth - 1))
            return -2;
    return 0;
}
