/*  common_hash - content hashes for cache keys (libsodium BLAKE2b-256).

    Each field is fed as: tag byte, 8-byte little-endian length, the bytes.
    The length makes field boundaries part of the hash, so no two different
    field lists can feed the same byte stream; the tag keeps a source from
    matching an option with the same text.
*/
#include "common_hash.h"
#include <sodium.h>
#include <assert.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct common_hash_t {
    crypto_generichash_state state;     //  BLAKE2b state (64-byte aligned)
    bool finished;                      //  final was called
};

common_hash_t *
common_hash_new (void)
{
    //  sodium_init is idempotent and thread-safe; < 0 means it failed.
    if (sodium_init () < 0)
        return NULL;
    //  The state wants 64-byte alignment, more than malloc promises.
    void *mem = NULL;
    if (posix_memalign (&mem, 64, sizeof (common_hash_t)) != 0)
        return NULL;
    common_hash_t *self = mem;
    memset (self, 0, sizeof *self);
    if (crypto_generichash_init (&self->state, NULL, 0, COMMON_HASH_BYTES) != 0) {
        free (self);
        return NULL;
    }
    return self;
}

void
common_hash_destroy (common_hash_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    sodium_memzero (*self_p, sizeof **self_p);
    free (*self_p);
    *self_p = NULL;
}

//  Feed v as 8 little-endian bytes.
static void
s_update_u64 (common_hash_t *self, uint64_t v)
{
    uint8_t le [8];
    for (int i = 0; i < 8; i++)
        le [i] = (uint8_t) (v >> (8 * i));
    crypto_generichash_update (&self->state, le, sizeof le);
}

void
common_hash_add (common_hash_t *self, char tag, const void *data, size_t size)
{
    assert (self && !self->finished);
    uint8_t t = (uint8_t) tag;
    crypto_generichash_update (&self->state, &t, 1);
    s_update_u64 (self, (uint64_t) size);
    if (size > 0)
        crypto_generichash_update (&self->state, data, size);
}

//  NULL hashes like "" (a missing option and an empty one build the same).
void
common_hash_add_str (common_hash_t *self, char tag, const char *text)
{
    common_hash_add (self, tag, text, text ? strlen (text) : 0);
}

void
common_hash_add_u64 (common_hash_t *self, char tag, uint64_t value)
{
    uint8_t le [8];
    for (int i = 0; i < 8; i++)
        le [i] = (uint8_t) (value >> (8 * i));
    common_hash_add (self, tag, le, sizeof le);
}

void
common_hash_final (common_hash_t *self, uint8_t digest [COMMON_HASH_BYTES])
{
    assert (self && !self->finished);
    crypto_generichash_final (&self->state, digest, COMMON_HASH_BYTES);
    self->finished = true;
}

void
common_hash_hex (const uint8_t digest [COMMON_HASH_BYTES], char hex [2 * COMMON_HASH_BYTES + 1])
{
    static const char digits [] = "0123456789abcdef";
    for (size_t i = 0; i < COMMON_HASH_BYTES; i++) {
        hex [2 * i] = digits [digest [i] >> 4];
        hex [2 * i + 1] = digits [digest [i] & 0xF];
    }
    hex [2 * COMMON_HASH_BYTES] = '\0';
}
