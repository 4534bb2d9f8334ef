/*  common_log - one-line logging to stderr for every kgym process.

    Levels filter at run time (KGYM_LOG=debug|info|warn|error, default info).
    Each line: "ISO-time level component: message". Thread-safe (one write()
    per line).
*/
#ifndef COMMON_LOG_H
#define COMMON_LOG_H

typedef enum {
    LOG_LEVEL_DEBUG = 0,
    LOG_LEVEL_INFO  = 1,
    LOG_LEVEL_WARN  = 2,
    LOG_LEVEL_ERROR = 3,
    LOG_LEVEL_QUIET = 4
} common_log_level_t;

//  Set the process-wide threshold; lines below it are dropped.
void common_log_set_level (common_log_level_t level);
common_log_level_t common_log_level (void);

//  Log one line; component is a short name such as "broker" or "worker".
void common_log (common_log_level_t level, const char *component, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

#define log_debug(comp, ...) common_log (LOG_LEVEL_DEBUG, comp, __VA_ARGS__)
#define log_info(comp, ...)  common_log (LOG_LEVEL_INFO,  comp, __VA_ARGS__)
#define log_warn(comp, ...)  common_log (LOG_LEVEL_WARN,  comp, __VA_ARGS__)
#define log_error(comp, ...) common_log (LOG_LEVEL_ERROR, comp, __VA_ARGS__)

#endif
