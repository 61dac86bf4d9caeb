/* llmk template: render a chat template for an OpenAI-style messages file,
 * so a template can be checked against the model's own Jinja rendering. */
#include "cli.h"
#include "gen_opts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(void) {
    printf("usage: llmk template [-m MODEL] [--messages FILE.json] [--no-generation-prompt]\n"
           "                     [--chat-template NAME]\n"
           "  Prints the prompt text the model's chat template builds for a conversation\n"
           "  (exactly, no newline added).\n"
           "  -m MODEL              GGUF file (default %s); only its metadata is read\n"
           "  --messages FILE       JSON array of {\"role\", \"content\"} (or an object with a\n"
           "                        \"messages\" array); '-' or absent: standard input\n"
           "  --no-generation-prompt  do not end with the assistant's turn header\n"
           "  --chat-template NAME  chatml, llama3, zephyr or llama2 instead of recognising\n"
           "                        the file's tokenizer.chat_template\n"
           "  --info                print the template family and default system prompt instead\n",
           cli_default_model());
}

int cmd_template(int argc, char **argv) {
    const char *cmd = "template", *model = NULL, *messages = "-", *name = NULL;
    bool gen = true, info = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage();
            return CLI_EXIT_OK;
        } else if (!strcmp(a, "--no-generation-prompt")) {
            gen = false;
        } else if (!strcmp(a, "--info")) {
            info = true;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model") || !strcmp(a, "--messages") ||
                   !strcmp(a, "--chat-template")) {
            if (++i >= argc) return cli_usage_error(cmd, "%s needs a value", a);
            if (!strcmp(a, "--messages")) messages = argv[i];
            else if (!strcmp(a, "--chat-template")) name = argv[i];
            else model = argv[i];
        } else {
            return cli_usage_error(cmd, "unknown option '%s'", a);
        }
    }
    if (!model) model = cli_default_model();
    llmk_gguf *g = NULL;
    llmk_chat_template *t = NULL;
    llmk_chat_message *msgs = NULL;
    char *json = NULL, *out = NULL;
    size_t n = 0, len = 0, out_len = 0;
    int rc = CLI_EXIT_OK, st;
    if ((st = llmk_gguf_open(model, &g)) != LLMK_OK ||
        (st = llmk_chat_template_from_gguf(g, name, &t)) != LLMK_OK) {
        rc = cli_report(cmd, st);
        goto done;
    }
    if (info) {
        const char *sys = llmk_chat_template_default_system(t);
        printf("template: %s\ndefault system prompt: %s\n", llmk_chat_template_name(t),
               sys ? sys : "(none)");
        goto done;
    }
    if ((st = cli_read_file(messages, &json, &len)) != LLMK_OK ||
        (st = llmk_chat_parse_messages(json, len, &msgs, &n)) != LLMK_OK ||
        (st = llmk_chat_render(t, msgs, n, gen, &out, &out_len)) != LLMK_OK) {
        rc = cli_report(cmd, st);
        goto done;
    }
    fwrite(out, 1, out_len, stdout);
    fflush(stdout);
done:
    free(out);
    free(msgs);
    free(json);
    llmk_chat_template_free(t);
    llmk_gguf_close(g);
    return rc;
}
