/* The paged KV block pool (kvpool.h, docs/paged_kv.md): block ids, per-sequence
 * block tables, reference counts, the prefix table of full blocks, and the
 * free and LRU lists. Every array is sized in llmk_kvpool_init. */
#include "kvpool.h"

#include "internal.h"

#include <stdarg.h>
#include <string.h>

/* Largest count of any one kind (blocks, slots, sequences, table length):
 * keeps every product below in range of the int32 ids and positions. */
#define KVPOOL_MAX_COUNT (1 << 30)
/* Parent hash of a sequence's first block. Any constant works. */
#define KVPOOL_ROOT_HASH 0x243f6a8885a308d3ull

struct llmk_kvpool {
    int32_t n_blocks, bs, n_seq_max, max_bps;
    double token_bytes;
    llmk_kvpool_hash_fn hash;

    /* Per block. */
    int32_t *refs;
    uint8_t *state; /* LLMK_KVPOOL_FREE / _CACHED / _USED */
    uint8_t *reg;   /* registered: in the prefix table, never written again */
    int32_t *prev, *next; /* links of the one list (free or LRU) the block is on */
    int32_t *tokens;      /* [n_blocks][bs]: the ids written into each slot */
    /* A full block's chain id names the exact token prefix it ends: the
     * serial number its registration got, or for a full block that duplicates
     * a registered one, that one's id. 0 while the block is not full. Serials
     * are never reused, so equal ids mean equal prefixes even after the
     * registered block is evicted and its id handed out again. */
    uint64_t *chain;
    uint64_t *parent_chain; /* registered: the chain id of the block before it (0: first) */
    uint64_t *key;          /* full: the hash of its chain (the prefix table's filter) */
    int32_t *bucket_next;   /* registered: next block in the same bucket */

    int32_t *buckets; /* the prefix table: heads of singly linked bucket lists */
    uint64_t bucket_mask;
    uint64_t serial; /* last chain id handed out */

    int32_t free_head, free_tail, n_free;
    int32_t lru_head, lru_tail, n_cached; /* head: least recently used */

    uint8_t *active;
    int32_t *len;    /* tokens of each sequence */
    int32_t *tables; /* [n_seq_max][max_bps] */
    int32_t *scratch; /* [n_blocks], for llmk_kvpool_consistent */
};

/* ---- helpers ------------------------------------------------------------ */

static uint64_t default_hash(uint64_t h, const int32_t *t, int32_t n) {
    /* Multiply-xorshift per token: cheap and well mixed; exactness comes from
     * the comparison that follows every hit, not from this. */
    for (int32_t i = 0; i < n; i++) {
        h = (h ^ (uint32_t)t[i]) * 0x9e3779b97f4a7c15ull;
        h ^= h >> 29;
    }
    return h ^ (h >> 32);
}

static int64_t blocks_for(const llmk_kvpool *p, int64_t tokens) {
    return (tokens + p->bs - 1) / p->bs;
}

static int32_t *table_of(const llmk_kvpool *p, int seq) {
    return p->tables + (size_t)seq * (size_t)p->max_bps;
}

static int32_t *tokens_of(const llmk_kvpool *p, int32_t b) {
    return p->tokens + (size_t)b * (size_t)p->bs;
}

static bool seq_ok(const llmk_kvpool *p, int seq) {
    return p && seq >= 0 && seq < p->n_seq_max;
}

/* The doubly linked free and LRU lists share the prev/next arrays: a block is
 * on at most one of them, as its state says. */
static void list_push_tail(llmk_kvpool *p, int32_t *head, int32_t *tail, int32_t *count, int32_t b) {
    p->prev[b] = *tail;
    p->next[b] = -1;
    if (*tail >= 0) p->next[*tail] = b;
    else *head = b;
    *tail = b;
    (*count)++;
}

static void list_remove(llmk_kvpool *p, int32_t *head, int32_t *tail, int32_t *count, int32_t b) {
    if (p->prev[b] >= 0) p->next[p->prev[b]] = p->next[b];
    else *head = p->next[b];
    if (p->next[b] >= 0) p->prev[p->next[b]] = p->prev[b];
    else *tail = p->prev[b];
    p->prev[b] = p->next[b] = -1;
    (*count)--;
}

static uint64_t bucket_of(const llmk_kvpool *p, uint64_t key) {
    return key & p->bucket_mask;
}

/* The registered block holding exactly `tokens` after the prefix named by
 * parent_chain, or -1. The key only picks the bucket and filters; the parent
 * id and every token are compared, so a hash collision is never a hit. */
static int32_t lookup(const llmk_kvpool *p, uint64_t key, uint64_t parent_chain, const int32_t *tokens) {
    for (int32_t b = p->buckets[bucket_of(p, key)]; b >= 0; b = p->bucket_next[b])
        if (p->key[b] == key && p->parent_chain[b] == parent_chain &&
            memcmp(tokens_of(p, b), tokens, (size_t)p->bs * sizeof(int32_t)) == 0)
            return b;
    return -1;
}

static void unregister(llmk_kvpool *p, int32_t b) {
    int32_t *link = &p->buckets[bucket_of(p, p->key[b])];
    while (*link != b) {
        LLMK_CHECK(*link >= 0);
        link = &p->bucket_next[*link];
    }
    *link = p->bucket_next[b];
    p->bucket_next[b] = -1;
    p->reg[b] = 0;
}

/* Block i of sequence seq has just become full: give it its chain id and
 * key, and register it unless a block with the same chain is registered
 * already (then this one is a private duplicate that shares the chain id, so
 * blocks after it still chain onto the registered prefix). */
static void register_full(llmk_kvpool *p, int seq, int32_t i) {
    const int32_t *table = table_of(p, seq);
    int32_t b = table[i];
    uint64_t parent_key = i ? p->key[table[i - 1]] : KVPOOL_ROOT_HASH;
    uint64_t parent_chain = i ? p->chain[table[i - 1]] : 0;
    LLMK_CHECK(p->refs[b] == 1 && !p->reg[b] && (i == 0 || parent_chain != 0));
    uint64_t key = p->hash(parent_key, tokens_of(p, b), p->bs);
    p->key[b] = key;
    int32_t x = lookup(p, key, parent_chain, tokens_of(p, b));
    if (x >= 0) {
        p->chain[b] = p->chain[x];
        return;
    }
    p->chain[b] = ++p->serial;
    p->parent_chain[b] = parent_chain;
    p->reg[b] = 1;
    uint64_t h = bucket_of(p, key);
    p->bucket_next[b] = p->buckets[h];
    p->buckets[h] = (int32_t)b;
}

/* A block for a sequence to write: the free list first, then the least
 * recently used cached block, whose registration ends here. The caller has
 * checked that one exists. */
static int32_t alloc_block(llmk_kvpool *p) {
    int32_t b;
    if (p->n_free > 0) {
        b = p->free_head;
        list_remove(p, &p->free_head, &p->free_tail, &p->n_free, b);
    } else {
        LLMK_CHECK(p->n_cached > 0);
        b = p->lru_head;
        list_remove(p, &p->lru_head, &p->lru_tail, &p->n_cached, b);
        unregister(p, b);
    }
    p->state[b] = LLMK_KVPOOL_USED;
    p->refs[b] = 1;
    p->chain[b] = p->key[b] = p->parent_chain[b] = 0;
    return b;
}

/* One reference fewer; at zero a registered block stays findable on the LRU
 * list (most recently used end), any other goes to the free list. */
static void drop_ref(llmk_kvpool *p, int32_t b) {
    LLMK_CHECK(p->refs[b] > 0 && p->state[b] == LLMK_KVPOOL_USED);
    if (--p->refs[b] > 0) return;
    if (p->reg[b]) {
        p->state[b] = LLMK_KVPOOL_CACHED;
        list_push_tail(p, &p->lru_head, &p->lru_tail, &p->n_cached, b);
    } else {
        p->state[b] = LLMK_KVPOOL_FREE;
        p->chain[b] = p->key[b] = 0;
        list_push_tail(p, &p->free_head, &p->free_tail, &p->n_free, b);
    }
}

/* A reference to a registered block found by a prefix match. */
static void take_ref(llmk_kvpool *p, int32_t b) {
    LLMK_CHECK(p->reg[b]);
    if (p->state[b] == LLMK_KVPOOL_CACHED) {
        list_remove(p, &p->lru_head, &p->lru_tail, &p->n_cached, b);
        p->state[b] = LLMK_KVPOOL_USED;
    }
    p->refs[b]++;
}

/* The longest chain of registered blocks holding tokens[0..k), k a multiple
 * of the block size below n (one prompt token is always left to compute).
 * Writes the blocks to out (when not NULL) and counts those now cached. */
static int32_t match(const llmk_kvpool *p, const int32_t *tokens, int32_t n, int32_t *out, int32_t *n_cached) {
    int32_t max_blocks = n > 0 ? (n - 1) / p->bs : 0, k = 0;
    uint64_t parent_key = KVPOOL_ROOT_HASH, parent_chain = 0;
    if (n_cached) *n_cached = 0;
    for (; k < max_blocks; k++) {
        const int32_t *t = tokens + (size_t)k * (size_t)p->bs;
        uint64_t key = p->hash(parent_key, t, p->bs);
        int32_t b = lookup(p, key, parent_chain, t);
        if (b < 0) break;
        if (out) out[k] = b;
        if (n_cached && p->state[b] == LLMK_KVPOOL_CACHED) (*n_cached)++;
        parent_key = key;
        parent_chain = p->chain[b];
    }
    return k;
}

/* ---- lifetime ----------------------------------------------------------- */

static int check_params(const llmk_kvpool_params *prm) {
    const int32_t counts[4] = {prm->n_blocks, prm->block_size, prm->n_seq_max, prm->max_blocks_per_seq};
    static const char *names[4] = {"n_blocks", "block_size", "n_seq_max", "max_blocks_per_seq"};
    for (int i = 0; i < 4; i++)
        if (counts[i] < 1 || counts[i] > KVPOOL_MAX_COUNT)
            return llmk_fail(LLMK_INVALID_ARGUMENT, "kvpool: %s is %d, must be 1..%d", names[i], counts[i],
                             KVPOOL_MAX_COUNT);
    if (prm->n_layers < 0 || prm->n_kv_heads < 0 || prm->head_dim < 0 || !(prm->dtype_bytes >= 0.0))
        return llmk_fail(LLMK_INVALID_ARGUMENT, "kvpool: geometry (layers %d, kv heads %d, head dim %d, dtype %g bytes) "
                         "must not be negative",
                         prm->n_layers, prm->n_kv_heads, prm->head_dim, prm->dtype_bytes);
    /* Positions and slot indices are int32: the pool's slots and one
     * sequence's table must stay below 2^31 tokens. */
    uint64_t slots, seq_tokens, entries;
    if (!llmk_mul_u64((uint64_t)prm->n_blocks, (uint64_t)prm->block_size, &slots) || slots > INT32_MAX ||
        !llmk_mul_u64((uint64_t)prm->max_blocks_per_seq, (uint64_t)prm->block_size, &seq_tokens) ||
        seq_tokens > INT32_MAX ||
        !llmk_mul_u64((uint64_t)prm->n_seq_max, (uint64_t)prm->max_blocks_per_seq, &entries) || entries > INT32_MAX)
        return llmk_fail(LLMK_DIMENSION_OVERFLOW,
                         "kvpool: %d blocks x %d tokens, %d sequences x %d blocks: a count passes 2^31", prm->n_blocks,
                         prm->block_size, prm->n_seq_max, prm->max_blocks_per_seq);
    return LLMK_OK;
}

void llmk_kvpool_free(llmk_kvpool *p) {
    if (!p) return;
    free(p->refs), free(p->state), free(p->reg), free(p->prev), free(p->next), free(p->tokens);
    free(p->chain), free(p->parent_chain), free(p->key), free(p->bucket_next), free(p->buckets);
    free(p->active), free(p->len), free(p->tables), free(p->scratch);
    free(p);
}

int llmk_kvpool_init(const llmk_kvpool_params *prm, llmk_kvpool **out) {
    if (!prm || !out) return llmk_fail(LLMK_INVALID_ARGUMENT, "kvpool: params and out must not be NULL");
    *out = NULL;
    int st = check_params(prm);
    if (st != LLMK_OK) return st;
    llmk_kvpool *p = calloc(1, sizeof *p);
    if (!p) return llmk_fail(LLMK_OUT_OF_MEMORY, "kvpool: no memory for the pool");
    size_t nb = (size_t)prm->n_blocks, ns = (size_t)prm->n_seq_max;
    p->n_blocks = prm->n_blocks, p->bs = prm->block_size, p->n_seq_max = prm->n_seq_max;
    p->max_bps = prm->max_blocks_per_seq;
    p->hash = prm->hash ? prm->hash : default_hash;
    p->token_bytes = (double)prm->n_layers * 2.0 * (double)prm->n_kv_heads * (double)prm->head_dim * prm->dtype_bytes;
    /* Twice as many buckets as blocks (a power of two) keeps lists short. */
    size_t n_buckets = 2;
    while (n_buckets < 2 * nb) n_buckets *= 2;
    p->bucket_mask = n_buckets - 1;
    p->refs = calloc(nb, sizeof *p->refs), p->state = calloc(nb, 1), p->reg = calloc(nb, 1);
    p->prev = malloc(nb * sizeof *p->prev), p->next = malloc(nb * sizeof *p->next);
    p->tokens = calloc(nb * (size_t)p->bs, sizeof *p->tokens);
    p->chain = calloc(nb, sizeof *p->chain), p->parent_chain = calloc(nb, sizeof *p->parent_chain);
    p->key = calloc(nb, sizeof *p->key), p->bucket_next = malloc(nb * sizeof *p->bucket_next);
    p->buckets = malloc(n_buckets * sizeof *p->buckets);
    p->active = calloc(ns, 1), p->len = calloc(ns, sizeof *p->len);
    p->tables = calloc(ns * (size_t)p->max_bps, sizeof *p->tables);
    p->scratch = calloc(nb, sizeof *p->scratch);
    if (!p->refs || !p->state || !p->reg || !p->prev || !p->next || !p->tokens || !p->chain || !p->parent_chain ||
        !p->key || !p->bucket_next || !p->buckets || !p->active || !p->len || !p->tables || !p->scratch) {
        llmk_kvpool_free(p);
        return llmk_fail(LLMK_OUT_OF_MEMORY, "kvpool: no memory for %d blocks of %d tokens and %d tables of %d",
                         prm->n_blocks, prm->block_size, prm->n_seq_max, prm->max_blocks_per_seq);
    }
    for (size_t h = 0; h < n_buckets; h++) p->buckets[h] = -1;
    p->free_head = p->free_tail = p->lru_head = p->lru_tail = -1;
    for (int32_t b = 0; b < p->n_blocks; b++) {
        p->bucket_next[b] = -1;
        list_push_tail(p, &p->free_head, &p->free_tail, &p->n_free, b);
    }
    *out = p;
    return LLMK_OK;
}

/* ---- sequences ---------------------------------------------------------- */

static int check_tokens(const char *what, const int32_t *tokens, int32_t n) {
    if (n < 0) return llmk_fail(LLMK_INVALID_ARGUMENT, "kvpool: %s of %d tokens", what, n);
    if (n > 0 && !tokens) return llmk_fail(LLMK_INVALID_ARGUMENT, "kvpool: %s: tokens is NULL", what);
    return LLMK_OK;
}

static int check_active(const llmk_kvpool *p, const char *what, int seq) {
    if (!p) return llmk_fail(LLMK_INVALID_ARGUMENT, "kvpool: %s: the pool is NULL", what);
    if (!seq_ok(p, seq))
        return llmk_fail(LLMK_INVALID_ARGUMENT, "kvpool: %s: sequence %d is not one of 0..%d", what, seq,
                         p->n_seq_max - 1);
    if (!p->active[seq]) return llmk_fail(LLMK_INVALID_ARGUMENT, "kvpool: %s: sequence %d is not active", what, seq);
    return LLMK_OK;
}

/* LLMK_CONTEXT_FULL when a sequence of `total` tokens could never be held:
 * past its table, or needing more blocks than the whole pool has (so no
 * amount of preemption would make room). seq < 0: a request not yet placed. */
static int check_length(const llmk_kvpool *p, const char *what, int seq, int64_t total) {
    char who[32] = "the request";
    if (seq >= 0) snprintf(who, sizeof who, "sequence %d", seq);
    int64_t cap = (int64_t)p->max_bps * p->bs;
    if (total > cap)
        return llmk_fail(LLMK_CONTEXT_FULL, "kvpool: %s: %s would hold %lld tokens, a table holds %lld (%d blocks "
                         "of %d)",
                         what, who, (long long)total, (long long)cap, p->max_bps, p->bs);
    if (blocks_for(p, total) > p->n_blocks)
        return llmk_fail(LLMK_CONTEXT_FULL, "kvpool: %s: %s would need %lld blocks of %d tokens for %lld tokens, "
                         "the pool has %d",
                         what, who, (long long)blocks_for(p, total), p->bs, (long long)total, p->n_blocks);
    return LLMK_OK;
}

int llmk_kvpool_start(llmk_kvpool *p, int seq, const int32_t *tokens, int32_t n, int32_t *n_cached) {
    if (n_cached) *n_cached = 0;
    if (!p) return llmk_fail(LLMK_INVALID_ARGUMENT, "kvpool: start: the pool is NULL");
    if (!seq_ok(p, seq))
        return llmk_fail(LLMK_INVALID_ARGUMENT, "kvpool: start: sequence %d is not one of 0..%d", seq,
                         p->n_seq_max - 1);
    if (p->active[seq]) return llmk_fail(LLMK_INVALID_ARGUMENT, "kvpool: start: sequence %d is already active", seq);
    int st = check_tokens("start", tokens, n);
    if (st == LLMK_OK) st = check_length(p, "start", seq, n);
    if (st != LLMK_OK) return st;
    int32_t *table = table_of(p, seq);
    int32_t k = match(p, tokens, n, table, NULL);
    for (int32_t i = 0; i < k; i++) take_ref(p, table[i]);
    p->active[seq] = 1;
    p->len[seq] = k * p->bs;
    if (n_cached) *n_cached = p->len[seq];
    return LLMK_OK;
}

int32_t llmk_kvpool_append_blocks(const llmk_kvpool *p, int seq, int32_t n) {
    if (!seq_ok(p, seq) || !p->active[seq] || n < 0) return -1;
    /* At most n / block_size + 1 blocks, n itself for one-token blocks: an int32. */
    return (int32_t)(blocks_for(p, (int64_t)p->len[seq] + n) - blocks_for(p, p->len[seq]));
}

int llmk_kvpool_append(llmk_kvpool *p, int seq, const int32_t *tokens, int32_t n) {
    int st = check_active(p, "append", seq);
    if (st == LLMK_OK) st = check_tokens("append", tokens, n);
    if (st == LLMK_OK) st = check_length(p, "append", seq, (int64_t)p->len[seq] + n);
    if (st != LLMK_OK) return st;
    int32_t need = llmk_kvpool_append_blocks(p, seq, n);
    if (need > p->n_free + p->n_cached)
        return llmk_fail(LLMK_CACHE_CAPACITY_EXCEEDED, "kvpool: append: sequence %d needs %d new blocks for %d tokens, "
                         "%d free and %d cached of %d",
                         seq, need, n, p->n_free, p->n_cached, p->n_blocks);
    int32_t *table = table_of(p, seq);
    int32_t pos = p->len[seq], done = 0;
    while (done < n) {
        int32_t i = pos / p->bs, slot = pos % p->bs;
        if (slot == 0) table[i] = alloc_block(p);
        int32_t b = table[i];
        /* Only the sequence's own partial block is ever written. */
        LLMK_CHECK(p->refs[b] == 1 && !p->reg[b] && p->chain[b] == 0);
        int32_t m = n - done < p->bs - slot ? n - done : p->bs - slot;
        memcpy(tokens_of(p, b) + slot, tokens + done, (size_t)m * sizeof(int32_t));
        done += m, pos += m;
        if (slot + m == p->bs) register_full(p, seq, i);
    }
    p->len[seq] = pos;
    return LLMK_OK;
}

int llmk_kvpool_truncate(llmk_kvpool *p, int seq, int32_t pos, llmk_kvpool_cow *cow) {
    llmk_kvpool_cow none = {-1, -1, 0};
    if (cow) *cow = none;
    int st = check_active(p, "truncate", seq);
    if (st != LLMK_OK) return st;
    if (pos < 0 || pos > p->len[seq])
        return llmk_fail(LLMK_INVALID_ARGUMENT, "kvpool: truncate: sequence %d has %d tokens, position %d is not in "
                         "0..%d",
                         seq, p->len[seq], pos, p->len[seq]);
    int32_t *table = table_of(p, seq);
    int32_t nb = (int32_t)blocks_for(p, p->len[seq]), keep = (int32_t)blocks_for(p, pos);
    int32_t k = pos / p->bs, r = pos % p->bs;
    bool copy = r > 0 && (p->refs[table[k]] > 1 || p->reg[table[k]]);
    if (copy) {
        /* The blocks this call releases count: one of them may be the copy's. */
        int32_t avail = p->n_free + p->n_cached;
        for (int32_t i = keep; i < nb; i++) avail += p->refs[table[i]] == 1;
        if (avail < 1)
            return llmk_fail(LLMK_CACHE_CAPACITY_EXCEEDED, "kvpool: truncate: sequence %d to %d tokens must copy %d "
                             "tokens of shared block %d, and no block is free or cached",
                             seq, pos, r, table[k]);
    }
    for (int32_t i = nb - 1; i >= keep; i--) drop_ref(p, table[i]);
    if (copy) {
        int32_t src = table[k], dst = alloc_block(p); /* src is still held: never the one evicted */
        memcpy(tokens_of(p, dst), tokens_of(p, src), (size_t)r * sizeof(int32_t));
        table[k] = dst;
        drop_ref(p, src);
        if (cow) cow->src = src, cow->dst = dst, cow->n_tokens = r;
    } else if (r > 0) {
        /* The sequence's own block, perhaps a full duplicate: partial again. */
        p->chain[table[k]] = p->key[table[k]] = 0;
    }
    p->len[seq] = pos;
    return LLMK_OK;
}

int llmk_kvpool_rollback(llmk_kvpool *p, int seq, int32_t pos) {
    int st = check_active(p, "rollback", seq);
    if (st != LLMK_OK) return st;
    if (pos < 0 || pos > p->len[seq])
        return llmk_fail(LLMK_INVALID_ARGUMENT, "kvpool: rollback: sequence %d has %d tokens, position %d is not in "
                         "0..%d", seq, p->len[seq], pos, p->len[seq]);
    int32_t *table = table_of(p, seq);
    for (int32_t i = pos / p->bs; i < (int32_t)blocks_for(p, p->len[seq]); i++) {
        if (!p->reg[table[i]]) continue;
        /* registered by the append being undone: no one else can hold it yet */
        LLMK_CHECK(p->refs[table[i]] == 1);
        unregister(p, table[i]);
    }
    llmk_kvpool_cow cow;
    st = llmk_kvpool_truncate(p, seq, pos, &cow);
    LLMK_CHECK(st == LLMK_OK && cow.src < 0); /* its own unregistered blocks: nothing to copy */
    return LLMK_OK;
}

int llmk_kvpool_release(llmk_kvpool *p, int seq) {
    int st = check_active(p, "release", seq);
    if (st != LLMK_OK) return st;
    const int32_t *table = table_of(p, seq);
    /* Tail first: the LRU list then evicts a sequence's last blocks before its
     * first ones, which are the likelier to be shared again. */
    for (int32_t i = (int32_t)blocks_for(p, p->len[seq]) - 1; i >= 0; i--) drop_ref(p, table[i]);
    p->active[seq] = 0;
    p->len[seq] = 0;
    return LLMK_OK;
}

int llmk_kvpool_admit(const llmk_kvpool *p, const int32_t *tokens, int32_t n, llmk_kvpool_admission *out) {
    if (!p || !out) return llmk_fail(LLMK_INVALID_ARGUMENT, "kvpool: admission: pool and out must not be NULL");
    memset(out, 0, sizeof *out);
    int st = check_tokens("admission", tokens, n);
    if (st == LLMK_OK) st = check_length(p, "admission", -1, n);
    if (st != LLMK_OK) return st;
    int32_t taken = 0, k = match(p, tokens, n, NULL, &taken);
    out->n_cached = k * p->bs;
    out->blocks_needed = (int32_t)blocks_for(p, n) - k;
    out->blocks_available = p->n_free + p->n_cached - taken;
    out->admit = out->blocks_needed <= out->blocks_available;
    return LLMK_OK;
}

/* ---- queries ------------------------------------------------------------ */

int32_t llmk_kvpool_block_size(const llmk_kvpool *p) {
    return p ? p->bs : -1;
}

bool llmk_kvpool_active(const llmk_kvpool *p, int seq) {
    return seq_ok(p, seq) && p->active[seq];
}

int32_t llmk_kvpool_len(const llmk_kvpool *p, int seq) {
    return llmk_kvpool_active(p, seq) ? p->len[seq] : -1;
}

const int32_t *llmk_kvpool_table(const llmk_kvpool *p, int seq, int32_t *n_blocks) {
    if (n_blocks) *n_blocks = 0;
    if (!llmk_kvpool_active(p, seq)) return NULL;
    if (n_blocks) *n_blocks = (int32_t)blocks_for(p, p->len[seq]);
    return table_of(p, seq);
}

const int32_t *llmk_kvpool_table_array(const llmk_kvpool *p, int seq) {
    return seq_ok(p, seq) ? table_of(p, seq) : NULL;
}

int32_t llmk_kvpool_block(const llmk_kvpool *p, int seq, int32_t pos) {
    if (!llmk_kvpool_active(p, seq) || pos < 0 || pos >= p->len[seq]) return -1;
    return table_of(p, seq)[pos / p->bs];
}

void llmk_kvpool_stats_get(const llmk_kvpool *p, llmk_kvpool_stats *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!p) return;
    out->n_blocks = p->n_blocks, out->n_free = p->n_free, out->n_cached = p->n_cached;
    for (int32_t b = 0; b < p->n_blocks; b++) {
        out->n_used += p->refs[b] > 0;
        out->n_registered += p->reg[b];
    }
    for (int s = 0; s < p->n_seq_max; s++) {
        if (!p->active[s]) continue;
        int64_t nb = blocks_for(p, p->len[s]);
        out->n_seqs++;
        out->n_tokens += p->len[s];
        out->n_refs += nb;
        out->n_frag_slots += nb * p->bs - p->len[s];
    }
    out->n_shared = out->n_refs - out->n_used;
    double bs = (double)p->bs;
    out->token_bytes = p->token_bytes;
    out->pool_bytes = (double)p->n_blocks * bs * p->token_bytes;
    out->used_bytes = (double)out->n_used * bs * p->token_bytes;
    out->shared_bytes = (double)out->n_shared * bs * p->token_bytes;
    out->frag_bytes = (double)out->n_frag_slots * p->token_bytes;
}

int llmk_kvpool_block_state(const llmk_kvpool *p, int32_t b) {
    return p && b >= 0 && b < p->n_blocks ? p->state[b] : -1;
}

int32_t llmk_kvpool_block_refs(const llmk_kvpool *p, int32_t b) {
    return p && b >= 0 && b < p->n_blocks ? p->refs[b] : -1;
}

bool llmk_kvpool_block_registered(const llmk_kvpool *p, int32_t b) {
    return p && b >= 0 && b < p->n_blocks && p->reg[b];
}

const int32_t *llmk_kvpool_block_tokens(const llmk_kvpool *p, int32_t b) {
    return p && b >= 0 && b < p->n_blocks ? tokens_of(p, b) : NULL;
}

int32_t llmk_kvpool_list(const llmk_kvpool *p, int state, int32_t *out, int32_t cap) {
    if (!p || (state != LLMK_KVPOOL_FREE && state != LLMK_KVPOOL_CACHED)) return -1;
    int32_t n = 0;
    /* Bounded by the pool size so a broken link cannot loop forever. */
    for (int32_t b = state == LLMK_KVPOOL_FREE ? p->free_head : p->lru_head; b >= 0 && n <= p->n_blocks;
         b = p->next[b], n++)
        if (out && n < cap) out[n] = b;
    return n;
}

/* ---- self-check ---------------------------------------------------------- */

static bool bad(char *why, size_t why_len, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static bool bad(char *why, size_t why_len, const char *fmt, ...) {
    if (why && why_len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, why_len, fmt, ap);
        va_end(ap);
    }
    return false;
}

/* One list walked both ways of its links: every member in `state`, the
 * length equal to the count kept. */
static bool list_ok(const llmk_kvpool *p, int state, int32_t head, int32_t tail, int32_t count, char *why,
                    size_t why_len) {
    int32_t n = 0, prev = -1;
    for (int32_t b = head; b >= 0; prev = b, b = p->next[b], n++) {
        if (n >= p->n_blocks) return bad(why, why_len, "list %d: longer than the pool (a cycle)", state);
        if (p->state[b] != state) return bad(why, why_len, "list %d: block %d is in state %d", state, b, p->state[b]);
        if (p->prev[b] != prev) return bad(why, why_len, "list %d: block %d links back to %d, not %d", state, b,
                                           p->prev[b], prev);
    }
    if (prev != tail) return bad(why, why_len, "list %d: ends at %d, tail is %d", state, prev, tail);
    if (n != count) return bad(why, why_len, "list %d: %d blocks, count says %d", state, n, count);
    return true;
}

static bool tables_ok(llmk_kvpool *p, char *why, size_t why_len) {
    memset(p->scratch, 0, (size_t)p->n_blocks * sizeof *p->scratch);
    for (int s = 0; s < p->n_seq_max; s++) {
        if (!p->active[s]) {
            if (p->len[s] != 0) return bad(why, why_len, "inactive sequence %d has length %d", s, p->len[s]);
            continue;
        }
        const int32_t *t = table_of(p, s);
        int64_t nb = blocks_for(p, p->len[s]);
        if (nb > p->max_bps)
            return bad(why, why_len, "sequence %d: %lld blocks, table holds %d", s, (long long)nb, p->max_bps);
        for (int32_t i = 0; i < nb; i++) {
            int32_t b = t[i];
            if (b < 0 || b >= p->n_blocks) return bad(why, why_len, "sequence %d block %d: id %d", s, i, b);
            p->scratch[b]++;
            bool full = (int64_t)(i + 1) * p->bs <= p->len[s];
            if (full && p->chain[b] == 0) return bad(why, why_len, "sequence %d: full block %d has no chain id", s, b);
            if (!full && (p->refs[b] != 1 || p->reg[b] || p->chain[b] != 0))
                return bad(why, why_len, "sequence %d: partial block %d is shared, registered or chained", s, b);
        }
    }
    return true;
}

static bool prefix_table_ok(const llmk_kvpool *p, char *why, size_t why_len) {
    int32_t n_reg = 0, in_table = 0;
    for (int32_t b = 0; b < p->n_blocks; b++) n_reg += p->reg[b];
    for (uint64_t h = 0; h <= p->bucket_mask; h++)
        for (int32_t b = p->buckets[h]; b >= 0; b = p->bucket_next[b]) {
            if (++in_table > n_reg) return bad(why, why_len, "prefix table holds more blocks than are registered");
            if (!p->reg[b] || bucket_of(p, p->key[b]) != h)
                return bad(why, why_len, "block %d in bucket %llu is unregistered or misplaced", b,
                           (unsigned long long)h);
            if (p->chain[b] == 0 || p->chain[b] > p->serial)
                return bad(why, why_len, "registered block %d has chain id %llu", b, (unsigned long long)p->chain[b]);
            for (int32_t c = p->bucket_next[b]; c >= 0; c = p->bucket_next[c])
                if (p->parent_chain[c] == p->parent_chain[b] &&
                    memcmp(tokens_of(p, b), tokens_of(p, c), (size_t)p->bs * sizeof(int32_t)) == 0)
                    return bad(why, why_len, "blocks %d and %d are both registered for the same chain", b, c);
        }
    if (in_table != n_reg) return bad(why, why_len, "%d blocks registered, %d in the prefix table", n_reg, in_table);
    return true;
}

bool llmk_kvpool_consistent(llmk_kvpool *p, char *why, size_t why_len) {
    if (!p) return bad(why, why_len, "pool is NULL");
    if (!tables_ok(p, why, why_len)) return false;
    int32_t n_state[3] = {0, 0, 0};
    for (int32_t b = 0; b < p->n_blocks; b++) {
        int st = p->state[b];
        if (st > LLMK_KVPOOL_USED) return bad(why, why_len, "block %d: state %d", b, st);
        n_state[st]++;
        if (p->refs[b] != p->scratch[b])
            return bad(why, why_len, "block %d: refcount %d, %d tables hold it", b, p->refs[b], p->scratch[b]);
        if ((st == LLMK_KVPOOL_USED) != (p->refs[b] > 0))
            return bad(why, why_len, "block %d: state %d with refcount %d", b, st, p->refs[b]);
        if (st == LLMK_KVPOOL_CACHED && !p->reg[b]) return bad(why, why_len, "cached block %d is unregistered", b);
        if (st == LLMK_KVPOOL_FREE && p->reg[b]) return bad(why, why_len, "free block %d is registered", b);
    }
    if (n_state[LLMK_KVPOOL_FREE] != p->n_free || n_state[LLMK_KVPOOL_CACHED] != p->n_cached)
        return bad(why, why_len, "%d free and %d cached blocks, counts say %d and %d", n_state[LLMK_KVPOOL_FREE],
                   n_state[LLMK_KVPOOL_CACHED], p->n_free, p->n_cached);
    return list_ok(p, LLMK_KVPOOL_FREE, p->free_head, p->free_tail, p->n_free, why, why_len) &&
           list_ok(p, LLMK_KVPOOL_CACHED, p->lru_head, p->lru_tail, p->n_cached, why, why_len) &&
           prefix_table_ok(p, why, why_len);
}
