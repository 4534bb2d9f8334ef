/*  worker_host - what this host offers a worker: usable CPU cores and GPUs.

    Defaults that scale with the machine are sized from these: the CPU
    backend's run slots and every backend's compile pool (kgym-worker
    --help, docs/benchmarks.md). Usable cores are the process's CPU
    affinity, bounded by the cgroup v2 CPU quota (cpu.max) of its cgroup
    and every cgroup above it, as a container's CPU limit or a unit's
    CPUQuota= sets it. GPUs are the ones the NVIDIA driver lists under
    /proc/driver/nvidia/gpus: the host's, whatever CUDA_VISIBLE_DEVICES
    shows one process, so the workers of one host (one per GPU) divide its
    cores between them instead of each taking them all.
*/
#ifndef WORKER_HOST_H
#define WORKER_HOST_H

#include <stdint.h>

//  Cores this process may use (at least 1).
uint32_t worker_host_cores (void);

//  GPUs the NVIDIA driver lists on this host (0 when none or no driver).
uint32_t worker_host_gpus (void);

//  Cores one GPU's worker may count on: the usable cores shared evenly by
//  the host's GPUs (at least 1).
uint32_t worker_host_cores_per_gpu (void);

//  Cores a cgroup v2 cpu.max line allows ("max 100000": 0, no limit;
//  "250000 100000": 3, rounded up). 0 also when the text is not such a line.
uint32_t worker_host_quota_cores (const char *cpu_max);

#endif
