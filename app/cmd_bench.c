/* llmk bench: prompt processing (pp) and generation (tg) throughput in
 * llama-bench's form, plus the decode's effective weight bandwidth against
 * the machine's read bandwidth measured in the same run, and (--phases)
 * where the decode time goes, phase by phase. */
#include "cli.h"
#include "exec_cpu.h"
#include "internal.h"
#include "pool.h"
#include "kernels/readbw.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: llmk bench [-m MODEL] [-p N] [-n N] [-t T] [-r R] [--path ref|f32|fast] [--kv-type f32|f16|q8_0]\n"
            "                  [-b N] [-d N] [--json] [--phases]\n"
            "  -p N         prompt tokens of the pp test (default 512; 0 skips it)\n"
            "  -n N         generated tokens of the tg test (default 128; 0 skips it)\n"
            "  -d N         context depth: N tokens evaluated (untimed) before each test (default 0)\n"
            "  -t T         threads (default: one per core)\n"
            "  -r R         repetitions, after one warm-up (default 5)\n"
            "  --path P     decode path (default fast)\n"
            "  --kv-type T  KV cache type of the fast path (default f16)\n"
            "  -b N         rows per prefill chunk of the fast path (default 512)\n"
            "  --json       an array of objects with llama-bench's keys\n"
            "  --phases     per-phase decode timings (fast path, phase-at-a-time mode)\n"
            CLI_LONG_CTX_HELP);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- machine read bandwidth ---------------------------------------------- */
struct bw_ctx {
    const uint64_t *buf;
    size_t n;
    uint64_t sink[64 * 8];
};
static void bw_worker(void *arg, int ith, int nth) {
    struct bw_ctx *c = arg;
    int64_t lo, hi;
    llmk_split_range((int64_t)(c->n / 16), ith, nth, &lo, &hi); /* in 128-byte lines */
    uint64_t x = llmk_read_xor(c->buf + lo * 16, (size_t)(hi - lo) * 128);
    if (ith < 64) c->sink[ith * 8] = x;
}
/* GB/s reading a 256 MiB buffer with nth threads, best of 5. */
static double read_bandwidth(int nth) {
    size_t bytes = (size_t)256 << 20;
    uint64_t *buf = malloc(bytes);
    llmk_pool *pool = NULL;
    if (!buf || llmk_pool_create(nth, &pool) != LLMK_OK) {
        free(buf);
        return 0;
    }
    for (size_t i = 0; i < bytes / 8; i++) buf[i] = i * 0x9e3779b97f4a7c15ULL;
    struct bw_ctx *c = calloc(1, sizeof *c);
    c->buf = buf, c->n = bytes / 8;
    double best = 0;
    for (int r = 0; r < 5; r++) {
        double t = now_s();
        llmk_pool_run(pool, bw_worker, c);
        double gbs = (double)bytes / (now_s() - t) / 1e9;
        if (gbs > best) best = gbs;
    }
    llmk_pool_free(pool);
    free(c);
    free(buf);
    return best;
}

/* ---- runners --------------------------------------------------------------- */
struct runner {
    int path;
    struct llmk_exec *ex;
    llmk_session *s;
    float *logits;
    size_t V;
};

static int r_reset(struct runner *r) {
    return r->ex ? llmk_exec_truncate(r->ex, 0, 0) : llmk_session_truncate(r->s, 0);
}
static int r_eval(struct runner *r, const int32_t *ids, size_t n) {
    return r->ex ? llmk_exec_eval(r->ex, 0, ids, n, r->logits, r->V, false)
                 : llmk_session_eval(r->s, ids, n, r->logits, r->V, false);
}

static void stats(const double *v, int n, double *mean, double *sd) {
    double s = 0, q = 0;
    for (int i = 0; i < n; i++) s += v[i];
    *mean = s / n;
    for (int i = 0; i < n; i++) q += (v[i] - *mean) * (v[i] - *mean);
    *sd = n > 1 ? sqrt(q / (n - 1)) : 0;
}

/* strip "blk.N." so phases of all layers add up under one name */
static const char *phase_kind(const char *name) {
    if (strncmp(name, "blk.", 4) == 0) {
        const char *d = strchr(name + 4, '.');
        if (d) return d + 1;
    }
    return name;
}

/* Phase timings of the last phase-mode run, summed by kind (phase name
 * without its layer), per token. */
static void print_phases(FILE *o, const struct llmk_exec *ex, const char *what, long ntok, double wall, double fused_ts) {
    const struct llmk_program *p = llmk_exec_program(ex);
    const double *ns = llmk_exec_phase_ns(ex);
    const char *kinds[64];
    double kns[64] = {0};
    int nk = 0;
    double total = 0;
    for (int i = 0; i < p->n_phases; i++) {
        const char *k = phase_kind(p->ph[i].name);
        int j = 0;
        while (j < nk && strcmp(kinds[j], k) != 0) j++;
        if (j == nk && nk < 64) kinds[nk++] = k;
        if (j < 64) kns[j] += ns[i];
        total += ns[i];
    }
    fprintf(o, "\nphases (%s, %ld tokens, phase-at-a-time: %.1f t/s, %.1f us/token; fused: %.1f t/s)\n", what, ntok,
            (double)ntok / wall, wall * 1e6 / (double)ntok, fused_ts);
    fprintf(o, "  %-14s %12s %7s\n", "phase", "us/token", "share");
    for (int j = 0; j < nk; j++)
        if (kns[j] > 0)
            fprintf(o, "  %-14s %12.1f %6.1f%%\n", kinds[j], kns[j] / 1e3 / (double)ntok, 100.0 * kns[j] / total);
}

int cmd_bench(int argc, char **argv) {
    const char *model = NULL;
    long n_prompt = 512, n_gen = 128, threads = 0, reps = 5, n_batch = 0, depth = 0;
    int path = LLMK_PATH_FAST;
    uint32_t kv_type = (uint32_t)CLI_KV_DEFAULT;
    bool json = false, phases = false, long_ctx = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return CLI_EXIT_OK;
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else if (!strcmp(a, "--phases")) {
            phases = true;
        } else if (!strcmp(a, "--allow-long-ctx")) {
            long_ctx = true;
        } else if (!v) {
            return cli_usage_error("bench", "%s needs a value", a);
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            model = argv[++i];
        } else if (!strcmp(a, "-p")) {
            if (!cli_parse_long("bench", a, argv[++i], 0, 1 << 20, &n_prompt)) return CLI_EXIT_USAGE;
        } else if (!strcmp(a, "-n")) {
            if (!cli_parse_long("bench", a, argv[++i], 0, 1 << 20, &n_gen)) return CLI_EXIT_USAGE;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (!cli_parse_long("bench", a, argv[++i], 1, 1024, &threads)) return CLI_EXIT_USAGE;
        } else if (!strcmp(a, "-r")) {
            if (!cli_parse_long("bench", a, argv[++i], 1, 1000, &reps)) return CLI_EXIT_USAGE;
        } else if (!strcmp(a, "-d")) {
            if (!cli_parse_long("bench", a, argv[++i], 0, 1 << 20, &depth)) return CLI_EXIT_USAGE;
        } else if (!strcmp(a, "-b")) {
            if (!cli_parse_long("bench", a, argv[++i], 1, 8192, &n_batch)) return CLI_EXIT_USAGE;
        } else if (!strcmp(a, "--path")) {
            if (!cli_parse_path("bench", argv[++i], &path)) return CLI_EXIT_USAGE;
        } else if (!strcmp(a, "--kv-type")) {
            if (!cli_parse_kv_type("bench", argv[++i], &kv_type)) return CLI_EXIT_USAGE;
        } else {
            return cli_usage_error("bench", "unknown option '%s'", a);
        }
    }
    if (!model) model = cli_default_model();
    kv_type = cli_kv_type_or_default(kv_type, path);
    if (phases && path != LLMK_PATH_FAST) return cli_usage_error("bench", "--phases needs --path fast");
    if (n_prompt + n_gen == 0) return cli_usage_error("bench", "nothing to measure (-p 0 -n 0)");
    llmk_model *m = NULL;
    int st = llmk_model_load(model, &m);
    if (st != LLMK_OK) return cli_report("bench", st);
    const llmk_hparams *hp = llmk_model_hparams(m);
    struct runner r = {.path = path, .V = (size_t)hp->n_vocab};
    long n_test = n_prompt > n_gen ? n_prompt : n_gen;
    if (phases && n_test < 32) n_test = 32; /* --phases decodes 32 tokens when -n 0 */
    long n_ids = depth + n_test;
    int32_t n_ctx = (int32_t)n_ids + 1;
    if (long_ctx) cli_warn_long_ctx("bench", m, n_ctx);
    if (path == LLMK_PATH_FAST) {
        struct llmk_exec_params ep = {.n_ctx = n_ctx, .n_threads = (int32_t)threads, .n_batch = (int32_t)n_batch,
                                      .n_seq = 1, .kv_type = kv_type, .allow_long_ctx = long_ctx};
        st = llmk_exec_init(m, &ep, &r.ex);
    } else {
        llmk_session_params sp = {.n_ctx = n_ctx, .n_threads = (int32_t)threads, .path = path,
                                  .n_batch = (int32_t)n_batch, .allow_long_ctx = long_ctx};
        st = llmk_session_init(m, &sp, &r.s);
    }
    r.logits = malloc(r.V * sizeof(float));
    int32_t *ids = malloc((size_t)n_ids * sizeof *ids + 4);
    double *pp = calloc((size_t)reps, sizeof *pp), *tg = calloc((size_t)reps, sizeof *tg);
    if (st != LLMK_OK || !r.logits || !ids || !pp || !tg) {
        if (st == LLMK_OK) st = llmk_fail(LLMK_OUT_OF_MEMORY, "bench: buffers");
        goto done;
    }
    int nth = r.ex ? llmk_exec_n_threads(r.ex) : (threads > 0 ? (int)threads : llmk_cpu_count());
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
            for (long i = 0; i < n_gen && st == LLMK_OK; i++) st = r_eval(&r, &test_ids[i], 1);
            if (rep >= 0) tg[rep] = (double)n_gen / (now_s() - t);
        }
    }
    if (st != LLMK_OK) goto done;
    /* model facts */
    const llmk_gguf *g = llmk_model_gguf(m);
    uint64_t size = 0, params = 0, wbytes = 0;
    for (size_t i = 0; i < llmk_gguf_n_tensors(g); i++) {
        const llmk_tensor_info *t = llmk_gguf_tensor(g, i);
        size += t->n_bytes, params += t->n_elements;
    }
    /* bytes one decode step streams: every matmul weight once, one embedding row */
    const struct llmk_model *mi = (const struct llmk_model *)m;
    for (int il = 0; il < hp->n_layer; il++) {
        const struct llmk_layer *L = &mi->layers[il];
        const llmk_tensor_info *w[7] = {L->wq, L->wk, L->wv, L->wo, L->w_gate, L->w_up, L->w_down};
        for (int j = 0; j < 7; j++) wbytes += w[j]->n_bytes;
    }
    wbytes += mi->output->n_bytes;
    double bw = read_bandwidth(nth);
    long llc = sysconf(_SC_LEVEL3_CACHE_SIZE); /* <= 0 where the OS does not say */
    if (llc < 0) llc = 0;
    double ppm = 0, pps = 0, tgm = 0, tgs = 0;
    if (n_prompt > 0) stats(pp, (int)reps, &ppm, &pps);
    if (n_gen > 0) stats(tg, (int)reps, &tgm, &tgs);
    const char *pname = path == LLMK_PATH_FAST ? "fast" : path == LLMK_PATH_F32 ? "f32" : "ref";
    const char *mname = strrchr(model, '/') ? strrchr(model, '/') + 1 : model;
    double eff = tgm * (double)wbytes / 1e9;
    if (json) {
        printf("[");
        int first = 1;
        for (int k = 0; k < 2; k++) {
            long np = k == 0 ? n_prompt : 0, ng = k == 1 ? n_gen : 0;
            if (np + ng == 0) continue;
            printf("%s\n  {\"model_filename\": \"%s\", \"model_size\": %llu, \"model_n_params\": %llu, \"path\": \"%s\", "
                   "\"n_threads\": %d, \"n_prompt\": %ld, \"n_gen\": %ld, \"n_depth\": %ld, \"avg_ts\": %.3f, "
                   "\"stddev_ts\": %.3f",
                   first ? "" : ",", mname, (unsigned long long)size, (unsigned long long)params, pname, nth, np, ng, depth,
                   k == 0 ? ppm : tgm, k == 0 ? pps : tgs);
            if (k == 1)
                printf(", \"weight_bytes_per_token\": %llu, \"effective_gbs\": %.2f, \"machine_read_gbs\": %.2f, "
                       "\"llc_bytes\": %ld",
                       (unsigned long long)wbytes, eff, bw, llc);
            printf("}");
            first = 0;
        }
        printf("\n]\n");
    } else {
        printf("| %-36s | %10s | %8s | %-5s | %7s | %13s | %18s |\n", "model", "size", "params", "path", "threads",
               "test", "t/s");
        printf("| %.36s | %.10s | %.8s | %.5s | %.7s | %.13s | %.18s |\n", "------------------------------------",
               "----------", "--------", "-----", "-------", "-------------", "------------------");
        char test[48], at[24] = "";
        if (depth) snprintf(at, sizeof at, " @ d%ld", depth);
        if (n_prompt > 0) {
            snprintf(test, sizeof test, "pp%ld%s", n_prompt, at);
            printf("| %-36s | %6.2f MiB | %6.2f M | %-5s | %7d | %13s | %8.2f ± %7.2f |\n", mname,
                   (double)size / 1048576.0, (double)params / 1e6, pname, nth, test, ppm, pps);
        }
        if (n_gen > 0) {
            snprintf(test, sizeof test, "tg%ld%s", n_gen, at);
            printf("| %-36s | %6.2f MiB | %6.2f M | %-5s | %7d | %13s | %8.2f ± %7.2f |\n", mname,
                   (double)size / 1048576.0, (double)params / 1e6, pname, nth, test, tgm, tgs);
            printf("\ndecode streams %.1f MB of weights per token: %.1f GB/s effective, machine read bandwidth "
                   "%.1f GB/s on %d threads (%.0f%%)\n",
                   (double)wbytes / 1e6, eff, bw, nth, bw > 0 ? 100.0 * eff / bw : 0.0);
            /* a host whose last-level cache holds the weights serves the
             * decode from there, past what the memory probe measures */
            if (llc > 0 && (unsigned long long)llc > wbytes)
                printf("the weights fit in this CPU's %.0f MB last-level cache: the decode can read them from "
                       "there, faster than from memory\n", (double)llc / 1e6);
        }
    }
    if (phases && r.ex) {
        /* phase-at-a-time mode: same results, one region per phase */
        llmk_exec_set_phase_mode(r.ex, true);
        long ng = n_gen > 0 ? n_gen : 32;
        if ((st = r_reset(&r)) != LLMK_OK || (depth && (st = r_eval(&r, ids, (size_t)depth)) != LLMK_OK)) goto done;
        llmk_exec_reset_timings(r.ex);
        double t = now_s();
        for (long i = 0; i < ng && st == LLMK_OK; i++) st = r_eval(&r, &test_ids[i], 1);
        double wall = now_s() - t;
        if (st != LLMK_OK) goto done;
        FILE *o = json ? stderr : stdout;
        print_phases(o, r.ex, "decode", ng, wall, tgm);
        if (n_prompt > 0) {
            if ((st = r_reset(&r)) != LLMK_OK || (depth && (st = r_eval(&r, ids, (size_t)depth)) != LLMK_OK))
                goto done;
            llmk_exec_reset_timings(r.ex);
            t = now_s();
            st = r_eval(&r, test_ids, (size_t)n_prompt);
            wall = now_s() - t;
            if (st != LLMK_OK) goto done;
            print_phases(o, r.ex, "prefill", n_prompt, wall, ppm);
        }
    }
done:
    if (r.ex) llmk_exec_free(r.ex);
    if (r.s) llmk_session_free(r.s);
    free(r.logits), free(ids), free(pp), free(tg);
    llmk_model_free(m);
    if (st != LLMK_OK) return cli_report("bench", st);
    return CLI_EXIT_OK;
}
