/*  cuda_runner - kgym-cuda-runner: the sandboxed owner of one GPU's contexts.  */
#include "common_util.h"
#include "cuda_runner.h"
#include "cuda_exec.h"
#include "cuda_msg.h"
#include "cuda_plan.h"
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>


int
cuda_runner_opts_parse (int argc, char **argv, cuda_runner_opts_t *opts, char *err, size_t errlen)
{
    memset (opts, 0, sizeof *opts);
    opts->fd = 3;
    opts->confine = true;
    for (int i = 1; i < argc; i++)
        if (strcmp (argv [i], "--no-confine") == 0)
            opts->confine = false;
    if (opts->confine && (argc = sandbox_confine_parse (argc, argv, &opts->sandbox, err, errlen)) < 0)
        return -1;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv [i];
        const char *value = i + 1 < argc? argv [i + 1]: NULL;
        if (strcmp (arg, "--serve") == 0 || strcmp (arg, "--no-confine") == 0)
            continue;
        else if (value && strcmp (arg, "--fd") == 0) {
            opts->fd = atoi (value);
            i++;
        }
        else if (value && strcmp (arg, "--device") == 0) {
            opts->device = atoi (value);
            i++;
        }
        else {
            common_seterr (err, errlen, "unknown argument '%s'", arg);
            return -1;
        }
    }
    if (opts->fd < 0) {
        common_seterr (err, errlen, "bad --fd");
        return -1;
    }
    return 0;
}

//  --- serve mode ---

static int s_channel = -1;

//  Exit as soon as the supervisor's end of the socket is gone, whatever the
//  main thread is stuck in (in its pid namespace the parent is not visible:
//  getppid() is 0 whether it lives or not).
static void *
s_watchdog (void *arg)
{
    (void) arg;
    for (;;) {
        struct pollfd pfd = { .fd = s_channel, .events = POLLRDHUP };
        if (poll (&pfd, 1, -1) > 0 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)))
            _exit (3);
    }
    return NULL;
}

//  Pin every thread to the GPU's NUMA node (local_cpulist of its PCI device).
static void
s_pin_numa (const char *bus_id, char *cpus, size_t cpuslen)
{
    cpus [0] = 0;
    char lower [64];
    size_t i;
    for (i = 0; bus_id [i] && i + 1 < sizeof lower; i++)
        lower [i] = (char) ((bus_id [i] >= 'A' && bus_id [i] <= 'F')? bus_id [i] + 32: bus_id [i]);
    lower [i] = 0;
    char path [128], list [512];
    snprintf (path, sizeof path, "/sys/bus/pci/devices/%s/local_cpulist", lower);
    FILE *file = fopen (path, "r");
    if (!file)
        return;
    bool got = fgets (list, sizeof list, file) != NULL;
    fclose (file);
    if (!got)
        return;
    list [strcspn (list, "\n")] = 0;
    cpu_set_t set;
    CPU_ZERO (&set);
    char *save = NULL, *copy = strdup (list);
    if (!copy)
        return;
    for (char *tok = strtok_r (copy, ",", &save); tok; tok = strtok_r (NULL, ",", &save)) {
        long lo = strtol (tok, NULL, 10), hi = lo;
        char *dash = strchr (tok, '-');
        if (dash)
            hi = strtol (dash + 1, NULL, 10);
        for (long c = lo; c <= hi && c < CPU_SETSIZE; c++)
            if (c >= 0)
                CPU_SET ((int) c, &set);
    }
    free (copy);
    if (CPU_COUNT (&set) == 0)
        return;
    DIR *dir = opendir ("/proc/self/task");
    if (!dir)
        return;
    struct dirent *entry;
    bool ok = true;
    while ((entry = readdir (dir)))
        if (entry->d_name [0] != '.')
            ok &= sched_setaffinity ((pid_t) atoi (entry->d_name), sizeof set, &set) == 0;
    closedir (dir);
    if (ok)
        snprintf (cpus, cpuslen, "%s", list);
}

//  Without a cgroup, RLIMIT_AS is the only host memory cap; CUDA reserves
//  ~13 GiB of address space and maps device memory too, so leave room.
static uint64_t
s_fallback_as (const cuda_exec_device_t *dev)
{
    FILE *file = fopen ("/proc/self/status", "r");
    uint64_t vm_kb = 0;
    char line [256];
    while (file && fgets (line, sizeof line, file))
        if (strncmp (line, "VmSize:", 7) == 0)
            vm_kb = strtoull (line + 7, NULL, 10);
    if (file)
        fclose (file);
    uint64_t limit = vm_kb * 1024 + dev->mem_total + dev->mem_total / 4 + (8ull << 30);
    struct rlimit rl = { (rlim_t) limit, (rlim_t) limit };
    return setrlimit (RLIMIT_AS, &rl) == 0? limit: 0;
}

static int
s_serve_loop (int fd, cuda_exec_t *exec)
{
    for (;;) {
        cuda_msg_t msg;
        char why [256];
        int rc = cuda_msg_recv (fd, &msg, -1, why, sizeof why);
        if (rc != 0)
            return rc == -1? 0: 2;          //  EOF: the supervisor is done with us
        if (msg.type == CUDA_MSG_EXIT) {
            cuda_msg_free (&msg);
            return 0;
        }
        if (msg.type == CUDA_MSG_INIT) {
            char err [256] = "";
            int ok = msg.nparts >= 2 && msg.size [1] > 0
                   ? cuda_exec_init (exec, msg.part [1], msg.size [1], err, sizeof err): -1;
            if (ok != 0 && !*err)
                snprintf (err, sizeof err, "INIT without the internal module");
            json_t *reply = ok == 0? json_pack ("{s:s}", "status", "ok")
                                   : json_pack ("{s:s, s:s}", "status", "internal_error", "message", err);
            cuda_msg_send_json (fd, CUDA_MSG_RESULT, reply, 0, NULL, NULL);
            json_decref (reply);
            cuda_msg_free (&msg);
            if (ok != 0)
                return 2;
            continue;
        }
        if (msg.type == CUDA_MSG_SELFTEST) {
            json_t *reply = cuda_exec_selftest (exec, msg.nparts >= 2 && msg.size [1]? msg.part [1]: NULL);
            cuda_msg_send_json (fd, CUDA_MSG_RESULT, reply, 0, NULL, NULL);
            json_decref (reply);
            cuda_msg_free (&msg);
            return 0;                       //  the self-test may leave a faulted context
        }
        if (msg.type != CUDA_MSG_JOB || msg.nparts < 3) {
            cuda_msg_free (&msg);
            return 2;
        }
        json_error_t jerr;
        json_t *json = json_loads ((const char *) msg.part [0], 0, &jerr);
        char err [256] = "";
        cuda_plan_t *plan = json? cuda_plan_from_json (json, err, sizeof err): NULL;
        json_decref (json);
        bool fatal = false;
        json_t *reply;
        if (!plan)
            reply = json_pack ("{s:s, s:s}", "status", "internal_error", "message",
                               *err? err: "plan is not JSON");
        else {
            const uint8_t *images [3] = { NULL, NULL, NULL };
            size_t sizes [3] = { 0, 0, 0 };
            for (uint32_t p = 0; p < 3 && p + 1 < msg.nparts; p++)
                if (msg.size [p + 1] > 0) {
                    images [p] = msg.part [p + 1];
                    sizes [p] = msg.size [p + 1];
                }
            reply = cuda_exec_run (exec, plan, images, sizes, &fatal);
        }
        cuda_msg_send_json (fd, CUDA_MSG_RESULT, reply, 0, NULL, NULL);
        json_decref (reply);
        cuda_plan_destroy (&plan);
        cuda_msg_free (&msg);
        if (fatal)
            return 1;
    }
}

int
cuda_runner_serve (const cuda_runner_opts_t *opts)
{
    int fd = opts->fd;
    s_channel = fd;
    signal (SIGPIPE, SIG_IGN);
    signal (SIGXFSZ, SIG_IGN);
    //  Eager loading: module memory shows at load time, no first-launch stalls.
    setenv ("CUDA_MODULE_LOADING", "EAGER", 1);
    setenv ("CUDA_CACHE_DISABLE", "1", 1);
    setenv ("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 0);

    char err [512] = "";
    //  Refused: the supervisor hears why on the sandbox's own socket.
    if (opts->confine && sandbox_confine (&opts->sandbox, err, sizeof err))
        return 2;
    double t0 = cuda_now ();
    cuda_exec_t *exec = cuda_exec_new (opts->device, err, sizeof err);
    if (!exec) {
        json_t *hello = json_pack ("{s:s, s:b}", "error", err,
                                   "no_device", strncmp (err, "no device", 9) == 0);
        cuda_msg_send_json (fd, CUDA_MSG_HELLO, hello, 0, NULL, NULL);
        json_decref (hello);
        return 1;
    }
    double init_s = cuda_now () - t0;
    const cuda_exec_device_t *dev = cuda_exec_device (exec);
    char cpus [512];
    s_pin_numa (dev->bus_id, cpus, sizeof cpus);
    //  The supervisor sees the limit in /proc and reports it (sandbox_caps).
    if (opts->confine && !opts->sandbox.cgroups [0])
        s_fallback_as (dev);
    pthread_t watchdog;
    if (pthread_create (&watchdog, NULL, s_watchdog, NULL) == 0)
        pthread_detach (watchdog);
    json_t *hello = json_pack ("{s:o, s:s, s:f, s:i}", "device", cuda_exec_device_json (dev),
                               "cpus", cpus, "cuinit_s", init_s, "pid", (int) getpid ());
    cuda_msg_send_json (fd, CUDA_MSG_HELLO, hello, 0, NULL, NULL);
    json_decref (hello);
    int rc = s_serve_loop (fd, exec);
    //  Skip the driver's teardown: the supervisor does not wait for it.
    _exit (rc);
}
