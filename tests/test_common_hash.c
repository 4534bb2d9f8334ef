/*  test_common_hash - cache-key hashing: field delimiters, tags, hex form,
    and agreement with a one-shot BLAKE2b-256 of the documented framing.  */
#include "testutil.h"
#include "common_hash.h"
#include <sodium.h>
#include <string.h>

//  Digest of (tag, text) fields as hex.
static void
s_digest (const char *const *fields, const char *tags, size_t n, char hex [65])
{
    common_hash_t *hash = common_hash_new ();
    ck_assert_ptr_nonnull (hash);
    for (size_t i = 0; i < n; i++)
        common_hash_add_str (hash, tags [i], fields [i]);
    uint8_t digest [COMMON_HASH_BYTES];
    common_hash_final (hash, digest);
    common_hash_destroy (&hash);
    ck_assert_ptr_null (hash);
    common_hash_hex (digest, hex);
}

START_TEST (test_delimiters)
{
    char a [65], b [65], c [65], d [65];
    const char *ab_c [] = { "ab", "c" }, *a_bc [] = { "a", "bc" }, *abc [] = { "abc" };
    s_digest (ab_c, "SS", 2, a);
    s_digest (a_bc, "SS", 2, b);
    s_digest (abc, "S", 1, c);
    ck_assert_str_ne (a, b);
    ck_assert_str_ne (a, c);
    ck_assert_str_ne (b, c);
    //  Same text under another tag is another key.
    const char *opt [] = { "abc" };
    s_digest (opt, "O", 1, d);
    ck_assert_str_ne (c, d);
    //  And the same input is the same key.
    s_digest (ab_c, "SS", 2, d);
    ck_assert_str_eq (a, d);
    //  An empty field still counts.
    const char *with_empty [] = { "abc", "" };
    s_digest (with_empty, "SS", 2, d);
    ck_assert_str_ne (c, d);
}
END_TEST

START_TEST (test_framing)
{
    //  The stream is tag + 8-byte little-endian length + bytes per field.
    common_hash_t *hash = common_hash_new ();
    common_hash_add_str (hash, 'S', "hi");
    common_hash_add_u64 (hash, 'V', 0x0102030405060708ull);
    uint8_t got [COMMON_HASH_BYTES];
    common_hash_final (hash, got);
    common_hash_destroy (&hash);
    common_hash_destroy (&hash);        //  twice is harmless

    uint8_t stream [] = {
        'S', 2, 0, 0, 0, 0, 0, 0, 0, 'h', 'i',
        'V', 8, 0, 0, 0, 0, 0, 0, 0, 8, 7, 6, 5, 4, 3, 2, 1
    };
    uint8_t want [COMMON_HASH_BYTES];
    crypto_generichash (want, sizeof want, stream, sizeof stream, NULL, 0);
    ck_assert (memcmp (got, want, sizeof want) == 0);
}
END_TEST

START_TEST (test_hex)
{
    uint8_t digest [COMMON_HASH_BYTES];
    for (int i = 0; i < COMMON_HASH_BYTES; i++)
        digest [i] = (uint8_t) (i * 17);
    char hex [65];
    memset (hex, 'x', sizeof hex);
    common_hash_hex (digest, hex);
    ck_assert_uint_eq (strlen (hex), 64);
    ck_assert (strncmp (hex, "00112233445566778899aabbccddeeff", 32) == 0);
    //  BLAKE2b-256 of nothing, a published value.
    common_hash_t *hash = common_hash_new ();
    uint8_t empty [COMMON_HASH_BYTES];
    common_hash_final (hash, empty);
    common_hash_destroy (&hash);
    common_hash_hex (empty, hex);
    ck_assert_str_eq (hex, "0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8");
}
END_TEST

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("common_hash");
    TCase *tc = tcase_create ("core");
    tcase_add_test (tc, test_delimiters);
    tcase_add_test (tc, test_framing);
    tcase_add_test (tc, test_hex);
    suite_add_tcase (suite, tc);
    return suite;
}

int
main (void)
{
    return testutil_run_suite (s_suite ());
}
