/*  cuda_profile - kernel records of one profiled run, summarised (runner side).  */
#include "cuda_profile.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
cuda_profile_peak (cuda_profile_device_t *dev, const char *env)
{
    char *end = NULL;
    double over = env && *env? strtod (env, &end): 0;
    if (env && *env && end && *end == 0 && isfinite (over) && over > 0) {
        dev->peak_bw_gbs = over;
        dev->peak_source = "KGYM_PEAK_BW_GBS";
        return;
    }
    if (dev->mem_clock_khz > 0 && dev->bus_width_bits > 0) {
        //  kHz -> Hz, two transfers per clock, bits -> bytes, bytes/s -> GB/s.
        dev->peak_bw_gbs = 2.0 * (double) dev->mem_clock_khz * 1e3 * (double) dev->bus_width_bits / 8.0 / 1e9;
        dev->peak_source = "attributes";
        return;
    }
    dev->peak_bw_gbs = 0;
    dev->peak_source = "unknown";
}

double
cuda_profile_margin (const char *env)
{
    char *end = NULL;
    double margin = env && *env? strtod (env, &end): -1;
    if (env && *env && end && *end == 0 && margin >= 0 && margin <= 1)
        return margin;
    return CUDA_PROFILE_MARGIN;
}

double
cuda_profile_occupancy (const cuda_profile_device_t *dev, int blocks_per_sm, int64_t block_threads)
{
    if (blocks_per_sm < 0 || block_threads <= 0 || dev->warp_size <= 0 || dev->max_threads_sm < dev->warp_size)
        return NAN;
    int64_t warps_per_block = (block_threads + dev->warp_size - 1) / dev->warp_size;
    double max_warps = (double) (dev->max_threads_sm / dev->warp_size);
    double occupancy = (double) blocks_per_sm * (double) warps_per_block / max_warps;
    return occupancy > 1? 1: occupancy;
}

double
cuda_profile_floor_us (const cuda_profile_device_t *dev, uint64_t bytes)
{
    if (dev->peak_bw_gbs <= 0 || bytes == 0)
        return 0;
    //  bytes / (GB/s x 1e9) seconds = bytes / (GB/s x 1e3) microseconds.
    return (double) bytes / (dev->peak_bw_gbs * 1e3);
}

//  A number, or null when it is not finite.
static json_t *
s_num (double value)
{
    return isfinite (value)? json_real (value): json_null ();
}

static json_t *
s_dims (const int32_t dims [3])
{
    return json_pack ("[i,i,i]", (int) dims [0], (int) dims [1], (int) dims [2]);
}

//  qsort_r order of record indices by start time (ties: array order).
static int
s_by_start (const void *a, const void *b, void *records)
{
    const cuda_profile_record_t *x = &((const cuda_profile_record_t *) records) [*(const size_t *) a];
    const cuda_profile_record_t *y = &((const cuda_profile_record_t *) records) [*(const size_t *) b];
    if (x->start_ns != y->start_ns)
        return x->start_ns < y->start_ns? -1: 1;
    return *(const size_t *) a < *(const size_t *) b? -1: 1;
}

//  Records of one group: same symbol, geometry and dynamic shared memory.
static bool
s_same_group (const cuda_profile_record_t *a, const cuda_profile_record_t *b)
{
    return strcmp (a->symbol, b->symbol) == 0 && memcmp (a->grid, b->grid, sizeof a->grid) == 0
        && memcmp (a->block, b->block, sizeof a->block) == 0 && a->dynamic_shared == b->dynamic_shared;
}

json_t *
cuda_profile_summarise (const cuda_profile_input_t *in, uint32_t *missing)
{
    size_t n = in->nrecords;
    uint32_t nlaunches = in->call? in->call->nlaunches: 0;
    *missing = 0;
    size_t *order = calloc (n? n: 1, sizeof *order);
    int *match = calloc (n? n: 1, sizeof *match);          //  declared launch of each sorted record, -1 none
    size_t *group_of = calloc (n? n: 1, sizeof *group_of); //  first sorted index of its group
    cuda_profile_record_t *recs = malloc ((n? n: 1) * sizeof *recs);   //  ours: names may be fixed
    json_t *summary = json_object ();
    json_t *kernels = json_array ();
    json_t *missing_list = json_array ();
    if (!order || !match || !group_of || !recs || !summary || !kernels || !missing_list) {
        free (recs);
        free (order);
        free (match);
        free (group_of);
        json_decref (summary);
        json_decref (kernels);
        json_decref (missing_list);
        return NULL;
    }
    memcpy (recs, in->records, n * sizeof *recs);
    for (size_t i = 0; i < n; i++) {
        order [i] = i;
        match [i] = -1;
    }
    qsort_r (order, n, sizeof *order, s_by_start, (void *) recs);

    //  One stream: the records come in launch order. Each declared launch
    //  takes the next record with its symbol; records skipped on the way
    //  (device-side launches) are extra. CUPTI names a kernel from a cache
    //  keyed by its function handle, and a module loaded where an unloaded
    //  one was can inherit the old names (seen on the H200: the next job's
    //  gelu recorded as the last job's bgr_ref). So when no record has the
    //  name, the next one with the launch's exact geometry is it, renamed.
    size_t next = 0;
    uint32_t renamed = 0;
    for (uint32_t l = 0; l < nlaunches; l++) {
        const cuda_plan_launch_t *launch = &in->call->launches [l];
        const char *kernel = launch->kernel;
        size_t j = next;
        while (j < n && strcmp (recs [order [j]].symbol, kernel) != 0)
            j++;
        if (j == n) {
            for (j = next; j < n; j++) {
                const cuda_profile_record_t *r = &recs [order [j]];
                bool same = true;
                for (int d = 0; d < 3; d++)
                    same &= r->grid [d] == launch->grid [d] && r->block [d] == launch->block [d];
                if (same)
                    break;
            }
            if (j < n) {
                snprintf (recs [order [j]].symbol, sizeof recs [order [j]].symbol, "%s", kernel);
                renamed++;
            }
        }
        if (j < n) {
            match [j] = (int) l;
            next = j + 1;
        }
        else {
            (*missing)++;
            json_array_append_new (missing_list, json_pack ("{s:i, s:s}", "launch", (int) l, "kernel", kernel));
        }
    }
    uint64_t total_ns = 0;
    uint32_t extra = 0;
    for (size_t j = 0; j < n; j++) {
        const cuda_profile_record_t *r = &recs [order [j]];
        total_ns += r->end_ns > r->start_ns? r->end_ns - r->start_ns: 0;
        extra += match [j] < 0;
    }
    double total_us = (double) total_ns / 1e3;
    const cuda_profile_device_t *dev = in->device;
    double bw = total_ns > 0 && in->bytes > 0? (double) in->bytes / (double) total_ns: NAN;    //  bytes/ns = GB/s
    double fraction = isfinite (bw) && dev->peak_bw_gbs > 0? bw / dev->peak_bw_gbs: NAN;

    //  Group in order of first appearance.
    for (size_t j = 0; j < n; j++) {
        group_of [j] = j;
        for (size_t k = 0; k < j; k++)
            if (group_of [k] == k && s_same_group (&recs [order [k]], &recs [order [j]])) {
                group_of [j] = k;
                break;
            }
    }
    for (size_t g = 0; g < n; g++) {
        if (group_of [g] != g)
            continue;
        const cuda_profile_record_t *first = &recs [order [g]];
        uint64_t group_ns = 0;
        uint32_t launches = 0;
        int blocks = -1;
        bool declared = false;
        for (size_t j = g; j < n; j++) {
            if (group_of [j] != g)
                continue;
            const cuda_profile_record_t *r = &recs [order [j]];
            group_ns += r->end_ns > r->start_ns? r->end_ns - r->start_ns: 0;
            launches++;
            declared |= match [j] >= 0;
            if (blocks < 0 && match [j] >= 0 && in->blocks_per_sm)
                blocks = in->blocks_per_sm [match [j]];
        }
        int64_t threads = (int64_t) first->block [0] * first->block [1] * first->block [2];
        double share = total_ns > 0? (double) group_ns / (double) total_ns: NAN;
        //  The task's bytes are split over the kernels by share of time:
        //  every kernel shows the program's average bandwidth.
        double kbw = isfinite (bw) && isfinite (share) && group_ns > 0
                   ? (double) in->bytes * share / (double) group_ns: NAN;
        double kfraction = isfinite (kbw) && dev->peak_bw_gbs > 0? kbw / dev->peak_bw_gbs: NAN;
        char buf [1024];
        const char *name = in->demangle? in->demangle (first->symbol, buf, sizeof buf): first->symbol;
        json_t *k = json_object ();
        json_object_set_new (k, "name", json_string (name? name: first->symbol));
        json_object_set_new (k, "symbol", json_string (first->symbol));
        json_object_set_new (k, "launches", json_integer (launches));
        json_object_set_new (k, "total_us", json_real ((double) group_ns / 1e3));
        json_object_set_new (k, "mean_us", json_real ((double) group_ns / 1e3 / launches));
        json_object_set_new (k, "share", s_num (share));
        json_object_set_new (k, "grid", s_dims (first->grid));
        json_object_set_new (k, "block", s_dims (first->block));
        json_object_set_new (k, "registers", json_integer (first->registers));
        json_object_set_new (k, "static_shared", json_integer (first->static_shared));
        json_object_set_new (k, "dynamic_shared", json_integer (first->dynamic_shared));
        json_object_set_new (k, "blocks_per_sm", blocks >= 0? json_integer (blocks): json_null ());
        json_object_set_new (k, "occupancy", s_num (cuda_profile_occupancy (dev, blocks, threads)));
        json_object_set_new (k, "dram_bw_gbs", s_num (kbw));
        json_object_set_new (k, "dram_bw_fraction", s_num (kfraction));
        json_object_set_new (k, "declared", json_boolean (declared));
        json_array_append_new (kernels, k);
    }
    json_object_set_new (summary, "kernels", kernels);
    json_object_set_new (summary, "total_us", json_real (total_us));
    json_object_set_new (summary, "declared_launches", json_integer (nlaunches));
    json_object_set_new (summary, "observed_launches", json_integer ((json_int_t) n));
    json_object_set_new (summary, "missing_launches", missing_list);
    json_object_set_new (summary, "extra_kernels", json_integer (extra));
    json_object_set_new (summary, "renamed_records", json_integer (renamed));
    json_object_set_new (summary, "dram_bw_gbs", s_num (bw));
    json_object_set_new (summary, "dram_bw_fraction", s_num (fraction));
    json_object_set_new (summary, "run_us", in->run_us > 0? json_real (in->run_us): json_null ());
    free (recs);
    free (order);
    free (match);
    free (group_of);
    return summary;
}

json_t *
cuda_profile_device_json (const cuda_profile_device_t *dev)
{
    json_t *json = json_object ();
    if (!json)
        return NULL;
    json_object_set_new (json, "name", json_string (dev->name));
    json_object_set_new (json, "peak_bw_gbs", dev->peak_bw_gbs > 0? json_real (dev->peak_bw_gbs): json_null ());
    json_object_set_new (json, "peak_bw_source", json_string (dev->peak_source? dev->peak_source: "unknown"));
    json_object_set_new (json, "memory_clock_khz", json_integer (dev->mem_clock_khz));
    json_object_set_new (json, "bus_width_bits", json_integer (dev->bus_width_bits));
    json_object_set_new (json, "sm_count", json_integer (dev->sm_count));
    json_object_set_new (json, "l2_bytes", json_integer ((json_int_t) dev->l2_bytes));
    json_object_set_new (json, "warp_size", json_integer (dev->warp_size));
    json_object_set_new (json, "max_threads_per_sm", json_integer (dev->max_threads_sm));
    json_object_set_new (json, "max_blocks_per_sm", json_integer (dev->max_blocks_sm));
    json_object_set_new (json, "registers_per_sm", json_integer (dev->regs_sm));
    json_object_set_new (json, "shared_per_sm", json_integer (dev->shared_sm));
    json_object_set_new (json, "reserved_shared_per_block", json_integer (dev->reserved_shared));
    return json;
}

bool
cuda_profile_verdict (json_t *profile, double median_us, double margin, char *msg, size_t msglen)
{
    json_t *missing = json_object_get (profile, "missing_launches");
    json_t *observed = json_object_get (profile, "observed_launches");
    if (json_is_integer (observed) && json_array_size (missing) > 0) {
        json_t *first = json_array_get (missing, 0);
        const char *kernel = json_string_value (json_object_get (first, "kernel"));
        long long declared = (long long) json_integer_value (json_object_get (profile, "declared_launches"));
        snprintf (msg, msglen, "the profiled run found %lld of the %lld declared launches among the %lld "
                  "kernels that ran: launch %lld ('%s') never reached the GPU",
                  declared - (long long) json_array_size (missing), declared,
                  (long long) json_integer_value (observed),
                  (long long) json_integer_value (json_object_get (first, "launch")), kernel? kernel: "?");
        return true;
    }
    double floor_us = json_number_value (json_object_get (profile, "roofline_floor_us"));
    if (median_us > 0 && floor_us > 0 && median_us < floor_us * (1 - margin)) {
        double peak = json_number_value (json_object_get (json_object_get (profile, "device"), "peak_bw_gbs"));
        snprintf (msg, msglen, "measured %.1f us, below the roofline floor %.1f us for %lld bytes at %.0f GB/s: "
                  "physically impossible with the L2 flushed (margin %.0f%%)", median_us, floor_us,
                  (long long) json_integer_value (json_object_get (profile, "bytes")), peak, margin * 100);
        return true;
    }
    return false;
}
