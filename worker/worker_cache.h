/*  worker_cache - compiled modules in SQLite, keyed by content.

    One table of (key, key material, blob, log, size, last use). WAL,
    busy_timeout and short BEGIN IMMEDIATE transactions let every worker of a
    host share one file; any error is a miss; the file can be deleted at any
    time. Bounded: past max_bytes the least recently used entries go.
    Place: --cache PATH, else $KGYM_CACHE_DIR/modules.sqlite, else
    $XDG_CACHE_HOME/kgym/modules.sqlite, else ~/.cache/kgym/modules.sqlite.
*/
#ifndef WORKER_CACHE_H
#define WORKER_CACHE_H

#include <stdint.h>
#include <stddef.h>
#include "common_hash.h"

typedef struct worker_cache_t worker_cache_t;

#define WORKER_CACHE_DEFAULT_MAX (2ull << 30)

//  The path to use given an explicit one (may be NULL); malloc'd.
char *worker_cache_default_path (const char *explicit_path);

//  Open or create (directories too, mode 0700). NULL with a reason.
worker_cache_t *worker_cache_new (const char *path, uint64_t max_bytes, char *err, size_t errlen);
void worker_cache_destroy (worker_cache_t **self_p);

//  0 hit (*blob, *log malloc'd; log may be NULL), 1 miss (also on any error
//  or when the stored key material differs from key_material).
int worker_cache_get (worker_cache_t *self, const uint8_t key[COMMON_HASH_BYTES],
                      const char *key_material, uint8_t **blob, size_t *size, char **log);

//  Store (replace); evicts LRU entries past the bound. 0 or -1.
int worker_cache_put (worker_cache_t *self, const uint8_t key[COMMON_HASH_BYTES],
                      const char *key_material, const uint8_t *blob, size_t size, const char *log);

//  Entries, bytes, and this handle's hits and misses.
int worker_cache_stats (worker_cache_t *self, uint64_t *entries, uint64_t *bytes,
                        uint64_t *hits, uint64_t *misses);
int worker_cache_clear (worker_cache_t *self);
const char *worker_cache_path (worker_cache_t *self);

#endif
