/* The paged KV block pool: which fixed-size block holds which positions of
 * which sequence, which blocks several sequences share, and which released
 * blocks still hold a reusable prefix. It manages ids only: block b's K/V
 * storage (every layer, block_size token slots) lives with the caller, who
 * indexes it by the ids this pool hands out. docs/paged_kv.md says why it is
 * shaped this way.
 *
 * Terms. A sequence slot (0..n_seq_max-1) is inactive until llmk_kvpool_start
 * and after llmk_kvpool_release. Its block table maps block index i to the
 * block holding positions [i*block_size, (i+1)*block_size); position p lives in
 * slot p % block_size of block table[p / block_size], and the table always has
 * ceil(len / block_size) entries. A block is *used* (refcount > 0: in some
 * table), *cached* (refcount 0, still registered, on the LRU list: a later
 * prefix match can take it back) or *free*. A block is *registered* when it is
 * full and its content has been entered in the prefix table under its chain
 * (the exact token prefix up to its last position); registered blocks are
 * never written again, which is what makes sharing them safe.
 *
 * Everything is allocated by llmk_kvpool_init; no other call allocates. Not
 * thread-safe: one owner (the scheduler) calls it. Internal, not exported: a
 * failure records its detail with llmk_fail, a success does not clear an
 * older one (the public entry point above it does). */
#ifndef LLMK_KVPOOL_H
#define LLMK_KVPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct llmk_kvpool llmk_kvpool;

/* Hash of one full block given its parent's hash (the seed for block 0) and
 * its block_size token ids. Only a filter: every hit is confirmed by exact
 * comparison, so a weak function costs speed, never correctness. */
typedef uint64_t (*llmk_kvpool_hash_fn)(uint64_t parent_hash, const int32_t *tokens, int32_t n);

typedef struct {
    int32_t n_blocks;           /* blocks in the pool, >= 1 */
    int32_t block_size;         /* token slots per block, >= 1 */
    int32_t n_seq_max;          /* sequence slots, >= 1 */
    int32_t max_blocks_per_seq; /* table length of each slot, >= 1 */
    /* KV geometry, used only for the byte figures of llmk_kvpool_stats
     * (all zero: those figures are 0). One token costs
     * n_layers x 2 x n_kv_heads x head_dim x dtype_bytes bytes. */
    int32_t n_layers, n_kv_heads, head_dim;
    double dtype_bytes; /* may be fractional: q8_0 stores 34 bytes per 32 values */
    llmk_kvpool_hash_fn hash; /* NULL: the built-in one; tests inject weak ones */
} llmk_kvpool_params;

/* Copy-on-write instruction from llmk_kvpool_truncate (src == -1: nothing to
 * do). The caller copies token slots 0..n_tokens-1 of block src into the same
 * slots of block dst (K and V, every layer), before its next call that can
 * allocate (start does not; append and truncate do): until then src is
 * either still used elsewhere or cached, so its contents are intact. */
typedef struct {
    int32_t src, dst, n_tokens;
} llmk_kvpool_cow;

/* What a request of n prompt tokens would need now (llmk_kvpool_admit). */
typedef struct {
    int32_t n_cached;         /* tokens the prefix match would cover (whole blocks) */
    int32_t blocks_needed;    /* new blocks the other n - n_cached tokens need */
    int32_t blocks_available; /* free + cached, less the cached blocks the match takes */
    bool admit;               /* blocks_needed <= blocks_available */
} llmk_kvpool_admission;

/* The pool's state, counted from its tables and lists. Byte figures cover
 * every layer, K and V: bytes = tokens x token_bytes. */
typedef struct {
    int32_t n_blocks, n_free, n_cached, n_used; /* n_free + n_cached + n_used == n_blocks */
    int32_t n_registered; /* registered blocks (cached ones and used ones) */
    int32_t n_seqs;       /* active sequences */
    int64_t n_tokens;     /* sum of the active sequences' lengths */
    int64_t n_refs;       /* table entries of all active sequences */
    int64_t n_shared;     /* n_refs - n_used: table entries that cost no block */
    int64_t n_frag_slots; /* unused slots in partial last blocks of active sequences */
    double token_bytes;   /* one token, all layers, K and V */
    double pool_bytes;    /* n_blocks x block_size tokens */
    double used_bytes;    /* n_used x block_size tokens */
    double shared_bytes;  /* saved by sharing: n_shared x block_size tokens */
    double frag_bytes;    /* n_frag_slots tokens */
} llmk_kvpool_stats;

/* LLMK_INVALID_ARGUMENT for a count < 1 or geometry < 0, LLMK_DIMENSION_OVERFLOW
 * when the arrays would be too large, LLMK_OUT_OF_MEMORY. */
int llmk_kvpool_init(const llmk_kvpool_params *prm, llmk_kvpool **out);
void llmk_kvpool_free(llmk_kvpool *p);

/* Start sequence `seq` for a prompt of n tokens: take the longest chain of
 * registered blocks (used or cached) that holds exactly tokens[0..k) at
 * positions 0..k-1, refcount + 1 each (a cached one leaves the LRU list), and
 * set the sequence's length to k, written to *n_cached. k is a multiple of
 * block_size and at most the largest one strictly below n: at least one
 * prompt token is always left to compute, since the caller needs its logits.
 * The caller then appends tokens[k..n) (all at once or in chunks) and computes
 * positions k..n-1; positions 0..k-1 are already in the blocks. Allocates
 * nothing, so it cannot run out of blocks. LLMK_INVALID_ARGUMENT for a slot
 * out of range or already active, n < 0, tokens NULL with n > 0;
 * LLMK_CONTEXT_FULL when n exceeds max_blocks_per_seq x block_size. */
int llmk_kvpool_start(llmk_kvpool *p, int seq, const int32_t *tokens, int32_t n, int32_t *n_cached);

/* Append n tokens to active sequence `seq` at positions len..len+n-1,
 * allocating the blocks they need (the free list first, then the least
 * recently used cached block, which is unregistered). A block the append
 * fills is registered, unless a block with the same chain is registered
 * already (that one stays the registered copy). The caller then writes the
 * K/V of those positions into the blocks llmk_kvpool_block names. Registration
 * happens here, before that K/V exists: a sequence started later may match
 * the block, so the caller must store it before anything reads it (a batched
 * step that writes each layer's K/V before its attention reads them is
 * enough). All or nothing: LLMK_CACHE_CAPACITY_EXCEEDED, with the figures,
 * when free + cached blocks are too few (nothing changed: the scheduler may
 * preempt and retry); LLMK_CONTEXT_FULL past max_blocks_per_seq;
 * LLMK_INVALID_ARGUMENT for a bad slot, an inactive one, n < 0, tokens NULL. */
int llmk_kvpool_append(llmk_kvpool *p, int seq, const int32_t *tokens, int32_t n);

/* Shorten active sequence `seq` to its first pos tokens (0 <= pos <= len;
 * speculative rollback, or preemption down to a prefix). Blocks past
 * ceil(pos / block_size) are released as by llmk_kvpool_release. When pos
 * falls inside block k = pos / block_size and that block is shared or
 * registered, the sequence must not write its remaining slots, so it gets a
 * new block: *cow = {old block, new block, pos % block_size}, and the caller
 * copies positions k*block_size..pos-1 (slots 0..pos%block_size-1) from old to
 * new as llmk_kvpool_cow says. Nothing needs recomputing: positions 0..pos-1
 * hold what they held, and the next append writes position pos. Otherwise
 * *cow = {-1, -1, 0}. All or nothing: LLMK_CACHE_CAPACITY_EXCEEDED when the
 * copy needs a block and none is free or cached even after the release;
 * LLMK_INVALID_ARGUMENT for a bad slot, an inactive one, pos out of range. */
int llmk_kvpool_truncate(llmk_kvpool *p, int seq, int32_t pos, llmk_kvpool_cow *cow);

/* Undo the appends since the sequence had pos tokens when their K/V was
 * never written (a failed step): the blocks those appends registered are
 * unregistered, so no cached block claims K/V it does not hold, then the
 * sequence is truncated to pos (never a copy: the blocks past pos were its
 * own). Only for appends made since pos with no start in between.
 * LLMK_INVALID_ARGUMENT for a bad slot, an inactive one, pos out of range. */
int llmk_kvpool_rollback(llmk_kvpool *p, int seq, int32_t pos);

/* End sequence `seq`: every block of its table loses a reference; one that
 * reaches 0 goes to the LRU list if registered (tail blocks first, so a
 * sequence's last blocks are evicted before its first), else to the free
 * list. LLMK_INVALID_ARGUMENT for a bad slot or an inactive one. */
int llmk_kvpool_release(llmk_kvpool *p, int seq);

/* What starting a request of n prompt tokens would take now, without
 * changing anything; same argument checks as llmk_kvpool_start (no slot). */
int llmk_kvpool_admit(const llmk_kvpool *p, const int32_t *tokens, int32_t n, llmk_kvpool_admission *out);
/* Blocks an append of n tokens to active sequence seq would allocate; -1 for
 * a bad slot, an inactive one or n < 0. */
int32_t llmk_kvpool_append_blocks(const llmk_kvpool *p, int seq, int32_t n);

/* Queries. Out-of-range arguments give -1 / false / NULL, never a failure. */
int32_t llmk_kvpool_block_size(const llmk_kvpool *p);
bool llmk_kvpool_active(const llmk_kvpool *p, int seq);
int32_t llmk_kvpool_len(const llmk_kvpool *p, int seq); /* tokens; -1 if inactive */
/* The block table (*n_blocks entries), valid until the next changing call. */
const int32_t *llmk_kvpool_table(const llmk_kvpool *p, int seq, int32_t *n_blocks);
int32_t llmk_kvpool_block(const llmk_kvpool *p, int seq, int32_t pos); /* block holding pos < len */
/* Slot seq's table array itself (max_blocks_per_seq entries), fixed for the
 * pool's life whatever the slot's state: for a reader that caches it. */
const int32_t *llmk_kvpool_table_array(const llmk_kvpool *p, int seq);
void llmk_kvpool_stats_get(const llmk_kvpool *p, llmk_kvpool_stats *out);

/* Inspection, for tests and debugging. */
enum { LLMK_KVPOOL_FREE = 0, LLMK_KVPOOL_CACHED = 1, LLMK_KVPOOL_USED = 2 };
int llmk_kvpool_block_state(const llmk_kvpool *p, int32_t b); /* -1 out of range */
int32_t llmk_kvpool_block_refs(const llmk_kvpool *p, int32_t b);
bool llmk_kvpool_block_registered(const llmk_kvpool *p, int32_t b);
/* The token ids the pool recorded for block b's slots (block_size entries;
 * only the slots its sequence has filled are meaningful). */
const int32_t *llmk_kvpool_block_tokens(const llmk_kvpool *p, int32_t b);
/* The free list (allocation order) or the cached list (least recently used
 * first) into out[0..cap); returns the list's length. */
int32_t llmk_kvpool_list(const llmk_kvpool *p, int state, int32_t *out, int32_t cap);
/* Cross-checks the pool's own structures (lists, states, refcounts against
 * the tables, the prefix table); false with a reason in why. Not const: it
 * counts references in a scratch array allocated by init. */
bool llmk_kvpool_consistent(llmk_kvpool *p, char *why, size_t why_len);

#endif
