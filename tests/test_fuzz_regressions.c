/*  test_fuzz_regressions - every input the fuzzers ever crashed on, and
    every seed, still goes through its target cleanly.

    Replays every file under fuzz/regressions/<target>/ and
    fuzz/corpus/<target>/ through the same entry functions the libFuzzer binaries call (fuzz_targets.c),
    so the ordinary gcc build proves the fixes without clang (and the
    valgrind setup checks them for leaks). A target that crashes or breaks
    an invariant aborts its test; the file being replayed is on stderr.  */
#include "testutil.h"
//  The targets are compiled into this test rather than into a library of
//  their own: fuzz/ is only a meson subdir in fuzz builds.
#include "../fuzz/fuzz_targets.c"
#include <dirent.h>
#include <sys/stat.h>

#define S_MAX_INPUT (16u << 20)     //  no seed or crasher comes near this

//  Read a whole file; NULL when it is not a readable regular file.
static uint8_t *
s_read (const char *path, size_t *size)
{
    struct stat st;
    if (stat (path, &st) != 0 || !S_ISREG (st.st_mode) || (uint64_t) st.st_size > S_MAX_INPUT)
        return NULL;
    FILE *file = fopen (path, "rb");
    if (!file)
        return NULL;
    //  One spare byte so an empty file still gets a buffer.
    uint8_t *data = malloc ((size_t) st.st_size + 1);
    size_t got = data ? fread (data, 1, (size_t) st.st_size, file) : 0;
    fclose (file);
    if (data && got != (size_t) st.st_size) {
        free (data);
        return NULL;
    }
    *size = got;
    return data;
}

//  Feed every regular file of fuzz/<kind>/<target> to the target; the count.
static size_t
s_replay (const fuzz_target_t *target, const char *kind)
{
    char relative [256];
    snprintf (relative, sizeof relative, "fuzz/%s/%s", kind, target->name);
    char *folder = testutil_source_path (relative);
    size_t count = 0;
    DIR *dir = opendir (folder);
    if (dir) {
        struct dirent *entry;
        while ((entry = readdir (dir))) {
            if (entry->d_name [0] == '.')
                continue;
            size_t len = strlen (folder) + strlen (entry->d_name) + 2;
            char *path = malloc (len);
            ck_assert_ptr_nonnull (path);
            snprintf (path, len, "%s/%s", folder, entry->d_name);
            size_t size = 0;
            uint8_t *data = s_read (path, &size);
            if (data) {
                fprintf (stderr, "fuzz_%s < %s\n", target->name, path);
                ck_assert_int_eq (target->one (data, size), 0);
                free (data);
                count++;
            }
            free (path);
        }
        closedir (dir);
    }
    free (folder);
    return count;
}

//  Loop test: _i is the index of the target in fuzz_targets.
START_TEST (test_target_replays_cleanly)
{
    fuzz_init ();
    const fuzz_target_t *target = &fuzz_targets [_i];
    size_t seeds = s_replay (target, "corpus");
    size_t crashers = s_replay (target, "regressions");
    ck_assert_msg (seeds > 0, "fuzz/corpus/%s has no seeds", target->name);
    fprintf (stderr, "fuzz_%s: %zu seeds and %zu regressions replayed\n",
             target->name, seeds, crashers);
}
END_TEST

//  Hand-made inputs for the branches no file may reach: empty input.
START_TEST (test_empty_inputs)
{
    fuzz_init ();
    for (const fuzz_target_t *target = fuzz_targets; target->name; target++) {
        static const uint8_t nothing [1] = { 0 };
        ck_assert_int_eq (target->one (nothing, 0), 0);
        ck_assert_int_eq (target->one (nothing, 1), 0);
    }
}
END_TEST

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("fuzz_regressions");
    TCase *tc = tcase_create ("core");
    int ntargets = 0;
    while (fuzz_targets [ntargets].name)
        ntargets++;
    tcase_add_loop_test (tc, test_target_replays_cleanly, 0, ntargets);
    tcase_add_test (tc, test_empty_inputs);
    suite_add_tcase (suite, tc);
    return suite;
}

int
main (void)
{
    return testutil_run_suite (s_suite ());
}
