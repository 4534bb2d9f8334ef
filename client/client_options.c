/*  client_options - what every broker-facing `kgym` subcommand parses alike.

    One place for the connection options and the number parsers, so that
    submit, the queries and the operators' commands take the same
    spellings, the same ranges and say the same thing about a bad value.
*/
#include "client_options.h"
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void
client_options_init (client_options_t *self, const char *command, double timeout_s)
{
    memset (self, 0, sizeof (*self));
    self->command = command;
    self->timeout_s = timeout_s;
}

int
client_options_take (client_options_t *self, int opt, const char *arg)
{
    switch (opt) {
        case CLIENT_OPT_BROKER:
            self->broker = arg;
            return 1;
        case CLIENT_OPT_CURVE_SECRET:
            self->curve_secret = arg;
            return 1;
        case CLIENT_OPT_BROKER_KEY:
            self->broker_key = arg;
            return 1;
        case CLIENT_OPT_TIMEOUT:
            if (client_options_real (self->command, "--timeout", arg, 0, true,
                                     CLIENT_OPTIONS_MAX_TIMEOUT, "seconds", &self->timeout_s))
                return -1;
            self->timeout_given = true;
            return 1;
        default:
            return 0;
    }
}

int
client_options_check (client_options_t *self, bool require_broker)
{
    const char *from_env = getenv ("KGYM_BROKER");
    if (!self->broker && from_env && *from_env)
        self->broker = from_env;
    if (require_broker && !self->broker) {
        fprintf (stderr, "kgym %s: --broker EP is required (or $KGYM_BROKER)\n", self->command);
        return 2;
    }
    char err [512];
    if (self->broker && client_kgym_check_endpoint (self->broker, false, err, sizeof (err))) {
        fprintf (stderr, "kgym %s: --broker%s: %s\n", self->command,
                 self->broker == from_env? " (from $KGYM_BROKER)": "", err);
        return 2;
    }
    if (!self->curve_secret != !self->broker_key) {
        fprintf (stderr, "kgym %s: --curve-secret and --broker-key go together\n", self->command);
        return 2;
    }
    return 0;
}

client_kgym_t *
client_options_connect (const client_options_t *self, client_kgym_config_t *cfg)
{
    cfg->endpoint = self->broker;
    cfg->curve_secret = self->curve_secret;
    cfg->broker_key = self->broker_key;
    char err [512];
    if (client_kgym_check_endpoint (self->broker, true, err, sizeof (err))) {
        fprintf (stderr, "kgym %s: %s\n", self->command, err);
        return NULL;
    }
    client_kgym_t *client = client_kgym_new_config (cfg, err, sizeof (err));
    if (!client)
        fprintf (stderr, "kgym %s: cannot connect to %s: %s\n", self->command, self->broker, err);
    return client;
}

int
client_options_int (const char *command, const char *option, const char *text,
                    long long min, long long max, long long *value)
{
    char *end;
    errno = 0;
    long long number = strtoll (text, &end, 10);
    if (errno || end == text || *end || isspace ((unsigned char) text [0])
    ||  number < min || number > max) {
        fprintf (stderr, "kgym %s: %s wants an integer %lld..%lld, not '%s'\n", command, option,
                 min, max, text);
        return -1;
    }
    *value = number;
    return 0;
}

int
client_options_real (const char *command, const char *option, const char *text,
                     double min, bool min_open, double max, const char *what, double *value)
{
    char *end;
    errno = 0;
    double number = strtod (text, &end);
    if (errno || end == text || *end || isspace ((unsigned char) text [0]) || !isfinite (number)
    ||  number < min || (min_open && number == min) || number > max) {
        fprintf (stderr, "kgym %s: %s wants %s in %c%g, %g], not '%s'\n", command, option, what,
                 min_open? '(': '[', min, max, text);
        return -1;
    }
    *value = number;
    return 0;
}
