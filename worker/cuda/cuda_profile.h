/*  cuda_profile - kernel records of one profiled run, summarised (runner side).

    kgym-cuda-runner profiles one extra input set after correctness and
    timing (cuda_exec, SET_PROFILE): CUPTI records every kernel a program
    launched (cuda_cupti collects them); this class turns the records of one
    program into the result's figures: per kernel name, launches, GPU time,
    share, grid, block, registers, shared memory, theoretical occupancy and
    DRAM bandwidth; per program the kernel count against the declared
    launches; and the roofline floor (the bytes the task must move at the
    device's peak bandwidth) with the verdict on a candidate measured
    faster than physics allows. Pure computation on plain data: no CUDA
    call here, so the unit tests drive it with synthetic records.
    Fields and formulas: docs/profile.md.
*/
#ifndef CUDA_PROFILE_H
#define CUDA_PROFILE_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include <jansson.h>
#include "cuda_plan.h"

#define CUDA_PROFILE_NAME       256         //  bytes kept of a kernel's symbol
#define CUDA_PROFILE_MAX_RECORDS 4096       //  records kept per profiled program
#define CUDA_PROFILE_MARGIN     0.2         //  default roofline safety margin

//  One kernel execution, as CUPTI reported it.
typedef struct {
    char symbol [CUDA_PROFILE_NAME];    //  the symbol (mangled for C++ kernels)
    uint64_t start_ns, end_ns;          //  GPU timestamps
    int32_t grid [3], block [3];        //  launch geometry
    int32_t registers;                  //  per thread
    int32_t static_shared;              //  bytes per block
    int32_t dynamic_shared;             //  bytes per block
} cuda_profile_record_t;

//  Device facts the figures need (from cuDeviceGetAttribute).
typedef struct {
    char name [256];            //  "NVIDIA H200"
    int sm_count;               //  multiprocessors
    uint64_t l2_bytes;          //  L2 cache
    int mem_clock_khz;          //  CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE (0 = unknown)
    int bus_width_bits;         //  CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH (0 = unknown)
    double peak_bw_gbs;         //  peak DRAM bandwidth, GB/s (10^9 bytes/s); 0 = unknown
    const char *peak_source;    //  "attributes", "KGYM_PEAK_BW_GBS" or "unknown" (static)
    int warp_size;              //  threads per warp
    int max_threads_sm;         //  resident threads per SM
    int max_blocks_sm;          //  resident blocks per SM
    int regs_sm;                //  32-bit registers per SM
    int shared_sm;              //  shared memory per SM, bytes
    int reserved_shared;        //  shared memory the driver reserves per block
} cuda_profile_device_t;

//  What one program's summary is made from.
typedef struct {
    const cuda_profile_record_t *records;   //  this program's kernels, any order
    size_t nrecords;                        //  entries
    const cuda_plan_call_t *call;           //  its declared launches at the timing size
    const int *blocks_per_sm;               //  per declared launch: occupancy API's answer, -1 unknown
    const cuda_profile_device_t *device;    //  facts
    uint64_t bytes;                         //  bytes the task must move (0 = unknown)
    double run_us;                          //  CUDA events around the profiled run (0 = none)
    //  Demangle sym into buf (returns buf or sym); NULL keeps symbols as they are.
    const char *(*demangle) (const char *sym, char *buf, size_t len);
} cuda_profile_input_t;

//  Peak DRAM bandwidth in GB/s from the attributes: 2 (double data rate)
//  x clock x bus width / 8; env (KGYM_PEAK_BW_GBS text, may be NULL) wins
//  when it is a number > 0. Fills dev->peak_bw_gbs and dev->peak_source.
void cuda_profile_peak (cuda_profile_device_t *dev, const char *env);

//  Roofline safety margin from text (KGYM_ROOFLINE_MARGIN, may be NULL):
//  a number in [0, 1], else CUDA_PROFILE_MARGIN.
double cuda_profile_margin (const char *env);

//  Theoretical occupancy: active warps / max warps per SM, given the
//  resident blocks per SM the occupancy API found for a block size.
double cuda_profile_occupancy (const cuda_profile_device_t *dev, int blocks_per_sm, int64_t block_threads);

//  Time the bytes need at peak bandwidth, microseconds (0 when unknown).
double cuda_profile_floor_us (const cuda_profile_device_t *dev, uint64_t bytes);

//  One program's summary: {kernels[], total_us, declared_launches,
//  observed_launches, missing_launches[], extra_kernels, dram_bw_gbs,
//  dram_bw_fraction, run_us}. Records are matched to the declared
//  launches by symbol, in start order; *missing gets the declared
//  launches no record matched. NULL only when out of memory.
json_t *cuda_profile_summarise (const cuda_profile_input_t *in, uint32_t *missing);

//  The device object of a profile.
json_t *cuda_profile_device_json (const cuda_profile_device_t *dev);

//  The candidate's verdict from its profile (the object cuda_exec builds:
//  declared_launches, observed_launches, missing_launches, bytes,
//  roofline_floor_us, device.peak_bw_gbs) and its timed median (0 = not
//  timed). Returns true, with a one-line reason in msg, when the
//  candidate is incorrect: a declared launch never reached the GPU, or
//  the median is below floor x (1 - margin).
bool cuda_profile_verdict (json_t *profile, double median_us, double margin, char *msg, size_t msglen);

#endif
