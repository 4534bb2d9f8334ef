/*  fuzz_main - the libFuzzer entry points of one target.

    Built once per target by fuzz/meson.build with FUZZ_ONE defined as that
    target's entry function (fuzz_one_mpk, ...): all the logic lives in
    fuzz_targets.c, where the regression test reaches it too.
*/
#include "fuzz_targets.h"

#ifndef FUZZ_ONE
#   error "FUZZ_ONE must name a fuzz_one_* function"
#endif

int LLVMFuzzerInitialize (int *argc, char ***argv);
int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
    (void) argc;
    (void) argv;
    fuzz_init ();
    return 0;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    return FUZZ_ONE (data, size);
}
