/*  proto_curve - CURVE security for kgym sockets, from zcert files.

    Thin helpers over CZMQ's zcert: load, check that a secret certificate
    really holds a secret key (a public file loads with a zero one, which
    would fail later and silently), apply to a socket.
*/
#include "proto_curve.h"
#include <string.h>
#include <sys/stat.h>

//  A certificate from path; with_secret: it must hold a secret key. NULL with a reason.
static zcert_t *
s_load (const char *path, bool with_secret, const char *what, char *err, size_t errlen)
{
    if (!path || !*path) {
        snprintf (err, errlen, "no %s certificate file given", what);
        return NULL;
    }
    if (!zsys_has_curve ()) {
        snprintf (err, errlen, "this libzmq has no CURVE support");
        return NULL;
    }
    zcert_t *cert = zcert_load (path);
    if (!cert) {
        snprintf (err, errlen, "cannot load the %s certificate %s (missing, or not a zcert file)",
                  what, path);
        return NULL;
    }
    static const uint8_t zero [32] = { 0 };
    if (with_secret && memcmp (zcert_secret_key (cert), zero, sizeof (zero)) == 0) {
        snprintf (err, errlen, "%s holds no secret key (give the NAME_secret file)", path);
        zcert_destroy (&cert);
        return NULL;
    }
    return cert;
}

int
proto_curve_server (zsock_t *sock, const char *secret_file, const char *domain,
                    char *err, size_t errlen)
{
    zcert_t *cert = s_load (secret_file, true, "server", err, errlen);
    if (!cert)
        return -1;
    zcert_apply (cert, sock);
    zsock_set_curve_server (sock, 1);
    zsock_set_zap_domain (sock, domain);
    zcert_destroy (&cert);
    return 0;
}

int
proto_curve_client (zsock_t *sock, const char *secret_file, const char *server_file,
                    char *err, size_t errlen)
{
    zcert_t *cert = s_load (secret_file, true, "own", err, errlen);
    if (!cert)
        return -1;
    zcert_t *server = s_load (server_file, false, "broker's", err, errlen);
    if (!server) {
        zcert_destroy (&cert);
        return -1;
    }
    zcert_apply (cert, sock);
    zsock_set_curve_serverkey (sock, zcert_public_txt (server));
    zcert_destroy (&cert);
    zcert_destroy (&server);
    return 0;
}

int
proto_curve_keygen (const char *path, const char *name, char *err, size_t errlen)
{
    if (!zsys_has_curve ()) {
        snprintf (err, errlen, "this libzmq has no CURVE support");
        return -1;
    }
    if (!path || !*path || strlen (path) > 240) {
        snprintf (err, errlen, "certificate path missing or longer than 240 bytes");
        return -1;
    }
    zcert_t *cert = zcert_new ();
    if (!cert) {
        snprintf (err, errlen, "cannot make a key pair");
        return -1;
    }
    if (name)
        zcert_set_meta (cert, "name", "%s", name);
    char secret [256];
    snprintf (secret, sizeof (secret), "%s_secret", path);
    //  The secret file is written 0600 by zcert_save_secret; make sure of it.
    mode_t old = umask (077);
    int rc = zcert_save_public (cert, path) || zcert_save_secret (cert, secret)? -1: 0;
    umask (old);
    if (rc == 0)
        chmod (path, 0644);
    else
        snprintf (err, errlen, "cannot write %s and %s", path, secret);
    zcert_destroy (&cert);
    return rc;
}
