/*  cuda_runner - kgym-cuda-runner's two modes, behind a thin main.  */
#include "cuda_runner.h"
#include "cuda_exec.h"
#include "cuda_msg.h"
#include "cuda_plan.h"
#include "worker_nvrtc.h"
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <libgen.h>
#include <nvrtc.h>
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

#define CAPS_LEN 1024

static void
s_err (char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list args;
    va_start (args, fmt);
    vsnprintf (err, errlen, fmt, args);
    va_end (args);
}

int
cuda_runner_opts_parse (int argc, char **argv, cuda_runner_opts_t *opts, char *err, size_t errlen)
{
    memset (opts, 0, sizeof *opts);
    opts->fd = 3;
    opts->confine = true;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv [i];
        const char *value = i + 1 < argc? argv [i + 1]: NULL;
        if (strcmp (arg, "--compile") == 0)
            opts->compile = true;
        else if (strcmp (arg, "--serve") == 0)
            opts->compile = false;
        else if (strcmp (arg, "--no-confine") == 0)
            opts->confine = false;
        else if (value && strcmp (arg, "--fd") == 0) {
            opts->fd = atoi (value);
            i++;
        }
        else if (value && strcmp (arg, "--device") == 0) {
            opts->device = atoi (value);
            i++;
        }
        else if (value && strcmp (arg, "--cpu-limit") == 0) {
            opts->cpu_limit = (uint32_t) strtoul (value, NULL, 10);
            i++;
        }
        else if (value && strcmp (arg, "--cgroup") == 0) {
            if (opts->ncgroups + 1 >= RUNNER_CONFINE_MAX_CGROUPS) {
                s_err (err, errlen, "too many --cgroup");
                return -1;
            }
            opts->cgroups [opts->ncgroups++] = value;
            i++;
        }
        else {
            s_err (err, errlen, "unknown argument '%s'", arg);
            return -1;
        }
    }
    if (opts->fd < 0) {
        s_err (err, errlen, "bad --fd");
        return -1;
    }
    return 0;
}

//  Close every fd above the socket: the worker's own fds must not leak in.
static void
s_close_other_fds (int keep)
{
    int from = keep + 1 > 3? keep + 1: 3;
#ifdef SYS_close_range
    if (syscall (SYS_close_range, (unsigned) from, ~0u, 0) == 0)
        return;
#endif
    for (int fd = from; fd < 1024; fd++)
        close (fd);
}

static void
s_send_json (int fd, uint32_t type, json_t *json, size_t nblobs, const void *const *blobs,
             const size_t *sizes)
{
    char *text = json? json_dumps (json, JSON_COMPACT): NULL;
    cuda_msg_send_text (fd, type, text? text: "{\"status\":\"internal_error\",\"message\":\"out of memory\"}",
                        nblobs, blobs, sizes);
    free (text);
}

//  --- serve mode ---

static pid_t s_parent;

//  Exit as soon as the parent is gone, whatever the main thread is stuck in.
static void *
s_watchdog (void *arg)
{
    (void) arg;
    for (;;) {
        if (getppid () != s_parent)
            _exit (3);
        usleep (250000);
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
            s_send_json (fd, CUDA_MSG_RESULT, reply, 0, NULL, NULL);
            json_decref (reply);
            cuda_msg_free (&msg);
            if (ok != 0)
                return 2;
            continue;
        }
        if (msg.type == CUDA_MSG_SELFTEST) {
            json_t *reply = cuda_exec_selftest (exec);
            s_send_json (fd, CUDA_MSG_RESULT, reply, 0, NULL, NULL);
            json_decref (reply);
            cuda_msg_free (&msg);
            return 0;                       //  the self-test leaves a faulted context
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
        s_send_json (fd, CUDA_MSG_RESULT, reply, 0, NULL, NULL);
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
    s_parent = getppid ();
    s_close_other_fds (fd);
    signal (SIGPIPE, SIG_IGN);
    signal (SIGXFSZ, SIG_IGN);
    //  Eager loading: module memory shows at load time, no first-launch stalls.
    setenv ("CUDA_MODULE_LOADING", "EAGER", 1);
    setenv ("CUDA_CACHE_DISABLE", "1", 1);
    setenv ("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 0);

    char caps [CAPS_LEN] = "{}";
    char err [512] = "";
    if (opts->confine) {
        runner_confine_opts_t conf;
        memset (&conf, 0, sizeof conf);
        for (size_t i = 0; i < opts->ncgroups; i++)
            conf.cgroups [i] = opts->cgroups [i];
        conf.netns = true;
        conf.drop_to_nobody = true;
        conf.rlimit_fsize = 64ull << 20;
        conf.rlimit_nofile = 1024;
        conf.seccomp = true;
        conf.seccomp_allow = 0;
        if (runner_confine (&conf, caps, sizeof caps, err, sizeof err)) {
            json_t *hello = json_pack ("{s:s, s:b}", "error", err, "no_device", 0);
            s_send_json (fd, CUDA_MSG_HELLO, hello, 0, NULL, NULL);
            json_decref (hello);
            return 2;
        }
    }
    double t0 = cuda_now ();
    cuda_exec_t *exec = cuda_exec_new (opts->device, err, sizeof err);
    if (!exec) {
        json_t *hello = json_pack ("{s:s, s:b}", "error", err,
                                   "no_device", strncmp (err, "no device", 9) == 0);
        s_send_json (fd, CUDA_MSG_HELLO, hello, 0, NULL, NULL);
        json_decref (hello);
        return 1;
    }
    double init_s = cuda_now () - t0;
    const cuda_exec_device_t *dev = cuda_exec_device (exec);
    char cpus [512];
    s_pin_numa (dev->bus_id, cpus, sizeof cpus);
    json_error_t jerr;
    json_t *caps_json = json_loads (caps, 0, &jerr);
    if (!caps_json)
        caps_json = json_object ();
    if (opts->confine && opts->ncgroups == 0) {
        uint64_t limit = s_fallback_as (dev);
        if (limit)
            json_object_set_new (caps_json, "rlimit_as", json_integer ((json_int_t) limit));
    }
    json_object_set_new (caps_json, "cpus", json_string (cpus));
    pthread_t watchdog;
    if (pthread_create (&watchdog, NULL, s_watchdog, NULL) == 0)
        pthread_detach (watchdog);
    json_t *hello = json_pack ("{s:o, s:o, s:f, s:i}", "device", cuda_exec_device_json (dev),
                               "caps", caps_json, "cuinit_s", init_s, "pid", (int) getpid ());
    s_send_json (fd, CUDA_MSG_HELLO, hello, 0, NULL, NULL);
    json_decref (hello);
    int rc = s_serve_loop (fd, exec);
    //  Skip the driver's teardown: the supervisor does not wait for it.
    _exit (rc);
}

//  --- compile mode ---

//  Directory holding a loaded library (for NVRTC's builtins), or "".
static void
s_lib_dir (void *symbol, char *out, size_t size)
{
    Dl_info info;
    out [0] = 0;
    if (dladdr (symbol, &info) && info.dli_fname) {
        char real [PATH_MAX];
        if (realpath (info.dli_fname, real))
            snprintf (out, size, "%s", dirname (real));
    }
}

int
cuda_runner_compile (const cuda_runner_opts_t *opts)
{
    int fd = opts->fd;
    s_close_other_fds (fd);
    signal (SIGPIPE, SIG_IGN);
    signal (SIGXFSZ, SIG_IGN);
    char caps [CAPS_LEN] = "{}";
    char err [512] = "";
    if (opts->confine) {
        //  Landlock: NVRTC may read the toolkit, the libraries and the
        //  loader's files, nothing else (so #include "/some/secret" fails).
        char include [PATH_MAX], root [PATH_MAX], nvrtc_dir [PATH_MAX];
        const char *inc = worker_nvrtc_include_dir ();
        if (!realpath (inc, include))
            snprintf (include, sizeof include, "%s", inc);
        snprintf (root, sizeof root, "%s", include);
        snprintf (root, sizeof root, "%s", dirname (root));
        s_lib_dir ((void *) nvrtcVersion, nvrtc_dir, sizeof nvrtc_dir);
        runner_confine_opts_t conf;
        memset (&conf, 0, sizeof conf);
        conf.netns = true;
        conf.drop_to_nobody = true;
        conf.rlimit_as = 8ull << 30;
        conf.rlimit_cpu = opts->cpu_limit? opts->cpu_limit: 60;
        conf.rlimit_fsize = 1u << 20;
        conf.rlimit_nofile = 256;
        size_t n = 0;
        conf.landlock_read [n++] = root;
        conf.landlock_read [n++] = include;
        if (nvrtc_dir [0])
            conf.landlock_read [n++] = nvrtc_dir;
        conf.landlock_read [n++] = "/usr/lib";
        conf.landlock_read [n++] = "/lib";
        conf.landlock_read [n++] = "/usr/lib64";
        conf.landlock_read [n++] = "/lib64";
        conf.landlock_read [n++] = "/etc/ld.so.cache";
        conf.landlock_read [n++] = "/proc/self";
        conf.landlock_read [n++] = "/dev/urandom";
        conf.landlock_write [0] = "/dev/null";
        conf.seccomp = true;
        conf.seccomp_allow = RUNNER_CONFINE_DENY_WRITE;
        if (runner_confine (&conf, caps, sizeof caps, err, sizeof err)) {
            json_t *reply = json_pack ("{s:s, s:s}", "status", "error", "error", err);
            s_send_json (fd, CUDA_MSG_COMPILED, reply, 0, NULL, NULL);
            json_decref (reply);
            return 2;
        }
    }
    cuda_msg_t msg;
    char why [256];
    if (cuda_msg_recv (fd, &msg, 30.0, why, sizeof why) != 0)
        return 2;
    json_error_t jerr;
    json_t *req = msg.type == CUDA_MSG_COMPILE && msg.nparts >= 2
                ? json_loads ((const char *) msg.part [0], 0, &jerr): NULL;
    const char *name = json_string_value (json_object_get (req, "name"));
    const char *arch = json_string_value (json_object_get (req, "arch"));
    json_t *options = json_object_get (req, "options");
    json_t *reply = NULL;
    uint8_t *cubin = NULL;
    size_t size = 0;
    if (!name || !arch || !json_is_array (options) || json_array_size (options) > 64
    ||  strlen ((const char *) msg.part [1]) != msg.size [1])
        reply = json_pack ("{s:s, s:s}", "status", "error", "error", "malformed compile request");
    else {
        size_t nopts = json_array_size (options);
        char *opts_v [64];
        bool ok = true;
        for (size_t i = 0; i < nopts; i++) {
            opts_v [i] = (char *) json_string_value (json_array_get (options, i));
            ok &= opts_v [i] != NULL;
        }
        char *log = NULL;
        int rc = ok? worker_nvrtc_compile_here (name, (const char *) msg.part [1], opts_v, nopts,
                                                arch, &cubin, &size, &log, err, sizeof err): -1;
        if (rc == 0)
            reply = json_pack ("{s:s, s:s}", "status", "ok", "log", log? log: "");
        else if (rc == 1)
            reply = json_pack ("{s:s, s:s}", "status", "compile_error", "log", log? log: "");
        else
            reply = json_pack ("{s:s, s:s}", "status", "error", "error", *err? err: "bad options");
        free (log);
    }
    const void *blobs [1] = { cubin };
    size_t sizes [1] = { size };
    s_send_json (fd, CUDA_MSG_COMPILED, reply, cubin? 1: 0, blobs, sizes);
    json_decref (reply);
    json_decref (req);
    free (cubin);
    cuda_msg_free (&msg);
    return 0;
}
