/*  common_hash - content hashes for cache keys (libsodium BLAKE2b-256).

    Every input goes in behind a typed delimiter (tag byte + 8-byte length),
    so ("ab","c") and ("a","bc") never collide. Keys are shown as 64 hex chars.
*/
#ifndef COMMON_HASH_H
#define COMMON_HASH_H

#include <stddef.h>
#include <stdint.h>

#define COMMON_HASH_BYTES 32

typedef struct common_hash_t common_hash_t;

//  Start a hash; NULL on failure (libsodium could not initialise).
common_hash_t *common_hash_new (void);
void common_hash_destroy (common_hash_t **self_p);

//  Add one field: tag names what it is ('S' source, 'O' option, ...).
void common_hash_add (common_hash_t *self, char tag, const void *data, size_t size);
void common_hash_add_str (common_hash_t *self, char tag, const char *text);
void common_hash_add_u64 (common_hash_t *self, char tag, uint64_t value);

//  Finish into digest; the object can not be reused afterwards.
void common_hash_final (common_hash_t *self, uint8_t digest[COMMON_HASH_BYTES]);

//  64 lowercase hex chars + NUL into hex[65].
void common_hash_hex (const uint8_t digest[COMMON_HASH_BYTES], char hex[2 * COMMON_HASH_BYTES + 1]);

#endif
