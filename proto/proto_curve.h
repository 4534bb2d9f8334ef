/*  proto_curve - CURVE security for kgym sockets, from zcert files.

    Keys live in CZMQ certificate files: `kgym keygen NAME` writes NAME (the
    public certificate, to hand out) and NAME_secret (both keys, kept by its
    owner). A broker's sockets are CURVE servers with the broker's secret
    certificate and a ZAP domain per role; clients and workers are CURVE
    clients with their own secret certificate and the broker's public one.
    Spec: docs/protocol.md, section "Security".
*/
#ifndef PROTO_CURVE_H
#define PROTO_CURVE_H

#include <czmq.h>

//  Make sock a CURVE server with the certificate in secret_file and the
//  given ZAP domain. Before bind. 0, or -1 with a reason.
int proto_curve_server (zsock_t *sock, const char *secret_file, const char *domain,
                        char *err, size_t errlen);

//  Make sock a CURVE client: its own keys from secret_file, the server's
//  public key from server_file (its public certificate; a secret one works
//  too). Before connect. 0, or -1 with a reason.
int proto_curve_client (zsock_t *sock, const char *secret_file, const char *server_file,
                        char *err, size_t errlen);

//  Write a new key pair: path (public) and path_secret (mode 0600). 0 or -1 with a reason.
int proto_curve_keygen (const char *path, const char *name, char *err, size_t errlen);

#endif
