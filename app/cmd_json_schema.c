/* llmk json-schema-to-grammar: print the GBNF grammar a JSON Schema becomes
 * (the one -j/--json-schema constrains generation with), so a schema can be
 * checked, or the grammar kept and edited. */
#include "cli.h"
#include "opts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char USAGE[] =
    "usage: llmk json-schema-to-grammar [-f FILE | SCHEMA]\n"
    "  Prints the GBNF grammar (llama.cpp's dialect, start rule `root`) that a JSON\n"
    "  Schema converts to. A keyword the grammar cannot enforce is refused with its\n"
    "  name and JSON pointer (docs/json_schema.md).\n";

int cmd_json_schema_to_grammar(int argc, char **argv) {
    const char *cmd = "json-schema-to-grammar", *file = NULL, *text = NULL;
    bool any_object = false;
    const struct cli_opt table[] = {
        CLI_STR("--file", 'f', &file, "FILE", "read the schema from FILE ('-': standard input)"),
        CLI_FLAG("--any-object", 0, &any_object,
                 "the grammar of any JSON object (OpenAI's response_format json_object)"),
    };
    const struct cli_opt_section sections[] = {{NULL, table, CLI_LEN(table)}};
    struct cli_cmd spec = {.name = cmd, .usage = USAGE, .sections = sections, .n_sections = CLI_LEN(sections),
                           .pos = &text, .max_pos = 1, .pos_name = "SCHEMA"};
    int prc = cli_opts_parse(&spec, argc, argv);
    if (prc != CLI_OPTS_GO) return prc;
    if ((file != NULL) + (text != NULL) + any_object != 1)
        return cli_usage_error(cmd, "give the schema once: as an argument, with -f FILE, or --any-object");
    char *buf = NULL, *gbnf = NULL;
    size_t len = 0, glen = 0;
    int st = LLMK_OK;
    if (file) {
        st = cli_read_file(file, &buf, &len);
        text = buf;
    } else {
        if (any_object) text = LLMK_JSON_SCHEMA_ANY_OBJECT;
        len = strlen(text);
    }
    if (st == LLMK_OK) st = llmk_json_schema_to_gbnf(text, len, &gbnf, &glen);
    int rc = CLI_EXIT_OK;
    if (st != LLMK_OK) rc = cli_report(cmd, st);
    else fwrite(gbnf, 1, glen, stdout);
    free(gbnf);
    free(buf);
    return rc;
}
