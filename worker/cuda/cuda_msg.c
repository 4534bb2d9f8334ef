/*  cuda_msg - length-prefixed messages between cuda_backend and kgym-cuda-runner.  */
#include "common_util.h"
#include "cuda_msg.h"
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

double
cuda_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}


//  Write all bytes; send() on sockets so a dead peer is EPIPE, not SIGPIPE.
static int
s_write_all (int fd, const void *data, size_t size)
{
    const uint8_t *p = data;
    while (size > 0) {
        ssize_t n = send (fd, p, size, MSG_NOSIGNAL);
        if (n < 0 && errno == ENOTSOCK)
            n = write (fd, p, size);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        size -= (size_t) n;
    }
    return 0;
}

int
cuda_msg_send (int fd, uint32_t type, size_t nparts, const void *const *parts, const size_t *sizes)
{
    if (nparts > CUDA_MSG_MAX_PARTS) {
        errno = EINVAL;
        return -1;
    }
    uint8_t header [16 + 8 * CUDA_MSG_MAX_PARTS];
    uint32_t words [4] = { CUDA_MSG_MAGIC, type, (uint32_t) nparts, 0 };
    memcpy (header, words, sizeof words);
    for (size_t i = 0; i < nparts; i++) {
        uint64_t size = sizes [i];
        memcpy (header + 16 + 8 * i, &size, 8);
    }
    if (s_write_all (fd, header, 16 + 8 * nparts))
        return -1;
    for (size_t i = 0; i < nparts; i++)
        if (sizes [i] && s_write_all (fd, parts [i], sizes [i]))
            return -1;
    return 0;
}

int
cuda_msg_send_text (int fd, uint32_t type, const char *text,
                    size_t nblobs, const void *const *blobs, const size_t *sizes)
{
    const void *parts [CUDA_MSG_MAX_PARTS];
    size_t lens [CUDA_MSG_MAX_PARTS];
    if (nblobs + 1 > CUDA_MSG_MAX_PARTS) {
        errno = EINVAL;
        return -1;
    }
    parts [0] = text? text: "";
    lens [0] = text? strlen (text): 0;
    for (size_t i = 0; i < nblobs; i++) {
        parts [i + 1] = blobs [i];
        lens [i + 1] = sizes [i];
    }
    return cuda_msg_send (fd, type, nblobs + 1, parts, lens);
}

int
cuda_msg_send_json (int fd, uint32_t type, json_t *json,
                    size_t nblobs, const void *const *blobs, const size_t *sizes)
{
    char *text = json? json_dumps (json, JSON_COMPACT): NULL;
    int rc = cuda_msg_send_text (fd, type, text? text: "{\"status\":\"internal_error\","
                                 "\"message\":\"out of memory\"}", nblobs, blobs, sizes);
    free (text);
    return rc;
}

//  Read exactly size bytes before the deadline. 0, 1 timeout, -1 EOF/error.
static int
s_read_all (int fd, void *data, size_t size, double deadline, char *err, size_t errlen)
{
    uint8_t *p = data;
    while (size > 0) {
        int wait_ms = -1;
        if (deadline > 0) {
            double left = deadline - cuda_now ();
            if (left <= 0) {
                common_seterr (err, errlen, "timed out");
                return 1;
            }
            wait_ms = (int) (left * 1000.0) + 1;
        }
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        int rc = poll (&pfd, 1, wait_ms);
        if (rc < 0) {
            if (errno == EINTR)
                continue;
            common_seterr (err, errlen, "poll: %s", strerror (errno));
            return -1;
        }
        if (rc == 0)
            continue;           //  the deadline check above ends the loop
        ssize_t n = read (fd, p, size);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            common_seterr (err, errlen, "read: %s", strerror (errno));
            return -1;
        }
        if (n == 0) {
            common_seterr (err, errlen, "peer closed the connection");
            return -1;
        }
        p += n;
        size -= (size_t) n;
    }
    return 0;
}

int
cuda_msg_recv (int fd, cuda_msg_t *msg, double timeout_s, char *err, size_t errlen)
{
    memset (msg, 0, sizeof *msg);
    double deadline = timeout_s >= 0? cuda_now () + timeout_s: 0;
    if (timeout_s >= 0 && deadline == 0)
        deadline = 1e-9;
    uint32_t words [4];
    int rc = s_read_all (fd, words, sizeof words, deadline, err, errlen);
    if (rc)
        return rc;
    if (words [0] != CUDA_MSG_MAGIC || words [2] > CUDA_MSG_MAX_PARTS) {
        common_seterr (err, errlen, "malformed message header");
        return -2;
    }
    msg->type = words [1];
    msg->nparts = words [2];
    uint64_t sizes [CUDA_MSG_MAX_PARTS];
    if (msg->nparts) {
        rc = s_read_all (fd, sizes, 8 * msg->nparts, deadline, err, errlen);
        if (rc)
            return rc;
    }
    uint64_t total = 0;
    for (uint32_t i = 0; i < msg->nparts; i++) {
        if (sizes [i] > CUDA_MSG_MAX_PART) {
            common_seterr (err, errlen, "message part of %llu bytes is over the limit",
                   (unsigned long long) sizes [i]);
            return -2;
        }
        total += sizes [i];
    }
    if (total > CUDA_MSG_MAX_TOTAL) {
        common_seterr (err, errlen, "message of %llu bytes is over the limit", (unsigned long long) total);
        return -2;
    }
    for (uint32_t i = 0; i < msg->nparts; i++) {
        msg->part [i] = malloc (sizes [i] + 1);
        if (!msg->part [i]) {
            common_seterr (err, errlen, "out of memory");
            cuda_msg_free (msg);
            return -1;
        }
        msg->size [i] = sizes [i];
        rc = s_read_all (fd, msg->part [i], sizes [i], deadline, err, errlen);
        if (rc) {
            cuda_msg_free (msg);
            return rc;
        }
        msg->part [i] [sizes [i]] = 0;
    }
    return 0;
}

void
cuda_msg_free (cuda_msg_t *msg)
{
    for (size_t i = 0; i < CUDA_MSG_MAX_PARTS; i++) {
        free (msg->part [i]);
        msg->part [i] = NULL;
        msg->size [i] = 0;
    }
    msg->nparts = 0;
}
