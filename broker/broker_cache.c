/*  broker_cache - the broker's result cache (see broker_cache.h).

    A zhashx from "hex key \n device" to an entry, and an intrusive doubly
    linked list of the same entries from most to least recently used. An
    entry is one allocation holding its table key and its result bytes, and
    the table borrows the key from the entry, so a put costs one malloc and
    a get one copy of the result into the frame it returns.

    The job key is hashed straight from the jansson tree (no JSON text is
    built): each value goes in behind a type tag, objects as their count
    followed by key/value pairs in byte order of the keys.
*/
#include "broker_cache.h"
#include "common_hash.h"
#include "proto_mpk.h"
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

//  Bump when what the key covers or how it is fed changes: old keys then
//  stop matching instead of answering for jobs they were not made from.
#define CACHE_KEY_FORMAT "kgym-result-cache/1"
#define CACHE_MAX_DEPTH 64          //  job nesting the key walks (proto_mpk stops at 32)
#define CACHE_HEX_BYTES (2 * BROKER_CACHE_KEY_BYTES)
#define CACHE_ID_STACK 256          //  an id that fits is built on the stack for lookups

typedef struct _s_entry_t s_entry_t;

//  One cached result, in the table and in the LRU list.
struct _s_entry_t {
    s_entry_t *newer;           //  toward the most recently used end, NULL at the head
    s_entry_t *older;           //  toward the least recently used end, NULL at the tail
    size_t size;                //  result bytes
    size_t cost;                //  what it counts toward bytes
    uint8_t *data;              //  the result, inside this allocation after id
    char id [];                 //  "hex key \n device": the table's key
};

struct broker_cache_t {
    zhashx_t *table;            //  id -> entry (borrows the id, owns nothing)
    s_entry_t *head;            //  most recently used, or NULL
    s_entry_t *tail;            //  least recently used, or NULL
    broker_cache_stats_t stats; //  counts, limits and what is held
};

//  --------------------------------------------------------------------------
//  The LRU list

static void
s_unlink (broker_cache_t *self, s_entry_t *entry)
{
    if (entry->newer)
        entry->newer->older = entry->older;
    else
        self->head = entry->older;
    if (entry->older)
        entry->older->newer = entry->newer;
    else
        self->tail = entry->newer;
    entry->newer = entry->older = NULL;
}

static void
s_push_head (broker_cache_t *self, s_entry_t *entry)
{
    entry->newer = NULL;
    entry->older = self->head;
    if (self->head)
        self->head->newer = entry;
    else
        self->tail = entry;
    self->head = entry;
}

//  Take an entry out of the table and the list, and free it.
static void
s_drop (broker_cache_t *self, s_entry_t *entry)
{
    s_unlink (self, entry);
    zhashx_delete (self->table, entry->id);
    self->stats.entries--;
    self->stats.bytes -= entry->cost;
    free (entry);
}

//  --------------------------------------------------------------------------
//  Table ids

//  The table key of (key, device) into buf when it fits, else a new string
//  (the caller frees it when it is not buf); NULL when out of memory.
static char *
s_id (char *buf, size_t bufsize, const uint8_t key [BROKER_CACHE_KEY_BYTES], const char *device)
{
    size_t need = CACHE_HEX_BYTES + 1 + strlen (device) + 1;
    char *id = need <= bufsize? buf: (char *) malloc (need);
    if (!id)
        return NULL;
    common_hash_hex (key, id);
    id [CACHE_HEX_BYTES] = '\n';
    memcpy (id + CACHE_HEX_BYTES + 1, device, need - CACHE_HEX_BYTES - 1);
    return id;
}

//  The entry for (key, device) or NULL (also when out of memory: a miss).
static s_entry_t *
s_lookup (broker_cache_t *self, const uint8_t key [BROKER_CACHE_KEY_BYTES], const char *device)
{
    char buf [CACHE_ID_STACK];
    char *id = s_id (buf, sizeof buf, key, device? device: "");
    if (!id)
        return NULL;
    s_entry_t *entry = (s_entry_t *) zhashx_lookup (self->table, id);
    if (id != buf)
        free (id);
    return entry;
}

//  --------------------------------------------------------------------------
//  Lifecycle

broker_cache_t *
broker_cache_new (size_t max_entries, size_t max_bytes)
{
    broker_cache_t *self = (broker_cache_t *) calloc (1, sizeof (broker_cache_t));
    if (!self)
        return NULL;
    self->table = zhashx_new ();
    if (!self->table) {
        free (self);
        return NULL;
    }
    //  Entries own their ids and are freed by hand (s_drop), never by the table.
    zhashx_set_key_duplicator (self->table, NULL);
    zhashx_set_key_destructor (self->table, NULL);
    zhashx_set_destructor (self->table, NULL);
    self->stats.max_entries = max_entries;
    self->stats.max_bytes = max_bytes;
    return self;
}

void
broker_cache_destroy (broker_cache_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    broker_cache_t *self = *self_p;
    s_entry_t *entry = self->head;
    while (entry) {
        s_entry_t *older = entry->older;
        free (entry);
        entry = older;
    }
    zhashx_destroy (&self->table);
    free (self);
    *self_p = NULL;
}

bool
broker_cache_enabled (broker_cache_t *self)
{
    return self->stats.max_entries > 0;
}

//  --------------------------------------------------------------------------
//  The job key

static int
s_fail (char *err, size_t errlen, const char *reason)
{
    if (err && errlen)
        snprintf (err, errlen, "%s", reason);
    return -1;
}

//  One member of an object, for sorting.
typedef struct {
    const char *key;            //  borrowed from the object
    size_t len;                 //  key bytes (jansson keys may hold NUL)
    json_t *value;              //  borrowed
} s_member_t;

//  Byte order of keys; a key sorts before the longer keys it prefixes.
static int
s_member_cmp (const void *a, const void *b)
{
    const s_member_t *x = (const s_member_t *) a;
    const s_member_t *y = (const s_member_t *) b;
    int rc = memcmp (x->key, y->key, x->len < y->len? x->len: y->len);
    if (rc)
        return rc;
    return x->len < y->len? -1: x->len > y->len? 1: 0;
}

static bool
s_member_is (const s_member_t *member, const char *name)
{
    return member->len == strlen (name) && memcmp (member->key, name, member->len) == 0;
}

//  The members of object except those named in skip (NULL-terminated),
//  sorted, into a new array (the caller frees; NULL for none); -1 when out
//  of memory.
static int
s_members (json_t *object, const char *const *skip, s_member_t **members_p, size_t *count_p)
{
    size_t size = json_object_size (object);
    s_member_t *members = size? (s_member_t *) malloc (size * sizeof (s_member_t)): NULL;
    if (size && !members)
        return -1;
    size_t count = 0;
    void *iter = json_object_iter (object);
    while (iter && count < size) {
        s_member_t member = {
            json_object_iter_key (iter), json_object_iter_key_len (iter),
            json_object_iter_value (iter)
        };
        bool skipped = false;
        for (const char *const *name = skip; name && *name && !skipped; name++)
            skipped = s_member_is (&member, *name);
        if (!skipped)
            members [count++] = member;
        iter = json_object_iter_next (object, iter);
    }
    if (count > 1)
        qsort (members, count, sizeof (s_member_t), s_member_cmp);
    *members_p = members;
    *count_p = count;
    return 0;
}

static int s_hash_value (common_hash_t *hash, json_t *value, int depth, char *err, size_t errlen);

//  An object as its member count, then each key and value in key order.
static int
s_hash_members (common_hash_t *hash, s_member_t *members, size_t count, int depth,
                char *err, size_t errlen)
{
    common_hash_add_u64 (hash, 'o', count);
    for (size_t i = 0; i < count; i++) {
        common_hash_add (hash, 'k', members [i].key, members [i].len);
        if (s_hash_value (hash, members [i].value, depth + 1, err, errlen))
            return -1;
    }
    return 0;
}

//  One value behind its type tag. Integers and reals get different tags,
//  and reals go in as their IEEE bits, so 1, 1.0 and 1.0000000000000002
//  are three different keys.
static int
s_hash_value (common_hash_t *hash, json_t *value, int depth, char *err, size_t errlen)
{
    if (depth > CACHE_MAX_DEPTH)
        return s_fail (err, errlen, "job nested too deep for a cache key");
    switch (json_typeof (value)) {
        case JSON_OBJECT: {
            s_member_t *members;
            size_t count;
            if (s_members (value, NULL, &members, &count))
                return s_fail (err, errlen, "out of memory");
            int rc = s_hash_members (hash, members, count, depth, err, errlen);
            free (members);
            return rc;
        }
        case JSON_ARRAY: {
            size_t size = json_array_size (value);
            common_hash_add_u64 (hash, 'a', size);
            for (size_t i = 0; i < size; i++)
                if (s_hash_value (hash, json_array_get (value, i), depth + 1, err, errlen))
                    return -1;
            return 0;
        }
        case JSON_STRING:
            common_hash_add (hash, 's', json_string_value (value), json_string_length (value));
            return 0;
        case JSON_INTEGER:
            common_hash_add_u64 (hash, 'i', (uint64_t) json_integer_value (value));
            return 0;
        case JSON_REAL: {
            double real = json_real_value (value);
            uint64_t bits;
            memcpy (&bits, &real, sizeof bits);
            common_hash_add_u64 (hash, 'r', bits);
            return 0;
        }
        case JSON_TRUE:
            common_hash_add (hash, 't', NULL, 0);
            return 0;
        case JSON_FALSE:
            common_hash_add (hash, 'f', NULL, 0);
            return 0;
        case JSON_NULL:
            common_hash_add (hash, 'n', NULL, 0);
            return 0;
    }
    return s_fail (err, errlen, "unknown JSON type");
}

//  True when a top-level eval or reward object holds nothing but what the
//  key leaves out: it then means the same as no object at all.
static bool
s_means_defaults (const s_member_t *member)
{
    if (!json_is_object (member->value))
        return false;
    if (s_member_is (member, "reward"))
        return json_object_size (member->value) == 0;
    if (s_member_is (member, "eval")) {
        size_t size = json_object_size (member->value);
        return size == 0 || (size == 1 && json_object_get (member->value, "seed"));
    }
    return false;
}

int
broker_cache_key (json_t *job, const char *backend, uint8_t key [BROKER_CACHE_KEY_BYTES],
                  char *err, size_t errlen)
{
    if (!json_is_object (job))
        return s_fail (err, errlen, "job is not an object");
    if (!json_is_object (json_object_get (job, "task")))
        return s_fail (err, errlen, "job has no task object");
    if (!json_is_object (json_object_get (job, "candidate")))
        return s_fail (err, errlen, "job has no candidate object");

    static const char *const top_skip [] = { "tag", "group", "trajectory", NULL };
    static const char *const eval_skip [] = { "seed", NULL };
    s_member_t *members;
    size_t count;
    if (s_members (job, top_skip, &members, &count))
        return s_fail (err, errlen, "out of memory");
    size_t kept = 0;
    for (size_t i = 0; i < count; i++)
        if (!s_means_defaults (&members [i]))
            members [kept++] = members [i];

    common_hash_t *hash = common_hash_new ();
    if (!hash) {
        free (members);
        return s_fail (err, errlen, "cannot start a hash");
    }
    common_hash_add_str (hash, 'V', CACHE_KEY_FORMAT);
    common_hash_add_str (hash, 'B', backend);
    common_hash_add_u64 (hash, 'o', kept);
    int rc = 0;
    for (size_t i = 0; i < kept && rc == 0; i++) {
        common_hash_add (hash, 'k', members [i].key, members [i].len);
        if (s_member_is (&members [i], "eval") && json_is_object (members [i].value)) {
            //  The seed picks inputs, not the verdict: the same key for every seed.
            s_member_t *eval;
            size_t eval_count;
            if (s_members (members [i].value, eval_skip, &eval, &eval_count))
                rc = s_fail (err, errlen, "out of memory");
            else {
                rc = s_hash_members (hash, eval, eval_count, 1, err, errlen);
                free (eval);
            }
        }
        else
            rc = s_hash_value (hash, members [i].value, 1, err, errlen);
    }
    free (members);
    if (rc == 0)
        common_hash_final (hash, key);
    common_hash_destroy (&hash);
    return rc;
}

//  --------------------------------------------------------------------------
//  Entries

zframe_t *
broker_cache_get (broker_cache_t *self, const uint8_t key [BROKER_CACHE_KEY_BYTES],
                  const char *device)
{
    if (!broker_cache_enabled (self))
        return NULL;
    s_entry_t *entry = s_lookup (self, key, device);
    if (!entry) {
        self->stats.misses++;
        return NULL;
    }
    zframe_t *frame = zframe_new (entry->data, entry->size);
    if (!frame) {
        self->stats.misses++;
        return NULL;
    }
    self->stats.hits++;
    s_unlink (self, entry);
    s_push_head (self, entry);
    return frame;
}

bool
broker_cache_has (broker_cache_t *self, const uint8_t key [BROKER_CACHE_KEY_BYTES],
                  const char *device)
{
    return broker_cache_enabled (self) && s_lookup (self, key, device) != NULL;
}

int
broker_cache_put (broker_cache_t *self, const uint8_t key [BROKER_CACHE_KEY_BYTES],
                  const char *device, const void *result, size_t size)
{
    assert (result || size == 0);
    if (!broker_cache_enabled (self))
        return 1;
    if (!device)
        device = "";
    size_t device_len = strlen (device);
    size_t max_bytes = self->stats.max_bytes;
    bool too_large = size > SIZE_MAX / 2
                  || (max_bytes && size + device_len + BROKER_CACHE_ENTRY_OVERHEAD > max_bytes);
    s_entry_t *old = s_lookup (self, key, device);
    if (too_large) {
        if (old)
            s_drop (self, old);
        return 1;
    }
    size_t id_size = CACHE_HEX_BYTES + 1 + device_len + 1;
    s_entry_t *entry = (s_entry_t *) malloc (sizeof (s_entry_t) + id_size + size);
    if (!entry)
        return -1;
    s_id (entry->id, id_size, key, device);
    entry->data = (uint8_t *) entry->id + id_size;
    if (size)
        memcpy (entry->data, result, size);
    entry->size = size;
    entry->cost = size + device_len + BROKER_CACHE_ENTRY_OVERHEAD;
    entry->newer = entry->older = NULL;

    if (old)
        s_drop (self, old);
    if (zhashx_insert (self->table, entry->id, entry)) {
        free (entry);               //  cannot happen: the id was just made free
        return -1;
    }
    s_push_head (self, entry);
    self->stats.entries++;
    self->stats.bytes += entry->cost;
    if (old)
        self->stats.replaced++;
    else
        self->stats.inserts++;
    //  The new entry is at the head and fits alone, so eviction stops before it.
    while (self->tail != entry
       && (self->stats.entries > self->stats.max_entries
       ||  (max_bytes && self->stats.bytes > max_bytes))) {
        s_drop (self, self->tail);
        self->stats.evictions++;
    }
    return 0;
}

int
broker_cache_remove (broker_cache_t *self, const uint8_t key [BROKER_CACHE_KEY_BYTES],
                     const char *device)
{
    s_entry_t *entry = broker_cache_enabled (self)? s_lookup (self, key, device): NULL;
    if (!entry)
        return -1;
    s_drop (self, entry);
    return 0;
}

//  --------------------------------------------------------------------------
//  Counters

void
broker_cache_count_coalesced (broker_cache_t *self)
{
    self->stats.coalesced++;
}

void
broker_cache_stats (broker_cache_t *self, broker_cache_stats_t *stats)
{
    *stats = self->stats;
}

json_t *
broker_cache_stats_json (broker_cache_t *self)
{
    const broker_cache_stats_t *stats = &self->stats;
    uint64_t lookups = stats->hits + stats->misses;
    return json_pack ("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f}",
        "entries", (json_int_t) stats->entries,
        "bytes", (json_int_t) stats->bytes,
        "max_entries", (json_int_t) stats->max_entries,
        "max_bytes", (json_int_t) stats->max_bytes,
        "hits", (json_int_t) stats->hits,
        "misses", (json_int_t) stats->misses,
        "inserts", (json_int_t) stats->inserts,
        "replaced", (json_int_t) stats->replaced,
        "evictions", (json_int_t) stats->evictions,
        "coalesced", (json_int_t) stats->coalesced,
        "hit_rate", lookups? (double) stats->hits / (double) lookups: 0.0);
}

//  --------------------------------------------------------------------------
//  Results

zframe_t *
broker_cache_mark (const void *result, size_t size, bool coalesced, json_t *tag, json_t **map)
{
    if (map)
        *map = NULL;
    char err [128];
    json_t *body = proto_mpk_decode (result, size, NULL, err, sizeof err);
    if (!json_is_object (body)) {
        json_decref (body);
        return NULL;
    }
    zframe_t *frame = NULL;
    char *data = NULL;
    size_t data_size = 0;
    if (json_object_set_new (body, "cached", json_true ()) == 0
    && (!coalesced || json_object_set_new (body, "coalesced", json_true ()) == 0)
    && (!tag || json_object_set (body, "tag", tag) == 0)
    &&  proto_mpk_encode (body, &data, &data_size) == 0)
        frame = zframe_new (data, data_size);
    free (data);
    if (frame && map)
        *map = body;
    else
        json_decref (body);
    return frame;
}

bool
broker_cache_status_cacheable (const char *status)
{
    //  docs/results.md's statuses that are the kernel's or the caller's
    //  verdict alone, which grading again would repeat. Left out:
    //  internal_error (kgym's fault) and timeout, which a busy moment on the
    //  worker can cause: one must not stand for the rest of the run.
    static const char *const cacheable [] = {
        "ok", "compile_error", "incorrect", "runtime_error", "invalid", NULL
    };
    if (!status)
        return false;
    for (const char *const *name = cacheable; *name; name++)
        if (streq (status, *name))
            return true;
    return false;
}
