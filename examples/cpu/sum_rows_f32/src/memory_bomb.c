/* Hostile: tries to take 64 GiB of host memory in 1 GiB blocks, first
   reserving all of them, then touching every page so that the memory is
   really used (not just reserved). It never writes the output.

   Every way this can end is a runtime error:
   - the address-space cap (RLIMIT_AS) makes malloc return NULL within the
     first few blocks, and then it traps on purpose (SIGILL) at once, so a
     refused allocation can never turn into a quiet "incorrect";
   - with only a memory cgroup (memory.max), the reservations succeed
     (overcommit) and the cgroup kills it with SIGKILL while it touches
     pages, after about the cap's worth of page faults.
   Only a worker that enforces no memory cap at all could let it through:
   then it spins until the timeout, which a test should flag as a sandbox
   hole. Expected: runtime_error. */
#include <stdint.h>
#include <stdlib.h>

#define CHUNK (1ull << 30)
#define NCHUNKS 64

void sum_rows(const float *x, float *y, int32_t M, int32_t N)
{
    static volatile char *block[NCHUNKS];
    for (int i = 0; i < NCHUNKS; i++) {
        block[i] = malloc(CHUNK);
        if (!block[i])
            __builtin_trap();
    }
    for (int i = 0; i < NCHUNKS; i++)
        for (uint64_t off = 0; off < CHUNK; off += 4096)
            block[i][off] = 1;
    volatile int spin = 1;
    while (spin)
        ;
}
