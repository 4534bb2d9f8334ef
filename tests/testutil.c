/*  testutil - helpers shared by the libcheck tests.  */
#include "testutil.h"
#include "kgym_config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *
testutil_source_path (const char *relative)
{
    const char *root = getenv ("KGYM_SOURCE_DIR");
    if (!root)
        root = KGYM_SOURCE_DIR;
    size_t len = strlen (root) + strlen (relative) + 2;
    char *path = malloc (len);
    ck_assert_ptr_nonnull (path);
    snprintf (path, len, "%s/%s", root, relative);
    return path;
}

json_t *
testutil_load_json (const char *relative)
{
    char *path = testutil_source_path (relative);
    json_error_t error;
    json_t *json = json_load_file (path, 0, &error);
    ck_assert_msg (json != NULL, "cannot load %s: %s (line %d)", path, error.text, error.line);
    free (path);
    return json;
}

int
testutil_run_suite (Suite *suite)
{
    SRunner *runner = srunner_create (suite);
    srunner_run_all (runner, CK_NORMAL);
    int failed = srunner_ntests_failed (runner);
    srunner_free (runner);
    return failed == 0 ? 0 : 1;
}
