/*  common_log - one-line logging to stderr for every kgym process.

    Levels filter at run time (KGYM_LOG=debug|info|warn|error, default info).
    Formats (common_log_set_format, --log-format, or KGYM_LOG_FORMAT):
      text     "ISO-time level component[ gpu=G job=J]: message" (default)
      json     one object a line: {"ts","level","component","msg"[,"gpu"][,"job"]}
               (gpu and job only when set), for log shippers
      journal  systemd's native journal protocol (MESSAGE, PRIORITY,
               SYSLOG_IDENTIFIER, KGYM_COMPONENT, KGYM_GPU, KGYM_JOB), so
               `journalctl KGYM_JOB=42` finds a job's lines; falls back to
               stderr with a "<N>" priority prefix (which journald reads)
               when the journal socket cannot be reached.
    Context: the GPU is process-wide (a worker has one); the job is per
    thread (each job runs on its own thread). Thread-safe (one write() or
    send() per line).
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

typedef enum {
    LOG_FORMAT_TEXT = 0,
    LOG_FORMAT_JSON,
    LOG_FORMAT_JOURNAL
} common_log_format_t;

//  Set the process-wide threshold; lines below it are dropped.
void common_log_set_level (common_log_level_t level);
common_log_level_t common_log_level (void);

//  Output format (process-wide).
void common_log_set_format (common_log_format_t format);
common_log_format_t common_log_format (void);
//  "text", "json" or "journal" -> format; 0, or -1 for anything else.
int common_log_format_parse (const char *text, common_log_format_t *format);

//  Context fields. gpu: process-wide (e.g. "0", the dcgm-exporter index),
//  NULL clears. job: this thread's current job (e.g. "1234"), NULL clears.
void common_log_set_gpu (const char *gpu);
void common_log_set_job (const char *job);

//  Where lines go: a descriptor (default 2, stderr), and for the journal
//  format the journal's socket (default /run/systemd/journal/socket).
//  For tests and for processes that keep stderr for something else.
void common_log_set_fd (int fd);
void common_log_set_journal_socket (const char *path);

//  Log one line; component is a short name such as "broker" or "worker".
void common_log (common_log_level_t level, const char *component, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

#define log_debug(comp, ...) common_log (LOG_LEVEL_DEBUG, comp, __VA_ARGS__)
#define log_info(comp, ...)  common_log (LOG_LEVEL_INFO,  comp, __VA_ARGS__)
#define log_warn(comp, ...)  common_log (LOG_LEVEL_WARN,  comp, __VA_ARGS__)
#define log_error(comp, ...) common_log (LOG_LEVEL_ERROR, comp, __VA_ARGS__)

#endif
