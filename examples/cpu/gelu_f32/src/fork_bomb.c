/* Hostile: a fork bomb. Every process forks for ever; the parent stops at
   the first failed fork() and returns WITHOUT writing the output.

   In the sandbox fork() is refused (seccomp) or runs into the process cap
   at once, so the kernel returns with y untouched (NaN-poisoned): expected
   incorrect. The status is the same whether fork fails on the first call
   or after the cap is reached; any children are left spinning in fork()
   and must be reaped when the runner's process group is killed. */
#include <stdint.h>
#include <unistd.h>

void gelu(const float *x, float *y, int32_t N)
{
    for (;;) {
        pid_t pid = fork();
        if (pid < 0)
            return;                 /* denied: leave y unwritten */
        if (pid == 0)
            for (;;)
                (void) fork();      /* child: keep multiplying */
    }
}
