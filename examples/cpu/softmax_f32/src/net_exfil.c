/* Hostile: tries to send the input to 127.0.0.1:9 (discard) over TCP.
   It never writes the output, whatever happens: socket(AF_INET) refused
   (seccomp), connect refused or unreachable (own network namespace with
   only lo), or even a connection made. Expected: incorrect. Whether the
   socket was refused is for the sandbox's own tests to check. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

void softmax(const float *x, float *y, int32_t M, int32_t N)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return;                     /* refused: leave y unwritten */
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons(9);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *) &addr, sizeof addr) == 0) {
        size_t bytes = (size_t) M * (size_t) N * sizeof(float);
        (void) !write(fd, x, bytes < 65536 ? bytes : 65536);
    }
    close(fd);
}
