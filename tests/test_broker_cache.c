/*  test_broker_cache - the broker's result cache: the job key covers what
    changes a verdict and nothing else (key order, bookkeeping and the seed
    do not count; 1 and 1.0 do), entries are kept per device, bounded by
    count and bytes with the least recently used evicted first, the off
    cache counts nothing, and cached results are marked without losing
    their keys.  */
#include "testutil.h"
#include "broker_cache.h"
#include "proto_mpk.h"
#include "common_log.h"
#include <string.h>
#include <stdlib.h>

//  A job the way the broker sees it after proto_mpk_decode.
static const char *s_job_text =
    "{\"task\": {\"name\": \"sum\", \"dtype\": \"f32\", \"sizes\": [[1024], [4096]]},"
    " \"candidate\": {\"lang\": \"c\", \"source\": \"void sum (float *x) {}\"},"
    " \"eval\": {\"trials\": 3, \"seed\": 11, \"atol\": 0.001},"
    " \"reward\": {\"clip\": 2.0, \"shape\": \"linear\"},"
    " \"tag\": \"t1\", \"group\": \"g1\", \"trajectory\": \"traj-1\"}";

static json_t *
s_job (const char *text)
{
    json_error_t error;
    json_t *job = json_loads (text, 0, &error);
    ck_assert_msg (job != NULL, "bad test JSON: %s", error.text);
    return job;
}

//  The key of a job given as JSON text, for backend.
static void
s_key_of (const char *text, const char *backend, uint8_t key [BROKER_CACHE_KEY_BYTES])
{
    json_t *job = s_job (text);
    char err [256] = "";
    ck_assert_msg (broker_cache_key (job, backend, key, err, sizeof err) == 0,
                   "no key for %s: %s", text, err);
    json_decref (job);
}

//  The key of the base job after one change made by path ("eval.trials")
//  to a value given as JSON text ("null" deletes it).
static void
s_key_changed (const char *path, const char *value_text, uint8_t key [BROKER_CACHE_KEY_BYTES])
{
    json_t *job = s_job (s_job_text);
    char parent [64];
    snprintf (parent, sizeof parent, "%s", path);
    char *dot = strchr (parent, '.');
    json_t *object = job;
    const char *name = parent;
    if (dot) {
        *dot = 0;
        object = json_object_get (job, parent);
        name = dot + 1;
    }
    ck_assert_ptr_nonnull (object);
    if (streq (value_text, "null"))
        json_object_del (object, name);
    else
        json_object_set_new (object, name, json_loads (value_text, JSON_DECODE_ANY, NULL));
    char err [256] = "";
    ck_assert_msg (broker_cache_key (job, "cpu", key, err, sizeof err) == 0, "%s: %s", path, err);
    json_decref (job);
}

static void
s_assert_same (const uint8_t *a, const uint8_t *b, const char *what)
{
    ck_assert_msg (memcmp (a, b, BROKER_CACHE_KEY_BYTES) == 0, "%s: expected the same key", what);
}

static void
s_assert_differ (const uint8_t *a, const uint8_t *b, const char *what)
{
    ck_assert_msg (memcmp (a, b, BROKER_CACHE_KEY_BYTES) != 0, "%s: expected a different key", what);
}

//  A made-up key for entry number n.
static void
s_key_n (uint32_t n, uint8_t key [BROKER_CACHE_KEY_BYTES])
{
    memset (key, 0xA5, BROKER_CACHE_KEY_BYTES);
    memcpy (key, &n, sizeof n);
}

//  What an entry of size bytes on device costs toward max_bytes.
static size_t
s_cost (size_t size, const char *device)
{
    return size + strlen (device) + BROKER_CACHE_ENTRY_OVERHEAD;
}

static void
s_setup (void)
{
    common_log_set_level (LOG_LEVEL_QUIET);
}

//  --------------------------------------------------------------------------
//  The key

START_TEST (test_key_ignores_order_bookkeeping_and_seed)
{
    uint8_t base [BROKER_CACHE_KEY_BYTES], other [BROKER_CACHE_KEY_BYTES];
    s_key_of (s_job_text, "cpu", base);

    //  Same job, keys in another order at every depth, other bookkeeping and seed.
    s_key_of ("{\"trajectory\": \"traj-9\", \"group\": \"g2\", \"tag\": \"t2\","
              " \"reward\": {\"shape\": \"linear\", \"clip\": 2.0},"
              " \"eval\": {\"atol\": 0.001, \"seed\": 12345, \"trials\": 3},"
              " \"candidate\": {\"source\": \"void sum (float *x) {}\", \"lang\": \"c\"},"
              " \"task\": {\"sizes\": [[1024], [4096]], \"dtype\": \"f32\", \"name\": \"sum\"}}",
              "cpu", other);
    s_assert_same (base, other, "reordered, other tag/group/trajectory/seed");

    s_key_changed ("tag", "null", other);
    s_assert_same (base, other, "no tag");
    s_key_changed ("group", "{\"id\": 5}", other);
    s_assert_same (base, other, "group of another type");
    s_key_changed ("trajectory", "null", other);
    s_assert_same (base, other, "no trajectory");
    s_key_changed ("eval.seed", "null", other);
    s_assert_same (base, other, "no seed");
    s_key_changed ("eval.seed", "7.5", other);
    s_assert_same (base, other, "a real seed");

    //  An eval holding only a seed means the defaults, as does no eval.
    uint8_t none [BROKER_CACHE_KEY_BYTES];
    s_key_of ("{\"task\": {\"name\": \"sum\"}, \"candidate\": {\"source\": \"s\"}}", "cpu", none);
    s_key_of ("{\"task\": {\"name\": \"sum\"}, \"candidate\": {\"source\": \"s\"},"
              " \"eval\": {\"seed\": 3}, \"reward\": {}}", "cpu", other);
    s_assert_same (none, other, "eval with only a seed, empty reward");

    //  The key is stable across calls and leaves the job as it was.
    json_t *job = s_job (s_job_text);
    json_t *copy = json_deep_copy (job);
    uint8_t again [BROKER_CACHE_KEY_BYTES];
    char err [128];
    ck_assert_int_eq (broker_cache_key (job, "cpu", again, err, sizeof err), 0);
    s_assert_same (base, again, "the same job twice");
    ck_assert_msg (json_equal (job, copy), "broker_cache_key modified the job");
    ck_assert_ptr_nonnull (json_object_get (json_object_get (job, "eval"), "seed"));
    json_decref (copy);
    json_decref (job);
}
END_TEST

START_TEST (test_key_covers_what_changes_the_verdict)
{
    uint8_t base [BROKER_CACHE_KEY_BYTES];
    s_key_of (s_job_text, "cpu", base);
    static const struct {
        const char *path;
        const char *value;
    } changes [] = {
        { "candidate.source", "\"void sum (float *x) { x [0] = 0; }\"" },
        { "candidate.lang", "\"cpp\"" },
        { "eval.trials", "4" },
        { "eval.atol", "null" },
        { "eval.check_only", "true" },
        { "reward.clip", "3.0" },
        { "reward.shape", "\"log\"" },
        { "reward", "null" },
        { "eval", "null" },
        { "task.name", "\"sum2\"" },
        { "task.sizes", "[[4096], [1024]]" },             //  array order counts
        { "task.dtype", "null" },
        { "options", "{\"fast\": true}" },                //  an unknown top-level key counts
    };
    size_t nchanges = sizeof changes / sizeof changes [0];
    uint8_t keys [16][BROKER_CACHE_KEY_BYTES];
    for (size_t i = 0; i < nchanges; i++) {
        s_key_changed (changes [i].path, changes [i].value, keys [i]);
        char what [160];
        snprintf (what, sizeof what, "%s = %s", changes [i].path, changes [i].value);
        s_assert_differ (base, keys [i], what);
        for (size_t j = 0; j < i; j++)
            s_assert_differ (keys [j], keys [i], what);
    }
    //  The backend is part of the key.
    uint8_t cuda [BROKER_CACHE_KEY_BYTES];
    s_key_of (s_job_text, "cuda", cuda);
    s_assert_differ (base, cuda, "backend cuda");

    //  An integer and a real of the same value differ, at any depth.
    uint8_t one_int [BROKER_CACHE_KEY_BYTES], one_real [BROKER_CACHE_KEY_BYTES];
    s_key_changed ("eval.atol", "1", one_int);
    s_key_changed ("eval.atol", "1.0", one_real);
    s_assert_differ (one_int, one_real, "eval.atol 1 vs 1.0");
    s_key_changed ("task.sizes", "[[1]]", one_int);
    s_key_changed ("task.sizes", "[[1.0]]", one_real);
    s_assert_differ (one_int, one_real, "task.sizes [[1]] vs [[1.0]]");

    //  Field boundaries count: a key/value split differently is another job.
    uint8_t ab [BROKER_CACHE_KEY_BYTES], a_b [BROKER_CACHE_KEY_BYTES];
    s_key_of ("{\"task\": {\"ab\": \"c\"}, \"candidate\": {}}", "cpu", ab);
    s_key_of ("{\"task\": {\"a\": \"bc\"}, \"candidate\": {}}", "cpu", a_b);
    s_assert_differ (ab, a_b, "ab:c vs a:bc");
    //  A seed below the top-level eval is not the seed the key leaves out.
    s_key_changed ("task.seed", "5", one_int);
    s_assert_differ (base, one_int, "task.seed");
}
END_TEST

START_TEST (test_key_rejects_malformed_jobs)
{
    static const char *bad [] = {
        "[1, 2]",
        "\"job\"",
        "{\"candidate\": {\"source\": \"s\"}}",
        "{\"task\": \"sum\", \"candidate\": {\"source\": \"s\"}}",
        "{\"task\": {\"name\": \"sum\"}}",
        "{\"task\": {\"name\": \"sum\"}, \"candidate\": \"source\"}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad [0]; i++) {
        json_t *job = json_loads (bad [i], JSON_DECODE_ANY, NULL);
        ck_assert_ptr_nonnull (job);
        uint8_t key [BROKER_CACHE_KEY_BYTES];
        char err [128] = "";
        ck_assert_msg (broker_cache_key (job, "cpu", key, err, sizeof err) == -1,
                       "a key for %s", bad [i]);
        ck_assert_msg (strlen (err) > 0, "no reason for %s", bad [i]);
        json_decref (job);
    }
    uint8_t key [BROKER_CACHE_KEY_BYTES];
    char err [128] = "";
    ck_assert_int_eq (broker_cache_key (NULL, "cpu", key, err, sizeof err), -1);
    ck_assert_str_eq (err, "job is not an object");

    //  Nesting past the walk's limit is refused, not recursed into.
    json_t *job = s_job ("{\"task\": {}, \"candidate\": {}}");
    json_t *deep = json_array ();
    json_object_set_new (json_object_get (job, "task"), "deep", deep);
    for (int i = 0; i < 100; i++) {
        json_t *inner = json_array ();
        json_array_append_new (deep, inner);
        deep = inner;
    }
    ck_assert_int_eq (broker_cache_key (job, "cpu", key, err, sizeof err), -1);
    ck_assert_msg (strstr (err, "deep"), "reason: %s", err);
    json_decref (job);
}
END_TEST

//  --------------------------------------------------------------------------
//  Entries

START_TEST (test_put_get_has_remove_per_device)
{
    broker_cache_t *cache = broker_cache_new (10, 1 << 20);
    ck_assert_ptr_nonnull (cache);
    ck_assert (broker_cache_enabled (cache));
    uint8_t k1 [BROKER_CACHE_KEY_BYTES], k2 [BROKER_CACHE_KEY_BYTES];
    s_key_n (1, k1);
    s_key_n (2, k2);

    ck_assert_ptr_null (broker_cache_get (cache, k1, "H200"));
    ck_assert_int_eq (broker_cache_put (cache, k1, "H200", "result-h200", 11), 0);
    ck_assert_int_eq (broker_cache_put (cache, k1, "H100", "result-h100", 11), 0);
    ck_assert (broker_cache_has (cache, k1, "H200"));
    ck_assert (broker_cache_has (cache, k1, "H100"));
    ck_assert (!broker_cache_has (cache, k1, "A100"));
    ck_assert (!broker_cache_has (cache, k2, "H200"));

    zframe_t *frame = broker_cache_get (cache, k1, "H200");
    ck_assert_ptr_nonnull (frame);
    ck_assert_msg (zframe_streq (frame, "result-h200"), "got %s", zframe_strdup (frame));
    zframe_destroy (&frame);
    frame = broker_cache_get (cache, k1, "H100");
    ck_assert_ptr_nonnull (frame);
    ck_assert (zframe_streq (frame, "result-h100"));
    zframe_destroy (&frame);

    //  The frame is a copy: replacing the entry does not change a frame given out.
    frame = broker_cache_get (cache, k1, "H200");
    ck_assert_int_eq (broker_cache_put (cache, k1, "H200", "newer", 5), 0);
    ck_assert (zframe_streq (frame, "result-h200"));
    zframe_destroy (&frame);
    frame = broker_cache_get (cache, k1, "H200");
    ck_assert (zframe_streq (frame, "newer"));
    zframe_destroy (&frame);

    //  A device name that does not fit the stack buffer, and NULL as "".
    char long_device [1000];
    memset (long_device, 'd', sizeof long_device - 1);
    long_device [sizeof long_device - 1] = 0;
    ck_assert_int_eq (broker_cache_put (cache, k2, long_device, "long", 4), 0);
    ck_assert (broker_cache_has (cache, k2, long_device));
    ck_assert_int_eq (broker_cache_put (cache, k2, NULL, "none", 4), 0);
    ck_assert (broker_cache_has (cache, k2, ""));
    ck_assert_int_eq (broker_cache_put (cache, k2, "H200", "", 0), 0);     //  empty result
    frame = broker_cache_get (cache, k2, "H200");
    ck_assert_ptr_nonnull (frame);
    ck_assert_uint_eq (zframe_size (frame), 0);
    zframe_destroy (&frame);

    broker_cache_stats_t stats;
    broker_cache_stats (cache, &stats);
    ck_assert_uint_eq (stats.entries, 5);
    ck_assert_uint_eq (stats.inserts, 5);
    ck_assert_uint_eq (stats.replaced, 1);
    ck_assert_uint_eq (stats.hits, 5);
    ck_assert_uint_eq (stats.misses, 1);
    ck_assert_uint_eq (stats.bytes, s_cost (5, "H200") + s_cost (11, "H100")
                       + s_cost (4, long_device) + s_cost (4, "") + s_cost (0, "H200"));

    ck_assert_int_eq (broker_cache_remove (cache, k1, "H200"), 0);
    ck_assert_int_eq (broker_cache_remove (cache, k1, "H200"), -1);
    ck_assert (!broker_cache_has (cache, k1, "H200"));
    ck_assert (broker_cache_has (cache, k1, "H100"));
    ck_assert_int_eq (broker_cache_remove (cache, k2, long_device), 0);
    broker_cache_stats (cache, &stats);
    ck_assert_uint_eq (stats.entries, 3);
    ck_assert_uint_eq (stats.bytes, s_cost (11, "H100") + s_cost (4, "") + s_cost (0, "H200"));
    //  has probes without counting.
    ck_assert_uint_eq (stats.hits, 5);
    ck_assert_uint_eq (stats.misses, 1);
    broker_cache_destroy (&cache);
    broker_cache_destroy (&cache);
    ck_assert_ptr_null (cache);
}
END_TEST

START_TEST (test_lru_by_count_and_get_refreshes)
{
    broker_cache_t *cache = broker_cache_new (3, 0);
    uint8_t k [5][BROKER_CACHE_KEY_BYTES];
    for (uint32_t i = 0; i < 5; i++)
        s_key_n (i, k [i]);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq (broker_cache_put (cache, k [i], "dev", "r", 1), 0);
    //  0 is the oldest; a get makes it the newest, so 1 goes first.
    zframe_t *frame = broker_cache_get (cache, k [0], "dev");
    zframe_destroy (&frame);
    ck_assert_int_eq (broker_cache_put (cache, k [3], "dev", "r", 1), 0);
    ck_assert_msg (!broker_cache_has (cache, k [1], "dev"), "1 was the least recently used");
    ck_assert (broker_cache_has (cache, k [0], "dev"));
    ck_assert (broker_cache_has (cache, k [2], "dev"));
    ck_assert (broker_cache_has (cache, k [3], "dev"));
    //  has does not refresh: 2 is now the oldest and goes next.
    ck_assert (broker_cache_has (cache, k [2], "dev"));
    ck_assert_int_eq (broker_cache_put (cache, k [4], "dev", "r", 1), 0);
    ck_assert_msg (!broker_cache_has (cache, k [2], "dev"), "2 was the least recently used");
    //  A replacement refreshes too: 0 replaced, then 3 goes before it.
    ck_assert_int_eq (broker_cache_put (cache, k [0], "dev", "r2", 2), 0);
    ck_assert_int_eq (broker_cache_put (cache, k [1], "dev", "r", 1), 0);
    ck_assert_msg (!broker_cache_has (cache, k [3], "dev"), "3 was the least recently used");
    ck_assert (broker_cache_has (cache, k [0], "dev"));
    ck_assert (broker_cache_has (cache, k [4], "dev"));
    ck_assert (broker_cache_has (cache, k [1], "dev"));

    broker_cache_stats_t stats;
    broker_cache_stats (cache, &stats);
    ck_assert_uint_eq (stats.entries, 3);
    ck_assert_uint_eq (stats.evictions, 3);
    ck_assert_uint_eq (stats.inserts, 6);
    ck_assert_uint_eq (stats.replaced, 1);
    broker_cache_destroy (&cache);
}
END_TEST

START_TEST (test_lru_by_bytes)
{
    //  Room for three 100-byte results, no count limit to speak of.
    char body [1024];
    memset (body, 'x', sizeof body);
    size_t max_bytes = 3 * s_cost (100, "dev");
    broker_cache_t *cache = broker_cache_new (1000, max_bytes);
    uint8_t k [6][BROKER_CACHE_KEY_BYTES];
    for (uint32_t i = 0; i < 6; i++)
        s_key_n (i, k [i]);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq (broker_cache_put (cache, k [i], "dev", body, 100), 0);
    broker_cache_stats_t stats;
    broker_cache_stats (cache, &stats);
    ck_assert_uint_eq (stats.bytes, max_bytes);
    ck_assert_uint_eq (stats.evictions, 0);

    zframe_t *frame = broker_cache_get (cache, k [0], "dev");
    zframe_destroy (&frame);
    //  A fourth does not fit: the least recently used (1) goes, and only it.
    ck_assert_int_eq (broker_cache_put (cache, k [3], "dev", body, 100), 0);
    ck_assert_msg (!broker_cache_has (cache, k [1], "dev"), "1 was the least recently used");
    ck_assert (broker_cache_has (cache, k [0], "dev"));
    ck_assert (broker_cache_has (cache, k [2], "dev"));
    broker_cache_stats (cache, &stats);
    ck_assert_uint_eq (stats.entries, 3);
    ck_assert_uint_eq (stats.bytes, max_bytes);

    //  A result costing two slots pushes out the two oldest (2, then 0) and no more.
    ck_assert_uint_eq (s_cost (100 + s_cost (100, "dev"), "dev"), 2 * s_cost (100, "dev"));
    ck_assert_int_eq (broker_cache_put (cache, k [4], "dev", body, 100 + s_cost (100, "dev")), 0);
    ck_assert (!broker_cache_has (cache, k [2], "dev"));
    ck_assert (!broker_cache_has (cache, k [0], "dev"));
    ck_assert (broker_cache_has (cache, k [3], "dev"));
    ck_assert (broker_cache_has (cache, k [4], "dev"));
    broker_cache_stats (cache, &stats);
    ck_assert_uint_eq (stats.bytes, max_bytes);
    ck_assert_uint_eq (stats.entries, 2);
    ck_assert_uint_eq (stats.evictions, 3);
    broker_cache_destroy (&cache);
}
END_TEST

START_TEST (test_oversized_result_not_kept)
{
    size_t max_bytes = s_cost (100, "dev");
    broker_cache_t *cache = broker_cache_new (10, max_bytes);
    uint8_t k1 [BROKER_CACHE_KEY_BYTES], k2 [BROKER_CACHE_KEY_BYTES];
    s_key_n (1, k1);
    s_key_n (2, k2);
    char body [101];
    memset (body, 'y', sizeof body);
    ck_assert_int_eq (broker_cache_put (cache, k1, "dev", body, 100), 0);       //  exactly fits
    ck_assert_int_eq (broker_cache_put (cache, k2, "dev", body, 101), 1);       //  one over
    ck_assert (!broker_cache_has (cache, k2, "dev"));
    ck_assert_msg (broker_cache_has (cache, k1, "dev"), "an oversized put evicted another entry");
    //  An oversized replacement drops the older verdict instead of keeping it.
    ck_assert_int_eq (broker_cache_put (cache, k1, "dev", body, 101), 1);
    ck_assert (!broker_cache_has (cache, k1, "dev"));
    broker_cache_stats_t stats;
    broker_cache_stats (cache, &stats);
    ck_assert_uint_eq (stats.entries, 0);
    ck_assert_uint_eq (stats.bytes, 0);
    ck_assert_uint_eq (stats.inserts, 1);
    ck_assert_uint_eq (stats.evictions, 0);
    broker_cache_destroy (&cache);
}
END_TEST

START_TEST (test_off_cache_keeps_and_counts_nothing)
{
    broker_cache_t *cache = broker_cache_new (0, 1 << 20);
    ck_assert_ptr_nonnull (cache);
    ck_assert (!broker_cache_enabled (cache));
    uint8_t key [BROKER_CACHE_KEY_BYTES];
    s_key_n (1, key);
    ck_assert_int_eq (broker_cache_put (cache, key, "dev", "r", 1), 1);
    ck_assert (!broker_cache_has (cache, key, "dev"));
    ck_assert_ptr_null (broker_cache_get (cache, key, "dev"));
    ck_assert_int_eq (broker_cache_remove (cache, key, "dev"), -1);
    broker_cache_stats_t stats;
    broker_cache_stats (cache, &stats);
    ck_assert_uint_eq (stats.entries, 0);
    ck_assert_uint_eq (stats.hits + stats.misses + stats.inserts + stats.evictions, 0);
    json_t *json = broker_cache_stats_json (cache);
    ck_assert_int_eq (json_integer_value (json_object_get (json, "max_entries")), 0);
    ck_assert (json_real_value (json_object_get (json, "hit_rate")) == 0.0);
    json_decref (json);
    broker_cache_destroy (&cache);
}
END_TEST

START_TEST (test_stats_json)
{
    broker_cache_t *cache = broker_cache_new (2, 4096);
    json_t *json = broker_cache_stats_json (cache);
    ck_assert_ptr_nonnull (json);
    ck_assert (json_is_real (json_object_get (json, "hit_rate")));
    ck_assert (json_real_value (json_object_get (json, "hit_rate")) == 0.0);
    json_decref (json);

    uint8_t k [3][BROKER_CACHE_KEY_BYTES];
    for (uint32_t i = 0; i < 3; i++)
        s_key_n (i, k [i]);
    broker_cache_put (cache, k [0], "dev", "abc", 3);
    broker_cache_put (cache, k [0], "dev", "abcd", 4);
    broker_cache_put (cache, k [1], "dev", "abc", 3);
    broker_cache_put (cache, k [2], "dev", "abc", 3);          //  evicts 0
    for (int i = 0; i < 3; i++) {
        zframe_t *frame = broker_cache_get (cache, k [2], "dev");
        zframe_destroy (&frame);
    }
    ck_assert_ptr_null (broker_cache_get (cache, k [0], "dev"));
    broker_cache_count_coalesced (cache);
    broker_cache_count_coalesced (cache);

    json = broker_cache_stats_json (cache);
    static const struct {
        const char *name;
        json_int_t value;
    } expect [] = {
        { "entries", 2 }, { "max_entries", 2 }, { "max_bytes", 4096 }, { "hits", 3 },
        { "misses", 1 }, { "inserts", 3 }, { "replaced", 1 }, { "evictions", 1 },
        { "coalesced", 2 },
    };
    for (size_t i = 0; i < sizeof expect / sizeof expect [0]; i++) {
        json_t *value = json_object_get (json, expect [i].name);
        ck_assert_msg (json_is_integer (value), "%s missing or not an integer", expect [i].name);
        ck_assert_msg (json_integer_value (value) == expect [i].value, "%s: expected %lld, got %lld",
                       expect [i].name, (long long) expect [i].value,
                       (long long) json_integer_value (value));
    }
    ck_assert_int_eq (json_integer_value (json_object_get (json, "bytes")),
                      (json_int_t) (2 * s_cost (3, "dev")));
    double rate = json_real_value (json_object_get (json, "hit_rate"));
    ck_assert_msg (rate > 0.7499 && rate < 0.7501, "hit_rate %g, expected 0.75", rate);
    ck_assert_uint_eq (json_object_size (json), 11);
    json_decref (json);
    broker_cache_destroy (&cache);
}
END_TEST

//  --------------------------------------------------------------------------
//  Results

//  A msgpack body from JSON text; the caller frees.
static char *
s_mpk (const char *text, size_t *size)
{
    json_t *json = json_loads (text, JSON_DECODE_ANY, NULL);
    ck_assert_ptr_nonnull (json);
    char *data = NULL;
    ck_assert_int_eq (proto_mpk_encode (json, &data, size), 0);
    json_decref (json);
    return data;
}

static json_t *
s_decode_frame (zframe_t *frame)
{
    char err [128] = "";
    json_t *json = proto_mpk_decode (zframe_data (frame), zframe_size (frame), NULL, err, sizeof err);
    ck_assert_msg (json != NULL, "marked body does not decode: %s", err);
    return json;
}

START_TEST (test_mark_adds_cached_and_coalesced)
{
    size_t size;
    char *body = s_mpk ("{\"status\": \"ok\", \"reward\": 1.5, \"seed\": 7, \"speedup\": null,"
                        " \"timings\": {\"candidate\": {\"n\": 10}}}", &size);
    char err [128];
    json_t *original = proto_mpk_decode (body, size, NULL, err, sizeof err);
    ck_assert_ptr_nonnull (original);

    zframe_t *frame = broker_cache_mark (body, size, false, NULL, NULL);
    ck_assert_ptr_nonnull (frame);
    json_t *marked = s_decode_frame (frame);
    ck_assert (json_is_true (json_object_get (marked, "cached")));
    ck_assert_ptr_null (json_object_get (marked, "coalesced"));
    json_object_del (marked, "cached");
    ck_assert_msg (json_equal (marked, original), "mark changed other keys");
    json_decref (marked);
    zframe_destroy (&frame);

    frame = broker_cache_mark (body, size, true, NULL, NULL);
    ck_assert_ptr_nonnull (frame);
    marked = s_decode_frame (frame);
    ck_assert (json_is_true (json_object_get (marked, "cached")));
    ck_assert (json_is_true (json_object_get (marked, "coalesced")));
    ck_assert (json_is_integer (json_object_get (marked, "seed")));
    ck_assert (json_is_real (json_object_get (marked, "reward")));
    json_object_del (marked, "cached");
    json_object_del (marked, "coalesced");
    ck_assert_msg (json_equal (marked, original), "mark changed other keys");
    json_decref (marked);
    zframe_destroy (&frame);
    //  The job's own tag replaces the first job's; null when it has none.
    json_t *tag = json_string ("mine");
    frame = broker_cache_mark (body, size, false, tag, NULL);
    marked = s_decode_frame (frame);
    ck_assert_str_eq (json_string_value (json_object_get (marked, "tag")), "mine");
    json_decref (marked);
    zframe_destroy (&frame);
    json_decref (tag);
    frame = broker_cache_mark (body, size, false, json_null (), NULL);
    marked = s_decode_frame (frame);
    ck_assert (json_is_null (json_object_get (marked, "tag")));
    json_decref (marked);
    zframe_destroy (&frame);
    json_decref (original);
    free (body);

    //  Not a map: an array, a string, garbage, nothing.
    body = s_mpk ("[\"status\", \"ok\"]", &size);
    ck_assert_ptr_null (broker_cache_mark (body, size, false, NULL, NULL));
    free (body);
    body = s_mpk ("\"ok\"", &size);
    ck_assert_ptr_null (broker_cache_mark (body, size, true, NULL, NULL));
    free (body);
    ck_assert_ptr_null (broker_cache_mark ("\xc1\xff\x00", 3, false, NULL, NULL));
    ck_assert_ptr_null (broker_cache_mark ("{\"status\": \"ok\"}", 16, false, NULL, NULL));
    ck_assert_ptr_null (broker_cache_mark ("", 0, false, NULL, NULL));
}
END_TEST

START_TEST (test_status_cacheable)
{
    static const char *yes [] = {
        "ok", "compile_error", "incorrect", "runtime_error", "invalid"
    };
    for (size_t i = 0; i < sizeof yes / sizeof yes [0]; i++)
        ck_assert_msg (broker_cache_status_cacheable (yes [i]), "%s should be cacheable", yes [i]);
    static const char *no [] = { "internal_error", "timeout", "", "OK", "ok ", "unknown" };
    for (size_t i = 0; i < sizeof no / sizeof no [0]; i++)
        ck_assert_msg (!broker_cache_status_cacheable (no [i]), "'%s' should not be cacheable", no [i]);
    ck_assert (!broker_cache_status_cacheable (NULL));
}
END_TEST

//  --------------------------------------------------------------------------
//  Stress

START_TEST (test_stress_stays_within_limits)
{
    const size_t max_entries = 1000;
    const uint32_t puts = 100000;
    const char *device = "NVIDIA H200";
    //  Bytes bind before the count does for the larger results.
    size_t max_bytes = 900 * s_cost (64, device);
    broker_cache_t *cache = broker_cache_new (max_entries, max_bytes);
    char body [128];
    memset (body, 'z', sizeof body);
    uint8_t key [BROKER_CACHE_KEY_BYTES];
    uint64_t hits = 0, misses = 0;
    for (uint32_t i = 0; i < puts; i++) {
        s_key_n (i, key);
        size_t size = 16 + (i % 97);
        ck_assert_int_eq (broker_cache_put (cache, key, device, body, size), 0);
        //  Every tenth put looks up the newest entry (a hit) or one never put (a miss).
        if (i % 10 == 0) {
            s_key_n (i % 20 == 0? i: puts + i, key);
            zframe_t *frame = broker_cache_get (cache, key, device);
            if (frame)
                hits++;
            else
                misses++;
            zframe_destroy (&frame);
        }
        if (i % 1000 == 0) {
            broker_cache_stats_t stats;
            broker_cache_stats (cache, &stats);
            ck_assert_uint_le (stats.entries, max_entries);
            ck_assert_uint_le (stats.bytes, max_bytes);
        }
    }
    broker_cache_stats_t stats;
    broker_cache_stats (cache, &stats);
    ck_assert_uint_le (stats.entries, max_entries);
    ck_assert_uint_le (stats.bytes, max_bytes);
    ck_assert_uint_gt (stats.entries, 800);
    ck_assert_uint_eq (stats.inserts, puts);
    ck_assert_uint_eq (stats.replaced, 0);
    ck_assert_uint_eq (stats.evictions, puts - stats.entries);
    ck_assert_uint_eq (stats.hits, hits);
    ck_assert_uint_eq (stats.misses, misses);
    ck_assert_uint_eq (hits, puts / 20);
    ck_assert_uint_eq (misses, puts / 20);
    //  The newest entries are the ones kept, and their bytes add up.
    size_t bytes = 0;
    for (uint32_t i = puts - (uint32_t) stats.entries; i < puts; i++) {
        s_key_n (i, key);
        ck_assert_msg (broker_cache_has (cache, key, device), "entry %u of the newest missing", i);
        bytes += s_cost (16 + (i % 97), device);
    }
    ck_assert_uint_eq (bytes, stats.bytes);
    s_key_n (puts - (uint32_t) stats.entries - 1, key);
    ck_assert (!broker_cache_has (cache, key, device));

    //  Count-bound: small results, 1000 entries exactly, every key replaced once.
    broker_cache_destroy (&cache);
    cache = broker_cache_new (max_entries, 0);
    for (uint32_t i = 0; i < puts; i++) {
        s_key_n (i % 50000, key);
        ck_assert_int_eq (broker_cache_put (cache, key, device, body, 8), 0);
    }
    broker_cache_stats (cache, &stats);
    ck_assert_uint_eq (stats.entries, max_entries);
    ck_assert_uint_eq (stats.bytes, max_entries * s_cost (8, device));
    ck_assert_uint_eq (stats.inserts, puts);            //  each key was evicted before its turn came again
    ck_assert_uint_eq (stats.evictions, puts - max_entries);
    broker_cache_destroy (&cache);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("broker_cache");
    TCase *tc = tcase_create ("key");
    tcase_add_checked_fixture (tc, s_setup, NULL);
    tcase_add_test (tc, test_key_ignores_order_bookkeeping_and_seed);
    tcase_add_test (tc, test_key_covers_what_changes_the_verdict);
    tcase_add_test (tc, test_key_rejects_malformed_jobs);
    suite_add_tcase (suite, tc);
    tc = tcase_create ("entries");
    tcase_add_checked_fixture (tc, s_setup, NULL);
    tcase_add_test (tc, test_put_get_has_remove_per_device);
    tcase_add_test (tc, test_lru_by_count_and_get_refreshes);
    tcase_add_test (tc, test_lru_by_bytes);
    tcase_add_test (tc, test_oversized_result_not_kept);
    tcase_add_test (tc, test_off_cache_keeps_and_counts_nothing);
    tcase_add_test (tc, test_stats_json);
    tcase_add_test (tc, test_stress_stays_within_limits);
    suite_add_tcase (suite, tc);
    tc = tcase_create ("results");
    tcase_add_checked_fixture (tc, s_setup, NULL);
    tcase_add_test (tc, test_mark_adds_cached_and_coalesced);
    tcase_add_test (tc, test_status_cacheable);
    suite_add_tcase (suite, tc);
    return testutil_run_suite (suite);
}
