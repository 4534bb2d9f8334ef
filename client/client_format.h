/*  client_format - results for people: the readable table behind --profile.

    The JSON lines stay the machine-readable output; this writes, for one
    result, a status line, the feedback, and the per-kernel profile of the
    candidate (and of the reference or baseline beside it) as a table.
*/
#ifndef CLIENT_FORMAT_H
#define CLIENT_FORMAT_H

#include <stdio.h>
#include <jansson.h>

//  Write the readable block for result (borrowed) to out.
void client_format_profile (json_t *result, const char *candidate, FILE *out);

#endif
