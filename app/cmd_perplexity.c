/* llmk perplexity: perplexity of a model over a text, and the KL-divergence of
 * its next-token distributions against a saved base run (how users compare
 * quantizations of one model). What is scored, the file format and the
 * statistics are in docs/quality.md; the usage text repeats the essentials. */
#include "cli.h"
#include "opts.h"
#include "progress.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const CMD = "perplexity";

static const char USAGE[] =
    "usage: llmk perplexity [-m MODEL] -f TEXT [--ctx N] [--chunks K] [-t T] [--path P] [--kv-type T]\n"
    "                       [--save-logits FILE] [--kl-base FILE]\n"
    "\n"
    "Tokenizes TEXT (with BOS when the tokenizer asks for one), cuts the ids into\n"
    "non-overlapping windows of N tokens and evaluates each window from an empty\n"
    "context (when the tokenizer adds BOS, each window's first id is BOS, as in\n"
    "llama.cpp). In a window w[0..N-1], the logits at positions N/2 .. N-2 are\n"
    "scored against the next ids w[N/2+1 .. N-1]: the first half is context only,\n"
    "so every scored token sees at least N/2 tokens. Prints PPL = exp(mean NLL)\n"
    "with its standard error (from the NLL's standard error). On a terminal a\n"
    "progress line on stderr shows the window, the PPL so far and the time left.\n";

/* ---- the log-prob file -------------------------------------------------------
 * Little-endian. Header (32 bytes): magic "LLMKLOGP", u32 version (1), u32
 * n_vocab, u32 n_ctx, u32 n_chunks, u32 first (= n_ctx / 2), u32 n_positions
 * (= n_chunks * (n_ctx - 1 - first)). Then i32 ids[n_chunks * n_ctx]: the ids
 * each window evaluated. Then f32 logp[n_positions][n_vocab]: the
 * log-softmax of the logits at each scored position, window by window. */
#define LOGP_MAGIC "LLMKLOGP"
enum { LOGP_VERSION = 1, LOGP_HEADER = 32 };
/* The shortest window: N/2 tokens of context, then at least one scored
 * position; --ctx and the log-prob file's header are held to it. */
enum { MIN_WINDOW = 4 };

struct logp_header {
    uint32_t n_vocab, n_ctx, n_chunks, first, n_positions;
};

static void put_u32(unsigned char *b, uint32_t v) {
    for (int i = 0; i < 4; i++) b[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get_u32(const unsigned char *b) {
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

/* Write n 32-bit values (floats or ints) little-endian. */
static int write_le32(FILE *f, const void *v, size_t n) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    const unsigned char *p = v;
    for (size_t i = 0; i < n; i++) {
        unsigned char r[4] = {p[4 * i + 3], p[4 * i + 2], p[4 * i + 1], p[4 * i]};
        if (fwrite(r, 1, 4, f) != 4) return 0;
    }
    return 1;
#else
    return fwrite(v, 4, n, f) == n;
#endif
}

/* Read n 32-bit values little-endian into v. */
static int read_le32(FILE *f, void *v, size_t n) {
    if (fread(v, 4, n, f) != n) return 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    unsigned char *p = v;
    for (size_t i = 0; i < n; i++) {
        unsigned char t0 = p[4 * i], t1 = p[4 * i + 1];
        p[4 * i] = p[4 * i + 3];
        p[4 * i + 1] = p[4 * i + 2];
        p[4 * i + 2] = t1;
        p[4 * i + 3] = t0;
    }
#endif
    return 1;
}

/* Bytes a file with this header must have; LLMK_COUNT_TOO_LARGE on overflow. */
static int logp_file_bytes(const struct logp_header *h, uint64_t *bytes) {
    uint64_t ids, lp, t;
    if (!cli_mul_u64(h->n_chunks, h->n_ctx, &ids) || !cli_mul_u64(ids, 4, &ids) ||
        !cli_mul_u64(h->n_positions, h->n_vocab, &lp) || !cli_mul_u64(lp, 4, &lp) ||
        !cli_add_u64(LOGP_HEADER, ids, &t) || !cli_add_u64(t, lp, bytes))
        return cli_fail(LLMK_COUNT_TOO_LARGE, "log-prob file header: %u windows of %u tokens, %u positions x %u "
                         "vocabulary overflow a 64-bit size", h->n_chunks, h->n_ctx, h->n_positions, h->n_vocab);
    return LLMK_OK;
}

/* Open a base file and check its header against itself and the file size. */
static int logp_open(const char *path, FILE **out, struct logp_header *h) {
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) /* before open(): a FIFO would block it */
        return cli_fail(LLMK_IO_ERROR, "base file %s is not a regular file", path);
    FILE *f = fopen(path, "rb");
    if (!f) return cli_fail(LLMK_IO_ERROR, "cannot open base file %s: %s", path, strerror(errno));
    unsigned char b[LOGP_HEADER];
    int st = LLMK_OK;
    if (fstat(fileno(f), &sb) != 0) {
        st = cli_fail(LLMK_IO_ERROR, "base file %s: %s", path, strerror(errno));
    } else if (!S_ISREG(sb.st_mode)) {
        st = cli_fail(LLMK_IO_ERROR, "base file %s is not a regular file", path);
    } else if (fread(b, 1, sizeof b, f) != sizeof b) {
        st = cli_fail(LLMK_TRUNCATED_FILE, "base file %s: %lld bytes, shorter than the %d-byte header", path,
                       (long long)sb.st_size, LOGP_HEADER);
    } else if (memcmp(b, LOGP_MAGIC, 8) != 0) {
        st = cli_fail(LLMK_BAD_MAGIC, "base file %s does not start with \"" LOGP_MAGIC
                       "\" (not written by llmk perplexity --save-logits)", path);
    } else if (get_u32(b + 8) != LOGP_VERSION) {
        st = cli_fail(LLMK_BAD_VERSION, "base file %s: version %u, this llmk reads version %d", path,
                       get_u32(b + 8), LOGP_VERSION);
    } else {
        h->n_vocab = get_u32(b + 12);
        h->n_ctx = get_u32(b + 16);
        h->n_chunks = get_u32(b + 20);
        h->first = get_u32(b + 24);
        h->n_positions = get_u32(b + 28);
        uint64_t want = 0;
        if (h->n_vocab < 1 || h->n_ctx < MIN_WINDOW || h->n_ctx > CLI_CTX_MAX || h->n_chunks < 1 ||
            h->first != h->n_ctx / 2 ||
            (uint64_t)h->n_positions != (uint64_t)h->n_chunks * (h->n_ctx - 1 - h->first))
            st = cli_fail(LLMK_BAD_REQUEST, "base file %s: inconsistent header (n_vocab %u, n_ctx %u, %u windows, "
                           "first scored %u, %u positions)", path, h->n_vocab, h->n_ctx, h->n_chunks,
                           h->first, h->n_positions);
        else if ((st = logp_file_bytes(h, &want)) != LLMK_OK)
            ;
        else if ((uint64_t)sb.st_size < want)
            st = cli_fail(LLMK_TRUNCATED_FILE, "base file %s: %lld bytes, its header implies %llu", path,
                           (long long)sb.st_size, (unsigned long long)want);
        else if ((uint64_t)sb.st_size > want)
            st = cli_fail(LLMK_BAD_REQUEST, "base file %s: %lld bytes, its header implies %llu (trailing data)",
                           path, (long long)sb.st_size, (unsigned long long)want);
    }
    if (st != LLMK_OK) {
        fclose(f);
        return st;
    }
    *out = f;
    return LLMK_OK;
}

/* ---- statistics ------------------------------------------------------------- */

/* Sum and sum of squares of a sample, in a fixed (position) order. */
struct acc {
    double s, s2;
    uint64_t n;
};
static void acc_add(struct acc *a, double x) {
    a->s += x;
    a->s2 += x * x;
    a->n++;
}
static double acc_mean(const struct acc *a) { return a->n ? a->s / (double)a->n : NAN; }
/* Standard error of the mean: sample standard deviation / sqrt(n); NaN for n < 2. */
static double acc_se(const struct acc *a) {
    if (a->n < 2) return NAN;
    double m = acc_mean(a), var = (a->s2 / (double)a->n - m * m) * (double)a->n / (double)(a->n - 1);
    return sqrt(var > 0 ? var / (double)a->n : 0);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
/* Value at quantile q of a sorted sample (nearest rank). */
static double quantile(const double *v, size_t n, double q) {
    size_t k = (size_t)ceil(q * (double)n);
    return v[k ? k - 1 : 0];
}

/* In place: logits -> log-softmax rounded to f32. The sum runs in double in id
 * order; the rounding makes a saved row and a recomputed one identical. */
static int log_softmax_row(float *row, size_t V, size_t pos) {
    double mx = -INFINITY;
    for (size_t i = 0; i < V; i++) {
        if (isnan(row[i]))
            return cli_fail(LLMK_NAN_INPUT, "logit of id %zu at scored position %zu is NaN", i, pos);
        if (row[i] > mx) mx = row[i];
    }
    if (!isfinite(mx)) return cli_fail(LLMK_NAN_INPUT, "scored position %zu has a maximum logit of %g", pos, mx);
    double sum = 0;
    for (size_t i = 0; i < V; i++) sum += exp((double)row[i] - mx);
    double lse = mx + log(sum);
    for (size_t i = 0; i < V; i++) row[i] = (float)((double)row[i] - lse);
    return LLMK_OK;
}

static size_t argmax_row(const float *row, size_t V) {
    size_t best = 0;
    for (size_t i = 1; i < V; i++)
        if (row[i] > row[best]) best = i;
    return best;
}

/* ---- the command ------------------------------------------------------------- */

struct opts {
    const char *model, *text, *save, *base;
    long ctx, chunks, threads;
    int path;
    uint32_t kv_type;
    bool long_ctx, ctx_given, chunks_given;
    bool quiet, verbose; /* --log-disable, -v */
    struct cli_progress_flags pf;
};


static int tokenize_text(const llmk_model *m, const char *path, int32_t **ids, size_t *n, bool *bos) {
    const llmk_tokenizer *tok;
    int st = llmk_model_tokenizer(m, &tok);
    if (st != LLMK_OK) return st;
    char *text;
    size_t len;
    if ((st = cli_read_file(path, &text, &len)) != LLMK_OK) return st;
    *bos = llmk_tokenizer_add_bos(tok) && llmk_tokenizer_bos(tok) >= 0;
    size_t need = 0;
    st = llmk_tokenize(tok, text, len, *bos, false, NULL, 0, &need);
    if (st == LLMK_BUFFER_TOO_SMALL || st == LLMK_OK) {
        *ids = malloc((need ? need : 1) * sizeof **ids);
        if (!*ids) st = cli_fail(LLMK_OUT_OF_MEMORY, "%zu token ids", need);
        else st = llmk_tokenize(tok, text, len, *bos, false, *ids, need, n);
        if (st != LLMK_OK) {
            free(*ids);
            *ids = NULL;
        }
    }
    if (st != LLMK_OK && *llmk_last_error() == '\0') st = cli_fail(st, "tokenizing %s", path);
    free(text);
    return st;
}

struct run {
    const struct opts *o;
    llmk_model *m;
    llmk_session *s;
    int32_t *toks, *win;
    size_t n_toks, V, n_chunks, ctx, first, per_chunk;
    int32_t bos_id;
    bool bos;
    float *lp, *blp;
    double *kls;
    FILE *save, *base;
    struct logp_header bh;
    double *chunk_ppl; /* [n_chunks]: the running PPL after each window */
    size_t n_done;     /* windows evaluated */
    size_t n_printed;  /* of them, printed as "[k] PPL" */
    bool defer;        /* stdout shares the terminal with the progress line: print the values at the end */
    struct cli_progress prog;
};

/* Checks a base file against this run before any evaluation: vocabulary,
 * window length, count and the exact ids. Sets ctx/chunks from it when the
 * user gave none. */
static int check_base(struct run *r) {
    const struct opts *o = r->o;
    int st = logp_open(o->base, &r->base, &r->bh);
    if (st != LLMK_OK) return st;
    const struct logp_header *h = &r->bh;
    if (h->n_vocab != r->V)
        return cli_fail(LLMK_BAD_REQUEST, "base file %s has a vocabulary of %u, the model %zu", o->base, h->n_vocab,
                         r->V);
    if (o->ctx_given && (size_t)o->ctx != h->n_ctx)
        return cli_fail(LLMK_BAD_REQUEST, "base file %s used --ctx %u, this run --ctx %ld", o->base, h->n_ctx,
                         o->ctx);
    r->ctx = h->n_ctx;
    size_t avail = r->n_toks / r->ctx;
    if (o->chunks_given) {
        if ((size_t)o->chunks > h->n_chunks)
            return cli_fail(LLMK_BAD_REQUEST, "base file %s holds %u windows, --chunks asks for %ld", o->base,
                             h->n_chunks, o->chunks);
        r->n_chunks = (size_t)o->chunks;
    } else {
        r->n_chunks = h->n_chunks;
    }
    if (r->n_chunks > avail)
        return cli_fail(LLMK_BAD_REQUEST, "base file %s holds %u windows of %u tokens; the text has %zu tokens, "
                         "enough for %zu (another text?)", o->base, h->n_chunks, h->n_ctx, r->n_toks, avail);
    /* The ids the base evaluated must be the ones this run will evaluate. */
    size_t nb = (size_t)h->n_chunks * h->n_ctx;
    int32_t *bid = malloc(nb * sizeof *bid);
    if (!bid) return cli_fail(LLMK_OUT_OF_MEMORY, "%zu base ids", nb);
    if (!read_le32(r->base, bid, nb)) {
        free(bid);
        return cli_fail(LLMK_IO_ERROR, "reading the ids of base file %s: %s", o->base, strerror(errno));
    }
    for (size_t c = 0; c < r->n_chunks && st == LLMK_OK; c++)
        for (size_t j = 0; j < r->ctx; j++) {
            int32_t mine = (j == 0 && r->bos) ? r->bos_id : r->toks[c * r->ctx + j];
            if (bid[c * r->ctx + j] != mine) {
                st = cli_fail(LLMK_BAD_REQUEST, "base file %s was computed on other tokens: window %zu position %zu "
                               "holds id %d there, %d here (another text or tokenizer?)", o->base, c + 1, j,
                               bid[c * r->ctx + j], mine);
                break;
            }
        }
    free(bid);
    return st;
}

static int write_header(struct run *r) {
    unsigned char b[LOGP_HEADER];
    memcpy(b, LOGP_MAGIC, 8);
    put_u32(b + 8, LOGP_VERSION);
    put_u32(b + 12, (uint32_t)r->V);
    put_u32(b + 16, (uint32_t)r->ctx);
    put_u32(b + 20, (uint32_t)r->n_chunks);
    put_u32(b + 24, (uint32_t)r->first);
    put_u32(b + 28, (uint32_t)(r->n_chunks * r->per_chunk));
    if (fwrite(b, 1, sizeof b, r->save) != sizeof b) return 0;
    for (size_t c = 0; c < r->n_chunks; c++) {
        /* the ids as evaluated (BOS in front when the tokenizer adds one) */
        int32_t first_id = (r->bos) ? r->bos_id : r->toks[c * r->ctx];
        if (!write_le32(r->save, &first_id, 1) || !write_le32(r->save, r->toks + c * r->ctx + 1, r->ctx - 1))
            return 0;
    }
    return 1;
}

enum { BATCH = 64 }; /* scored rows per eval: bounds the logits buffer */

/* "[k] PPL" for the windows done and not yet printed, on one line that ends
 * with the last window (not with --log-disable). */
static void print_chunks(struct run *r) {
    if (r->o->quiet) return;
    for (; r->n_printed < r->n_done; r->n_printed++)
        printf("[%zu] %.4f%s", r->n_printed + 1, r->chunk_ppl[r->n_printed],
               r->n_printed + 1 == r->n_chunks ? "\n" : " ");
    fflush(stdout);
}

static int evaluate(struct run *r, struct acc *nll, struct acc *base_nll, struct acc *dnll, struct acc *kl,
                    uint64_t *agree) {
    const size_t V = r->V;
    size_t k = 0; /* scored positions so far */
    cli_progress_show(&r->prog, "window 0/%zu", r->n_chunks);
    for (size_t c = 0; c < r->n_chunks; c++) {
        int st = llmk_session_truncate(r->s, 0);
        if (st != LLMK_OK) return st;
        memcpy(r->win, r->toks + c * r->ctx, r->ctx * sizeof *r->win);
        if (r->bos) r->win[0] = r->bos_id;
        /* context half: no LM head */
        if ((st = llmk_session_eval(r->s, r->win, r->first, NULL, 0, false)) != LLMK_OK) return st;
        for (size_t off = r->first; off < r->ctx - 1; off += BATCH) {
            size_t n = r->ctx - 1 - off < BATCH ? r->ctx - 1 - off : BATCH;
            if ((st = llmk_session_eval(r->s, r->win + off, n, r->lp, BATCH * V, true)) != LLMK_OK) return st;
            if (r->base && !read_le32(r->base, r->blp, n * V))
                return cli_fail(LLMK_IO_ERROR, "reading base file %s: %s", r->o->base,
                                 feof(r->base) ? "unexpected end" : strerror(errno));
            for (size_t i = 0; i < n; i++, k++) {
                float *row = r->lp + i * V;
                if ((st = log_softmax_row(row, V, off + i)) != LLMK_OK) return st;
                size_t target = (size_t)r->win[off + i + 1];
                double x = -(double)row[target];
                acc_add(nll, x);
                if (!r->base) continue;
                const float *b = r->blp + i * V;
                double d = 0;
                for (size_t v = 0; v < V; v++) {
                    if (!isfinite(b[v]))
                        return cli_fail(LLMK_BAD_REQUEST, "base file %s: log-prob of id %zu at scored position %zu "
                                         "is %g", r->o->base, v, k, (double)b[v]);
                    d += exp((double)b[v]) * ((double)b[v] - (double)row[v]);
                }
                double bx = -(double)b[target];
                acc_add(base_nll, bx);
                acc_add(dnll, x - bx);
                acc_add(kl, d);
                r->kls[k] = d;
                *agree += argmax_row(b, V) == argmax_row(row, V);
            }
            if (r->save && !write_le32(r->save, r->lp, n * V))
                return cli_fail(LLMK_IO_ERROR, "writing %s: %s", r->o->save, strerror(errno));
        }
        r->chunk_ppl[c] = exp(acc_mean(nll));
        r->n_done = c + 1;
        if (!r->defer) print_chunks(r);
        char eta[48];
        cli_progress_eta(&r->prog, (double)(c + 1) / (double)r->n_chunks, eta, sizeof eta);
        cli_progress_show(&r->prog, "window %zu/%zu, PPL %.4f%s", c + 1, r->n_chunks, r->chunk_ppl[c], eta);
    }
    cli_progress_clear(&r->prog);
    return LLMK_OK;
}

/* Parses and checks the options, then fills in the defaults; CLI_OPTS_GO,
 * or the exit code. */
static int parse_args(struct opts *o, int argc, char **argv) {
    const struct cli_opt table[] = {
        CLI_OPT_MODEL(&o->model),
        CLI_STR("--file", 'f', &o->text, "TEXT", "the text file (UTF-8)"),
        CLI_OPT_CTX(&o->ctx, "window length in tokens, >= 4 (default 512; with --kl-base, the base's)"),
        CLI_LONG("--chunks", 0, &o->chunks, 1, 1 << 30, "K",
                 "evaluate only the first K windows (default all; with --kl-base, the base's)"),
        CLI_OPT_LONG_CTX(&o->long_ctx),
        CLI_OPT_THREADS(&o->threads),
        CLI_OPT_PATH(&o->path),
        CLI_OPT_KV_TYPE(&o->kv_type, CLI_KV_TYPE_HELP),
        CLI_OPT_LOG_DISABLE(&o->quiet, "only the results: no model, text and windows lines, no per-window "
                                        "values, no progress (errors still)"),
        CLI_OPT_VERBOSE(&o->verbose, "load and evaluation times, kernels and threads on stderr"),
        CLI_OPT_PROGRESS(&o->pf),
        CLI_STR("--save-logits", 0, &o->save, "FILE",
                "write the scored positions' log-probabilities (f32, full vocabulary) and the evaluated ids to FILE"),
        CLI_STR("--kl-base", 0, &o->base, "FILE",
                "compare with a file written by --save-logits from the same text and tokenizer: mean KL(base||this) "
                "with its standard error, median, 99th percentile, max; top-1 agreement; ln(PPL/PPL_base) from "
                "paired NLLs"),
    };
    const struct cli_opt_section sections[] = {{NULL, table, CLI_LEN(table)}};
    struct cli_cmd spec = {.name = CMD, .usage = USAGE, .sections = sections, .n_sections = CLI_LEN(sections)};
    int rc = cli_opts_parse(&spec, argc, argv);
    if (rc != CLI_OPTS_GO) return rc;
    /* still 0 (the rows' lower limits are 1): not given */
    o->ctx_given = o->ctx > 0;
    o->chunks_given = o->chunks > 0;
    if (o->ctx_given && o->ctx < MIN_WINDOW)
        return cli_usage_error(CMD, "--ctx %ld: a perplexity window needs at least %d tokens", o->ctx, MIN_WINDOW);
    if (!o->ctx_given) o->ctx = 512;
    if (!o->text) return cli_usage_error(CMD, "-f TEXT is required");
    if (!o->model) o->model = cli_default_model();
    o->kv_type = cli_kv_type_or_default(o->kv_type, o->path);
    if (o->quiet) o->verbose = false; /* --log-disable wins, as in every command */
    return CLI_OPTS_GO;
}

/* Load the model (its init drawing the load progress on a terminal),
 * tokenize the text, choose the windows and open the session. */
static int open_run(struct run *r, const struct opts *o) {
    struct cli_progress load;
    cli_progress_start(&load, CMD, cli_progress_wanted(&o->pf, o->quiet), 1.0);
    double t0 = cli_now();
    int st = llmk_model_load(o->model, &r->m);
    if (st != LLMK_OK) return st;
    double t1 = cli_now();
    r->V = (size_t)llmk_model_hparams(r->m)->n_vocab;
    if ((st = tokenize_text(r->m, o->text, &r->toks, &r->n_toks, &r->bos)) != LLMK_OK) return st;
    if (r->bos) {
        const llmk_tokenizer *tok;
        llmk_model_tokenizer(r->m, &tok);
        r->bos_id = llmk_tokenizer_bos(tok);
    }
    r->ctx = (size_t)o->ctx;
    if (o->base) {
        if ((st = check_base(r)) != LLMK_OK) return st;
    } else {
        size_t avail = r->n_toks / r->ctx;
        if (avail == 0)
            return cli_fail(LLMK_BAD_REQUEST, "text %s has %zu tokens, fewer than one window of --ctx %zu", o->text,
                            r->n_toks, r->ctx);
        r->n_chunks = o->chunks_given && (size_t)o->chunks < avail ? (size_t)o->chunks : avail;
    }
    r->first = r->ctx / 2;
    r->per_chunk = r->ctx - 1 - r->first;
    if (r->n_chunks * r->per_chunk > UINT32_MAX)
        return cli_fail(LLMK_COUNT_TOO_LARGE, "%zu windows of %zu scored positions exceed the file format's count",
                        r->n_chunks, r->per_chunk);
    if (o->long_ctx) cli_warn_long_ctx(CMD, r->m, (int64_t)r->ctx);
    llmk_session_params sp = {.n_ctx = (int32_t)r->ctx,
                              .n_threads = o->threads > 0 ? (int32_t)o->threads : llmk_cpu_count(),
                              .path = o->path, .kv_type = o->kv_type, .allow_long_ctx = o->long_ctx,
                              .progress_callback = cli_progress_load, .progress_callback_user_data = &load};
    double t2 = cli_now();
    st = llmk_session_init(r->m, &sp, &r->s);
    cli_progress_clear(&load);
    if (st != LLMK_OK) return st;
    if (o->verbose)
        cli_log_load(CMD, t1 - t0, cli_now() - t2, llmk_session_kernels(r->s), llmk_session_n_threads(r->s),
                     o->kv_type);
    r->win = malloc(r->ctx * sizeof *r->win);
    r->lp = malloc((size_t)BATCH * r->V * sizeof *r->lp);
    r->blp = o->base ? malloc((size_t)BATCH * r->V * sizeof *r->blp) : NULL;
    r->kls = o->base ? malloc(r->n_chunks * r->per_chunk * sizeof *r->kls) : NULL;
    r->chunk_ppl = malloc(r->n_chunks * sizeof *r->chunk_ppl);
    if (!r->win || !r->lp || !r->chunk_ppl || (o->base && (!r->blp || !r->kls)))
        return cli_fail(LLMK_OUT_OF_MEMORY, "buffers for %d scored rows of %zu log-probs", BATCH, r->V);
    return LLMK_OK;
}

static void print_results(struct run *r, const struct acc *nll, const struct acc *base_nll, const struct acc *dnll,
                          const struct acc *kl, uint64_t agree) {
    const struct opts *o = r->o;
    double mn = acc_mean(nll), se = acc_se(nll);
    printf("mean NLL = %.6f +/- %.6f\n", mn, se);
    printf("PPL = %.4f +/- %.4f\n", exp(mn), exp(mn) * se);
    if (!o->base) return;
    size_t n = (size_t)kl->n;
    double bm = acc_mean(base_nll);
    printf("base PPL = %.4f +/- %.4f (%s)\n", exp(bm), exp(bm) * acc_se(base_nll), o->base);
    /* %g: an exact 0 (a model against its own saved run) prints as 0 */
    printf("ln(PPL/base PPL) = %.6g +/- %.6g\n", acc_mean(dnll), acc_se(dnll));
    qsort(r->kls, n, sizeof *r->kls, cmp_double);
    printf("KL-divergence mean = %.6g +/- %.6g\n", acc_mean(kl), acc_se(kl));
    printf("KL-divergence median = %.6g, p99 = %.6g, max = %.6g\n", quantile(r->kls, n, 0.5),
           quantile(r->kls, n, 0.99), r->kls[n - 1]);
    double p = (double)agree / (double)n;
    printf("top-1 agreement = %.4f%% +/- %.4f%% (%llu of %zu)\n", 100 * p,
           n > 1 ? 100 * sqrt(p * (1 - p) / (double)(n - 1)) : NAN, (unsigned long long)agree, n);
}

int cmd_perplexity(int argc, char **argv) {
    struct opts o = {.path = LLMK_PATH_FAST, .kv_type = (uint32_t)CLI_KV_DEFAULT};
    int prc = parse_args(&o, argc, argv);
    if (prc != CLI_OPTS_GO) return prc;

    struct run r = {.o = &o};
    int rc = CLI_EXIT_OK, st;
    struct acc nll = {0}, base_nll = {0}, dnll = {0}, kl = {0};
    uint64_t agree = 0;
    const char *inputs[] = {o.model, o.text, o.base};
    llmk_outfile *save_of = NULL;
    if (o.save && (st = llmk_output_check(o.save, inputs, CLI_LEN(inputs))) != LLMK_OK) goto fail;
    if ((st = open_run(&r, &o)) != LLMK_OK) goto fail;
    if (o.save) {
        if ((st = cli_outfile_open(o.save, inputs, CLI_LEN(inputs), &save_of)) != LLMK_OK) goto fail;
        r.save = llmk_outfile_stream(save_of);
        if (!write_header(&r)) {
            st = cli_fail(LLMK_IO_ERROR, "writing %s: %s", o.save, strerror(errno));
            goto fail;
        }
    }
    if (!o.quiet) {
        printf("model:    %s\n", o.model);
        printf("text:     %s: %zu tokens%s\n", o.text, r.n_toks, r.bos ? " (BOS first)" : " (no BOS)");
        printf("windows:  %zu of %zu tokens (%zu in the text); per window, logits at positions %zu..%zu scored "
               "against the next id: %zu per window, %zu in all\n",
               r.n_chunks, r.ctx, r.n_toks / r.ctx, r.first, r.ctx - 2, r.per_chunk, r.n_chunks * r.per_chunk);
        fflush(stdout);
    }
    cli_progress_start(&r.prog, CMD, cli_progress_wanted(&o.pf, o.quiet), 0);
    /* a value line on the terminal would be overwritten by the progress line */
    r.defer = r.prog.on && isatty(STDOUT_FILENO);
    double t0 = cli_now();
    if ((st = evaluate(&r, &nll, &base_nll, &dnll, &kl, &agree)) != LLMK_OK) goto fail;
    print_chunks(&r);
    double el = cli_now() - t0;
    if (o.verbose)
        fprintf(stderr, "llmk perplexity: %zu windows of %zu tokens evaluated in %.2f s (%.1f tok/s)\n", r.n_chunks,
                r.ctx, el, (double)(r.n_chunks * r.ctx) / el);
    if (save_of) {
        st = cli_outfile_commit(save_of);
        save_of = NULL, r.save = NULL;
        if (st != LLMK_OK) goto fail;
    }
    print_results(&r, &nll, &base_nll, &dnll, &kl, agree);
    if (fflush(stdout) != 0) {
        st = cli_fail(LLMK_IO_ERROR, "writing stdout: %s", strerror(errno));
        goto fail;
    }
    goto done;
fail:
    cli_progress_clear(&r.prog);
    if (!o.quiet && r.n_printed < r.n_done) { /* the windows done before the failure, as without progress */
        print_chunks(&r);
        if (r.n_done < r.n_chunks) putchar('\n');
    }
    rc = cli_report(CMD, st);
    if (save_of) cli_outfile_discard(save_of); /* the temporary file only: never a partial output */
done:
    if (r.base) fclose(r.base);
    free(r.chunk_ppl);
    free(r.kls);
    free(r.blp);
    free(r.lp);
    free(r.win);
    free(r.toks);
    llmk_session_free(r.s);
    llmk_model_free(r.m);
    return rc;
}
