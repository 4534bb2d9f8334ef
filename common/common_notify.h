/*  common_notify - systemd's readiness protocol (sd_notify), hand-written.

    Under a Type=notify unit systemd sets $NOTIFY_SOCKET to a datagram
    socket: a path ("/run/systemd/notify") or, starting with '@', a name in
    the abstract namespace. A message is "KEY=VALUE" lines: READY=1 when the
    service is up, STATUS=... a line shown by systemctl status, STOPPING=1
    when it begins to stop, WATCHDOG=1 to feed WatchdogSec=. No libsystemd:
    one socket(), one sendto() per message. Outside systemd (no
    $NOTIFY_SOCKET) every call is a no-op returning 0.

    The broker says READY=1 once its sockets are bound and its store is
    open; the worker once its backend is up (CUDA initialised) and it has
    announced itself; both STOPPING=1 on SIGTERM, and STATUS= as the queue
    or state changes.
*/
#ifndef COMMON_NOTIFY_H
#define COMMON_NOTIFY_H

#include <stdint.h>

//  Send one message (lines "KEY=VALUE\n..."). 1 sent, 0 no $NOTIFY_SOCKET
//  (not started by systemd, or not Type=notify), -1 it could not be sent
//  (errno set; the caller logs and carries on).
int common_notify (const char *message);

//  READY=1, with STATUS=status when status is not NULL.
int common_notify_ready (const char *status);
//  STATUS=..., printf-style; a newline in the text becomes a space.
int common_notify_status (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));
//  STOPPING=1, with STATUS=status when status is not NULL.
int common_notify_stopping (const char *status);
//  WATCHDOG=1.
int common_notify_watchdog (void);

//  The watchdog interval systemd expects pings within ($WATCHDOG_USEC, when
//  $WATCHDOG_PID is unset or names this process), in microseconds; 0 when
//  there is no watchdog. Ping at half of it.
uint64_t common_notify_watchdog_usec (void);

#endif
