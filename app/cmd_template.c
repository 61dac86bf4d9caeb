/* llmk template: render a chat template for an OpenAI-style messages file,
 * so a template can be checked against the model's own Jinja rendering. */
#include "cli.h"
#include "opts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char USAGE[] =
    "usage: llmk template [-m MODEL] [--messages FILE.json] [--no-generation-prompt]\n"
    "                     [--chat-template NAME]\n"
    "  Prints the prompt text the model's chat template builds for a conversation\n"
    "  (exactly, no newline added). Only the model's metadata is read.\n";

int cmd_template(int argc, char **argv) {
    const char *cmd = "template", *model = NULL, *messages = "-", *name = NULL, *effort = NULL, *date = NULL;
    bool no_gen = false, info = false;
    const struct cli_opt table[] = {
        CLI_OPT_MODEL(&model),
        CLI_STR("--messages", 0, &messages, "FILE",
                "JSON array of {\"role\", \"content\"} (or an object with a \"messages\" array); '-' or "
                "absent: standard input"),
        CLI_FLAG("--no-generation-prompt", 0, &no_gen, "do not end with the assistant's turn header"),
        CLI_STR("--chat-template", 0, &name, "NAME",
                "chatml, llama3, zephyr, llama2, gemma or harmony instead of recognising the file's tokenizer.chat_template"),
        CLI_STR("--reasoning-effort", 0, &effort, "LEVEL", "low, medium or high (the harmony template's; default medium)"),
        CLI_STR("--date", 0, &date, "YYYY-MM-DD", "the harmony template's current date (default: today)"),
        CLI_FLAG("--info", 0, &info, "print the template family and default system prompt instead"),
    };
    const struct cli_opt_section sections[] = {{NULL, table, CLI_LEN(table)}};
    struct cli_cmd spec = {.name = cmd, .usage = USAGE, .sections = sections, .n_sections = CLI_LEN(sections)};
    int prc = cli_opts_parse(&spec, argc, argv);
    if (prc != CLI_OPTS_GO) return prc;
    bool gen = !no_gen;
    if (!model) model = cli_default_model();
    llmk_gguf *g = NULL;
    llmk_chat_template *t = NULL;
    llmk_chat_message *msgs = NULL;
    char *json = NULL, *out = NULL;
    size_t n = 0, len = 0, out_len = 0;
    int rc = CLI_EXIT_OK, st;
    if ((st = llmk_gguf_open_path(model, &g)) != LLMK_OK ||
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
        (st = llmk_chat_render_with(t, msgs, n,
                                    &(llmk_chat_render_opts){.add_generation_prompt = gen, .reasoning_effort = effort,
                                                             .date = date},
                                    &out, &out_len)) != LLMK_OK) {
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
