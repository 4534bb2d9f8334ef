/*  python_proc - one sandboxed Python runner (kgym_pyrunner.py), seen from the worker.  */
#include "common_util.h"
#include "python_proc.h"
#include "sandbox_uid.h"
#include "common_log.h"
#include "sandbox_dir.h"
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define S_CONFIRM_S     30.0            //  exec and confinement (a loaded host is slow)
#define S_MAX_REPLY     (64u << 20)     //  bytes of one reply
#define S_STOP_S        2.0             //  SIGSTOP normally takes microseconds

struct python_proc_t {
    sandbox_t *sandbox;         //  its process group and cgroup
    int sock;                   //  our end of the stream socketpair
    int shm_fd;                 //  the shared memory file
    uint8_t *shm;               //  our mapping of it
    size_t shm_size;            //  its size
    char dir [PATH_MAX];        //  its private directory (its cwd, caches, temporary files)
    json_t *hello;              //  its first message, once read
    bool went;                  //  told to set up its device (python_proc_go)
    bool alive;                 //  not known to be dead
};

void
python_proc_destroy (python_proc_t **self_p)
{
    python_proc_t *self = *self_p;
    if (!self)
        return;
    sandbox_destroy (&self->sandbox);
    if (self->shm)
        munmap (self->shm, self->shm_size);
    if (self->sock >= 0)
        close (self->sock);
    if (self->shm_fd >= 0)
        close (self->shm_fd);
    sandbox_dir_remove (self->dir);
    json_decref (self->hello);
    free (self);
    *self_p = NULL;
}

//  path without its last up components, "" when there is nothing left.
static void
s_parent (const char *path, int up, char *out, size_t len)
{
    snprintf (out, len, "%s", path? path: "");
    for (int i = 0; i < up; i++) {
        char *slash = strrchr (out, '/');
        if (!slash || slash == out) {
            out [0] = 0;
            return;
        }
        *slash = 0;
    }
}

python_proc_t *
python_proc_new (const python_proc_config_t *cfg, char *err, size_t errlen)
{
    python_proc_t *self = calloc (1, sizeof *self);
    if (!self) {
        common_seterr (err, errlen, "out of memory");
        return NULL;
    }
    self->sock = self->shm_fd = -1;
    int peer = -1, out = -1;
    glob_t devices = { 0 };         //  a GPU's device nodes, named in the view until spawned
    const char *base = getenv ("TMPDIR");
    if (cfg->dir) {
        //  Whatever an earlier job left there goes first.
        snprintf (self->dir, sizeof self->dir, "%s", cfg->dir);
        sandbox_dir_remove (self->dir);
        if (mkdir (self->dir, 0700) != 0) {
            common_seterr (err, errlen, "mkdir %s: %s", self->dir, strerror (errno));
            self->dir [0] = 0;
            goto fail;
        }
    }
    else {
        //  Named for this process: what a worker that died left is found (python_proc_sweep).
        snprintf (self->dir, sizeof self->dir, "%s/kgym-py-%d-XXXXXX", base && *base? base: "/tmp",
                  (int) getpid ());
        if (!mkdtemp (self->dir)) {
            common_seterr (err, errlen, "mkdtemp %s: %s", self->dir, strerror (errno));
            self->dir [0] = 0;
            goto fail;
        }
    }
    //  What it writes is bounded by a tmpfs a quarter of its memory cap
    //  (its builds and caches are tens of MB), where the worker may mount
    //  one; else the directory is on the disk (said once).
    uint64_t mem = cfg->sandbox? cfg->sandbox->mem_bytes: 0;
    if (!mem) {
        sandbox_config_t defaults;
        sandbox_config_default (&defaults);
        mem = defaults.mem_bytes;
    }
    char why [256];
    static _Atomic bool s_said;
    if (sandbox_dir_cap (self->dir, mem / 4, why, sizeof why) != 0 && !s_said) {
        s_said = true;
        log_warn ("python", "the runners' directories are on the disk, not bounded (%s)", why);
    }
    char path [PATH_MAX + 32];
    snprintf (path, sizeof path, "%s/stderr.log", self->dir);
    out = open (path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    self->shm_fd = memfd_create ("kgym-py-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    int sv [2] = { -1, -1 };
    if (out < 0 || self->shm_fd < 0
    ||  fcntl (self->shm_fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_SEAL) != 0
    ||  socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        common_seterr (err, errlen, "cannot prepare the runner: %s", strerror (errno));
        goto fail;
    }
    self->sock = sv [0];
    peer = sv [1];
    //  The sandbox's python kind (docs/sandbox.md): a read-only view of the
    //  interpreter, the system's packages and toolchain, this runner's
    //  script, and for a GPU the devices and /sys; its own directory the
    //  only writable place, handed to its own uid.
    sandbox_config_t scfg;
    if (cfg->sandbox)
        scfg = *cfg->sandbox;
    else
        sandbox_config_default (&scfg);
    scfg.kind = SANDBOX_PYTHON;
    //  Its tensors travel through the shared file, which it grows to fit:
    //  a file as large as its memory.
    scfg.fsize_bytes = scfg.mem_bytes;
    scfg.gpu = strcmp (cfg->device, "cuda") == 0;
    //  A CPU job's two runners share one CPU (python_proc_pin): neither may
    //  move a thread of its own elsewhere. The builder is not pinned.
    scfg.pinned = !scfg.gpu && strcmp (cfg->role, "builder") != 0;
    //  The view takes clean paths only (no "..", no symlinks to follow).
    char script [PATH_MAX], script_dir [PATH_MAX], prefix [PATH_MAX];
    if (!realpath (cfg->script, script)) {
        common_seterr (err, errlen, "the runner's script %.200s: %s", cfg->script, strerror (errno));
        goto fail;
    }
    s_parent (script, 1, script_dir, sizeof script_dir);
    s_parent (cfg->python, 2, prefix, sizeof prefix);
    int nview = 0;
    scfg.view [nview++] = script_dir;
    if (strncmp (prefix, "/usr", 4) != 0 || (prefix [4] && prefix [4] != '/'))
        scfg.view [nview++] = prefix;
    if (strcmp (cfg->device, "cuda") == 0) {
        //  The GPU's device nodes one by one (not all of /dev, which holds
        //  the host's /dev/shm) and /sys, where the driver reads its PCI
        //  topology.
        scfg.view [nview++] = "/sys";
        if (glob ("/dev/nvidia*", 0, NULL, &devices) == 0)
            for (size_t i = 0; i < devices.gl_pathc && nview < SANDBOX_VIEW_PATHS - 1; i++)
                scfg.view [nview++] = devices.gl_pathv [i];
    }
    scfg.view [nview] = NULL;
    self->sandbox = sandbox_new (&scfg, err, errlen);
    if (!self->sandbox)
        goto fail;
    char fd_text [16], shm_text [16], gpu_text [16];
    snprintf (fd_text, sizeof fd_text, "%d", peer);
    snprintf (shm_text, sizeof shm_text, "%d", self->shm_fd);
    snprintf (gpu_text, sizeof gpu_text, "%d", cfg->gpu);
    //  -I: no user site-packages, no PYTHON* variables, no script directory on the path.
    char *const args [] = {
        "--mode", "exec", "--",
        (char *) cfg->python, "-I", script, "--fd", fd_text, "--shm", shm_text,
        "--role", (char *) cfg->role, "--device", (char *) cfg->device, "--dir", PYTHON_PROC_INSIDE,
        "--gpu", gpu_text, cfg->arch? "--arch": NULL, (char *) cfg->arch, NULL
    };
    int keep [] = { peer, self->shm_fd, -1 };
    //  Its directory is at one path inside whatever it is outside: an
    //  extension's build files name it, and a kept build is found up to date.
    sandbox_spawn_t what = { .args = args, .keep = keep, .object_fd = -1, .out_fd = out,
                             .cwd = self->dir, .cwd_at = PYTHON_PROC_INSIDE };
    if (sandbox_spawn (self->sandbox, &what, err, errlen)
    ||  sandbox_confirm (self->sandbox, S_CONFIRM_S, err, errlen))
        goto fail;
    close (peer);
    close (out);
    globfree (&devices);
    self->alive = true;
    return self;
fail:
    globfree (&devices);
    if (peer >= 0)
        close (peer);
    if (out >= 0)
        close (out);
    python_proc_destroy (&self);
    return NULL;
}

//  Read exactly n bytes by deadline. 0, 1 timed out, -1 EOF or error.
static int
s_read (python_proc_t *self, void *buf, size_t n, uint64_t deadline)
{
    size_t got = 0;
    while (got < n) {
        uint64_t now = common_now_ns ();
        if (now >= deadline)
            return 1;
        struct pollfd pfd = { .fd = self->sock, .events = POLLIN };
        int rc = poll (&pfd, 1, (int) ((deadline - now + 999999) / 1000000));
        if (rc < 0 && errno != EINTR)
            return -1;
        if (rc <= 0)
            continue;
        ssize_t r = read (self->sock, (uint8_t *) buf + got, n - got);
        if (r == 0)
            return -1;
        if (r < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return -1;
        }
        got += (size_t) r;
    }
    return 0;
}

static int
s_write (python_proc_t *self, const void *buf, size_t n)
{
    size_t done = 0;
    while (done < n) {
        ssize_t w = send (self->sock, (const uint8_t *) buf + done, n - done, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        done += (size_t) w;
    }
    return 0;
}

//  One message by deadline: 0 with *msg, 1 timed out, -1 gone, -2 malformed.
static int
s_recv (python_proc_t *self, uint64_t deadline, json_t **msg)
{
    uint8_t head [4];
    int rc = s_read (self, head, 4, deadline);
    if (rc)
        return rc;
    uint32_t size = (uint32_t) head [0] | (uint32_t) head [1] << 8 | (uint32_t) head [2] << 16
                  | (uint32_t) head [3] << 24;
    if (size == 0 || size > S_MAX_REPLY)
        return -2;
    char *text = malloc (size);
    if (!text)
        return -1;
    rc = s_read (self, text, size, deadline);
    if (rc) {
        free (text);
        return rc;
    }
    json_error_t jerr;
    *msg = json_loadb (text, size, JSON_REJECT_DUPLICATES, &jerr);
    free (text);
    return json_is_object (*msg)? 0: (json_decref (*msg), *msg = NULL, -2);
}

static void
s_dead (python_proc_t *self)
{
    self->alive = false;
    sandbox_kill (self->sandbox);
}

//  One message, length first.
static int
s_send (python_proc_t *self, json_t *msg)
{
    char *text = json_dumps (msg, JSON_COMPACT);
    if (!text)
        return -1;
    size_t len = strlen (text);
    uint8_t head [4] = { (uint8_t) len, (uint8_t) (len >> 8), (uint8_t) (len >> 16), (uint8_t) (len >> 24) };
    int rc = s_write (self, head, 4) == 0 && s_write (self, text, len) == 0? 0: -1;
    free (text);
    return rc;
}

void
python_proc_go (python_proc_t *self)
{
    if (!self || self->went || !self->alive)
        return;
    self->went = true;
    json_t *start = json_pack ("{s:s}", "op", "start");
    if (s_send (self, start) != 0)
        s_dead (self);          //  its hello says why
    json_decref (start);
}

json_t *
python_proc_hello (python_proc_t *self, double timeout_s, char *err, size_t errlen)
{
    if (self->hello)
        return self->hello;
    python_proc_go (self);
    json_t *msg = NULL;
    int rc = s_recv (self, common_now_ns () + (uint64_t) (timeout_s * 1e9), &msg);
    if (rc) {
        s_dead (self);
        char why [512];
        python_proc_describe (self, why, sizeof why);
        common_seterr (err, errlen, "the Python runner did not start (%s): %s",
                       rc == 1? "no hello in time": rc == -2? "malformed hello": "it ended", why);
        return NULL;
    }
    const char *error = json_string_value (json_object_get (msg, "error"));
    if (error) {
        common_seterr (err, errlen, "the Python runner cannot run: %s", error);
        json_decref (msg);
        s_dead (self);
        return NULL;
    }
    self->hello = msg;
    return msg;
}

int
python_proc_request (python_proc_t *self, json_t *req, double timeout_s, json_t **reply,
                     double *wall_s, char *err, size_t errlen)
{
    *reply = NULL;
    if (wall_s)
        *wall_s = 0;
    if (!self->alive) {
        common_seterr (err, errlen, "the runner is gone");
        return -1;
    }
    uint64_t t0 = common_now_ns ();
    int rc = s_send (self, req);
    if (rc == 0)
        rc = s_recv (self, t0 + (uint64_t) (timeout_s * 1e9), reply);
    if (wall_s)
        *wall_s = (double) (common_now_ns () - t0) / 1e9;
    if (rc == 0)
        return 0;
    s_dead (self);
    char why [512];
    python_proc_describe (self, why, sizeof why);
    if (rc == 1)
        common_seterr (err, errlen, "no reply within %.3g s", timeout_s);
    else
        common_seterr (err, errlen, "%s (%s)", rc == -2? "a malformed reply": "the runner ended", why);
    return rc == 1? 1: -1;
}

uint8_t *
python_proc_shm (python_proc_t *self, size_t size)
{
    if (self->shm && size <= self->shm_size)
        return self->shm;
    size_t bytes = (size + 4095) / 4096 * 4096;
    if (bytes == 0)
        bytes = 4096;
    //  The runner may have grown it already (never shrunk: it is sealed so).
    struct stat st;
    if (fstat (self->shm_fd, &st) != 0)
        return NULL;
    if ((uint64_t) st.st_size >= bytes)
        bytes = (size_t) st.st_size;
    else
    if (ftruncate (self->shm_fd, (off_t) bytes) != 0)
        return NULL;
    if (self->shm)
        munmap (self->shm, self->shm_size);
    self->shm = NULL;
    self->shm_size = 0;
    void *base = mmap (NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, self->shm_fd, 0);
    if (base == MAP_FAILED)
        return NULL;
    self->shm = base;
    self->shm_size = bytes;
    return base;
}

int
python_proc_stop (python_proc_t *self)
{
    if (!self->alive)
        return -1;
    if (sandbox_stop (self->sandbox, S_STOP_S) != 0) {
        s_dead (self);
        return -1;
    }
    return 0;
}

int
python_proc_continue (python_proc_t *self)
{
    return self->alive? sandbox_signal (self->sandbox, SIGCONT): -1;
}

bool
python_proc_alive (python_proc_t *self)
{
    return self && self->alive && sandbox_pid (self->sandbox) != 0;
}

void
python_proc_describe (python_proc_t *self, char *buf, size_t len)
{
    buf [0] = 0;
    if (sandbox_reaped (self->sandbox, NULL, NULL))
        sandbox_describe (self->sandbox, buf, len);
    //  The last lines it wrote on stderr (its own words: shown, never believed).
    char path [PATH_MAX + 32], tail [600];
    snprintf (path, sizeof path, "%s/stderr.log", self->dir);
    int fd = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return;
    off_t size = lseek (fd, 0, SEEK_END);
    off_t from = size > (off_t) sizeof tail - 1? size - (off_t) sizeof tail + 1: 0;
    ssize_t n = pread (fd, tail, sizeof tail - 1, from);
    close (fd);
    if (n <= 0)
        return;
    tail [n] = 0;
    char clean [600];
    common_utf8_copy (clean, sizeof clean, tail);
    size_t used = strlen (buf);
    snprintf (buf + used, len - used, "%sstderr: %s", used? "; ": "", clean);
}

const char *
python_proc_dir (python_proc_t *self)
{
    return self->dir;
}

//  A directory of ours: this process's uid, or the sandbox range's (a
//  runner's directory is handed to the runner's uid).
static bool
s_ours (uid_t uid)
{
    uid_t first, count;
    return uid == geteuid ()
        || (sandbox_uid_range (&first, &count, NULL, 0) == 0 && uid >= first && uid - first < count);
}

int
python_proc_sweep (void)
{
    const char *base = getenv ("TMPDIR");
    char pattern [PATH_MAX];
    snprintf (pattern, sizeof pattern, "%s/kgym-py-*-*", base && *base? base: "/tmp");
    glob_t found = { 0 };
    int removed = 0;
    if (glob (pattern, GLOB_NOSORT, NULL, &found) == 0)
        for (size_t i = 0; i < found.gl_pathc; i++) {
            const char *name = strrchr (found.gl_pathv [i], '/') + 1;
            int pid = atoi (name + strlen ("kgym-py-"));
            struct stat st;
            if (pid > 0 && kill (pid, 0) != 0 && errno == ESRCH
            &&  lstat (found.gl_pathv [i], &st) == 0 && S_ISDIR (st.st_mode) && s_ours (st.st_uid)) {
                sandbox_dir_remove (found.gl_pathv [i]);
                removed++;
            }
        }
    globfree (&found);
    return removed;
}

static int
s_idle_thread (pid_t tid, void *arg)
{
    (void) arg;
    struct sched_param param = { .sched_priority = 0 };
    return sched_setscheduler (tid, SCHED_IDLE, &param);
}

int
python_proc_idle (python_proc_t *self)
{
    return sandbox_threads (self->sandbox, s_idle_thread, NULL);
}

int
python_proc_pin (python_proc_t *self, int cpu)
{
    return sandbox_pin (self->sandbox, cpu);
}

uid_t
python_proc_uid (python_proc_t *self)
{
    return sandbox_uid (self->sandbox);
}

const char *
python_proc_caps (python_proc_t *self)
{
    return sandbox_caps (self->sandbox);
}
