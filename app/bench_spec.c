/* llmk bench --spec (app/bench_spec.h): the same greedy generation timed
 * plainly and speculatively on one session, repetitions alternating so
 * that both see the same machine. The prompt is formatted with the model's
 * chat template (as llmk run does) unless --raw. */
#include "bench_spec.h"

#include "cli.h"
#include "gen_opts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int bench_spec_add_file(const char *cmd, const char *flag, const char *value, void *ctx) {
    struct bench_spec_opts *o = ctx;
    if (o->n_files == BENCH_SPEC_MAX_FILES)
        return cli_usage_error(cmd, "%s: at most %d prompt files", flag, BENCH_SPEC_MAX_FILES), 0;
    o->files[o->n_files++] = value;
    return 1;
}

/* One prompt's measurement. */
struct gen_run {
    llmk_session *s;
    const llmk_tokenizer *tok;
    size_t V;
    long n_gen;
    int32_t *hist; /* prompt, then generated */
    size_t n_prompt, n;
    float *logits;
};

static int greedy(const float *logits, size_t V, int32_t *id) {
    size_t best = 0;
    for (size_t i = 1; i < V; i++)
        if (logits[i] > logits[best]) best = i;
    if (logits[best] != logits[best]) return LLMK_NAN_INPUT;
    *id = (int32_t)best;
    return LLMK_OK;
}

/* the chooser: greedy, ending at the end of the turn or n_gen */
static int choose(void *user, const float *logits, int32_t *token, bool *end) {
    struct gen_run *g = user;
    int st = greedy(logits, g->V, token);
    if (st != LLMK_OK) return st;
    g->hist[g->n++] = *token;
    *end = llmk_tokenizer_is_eog(g->tok, *token) || (long)(g->n - g->n_prompt) >= g->n_gen;
    return LLMK_OK;
}

/* Prefill (untimed), then generate; *secs: the generation's time. */
static int run_once(struct gen_run *g, llmk_spec *spec, double *secs) {
    int st = llmk_session_truncate(g->s, 0);
    if (st == LLMK_OK) st = llmk_session_eval(g->s, g->hist, g->n_prompt, g->logits, g->V, false);
    if (st == LLMK_OK && spec) st = llmk_spec_prefill(spec, g->hist, g->n_prompt); /* untimed, as the prefill */
    if (st != LLMK_OK) return st;
    g->n = g->n_prompt;
    double t = now_s();
    int32_t id;
    bool end = false;
    st = choose(g, g->logits, &id, &end);
    while (st == LLMK_OK && !end) {
        if (spec) {
            size_t n_out = 0;
            int32_t out[65];
            st = llmk_session_spec_step(g->s, spec, g->hist, g->n, choose, g, out, CLI_LEN(out), &n_out, &end);
        } else if ((st = llmk_session_eval(g->s, &g->hist[g->n - 1], 1, g->logits, g->V, false)) == LLMK_OK) {
            st = choose(g, g->logits, &id, &end);
        }
    }
    *secs = now_s() - t;
    return st;
}

static int prompt_tokens(const llmk_model *m, const struct bench_spec_opts *o, const char *file, int32_t **ids,
                         size_t *n) {
    char *text = NULL, *formatted = NULL;
    size_t len = 0;
    const llmk_tokenizer *tok;
    int st = llmk_model_tokenizer(m, &tok);
    if (st == LLMK_OK) st = cli_read_file(file, &text, &len);
    bool add_bos = llmk_tokenizer_add_bos(tok);
    if (st == LLMK_OK && !o->raw) {
        struct gen_opts go;
        gen_opts_default(&go, 0);
        st = gen_chat_prompt(llmk_model_gguf(m), tok, &go, text, &formatted, &add_bos);
        if (st == LLMK_TEMPLATE_UNKNOWN || st == LLMK_NOT_FOUND) st = LLMK_OK; /* no template: the raw text */
    }
    const char *use = formatted ? formatted : text;
    size_t cap = (use ? strlen(use) : 0) + 8;
    if (st == LLMK_OK && !(*ids = malloc(cap * sizeof **ids))) st = cli_fail(LLMK_OUT_OF_MEMORY, "prompt ids");
    if (st == LLMK_OK) st = llmk_tokenize(tok, use, strlen(use), add_bos, !!formatted, *ids, cap, n);
    free(text), free(formatted);
    return st;
}

struct spec_row {
    const char *file;
    size_t n_prompt, n_gen;
    double plain_ts, spec_ts;
    double speedup;  /* the median of the repetitions' (bench_prompt) */
    double *ratios;  /* each repetition's spec / plain, in order */
    size_t n_ratios;
    llmk_spec_stats st; /* the last speculative repetition's */
    bool same;
};

static void print_row(const struct bench_spec_opts *o, const char *mode, const struct spec_row *r, bool first) {
    const char *name = strrchr(r->file, '/') ? strrchr(r->file, '/') + 1 : r->file;
    double acc = r->st.n_drafted ? (double)r->st.n_accepted / (double)r->st.n_drafted : 0.0;
    double per_step = r->st.n_steps ? (double)r->st.n_tokens / (double)r->st.n_steps : 0.0;
    if (o->json) {
        printf("{\"prompt\": \"%s\", \"spec\": \"%s\", \"n_prompt\": %zu, \"n_gen\": %zu, \"plain_ts\": %.3f, "
               "\"spec_ts\": %.3f, \"speedup\": %.4f, \"drafted\": %lld, \"accepted\": %lld, \"accept_rate\": %.4f, "
               "\"tokens_per_step\": %.3f, \"predicted_speedup\": %.4f, \"identical\": %s, \"speedup_reps\": [",
               name, mode, r->n_prompt, r->n_gen, r->plain_ts, r->spec_ts, r->speedup, (long long)r->st.n_drafted,
               (long long)r->st.n_accepted, acc, per_step, r->st.speedup, r->same ? "true" : "false");
        for (size_t i = 0; i < r->n_ratios; i++) printf("%s%.4f", i ? ", " : "", r->ratios[i]);
        printf("]}\n");
        return;
    }
    if (first) {
        printf("| %-24s | %-5s | %6s | %6s | %9s | %9s | %7s | %8s | %8s | %9s |\n", "prompt", "spec", "n_pp", "n_tg",
               "plain t/s", "spec t/s", "speedup", "accepted", "tok/step", "identical");
        printf("|%s|\n", "--------------------------|-------|--------|--------|-----------|-----------|---------|"
                         "----------|----------|-----------");
    }
    printf("| %-24.24s | %-5s | %6zu | %6zu | %9.2f | %9.2f | %6.2fx | %7.1f%% | %8.2f | %9s |\n", name, mode,
           r->n_prompt, r->n_gen, r->plain_ts, r->spec_ts, r->speedup, 100.0 * acc, per_step,
           r->same ? "yes" : "NO");
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Plain and speculative runs of one prompt, alternating; speeds are the
 * mean of reps, the speedup the median of each repetition's spec / plain
 * (its two runs back to back: this host's speed drifts by a third within
 * minutes, and a ratio of means mixes that drift into the speedup). */
static int bench_prompt(const llmk_model *m, const struct bench_spec_opts *o, struct gen_run *g, int32_t *plain,
                        struct spec_row *row) {
    int st = LLMK_OK;
    double tp = 0, ts = 0, plain_rep = 0;
    size_t n = 0; /* repetitions done */
    double *ratio = calloc((size_t)o->reps, sizeof *ratio), *sorted = calloc((size_t)o->reps, sizeof *sorted);
    if (!ratio || !sorted) {
        free(ratio), free(sorted);
        return cli_fail(LLMK_OUT_OF_MEMORY, "bench buffers");
    }
    for (long rep = -1; rep < o->reps && st == LLMK_OK; rep++) { /* rep -1 warms up */
        double secs;
        if ((st = run_once(g, NULL, &secs)) != LLMK_OK) break;
        size_t n_plain = g->n - g->n_prompt;
        memcpy(plain, g->hist + g->n_prompt, n_plain * sizeof *plain);
        plain_rep = (double)n_plain / secs;
        if (rep >= 0) tp += plain_rep;
        llmk_spec *spec = NULL;
        if ((st = llmk_spec_init(m, &o->so->p, &spec)) != LLMK_OK) break;
        st = run_once(g, spec, &secs);
        if (st == LLMK_OK) llmk_spec_stats_get(spec, &row->st);
        llmk_spec_free(spec);
        if (st != LLMK_OK) break;
        row->n_gen = g->n - g->n_prompt;
        row->same = row->n_gen == n_plain && !memcmp(plain, g->hist + g->n_prompt, n_plain * sizeof *plain);
        if (!row->same) break;
        if (rep >= 0) ts += (double)row->n_gen / secs, ratio[n++] = (double)row->n_gen / secs / plain_rep;
    }
    row->plain_ts = tp / (double)o->reps, row->spec_ts = ts / (double)o->reps;
    if (n) {
        memcpy(sorted, ratio, n * sizeof *ratio);
        qsort(sorted, n, sizeof *sorted, cmp_double);
        row->speedup = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    }
    free(row->ratios), free(sorted);
    row->ratios = ratio, row->n_ratios = n; /* the caller's row owns them */
    return st;
}

int bench_spec(const llmk_model *m, const char *model_path, const struct bench_spec_opts *o) {
    static const char *const modes[] = {"none", "ngram", "draft"};
    llmk_model *draft = NULL;
    struct gen_run g = {.V = (size_t)llmk_model_hparams(m)->n_vocab, .n_gen = o->n_gen};
    int32_t *plain = malloc((size_t)o->n_gen * sizeof *plain + 4);
    g.logits = malloc(g.V * sizeof *g.logits);
    int st = plain && g.logits ? llmk_model_tokenizer(m, &g.tok) : cli_fail(LLMK_OUT_OF_MEMORY, "bench buffers");
    if (st == LLMK_OK && o->so->draft_path && (st = llmk_model_load(o->so->draft_path, &draft)) == LLMK_OK) {
        o->so->p.draft_model = draft;
        o->so->p.draft_threads = (int32_t)o->threads;
    }
    bool all_same = true;
    for (int f = 0; f < o->n_files && st == LLMK_OK; f++) {
        struct spec_row row = {.file = o->files[f]};
        int32_t *ids = NULL;
        if ((st = prompt_tokens(m, o, o->files[f], &ids, &g.n_prompt)) != LLMK_OK) break;
        row.n_prompt = g.n_prompt;
        g.hist = realloc(ids, (g.n_prompt + (size_t)o->n_gen + 1) * sizeof *ids);
        if (!g.hist) {
            free(ids);
            st = cli_fail(LLMK_OUT_OF_MEMORY, "bench: history");
            break;
        }
        llmk_session_params sp = {.n_ctx = (int32_t)(g.n_prompt + (size_t)o->n_gen + 1),
                                  .n_threads = (int32_t)o->threads, .path = LLMK_PATH_FAST, .kv_type = o->kv_type};
        if ((st = llmk_session_init(m, &sp, &g.s)) == LLMK_OK) st = bench_prompt(m, o, &g, plain, &row);
        llmk_session_free(g.s);
        free(g.hist);
        g.s = NULL, g.hist = NULL;
        if (st == LLMK_OK) {
            print_row(o, modes[o->so->p.mode], &row, f == 0);
            all_same &= row.same;
        }
        free(row.ratios);
    }
    (void)model_path;
    free(plain), free(g.logits);
    llmk_model_free(draft);
    if (st == LLMK_OK && !all_same)
        st = cli_fail(LLMK_UNSUPPORTED, "speculative tokens differ from plain decoding's (a bug: please report it)");
    return st;
}
