/* The input side of llmk chat: the conversation's messages, reading one user
 * message (libedit line editing on a terminal, plain lines otherwise; a
 * trailing backslash continues the message), and the slash commands. */
#ifndef LLMK_APP_CHAT_LINE_H
#define LLMK_APP_CHAT_LINE_H

#include "llmk.h"

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

/* The conversation; roles and contents are owned copies, so messages from
 * /load and --messages outlive the parsed file. */
struct chat_conv {
    llmk_chat_message *m;
    size_t n, cap;
};

int chat_conv_add(struct chat_conv *c, const char *role, const char *content, size_t len);
/* Removes messages [at, at + count). */
void chat_conv_remove(struct chat_conv *c, size_t at, size_t count);
/* How many messages at the start are system messages (kept by /clear and
 * by dropping old turns). */
size_t chat_conv_n_system(const struct chat_conv *c);
void chat_conv_free(struct chat_conv *c);
/* As a JSON messages array, through an outfile that refuses to overwrite
 * the model: a failed save leaves the previous file whole. */
int chat_conv_save(const char *path, const char *model, const struct chat_conv *c);
/* Appends the messages of a JSON messages file (llmk template --messages). */
int chat_conv_load(struct chat_conv *c, const char *path);

/* The message being read: at most CHAT_LINE_MAX bytes in all, in buf. */
enum { CHAT_LINE_MAX = 1 << 20 };
struct chat_input {
    bool tty; /* stdin is a terminal: libedit, a prompt, history */
    char *buf;
    /* set by the caller's SIGINT handler: a read it interrupts ends with
     * LLMK_NOT_FOUND, also when the signal came before the read blocked */
    volatile sig_atomic_t *interrupted;
};

/* One user message into in->buf (NUL-terminated, *len bytes). LLMK_OK,
 * LLMK_NOT_FOUND at end of input (or Ctrl-C while waiting), LLMK_BAD_REQUEST
 * for a message that is too long or holds a NUL. */
int chat_input_read(struct chat_input *in, size_t *len);
void chat_input_free(struct chat_input *in);

/* What the chat does with a message after chat_line_command. */
enum chat_line_action { CHAT_LINE_SEND, CHAT_LINE_SKIP, CHAT_LINE_EXIT };
/* Runs a slash command at the start of *text (reporting on stderr), or
 * unescapes a leading "//"; CHAT_LINE_SEND leaves *text and *len the message to
 * send. model: the input /save refuses to overwrite. */
enum chat_line_action chat_line_command(const char **text, size_t *len, struct chat_conv *conv,
                                        const char *model);

#endif
