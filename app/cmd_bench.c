/* llmk bench: prompt processing (pp) and generation (tg) throughput in
 * llama-bench's form, plus the decode's effective weight bandwidth against
 * the machine's read bandwidth measured in the same run, and (--phases)
 * where the decode time goes, phase by phase. */
#include "bench_batched.h"
#include "bench_phases.h"
#include "bench_spec.h"
#include "gen_opts.h"
#include "cli.h"
#include "opts.h"
#include "progress.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char USAGE[] =
    "usage: llmk bench [-m MODEL] [-p N] [-n N] [-t T] [-r R] [--path ref|f32|fast] [--kv-type f32|f16|q8_0]\n"
    "                  [-b N] [-d N] [--json] [--phases]\n"
    "       llmk bench -B 1,4,16 [-m MODEL] [-p N] [-n N] [-t T] [-r R] [--kv-type T] [-b N] [--json]\n"
    "       llmk bench --spec ngram|draft -f PROMPT_FILE... [-md DRAFT] [-n N] [-t T] [-r R] [--kv-type T] [--raw] [--json]\n"
    "  Prompt (pp) and generation (tg) throughput in llama-bench's form; with -B,\n"
    "  B sequences at once in llama-batched-bench's form (PP, TG, B, N_KV, S_PP, S_TG, S);\n"
    "  with --spec, greedy decoding of each prompt file plain and speculative (same tokens, checked).\n";

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- runners --------------------------------------------------------------- */
/* The fast path runs on a one-sequence llmk_context (the fused executor a
 * fast-path session runs, same bits), the ref and f32 paths on a session. */
struct runner {
    llmk_context *c;
    llmk_session *s;
    llmk_batch_item *items; /* [n_ids]: the context's items of one call */
    float *logits;
    size_t V;
};

static int r_reset(struct runner *r) {
    return r->c ? llmk_context_seq_truncate(r->c, 0, 0) : llmk_session_truncate(r->s, 0);
}
/* n tokens at the sequence's position; the last token's logits, as a
 * generation step reads them. */
static int r_eval(struct runner *r, const int32_t *ids, size_t n) {
    if (!r->c) return llmk_session_eval(r->s, ids, n, r->logits, r->V, false);
    for (size_t i = 0; i < n; i++) r->items[i] = (llmk_batch_item){.seq = 0, .id = ids[i], .logits = i + 1 == n};
    return llmk_context_eval(r->c, r->items, n, r->logits, r->V);
}

static void stats(const double *v, int n, double *mean, double *sd) {
    double s = 0, q = 0;
    for (int i = 0; i < n; i++) s += v[i];
    *mean = s / n;
    for (int i = 0; i < n; i++) q += (v[i] - *mean) * (v[i] - *mean);
    *sd = n > 1 ? sqrt(q / (n - 1)) : 0;
}

/* Phase timings of the last profiling run, by kind, per token. */
static void print_phases(FILE *o, const llmk_context *c, const char *what, long ntok, double wall, double fused_ts) {
    struct bench_phase_sums s;
    bench_phase_sums_read(c, &s);
    fprintf(o, "\nphases (%s, %ld tokens, phase-at-a-time: %.1f t/s, %.1f us/token; fused: %.1f t/s)\n", what, ntok,
            (double)ntok / wall, wall * 1e6 / (double)ntok, fused_ts);
    bench_phase_sums_print(o, &s, ntok, "us/token");
}

struct bench_opts {
    const char *model;
    struct bench_batch_list batch; /* -B */
    long n_prompt, n_gen, threads, reps, n_batch, depth;
    int path;
    uint32_t kv_type;
    bool json, phases, long_ctx;
    const char *grammar, *grammar_file; /* tg picks greedy tokens under this grammar */
    const char *json_schema, *json_schema_file; /* ... or under this JSON Schema's grammar */
    bool greedy;                        /* tg picks greedy tokens (the unconstrained baseline of --grammar) */
    struct spec_opts so;
    struct bench_spec_opts spec; /* --spec: -f files, --raw */
    bool quiet, verbose; /* --log-disable, -v */
    struct cli_progress_flags pf;
    double load_s;       /* llmk_model_load's time, for -v */
};

/* Parses and checks the options, then fills in the defaults; CLI_OPTS_GO,
 * or the exit code. */
static int parse_args(struct bench_opts *o, int argc, char **argv) {
    const struct cli_opt table[] = {
        CLI_OPT_MODEL(&o->model),
        CLI_LONG(NULL, 'p', &o->n_prompt, 0, 1 << 20, "N", "prompt tokens of the pp test (default 512; 0 skips it)"),
        CLI_LONG(NULL, 'n', &o->n_gen, 0, 1 << 20, "N", "generated tokens of the tg test (default 128; 0 skips it)"),
        CLI_LONG(NULL, 'd', &o->depth, 0, 1 << 20, "N",
                 "context depth: N tokens evaluated (untimed) before each test (default 0)"),
        CLI_OPT_THREADS(&o->threads),
        CLI_LONG(NULL, 'r', &o->reps, 1, 1000, "R", "repetitions, after one warm-up (default 5; 1 with -B)"),
        CLI_FN(NULL, 'B', bench_parse_batch_list, &o->batch, "LIST",
               "sequence counts decoded together, as 1,4,16: llama-batched-bench's table, -p and -n per sequence"),
        CLI_OPT_PATH(&o->path),
        CLI_OPT_KV_TYPE(&o->kv_type, CLI_KV_TYPE_HELP),
        CLI_LONG(NULL, 'b', &o->n_batch, 1, 8192, "N", "rows per prefill chunk of the fast path (default 512)"),
        CLI_FLAG("--json", 0, &o->json, "an array of objects with llama-bench's keys"),
        CLI_STR("--grammar", 0, &o->grammar, "GBNF",
                "tg chooses each next token greedily under this grammar (restarted when complete)"),
        CLI_STR("--grammar-file", 0, &o->grammar_file, "FILE", "the same, read from FILE"),
        CLI_STR("--json-schema", 'j', &o->json_schema, "SCHEMA", "the same with the grammar of a JSON Schema"),
        {.name = "--json-schema-file", .alias = "-jf", .kind = CLI_OPT_STR, .dest.s = &o->json_schema_file,
         .metavar = "FILE", .help = "the same, read from FILE"},
        CLI_FLAG("--greedy", 0, &o->greedy, "tg chooses each next token greedily: --grammar's unconstrained baseline"),
        CLI_FLAG("--phases", 0, &o->phases, "per-phase decode timings (fast path, phase-at-a-time mode; with -B "
                 "in place, per step)"),
        CLI_OPT_LONG_CTX(&o->long_ctx),
        CLI_REPEAT("--file", 'f', bench_spec_add_file, &o->spec, "FILE", "--spec: a prompt file (text)"),
        CLI_FLAG("--raw", 0, &o->spec.raw, "--spec: the prompt files without the chat template"),
        CLI_OPT_LOG_DISABLE(&o->quiet, "the table (or JSON) only: no bandwidth, cache and RSS notes, no progress"),
        CLI_OPT_VERBOSE(&o->verbose, "the load's times, kernels and threads on stderr"),
        CLI_OPT_PROGRESS(&o->pf),
    };
    const struct cli_opt_section sections[] = {{NULL, table, CLI_LEN(table)}, spec_opts_section(&o->so)};
    struct cli_cmd spec = {.name = "bench", .usage = USAGE, .sections = sections, .n_sections = CLI_LEN(sections)};
    int rc = cli_opts_parse(&spec, argc, argv);
    if (rc != CLI_OPTS_GO) return rc;
    if (!o->model) o->model = cli_default_model();
    o->kv_type = cli_kv_type_or_default(o->kv_type, o->path);
    if (o->phases && o->path != LLMK_PATH_FAST) return cli_usage_error("bench", "--phases needs --path fast");
    if (o->n_prompt + o->n_gen == 0) return cli_usage_error("bench", "nothing to measure (-p 0 -n 0)");
    if (o->quiet) o->verbose = false; /* --log-disable wins, as in run and chat */
    if ((rc = spec_opts_check("bench", &o->so)) != CLI_OPTS_GO) return rc;
    if (spec_opts_on(&o->so) != (o->spec.n_files > 0))
        return cli_usage_error("bench", "--spec and -f go together (prompt files to decode speculatively)");
    if (spec_opts_on(&o->so) && (o->batch.n || o->phases || o->depth || o->path != LLMK_PATH_FAST))
        return cli_usage_error("bench", "--spec takes none of -B, --phases, -d, --path");
    if (!o->reps) o->reps = o->batch.n ? 1 : spec_opts_on(&o->so) ? 3 : 5;
    bool chooses = o->grammar || o->grammar_file || o->json_schema || o->json_schema_file || o->greedy;
    if (chooses && (o->batch.n || spec_opts_on(&o->so) || o->phases))
        return cli_usage_error("bench", "--grammar, --grammar-file and --greedy take none of -B, --spec, --phases");
    if (o->batch.n) {
        if (o->path != LLMK_PATH_FAST) return cli_usage_error("bench", "-B runs the fast path only");
        if (o->depth) return cli_usage_error("bench", "-B takes no -d");
        if (o->phases && o->n_gen < 1) return cli_usage_error("bench", "-B with --phases needs -n 1 or more");
        if (o->n_prompt < 1) return cli_usage_error("bench", "-B needs a prompt (-p 1 or more) for each sequence");
    }
    return CLI_OPTS_GO;
}

/* --grammar / --greedy: a greedy sampler, with the grammar attached. */
static int chooser_init(struct gen_ctx *ch, const llmk_model *m, const struct bench_opts *o, size_t V) {
    struct gen_opts go;
    gen_opts_default(&go, 0.0);
    go.quiet = true;
    go.grammar = o->grammar;
    go.grammar_file = o->grammar_file;
    go.json_schema = o->json_schema;
    go.json_schema_file = o->json_schema_file;
    const llmk_tokenizer *t = NULL;
    int st = llmk_model_tokenizer(m, &t);
    if (st == LLMK_OK) st = gen_ctx_init(ch, "bench", &go, V);
    if (st == LLMK_OK) st = gen_ctx_grammar(ch, &go, t);
    return st;
}

/* n tokens, each chosen from the previous one's logits (the grammar
 * restarts when it is complete, so every run decodes n). */
static int tg_choosing(struct runner *r, struct gen_ctx *ch, int32_t first, long n) {
    int32_t id = first;
    int st = LLMK_OK;
    llmk_sampler_reset(ch->smp);
    for (long i = 0; i < n && st == LLMK_OK; i++) {
        if ((st = r_eval(r, &id, 1)) != LLMK_OK) break;
        if (gen_grammar_done(ch)) llmk_sampler_reset(ch->smp);
        st = gen_choose(ch, r->logits, r->V, &id);
    }
    return st;
}

/* What the report shows besides the speeds' mean and deviation. */
struct bench_facts {
    uint64_t size, params, wbytes; /* file bytes, parameters, weight bytes one decode step streams */
    double bw;                     /* machine read bandwidth, GB/s */
    long llc;                      /* last-level cache bytes, 0 when unknown */
    int nth;
    double ppm, pps, tgm, tgs;
    uint64_t peak_rss; /* bytes, VmHWM; 0 when the OS does not say */
    uint64_t file_rss; /* bytes of the model file's mapping resident now (smaps) */
};

/* The last-level cache one core shares, in bytes (0: unknown). sysfs
 * first: glibc's sysconf answers with CPUID's figure, on AMD EPYC the
 * whole socket's L3 (64 MB on a 7001, whose cores each share 8 MB). */
static long llc_bytes(void) {
    long best = 0;
    for (int i = 0; i < 8; i++) {
        char path[96], buf[32];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        FILE *f = fopen(path, "r");
        if (!f) break;
        int level = fgets(buf, sizeof buf, f) ? atoi(buf) : 0;
        fclose(f);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if (level < 2 || !(f = fopen(path, "r"))) continue;
        char *end = NULL;
        long v = fgets(buf, sizeof buf, f) ? strtol(buf, &end, 10) : 0;
        fclose(f);
        if (end && (*end == 'K' || *end == 'k')) v *= 1024;
        else if (end && (*end == 'M' || *end == 'm')) v *= 1024 * 1024;
        if (v > best) best = v;
    }
    if (best > 0) return best;
    long v = sysconf(_SC_LEVEL3_CACHE_SIZE); /* <= 0 where the OS does not say */
    return v > 0 ? v : 0;
}

/* The process's peak resident set (Linux /proc/self/status VmHWM), bytes. */
static uint64_t peak_rss_bytes(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %llu kB", &kb) == 1) break;
    fclose(f);
    return (uint64_t)kb * 1024;
}

/* The resident bytes of the mapping that holds addr (Linux
 * /proc/self/smaps): how much of the model file this process holds as its
 * own pages, beside what it repacked. 0 when the OS does not say. */
static uint64_t mapping_rss_bytes(const void *addr) {
    FILE *f = addr ? fopen("/proc/self/smaps", "r") : NULL;
    if (!f) return 0;
    char line[512];
    unsigned long long lo, hi, kb = 0;
    bool in = false;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "%llx-%llx ", &lo, &hi) == 2) /* a mapping's header; its fields follow */
            in = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
        else if (in && sscanf(line, "Rss: %llu kB", &kb) == 1)
            break;
    }
    fclose(f);
    return (uint64_t)kb * 1024;
}

static void model_facts(const llmk_model *m, struct bench_facts *f) {
    const llmk_gguf *g = llmk_model_gguf(m);
    for (size_t i = 0; i < llmk_gguf_n_tensors(g); i++) {
        const llmk_tensor_info *t = llmk_gguf_tensor(g, i);
        f->size += t->n_bytes, f->params += t->n_elements;
    }
    /* bytes one decode step streams: every matmul weight once (the seven of
     * each layer, named as docs/model.md lists them, and the LM head, which
     * is token_embd when the model ties it; of an MoE layer's expert stacks
     * the share of the experts a token uses); the model checked at load that
     * they are all there */
    static const char *const per_layer[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up",
                                            "ffn_down", "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
    const llmk_hparams *hp = llmk_model_hparams(m);
    char key[96];
    uint32_t n_expert = 0, n_used = 0;
    snprintf(key, sizeof key, "%s.expert_count", hp->arch);
    if (llmk_gguf_get_u32(g, key, &n_expert) != LLMK_OK) n_expert = 0;
    snprintf(key, sizeof key, "%s.expert_used_count", hp->arch);
    if (llmk_gguf_get_u32(g, key, &n_used) != LLMK_OK) n_used = 0;
    for (int il = 0; il < hp->n_layer; il++)
        for (size_t j = 0; j < CLI_LEN(per_layer); j++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%d.%s.weight", il, per_layer[j]);
            const llmk_tensor_info *t = llmk_gguf_find_tensor(g, name);
            if (!t) continue;
            f->wbytes += strstr(per_layer[j], "_exps") && n_expert ? t->n_bytes / n_expert * n_used : t->n_bytes;
        }
    const llmk_tensor_info *head = llmk_gguf_find_tensor(g, hp->tied_output ? "token_embd.weight" : "output.weight");
    if (head) f->wbytes += head->n_bytes;
}

static void print_results(const struct bench_opts *o, const struct bench_facts *f) {
    const char *pname = o->path == LLMK_PATH_FAST ? "fast" : o->path == LLMK_PATH_F32 ? "f32" : "ref";
    const char *mname = strrchr(o->model, '/') ? strrchr(o->model, '/') + 1 : o->model;
    double eff = f->tgm * (double)f->wbytes / 1e9;
    if (o->json) {
        printf("[");
        int first = 1;
        for (int k = 0; k < 2; k++) {
            long np = k == 0 ? o->n_prompt : 0, ng = k == 1 ? o->n_gen : 0;
            if (np + ng == 0) continue;
            printf("%s\n  {\"model_filename\": \"%s\", \"model_size\": %llu, \"model_n_params\": %llu, \"path\": \"%s\", "
                   "\"n_threads\": %d, \"n_prompt\": %ld, \"n_gen\": %ld, \"n_depth\": %ld, \"avg_ts\": %.3f, "
                   "\"stddev_ts\": %.3f, \"peak_rss_bytes\": %llu, \"model_file_rss_bytes\": %llu",
                   first ? "" : ",", mname, (unsigned long long)f->size, (unsigned long long)f->params, pname, f->nth,
                   np, ng, o->depth, k == 0 ? f->ppm : f->tgm, k == 0 ? f->pps : f->tgs,
                   (unsigned long long)f->peak_rss, (unsigned long long)f->file_rss);
            if (k == 1)
                printf(", \"weight_bytes_per_token\": %llu, \"effective_gbs\": %.2f, \"machine_read_gbs\": %.2f, "
                       "\"llc_bytes\": %ld",
                       (unsigned long long)f->wbytes, eff, f->bw, f->llc);
            printf("}");
            first = 0;
        }
        printf("\n]\n");
        return;
    }
    printf("| %-36s | %10s | %8s | %-5s | %7s | %13s | %18s |\n", "model", "size", "params", "path", "threads",
           "test", "t/s");
    printf("| %.36s | %.10s | %.8s | %.5s | %.7s | %.13s | %.18s |\n", "------------------------------------",
           "----------", "--------", "-----", "-------", "-------------", "------------------");
    char test[48], at[24] = "";
    if (o->depth) snprintf(at, sizeof at, " @ d%ld", o->depth);
    if (o->n_prompt > 0) {
        snprintf(test, sizeof test, "pp%ld%s", o->n_prompt, at);
        printf("| %-36s | %6.2f MiB | %6.2f M | %-5s | %7d | %13s | %8.2f ± %7.2f |\n", mname,
               (double)f->size / 1048576.0, (double)f->params / 1e6, pname, f->nth, test, f->ppm, f->pps);
    }
    if (o->n_gen > 0) {
        snprintf(test, sizeof test, "tg%ld%s", o->n_gen, at);
        printf("| %-36s | %6.2f MiB | %6.2f M | %-5s | %7d | %13s | %8.2f ± %7.2f |\n", mname,
               (double)f->size / 1048576.0, (double)f->params / 1e6, pname, f->nth, test, f->tgm, f->tgs);
        if (o->quiet) return;
        printf("\ndecode streams %.1f MB of weights per token: %.1f GB/s effective, machine read bandwidth "
               "%.1f GB/s on %d threads (%.0f%%)\n",
               (double)f->wbytes / 1e6, eff, f->bw, f->nth, f->bw > 0 ? 100.0 * eff / f->bw : 0.0);
        /* a host whose last-level cache holds the weights serves the
         * decode from there, past what the memory probe measures */
        if (f->llc > 0 && (unsigned long long)f->llc > f->wbytes)
            printf("the weights fit in this CPU's %.0f MB last-level cache: the decode can read them from "
                   "there, faster than from memory\n", (double)f->llc / 1e6);
    }
    if (f->peak_rss && !o->quiet)
        printf("peak RSS %.1f MB (model file %.1f MB, %.1f MB of it resident as this process's pages)\n",
               (double)f->peak_rss / 1e6, (double)f->size / 1e6, (double)f->file_rss / 1e6);
}

/* --phases: the decode (and the prefill, with -p) once more in profiling
 * mode, printed by phase kind; the same tokens after the same depth. */
static int run_phases(struct runner *r, const struct bench_opts *o, const int32_t *ids,
                      const struct bench_facts *f) {
    const int32_t *test_ids = ids + o->depth;
    int st = llmk_context_set_profiling(r->c, true);
    long ng = o->n_gen > 0 ? o->n_gen : 32;
    if (st != LLMK_OK || (st = r_reset(r)) != LLMK_OK ||
        (o->depth && (st = r_eval(r, ids, (size_t)o->depth)) != LLMK_OK) ||
        (st = llmk_context_reset_timings(r->c)) != LLMK_OK)
        return st;
    double t = now_s();
    for (long i = 0; i < ng && st == LLMK_OK; i++) st = r_eval(r, &test_ids[i], 1);
    double wall = now_s() - t;
    if (st != LLMK_OK) return st;
    FILE *to = o->json ? stderr : stdout;
    print_phases(to, r->c, "decode", ng, wall, f->tgm);
    if (o->n_prompt == 0) return LLMK_OK;
    if ((st = r_reset(r)) != LLMK_OK || (o->depth && (st = r_eval(r, ids, (size_t)o->depth)) != LLMK_OK) ||
        (st = llmk_context_reset_timings(r->c)) != LLMK_OK)
        return st;
    t = now_s();
    st = r_eval(r, test_ids, (size_t)o->n_prompt);
    wall = now_s() - t;
    if (st == LLMK_OK) print_phases(to, r->c, "prefill", o->n_prompt, wall, f->ppm);
    return st;
}

/* The context (fast path) or session, drawing the load's progress on load;
 * with -v, the load line. */
static int runner_init(struct runner *r, const llmk_model *m, const struct bench_opts *o, int32_t n_ctx,
                       struct cli_progress *load) {
    int st;
    double t_init = cli_now();
    if (o->path == LLMK_PATH_FAST) {
        llmk_context_params cp = {.n_seq_max = 1, .n_ctx = n_ctx, .n_threads = (int32_t)o->threads,
                                  .n_batch = (int32_t)o->n_batch, .kv_type = o->kv_type,
                                  .allow_long_ctx = o->long_ctx, .progress_callback = cli_progress_load,
                                  .progress_callback_user_data = load};
        st = llmk_context_init(m, &cp, &r->c);
    } else {
        llmk_session_params sp = {.n_ctx = n_ctx, .n_threads = (int32_t)o->threads, .path = o->path,
                                  .n_batch = (int32_t)o->n_batch, .allow_long_ctx = o->long_ctx,
                                  .progress_callback = cli_progress_load, .progress_callback_user_data = load};
        st = llmk_session_init(m, &sp, &r->s);
    }
    cli_progress_clear(load);
    if (st == LLMK_OK && o->verbose)
        cli_log_load("bench", o->load_s, cli_now() - t_init,
                     r->c ? llmk_context_kernels(r->c) : llmk_session_kernels(r->s),
                     r->c ? llmk_context_n_threads(r->c) : llmk_session_n_threads(r->s), o->kv_type);
    return st;
}

int cmd_bench(int argc, char **argv) {
    struct bench_opts o = {.n_prompt = 512, .n_gen = 128, .path = LLMK_PATH_FAST,
                           .kv_type = (uint32_t)CLI_KV_DEFAULT};
    spec_opts_default(&o.so);
    int prc = parse_args(&o, argc, argv);
    if (prc != CLI_OPTS_GO) return prc;
    const long n_prompt = o.n_prompt, n_gen = o.n_gen, threads = o.threads, reps = o.reps, depth = o.depth;
    llmk_model *m = NULL;
    struct cli_progress load; /* drawn once the init (the repacking) has taken a second */
    cli_progress_start(&load, "bench", cli_progress_wanted(&o.pf, o.quiet), 1.0);
    double t_load = cli_now();
    int st = llmk_model_load(o.model, &m);
    if (st != LLMK_OK) return cli_report("bench", st);
    o.load_s = cli_now() - t_load;
    if (spec_opts_on(&o.so)) {
        o.spec.n_gen = n_gen > 0 ? n_gen : 128, o.spec.threads = threads, o.spec.reps = reps, o.spec.json = o.json;
        o.spec.kv_type = o.kv_type;
        o.spec.so = &o.so;
        st = bench_spec(m, o.model, &o.spec);
        llmk_model_free(m);
        return st == LLMK_OK ? CLI_EXIT_OK : cli_report("bench", st);
    }
    if (o.batch.n) {
        struct bench_batched_opts bo = {.list = o.batch, .n_prompt = n_prompt, .n_gen = n_gen, .threads = threads,
                                        .reps = reps, .n_batch = o.n_batch, .kv_type = o.kv_type, .json = o.json,
                                        .long_ctx = o.long_ctx, .phases = o.phases, .verbose = o.verbose,
                                        .load_s = o.load_s,
                                        .load = &load};
        st = bench_batched(m, &bo);
        llmk_model_free(m);
        return st == LLMK_OK ? CLI_EXIT_OK : cli_report("bench", st);
    }
    const llmk_hparams *hp = llmk_model_hparams(m);
    struct runner r = {.V = (size_t)hp->n_vocab};
    struct gen_ctx ch = {0};
    long n_test = n_prompt > n_gen ? n_prompt : n_gen;
    if (o.phases && n_test < 32) n_test = 32; /* --phases decodes 32 tokens when -n 0 */
    long n_ids = depth + n_test;
    int32_t n_ctx = (int32_t)n_ids + 1;
    if (o.long_ctx) cli_warn_long_ctx("bench", m, n_ctx);
    st = runner_init(&r, m, &o, n_ctx, &load);
    r.logits = malloc(r.V * sizeof(float));
    r.items = malloc((size_t)n_ids * sizeof *r.items);
    int32_t *ids = malloc((size_t)n_ids * sizeof *ids + 4);
    double *pp = calloc((size_t)reps, sizeof *pp), *tg = calloc((size_t)reps, sizeof *tg);
    if (st != LLMK_OK || !r.logits || !r.items || !ids || !pp || !tg) {
        if (st == LLMK_OK) st = cli_fail(LLMK_OUT_OF_MEMORY, "bench: buffers");
        goto done;
    }
    int nth = r.c ? llmk_context_n_threads(r.c) : (threads > 0 ? (int)threads : llmk_cpu_count());
    if ((o.grammar || o.grammar_file || o.json_schema || o.json_schema_file || o.greedy) && (st = chooser_init(&ch, m, &o, r.V)) != LLMK_OK) goto done;
    for (long i = 0; i < n_ids; i++) ids[i] = (int32_t)((i * 7919 + 13) % hp->n_vocab);
    const int32_t *test_ids = ids + depth; /* after the depth's context */
    for (long rep = -1; rep < reps && st == LLMK_OK; rep++) { /* rep -1 warms up */
        if (n_prompt > 0) {
            if ((st = r_reset(&r)) != LLMK_OK || (depth && (st = r_eval(&r, ids, (size_t)depth)) != LLMK_OK)) break;
            double t = now_s();
            if ((st = r_eval(&r, test_ids, (size_t)n_prompt)) != LLMK_OK) break;
            if (rep >= 0) pp[rep] = (double)n_prompt / (now_s() - t);
        }
        if (n_gen > 0) {
            if ((st = r_reset(&r)) != LLMK_OK || (depth && (st = r_eval(&r, ids, (size_t)depth)) != LLMK_OK)) break;
            double t = now_s();
            if (ch.smp) st = tg_choosing(&r, &ch, test_ids[0], n_gen);
            else
                for (long i = 0; i < n_gen && st == LLMK_OK; i++) st = r_eval(&r, &test_ids[i], 1);
            if (rep >= 0) tg[rep] = (double)n_gen / (now_s() - t);
        }
    }
    if (st != LLMK_OK) goto done;
    const llmk_tensor_info *t0 = llmk_gguf_tensor(llmk_model_gguf(m), 0);
    struct bench_facts f = {.nth = nth, .peak_rss = peak_rss_bytes(), .file_rss = mapping_rss_bytes(t0 ? t0->data : NULL)};
    model_facts(m, &f);
    if (llmk_memory_read_bandwidth(nth, 0, &f.bw) != LLMK_OK) f.bw = 0; /* the report shows 0: not measured */
    f.llc = llc_bytes();
    if (n_prompt > 0) stats(pp, (int)reps, &f.ppm, &f.pps);
    if (n_gen > 0) stats(tg, (int)reps, &f.tgm, &f.tgs);
    print_results(&o, &f);
    if (o.phases && r.c) st = run_phases(&r, &o, ids, &f);
done:
    gen_ctx_free(&ch);
    llmk_context_free(r.c);
    if (r.s) llmk_session_free(r.s);
    free(r.logits), free(r.items), free(ids), free(pp), free(tg);
    llmk_model_free(m);
    if (st != LLMK_OK) return cli_report("bench", st);
    return CLI_EXIT_OK;
}
