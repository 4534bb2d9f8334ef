/*  client_options - what every broker-facing `kgym` subcommand parses alike.

    The connection options of submit, the queries (workers, stats, job,
    jobs, results, tasks, cache --broker) and the operators' commands
    (drain, fetch): --broker EP (else $KGYM_BROKER), --curve-secret FILE
    --broker-key FILE, --timeout S. Each subcommand splices
    CLIENT_OPTIONS_LONG into its getopt_long table and hands every option
    to client_options_take first.

    And the number parsers every subcommand uses for its own flags: the
    whole text must be a number in range, else one line on stderr
    ("kgym eval: --seed wants an integer 0..9223372036854775807, not
    'abc'") and the caller exits 2.
*/
#ifndef CLIENT_OPTIONS_H
#define CLIENT_OPTIONS_H

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include "client_kgym.h"

//  getopt codes of the shared options (above any short option's).
#define CLIENT_OPT_BROKER       0x100
#define CLIENT_OPT_CURVE_SECRET 0x101
#define CLIENT_OPT_BROKER_KEY   0x102
#define CLIENT_OPT_TIMEOUT      0x103

//  The shared entries of a getopt_long table.
#define CLIENT_OPTIONS_LONG \
    { "broker", required_argument, NULL, CLIENT_OPT_BROKER }, \
    { "curve-secret", required_argument, NULL, CLIENT_OPT_CURVE_SECRET }, \
    { "broker-key", required_argument, NULL, CLIENT_OPT_BROKER_KEY }, \
    { "timeout", required_argument, NULL, CLIENT_OPT_TIMEOUT }

//  The most seconds --timeout takes.
#define CLIENT_OPTIONS_MAX_TIMEOUT 3600

typedef struct {
    const char *command;        //  the subcommand's name, for messages
    const char *broker;         //  --broker EP, else $KGYM_BROKER after check()
    const char *curve_secret;   //  --curve-secret FILE, or NULL
    const char *broker_key;     //  --broker-key FILE, or NULL
    double timeout_s;           //  --timeout S (the caller's default until given)
    bool timeout_given;         //  --timeout was on the command line
} client_options_t;

//  Start with nothing given; timeout_s is the command's default.
void client_options_init (client_options_t *self, const char *command, double timeout_s);

//  Take option opt (a getopt code) with its argument: 1 when it was one of
//  the shared options, 0 when it is the caller's, -1 on a bad value (said
//  on stderr: exit 2).
int client_options_take (client_options_t *self, int opt, const char *arg);

//  After parsing: the broker from $KGYM_BROKER when --broker was absent,
//  then the checks: a broker named (when required), the CURVE options
//  together, the endpoint well formed (client_kgym_check_endpoint). 0, or
//  2 after a line on stderr.
int client_options_check (client_options_t *self, bool require_broker);

//  Connect with cfg (its endpoint and CURVE fields are set from self;
//  the rest is the caller's). The broker's host must resolve. NULL after
//  a line on stderr (exit 1).
client_kgym_t *client_options_connect (const client_options_t *self, client_kgym_config_t *cfg);

//  An integer in [min, max]: 0, or -1 after "kgym COMMAND: OPTION wants an
//  integer MIN..MAX, not 'TEXT'" on stderr.
int client_options_int (const char *command, const char *option, const char *text,
                        long long min, long long max, long long *value);

//  A finite real in [min, max] ((min, max] when min_open): 0, or -1 after
//  "kgym COMMAND: OPTION wants WHAT in [MIN, MAX], not 'TEXT'" on stderr
//  (what: "seconds", "a number").
int client_options_real (const char *command, const char *option, const char *text,
                         double min, bool min_open, double max, const char *what,
                         double *value);

#endif
