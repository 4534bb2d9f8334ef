/*  python_proc - one sandboxed Python runner (kgym_pyrunner.py), seen from the worker.

    The python backend runs each program of a job (the task's reference, the
    candidate) in a process of its own: the worker's interpreter started in
    the sandbox on kgym_pyrunner.py, with a stream socket for requests and
    a shared memory file for outputs. Requests are JSON objects, each with a
    4-byte little-endian length; every reply is bounded and parsed here, and
    everything in it is untrusted once a candidate module was imported.
    The wall time of each request is measured here, from sending it to
    reading the whole reply.
*/
#ifndef PYTHON_PROC_H
#define PYTHON_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <jansson.h>
#include "sandbox.h"

typedef struct python_proc_t python_proc_t;

//  Where a runner sees its private directory, whatever its path outside.
#define PYTHON_PROC_INSIDE  "/kgym"

//  What to start.
typedef struct {
    const char *python;         //  the interpreter (absolute path)
    const char *script;         //  kgym_pyrunner.py
    const char *role;           //  "reference", "candidate" or "builder"
    const char *device;         //  "cpu" or "cuda" (a GPU's device nodes in its view)
    int gpu;                    //  cuda: the device ordinal
    const char *arch;           //  builds for these CUDA architectures (TORCH_CUDA_ARCH_LIST), or NULL
    const sandbox_config_t *sandbox;    //  its caps
    const char *dir;            //  its private directory, made afresh; NULL: a temporary one
} python_proc_config_t;

//  Start the runner (it imports torch meanwhile). NULL with a reason.
python_proc_t *python_proc_new (const python_proc_config_t *cfg, char *err, size_t errlen);

//  Tell it to set up its device (CUDA, the profiler) and say hello: until
//  then it only imports torch, touching no GPU. Once; hello does it when
//  not done before.
void python_proc_go (python_proc_t *self);

//  Its hello (versions, GPU), waiting up to timeout_s: borrowed, NULL with
//  a reason when it died or said why it cannot run.
json_t *python_proc_hello (python_proc_t *self, double timeout_s, char *err, size_t errlen);

//  Send req and wait up to timeout_s for the reply. 0 with *reply (new
//  reference) and *wall_s; 1 timed out (the runner is then killed); -1 it
//  died, hung up or sent something malformed (err says which; killed).
int python_proc_request (python_proc_t *self, json_t *req, double timeout_s, json_t **reply,
                         double *wall_s, char *err, size_t errlen);

//  The shared memory, at least size bytes, mapped here. NULL on failure.
uint8_t *python_proc_shm (python_proc_t *self, size_t size);

//  Stop (SIGSTOP) the runner's processes while its outputs are read, and go
//  on. 0, or -1 when it is gone or could not be stopped (then killed).
int python_proc_stop (python_proc_t *self);
int python_proc_continue (python_proc_t *self);

//  False once it died or was killed.
bool python_proc_alive (python_proc_t *self);

//  Why it ended, when it did ("killed by SIGSEGV", ...); its captured
//  stderr's last lines appended when there are any.
void python_proc_describe (python_proc_t *self, char *buf, size_t len);

//  Its private directory (its cwd; TORCH_EXTENSIONS_DIR and TRITON_CACHE_DIR under it).
const char *python_proc_dir (python_proc_t *self);

//  Remove the directories (and their tmpfs) of runners whose worker is
//  gone (it died before it could). How many were removed.
int python_proc_sweep (void);

//  Lower every thread of it to SCHED_IDLE (what it starts inherits that;
//  the sandbox's filter refuses it a way back): its CPU time is only what
//  nothing else wants. 0, or -1 when a thread could not be lowered.
int python_proc_idle (python_proc_t *self);

//  Every thread of the runner on one CPU (threads it starts later inherit
//  it). 0, or -1 when a thread could not be moved.
int python_proc_pin (python_proc_t *self, int cpu);

//  The uid it runs as, seen from the host (its own, from the sandbox's range,
//  when the worker is root; the worker's own otherwise).
uid_t python_proc_uid (python_proc_t *self);

//  The caps object of its sandbox, built by the sandbox from outside it.
const char *python_proc_caps (python_proc_t *self);

//  Kill it, reap it, remove its directory.
void python_proc_destroy (python_proc_t **self_p);

#endif
