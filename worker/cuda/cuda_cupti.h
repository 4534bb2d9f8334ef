/*  cuda_cupti - CUPTI kernel activity records, loaded at run time (runner side).

    kgym-cuda-runner does not link CUPTI: like the driver (cuda_driver) it
    dlopens libcupti.so.<major> (or $KGYM_CUPTI_LIB), so a host without
    CUPTI still grades; the profile then says why it is missing. Collection
    is on only between cuda_cupti_begin and cuda_cupti_end, around one
    program's launches in the profiled run: the timed runs never see
    CUPTI's overhead. CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL (kernels keep
    running concurrently; KIND_KERNEL would serialise them). CUPTI hands
    buffers back on its own thread, so the records sit behind a mutex; its
    callbacks take no context pointer, so the state is per process (one
    runner, one GPU).
*/
#ifndef CUDA_CUPTI_H
#define CUDA_CUPTI_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <cuda.h>
#include "cuda_profile.h"

//  dlopen CUPTI, check its version, register the buffer callbacks. 0, or
//  -1 with a reason ("libcupti.so.13: cannot open shared object file",
//  "disabled by KGYM_CUPTI=0"). Idempotent; the reason of a failure sticks.
int cuda_cupti_load (char *err, size_t errlen);

//  Start recording kernels; *begin_ns is CUPTI's clock just before (the
//  records' own clock), so the caller can place every record by its start
//  time. Call after the stream is synchronised. 0 or -1.
int cuda_cupti_begin (uint64_t *begin_ns, char *err, size_t errlen);

//  Stop recording, flush, and hand over the records CUPTI delivered since
//  the last hand-over (malloc'd, caller frees; at most
//  CUDA_PROFILE_MAX_RECORDS, *truncated when there were more), CUPTI's
//  count of dropped records, and *end_ns (CUPTI's clock when called). CUPTI
//  may deliver a kernel's record after the flush that should have carried
//  it, into a later hand-over: records are placed by their start time
//  between begin_ns and end_ns, never by the hand-over they came in. Call
//  after the stream is synchronised. 0 or -1 with a reason.
int cuda_cupti_end (CUcontext ctx, uint64_t *end_ns, cuda_profile_record_t **records, size_t *n,
                    bool *truncated, size_t *dropped, char *err, size_t errlen);

//  Flush again (recording stays as it is) and hand over records delivered
//  late, as cuda_cupti_end does. 0 or -1.
int cuda_cupti_collect (cuda_profile_record_t **records, size_t *n, bool *truncated, char *err,
                        size_t errlen);

//  Demangle a C++ symbol with libstdc++'s __cxa_demangle (loaded on first
//  use) into buf; returns buf, or sym when it is not a C++ name.
const char *cuda_cupti_demangle (const char *sym, char *buf, size_t len);

#endif
