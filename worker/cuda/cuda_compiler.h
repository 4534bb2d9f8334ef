/*  cuda_compiler - kgym-nvrtc: one NVRTC compile in a confined process.

    cuda_nvrtc spawns kgym-nvrtc per compile that misses the cache. It
    confines itself before reading any untrusted text: network namespace,
    nobody, no exec or fork, no file writes, a Landlock read-only view of
    the toolkit, NVRTC's own directory and the system libraries (so an
    #include of a host file fails), RLIMIT_AS 8 GiB and RLIMIT_CPU. Then it
    reads one COMPILE message (cuda_msg), runs NVRTC with cuda_nvrtc_flags,
    answers COMPILED {status, log | error} + cubin, and exits. It links
    NVRTC only, never libcuda, so it runs on machines without a GPU driver.
    The parent kills its process group after the compile timeout.
*/
#ifndef CUDA_COMPILER_H
#define CUDA_COMPILER_H

#include <stdbool.h>
#include <stdint.h>

//  Serve one compile on fd; cpu_limit seconds of RLIMIT_CPU (0 = 60).
//  Returns the process exit code.
int cuda_compiler_run (int fd, uint32_t cpu_limit, bool confine);

#endif
