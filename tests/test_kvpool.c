/* The paged KV block pool (src/kvpool.h). A randomized workload of starts,
 * appends, truncations and releases over shared prompt prefixes is checked
 * after every operation against a brute-force model kept here: each
 * sequence's token list, and a simulated K/V store in which every slot holds a
 * fingerprint of the whole token prefix that produced it, so a block reused
 * for the wrong prefix or position shows up as a wrong fingerprint. Around it:
 * the seed-001 formulas against the pool's counted figures, admission against
 * llmk_admission_control_accept, refusals, all-or-nothing failures,
 * copy-on-write, LRU order, and hash collisions that must not be hits. */
#include "check.h"
#include "internal.h"
#include "kvpool.h"
#include "llmk_formulas.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { NS_MAX = 8, NB_MAX = 128, BS_MAX = 16, TOK_MAX = 128 };

/* ---- hashes injected to make collisions ---------------------------------- */

/* Every block collides with every other. */
static uint64_t hash_const(uint64_t parent, const int32_t *t, int32_t n) {
    (void)parent, (void)t, (void)n;
    return 7;
}

/* Ignores the parent: equal token blocks collide whatever precedes them, so
 * only the pool's exact parent comparison keeps prefixes apart. */
static uint64_t hash_no_parent(uint64_t parent, const int32_t *t, int32_t n) {
    (void)parent;
    uint64_t h = 1469598103934665603ull;
    for (int32_t i = 0; i < n; i++) h = (h ^ (uint32_t)t[i]) * 1099511628211ull;
    return h;
}

/* ---- the brute-force model ------------------------------------------------ */

struct model {
    llmk_kvpool_params prm;
    bool active[NS_MAX];
    int32_t len[NS_MAX];
    int32_t tok[NS_MAX][TOK_MAX];
    uint64_t fp[NS_MAX][TOK_MAX]; /* fingerprint of tok[s][0..p] */
    uint64_t kv[NB_MAX][BS_MAX];  /* what the caller's storage holds in each slot */
};

static uint64_t mix(uint64_t x) {
    x ^= x >> 30, x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27, x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* The "K/V" of position p: depends on every token up to p, as real K/V does. */
static uint64_t fp_next(uint64_t prev, int32_t tok, int32_t pos) {
    return mix(prev ^ mix((uint64_t)(uint32_t)tok * 0x9e3779b97f4a7c15ull + (uint64_t)pos));
}

static void model_set_tokens(struct model *m, int s, int32_t from, const int32_t *t, int32_t n) {
    for (int32_t i = 0; i < n; i++) {
        int32_t p = from + i;
        m->tok[s][p] = t[i];
        m->fp[s][p] = fp_next(p ? m->fp[s][p - 1] : 0x5eedull, t[i], p);
    }
}

/* The caller computing K/V for positions [from, from+n) of s after an append. */
static void model_write_kv(struct model *m, const llmk_kvpool *p, int s, int32_t from, int32_t n) {
    int32_t bs = m->prm.block_size;
    for (int32_t q = from; q < from + n; q++) m->kv[llmk_kvpool_block(p, s, q)][q % bs] = m->fp[s][q];
}

static int32_t ceil_div(int32_t a, int32_t b) {
    return (a + b - 1) / b;
}

/* Every invariant the pool promises, recomputed from the model and the pool's
 * public queries. Returns false (after counting the failures) on the first
 * broken one, so a long run stops near the operation that broke it. */
static bool check_all(llmk_kvpool *p, const struct model *m) {
    int before = check_failed;
    const int32_t nb_pool = m->prm.n_blocks, bs = m->prm.block_size;
    int32_t refs[NB_MAX] = {0};
    int64_t n_tokens = 0, n_refs = 0, n_frag = 0;
    int n_seqs = 0;
    for (int s = 0; s < m->prm.n_seq_max; s++) {
        CHECK(llmk_kvpool_active(p, s) == m->active[s]);
        if (!m->active[s]) continue;
        n_seqs++;
        int32_t len = m->len[s], nb = 0;
        const int32_t *t = llmk_kvpool_table(p, s, &nb);
        CHECK_EQ_INT(llmk_kvpool_len(p, s), len);
        CHECK_EQ_INT(nb, ceil_div(len, bs));
        CHECK_EQ_DBL((double)nb, llmk_paged_attention_block_count(len, bs));
        if (!t) return false;
        for (int32_t i = 0; i < nb; i++) refs[t[i]]++;
        for (int32_t q = 0; q < len; q++) {
            int32_t b = llmk_kvpool_block(p, s, q);
            if (b != t[q / bs] || llmk_kvpool_block_tokens(p, b)[q % bs] != m->tok[s][q] ||
                m->kv[b][q % bs] != m->fp[s][q]) {
                CHECK(!"block content: tokens or K/V at a position differ from the model");
                fprintf(stderr, "  seq %d pos %d block %d\n", s, q, b);
                return false;
            }
        }
        n_tokens += len, n_refs += nb, n_frag += (int64_t)nb * bs - len;
    }
    /* The lists: no block on two, members in the right state, every block
     * that is on neither held by some table. */
    int32_t on[NB_MAX] = {0}, list[NB_MAX + 1];
    for (int st = LLMK_KVPOOL_FREE; st <= LLMK_KVPOOL_CACHED; st++) {
        int32_t n = llmk_kvpool_list(p, st, list, NB_MAX + 1);
        CHECK(n >= 0 && n <= nb_pool);
        for (int32_t i = 0; i < n && i <= nb_pool; i++) {
            CHECK_EQ_INT(on[list[i]], 0);
            on[list[i]] = st + 1;
        }
    }
    int32_t n_free = 0, n_cached = 0, n_used = 0;
    for (int32_t b = 0; b < nb_pool; b++) {
        CHECK_EQ_INT(llmk_kvpool_block_refs(p, b), refs[b]);
        int st = llmk_kvpool_block_state(p, b);
        if (refs[b] > 0) {
            n_used++;
            CHECK(st == LLMK_KVPOOL_USED && on[b] == 0);
        } else if (on[b] == 1) {
            n_free++;
            CHECK(st == LLMK_KVPOOL_FREE && !llmk_kvpool_block_registered(p, b));
        } else {
            n_cached++;
            CHECK(on[b] == 2 && st == LLMK_KVPOOL_CACHED && llmk_kvpool_block_registered(p, b));
        }
    }
    llmk_kvpool_stats sts;
    llmk_kvpool_stats_get(p, &sts);
    CHECK_EQ_INT(sts.n_free, n_free);
    CHECK_EQ_INT(sts.n_cached, n_cached);
    CHECK_EQ_INT(sts.n_used, n_used);
    CHECK_EQ_INT(sts.n_free + sts.n_cached + sts.n_used, nb_pool);
    CHECK_EQ_INT(sts.n_seqs, n_seqs);
    CHECK_EQ_INT(sts.n_tokens, n_tokens);
    CHECK_EQ_INT(sts.n_refs, n_refs);
    CHECK_EQ_INT(sts.n_shared, n_refs - n_used);
    CHECK_EQ_INT(sts.n_frag_slots, n_frag);
    CHECK_EQ_DBL(sts.shared_bytes, (double)(n_refs - n_used) * bs * sts.token_bytes);
    char why[256] = "";
    bool ok = llmk_kvpool_consistent(p, why, sizeof why);
    if (!ok) fprintf(stderr, "  inconsistent: %s\n", why);
    CHECK(ok);
    return check_failed == before;
}

/* Everything a caller can observe, to show a refused call changed nothing. */
struct snap {
    bool active[NS_MAX];
    int32_t len[NS_MAX], table[NS_MAX][TOK_MAX];
    int32_t refs[NB_MAX], state[NB_MAX], reg[NB_MAX], toks[NB_MAX][BS_MAX];
    int32_t lists[2][NB_MAX + 1], n_list[2];
    llmk_kvpool_stats st;
};

static void take_snap(const llmk_kvpool *p, const llmk_kvpool_params *prm, struct snap *sn) {
    memset(sn, 0, sizeof *sn);
    for (int s = 0; s < prm->n_seq_max; s++) {
        int32_t nb = 0;
        const int32_t *t = llmk_kvpool_table(p, s, &nb);
        sn->active[s] = llmk_kvpool_active(p, s);
        sn->len[s] = llmk_kvpool_len(p, s);
        if (t) memcpy(sn->table[s], t, (size_t)nb * sizeof *t);
    }
    for (int32_t b = 0; b < prm->n_blocks; b++) {
        sn->refs[b] = llmk_kvpool_block_refs(p, b);
        sn->state[b] = llmk_kvpool_block_state(p, b);
        sn->reg[b] = llmk_kvpool_block_registered(p, b);
        memcpy(sn->toks[b], llmk_kvpool_block_tokens(p, b), (size_t)prm->block_size * sizeof(int32_t));
    }
    for (int l = 0; l < 2; l++) sn->n_list[l] = llmk_kvpool_list(p, l, sn->lists[l], NB_MAX + 1);
    llmk_kvpool_stats_get(p, &sn->st);
}

static bool unchanged(const llmk_kvpool *p, const llmk_kvpool_params *prm, const struct snap *before) {
    static struct snap now;
    take_snap(p, prm, &now);
    return memcmp(&now, before, sizeof now) == 0;
}

/* ---- the randomized workload --------------------------------------------- */

static uint64_t rng_state;
static uint32_t rnd(uint32_t n) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11) % n;
}

/* Prompts: one of a few shared prefixes, then a random tail. A vocabulary of
 * three ids makes equal blocks under different prefixes common. */
enum { VOCAB = 3 };
static int32_t make_prompt(int32_t *out, int32_t cap) {
    static const int32_t prefix[4][20] = {
        {0},
        {1, 2, 0, 1, 2, 2, 1},
        {2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0, 2},
        {1, 2, 0, 1, 2, 2, 1, 0, 0, 1, 2, 1, 1, 0, 2, 2, 0, 1, 2, 0},
    };
    static const int32_t plen[4] = {0, 7, 13, 20};
    int w = (int)rnd(4);
    int32_t n = plen[w] < cap ? plen[w] : cap;
    memcpy(out, prefix[w], (size_t)n * sizeof *out);
    int32_t tail = 1 + (int32_t)rnd(12);
    for (int32_t i = 0; i < tail && n < cap; i++) out[n++] = (int32_t)rnd(VOCAB);
    return n;
}

/* The longest chain a match must at least find: blocks an active sequence
 * holds registered (so not evictable) from position 0, equal to the prompt's. */
static int32_t min_match(const llmk_kvpool *p, const struct model *m, const int32_t *t, int32_t n) {
    int32_t bs = m->prm.block_size, cap = n > 0 ? (n - 1) / bs : 0, best = 0;
    for (int s = 0; s < m->prm.n_seq_max; s++) {
        if (!m->active[s]) continue;
        int32_t k = 0;
        while (k < cap && (k + 1) * bs <= m->len[s] && llmk_kvpool_block_registered(p, llmk_kvpool_block(p, s, k * bs)) &&
               memcmp(m->tok[s] + k * bs, t + k * bs, (size_t)bs * sizeof *t) == 0)
            k++;
        if (k > best) best = k;
    }
    return best * bs;
}

static struct snap g_snap;
/* What a workload exercised, so a run that never hit a path shows it. */
static struct {
    int hits, refused, cows, evicting; /* evicting: appends that had to take cached blocks */
} g_seen;

static void op_start(llmk_kvpool *p, struct model *m, int s) {
    int32_t t[TOK_MAX], cap = m->prm.max_blocks_per_seq * m->prm.block_size;
    int32_t n = make_prompt(t, cap < TOK_MAX ? cap : TOK_MAX);
    llmk_kvpool_admission ad;
    CHECK_STATUS(llmk_kvpool_admit(p, t, n, &ad), LLMK_OK);
    int32_t bs = m->prm.block_size;
    CHECK(ad.admit == (llmk_admission_control_accept(n - ad.n_cached, (double)ad.blocks_available * bs, 0.0) == 1.0));
    if (!ad.admit && rnd(2)) return; /* the scheduler would wait */
    int32_t got = -1, lo = min_match(p, m, t, n);
    CHECK_STATUS(llmk_kvpool_start(p, s, t, n, &got), LLMK_OK);
    CHECK_EQ_INT(got, ad.n_cached);
    CHECK(got % bs == 0 && got < n && got >= lo);
    g_seen.hits += got > 0;
    m->active[s] = true;
    model_set_tokens(m, s, 0, t, n);
    m->len[s] = got; /* positions 0..got-1 come from the blocks, not computed */
    take_snap(p, &m->prm, &g_snap);
    int st = llmk_kvpool_append(p, s, t + got, n - got);
    if (ad.admit) {
        CHECK_STATUS(st, LLMK_OK);
    } else {
        CHECK_STATUS(st, LLMK_CACHE_CAPACITY_EXCEEDED);
        CHECK(unchanged(p, &m->prm, &g_snap));
        g_seen.refused++;
    }
    if (st == LLMK_OK) {
        m->len[s] = n;
        model_write_kv(m, p, s, got, n - got);
    } else {
        CHECK_STATUS(llmk_kvpool_release(p, s), LLMK_OK); /* refused: gives its matched blocks back */
        m->active[s] = false, m->len[s] = 0;
    }
}

static void op_append(llmk_kvpool *p, struct model *m, int s) {
    int32_t t[16], n = 1 + (int32_t)rnd(rnd(4) ? 3 : 14), len = m->len[s];
    int32_t bs = m->prm.block_size, cap = m->prm.max_blocks_per_seq * bs;
    for (int32_t i = 0; i < n; i++) t[i] = (int32_t)rnd(VOCAB);
    llmk_kvpool_stats sts;
    llmk_kvpool_stats_get(p, &sts);
    int32_t need = ceil_div(len + n, bs) - ceil_div(len, bs);
    CHECK_EQ_INT(llmk_kvpool_append_blocks(p, s, n), need);
    int want = len + n > cap || ceil_div(len + n, bs) > m->prm.n_blocks ? LLMK_CONTEXT_FULL
               : need > sts.n_free + sts.n_cached                       ? LLMK_CACHE_CAPACITY_EXCEEDED
                                                                        : LLMK_OK;
    take_snap(p, &m->prm, &g_snap);
    CHECK_STATUS(llmk_kvpool_append(p, s, t, n), want);
    if (want != LLMK_OK) {
        CHECK(unchanged(p, &m->prm, &g_snap));
        g_seen.refused += want == LLMK_CACHE_CAPACITY_EXCEEDED;
        return;
    }
    g_seen.evicting += need > sts.n_free;
    model_set_tokens(m, s, len, t, n);
    m->len[s] = len + n;
    model_write_kv(m, p, s, len, n);
}

static void op_truncate(llmk_kvpool *p, struct model *m, int s) {
    int32_t len = m->len[s], pos = rnd(3) ? len - (int32_t)rnd((uint32_t)len + 1) : (int32_t)rnd((uint32_t)len + 1);
    int32_t bs = m->prm.block_size, k = pos / bs, r = pos % bs, nb = ceil_div(len, bs), keep = ceil_div(pos, bs);
    int32_t old = r ? llmk_kvpool_block(p, s, k * bs) : -1;
    bool copy = r && (llmk_kvpool_block_refs(p, old) > 1 || llmk_kvpool_block_registered(p, old));
    llmk_kvpool_stats sts;
    llmk_kvpool_stats_get(p, &sts);
    int32_t avail = sts.n_free + sts.n_cached;
    for (int32_t i = keep; i < nb; i++) avail += llmk_kvpool_block_refs(p, llmk_kvpool_block(p, s, i * bs)) == 1;
    int want = copy && avail < 1 ? LLMK_CACHE_CAPACITY_EXCEEDED : LLMK_OK;
    take_snap(p, &m->prm, &g_snap);
    llmk_kvpool_cow cow;
    CHECK_STATUS(llmk_kvpool_truncate(p, s, pos, &cow), want);
    if (want != LLMK_OK) {
        CHECK(unchanged(p, &m->prm, &g_snap));
        g_seen.refused++;
        return;
    }
    m->len[s] = pos;
    if (!copy) {
        CHECK(cow.src == -1 && cow.dst == -1 && cow.n_tokens == 0);
        return;
    }
    CHECK(cow.src == old && cow.dst == llmk_kvpool_block(p, s, k * bs) && cow.n_tokens == r && cow.dst != old);
    if (cow.src < 0 || cow.dst < 0) return;
    g_seen.cows++;
    memcpy(m->kv[cow.dst], m->kv[cow.src], (size_t)cow.n_tokens * sizeof(uint64_t)); /* the caller's copy */
}

/* ops operations on a pool built from prm; stops at the first broken check. */
static void workload(llmk_kvpool_params prm, uint64_t seed, int ops, const char *name) {
    static struct model m;
    memset(&m, 0, sizeof m);
    m.prm = prm;
    LLMK_CHECK(prm.n_seq_max <= NS_MAX && prm.n_blocks <= NB_MAX && prm.block_size <= BS_MAX &&
               prm.max_blocks_per_seq * prm.block_size <= TOK_MAX);
    llmk_kvpool *p = NULL;
    CHECK_STATUS(llmk_kvpool_init(&prm, &p), LLMK_OK);
    if (!p) return;
    rng_state = seed;
    memset(&g_seen, 0, sizeof g_seen);
    int counts[4] = {0};
    for (int i = 0; i < ops; i++) {
        int s = (int)rnd((uint32_t)prm.n_seq_max), op;
        if (!m.active[s]) op = 0;
        else op = rnd(10) < 6 ? 1 : rnd(2) ? 2 : 3;
        if (op == 0) op_start(p, &m, s);
        else if (op == 1) op_append(p, &m, s);
        else if (op == 2) op_truncate(p, &m, s);
        else {
            CHECK_STATUS(llmk_kvpool_release(p, s), LLMK_OK);
            m.active[s] = false, m.len[s] = 0;
        }
        counts[op]++;
        if (!check_all(p, &m)) {
            fprintf(stderr, "  %s: stopped after operation %d (kind %d, sequence %d)\n", name, i, op, s);
            break;
        }
    }
    llmk_kvpool_stats sts;
    llmk_kvpool_stats_get(p, &sts);
    printf("%s: %d starts (%d prefix hits), %d appends, %d truncates (%d copies), %d releases, %d refused for "
           "blocks, %d appends evicting\n",
           name, counts[0], g_seen.hits, counts[1], counts[2], g_seen.cows, counts[3], g_seen.refused, g_seen.evicting);
    /* A workload that never shared, copied or ran out tested less than it says. */
    CHECK(g_seen.hits > 0 && g_seen.refused > 0 && g_seen.evicting > 0);
    CHECK(g_seen.cows > 0 || prm.block_size == 1); /* one-token blocks are never cut inside */
    for (int s = 0; s < prm.n_seq_max; s++)
        if (m.active[s]) CHECK_STATUS(llmk_kvpool_release(p, s), LLMK_OK);
    llmk_kvpool_stats_get(p, &sts);
    CHECK_EQ_INT(sts.n_used, 0);
    CHECK_EQ_INT(sts.n_cached + sts.n_free, prm.n_blocks);
    llmk_kvpool_free(p);
}

static llmk_kvpool_params params(int32_t n_blocks, int32_t bs, int32_t n_seq, int32_t max_bps) {
    llmk_kvpool_params prm = {.n_blocks = n_blocks, .block_size = bs, .n_seq_max = n_seq,
                              .max_blocks_per_seq = max_bps, .n_layers = 2, .n_kv_heads = 2, .head_dim = 8,
                              .dtype_bytes = 2.0};
    return prm;
}

static void test_workloads(void) {
    llmk_kvpool_params prm = params(40, 4, 6, 12);
    workload(prm, 0x1234567ull, 4000, "workload bs4");
    prm.hash = hash_const;
    workload(prm, 0x2345678ull, 3000, "workload bs4 constant hash");
    prm.hash = hash_no_parent;
    workload(prm, 0x3456789ull, 3000, "workload bs4 parent-blind hash");
    workload(params(48, 1, 5, 24), 0x456789aull, 3000, "workload bs1");
    workload(params(8, 16, 5, 4), 0x56789abull, 3000, "workload bs16");
    workload(params(24, 2, 8, 10), 0x6789abcull, 3000, "workload bs2");
}

/* ---- deterministic cases ------------------------------------------------- */

static llmk_kvpool *make(llmk_kvpool_params prm) {
    llmk_kvpool *p = NULL;
    CHECK_STATUS(llmk_kvpool_init(&prm, &p), LLMK_OK);
    LLMK_CHECK(p);
    return p;
}

static void append_ok(llmk_kvpool *p, int s, const int32_t *t, int32_t n) {
    CHECK_STATUS(llmk_kvpool_append(p, s, t, n), LLMK_OK);
}

static int32_t start(llmk_kvpool *p, int s, const int32_t *t, int32_t n) {
    int32_t got = -1;
    CHECK_STATUS(llmk_kvpool_start(p, s, t, n, &got), LLMK_OK);
    return got;
}

static void test_refusals(void) {
    llmk_kvpool *p = NULL;
    llmk_kvpool_params prm = params(8, 4, 2, 3);
    CHECK_STATUS(llmk_kvpool_init(NULL, &p), LLMK_INVALID_ARGUMENT);
    CHECK_STATUS(llmk_kvpool_init(&prm, NULL), LLMK_INVALID_ARGUMENT);
    for (int f = 0; f < 4; f++) {
        llmk_kvpool_params bad = prm;
        int32_t *field[4] = {&bad.n_blocks, &bad.block_size, &bad.n_seq_max, &bad.max_blocks_per_seq};
        *field[f] = 0;
        CHECK_STATUS(llmk_kvpool_init(&bad, &p), LLMK_INVALID_ARGUMENT);
        CHECK(p == NULL && strstr(llmk_last_error(), "is 0"));
        *field[f] = -3;
        CHECK_STATUS(llmk_kvpool_init(&bad, &p), LLMK_INVALID_ARGUMENT);
    }
    llmk_kvpool_params bad = prm;
    bad.dtype_bytes = -1.0;
    CHECK_STATUS(llmk_kvpool_init(&bad, &p), LLMK_INVALID_ARGUMENT);
    bad.dtype_bytes = NAN;
    CHECK_STATUS(llmk_kvpool_init(&bad, &p), LLMK_INVALID_ARGUMENT);
    bad = prm, bad.head_dim = -1;
    CHECK_STATUS(llmk_kvpool_init(&bad, &p), LLMK_INVALID_ARGUMENT);
    bad = prm, bad.n_blocks = 1 << 20, bad.block_size = 1 << 12; /* 2^32 slots */
    CHECK_STATUS(llmk_kvpool_init(&bad, &p), LLMK_DIMENSION_OVERFLOW);
    bad = prm, bad.n_seq_max = 1 << 16, bad.max_blocks_per_seq = 1 << 16;
    CHECK_STATUS(llmk_kvpool_init(&bad, &p), LLMK_DIMENSION_OVERFLOW);

    p = make(prm); /* 8 blocks of 4, 2 sequences of at most 12 tokens */
    int32_t t[20] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13};
    int32_t got = 7;
    CHECK_STATUS(llmk_kvpool_start(p, 2, t, 3, &got), LLMK_INVALID_ARGUMENT);
    CHECK(got == 0 && strstr(llmk_last_error(), "sequence 2") && strstr(llmk_last_error(), "0..1"));
    CHECK_STATUS(llmk_kvpool_start(p, -1, t, 3, NULL), LLMK_INVALID_ARGUMENT);
    CHECK_STATUS(llmk_kvpool_start(p, 0, t, -1, NULL), LLMK_INVALID_ARGUMENT);
    CHECK_STATUS(llmk_kvpool_start(p, 0, NULL, 2, NULL), LLMK_INVALID_ARGUMENT);
    CHECK_STATUS(llmk_kvpool_start(p, 0, t, 13, NULL), LLMK_CONTEXT_FULL);
    CHECK(strstr(llmk_last_error(), "13 tokens") && strstr(llmk_last_error(), "12"));
    CHECK_STATUS(llmk_kvpool_start(NULL, 0, t, 1, NULL), LLMK_INVALID_ARGUMENT);
    CHECK(!llmk_kvpool_active(p, 0));
    CHECK_STATUS(llmk_kvpool_append(p, 0, t, 1), LLMK_INVALID_ARGUMENT); /* not started */
    CHECK(strstr(llmk_last_error(), "not active"));
    CHECK_STATUS(llmk_kvpool_release(p, 0), LLMK_INVALID_ARGUMENT);
    CHECK_STATUS(llmk_kvpool_truncate(p, 0, 0, NULL), LLMK_INVALID_ARGUMENT);
    CHECK_STATUS(llmk_kvpool_start(p, 0, NULL, 0, NULL), LLMK_OK); /* an empty start is fine */
    CHECK_STATUS(llmk_kvpool_start(p, 0, t, 3, NULL), LLMK_INVALID_ARGUMENT);
    CHECK(strstr(llmk_last_error(), "already active"));
    append_ok(p, 0, t, 10);
    CHECK_STATUS(llmk_kvpool_append(p, 0, t, 3), LLMK_CONTEXT_FULL);
    CHECK(strstr(llmk_last_error(), "13 tokens"));
    CHECK_STATUS(llmk_kvpool_append(p, 0, t, -1), LLMK_INVALID_ARGUMENT);
    CHECK_STATUS(llmk_kvpool_append(p, 0, NULL, 1), LLMK_INVALID_ARGUMENT);
    CHECK_STATUS(llmk_kvpool_append(p, 5, t, 1), LLMK_INVALID_ARGUMENT);
    CHECK_STATUS(llmk_kvpool_truncate(p, 0, 11, NULL), LLMK_INVALID_ARGUMENT);
    CHECK(strstr(llmk_last_error(), "10 tokens"));
    CHECK_STATUS(llmk_kvpool_truncate(p, 0, -1, NULL), LLMK_INVALID_ARGUMENT);
    CHECK_EQ_INT(llmk_kvpool_len(p, 0), 10);
    llmk_kvpool_admission ad;
    CHECK_STATUS(llmk_kvpool_admit(p, t, 13, &ad), LLMK_CONTEXT_FULL);
    CHECK(strstr(llmk_last_error(), "the request"));
    CHECK_STATUS(llmk_kvpool_admit(p, NULL, 3, &ad), LLMK_INVALID_ARGUMENT);
    CHECK_STATUS(llmk_kvpool_admit(p, t, 3, NULL), LLMK_INVALID_ARGUMENT);
    /* Queries answer out-of-range arguments without failing. */
    CHECK_EQ_INT(llmk_kvpool_block(p, 0, 10), -1);
    CHECK_EQ_INT(llmk_kvpool_block(p, 0, -1), -1);
    CHECK_EQ_INT(llmk_kvpool_block(p, 1, 0), -1);
    CHECK_EQ_INT(llmk_kvpool_len(p, 1), -1);
    CHECK_EQ_INT(llmk_kvpool_append_blocks(p, 1, 1), -1);
    CHECK_EQ_INT(llmk_kvpool_block_state(p, 8), -1);
    CHECK_EQ_INT(llmk_kvpool_block_refs(p, -1), -1);
    CHECK(llmk_kvpool_block_tokens(p, 8) == NULL);
    CHECK(llmk_kvpool_table(p, 3, NULL) == NULL);
    CHECK_STATUS(llmk_kvpool_release(p, 0), LLMK_OK);
    CHECK_STATUS(llmk_kvpool_release(p, 0), LLMK_INVALID_ARGUMENT);
    llmk_kvpool_free(p);
    llmk_kvpool_free(NULL);

    /* A table longer than the pool: a sequence that could never fit is
     * context-full, not a capacity shortage that preemption would cure. */
    p = make(params(2, 4, 2, 10));
    CHECK_STATUS(llmk_kvpool_start(p, 0, t, 9, NULL), LLMK_CONTEXT_FULL);
    CHECK(strstr(llmk_last_error(), "3 blocks") && strstr(llmk_last_error(), "pool has 2"));
    CHECK_STATUS(llmk_kvpool_start(p, 0, t, 8, NULL), LLMK_OK);
    append_ok(p, 0, t, 4);
    CHECK_STATUS(llmk_kvpool_start(p, 1, NULL, 0, NULL), LLMK_OK);
    append_ok(p, 1, t, 1);
    CHECK_STATUS(llmk_kvpool_append(p, 0, t, 5), LLMK_CONTEXT_FULL); /* 3 blocks */
    CHECK(strstr(llmk_last_error(), "pool has 2"));
    CHECK_STATUS(llmk_kvpool_append(p, 0, t, 4), LLMK_CACHE_CAPACITY_EXCEEDED); /* 2 blocks, none left */
    llmk_kvpool_free(p);
}

/* A refused append leaves every observable thing as it was, and the same
 * append succeeds once a release has made room. */
static void test_all_or_nothing(void) {
    llmk_kvpool_params prm = params(5, 4, 3, 8);
    llmk_kvpool *p = make(prm);
    int32_t t[32];
    for (int i = 0; i < 32; i++) t[i] = i;
    CHECK_EQ_INT(start(p, 0, t, 0), 0);
    append_ok(p, 0, t, 14); /* 4 blocks: 3 full (registered) and a partial one */
    CHECK_EQ_INT(start(p, 1, t + 16, 0), 0);
    append_ok(p, 1, t + 16, 2); /* the last block */
    static struct snap before;
    take_snap(p, &prm, &before);
    CHECK_EQ_INT(llmk_kvpool_append_blocks(p, 0, 3), 1);
    CHECK_STATUS(llmk_kvpool_append(p, 0, t, 3), LLMK_CACHE_CAPACITY_EXCEEDED);
    CHECK(strstr(llmk_last_error(), "needs 1 new blocks") && strstr(llmk_last_error(), "0 free and 0 cached"));
    CHECK(unchanged(p, &prm, &before));
    append_ok(p, 0, t + 14, 2); /* fills the partial block: no new block */
    CHECK_STATUS(llmk_kvpool_release(p, 1), LLMK_OK);
    append_ok(p, 0, t, 3);
    CHECK_EQ_INT(llmk_kvpool_len(p, 0), 19);
    llmk_kvpool_free(p);
}

/* Release order and allocation order: free blocks go first, then the least
 * recently used cached block; a hit takes a block off the LRU list, and a
 * release puts a sequence's tail blocks before its head blocks. */
static void test_lru(void) {
    llmk_kvpool_params prm = params(6, 2, 3, 6);
    llmk_kvpool *p = make(prm);
    int32_t a[7] = {1, 1, 2, 2, 3, 3, 9}, list[8];
    start(p, 0, a, 0);
    append_ok(p, 0, a, 7); /* blocks 0,1,2 registered; 3 partial */
    const int32_t *t0 = llmk_kvpool_table(p, 0, NULL);
    int32_t b0 = t0[0], b1 = t0[1], b2 = t0[2], b3 = t0[3];
    CHECK(b0 == 0 && b1 == 1 && b2 == 2 && b3 == 3); /* a fresh pool hands out ids in order */
    CHECK_STATUS(llmk_kvpool_release(p, 0), LLMK_OK);
    CHECK_EQ_INT(llmk_kvpool_list(p, LLMK_KVPOOL_CACHED, list, 8), 3);
    CHECK(list[0] == b2 && list[1] == b1 && list[2] == b0);
    CHECK_EQ_INT(llmk_kvpool_list(p, LLMK_KVPOOL_FREE, list, 8), 3); /* 4, 5, then the partial 3 */
    CHECK(list[0] == 4 && list[1] == 5 && list[2] == b3);
    /* A hit on the first block: it leaves the LRU list. */
    int32_t pre[3] = {1, 1, 7};
    CHECK_EQ_INT(start(p, 1, pre, 3), 2);
    CHECK_EQ_INT(llmk_kvpool_block(p, 1, 0), b0);
    CHECK_EQ_INT(llmk_kvpool_block_state(p, b0), LLMK_KVPOOL_USED);
    CHECK_EQ_INT(llmk_kvpool_list(p, LLMK_KVPOOL_CACHED, list, 8), 2);
    /* Allocation: the three free blocks, then b2, the least recently used. */
    int32_t x[8] = {5, 5, 5, 5, 5, 5, 5, 5};
    start(p, 2, x, 0);
    append_ok(p, 2, x, 7);
    const int32_t *t2 = llmk_kvpool_table(p, 2, NULL);
    CHECK(t2[0] == 4 && t2[1] == 5 && t2[2] == b3 && t2[3] == b2);
    CHECK(llmk_kvpool_block_registered(p, b1) && !llmk_kvpool_block_registered(p, b2));
    /* [1 1 | 2 2] is still cached; [1 1 | 2 2 | 3 3] is not any more. */
    llmk_kvpool_admission ad;
    CHECK_STATUS(llmk_kvpool_admit(p, a, 7, &ad), LLMK_OK);
    CHECK_EQ_INT(ad.n_cached, 4);
    CHECK_EQ_INT(ad.blocks_needed, 2);
    CHECK_EQ_INT(ad.blocks_available, 0); /* b1 would leave the LRU list for the match */
    CHECK(!ad.admit);
    llmk_kvpool_free(p);
}

/* Match policy: whole blocks only, and never the whole prompt. */
static void test_match_policy(void) {
    llmk_kvpool *p = make(params(16, 4, 3, 4));
    int32_t t[16];
    for (int i = 0; i < 16; i++) t[i] = 100 + i;
    start(p, 0, t, 0);
    append_ok(p, 0, t, 16); /* 4 registered blocks */
    static const struct {
        int32_t n, want;
    } cases[] = {{0, 0}, {1, 0}, {4, 0}, {5, 4}, {8, 4}, {9, 8}, {15, 12}, {16, 12}};
    for (size_t i = 0; i < LLMK_ARRAY_LEN(cases); i++) {
        CHECK_EQ_INT(start(p, 1, t, cases[i].n), cases[i].want);
        CHECK_EQ_INT(llmk_kvpool_len(p, 1), cases[i].want);
        CHECK_STATUS(llmk_kvpool_release(p, 1), LLMK_OK);
    }
    /* A prompt that differs inside block 2 matches blocks 0 and 1 only. */
    int32_t u[16];
    memcpy(u, t, sizeof u);
    u[10] = 7;
    CHECK_EQ_INT(start(p, 1, u, 16), 8);
    llmk_kvpool_free(p);
}

/* Hash collisions are never hits: every block hashes alike, yet a prompt
 * that differs in one token of a block stops the match there. */
static void test_collisions(void) {
    llmk_kvpool_params prm = params(16, 4, 3, 4);
    prm.hash = hash_const;
    llmk_kvpool *p = make(prm);
    int32_t a[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, b[9] = {1, 2, 3, 5, 5, 6, 7, 8, 9}, c[9] = {1, 2, 3, 4, 5, 6, 7, 9, 9};
    start(p, 0, a, 0);
    append_ok(p, 0, a, 9);
    CHECK_EQ_INT(start(p, 1, b, 9), 0);
    append_ok(p, 1, b, 9); /* registers blocks that collide with a's */
    CHECK_EQ_INT(start(p, 2, c, 9), 4);
    CHECK_STATUS(llmk_kvpool_release(p, 2), LLMK_OK);
    CHECK_EQ_INT(start(p, 2, a, 9), 8);
    CHECK_EQ_INT(llmk_kvpool_block(p, 2, 4), llmk_kvpool_block(p, 0, 4));
    CHECK_STATUS(llmk_kvpool_release(p, 2), LLMK_OK);
    CHECK_EQ_INT(start(p, 2, b, 9), 8);
    CHECK_EQ_INT(llmk_kvpool_block(p, 2, 4), llmk_kvpool_block(p, 1, 4));
    llmk_kvpool_free(p);
}

/* The parent of a block is compared by chain id, never by block id: a block
 * whose parent was evicted and whose id was handed out again for other
 * tokens must not be reached through the new occupant. The hash ignores the
 * parent, so the filter cannot keep them apart either. */
static void test_stale_parent(void) {
    llmk_kvpool_params prm = params(5, 2, 4, 3);
    prm.hash = hash_no_parent;
    llmk_kvpool *p = make(prm);
    int32_t xq[3] = {1, 1, 8}, xyz[5] = {1, 1, 2, 2, 9}, v[6] = {6, 6, 6, 6, 6, 0}, ww[2] = {4, 4};
    int32_t wwyyz[5] = {4, 4, 2, 2, 9};
    start(p, 0, xq, 0);
    append_ok(p, 0, xq, 3); /* b0 = [1 1] registered, b1 partial */
    start(p, 1, NULL, 0);
    append_ok(p, 1, xyz, 5); /* b2 duplicates b0, b3 = [2 2] registered after it, b4 partial */
    CHECK(!llmk_kvpool_block_registered(p, 2) && llmk_kvpool_block_registered(p, 3));
    /* [1 1 | 2 2] is reachable: b0 then b3, the block the duplicate's sequence registered. */
    llmk_kvpool_admission ad;
    CHECK_STATUS(llmk_kvpool_admit(p, xyz, 5, &ad), LLMK_OK);
    CHECK_EQ_INT(ad.n_cached, 4);
    CHECK_STATUS(llmk_kvpool_release(p, 0), LLMK_OK); /* LRU: b0 */
    CHECK_STATUS(llmk_kvpool_release(p, 1), LLMK_OK); /* LRU: b0, b3 */
    int32_t list[8];
    CHECK_EQ_INT(llmk_kvpool_list(p, LLMK_KVPOOL_CACHED, list, 8), 2);
    CHECK(list[0] == 0 && list[1] == 3);
    start(p, 2, NULL, 0);
    append_ok(p, 2, v, 6); /* takes the three free blocks */
    start(p, 3, NULL, 0);
    append_ok(p, 3, ww, 2); /* evicts b0 and registers [4 4] in it */
    CHECK_EQ_INT(llmk_kvpool_block(p, 3, 0), 0);
    CHECK(llmk_kvpool_block_registered(p, 3)); /* [2 2] after [1 1] is still cached */
    CHECK_STATUS(llmk_kvpool_release(p, 3), LLMK_OK);
    CHECK_STATUS(llmk_kvpool_admit(p, wwyyz, 5, &ad), LLMK_OK);
    CHECK_EQ_INT(ad.n_cached, 2); /* [4 4] only: b3 holds [2 2] after [1 1] */
    CHECK_EQ_INT(start(p, 3, wwyyz, 5), 2);
    llmk_kvpool_free(p);
}

/* A block filled with the same chain as a registered one keeps the first
 * registration; the sequence's following blocks chain on all the same. */
static void test_duplicates(void) {
    llmk_kvpool *p = make(params(12, 2, 3, 5));
    int32_t a[5] = {1, 2, 3, 4, 5};
    start(p, 0, a, 0);
    append_ok(p, 0, a, 4);
    start(p, 1, a, 0);
    append_ok(p, 1, a, 5);
    const int32_t *t0 = llmk_kvpool_table(p, 0, NULL), *t1 = llmk_kvpool_table(p, 1, NULL);
    CHECK(t0[0] != t1[0] && llmk_kvpool_block_registered(p, t0[0]) && !llmk_kvpool_block_registered(p, t1[0]));
    CHECK(!llmk_kvpool_block_registered(p, t1[1]));
    llmk_kvpool_stats st;
    llmk_kvpool_stats_get(p, &st);
    CHECK_EQ_INT(st.n_registered, 2);
    CHECK_EQ_INT(st.n_shared, 0);
    /* Sequence 0 grows past sequence 1's end: its block 2 registers after
     * its own registered blocks, and a third sequence reaches all three. */
    int32_t more[2] = {5, 6};
    append_ok(p, 0, more, 2);
    int32_t b[7] = {1, 2, 3, 4, 5, 6, 0};
    CHECK_EQ_INT(start(p, 2, b, 7), 6);
    CHECK_EQ_INT(llmk_kvpool_block(p, 2, 4), llmk_kvpool_block(p, 0, 4));
    /* Released, the duplicates go to the free list, the registered ones to the LRU list. */
    CHECK_STATUS(llmk_kvpool_release(p, 1), LLMK_OK);
    llmk_kvpool_stats_get(p, &st);
    CHECK_EQ_INT(st.n_cached, 0);
    CHECK_EQ_INT(st.n_free, 12 - 3);
    llmk_kvpool_free(p);
}

/* Copy-on-write on truncation: into a shared block, into a registered block
 * held once, into the sequence's own partial block (no copy), at a block
 * boundary (no copy), and a copy that finds no block (refused, nothing changed). */
static void test_truncate_cow(void) {
    llmk_kvpool_params prm = params(6, 4, 3, 4);
    llmk_kvpool *p = make(prm);
    int32_t t[16];
    for (int i = 0; i < 16; i++) t[i] = 40 + i;
    start(p, 0, t, 0);
    append_ok(p, 0, t, 10); /* b0, b1 registered; b2 partial */
    CHECK_EQ_INT(start(p, 1, t, 10), 8);
    append_ok(p, 1, t + 8, 2); /* shares b0, b1; own b3 */
    llmk_kvpool_cow cow;
    /* Own partial block: no copy. */
    CHECK_STATUS(llmk_kvpool_truncate(p, 1, 9, &cow), LLMK_OK);
    CHECK(cow.src == -1 && cow.dst == -1 && cow.n_tokens == 0);
    /* At a block boundary: the block stays whole and shared. */
    CHECK_STATUS(llmk_kvpool_truncate(p, 1, 8, &cow), LLMK_OK);
    CHECK(cow.src == -1 && llmk_kvpool_block_refs(p, 1) == 2);
    CHECK_EQ_INT(llmk_kvpool_block_state(p, 3), LLMK_KVPOOL_FREE);
    /* Into shared b1: copy 2 slots into a new block, b1 keeps one reference. */
    CHECK_STATUS(llmk_kvpool_truncate(p, 1, 6, &cow), LLMK_OK);
    CHECK(cow.src == 1 && cow.n_tokens == 2 && cow.dst >= 0 && cow.dst != 1);
    CHECK_EQ_INT(llmk_kvpool_block(p, 1, 5), cow.dst);
    CHECK_EQ_INT(llmk_kvpool_block_refs(p, 1), 1);
    int32_t d = cow.dst;
    if (d < 0) d = llmk_kvpool_block(p, 1, 5); /* (failed above) keep going without a NULL read */
    CHECK(memcmp(llmk_kvpool_block_tokens(p, d), t + 4, 2 * sizeof(int32_t)) == 0);
    int32_t other = 99;
    append_ok(p, 1, &other, 1); /* written into the copy, never into b1 */
    CHECK(llmk_kvpool_block_tokens(p, d)[2] == 99 && llmk_kvpool_block_tokens(p, 1)[2] == t[6]);
    CHECK_EQ_INT(llmk_kvpool_len(p, 1), 7);
    /* Into registered b1 held once: still a copy, so [.. | 44 45 46 47] stays cached. */
    CHECK_STATUS(llmk_kvpool_release(p, 1), LLMK_OK);
    CHECK_STATUS(llmk_kvpool_truncate(p, 0, 5, &cow), LLMK_OK);
    CHECK(cow.src == 1 && cow.n_tokens == 1);
    CHECK_EQ_INT(llmk_kvpool_block_state(p, 1), LLMK_KVPOOL_CACHED);
    CHECK_EQ_INT(start(p, 1, t, 9), 8);
    CHECK_STATUS(llmk_kvpool_release(p, 1), LLMK_OK);
    char why[256] = "";
    CHECK(llmk_kvpool_consistent(p, why, sizeof why));
    llmk_kvpool_free(p);

    /* No block for the copy: refused, nothing changed. Two sequences hold the
     * same two registered blocks and fill the rest of the pool. */
    prm = params(4, 2, 3, 4);
    p = make(prm);
    start(p, 0, t, 0);
    append_ok(p, 0, t, 4);
    CHECK_EQ_INT(start(p, 1, t, 5), 4);
    append_ok(p, 1, t + 4, 1);
    start(p, 2, NULL, 0);
    append_ok(p, 2, t + 8, 1);
    static struct snap before;
    take_snap(p, &prm, &before);
    CHECK_STATUS(llmk_kvpool_truncate(p, 0, 3, &cow), LLMK_CACHE_CAPACITY_EXCEEDED);
    CHECK(cow.src == -1 && strstr(llmk_last_error(), "shared block"));
    CHECK(unchanged(p, &prm, &before));
    /* Truncating sequence 1 into the same block may use the block its own
     * release frees: its partial block 2. */
    CHECK_STATUS(llmk_kvpool_truncate(p, 1, 3, &cow), LLMK_OK);
    CHECK(cow.src == llmk_kvpool_block(p, 0, 2) && cow.n_tokens == 1);
    CHECK(llmk_kvpool_consistent(p, why, sizeof why));
    llmk_kvpool_free(p);
}

/* The pool's counted figures against the seed-001 formulas. */
/* A rollback (a failed step) unregisters what the undone appends
 * registered: a later start must not find blocks whose K/V was never
 * written, and what was registered before stays. */
static void test_rollback(void) {
    llmk_kvpool_params prm = params(8, 4, 2, 4);
    llmk_kvpool *p = make(prm);
    int32_t t[16];
    for (int i = 0; i < 16; i++) t[i] = 7 + i;
    start(p, 0, t, 0);
    append_ok(p, 0, t, 6);      /* b0 registered (its K/V written), b1 partial */
    append_ok(p, 0, t + 6, 7);  /* fills b1, b2: registered by the append being undone */
    CHECK_STATUS(llmk_kvpool_rollback(p, 0, 6), LLMK_OK);
    CHECK_EQ_INT(llmk_kvpool_len(p, 0), 6);
    CHECK(llmk_kvpool_block_registered(p, llmk_kvpool_block(p, 0, 0)));
    CHECK(!llmk_kvpool_block_registered(p, llmk_kvpool_block(p, 0, 5)));
    CHECK_STATUS(llmk_kvpool_release(p, 0), LLMK_OK);
    CHECK_EQ_INT(start(p, 1, t, 13), 4); /* only b0: b1 and b2 are forgotten */
    CHECK_STATUS(llmk_kvpool_rollback(p, 1, 5), LLMK_INVALID_ARGUMENT);
    char why[200];
    CHECK(llmk_kvpool_consistent(p, why, sizeof why));
    llmk_kvpool_free(p);
}

static void test_formulas(void) {
    static const double dtypes[3] = {2.0, 4.0, 34.0 / 32.0}; /* f16, f32, q8_0 */
    for (int di = 0; di < 3; di++) {
        llmk_kvpool_params prm = {.n_blocks = 64, .block_size = 16, .n_seq_max = 8, .max_blocks_per_seq = 8,
                                  .n_layers = 30, .n_kv_heads = 3, .head_dim = 64, .dtype_bytes = dtypes[di]};
        llmk_kvpool *p = make(prm);
        llmk_kvpool_stats st;
        llmk_kvpool_stats_get(p, &st);
        double L = prm.n_layers, H = prm.n_kv_heads, D = prm.head_dim, B = prm.dtype_bytes, bs = prm.block_size;
        CHECK_EQ_DBL(st.pool_bytes, L * llmk_kv_bytes(1, prm.n_blocks * bs, H, D, B));
        CHECK_EQ_DBL(st.pool_bytes,
                     llmk_kv_cache_total_memory(llmk_kv_cache_memory_per_layer(1, prm.n_blocks * bs, H, D, B), L));
        CHECK_EQ_DBL(st.token_bytes, L * llmk_kv_bytes(1, 1, H, D, B));
        /* n sequences on one prefix of 3 whole blocks, each with its own
         * tail shorter than a block (so nothing else is shared). */
        int32_t t[64];
        for (int i = 0; i < 48; i++) t[i] = 1000 + i;
        int32_t prefix = 48;
        for (int n = 1; n <= 5; n++) {
            int32_t tail = 1 + n * 2;
            for (int i = 0; i < tail; i++) t[prefix + i] = n * 100 + i;
            int32_t got = start(p, n - 1, t, prefix + tail);
            CHECK_EQ_INT(got, n == 1 ? 0 : prefix);
            append_ok(p, n - 1, t + got, prefix + tail - got);
            int32_t nb = 0;
            llmk_kvpool_table(p, n - 1, &nb);
            CHECK_EQ_DBL((double)nb, llmk_paged_attention_block_count(prefix + tail, bs));
            llmk_kvpool_stats_get(p, &st);
            CHECK_EQ_DBL(st.shared_bytes, llmk_prefix_sharing_savings(prefix, n, L, H, D, B));
            CHECK_EQ_DBL(st.used_bytes, L * llmk_kv_bytes(1, (3 + n) * bs, H, D, B));
            /* Unused slots of the partial last blocks, as blocks' worth of
             * bytes per layer (a power-of-two block size keeps the division exact). */
            int64_t frag = 0;
            for (int k = 1; k <= n; k++) frag += (int64_t)bs - (1 + k * 2);
            CHECK_EQ_INT(st.n_frag_slots, frag);
            CHECK_EQ_DBL(st.frag_bytes, L * llmk_cache_compaction_gain((double)frag / bs, bs, H, D, B));
            CHECK_EQ_DBL(st.frag_bytes, llmk_kv_bytes(1, (double)frag, H, D, B) * L);
        }
        /* Whole blocks of unused slots: 5 tails fill 3+5+7+9+11 = 35 of 80
         * slots; 45 unused = 2 whole blocks and 13 slots. */
        CHECK_EQ_INT(st.n_frag_slots / prm.block_size, 2);
        CHECK_EQ_DBL(L * llmk_cache_compaction_gain(2, bs, H, D, B),
                     (double)(st.n_frag_slots / prm.block_size * prm.block_size) * st.token_bytes);
        for (int32_t len = 0; len <= 8 * 16; len += 5) {
            CHECK_STATUS(llmk_kvpool_start(p, 7, NULL, 0, NULL), LLMK_OK);
            append_ok(p, 7, t, len < 64 ? len : 64);
            if (len > 64) append_ok(p, 7, t, len - 64);
            int32_t nb = 0;
            llmk_kvpool_table(p, 7, &nb);
            CHECK_EQ_DBL((double)nb, llmk_paged_attention_block_count(len, bs));
            CHECK_STATUS(llmk_kvpool_release(p, 7), LLMK_OK);
        }
        llmk_kvpool_free(p);
    }
    /* No geometry: the byte figures are 0. */
    llmk_kvpool *p = make((llmk_kvpool_params){.n_blocks = 4, .block_size = 4, .n_seq_max = 1, .max_blocks_per_seq = 4});
    llmk_kvpool_stats st;
    llmk_kvpool_stats_get(p, &st);
    CHECK(st.pool_bytes == 0.0 && st.token_bytes == 0.0 && st.n_free == 4);
    llmk_kvpool_free(p);
}

/* Admission against llmk_admission_control_accept (margin 0) over a sweep of
 * prompt lengths and pool states: the pool's block answer equals the
 * formula's token answer with the matched tokens taken off the request. */
static void test_admission(void) {
    llmk_kvpool_params prm = params(10, 4, 4, 10);
    llmk_kvpool *p = make(prm);
    int32_t t[40];
    for (int i = 0; i < 40; i++) t[i] = 7 * i % 11;
    int n_checked = 0, n_admit = 0;
    for (int state = 0; state < 4; state++) {
        if (state == 1) start(p, 0, t, 0), append_ok(p, 0, t, 13);         /* 3 registered + 1 partial */
        if (state == 2) CHECK_STATUS(llmk_kvpool_release(p, 0), LLMK_OK); /* 3 cached */
        if (state == 3) start(p, 1, NULL, 0), append_ok(p, 1, t + 20, 17); /* takes the free and evicts */
        for (int32_t n = 0; n <= 40; n++) {
            llmk_kvpool_admission ad;
            CHECK_STATUS(llmk_kvpool_admit(p, t, n, &ad), LLMK_OK);
            double accept = llmk_admission_control_accept(n - ad.n_cached, (double)ad.blocks_available * 4, 0.0);
            CHECK(ad.admit == (accept == 1.0));
            CHECK_EQ_INT(ad.blocks_needed, ceil_div(n, 4) - ad.n_cached / 4);
            n_checked++, n_admit += ad.admit;
            /* Admitted means the start and the whole prompt go through. */
            if (ad.admit && n > 0) {
                CHECK_EQ_INT(start(p, 3, t, n), ad.n_cached);
                append_ok(p, 3, t + ad.n_cached, n - ad.n_cached);
                CHECK_STATUS(llmk_kvpool_release(p, 3), LLMK_OK);
            }
        }
    }
    CHECK(n_admit > 0 && n_admit < n_checked);
    llmk_kvpool_free(p);
}

int main(void) {
    test_refusals();
    test_all_or_nothing();
    test_lru();
    test_match_policy();
    test_collisions();
    test_stale_parent();
    test_duplicates();
    test_truncate_cow();
    test_rollback();
    test_formulas();
    test_admission();
    test_workloads();
    return check_summary("test_kvpool");
}
