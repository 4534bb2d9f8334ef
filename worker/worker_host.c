/*  worker_host - what this host offers a worker: usable CPU cores and GPUs.  */
#include "worker_host.h"
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_MAX_CPUS 4096             //  affinity masks this large are read whole

uint32_t
worker_host_quota_cores (const char *cpu_max)
{
    if (!cpu_max)
        return 0;
    char quota [32];
    unsigned long long period = 0;
    if (sscanf (cpu_max, "%31s %llu", quota, &period) != 2 || period == 0 || strcmp (quota, "max") == 0)
        return 0;
    char *end;
    errno = 0;
    unsigned long long q = strtoull (quota, &end, 10);
    if (errno || *end || quota [0] == '-' || q == 0)
        return 0;
    unsigned long long cores = (q + period - 1) / period;
    return cores > UINT32_MAX? UINT32_MAX: (uint32_t) cores;
}

//  The cores a cpu.max file allows (0: none, or no such file).
static uint32_t
s_quota_of (const char *path)
{
    FILE *file = fopen (path, "r");
    if (!file)
        return 0;
    char text [128];
    uint32_t cores = fgets (text, sizeof text, file)? worker_host_quota_cores (text): 0;
    fclose (file);
    return cores;
}

//  The smallest quota of this process's cgroup and its ancestors (0: none).
static uint32_t
s_cgroup_quota (void)
{
    FILE *file = fopen ("/proc/self/cgroup", "r");
    if (!file)
        return 0;
    char line [4096], path [4096] = "";
    while (fgets (line, sizeof line, file))
        if (strncmp (line, "0::", 3) == 0) {
            snprintf (path, sizeof path, "%s", line + 3);
            path [strcspn (path, "\n")] = 0;
            break;
        }
    fclose (file);
    if (path [0] != '/')
        return 0;
    //  From the process's cgroup up to the root (whose own cpu.max a
    //  container's namespace shows as "/").
    uint32_t least = 0;
    while (true) {
        char file_path [4200];
        snprintf (file_path, sizeof file_path, "/sys/fs/cgroup%s%scpu.max", path,
                  path [strlen (path) - 1] == '/'? "": "/");
        uint32_t cores = s_quota_of (file_path);
        if (cores && (!least || cores < least))
            least = cores;
        if (path [1] == 0)
            break;
        char *slash = strrchr (path, '/');
        if (slash == path)
            slash [1] = 0;          //  up to the root, "/"
        else
            *slash = 0;
    }
    return least;
}

uint32_t
worker_host_cores (void)
{
    uint32_t cores = 1;
    cpu_set_t *set = CPU_ALLOC (S_MAX_CPUS);
    size_t size = CPU_ALLOC_SIZE (S_MAX_CPUS);
    if (set && sched_getaffinity (0, size, set) == 0) {
        int count = CPU_COUNT_S (size, set);
        cores = count > 0? (uint32_t) count: 1;
    }
    if (set)
        CPU_FREE (set);
    uint32_t quota = s_cgroup_quota ();
    if (quota && quota < cores)
        cores = quota;
    return cores;
}

uint32_t
worker_host_gpus (void)
{
    DIR *dir = opendir ("/proc/driver/nvidia/gpus");
    if (!dir)
        return 0;
    uint32_t gpus = 0;
    struct dirent *entry;
    while ((entry = readdir (dir)))
        if (entry->d_name [0] != '.')
            gpus++;
    closedir (dir);
    return gpus;
}

uint32_t
worker_host_cores_per_gpu (void)
{
    uint32_t cores = worker_host_cores (), gpus = worker_host_gpus ();
    uint32_t per = gpus > 1? cores / gpus: cores;
    return per? per: 1;
}
