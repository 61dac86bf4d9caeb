/* llmk chat's input side: the conversation, reading a message, slash commands.
 * On a terminal lines come from libedit's readline-compatible API, so arrow
 * keys edit the line and up-arrow recalls earlier ones (history lives only as
 * long as the chat: nothing is written to disk). Anything else (pipes, files,
 * tests) is read with getchar exactly as before libedit came in: a prompt
 * library must not change what a script's input means. */
#include "chat_line.h"
#include "cli.h"

#include <editline/readline.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int chat_conv_add(struct chat_conv *c, const char *role, const char *content, size_t len) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 8;
        llmk_chat_message *nm = realloc(c->m, cap * sizeof *nm);
        if (!nm) return cli_fail(LLMK_OUT_OF_MEMORY, "conversation of %zu messages", c->n);
        c->m = nm;
        c->cap = cap;
    }
    size_t rl = strlen(role);
    char *r = malloc(rl + 1), *s = malloc(len + 1);
    if (!r || !s) {
        free(r);
        free(s);
        return cli_fail(LLMK_OUT_OF_MEMORY, "message of %zu bytes", len);
    }
    memcpy(r, role, rl + 1);
    memcpy(s, content, len);
    s[len] = 0;
    c->m[c->n].role = r;
    c->m[c->n].content = s;
    c->n++;
    return LLMK_OK;
}

void chat_conv_remove(struct chat_conv *c, size_t at, size_t count) {
    if (!count) return; /* c->m may be NULL, which memmove must not see */
    for (size_t i = at; i < at + count; i++) {
        free((char *)c->m[i].role);
        free((char *)c->m[i].content);
    }
    memmove(c->m + at, c->m + at + count, (c->n - at - count) * sizeof *c->m);
    c->n -= count;
}

size_t chat_conv_n_system(const struct chat_conv *c) {
    size_t k = 0;
    while (k < c->n && !strcmp(c->m[k].role, "system")) k++;
    return k;
}

void chat_conv_free(struct chat_conv *c) {
    chat_conv_remove(c, 0, c->n);
    free(c->m);
    c->m = NULL;
    c->cap = 0;
}

static void json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

int chat_conv_save(const char *path, const char *model, const struct chat_conv *c) {
    llmk_outfile *of;
    int st = cli_outfile_open(path, &model, 1, &of);
    if (st != LLMK_OK) return st;
    FILE *f = llmk_outfile_stream(of);
    fputc('[', f);
    for (size_t i = 0; i < c->n; i++) {
        fputs(i ? ", {\"role\": " : "{\"role\": ", f);
        json_string(f, c->m[i].role);
        fputs(", \"content\": ", f);
        json_string(f, c->m[i].content);
        fputc('}', f);
    }
    fputs("]\n", f);
    return cli_outfile_commit(of); /* a write error seen on the stream fails here */
}

int chat_conv_load(struct chat_conv *c, const char *path) {
    char *json = NULL;
    llmk_chat_message *msgs = NULL;
    size_t len = 0, n = 0;
    int st = cli_read_file(path, &json, &len);
    if (st == LLMK_OK) st = llmk_chat_parse_messages(json, len, &msgs, &n);
    for (size_t k = 0; st == LLMK_OK && k < n; k++)
        st = chat_conv_add(c, msgs[k].role, msgs[k].content, strlen(msgs[k].content));
    free(msgs);
    free(json);
    return st;
}

/* One line of standard input appended at buf[*len], without its end of line
 * (a stated cap: `chat < /dev/zero` must not grow without bound). */
static int read_plain(char *buf, size_t *len) {
    size_t n = *len, start = n;
    int ch;
    bool nul = false;
    while ((ch = getchar()) != EOF && ch != '\n') {
        if (n == CHAT_LINE_MAX)
            return cli_fail(LLMK_BAD_REQUEST, "an input line is longer than %d bytes (1 MiB), the chat limit",
                            CHAT_LINE_MAX);
        nul |= ch == 0;
        buf[n++] = (char)ch;
    }
    if (ch == EOF && n == start) return LLMK_NOT_FOUND;
    if (nul) return cli_fail(LLMK_BAD_REQUEST, "an input line holds a NUL byte; messages are text");
    while (n > start && buf[n - 1] == '\r') n--;
    buf[n] = 0;
    *len = n;
    return LLMK_OK;
}

/* libedit's reads: a byte at a time, never blocking in read(), so that a
 * Ctrl-C is seen whenever it comes. A blocking read misses it when the
 * signal lands just before the read or on another thread, and Ctrl-C also
 * flushes the terminal's input queue, so bytes poll() reported can be gone
 * by the read: short polls, and a non-blocking read that goes back to
 * polling when the queue is empty. */
static volatile sig_atomic_t *g_interrupted;
static int getc_interruptible(FILE *f) {
    int fd = fileno(f);
    for (;;) {
        if (g_interrupted && *g_interrupted) return EOF;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, 50);
        if (r < 0 && errno != EINTR) return EOF;
        if (r <= 0) continue;
        unsigned char c;
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0 && !(fl & O_NONBLOCK)) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
        ssize_t n = read(fd, &c, 1);
        int err = errno;
        if (fl >= 0 && !(fl & O_NONBLOCK)) fcntl(fd, F_SETFL, fl); /* the terminal is shared: as it was */
        if (n == 1) return c;
        if (n == 0 || (err != EINTR && err != EAGAIN && err != EWOULDBLOCK)) return EOF;
    }
}

/* The same through libedit. The prompt and the editing go to stderr
 * (rl_outstream), so stdout stays the model's replies. */
static int read_edited(char *buf, size_t *len, const char *prompt, volatile sig_atomic_t *interrupted) {
    rl_instream = stdin;
    rl_outstream = stderr;
    g_interrupted = interrupted;
    rl_getc_function = getc_interruptible;
    char *s = readline(prompt);
    if (s && interrupted && *interrupted) { /* what was typed before Ctrl-C is not sent */
        free(s);
        s = NULL;
    }
    if (!s) return LLMK_NOT_FOUND;
    size_t n = strlen(s);
    if (*s) add_history(s);
    if (n > CHAT_LINE_MAX - *len) {
        free(s);
        return cli_fail(LLMK_BAD_REQUEST, "an input line is longer than %d bytes (1 MiB), the chat limit",
                        CHAT_LINE_MAX);
    }
    memcpy(buf + *len, s, n);
    free(s);
    *len += n;
    buf[*len] = 0;
    return LLMK_OK;
}

int chat_input_read(struct chat_input *in, size_t *len) {
    if (!in->buf && !(in->buf = malloc(CHAT_LINE_MAX + 1)))
        return cli_fail(LLMK_OUT_OF_MEMORY, "a line buffer of %d bytes", CHAT_LINE_MAX);
    size_t n = 0;
    for (;;) {
        int st = in->tty ? read_edited(in->buf, &n, n ? "... " : "> ", in->interrupted) : read_plain(in->buf, &n);
        if (in->interrupted && *in->interrupted) return LLMK_NOT_FOUND;
        /* End of input after a continued line still sends what was typed. */
        if (st == LLMK_NOT_FOUND && n > 0) break;
        if (st != LLMK_OK) return st;
        /* A trailing backslash continues the message on the next line: the
         * backslash goes, the newline stays. */
        if (n == 0 || in->buf[n - 1] != '\\') break;
        in->buf[n - 1] = '\n';
        if (n == CHAT_LINE_MAX) break;
    }
    in->buf[n] = 0;
    *len = n;
    return LLMK_OK;
}

void chat_input_free(struct chat_input *in) {
    free(in->buf);
    in->buf = NULL;
}

static const char HELP[] =
    "commands (at the start of a line):\n"
    "  /help         this list\n"
    "  /clear        forget the conversation, keep the system message\n"
    "  /system TEXT  replace the system message (and clear)\n"
    "  /save FILE    write the conversation as a JSON messages array\n"
    "  /load FILE    replace the conversation with a JSON messages file\n"
    "  /exit         end the chat (as does end of input)\n"
    "  //...         send a message that starts with '/'\n"
    "  a line ending in '\\' continues on the next line\n";

/* The text after a command word, without leading blanks; NULL when the word
 * is not cmd (so "/saver" is not "/save"). */
static const char *command_arg(const char *text, size_t len, const char *cmd) {
    size_t cl = strlen(cmd);
    if (len < cl || memcmp(text, cmd, cl) || (len > cl && text[cl] != ' ' && text[cl] != '\t')) return NULL;
    const char *a = text + cl;
    while (*a == ' ' || *a == '\t') a++;
    return a;
}

static void clear_conv(struct chat_conv *conv) {
    size_t keep = chat_conv_n_system(conv);
    chat_conv_remove(conv, keep, conv->n - keep);
}

static int set_system(struct chat_conv *conv, const char *text) {
    chat_conv_remove(conv, 0, conv->n);
    return *text ? chat_conv_add(conv, "system", text, strlen(text)) : LLMK_OK;
}

static int file_command(const char *cmd, const char *path, struct chat_conv *conv, const char *model) {
    if (!*path) return cli_fail(LLMK_BAD_REQUEST, "%s needs a file name", cmd);
    if (cmd[1] == 's') {
        int st = chat_conv_save(path, model, conv);
        if (st == LLMK_OK) fprintf(stderr, "saved %zu messages to %s\n", conv->n, path);
        return st;
    }
    struct chat_conv loaded = {0};
    int st = chat_conv_load(&loaded, path);
    if (st == LLMK_OK) {
        /* A failed load keeps the conversation as it was. */
        chat_conv_free(conv);
        *conv = loaded;
        fprintf(stderr, "loaded %zu messages from %s\n", conv->n, path);
    } else {
        chat_conv_free(&loaded);
    }
    return st;
}

enum chat_line_action chat_line_command(const char **text, size_t *len, struct chat_conv *conv,
                                        const char *model) {
    const char *t = *text, *arg;
    if (*len == 0 || t[0] != '/') return CHAT_LINE_SEND;
    if (*len > 1 && t[1] == '/') { /* "//" is a literal '/' */
        (*text)++;
        (*len)--;
        return CHAT_LINE_SEND;
    }
    int st = LLMK_OK;
    if ((arg = command_arg(t, *len, "/exit")) && !*arg) return CHAT_LINE_EXIT;
    if ((arg = command_arg(t, *len, "/help")) && !*arg) {
        fputs(HELP, stderr);
    } else if ((arg = command_arg(t, *len, "/clear")) && !*arg) {
        clear_conv(conv);
        fputs("conversation cleared\n", stderr);
    } else if ((arg = command_arg(t, *len, "/system"))) {
        if ((st = set_system(conv, arg)) == LLMK_OK) fputs("system message set, conversation cleared\n", stderr);
    } else if ((arg = command_arg(t, *len, "/save"))) {
        st = file_command("/save", arg, conv, model);
    } else if ((arg = command_arg(t, *len, "/load"))) {
        st = file_command("/load", arg, conv, model);
    } else {
        fputs("unknown command, /help lists them\n", stderr);
    }
    if (st != LLMK_OK) cli_report("chat", st); /* a failed command does not end the chat */
    return CHAT_LINE_SKIP;
}
