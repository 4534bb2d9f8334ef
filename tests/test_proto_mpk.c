/*  test_proto_mpk - msgpack <-> jansson: round trips, and hostile input rejected.  */
#include "testutil.h"
#include "proto_mpk.h"
#include "proto_mpr.h"
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>

//  Encode then decode; the result must equal the input.
static void
s_round_trip (json_t *json)
{
    char *data = NULL;
    size_t size = 0;
    ck_assert_int_eq (proto_mpk_encode (json, &data, &size), 0);
    char err [256];
    json_t *back = proto_mpk_decode (data, size, NULL, err, sizeof (err));
    ck_assert_msg (back != NULL, "decode failed: %s", err);
    char *want = json_dumps (json, JSON_ENCODE_ANY | JSON_COMPACT);
    char *got = json_dumps (back, JSON_ENCODE_ANY | JSON_COMPACT);
    ck_assert_msg (json_equal (json, back), "round trip: expected %s, got %s", want, got);
    free (want);
    free (got);
    json_decref (back);
    free (data);
}

//  Decoding must fail, with a reason that contains expect.
static void
s_rejects (const void *data, size_t size, const proto_mpk_limits_t *limits, const char *expect)
{
    char err [256] = "";
    json_t *json = proto_mpk_decode (data, size, limits, err, sizeof (err));
    char *got = json? json_dumps (json, JSON_ENCODE_ANY | JSON_COMPACT): NULL;
    ck_assert_msg (json == NULL, "expected a rejection (%s), got %s", expect, got);
    free (got);
    ck_assert_msg (strstr (err, expect) != NULL, "expected a reason with '%s', got '%s'", expect, err);
}

START_TEST (test_scalars_round_trip)
{
    json_t *values [] = {
        json_null (), json_true (), json_false (),
        json_integer (0), json_integer (1), json_integer (127), json_integer (128),
        json_integer (255), json_integer (65536), json_integer (-1), json_integer (-32),
        json_integer (-33), json_integer (-129), json_integer (INT64_MAX), json_integer (INT64_MIN),
        json_integer (4294967296ll), json_real (0.5), json_real (-1e300), json_real (3.14159),
        json_string (""), json_string ("hello"), json_stringn ("nul\0inside", 10),
        json_string ("\xc3\xa9t\xc3\xa9 \xe2\x82\xac"),
    };
    for (size_t i = 0; i < sizeof (values) / sizeof (values [0]); i++) {
        s_round_trip (values [i]);
        json_decref (values [i]);
    }
    //  Long strings take the str8/16/32 headers.
    size_t lengths [] = { 31, 32, 255, 256, 65535, 65536, 100000 };
    for (size_t i = 0; i < sizeof (lengths) / sizeof (lengths [0]); i++) {
        char *text = malloc (lengths [i]);
        memset (text, 'x', lengths [i]);
        json_t *json = json_stringn (text, lengths [i]);
        s_round_trip (json);
        json_decref (json);
        free (text);
    }
}
END_TEST

START_TEST (test_nested_round_trip)
{
    json_error_t error;
    json_t *json = json_loads (
        "{\"task\": {\"name\": \"vadd\", \"backend\": \"cpu\", \"sizes\": [{\"n\": 1024}, {\"n\": 3}],"
        " \"args\": [{\"name\": \"x\", \"shape\": [\"n\"], \"init\": {\"dist\": \"normal\", \"std\": 1.5}}]},"
        " \"eval\": {\"timeout\": 10.0, \"seed\": 42, \"profile\": false},"
        " \"empty_map\": {}, \"empty_array\": [], \"mixed\": [1, -2, 3.5, \"s\", null, true, [[[]]]]}",
        0, &error);
    ck_assert_msg (json != NULL, "%s", error.text);
    s_round_trip (json);
    //  Wide containers take the map16/array16 headers.
    json_t *wide = json_array ();
    json_t *map = json_object ();
    for (int i = 0; i < 70000; i++)
        json_array_append_new (wide, json_integer (i));
    for (int i = 0; i < 300; i++) {
        char key [16];
        snprintf (key, sizeof (key), "k%d", i);
        json_object_set_new (map, key, json_integer (i));
    }
    json_object_set_new (json, "map", map);
    s_round_trip (map);
    proto_mpk_limits_t limits;
    proto_mpk_limits_default (&limits);
    limits.max_items = 100000;
    char *data;
    size_t size;
    ck_assert_int_eq (proto_mpk_encode (wide, &data, &size), 0);
    json_t *back = proto_mpk_decode (data, size, &limits, NULL, 0);
    ck_assert (json_equal (back, wide));
    json_decref (back);
    free (data);
    json_decref (wide);
    json_decref (json);
}
END_TEST

START_TEST (test_foreign_encodings_accepted)
{
    //  Other encoders pick other formats for the same values.
    const uint8_t float32 [] = { 0xca, 0x3f, 0xc0, 0x00, 0x00 };               //  1.5
    const uint8_t int8 [] = { 0xd0, 0x05 };                                     //  5 as int8
    const uint8_t uint64 [] = { 0xcf, 0, 0, 0, 0, 0, 0, 0, 7 };                 //  7 as uint64
    const uint8_t bin [] = { 0xc4, 0x02, 'h', 'i' };                            //  "hi" as bin8
    const uint8_t map16 [] = { 0xde, 0x00, 0x01, 0xa1, 'a', 0xc3 };            //  {"a": true}
    json_t *json = proto_mpk_decode (float32, sizeof (float32), NULL, NULL, 0);
    ck_assert (json_is_real (json) && json_real_value (json) == 1.5);
    json_decref (json);
    json = proto_mpk_decode (int8, sizeof (int8), NULL, NULL, 0);
    ck_assert (json_is_integer (json) && json_integer_value (json) == 5);
    json_decref (json);
    json = proto_mpk_decode (uint64, sizeof (uint64), NULL, NULL, 0);
    ck_assert (json_is_integer (json) && json_integer_value (json) == 7);
    json_decref (json);
    json = proto_mpk_decode (bin, sizeof (bin), NULL, NULL, 0);
    ck_assert_str_eq (json_string_value (json), "hi");
    json_decref (json);
    json = proto_mpk_decode (map16, sizeof (map16), NULL, NULL, 0);
    ck_assert (json_is_true (json_object_get (json, "a")));
    json_decref (json);
}
END_TEST

START_TEST (test_rejects_truncated)
{
    json_t *json = json_pack ("{s:s, s:[i,i,f], s:{s:s}}", "name", "truncate me", "list", 1, 2, 0.25,
                              "inner", "k", "value");
    char *data;
    size_t size;
    ck_assert_int_eq (proto_mpk_encode (json, &data, &size), 0);
    //  Every proper prefix is malformed.
    for (size_t cut = 1; cut < size; cut++)
        s_rejects (data, cut, NULL, "");
    s_rejects (data, 0, NULL, "empty");
    free (data);
    json_decref (json);
    const uint8_t str32 [] = { 0xdb, 0xff, 0xff, 0xff, 0xff, 'a' };
    s_rejects (str32, sizeof (str32), NULL, "truncated");
}
END_TEST

START_TEST (test_rejects_random_bytes)
{
    //  Whatever comes, no crash and no huge allocation; most are rejected.
    uint8_t buffer [512];
    srandom (1234);
    int accepted = 0;
    for (int round = 0; round < 5000; round++) {
        size_t size = 1 + (size_t) random () % sizeof (buffer);
        for (size_t i = 0; i < size; i++)
            buffer [i] = (uint8_t) random ();
        //  Bias the start toward containers to reach deeper code.
        if (round % 3 == 0)
            buffer [0] = (uint8_t) (0x80 | (random () & 0x1f));
        char err [256];
        json_t *json = proto_mpk_decode (buffer, size, NULL, err, sizeof (err));
        if (json) {
            accepted++;
            json_decref (json);
        }
    }
    ck_assert_int_lt (accepted, 5000);
}
END_TEST

START_TEST (test_rejects_depth_bomb)
{
    //  10000 nested one-element arrays: 0x91 ... 0xc0.
    size_t depth = 10000;
    uint8_t *bomb = malloc (depth + 1);
    memset (bomb, 0x91, depth);
    bomb [depth] = 0xc0;
    s_rejects (bomb, depth + 1, NULL, "nested deeper");
    //  Exactly at the limit it decodes; one more level does not.
    proto_mpk_limits_t limits;
    proto_mpk_limits_default (&limits);
    json_t *json = proto_mpk_decode (bomb + depth - limits.max_depth, limits.max_depth + 1,
                                     &limits, NULL, 0);
    ck_assert_ptr_nonnull (json);
    json_decref (json);
    s_rejects (bomb + depth - limits.max_depth - 1, limits.max_depth + 2, &limits, "nested deeper");
    free (bomb);
}
END_TEST

START_TEST (test_rejects_huge_counts)
{
    //  Headers claiming 2^32-1 entries with nothing behind them.
    const uint8_t map32 [] = { 0xdf, 0xff, 0xff, 0xff, 0xff, 0xa1, 'a', 0xc0 };
    const uint8_t array32 [] = { 0xdd, 0xff, 0xff, 0xff, 0xff, 0xc0 };
    const uint8_t bin32 [] = { 0xc6, 0xff, 0xff, 0xff, 0xff, 0x00 };
    s_rejects (map32, sizeof (map32), NULL, "map count exceeds");
    s_rejects (array32, sizeof (array32), NULL, "array count exceeds");
    s_rejects (bin32, sizeof (bin32), NULL, "truncated");
    //  A count that fits the bytes but not the limit.
    proto_mpk_limits_t limits;
    proto_mpk_limits_default (&limits);
    limits.max_items = 4;
    const uint8_t five [] = { 0x95, 1, 2, 3, 4, 5 };
    s_rejects (five, sizeof (five), &limits, "entries over the limit");
    limits.max_items = 65536;
    limits.max_total = 3;
    s_rejects (five, sizeof (five), &limits, "more than 3 values");
    //  The reader says the same directly.
    proto_mpr_t reader;
    proto_mpr_item_t item;
    proto_mpr_init (&reader, map32, sizeof (map32));
    ck_assert_int_eq (proto_mpr_next (&reader, &item), -2);
}
END_TEST

START_TEST (test_rejects_ext_keys_trailing)
{
    const uint8_t fixext [] = { 0xd4, 0x01, 0x00 };
    const uint8_t ext8 [] = { 0xc7, 0x02, 0x05, 0xaa, 0xbb };
    const uint8_t timestamp [] = { 0xd6, 0xff, 0, 0, 0, 1 };
    const uint8_t int_key [] = { 0x81, 0x01, 0xc0 };
    const uint8_t nil_key [] = { 0x81, 0xc0, 0xc0 };
    const uint8_t dup_key [] = { 0x82, 0xa1, 'a', 0x01, 0xa1, 'a', 0x02 };
    const uint8_t trailing [] = { 0x01, 0x02 };
    const uint8_t never_used [] = { 0xc1 };
    const uint8_t bad_utf8 [] = { 0xa2, 0xff, 0xfe };
    const uint8_t bad_utf8_key [] = { 0x81, 0xa1, 0xff, 0xc0 };
    const uint8_t big_uint [] = { 0xcf, 0xff, 0, 0, 0, 0, 0, 0, 0 };
    const uint8_t nan [] = { 0xcb, 0x7f, 0xf8, 0, 0, 0, 0, 0, 0 };
    s_rejects (fixext, sizeof (fixext), NULL, "extension");
    s_rejects (ext8, sizeof (ext8), NULL, "extension");
    s_rejects (timestamp, sizeof (timestamp), NULL, "extension");
    s_rejects (int_key, sizeof (int_key), NULL, "not a string");
    s_rejects (nil_key, sizeof (nil_key), NULL, "not a string");
    s_rejects (dup_key, sizeof (dup_key), NULL, "duplicate");
    s_rejects (trailing, sizeof (trailing), NULL, "trailing");
    s_rejects (never_used, sizeof (never_used), NULL, "invalid type");
    s_rejects (bad_utf8, sizeof (bad_utf8), NULL, "UTF-8");
    s_rejects (bad_utf8_key, sizeof (bad_utf8_key), NULL, "UTF-8");
    s_rejects (big_uint, sizeof (big_uint), NULL, "beyond int64");
    s_rejects (nan, sizeof (nan), NULL, "not finite");
}
END_TEST

START_TEST (test_rejects_oversize)
{
    proto_mpk_limits_t limits;
    proto_mpk_limits_default (&limits);
    limits.max_bytes = 16;
    uint8_t doc [17] = { 0xb0 };            //  a 16-byte fixstr: 17 bytes in all
    memset (doc + 1, 'a', 16);
    s_rejects (doc, sizeof (doc), &limits, "over the limit");
    limits.max_bytes = 1024;
    limits.max_string = 8;
    s_rejects (doc, sizeof (doc), &limits, "string of 16 bytes");
    //  A key is a string too.
    const uint8_t long_key [] = { 0x81, 0xa9, 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 0xc0 };
    s_rejects (long_key, sizeof (long_key), &limits, "string of 9 bytes");
}
END_TEST

START_TEST (test_reader_skip)
{
    //  {"a": [1, {"b": "c"}], "d": 2.5}
    msgpack_sbuffer sbuf;
    msgpack_sbuffer_init (&sbuf);
    msgpack_packer pk;
    msgpack_packer_init (&pk, &sbuf, msgpack_sbuffer_write);
    msgpack_pack_map (&pk, 2);
    msgpack_pack_str_with_body (&pk, "a", 1);
    msgpack_pack_array (&pk, 2);
    msgpack_pack_int (&pk, 1);
    msgpack_pack_map (&pk, 1);
    msgpack_pack_str_with_body (&pk, "b", 1);
    msgpack_pack_str_with_body (&pk, "c", 1);
    msgpack_pack_str_with_body (&pk, "d", 1);
    msgpack_pack_double (&pk, 2.5);
    proto_mpr_t reader;
    proto_mpr_init (&reader, sbuf.data, sbuf.size);
    ck_assert_int_eq (proto_mpr_skip (&reader, 8), 0);
    ck_assert_uint_eq (proto_mpr_left (&reader), 0);
    proto_mpr_init (&reader, sbuf.data, sbuf.size);
    ck_assert_int_eq (proto_mpr_skip (&reader, 1), -2);     //  two levels deep
    msgpack_sbuffer_destroy (&sbuf);
}
END_TEST

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("proto_mpk");
    TCase *tc = tcase_create ("core");
    tcase_add_test (tc, test_scalars_round_trip);
    tcase_add_test (tc, test_nested_round_trip);
    tcase_add_test (tc, test_foreign_encodings_accepted);
    tcase_add_test (tc, test_rejects_truncated);
    tcase_add_test (tc, test_rejects_random_bytes);
    tcase_add_test (tc, test_rejects_depth_bomb);
    tcase_add_test (tc, test_rejects_huge_counts);
    tcase_add_test (tc, test_rejects_ext_keys_trailing);
    tcase_add_test (tc, test_rejects_oversize);
    tcase_add_test (tc, test_reader_skip);
    suite_add_tcase (suite, tc);
    return suite;
}

int
main (void)
{
    return testutil_run_suite (s_suite ());
}
