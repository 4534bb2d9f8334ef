/*  broker_auth - the broker's ZAP handler: CURVE public keys, by role.

    ZeroMQ asks a ZAP handler (RFC 27, inproc://zeromq.zap.01 in the
    socket's context) whether to let each CURVE peer in. This one knows two
    roles, each a directory of public certificates (zcert files, as `kgym
    keygen` writes them): the broker's client socket carries the ZAP domain
    BROKER_AUTH_CLIENTS and takes only trainer keys, its worker socket
    carries BROKER_AUTH_WORKERS and takes only worker keys. Anything else
    (another domain, another mechanism, a key in neither directory, a key of
    the other role) is refused during the handshake: such a peer never gets
    a message through. An approved connection carries the peer's public key
    (Z85) as its User-Id, which the broker checks on every message, so a
    socket that somehow ran without this handler (ZeroMQ lets CURVE peers in
    when no handler answers) is refused too.

    Why not CZMQ's zauth: it takes one certificate directory for the whole
    context and ignores the ZAP domain, so it cannot tell a trainer key from
    a worker key at the handshake. The certificate handling is CZMQ's
    (zcertstore: a directory, re-read when it changes, so a key can be added
    or removed while the broker runs; removal affects new connections only).

    Sockets are made CURVE servers and clients with proto_curve.

    Actor: zactor_new (broker_auth_actor, &config). Right after the start it
    sends one string on the pipe: "" when it serves, else the reason (the
    ZAP endpoint is taken: one handler per process). Pipe: "STATS" -> a JSON
    object {"allowed", "denied"}; "$TERM".
*/
#ifndef BROKER_AUTH_H
#define BROKER_AUTH_H

#include <czmq.h>

#define BROKER_AUTH_CLIENTS "kgym-clients"      //  ZAP domain of the client socket
#define BROKER_AUTH_WORKERS "kgym-workers"      //  ZAP domain of the worker socket

typedef struct {
    const char *trainer_keys;   //  directory of trainers' public certificates
    const char *worker_keys;    //  directory of workers' public certificates
} broker_auth_config_t;

void broker_auth_actor (zsock_t *pipe, void *args);

#endif
