/*  cuda_proc - one kgym-cuda-runner process, seen from the process that spawned it.  */
#include "common_util.h"
#include "cuda_proc.h"
#include "cuda_msg.h"
#include "kgym_config.h"
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define MAX_ARGS    32

struct cuda_proc_t {
    pid_t pid;                  //  child (also its process group id); 0 once reaped
    int fd;                     //  our end of the socketpair
    sandbox_confine_cgroup_t cg; //  copy of the cgroup it joined (ndirs 0 = none)
};


//  Resolved paths, one per program.
typedef struct {
    const char *program;        //  file name
    const char *env;            //  overriding variable
    char path [PATH_MAX];       //  resolved, "" when missing
    pthread_once_t once;        //  resolution guard
} s_program_t;

static s_program_t s_programs [] = {
    { CUDA_PROC_RUNNER, "KGYM_CUDA_RUNNER", "", PTHREAD_ONCE_INIT },
    { CUDA_PROC_NVRTC,  "KGYM_NVRTC",       "", PTHREAD_ONCE_INIT },
};

static bool
s_try (s_program_t *prog, const char *path)
{
    if (access (path, X_OK) != 0)
        return false;
    snprintf (prog->path, sizeof prog->path, "%s", path);
    return true;
}

static void
s_find (s_program_t *prog)
{
    const char *env = getenv (prog->env);
    if (env && *env && s_try (prog, env))
        return;
    char exe [PATH_MAX];
    ssize_t n = readlink ("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe [n] = 0;
        char *dir = dirname (exe);
        const char *places [] = { "%s/%s", "%s/../worker/cuda/%s", "%s/../libexec/%s" };
        for (size_t i = 0; i < sizeof places / sizeof places [0]; i++) {
            char path [PATH_MAX + 64];
            snprintf (path, sizeof path, places [i], dir, prog->program);
            if (s_try (prog, path))
                return;
        }
    }
    char path [PATH_MAX];
    snprintf (path, sizeof path, "%s/worker/cuda/%s", KGYM_BUILD_DIR, prog->program);
    if (s_try (prog, path))
        return;
    snprintf (path, sizeof path, "%s/%s", KGYM_LIBEXECDIR, prog->program);
    if (s_try (prog, path))
        return;
    prog->path [0] = 0;
}

static void s_find_runner (void) { s_find (&s_programs [0]); }
static void s_find_nvrtc (void) { s_find (&s_programs [1]); }

const char *
cuda_proc_path (const char *program)
{
    s_program_t *prog = NULL;
    if (strcmp (program, CUDA_PROC_RUNNER) == 0) {
        prog = &s_programs [0];
        pthread_once (&prog->once, s_find_runner);
    }
    else if (strcmp (program, CUDA_PROC_NVRTC) == 0) {
        prog = &s_programs [1];
        pthread_once (&prog->once, s_find_nvrtc);
    }
    return prog && prog->path [0]? prog->path: NULL;
}

void
cuda_proc_close_inherited (int keep)
{
    int from = keep + 1 > 3? keep + 1: 3;
#ifdef SYS_close_range
    if (syscall (SYS_close_range, (unsigned) from, ~0u, 0) == 0)
        return;
#endif
    for (int fd = from; fd < 4096; fd++)
        close (fd);
}

cuda_proc_t *
cuda_proc_new (const char *program, const char *const *args, const sandbox_confine_cgroup_t *cg,
               char *err, size_t errlen)
{
    const char *path = cuda_proc_path (program);
    if (!path) {
        common_seterr (err, errlen, "%s not found (set %s)", program,
               strcmp (program, CUDA_PROC_NVRTC) == 0? "KGYM_NVRTC": "KGYM_CUDA_RUNNER");
        return NULL;
    }
    const char *argv [MAX_ARGS + 8];
    size_t argc = 0;
    argv [argc++] = path;
    argv [argc++] = "--fd";
    argv [argc++] = "3";
    if (cg) {
        for (size_t i = 0; i < cg->ndirs; i++) {
            argv [argc++] = "--cgroup";
            argv [argc++] = cg->dirs [i];
        }
    }
    for (size_t i = 0; args && args [i]; i++) {
        if (argc >= MAX_ARGS + 6) {
            common_seterr (err, errlen, "too many runner arguments");
            return NULL;
        }
        argv [argc++] = args [i];
    }
    argv [argc] = NULL;

    int sv [2];
    if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
        common_seterr (err, errlen, "socketpair: %s", strerror (errno));
        return NULL;
    }
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init (&actions);
    posix_spawnattr_init (&attr);
    //  dup2 clears close-on-exec on the child's copy.
    posix_spawn_file_actions_adddup2 (&actions, sv [1], 3);
    posix_spawn_file_actions_addopen (&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen (&actions, 1, "/dev/null", O_WRONLY, 0);
    sigset_t none, defaults;
    sigemptyset (&none);
    sigemptyset (&defaults);
    sigaddset (&defaults, SIGPIPE);
    sigaddset (&defaults, SIGTERM);
    sigaddset (&defaults, SIGINT);
    sigaddset (&defaults, SIGCHLD);
    posix_spawnattr_setsigmask (&attr, &none);
    posix_spawnattr_setsigdefault (&attr, &defaults);
    posix_spawnattr_setpgroup (&attr, 0);
    posix_spawnattr_setflags (&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK
                                   | POSIX_SPAWN_SETSIGDEF);
    pid_t pid = 0;
    int rc = posix_spawn (&pid, path, &actions, &attr, (char *const *) argv, environ);
    posix_spawn_file_actions_destroy (&actions);
    posix_spawnattr_destroy (&attr);
    close (sv [1]);
    if (rc) {
        close (sv [0]);
        common_seterr (err, errlen, "posix_spawn %s: %s", path, strerror (rc));
        return NULL;
    }
    cuda_proc_t *self = calloc (1, sizeof *self);
    if (!self) {
        kill (-pid, SIGKILL);
        kill (pid, SIGKILL);
        waitpid (pid, NULL, 0);
        close (sv [0]);
        common_seterr (err, errlen, "out of memory");
        return NULL;
    }
    self->pid = pid;
    self->fd = sv [0];
    if (cg)
        self->cg = *cg;
    return self;
}

int
cuda_proc_fd (cuda_proc_t *self)
{
    return self->fd;
}

pid_t
cuda_proc_pid (cuda_proc_t *self)
{
    return self->pid;
}

bool
cuda_proc_exited (cuda_proc_t *self, int *wstatus)
{
    if (self->pid == 0)
        return true;
    int status = 0;
    pid_t rc = waitpid (self->pid, &status, WNOHANG);
    if (rc == self->pid || (rc < 0 && errno == ECHILD)) {
        self->pid = 0;
        if (wstatus)
            *wstatus = status;
        return true;
    }
    return false;
}

bool
cuda_proc_wait (cuda_proc_t *self, double timeout_s, int *wstatus)
{
    double deadline = cuda_now () + timeout_s;
    useconds_t pause = 200;
    while (!cuda_proc_exited (self, wstatus)) {
        if (cuda_now () >= deadline)
            return false;
        usleep (pause);
        if (pause < 20000)
            pause *= 2;
    }
    return true;
}

void
cuda_proc_kill (cuda_proc_t *self)
{
    if (self->pid > 0) {
        kill (-self->pid, SIGKILL);
        kill (self->pid, SIGKILL);
    }
    if (self->cg.ndirs)
        sandbox_confine_cgroup_kill (&self->cg);
    if (self->pid > 0) {
        int status;
        while (waitpid (self->pid, &status, 0) < 0 && errno == EINTR)
            ;
        self->pid = 0;
    }
}

const char *
cuda_proc_describe (int wstatus, char *buf, size_t size)
{
    if (WIFSIGNALED (wstatus))
        snprintf (buf, size, "signal %d (%s)", WTERMSIG (wstatus), strsignal (WTERMSIG (wstatus)));
    else if (WIFEXITED (wstatus))
        snprintf (buf, size, "exit %d", WEXITSTATUS (wstatus));
    else
        snprintf (buf, size, "status 0x%x", (unsigned) wstatus);
    return buf;
}

void
cuda_proc_destroy (cuda_proc_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cuda_proc_t *self = *self_p;
    if (self->fd >= 0)
        close (self->fd);
    //  No grace period: the driver tears a killed process's context down
    //  itself, and waiting for a clean exit only costs the next job time.
    cuda_proc_kill (self);
    free (self);
    *self_p = NULL;
}
