/*  client_admin - the operator's subcommands of `kgym`.

    kgym drain  --broker EP [--curve-secret FILE --broker-key FILE] [--timeout S] WORKER...
        Ask the broker to drain each named worker: it finishes the jobs it
        holds, takes no new ones, and leaves (its process exits 0). Exit 0
        when every name matched a connected worker, 1 otherwise.
    kgym fetch  --broker EP --client-id ID [--job N | --tag T] [--curve-secret FILE
                --broker-key FILE] [--timeout S]
        Print the kept results of a client's jobs (one job, a tag, or all),
        one JSON line each ("candidate" is "job N"), then say on stderr how
        many of the matching jobs are not finished yet. It leaves without
        DISCONNECT, so the client's waiting jobs stay queued.
    kgym keygen [--name NAME] PATH
        Write a new CURVE key pair: PATH (the public certificate, to put in
        the broker's --trainer-keys or --worker-keys directory, or to give
        as --broker-key) and PATH_secret (mode 0600, for --curve-secret).
    --broker defaults to $KGYM_BROKER; --help prints the subcommand's own
    usage. Spec: docs/protocol.md (DRAIN, FETCH, Security).
*/
#ifndef CLIENT_ADMIN_H
#define CLIENT_ADMIN_H

//  Run the subcommand named by argv [0] ("drain", "fetch", "keygen").
//  Returns the exit status (2 on a usage error).
int client_admin_main (int argc, char **argv);

#endif
