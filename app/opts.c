/* The option-table parser and help printer (app/opts.h). */
#include "opts.h"

#include <string.h>

int cli_opt_path(const char *cmd, const char *flag, const char *value, void *ctx) {
    if (llmk_path_from_name(value, ctx) == LLMK_OK) return 1;
    cli_usage_error(cmd, "%s expects ref, f32 or fast, got '%s'", flag, value);
    return 0;
}

int cli_opt_kv_type(const char *cmd, const char *flag, const char *value, void *ctx) {
    uint32_t *out = ctx;
    if (!strcmp(value, "f32")) *out = LLMK_TYPE_F32;
    else if (!strcmp(value, "f16")) *out = LLMK_TYPE_F16;
    else if (!strcmp(value, "q8_0")) *out = LLMK_TYPE_Q8_0;
    else return cli_usage_error(cmd, "%s expects f32, f16 or q8_0, got '%s'", flag, value), 0;
    return 1;
}

/* ---- parsing ---------------------------------------------------------------- */

static bool same_name(const char *known, const char *name, size_t len) {
    return known && strlen(known) == len && !strncmp(known, name, len);
}

/* The row whose long name or alias is name[0 .. len), or whose short name is sh. */
static const struct cli_opt *find_row(const struct cli_cmd *c, const char *name, size_t len, char sh) {
    for (size_t s = 0; s < c->n_sections; s++)
        for (size_t i = 0; i < c->sections[s].n; i++) {
            const struct cli_opt *o = &c->sections[s].rows[i];
            if (name ? same_name(o->name, name, len) || same_name(o->alias, name, len) : sh && o->short_name == sh)
                return o;
        }
    return NULL;
}

/* Store value into the row's destination; 1, or 0 after a usage error. */
static int store(const char *cmd, const struct cli_opt *o, const char *flag, const char *value) {
    long l;
    switch (o->kind) {
    case CLI_OPT_LONG:
    case CLI_OPT_I32:
    case CLI_OPT_I64:
        if (!cli_parse_long(cmd, flag, value, o->lo, o->hi, &l)) return 0;
        /* the row's limits fit its destination (they are part of its definition) */
        if (o->kind == CLI_OPT_LONG) *o->dest.l = l;
        else if (o->kind == CLI_OPT_I32) *o->dest.i32 = (int32_t)l;
        else *o->dest.i64 = (int64_t)l;
        return 1;
    case CLI_OPT_NUM:
        return cli_parse_double(cmd, flag, value, o->dlo, o->dhi, o->dest.d);
    case CLI_OPT_STR:
        *o->dest.s = value;
        return 1;
    case CLI_OPT_FN:
        return o->parse(cmd, flag, value, o->dest.ctx);
    case CLI_OPT_FLAG: /* not reached: cli_opts_parse sets flags itself */
        break;
    }
    return 0;
}

static int positional(struct cli_cmd *c, const char *a) {
    if (c->n_pos < c->max_pos) {
        c->pos[c->n_pos++] = a;
        return 1;
    }
    const char *what = c->pos_name ? c->pos_name : "argument";
    if (c->max_pos == 0) cli_usage_error(c->name, "unexpected argument '%s'", a);
    else if (c->max_pos == 1)
        cli_usage_error(c->name, "more than one %s ('%s' and '%s'; quote one that has spaces)", what,
                        c->pos[0], a);
    else cli_usage_error(c->name, "unexpected argument '%s' (expected %s)", a, what);
    return 0;
}

int cli_opts_parse(struct cli_cmd *c, int argc, char **argv) {
    c->n_pos = 0;
    bool only_pos = false; /* after "--" */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (only_pos || a[0] != '-' || a[1] == '\0') {
            if (!positional(c, a)) return CLI_EXIT_USAGE;
            continue;
        }
        if (!strcmp(a, "--")) {
            only_pos = true;
            continue;
        }
        /* "--name=value": the name ends at '='; a short option is "-x" exactly */
        bool is_long = a[1] == '-';
        const char *eq = is_long ? strchr(a, '=') : NULL;
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        char flag[64];
        snprintf(flag, sizeof flag, "%.*s", (int)len, a);
        if ((len == 2 && a[1] == 'h') || (len == 6 && !strncmp(a, "--help", 6))) {
            if (eq) return cli_usage_error(c->name, "%s takes no value (got '%s')", flag, a);
            cli_opts_help(c, stdout);
            return CLI_EXIT_OK;
        }
        /* a single-dash name longer than one letter (llama-server's -np) is a row's whole name */
        const struct cli_opt *o = is_long || len > 2 ? find_row(c, a, len, 0) : find_row(c, NULL, 0, a[1]);
        if (!o) return cli_usage_error(c->name, "unknown option '%.*s'", (int)len, a);
        if (o->kind == CLI_OPT_FLAG) {
            if (eq) return cli_usage_error(c->name, "%s takes no value (got '%s')", flag, a);
            *o->dest.flag = true;
            continue;
        }
        const char *value = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
        if (!value) return cli_usage_error(c->name, "%s needs a value (%s)", flag, o->metavar);
        if (!store(c->name, o, flag, value)) return CLI_EXIT_USAGE;
    }
    return CLI_OPTS_GO;
}

/* ---- help ------------------------------------------------------------------- */

/* The help column is the widest option's plus two, within these bounds: a
 * longer option ("--frequency-penalty F") puts its help on the next line. */
enum { HELP_COL_MIN = 16, HELP_COL_MAX = 30, HELP_WIDTH = 80 };

static const struct cli_opt help_opt = {.name = "--help", .short_name = 'h', .kind = CLI_OPT_FLAG,
                                        .help = "print this help and exit"};

/* "  -m, --model FILE"; long-only options line up after the short ones. */
static int left_part(const struct cli_opt *o, char *buf, size_t cap) {
    const char *mv = o->kind == CLI_OPT_FLAG ? NULL : o->metavar;
    char names[96];
    if (o->short_name && o->name) snprintf(names, sizeof names, "-%c, %s", o->short_name, o->name);
    else if (o->short_name) snprintf(names, sizeof names, "-%c", o->short_name);
    else snprintf(names, sizeof names, "    %s", o->name);
    return snprintf(buf, cap, "  %s%s%s%s%s", names, o->alias ? ", " : "", o->alias ? o->alias : "", mv ? " " : "",
                    mv ? mv : "");
}

/* Print text word-wrapped from column col (the cursor is there) to
 * HELP_WIDTH, continuation lines indented to col. A word longer than a line
 * (a path) gets a line of its own. */
static void wrap(FILE *to, const char *text, int col) {
    int at = col;
    const char *p = text;
    while (*p) {
        while (*p == ' ') p++;
        size_t w = strcspn(p, " ");
        if (!w) break;
        if (at > col && at + 1 + (int)w > HELP_WIDTH) {
            fprintf(to, "\n%*s", col, "");
            at = col;
        } else if (at > col) {
            fputc(' ', to);
            at++;
        }
        fwrite(p, 1, w, to);
        at += (int)w;
        p += w;
    }
    fputc('\n', to);
}

static void help_row(FILE *to, const struct cli_opt *o, int col) {
    char left[128], text[1024];
    int n = left_part(o, left, sizeof left);
    if (n + 2 > col) fprintf(to, "%s\n%*s", left, col, "");
    else fprintf(to, "%-*s", col, left);
    snprintf(text, sizeof text, "%s%s%s%s%s", o->help, o->dflt ? " (default: " : "", o->dflt ? o->dflt : "",
             o->dflt ? ")" : "", o->repeat ? "; repeatable" : "");
    wrap(to, text, col);
}

void cli_opts_help(const struct cli_cmd *c, FILE *to) {
    char left[128];
    int col = left_part(&help_opt, left, sizeof left) + 2;
    for (size_t s = 0; s < c->n_sections; s++)
        for (size_t i = 0; i < c->sections[s].n; i++) {
            int n = left_part(&c->sections[s].rows[i], left, sizeof left) + 2;
            if (n > col && n <= HELP_COL_MAX) col = n;
        }
    if (col < HELP_COL_MIN) col = HELP_COL_MIN;
    fputs(c->usage, to);
    for (size_t s = 0; s < c->n_sections; s++) {
        const struct cli_opt_section *sec = &c->sections[s];
        fprintf(to, "\n%s\n", sec->title ? sec->title : "options:");
        for (size_t i = 0; i < sec->n; i++) help_row(to, &sec->rows[i], col);
        if (s == 0) help_row(to, &help_opt, col);
    }
    if (c->epilog) fprintf(to, "\n%s", c->epilog);
}
