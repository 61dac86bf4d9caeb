/* A progress line on stderr for long work (quantize, perplexity, the weights'
 * repacking at load): one line rewritten in place with '\r', redrawn at most
 * ten times a second, erased when the work is done. It is drawn only where a
 * person watches: on a terminal, unless --no-progress or --log-disable, or
 * anywhere with --progress. Piped or redirected, nothing extra is written,
 * so logs and tests see the same bytes as before. */
#ifndef LLMK_PROGRESS_H
#define LLMK_PROGRESS_H

#include <stdbool.h>

/* --progress / --no-progress (the shared rows CLI_OPT_PROGRESS, app/opts.h). */
struct cli_progress_flags {
    bool on, off;
};

/* Whether a command draws progress: --progress forces it, --no-progress and
 * --log-disable (quiet) turn it off, else only when stderr is a terminal. */
bool cli_progress_wanted(const struct cli_progress_flags *f, bool quiet);

struct cli_progress {
    const char *cmd;  /* "quantize": the line reads "llmk quantize: ..." */
    bool on;
    double t0;        /* start, seconds (monotonic) */
    double delay;     /* nothing is drawn before t0 + delay: short work stays silent */
    double last;      /* the last redraw */
    int shown;        /* columns of the line now on screen; 0: none */
    int width;        /* the terminal's columns: a longer line would wrap and '\r' not reach its start */
};

/* Starts the clock. on: cli_progress_wanted's answer. */
void cli_progress_start(struct cli_progress *p, const char *cmd, bool on, double delay_s);

/* Redraws the line with this text (after "llmk CMD: "), unless the last
 * redraw was under 0.1 s ago or the delay has not passed. */
void cli_progress_show(struct cli_progress *p, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* The same at once, for a new stage (writing the file after the tensors)
 * that must not wait for the next redraw. */
void cli_progress_show_now(struct cli_progress *p, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Erases the line (before other output, and when the work ends). */
void cli_progress_clear(struct cli_progress *p);

/* Seconds since cli_progress_start. */
double cli_progress_elapsed(const struct cli_progress *p);

/* " ETA 31 s" / " ETA 4 min 5 s" for the share done so far, or "" while too
 * little is done to tell. */
void cli_progress_eta(const struct cli_progress *p, double fraction, char *buf, int cap);

/* An llmk_progress_callback (session and context params) drawing "loading
 * model 57%, ETA 3 s" on the cli_progress passed as user data; erases the
 * line at 1. Never cancels. */
bool cli_progress_load(float fraction, void *user);

#endif
