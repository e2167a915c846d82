/*
 * tp_error.h — the one error convention of tpbench.
 *
 * Every fallible function returns a tp_rc: TP_OK or a code naming the class of
 * failure. The human-readable reason (file, line, the failing call and the
 * library's own error text) is kept in a per-thread buffer owned by this module
 * and read with tp_last_error(). Like errno, the message is only meaningful
 * right after a function returned something other than TP_OK.
 */
#ifndef TP_ERROR_H
#define TP_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

/* The process exit statuses of every command and worker: 0 success, 1 the command ran and
 * something failed that is not the input, 2 the input is wrong. Only these three are used;
 * bench/cli/commands.h maps a tp_rc to one (tp_exit_for). */
enum { TP_EXIT_OK = 0, TP_EXIT_FAILURE = 1, TP_EXIT_USAGE = 2 };

/* On every function that returns a status: a result that must be looked at. */
#define TP_MUST_CHECK __attribute__((warn_unused_result))

typedef enum tp_rc {
  TP_OK = 0,
  TP_EUSAGE,    /* bad input from the user: unknown option, value, combination, a path
                   that cannot be used as asked (missing, a folder, not readable) */
  TP_EREJECT,   /* a configuration that cannot run, with a reason */
  TP_ENODEV,    /* no CUDA device, or fewer than asked for */
  TP_ECUDA,     /* CUDA runtime or driver error */
  TP_ENCCL,     /* NCCL error */
  TP_ECUBLAS,   /* cuBLAS / cuBLASLt error */
  TP_ECUPTI,    /* CUPTI error */
  TP_ESQLITE,   /* SQLite error */
  TP_EFOREIGN,  /* a database that is not tpbench's, or from a newer schema */
  TP_EIO,       /* files, sockets, processes */
  TP_EOOM,      /* out of (device) memory */
  TP_ETIMEOUT,  /* a peer, a collective or a wait that did not finish in time */
  TP_ENUMERICS, /* a result that does not match its reference */
  TP_EINTERNAL  /* a broken invariant: a bug in tpbench */
} tp_rc;

/* Records "file:line: message" as this thread's last error and returns code
 * (the one status function without TP_MUST_CHECK: TP_FAIL passes code on).
 * Control characters but line breaks and tabs, and ill-formed UTF-8, in the
 * message become '?' (common/tp_text.h): a message that quotes stored text
 * reaches no terminal as an escape sequence. */
tp_rc tp_fail(tp_rc code, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Prefixes this thread's last error with more context, keeping the cause. */
TP_MUST_CHECK tp_rc tp_fail_context(tp_rc code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The message recorded by the last tp_fail on this thread ("" if none),
 * starting with the source location ("file.c:42: ..."): for logs. */
const char *tp_last_error(void);

/* The same message without the source location: for what users read in
 * records, tables and command errors. */
const char *tp_last_message(void);

/* The code for a path that could not be used, by the system's errno: the
 * path the user gave cannot be used as asked (missing, a file where a folder
 * should be, no permission, a link loop, a read-only file system:
 * TP_EUSAGE), or the system failed while using it (TP_EIO). */
TP_MUST_CHECK tp_rc tp_rc_for_path_errno(int err);

/* A short stable name for a code ("cuda", "usage", ...). */
const char *tp_rc_name(tp_rc code);

/* Clears this thread's last error. */
void tp_clear_error(void);

/* A comma expression, so static analysers see that a failure is never TP_OK. */
#define TP_FAIL(code, ...) ((void)tp_fail((code), __FILE__, __LINE__, __VA_ARGS__), (code))

#define TP_TRY(expr)                                                                               \
  do {                                                                                             \
    tp_rc tp_try_rc_ = (expr);                                                                     \
    if (tp_try_rc_ != TP_OK) return tp_try_rc_;                                                    \
  } while (0)

/* A call that cannot fail on what it is given (a literal, a name already
 * checked): a failure is a bug in tpbench, printed with the place and the
 * error, then the process aborts. Never ignores a status silently. */
#define TP_EXPECT_OK(expr) tp_expect_ok((expr), #expr, __FILE__, __LINE__)
void tp_expect_ok(tp_rc rc, const char *call, const char *file, int line);

#ifdef __cplusplus
}
#endif

#endif /* TP_ERROR_H */
