/* The progress line (app/progress.h). */
#include "progress.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

enum { LINE_MAX_COLS = 512, DEFAULT_COLS = 80 };
#define REDRAW_S 0.1 /* ten redraws a second at most: a fast loop must not spend its time on the terminal */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

bool cli_progress_wanted(const struct cli_progress_flags *f, bool quiet) {
    if (f && f->on) return true;
    if ((f && f->off) || quiet) return false;
    return isatty(STDERR_FILENO) == 1;
}

void cli_progress_start(struct cli_progress *p, const char *cmd, bool on, double delay_s) {
    memset(p, 0, sizeof *p);
    p->cmd = cmd;
    p->on = on;
    p->delay = delay_s;
    p->t0 = now_s();
    p->width = DEFAULT_COLS;
    struct winsize ws;
    if (on && ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1) p->width = ws.ws_col;
    if (p->width > LINE_MAX_COLS) p->width = LINE_MAX_COLS;
}

double cli_progress_elapsed(const struct cli_progress *p) { return now_s() - p->t0; }

/* The line written at once (stderr is unbuffered: pieces would flicker):
 * '\r', the text cut to the terminal's width less one (the cursor stays on
 * the line), spaces over the rest of a longer line before it. */
static void draw(struct cli_progress *p, const char *text) {
    char line[LINE_MAX_COLS * 2 + 4];
    int cols = p->width - 1, n = 0;
    line[n++] = '\r';
    int len = (int)strlen(text);
    if (len > cols) len = cols;
    memcpy(line + n, text, (size_t)len);
    n += len;
    for (int i = len; i < p->shown; i++) line[n++] = ' ';
    fwrite(line, 1, (size_t)n, stderr);
    fflush(stderr);
    p->shown = len > p->shown ? len : p->shown;
}

static void vshow(struct cli_progress *p, bool now, const char *fmt, va_list ap) {
    if (!p->on) return;
    double t = now_s();
    if (t - p->t0 < p->delay || (!now && p->shown && t - p->last < REDRAW_S)) return;
    p->last = t;
    char text[LINE_MAX_COLS + 1];
    int n = snprintf(text, sizeof text, "llmk %s: ", p->cmd);
    if (n > 0 && n < (int)sizeof text) vsnprintf(text + n, sizeof text - (size_t)n, fmt, ap);
    draw(p, text);
}

void cli_progress_show(struct cli_progress *p, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vshow(p, false, fmt, ap);
    va_end(ap);
}

void cli_progress_show_now(struct cli_progress *p, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vshow(p, true, fmt, ap);
    va_end(ap);
}

void cli_progress_clear(struct cli_progress *p) {
    if (!p->on || !p->shown) return;
    char line[LINE_MAX_COLS + 2];
    line[0] = '\r';
    memset(line + 1, ' ', (size_t)p->shown);
    line[p->shown + 1] = '\r';
    fwrite(line, 1, (size_t)p->shown + 2, stderr);
    fflush(stderr);
    p->shown = 0;
}

void cli_progress_eta(const struct cli_progress *p, double fraction, char *buf, int cap) {
    double el = cli_progress_elapsed(p);
    buf[0] = 0;
    /* the first percent and half second say little about the rate */
    if (fraction < 0.01 || fraction >= 1 || el < 0.5) return;
    long left = (long)(el * (1 - fraction) / fraction + 0.5);
    if (left >= 60) snprintf(buf, (size_t)cap, ", ETA %ld min %ld s", left / 60, left % 60);
    else snprintf(buf, (size_t)cap, ", ETA %ld s", left);
}

bool cli_progress_load(float fraction, void *user) {
    struct cli_progress *p = user;
    if (fraction >= 1.0f) {
        cli_progress_clear(p);
        return true;
    }
    char eta[48];
    cli_progress_eta(p, fraction, eta, sizeof eta);
    cli_progress_show(p, "loading model %3.0f%%%s", 100.0 * fraction, eta);
    return true;
}
