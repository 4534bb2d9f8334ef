/*  cuda_msg - length-prefixed messages between the worker and its CUDA helpers.

    One SOCK_STREAM socketpair per kgym-cuda-runner or kgym-nvrtc process. A message is a 16-byte header
    (magic "KGCU", type, number of parts, reserved), one 8-byte length per
    part, then the parts' bytes. Part 0 is JSON text (the runner host code
    and the supervisor are both ours); further parts are binary (cubins,
    PTX). Every count and size is bounded before anything is allocated, and
    a malformed message is an error (-2), never an assert.

    Exchange (docs/cuda.md has the fields of each JSON part):
        runner  -> worker   HELLO    {device, arch, limits, caps} | {error}
        worker  -> runner   INIT     {} + internal module image
        worker  -> runner   JOB      plan + candidate, reference, baseline images
        runner  -> worker   RESULT   outcome
        worker  -> nvrtc    COMPILE  {name, arch, options} + source
        nvrtc   -> worker   COMPILED {status, log | error} + cubin
        worker  -> runner   SELFTEST {} + probe cubin -> RESULT {code_read, code_write}, runner exits
        worker  -> runner   EXIT
*/
#ifndef CUDA_MSG_H
#define CUDA_MSG_H

#include <stdint.h>
#include <stddef.h>
#include <jansson.h>

#define CUDA_MSG_MAGIC      0x5543474Bu     //  "KGCU" little-endian
#define CUDA_MSG_MAX_PARTS  8
#define CUDA_MSG_MAX_PART   (256u << 20)    //  bytes of one part
#define CUDA_MSG_MAX_TOTAL  (512u << 20)    //  bytes of all parts

typedef enum {
    CUDA_MSG_HELLO = 1,
    CUDA_MSG_INIT = 2,
    CUDA_MSG_JOB = 3,
    CUDA_MSG_RESULT = 4,
    CUDA_MSG_COMPILE = 5,
    CUDA_MSG_COMPILED = 6,
    CUDA_MSG_EXIT = 7,
    CUDA_MSG_SELFTEST = 8
} cuda_msg_type_t;

//  A received message: parts are malloc'd with a NUL appended (not counted).
typedef struct {
    uint32_t type;              //  cuda_msg_type_t
    uint32_t nparts;            //  entries used
    uint8_t *part [CUDA_MSG_MAX_PARTS]; //  bytes of each part
    size_t size [CUDA_MSG_MAX_PARTS];   //  length of each part
} cuda_msg_t;

//  Send one message (blocking, no SIGPIPE). 0 or -1 (errno).
int cuda_msg_send (int fd, uint32_t type, size_t nparts,
                   const void *const *parts, const size_t *sizes);

//  Convenience: part 0 = text (may be NULL for none), then nblobs blobs.
int cuda_msg_send_text (int fd, uint32_t type, const char *text,
                        size_t nblobs, const void *const *blobs, const size_t *sizes);

//  Convenience: part 0 = json (compact text), then nblobs blobs.
int cuda_msg_send_json (int fd, uint32_t type, json_t *json,
                        size_t nblobs, const void *const *blobs, const size_t *sizes);

//  Receive one message, waiting at most timeout_s (< 0: forever).
//  0 ok; 1 timed out (the stream is then out of step: drop it); -1 EOF or
//  I/O error; -2 malformed. err says why for anything but 0.
int cuda_msg_recv (int fd, cuda_msg_t *msg, double timeout_s, char *err, size_t errlen);

//  Free the parts; keeps msg reusable.
void cuda_msg_free (cuda_msg_t *msg);

//  Monotonic clock in seconds, used by every cuda_ module.
double cuda_now (void);

#endif
