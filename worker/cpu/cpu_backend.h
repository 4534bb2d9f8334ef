/*  cpu_backend - the CPU backend: C kernels graded in sandboxed runners.

    prepare compiles the candidate, reference and baseline (cpu_cc,
    cached); execute starts one kgym-runner per program, and for every size
    and trial generates fresh inputs from the seed, runs the reference in its
    own process, runs the candidate in another on poisoned outputs, and
    compares here, in the supervisor, whose memory no kernel can reach.
    Reached only through its table (worker_backend.h), listed in
    worker_registry.c.
*/
#ifndef CPU_BACKEND_H
#define CPU_BACKEND_H

#include "worker_backend.h"

extern const worker_backend_t cpu_backend;

#endif
