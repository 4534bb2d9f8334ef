/*  common_metrics_http - the HTTP endpoint of a common_metrics registry.

    We bind the listening socket ourselves (so "HOST:PORT" parses one way
    everywhere and port 0 can be read back with getsockname) and hand it to
    libmicrohttpd, which runs one internal polling thread and closes the
    socket when stopped. The handler only reads the registry, which is
    thread-safe.
*/
#include "common_metrics_http.h"
#include "common_log.h"
#include <microhttpd.h>
#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

struct common_metrics_http_t {
    common_metrics_t *metrics;              //  what we serve (borrowed)
    struct MHD_Daemon *daemon;              //  libmicrohttpd, owns the listening socket
    int port;                               //  port bound
    char address [128];                     //  "host:port" as bound
};

//  libmicrohttpd's own complaints go to our log.
static void
s_mhd_log (void *cls, const char *fmt, va_list args)
{
    char line [512];
    vsnprintf (line, sizeof line, fmt, args);
    size_t len = strlen (line);
    while (len && (line [len - 1] == '\n' || line [len - 1] == '\r'))
        line [--len] = 0;
    log_warn ("metrics", "http: %s", line);
}

static enum MHD_Result
s_reply (struct MHD_Connection *connection, unsigned int code, const char *type, char *body)
{
    //  body is malloc'd and handed over (MHD frees it).
    if (!body)
        return MHD_NO;
    struct MHD_Response *response = MHD_create_response_from_buffer (strlen (body), body,
                                                                      MHD_RESPMEM_MUST_FREE);
    if (!response) {
        free (body);
        return MHD_NO;
    }
    MHD_add_response_header (response, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header (response, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header (response, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    enum MHD_Result rc = MHD_queue_response (connection, code, response);
    MHD_destroy_response (response);
    return rc;
}

static char *
s_line (const char *fmt, const char *text)
{
    size_t len = strlen (fmt) + strlen (text) + 1;
    char *line = malloc (len);
    if (line)
        snprintf (line, len, fmt, text);
    return line;
}

static enum MHD_Result
s_handler (void *cls, struct MHD_Connection *connection, const char *url, const char *method,
           const char *version, const char *upload_data, size_t *upload_data_size, void **state)
{
    common_metrics_http_t *self = (common_metrics_http_t *) cls;
    static const char *plain = "text/plain; charset=utf-8";
    if (strcmp (method, MHD_HTTP_METHOD_GET) != 0 && strcmp (method, MHD_HTTP_METHOD_HEAD) != 0)
        return s_reply (connection, MHD_HTTP_METHOD_NOT_ALLOWED, plain,
                        strdup ("method not allowed\n"));
    if (strcmp (url, "/metrics") == 0)
        return s_reply (connection, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8",
                        common_metrics_get_text (self->metrics));
    if (strcmp (url, "/healthz") == 0 || strcmp (url, "/readyz") == 0) {
        char reason [300];
        bool ok = url [1] == 'h'? common_metrics_alive (self->metrics, reason, sizeof reason)
                                : common_metrics_ready (self->metrics, reason, sizeof reason);
        return s_reply (connection, ok? MHD_HTTP_OK: MHD_HTTP_SERVICE_UNAVAILABLE, plain,
                        s_line ("%s\n", reason));
    }
    if (strcmp (url, "/") == 0)
        return s_reply (connection, MHD_HTTP_OK, plain,
                        strdup ("kgym: /metrics (Prometheus), /healthz (alive), /readyz (ready)\n"));
    return s_reply (connection, MHD_HTTP_NOT_FOUND, plain, s_line ("no such page: %s\n", url));
}

//  Split "host:port", "[v6]:port", ":port", "*:port". 0, or -1 with a reason.
static int
s_parse_address (const char *address, char *host, size_t hostlen, char *port, size_t portlen,
                 char *err, size_t errlen)
{
    const char *colon = strrchr (address, ':');
    if (!colon || !colon [1]) {
        snprintf (err, errlen, "metrics address '%s' wants HOST:PORT", address);
        return -1;
    }
    const char *begin = address, *end = colon;
    if (*begin == '[') {
        if (end == begin || end [-1] != ']') {
            snprintf (err, errlen, "metrics address '%s': unbalanced [ ]", address);
            return -1;
        }
        begin++;
        end--;
    }
    size_t len = (size_t) (end - begin);
    if (len >= hostlen || strlen (colon + 1) >= portlen) {
        snprintf (err, errlen, "metrics address '%s' is too long", address);
        return -1;
    }
    memcpy (host, begin, len);
    host [len] = 0;
    if (strcmp (host, "*") == 0)
        host [0] = 0;
    snprintf (port, portlen, "%s", colon + 1);
    char *stop;
    long number = strtol (port, &stop, 10);
    if (*stop || number < 0 || number > 65535 || port [0] == '-' || port [0] == '+') {
        snprintf (err, errlen, "metrics address '%s': bad port '%s'", address, port);
        return -1;
    }
    return 0;
}

//  A listening socket for one resolved address; -1 with errno.
static int
s_listen (const struct addrinfo *ai, bool dual_stack)
{
    int fd = socket (ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0)
        return -1;
    int one = 1, zero = 0;
    setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (ai->ai_family == AF_INET6)
        setsockopt (fd, IPPROTO_IPV6, IPV6_V6ONLY, dual_stack? &zero: &one, sizeof one);
    if (bind (fd, ai->ai_addr, ai->ai_addrlen) || listen (fd, 64)) {
        int saved = errno;
        close (fd);
        errno = saved;
        return -1;
    }
    return fd;
}

common_metrics_http_t *
common_metrics_http_new (common_metrics_t *metrics, const char *address, char *err, size_t errlen)
{
    char host [96], port [16];
    if (!metrics || !address) {
        snprintf (err, errlen, "no metrics address");
        return NULL;
    }
    if (s_parse_address (address, host, sizeof host, port, sizeof port, err, errlen))
        return NULL;
    bool wildcard = host [0] == 0;
    struct addrinfo hints, *list = NULL;
    memset (&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    int gai = getaddrinfo (wildcard? NULL: host, port, &hints, &list);
    if (gai) {
        snprintf (err, errlen, "metrics address '%s': %s", address, gai_strerror (gai));
        return NULL;
    }
    //  For every interface prefer one dual-stack IPv6 socket; else take the
    //  first address that binds.
    int fd = -1, saved = 0;
    for (int pass = wildcard? 0: 1; pass < 2 && fd < 0; pass++)
        for (struct addrinfo *ai = list; ai && fd < 0; ai = ai->ai_next) {
            if (pass == 0 && ai->ai_family != AF_INET6)
                continue;
            fd = s_listen (ai, pass == 0);
            if (fd < 0)
                saved = errno;
        }
    freeaddrinfo (list);
    if (fd < 0) {
        snprintf (err, errlen, "metrics address '%s': cannot listen: %s", address,
                  strerror (saved));
        return NULL;
    }
    common_metrics_http_t *self = calloc (1, sizeof *self);
    if (!self) {
        close (fd);
        snprintf (err, errlen, "out of memory");
        return NULL;
    }
    self->metrics = metrics;
    struct sockaddr_storage bound;
    socklen_t boundlen = sizeof bound;
    char text [INET6_ADDRSTRLEN] = "?";
    if (getsockname (fd, (struct sockaddr *) &bound, &boundlen) == 0) {
        if (bound.ss_family == AF_INET6) {
            struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) &bound;
            self->port = ntohs (in6->sin6_port);
            inet_ntop (AF_INET6, &in6->sin6_addr, text, sizeof text);
            snprintf (self->address, sizeof self->address, "[%s]:%d", text, self->port);
        }
        else {
            struct sockaddr_in *in4 = (struct sockaddr_in *) &bound;
            self->port = ntohs (in4->sin_port);
            inet_ntop (AF_INET, &in4->sin_addr, text, sizeof text);
            snprintf (self->address, sizeof self->address, "%s:%d", text, self->port);
        }
    }
    self->daemon = MHD_start_daemon (MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG,
        0, NULL, NULL, s_handler, self,
        MHD_OPTION_EXTERNAL_LOGGER, s_mhd_log, NULL,
        MHD_OPTION_LISTEN_SOCKET, fd,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned int) 64,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int) 10,
        MHD_OPTION_END);
    if (!self->daemon) {
        close (fd);
        free (self);
        snprintf (err, errlen, "metrics address '%s': cannot start the HTTP server", address);
        return NULL;
    }
    return self;
}

void
common_metrics_http_destroy (common_metrics_http_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    common_metrics_http_t *self = *self_p;
    MHD_stop_daemon (self->daemon);
    free (self);
    *self_p = NULL;
}

int
common_metrics_http_port (common_metrics_http_t *self)
{
    return self? self->port: -1;
}

const char *
common_metrics_http_address (common_metrics_http_t *self)
{
    return self? self->address: NULL;
}
