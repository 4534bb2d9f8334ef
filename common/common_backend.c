/*  common_backend - which task backends and program languages exist.  */
#include "common_backend.h"
#include <stdio.h>
#include <string.h>

//  The installed catalog (immutable once set), NULL until installed.
static const common_backend_info_t *const *s_catalog;

void
common_backend_install (const common_backend_info_t *const *catalog)
{
    s_catalog = catalog;
}

bool
common_backend_known (void)
{
    return s_catalog != NULL;
}

static bool
s_has (const char *const *names, const char *name)
{
    for (size_t i = 0; i < COMMON_BACKEND_MAX_NAMES && names [i]; i++)
        if (strcmp (names [i], name) == 0)
            return true;
    return false;
}

const common_backend_info_t *
common_backend_find (const char *target, const char *lang)
{
    if (!s_catalog || !target)
        return NULL;
    for (size_t i = 0; s_catalog [i]; i++) {
        const common_backend_info_t *entry = s_catalog [i];
        if (s_has (entry->targets, target) && (!lang || s_has (entry->langs, lang)))
            return entry;
    }
    return NULL;
}

bool
common_backend_modules (const char *target, const char *lang)
{
    const common_backend_info_t *entry = lang? common_backend_find (target, lang): NULL;
    return entry && entry->modules;
}

const char *
common_backend_default_lang (const char *target)
{
    const common_backend_info_t *entry = common_backend_find (target, NULL);
    return entry? entry->langs [0]: NULL;
}

//  Append name to the comma list in buf unless it is there already.
static void
s_append (char *buf, size_t len, const char *name)
{
    size_t used = strlen (buf);
    for (const char *at = buf; (at = strstr (at, name)); at++) {
        size_t n = strlen (name);
        if ((at == buf || at [-1] == ' ') && (at [n] == 0 || at [n] == ','))
            return;
    }
    snprintf (buf + used, len - used, "%s%s", used? ", ": "", name);
}

const char *
common_backend_list (const char *target, bool langs, char *buf, size_t len)
{
    if (!len)
        return buf;
    buf [0] = 0;
    for (size_t i = 0; s_catalog && s_catalog [i]; i++) {
        const common_backend_info_t *entry = s_catalog [i];
        if (target && !s_has (entry->targets, target))
            continue;
        const char *const *names = langs? entry->langs: entry->targets;
        for (size_t k = 0; k < COMMON_BACKEND_MAX_NAMES && names [k]; k++)
            s_append (buf, len, names [k]);
    }
    return buf;
}
