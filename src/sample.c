/* The sampler chain: logit bias, then the configured stages over the whole
 * vocabulary, then one draw from a counter-based RNG. Every stage calls the
 * seed-001 formula it stands for (src/formulas/); this file only walks the
 * candidate list. All scratch is allocated in llmk_sampler_init. */
#include "internal.h"
#include "grammar.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* Largest penalty window accepted: a window longer than any context is
 * only a way to make init allocate without bound. */
#define MAX_LAST_N (1 << 20)

struct llmk_sampler {
    llmk_sampler_params p;
    llmk_logit_bias *bias;
    size_t n_vocab;
    uint64_t seed;
    uint64_t step;
    llmk_token_prob *cand; /* n_vocab */
    size_t n_cand;
    bool sorted;      /* cand is in (logit desc, id asc) order */
    int32_t *hist;    /* ring of the last repeat_last_n accepted ids */
    size_t hist_cap, hist_len, hist_head;
    int32_t *count;   /* n_vocab, all zero between calls */
    llmk_grammar_state *grammar; /* borrowed; masks the row, advanced past each draw */
};

/* ---- RNG ------------------------------------------------------------- */

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

uint64_t llmk_rng_u64(uint64_t seed, uint64_t step) {
    /* splitmix64's state after step+1 increments is seed + (step+1) * gamma,
     * so its step-th output is a pure function of (seed, step). */
    return mix64(seed + (step + 1) * 0x9E3779B97F4A7C15ULL);
}

double llmk_rng_uniform(uint64_t seed, uint64_t step) {
    return (double)(llmk_rng_u64(seed, step) >> 11) * (1.0 / 9007199254740992.0);
}

/* ---- parameters ------------------------------------------------------ */

static const struct {
    const char *name;
    const char *alias;
    char letter;
} stage_names[LLMK_STAGE_COUNT_] = {
    [LLMK_STAGE_PENALTIES] = {"penalties", "penalty", 'e'},
    [LLMK_STAGE_TEMPERATURE] = {"temperature", "temp", 't'},
    [LLMK_STAGE_TOP_K] = {"top_k", "top-k", 'k'},
    [LLMK_STAGE_MIN_P] = {"min_p", "min-p", 'm'},
    [LLMK_STAGE_TOP_P] = {"top_p", "top-p", 'p'},
    [LLMK_STAGE_TYPICAL_P] = {"typical_p", "typ_p", 'y'},
    [LLMK_STAGE_ETA] = {"eta", "eta_sampling", 'a'},
};

const char *llmk_sampler_stage_name(int stage) {
    if (stage < 0 || stage >= LLMK_STAGE_COUNT_) return "?";
    return stage_names[stage].name;
}

static int stage_from_name(const char *s, size_t len) {
    for (int i = 0; i < LLMK_STAGE_COUNT_; i++) {
        const char *a = stage_names[i].name, *b = stage_names[i].alias;
        if ((strlen(a) == len && !strncmp(a, s, len)) || (strlen(b) == len && !strncmp(b, s, len)))
            return i;
    }
    return -1;
}

int llmk_sampler_parse_order(const char *spec, llmk_sampler_params *p) {
    llmk_error_clear();
    if (!spec || !p) return llmk_fail(LLMK_INVALID_ARGUMENT, "sampler order: NULL argument");
    uint8_t order[LLMK_SAMPLER_MAX_STAGES];
    size_t n = 0;
    bool has_sep = strchr(spec, ';') || strchr(spec, ',');
    bool all_letters = !has_sep && *spec;
    for (const char *c = spec; all_letters && *c; c++) {
        bool found = false;
        for (int i = 0; i < LLMK_STAGE_COUNT_; i++) found |= stage_names[i].letter == *c;
        /* a single known name such as "temp" is a name, not letters */
        if (!found) all_letters = false;
    }
    if (all_letters && stage_from_name(spec, strlen(spec)) >= 0) all_letters = false;
    if (all_letters) {
        for (const char *c = spec; *c; c++) {
            if (n == LLMK_SAMPLER_MAX_STAGES)
                return llmk_fail(LLMK_BAD_SAMPLER_CONFIG, "sampler order '%s': more than %d stages",
                                 spec, LLMK_SAMPLER_MAX_STAGES);
            for (int i = 0; i < LLMK_STAGE_COUNT_; i++)
                if (stage_names[i].letter == *c) order[n++] = (uint8_t)i;
        }
    } else {
        const char *s = spec;
        while (*s) {
            size_t len = strcspn(s, ";,");
            if (len > 0) {
                int st = stage_from_name(s, len);
                if (st < 0)
                    return llmk_fail(LLMK_BAD_SAMPLER_CONFIG,
                                     "sampler order '%s': unknown stage '%.*s' (known: penalties, "
                                     "temperature, top_k, min_p, top_p, typical_p, eta)",
                                     spec, (int)(len > 64 ? 64 : len), s);
                if (n == LLMK_SAMPLER_MAX_STAGES)
                    return llmk_fail(LLMK_BAD_SAMPLER_CONFIG,
                                     "sampler order '%s': more than %d stages", spec,
                                     LLMK_SAMPLER_MAX_STAGES);
                order[n++] = (uint8_t)st;
            }
            s += len;
            if (*s) s++;
        }
    }
    memcpy(p->order, order, n);
    p->n_order = n;
    return LLMK_OK;
}

void llmk_sampler_params_default(llmk_sampler_params *p) {
    memset(p, 0, sizeof *p);
    p->temperature = 0.8;
    p->top_k = 40;
    p->top_p = 0.95;
    p->min_p = 0.05;
    p->typical_p = 1.0;
    p->eta = 0.0;
    p->repeat_penalty = 1.0;
    p->repeat_last_n = 64;
    p->seed = -1;
    int rc = llmk_sampler_parse_order(LLMK_SAMPLER_DEFAULT_ORDER, p);
    LLMK_CHECK(rc == LLMK_OK);
}

static int check_range(const char *name, double v, double lo, double hi) {
    if (!(v >= lo && v <= hi))
        return llmk_fail(LLMK_BAD_SAMPLER_CONFIG, "sampler: %s = %g is outside [%g, %g]", name, v,
                         lo, hi);
    return LLMK_OK;
}

static int validate(const llmk_sampler_params *p, size_t n_vocab) {
    int rc;
    if ((rc = check_range("temperature", p->temperature, -1e300, 1e300)) != LLMK_OK) return rc;
    if ((rc = check_range("top_p", p->top_p, 0, 1)) != LLMK_OK) return rc;
    if ((rc = check_range("min_p", p->min_p, 0, 1)) != LLMK_OK) return rc;
    if ((rc = check_range("typical_p", p->typical_p, 0, 1)) != LLMK_OK) return rc;
    if ((rc = check_range("eta", p->eta, 0, 1)) != LLMK_OK) return rc;
    if ((rc = check_range("repeat_penalty", p->repeat_penalty, 1e-9, 1e9)) != LLMK_OK) return rc;
    if ((rc = check_range("frequency_penalty", p->frequency_penalty, -1e9, 1e9)) != LLMK_OK)
        return rc;
    if ((rc = check_range("presence_penalty", p->presence_penalty, -1e9, 1e9)) != LLMK_OK)
        return rc;
    if (p->repeat_last_n < 0 || p->repeat_last_n > MAX_LAST_N)
        return llmk_fail(LLMK_BAD_SAMPLER_CONFIG, "sampler: repeat_last_n = %d is outside [0, %d]",
                         (int)p->repeat_last_n, MAX_LAST_N);
    if (p->seed < -1)
        return llmk_fail(LLMK_BAD_SAMPLER_CONFIG, "sampler: seed = %lld (use -1 for random)",
                         (long long)p->seed);
    if (p->n_order > LLMK_SAMPLER_MAX_STAGES)
        return llmk_fail(LLMK_BAD_SAMPLER_CONFIG, "sampler: %zu stages, at most %d", p->n_order,
                         LLMK_SAMPLER_MAX_STAGES);
    for (size_t i = 0; i < p->n_order; i++)
        if (p->order[i] >= LLMK_STAGE_COUNT_)
            return llmk_fail(LLMK_BAD_SAMPLER_CONFIG, "sampler: stage %zu has unknown id %u", i,
                             (unsigned)p->order[i]);
    if (p->n_bias && !p->bias)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "sampler: %zu logit biases but no array",
                         p->n_bias);
    for (size_t i = 0; i < p->n_bias; i++) {
        if (p->bias[i].id < 0 || (size_t)p->bias[i].id >= n_vocab)
            return llmk_fail(LLMK_INVALID_TOKEN, "sampler: logit bias for token %d, vocabulary has %zu",
                             (int)p->bias[i].id, n_vocab);
        if (isnan(p->bias[i].bias) || p->bias[i].bias == INFINITY)
            return llmk_fail(LLMK_BAD_SAMPLER_CONFIG, "sampler: logit bias for token %d is %g",
                             (int)p->bias[i].id, (double)p->bias[i].bias);
    }
    return LLMK_OK;
}

static uint64_t random_seed(void) {
    uint32_t v = 0;
    if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        v = (uint32_t)mix64((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid());
    }
    return v;
}

int llmk_sampler_init(const llmk_sampler_params *p, size_t n_vocab, llmk_sampler **out) {
    llmk_error_clear();
    if (!out) return llmk_fail(LLMK_INVALID_ARGUMENT, "sampler_init: NULL out");
    *out = NULL;
    if (!p) return llmk_fail(LLMK_INVALID_ARGUMENT, "sampler_init: NULL params");
    if (n_vocab < 1 || n_vocab > (size_t)INT32_MAX)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "sampler_init: vocabulary of %zu tokens", n_vocab);
    int rc = validate(p, n_vocab);
    if (rc != LLMK_OK) return rc;
    llmk_sampler *s = calloc(1, sizeof *s);
    if (!s) return llmk_fail(LLMK_OUT_OF_MEMORY, "sampler_init: state");
    s->p = *p;
    s->n_vocab = n_vocab;
    s->hist_cap = (size_t)p->repeat_last_n;
    s->cand = malloc(n_vocab * sizeof *s->cand);
    s->count = calloc(n_vocab, sizeof *s->count);
    s->hist = malloc((s->hist_cap ? s->hist_cap : 1) * sizeof *s->hist);
    s->bias = malloc((p->n_bias ? p->n_bias : 1) * sizeof *s->bias);
    if (!s->cand || !s->count || !s->hist || !s->bias) {
        llmk_sampler_free(s);
        return llmk_fail(LLMK_OUT_OF_MEMORY, "sampler_init: scratch for %zu tokens", n_vocab);
    }
    if (p->n_bias) memcpy(s->bias, p->bias, p->n_bias * sizeof *s->bias);
    s->p.bias = s->bias;
    s->seed = p->seed < 0 ? random_seed() : (uint64_t)p->seed;
    *out = s;
    return LLMK_OK;
}

void llmk_sampler_free(llmk_sampler *s) {
    if (!s) return;
    free(s->cand);
    free(s->count);
    free(s->hist);
    free(s->bias);
    free(s);
}

uint64_t llmk_sampler_seed(const llmk_sampler *s) { return s ? s->seed : 0; }

void llmk_sampler_reset(llmk_sampler *s) {
    if (!s) return;
    s->hist_len = s->hist_head = 0;
    s->step = 0;
    llmk_grammar_state_reset(s->grammar);
}

int llmk_sampler_set_grammar(llmk_sampler *s, llmk_grammar_state *g) {
    llmk_error_clear();
    if (!s) return llmk_fail(LLMK_INVALID_ARGUMENT, "sampler_set_grammar: NULL sampler");
    s->grammar = g;
    return LLMK_OK;
}

llmk_grammar_state *llmk_sampler_grammar(const llmk_sampler *s) { return s ? s->grammar : NULL; }

int llmk_sampler_accept(llmk_sampler *s, int32_t id) {
    llmk_error_clear();
    if (!s) return llmk_fail(LLMK_INVALID_ARGUMENT, "sampler_accept: NULL sampler");
    if (id < 0 || (size_t)id >= s->n_vocab)
        return llmk_fail(LLMK_INVALID_TOKEN, "sampler_accept: token %d, vocabulary has %zu",
                         (int)id, s->n_vocab);
    if (!s->hist_cap) return LLMK_OK;
    s->hist[s->hist_head] = id;
    s->hist_head = (s->hist_head + 1) % s->hist_cap;
    if (s->hist_len < s->hist_cap) s->hist_len++;
    return LLMK_OK;
}

/* ---- stages ---------------------------------------------------------- */

/* The total order every sort uses: higher logit first, then lower id, so
 * ties are broken the same way on every run and every libc. */
static int better(const llmk_token_prob *a, const llmk_token_prob *b) {
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

/* Typical-p order: the score (stored in .p) ascending, then the logit order. */
static int more_typical(const llmk_token_prob *a, const llmk_token_prob *b) {
    if (a->p != b->p) return a->p < b->p;
    return better(a, b);
}

typedef int (*before_fn)(const llmk_token_prob *, const llmk_token_prob *);

/* Heap over h[0..n) whose root is the element that sorts LAST under
 * `before`. Sorting is an in-place heapsort on these, not qsort: glibc's
 * qsort may malloc a merge buffer, and the sampler allocates nothing per
 * token. The order is total, so the result does not depend on the method. */
static void sift_down(llmk_token_prob *h, size_t n, size_t i, before_fn before) {
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && before(&h[m], &h[l])) m = l;
        if (r < n && before(&h[m], &h[r])) m = r;
        if (m == i) return;
        llmk_token_prob t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

static void heapify(llmk_token_prob *h, size_t n, before_fn before) {
    for (size_t i = n / 2; i-- > 0;) sift_down(h, n, i, before);
}

/* h[0..n) must already be a heap: pop the last-sorting element to the end. */
static void heap_drain(llmk_token_prob *h, size_t n, before_fn before) {
    for (size_t end = n; end-- > 1;) {
        llmk_token_prob t = h[0];
        h[0] = h[end];
        h[end] = t;
        sift_down(h, end, 0, before);
    }
}

static void sort_by(llmk_token_prob *h, size_t n, before_fn before) {
    heapify(h, n, before);
    heap_drain(h, n, before);
}

static void sort_desc(llmk_sampler *s) {
    if (!s->sorted) sort_by(s->cand, s->n_cand, better);
    s->sorted = true;
}

/* Probabilities over the current candidates (max-subtracted, double). A
 * +inf logit takes all the mass, shared with any other +inf. */
static void softmax(llmk_sampler *s) {
    llmk_token_prob *c = s->cand;
    double mx = -INFINITY;
    for (size_t i = 0; i < s->n_cand; i++)
        if (c[i].logit > mx) mx = c[i].logit;
    double sum = 0;
    for (size_t i = 0; i < s->n_cand; i++) {
        double e = isinf(mx) ? (c[i].logit == mx ? 1.0 : 0.0) : exp(c[i].logit - mx);
        c[i].p = e;
        sum += e;
    }
    for (size_t i = 0; i < s->n_cand; i++) c[i].p /= sum;
}

static double entropy(const llmk_sampler *s) {
    double h = 0;
    for (size_t i = 0; i < s->n_cand; i++)
        if (s->cand[i].p > 0) h -= s->cand[i].p * log(s->cand[i].p);
    return h;
}

/* Does a stage leave the candidates as they are, whatever they are? */
static bool stage_idle(const llmk_sampler *s, int stage) {
    const llmk_sampler_params *p = &s->p;
    switch (stage) {
    case LLMK_STAGE_PENALTIES:
        return !s->hist_len || (p->repeat_penalty == 1.0 && p->frequency_penalty == 0 && p->presence_penalty == 0);
    case LLMK_STAGE_TOP_K: return p->top_k <= 0;
    case LLMK_STAGE_MIN_P: return p->min_p <= 0;
    case LLMK_STAGE_TOP_P: return p->top_p >= 1.0;
    case LLMK_STAGE_TYPICAL_P: return p->typical_p >= 1.0;
    case LLMK_STAGE_ETA: return p->eta <= 0;
    default: return false;
    }
}

static void stage_penalties(llmk_sampler *s) {
    const llmk_sampler_params *p = &s->p;
    if (stage_idle(s, LLMK_STAGE_PENALTIES)) return;
    for (size_t i = 0; i < s->hist_len; i++) s->count[s->hist[i]]++;
    for (size_t i = 0; i < s->n_cand; i++) {
        int32_t n = s->count[s->cand[i].id];
        if (!n) continue;
        double l = llmk_repetition_penalty_scale(s->cand[i].logit, p->repeat_penalty);
        s->cand[i].logit =
            llmk_token_frequency_penalty(l, (double)n, p->frequency_penalty, p->presence_penalty);
    }
    for (size_t i = 0; i < s->hist_len; i++) s->count[s->hist[i]] = 0;
    s->sorted = false;
}

/* Temperature <= 0: keep the maximum only (ties to the lowest id). */
static void greedy(llmk_sampler *s) {
    double mx = -INFINITY;
    for (size_t i = 0; i < s->n_cand; i++)
        if (s->cand[i].logit > mx) mx = s->cand[i].logit;
    size_t best = 0;
    bool found = false;
    for (size_t i = 0; i < s->n_cand; i++)
        if (llmk_greedy_token_id(s->cand[i].logit, mx) == 1.0 &&
            (!found || s->cand[i].id < s->cand[best].id)) {
            best = i;
            found = true;
        }
    s->cand[0] = s->cand[best];
    s->cand[0].p = 1.0;
    s->n_cand = 1;
    s->sorted = true;
}

static void stage_temperature(llmk_sampler *s) {
    double t = s->p.temperature;
    for (size_t i = 0; i < s->n_cand; i++)
        s->cand[i].logit = llmk_temperature_scale(s->cand[i].logit, t);
}

static void stage_top_k(llmk_sampler *s) {
    int32_t k = s->p.top_k;
    if (stage_idle(s, LLMK_STAGE_TOP_K) || (size_t)k >= s->n_cand) return; /* off, or keeps everything */
    if (!s->sorted) {
        /* Select the k best in O(n log k), then sort just those. */
        llmk_token_prob *h = s->cand;
        heapify(h, (size_t)k, better); /* root: the weakest kept token */
        for (size_t i = (size_t)k; i < s->n_cand; i++)
            if (better(&h[i], &h[0])) {
                h[0] = h[i];
                sift_down(h, (size_t)k, 0, better);
            }
        heap_drain(h, (size_t)k, better);
        s->sorted = true;
    }
    /* The cut is the first rank llmk_top_k_accept refuses. */
    size_t keep = 0;
    while (keep < s->n_cand && llmk_top_k_accept((double)keep, (double)k) == 1.0) keep++;
    s->n_cand = keep ? keep : 1;
}

static void stage_min_p(llmk_sampler *s) {
    if (stage_idle(s, LLMK_STAGE_MIN_P)) return;
    softmax(s);
    double mx = 0;
    for (size_t i = 0; i < s->n_cand; i++)
        if (s->cand[i].p > mx) mx = s->cand[i].p;
    double thr = llmk_min_p_threshold(mx, s->p.min_p);
    size_t j = 0;
    for (size_t i = 0; i < s->n_cand; i++)
        if (s->cand[i].p >= thr) s->cand[j++] = s->cand[i];
    s->n_cand = j; /* the maximum always passes (thr <= mx) */
}

/* Keep a prefix of the current order while the mass before each token is
 * below p (seed 001's top_p_cumulative); at least one token. */
static void cumulative_cut(llmk_sampler *s, double p) {
    double cum = 0;
    size_t keep = 0;
    while (keep < s->n_cand && llmk_top_p_cumulative(s->cand[keep].p, cum, p) == 1.0)
        cum += s->cand[keep++].p;
    s->n_cand = keep ? keep : 1;
}

static void stage_top_p(llmk_sampler *s) {
    if (stage_idle(s, LLMK_STAGE_TOP_P)) return;
    sort_desc(s);
    softmax(s);
    cumulative_cut(s, s->p.top_p);
}

static void stage_typical_p(llmk_sampler *s) {
    if (stage_idle(s, LLMK_STAGE_TYPICAL_P)) return;
    softmax(s);
    double h = entropy(s);
    for (size_t i = 0; i < s->n_cand; i++) {
        double pr = s->cand[i].p;
        /* a zero-probability token is the least typical of all */
        s->cand[i].p = pr > 0 ? llmk_typical_p_score(log(pr), h) : INFINITY;
    }
    sort_by(s->cand, s->n_cand, more_typical);
    s->sorted = false;
    softmax(s);
    cumulative_cut(s, s->p.typical_p);
}

static void stage_eta(llmk_sampler *s) {
    if (stage_idle(s, LLMK_STAGE_ETA)) return;
    softmax(s);
    double h = entropy(s);
    size_t j = 0, best = 0;
    for (size_t i = 0; i < s->n_cand; i++)
        if (better(&s->cand[i], &s->cand[best])) best = i;
    llmk_token_prob top = s->cand[best];
    for (size_t i = 0; i < s->n_cand; i++)
        if (llmk_eta_sampling_accept(s->cand[i].p, h, s->p.eta) == 1.0) s->cand[j++] = s->cand[i];
    if (!j) s->cand[j++] = top;
    s->n_cand = j;
}

/* Load the row with the logit biases applied; banned (-inf) tokens leave. */
static int load(llmk_sampler *s, const float *logits, size_t n) {
    if (!logits) return llmk_fail(LLMK_INVALID_ARGUMENT, "sampler: NULL logits");
    if (n != s->n_vocab)
        return llmk_fail(LLMK_LOGITS_LENGTH_MISMATCH, "sampler: %zu logits, vocabulary has %zu", n,
                         s->n_vocab);
    for (size_t i = 0; i < n; i++) {
        if (isnan(logits[i]))
            return llmk_fail(LLMK_NAN_INPUT, "sampler: logit of token %zu is NaN", i);
        s->cand[i].id = (int32_t)i;
        s->cand[i].logit = logits[i];
        s->cand[i].p = 0;
    }
    for (size_t i = 0; i < s->p.n_bias; i++) s->cand[s->bias[i].id].logit += s->bias[i].bias;
    if (s->grammar) { /* before every stage: tokens the grammar refuses never compete */
        int st;
        const uint64_t *bits = llmk_grammar_state_bits(s->grammar, &st);
        if (!bits) return st;
        bool any = false;
        for (size_t i = 0; i < n; i++) {
            if (!(bits[i >> 6] >> (i & 63) & 1)) s->cand[i].logit = -INFINITY;
            else if (s->cand[i].logit > -INFINITY) any = true;
        }
        if (!any)
            return llmk_fail(LLMK_BAD_GRAMMAR, "sampler: no token the grammar allows here has a finite logit");
    }
    size_t j = 0;
    for (size_t i = 0; i < n; i++)
        if (s->cand[i].logit > -INFINITY) s->cand[j++] = s->cand[i];
    if (!j) return llmk_fail(LLMK_BAD_SAMPLER_CONFIG, "sampler: all %zu tokens have logit -inf", n);
    s->n_cand = j;
    s->sorted = false;
    return LLMK_OK;
}

/* Greedy choice in one pass over the row, when the chain would reach the
 * greedy stage with every stage before it idle and no logit bias: then the
 * chain's answer is the largest logit the grammar allows, the lowest id on
 * ties, and building n_vocab candidates (several passes: a few percent of a
 * small model's decode step) is not needed. false: take the chain (also for
 * the rows it refuses: a NaN, nothing allowed). */
static bool greedy_direct(llmk_sampler *s, const float *logits, size_t n) {
    if (s->p.temperature > 0 || s->p.n_bias || !logits || n != s->n_vocab) return false;
    for (size_t i = 0; i < s->p.n_order && s->p.order[i] != LLMK_STAGE_TEMPERATURE; i++)
        if (!stage_idle(s, s->p.order[i])) return false;
    const uint64_t *bits = NULL;
    if (s->grammar) {
        int st;
        if (!(bits = llmk_grammar_state_bits(s->grammar, &st))) return false;
    }
    size_t best = n;
    float mx = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        float v = logits[i];
        if (isnan(v)) return false;
        if (v > mx && v > -INFINITY && (!bits || (bits[i >> 6] >> (i & 63) & 1))) mx = v, best = i;
    }
    if (best == n) return false;
    s->cand[0] = (llmk_token_prob){.id = (int32_t)best, .logit = mx, .p = 1.0};
    s->n_cand = 1;
    s->sorted = true;
    return true;
}

static int run_chain(llmk_sampler *s, const float *logits, size_t n) {
    if (!s) return llmk_fail(LLMK_INVALID_ARGUMENT, "sampler: NULL sampler");
    if (greedy_direct(s, logits, n)) return LLMK_OK;
    int rc = load(s, logits, n);
    if (rc != LLMK_OK) return rc;
    bool greedy_done = false;
    for (size_t i = 0; i < s->p.n_order && !greedy_done; i++) {
        switch (s->p.order[i]) {
        case LLMK_STAGE_PENALTIES: stage_penalties(s); break;
        case LLMK_STAGE_TEMPERATURE:
            if (s->p.temperature <= 0) {
                greedy(s);
                greedy_done = true;
            } else {
                stage_temperature(s);
            }
            break;
        case LLMK_STAGE_TOP_K: stage_top_k(s); break;
        case LLMK_STAGE_MIN_P: stage_min_p(s); break;
        case LLMK_STAGE_TOP_P: stage_top_p(s); break;
        case LLMK_STAGE_TYPICAL_P: stage_typical_p(s); break;
        case LLMK_STAGE_ETA: stage_eta(s); break;
        default: LLMK_CHECK(0);
        }
    }
    /* A chain without a temperature stage is still greedy at temperature <= 0. */
    if (!greedy_done && s->p.temperature <= 0) greedy(s);
    softmax(s);
    return LLMK_OK;
}

int llmk_sampler_candidates(llmk_sampler *s, const float *logits, size_t n,
                            const llmk_token_prob **cands, size_t *n_cands) {
    llmk_error_clear();
    if (!cands || !n_cands) return llmk_fail(LLMK_INVALID_ARGUMENT, "sampler_candidates: NULL out");
    int rc = run_chain(s, logits, n);
    if (rc != LLMK_OK) return rc;
    *cands = s->cand;
    *n_cands = s->n_cand;
    return LLMK_OK;
}

int llmk_sampler_sample(llmk_sampler *s, const float *logits, size_t n, int32_t *id_out) {
    llmk_error_clear();
    if (!id_out) return llmk_fail(LLMK_INVALID_ARGUMENT, "sampler_sample: NULL out");
    int rc = run_chain(s, logits, n);
    if (rc != LLMK_OK) return rc;
    double u = llmk_rng_uniform(s->seed, s->step++);
    double cum = 0;
    size_t pick = s->n_cand - 1;
    while (pick > 0 && !(s->cand[pick].p > 0)) pick--; /* last token that can be drawn */
    for (size_t i = 0; i < s->n_cand; i++) {
        cum += s->cand[i].p;
        if (u < cum && s->cand[i].p > 0) {
            pick = i;
            break;
        }
    }
    *id_out = s->cand[pick].id;
    if (s->grammar) return llmk_grammar_state_accept(s->grammar, *id_out);
    return LLMK_OK;
}

/* ---- stop strings ---------------------------------------------------- */

struct llmk_stop_matcher {
    char **stops;
    size_t *lens;
    size_t n, max_len;
    char *held; /* max_len bytes */
    size_t n_held;
    bool stopped;
};

int llmk_stop_init(const char *const *stops, size_t n_stops, llmk_stop_matcher **out) {
    llmk_error_clear();
    if (!out) return llmk_fail(LLMK_INVALID_ARGUMENT, "stop_init: NULL out");
    *out = NULL;
    if (n_stops && !stops) return llmk_fail(LLMK_INVALID_ARGUMENT, "stop_init: NULL strings");
    llmk_stop_matcher *m = calloc(1, sizeof *m);
    if (!m) return llmk_fail(LLMK_OUT_OF_MEMORY, "stop_init");
    m->stops = calloc(n_stops ? n_stops : 1, sizeof *m->stops);
    m->lens = calloc(n_stops ? n_stops : 1, sizeof *m->lens);
    if (!m->stops || !m->lens) goto oom;
    for (size_t i = 0; i < n_stops; i++) {
        if (!stops[i] || !*stops[i]) {
            llmk_stop_free(m);
            return llmk_fail(LLMK_BAD_REQUEST, "stop string %zu is empty", i);
        }
        m->lens[i] = strlen(stops[i]);
        m->stops[i] = strdup(stops[i]);
        m->n = i + 1;
        if (!m->stops[i]) goto oom;
        if (m->lens[i] > m->max_len) m->max_len = m->lens[i];
    }
    m->held = malloc(m->max_len + 1);
    if (!m->held) goto oom;
    *out = m;
    return LLMK_OK;
oom:
    llmk_stop_free(m);
    return llmk_fail(LLMK_OUT_OF_MEMORY, "stop_init: %zu strings", n_stops);
}

void llmk_stop_free(llmk_stop_matcher *m) {
    if (!m) return;
    for (size_t i = 0; i < m->n; i++) free(m->stops[i]);
    free(m->stops);
    free(m->lens);
    free(m->held);
    free(m);
}

size_t llmk_stop_max_len(const llmk_stop_matcher *m) { return m ? m->max_len : 0; }

void llmk_stop_reset(llmk_stop_matcher *m) {
    if (!m) return;
    m->n_held = 0;
    m->stopped = false;
}

/* Length of the longest suffix of held[] that is a proper prefix of some
 * stop string (what must stay held back). */
static size_t held_prefix_len(const llmk_stop_matcher *m) {
    size_t best = 0;
    for (size_t i = 0; i < m->n; i++) {
        size_t lim = m->lens[i] - 1 < m->n_held ? m->lens[i] - 1 : m->n_held;
        for (size_t k = lim; k > best; k--)
            if (!memcmp(m->held + m->n_held - k, m->stops[i], k)) {
                best = k;
                break;
            }
    }
    return best;
}

int llmk_stop_feed(llmk_stop_matcher *m, const char *text, size_t len, char *out, size_t cap,
                   size_t *n_out, bool *stopped) {
    llmk_error_clear();
    if (!m || !n_out || !stopped || (len && !text) || (cap && !out))
        return llmk_fail(LLMK_INVALID_ARGUMENT, "stop_feed: NULL argument");
    *n_out = 0;
    *stopped = m->stopped;
    if (m->stopped) return LLMK_OK;
    if (cap < len + m->max_len)
        return llmk_fail(LLMK_BUFFER_TOO_SMALL, "stop_feed: %zu bytes in, output holds %zu, needs %zu",
                         len, cap, len + m->max_len);
    size_t w = 0;
    for (size_t b = 0; b < len; b++) {
        if (!m->n) {
            out[w++] = text[b];
            continue;
        }
        m->held[m->n_held++] = text[b];
        /* Of the stop strings ending at this byte, the longest decides, so
         * no byte of any of them is shown. */
        size_t hit = 0;
        for (size_t i = 0; i < m->n; i++)
            if (m->n_held >= m->lens[i] && m->lens[i] > hit &&
                !memcmp(m->held + m->n_held - m->lens[i], m->stops[i], m->lens[i]))
                hit = m->lens[i];
        if (hit) {
            size_t before = m->n_held - hit;
            memcpy(out + w, m->held, before);
            w += before;
            m->n_held = 0;
            m->stopped = *stopped = true;
            *n_out = w;
            return LLMK_OK;
        }
        size_t keep = held_prefix_len(m);
        size_t emit = m->n_held - keep;
        memcpy(out + w, m->held, emit);
        w += emit;
        memmove(m->held, m->held + emit, keep);
        m->n_held = keep;
    }
    *n_out = w;
    return LLMK_OK;
}

int llmk_stop_flush(llmk_stop_matcher *m, char *out, size_t cap, size_t *n_out) {
    llmk_error_clear();
    if (!m || !n_out || (cap && !out))
        return llmk_fail(LLMK_INVALID_ARGUMENT, "stop_flush: NULL argument");
    *n_out = 0;
    if (cap < m->n_held)
        return llmk_fail(LLMK_BUFFER_TOO_SMALL, "stop_flush: %zu bytes held, output holds %zu",
                         m->n_held, cap);
    memcpy(out, m->held, m->n_held);
    *n_out = m->n_held;
    m->n_held = 0;
    return LLMK_OK;
}
