/*  broker_cache - the broker's result cache: graded results kept in memory,
    keyed by a canonical hash of the job, so an identical job is answered at
    SUBMIT without a dispatch.

    What the key covers. BLAKE2b-256 (common_hash) over a format version,
    the backend name and the job's content, every value behind a typed
    delimiter: top-level `task`, `candidate`, `eval`, `reward` and any other
    key the job carries (whatever may change the verdict is in the key),
    with object keys sorted at every depth, so key order never matters.
    Integers and reals hash as different types: 1 and 1.0 may mean
    different things to the worker (an integer option against a tolerance).
    Left out, because they do not change the verdict:
    - `tag`, `group`, `trajectory`: the caller's bookkeeping, echoed only.
    - `eval.seed`: results for different seeds of the same kernel are the
      same verdict in expectation; seeds only pick the random inputs. A
      trainer that wants a fresh evaluation asks for it with the refresh
      policy (the broker then removes the entry and grades again).
    - An `eval` or `reward` object left empty (after the seed) is the same
      as none: both mean "the defaults".

    The device is part of the entry's identity beside the key: timings and
    speedups (hence rewards) are per device model, so a result graded on an
    H100 never answers for an H200. The broker passes the device model
    (not a per-board name) and may probe several with broker_cache_has.

    Bounded by entries and by bytes, evicted least recently used; a get
    that hits makes its entry the most recent. Every operation is O(1): a
    hash table over (key, device) plus an intrusive LRU list. Memory only:
    a broker restart starts cold. One thread owns an instance (the
    broker's actor); no locking.
*/
#ifndef BROKER_CACHE_H
#define BROKER_CACHE_H

#include <czmq.h>
#include <jansson.h>
#include <stdint.h>
#include <stdbool.h>

#define BROKER_CACHE_KEY_BYTES 32

//  What one entry costs beyond its result bytes and its device name, in the
//  byte count: the entry record, its 64-char hex key and the hash table's
//  slot, rounded up. An entry of size bytes on device d counts
//  size + strlen (d) + BROKER_CACHE_ENTRY_OVERHEAD toward max_bytes.
#define BROKER_CACHE_ENTRY_OVERHEAD 192

typedef struct broker_cache_t broker_cache_t;

typedef struct {
    size_t entries;             //  entries held now
    size_t bytes;               //  their cost: result + device + BROKER_CACHE_ENTRY_OVERHEAD each
    size_t max_entries;         //  limit on entries (0 = the cache is off)
    size_t max_bytes;           //  limit on bytes (0 = no byte limit)
    uint64_t hits;              //  broker_cache_get that found an entry
    uint64_t misses;            //  broker_cache_get that did not
    uint64_t inserts;           //  puts that made a new entry
    uint64_t replaced;          //  puts that replaced an existing entry's result
    uint64_t evictions;         //  entries dropped to stay within the limits
    uint64_t coalesced;         //  jobs the broker joined to one in flight
} broker_cache_stats_t;

//  A cache of at most max_entries entries and max_bytes bytes (0 = no byte
//  limit). max_entries 0 = the cache is off: every get misses without
//  counting, put keeps nothing. NULL when out of memory.
broker_cache_t *broker_cache_new (size_t max_entries, size_t max_bytes);

void broker_cache_destroy (broker_cache_t **self_p);

//  False when the cache is off (max_entries 0).
bool broker_cache_enabled (broker_cache_t *self);

//  The canonical key of a job for a backend (see the top of this file).
//  Does not modify job. 0, or -1 with a reason in err when job is not an
//  object, lacks task/candidate objects, nests deeper than 64 or memory
//  runs out.
int broker_cache_key (json_t *job, const char *backend, uint8_t key [BROKER_CACHE_KEY_BYTES],
                      char *err, size_t errlen);

//  A copy of the cached result for (key, device) as a new frame, or NULL;
//  a hit makes the entry most recently used. Counts a hit or a miss (not
//  when the cache is off). A NULL device is "".
zframe_t *broker_cache_get (broker_cache_t *self, const uint8_t key [BROKER_CACHE_KEY_BYTES],
                            const char *device);

//  Whether (key, device) is held, without counting or touching recency (for
//  the broker to probe several devices).
bool broker_cache_has (broker_cache_t *self, const uint8_t key [BROKER_CACHE_KEY_BYTES],
                       const char *device);

//  Keep a copy of result for (key, device), replacing an older one, as the
//  most recently used; then evict least recently used entries until within
//  both limits. 0 kept; 1 not kept: the cache is off, or the entry alone
//  costs more than max_bytes (an older entry for (key, device) is removed
//  then: it no longer is the newest verdict); -1 out of memory (the cache
//  is unchanged).
int broker_cache_put (broker_cache_t *self, const uint8_t key [BROKER_CACHE_KEY_BYTES],
                      const char *device, const void *result, size_t size);

//  Forget one entry (a refresh job re-grades it). 0 removed, -1 none held.
int broker_cache_remove (broker_cache_t *self, const uint8_t key [BROKER_CACHE_KEY_BYTES],
                         const char *device);

//  Count one job the broker joined to an identical one in flight (the
//  broker coalesces; the cache only keeps the count beside its own).
void broker_cache_count_coalesced (broker_cache_t *self);

//  The counters and limits, copied into stats.
void broker_cache_stats (broker_cache_t *self, broker_cache_stats_t *stats);

//  The stats as a new JSON object: entries, bytes, max_entries, max_bytes,
//  hits, misses, inserts, replaced, evictions, coalesced and hit_rate
//  (hits / (hits + misses), 0 when there were none). NULL when out of memory.
json_t *broker_cache_stats_json (broker_cache_t *self);

//  A result body marked as served from the cache: the msgpack map with
//  "cached": true and, when coalesced, "coalesced": true; with tag (a
//  string or null, borrowed) its "tag" set to that, since the kept body
//  echoes the first job's tag, not this one's; every other key kept. A new
//  frame, or NULL when the body is not a msgpack map (the caller then sends
//  it unmarked) or memory runs out. With map, the marked map too (a new
//  reference), so a caller that reads it does not decode it again.
zframe_t *broker_cache_mark (const void *result, size_t size, bool coalesced, json_t *tag,
                             json_t **map);

//  Whether a result with this status may be cached: every status of
//  docs/results.md except "internal_error" (an infrastructure fault must be
//  retried, not remembered) and "timeout" (load on the worker can cause
//  it: one busy moment must not answer for the task the rest of the run).
//  Unknown, NULL or "" statuses: false.
bool broker_cache_status_cacheable (const char *status);

#endif
