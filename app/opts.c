/* The option-table parser and help printer (app/opts.h). */
#include "opts.h"

#include <stdint.h>
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

/* ---- did you mean ------------------------------------------------------------
 * An unknown option is compared with every name of the command's table; the
 * nearest is suggested when it is a plausible typo: at most 1 edit for a name
 * of up to 5 characters, 2 for a longer one, or a known name of 4+ characters
 * that the unknown one starts with or abbreviates (--temperature, --temp). */
enum { SUGGEST_MAX = 64 };

/* Levenshtein distance of two names of at most SUGGEST_MAX characters. */
static size_t edit_distance(const char *a, size_t la, const char *b, size_t lb) {
    size_t row[SUGGEST_MAX + 1];
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[lb];
}

/* Twice the distance (a prefix relation counts as one and a half edits), or SIZE_MAX
 * when known is no plausible reading of the unknown name u. */
static size_t suggest_score(const char *u, size_t lu, const char *known) {
    size_t lk = known ? strlen(known) : 0;
    if (lk < 2 || lk > SUGGEST_MAX) return SIZE_MAX;
    size_t shorter = lu < lk ? lu : lk, limit = lu <= 5 ? 1 : 2;
    if (shorter >= 4 && !strncmp(u, known, shorter)) return 3;
    size_t d = edit_distance(u, lu, known, lk);
    return d <= limit ? 2 * d : SIZE_MAX;
}

/* The known name nearest to u[0 .. lu), or NULL. Names of under four
 * characters ("-Z", "-t4") get no suggestion: every short option is near. */
static const char *suggest(const struct cli_cmd *c, const char *u, size_t lu) {
    if (lu < 4 || lu > SUGGEST_MAX) return NULL;
    static const char *const common[] = {"--help", "--version"};
    const char *best = NULL;
    size_t best_score = SIZE_MAX;
    for (size_t k = 0; k < CLI_LEN(common); k++) {
        size_t sc = suggest_score(u, lu, common[k]);
        if (sc < best_score) best = common[k], best_score = sc;
    }
    for (size_t s = 0; s < c->n_sections; s++)
        for (size_t i = 0; i < c->sections[s].n; i++) {
            const struct cli_opt *o = &c->sections[s].rows[i];
            const char *names[] = {o->name, o->alias};
            for (size_t k = 0; k < 2; k++) {
                size_t sc = suggest_score(u, lu, names[k]);
                if (sc < best_score) best = names[k], best_score = sc;
            }
        }
    return best;
}

static int unknown_option(const struct cli_cmd *c, const char *a, size_t len) {
    const char *near = suggest(c, a, len);
    if (near) return cli_usage_error(c->name, "unknown option '%.*s'; did you mean '%s'?", (int)len, a, near);
    return cli_usage_error(c->name, "unknown option '%.*s'", (int)len, a);
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
        bool help = (len == 2 && a[1] == 'h') || same_name("--help", a, len);
        if (help || same_name("--version", a, len)) {
            if (eq) return cli_usage_error(c->name, "%s takes no value (got '%s')", flag, a);
            if (help) cli_opts_help(c, stdout);
            else printf("llmk %s\n", LLMK_VERSION);
            return CLI_EXIT_OK;
        }
        /* a single-dash name longer than one letter (llama-server's -np) is a row's whole name */
        const struct cli_opt *o = is_long || len > 2 ? find_row(c, a, len, 0) : find_row(c, NULL, 0, a[1]);
        if (!o) return unknown_option(c, a, len);
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

bool cli_opts_takes_value(const struct cli_cmd *c, const char *a) {
    if (a[0] != '-' || a[1] == '\0' || strchr(a, '=')) return false;
    size_t len = strlen(a);
    const struct cli_opt *o = a[1] == '-' || len > 2 ? find_row(c, a, len, 0) : find_row(c, NULL, 0, a[1]);
    return o && o->kind != CLI_OPT_FLAG;
}

/* ---- help ------------------------------------------------------------------- */

/* The help column is the widest option's plus two, within these bounds: a
 * longer option ("--frequency-penalty F") puts its help on the next line. */
enum { HELP_COL_MIN = 16, HELP_COL_MAX = 30, HELP_WIDTH = 80 };

static const struct cli_opt help_opt = {.name = "--help", .short_name = 'h', .kind = CLI_OPT_FLAG,
                                        .help = "print this help and exit"};
static const struct cli_opt version_opt = {.name = "--version", .kind = CLI_OPT_FLAG,
                                           .help = "print llmk's version and exit"};

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
        if (s == 0) {
            help_row(to, &help_opt, col);
            help_row(to, &version_opt, col);
        }
    }
    if (c->epilog) fprintf(to, "\n%s", c->epilog);
}
