/*
 * tp_log.h — logging by level and subsystem, switched on from the environment.
 *
 * TPBENCH_LOG=error|warn|info|debug (default warn) sets the level;
 * TPBENCH_LOG_SUBSYS=launch,symm,ops,store,... (default all) limits the
 * subsystems shown. Lines go to stderr prefixed with the process's rank tag.
 */
#ifndef TP_LOG_H
#define TP_LOG_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { TP_LOG_ERROR = 0, TP_LOG_WARN, TP_LOG_INFO, TP_LOG_DEBUG } tp_log_level;

/* Sets the tag printed before every line (e.g. "rank 1"); NULL for none. */
void tp_log_set_tag(const char *tag);

/* True if a message of this level and subsystem would be printed. */
int tp_log_enabled(tp_log_level level, const char *subsys);

void tp_log(tp_log_level level, const char *subsys, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define TP_LOGE(sub, ...) tp_log(TP_LOG_ERROR, (sub), __VA_ARGS__)
#define TP_LOGW(sub, ...) tp_log(TP_LOG_WARN, (sub), __VA_ARGS__)
#define TP_LOGI(sub, ...) tp_log(TP_LOG_INFO, (sub), __VA_ARGS__)
#define TP_LOGD(sub, ...) tp_log(TP_LOG_DEBUG, (sub), __VA_ARGS__)

#ifdef __cplusplus
}
#endif

#endif /* TP_LOG_H */
