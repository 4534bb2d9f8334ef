/*  test_common_util - sizes in words (common_bytes_parse), as kgym-worker's
    --max-job-memory takes them.  */
#include "testutil.h"
#include "common_util.h"
#include <stdint.h>

START_TEST (test_sizes_with_units)
{
    struct { const char *text; uint64_t bytes; } cases [] = {
        { "4096", 4096 }, { "1", 1 }, { "8G", 8ull << 30 }, { "8g", 8ull << 30 },
        { "8GiB", 8ull << 30 }, { "8GB", 8ull << 30 }, { "512M", 512ull << 20 },
        { "64k", 64ull << 10 }, { "2T", 2ull << 40 }, { "1.5G", 3ull << 29 },
        { "0.5K", 512 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases [0]; i++) {
        uint64_t bytes = 0;
        ck_assert_msg (common_bytes_parse (cases [i].text, &bytes) == 0, "'%s' refused", cases [i].text);
        ck_assert_msg (bytes == cases [i].bytes, "'%s': %" PRIu64 ", expected %" PRIu64,
                       cases [i].text, bytes, cases [i].bytes);
    }
}
END_TEST

START_TEST (test_what_is_no_size)
{
    const char *bad [] = {
        NULL, "", "G", "-1G", "+1G", " 8G", "8G ", "8 G", "0", "0G", "0.1", "1e9", "0x10",
        "inf", "nan", "1..5G", "8Gi", "8Gib", "8GG", "8X", "8P", "16777216T", "99999999999999999999",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad [0]; i++) {
        uint64_t bytes = 12345;
        ck_assert_msg (common_bytes_parse (bad [i], &bytes) == -1, "'%s' taken as %" PRIu64,
                       bad [i]? bad [i]: "(null)", bytes);
        ck_assert_msg (bytes == 12345, "'%s' changed the result", bad [i]? bad [i]: "(null)");
    }
    //  The largest that fits.
    uint64_t bytes = 0;
    ck_assert_int_eq (common_bytes_parse ("16777215T", &bytes), 0);
    ck_assert (bytes == 16777215ull << 40);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("common_util");
    TCase *tc = tcase_create ("bytes");
    tcase_add_test (tc, test_sizes_with_units);
    tcase_add_test (tc, test_what_is_no_size);
    suite_add_tcase (suite, tc);
    return testutil_run_suite (suite);
}
