/* Writes a tensor-access log with gpuan_tensor_log.h for tests/test_tensor_log_c.py, which recomputes
 * every field of entry i from the same formulas and compares.
 *
 *     tensor_log_roundtrip PATH FORMAT CAPACITY COUNT THREADS [BATCH]
 *
 * Entries 0..COUNT-1 are offered to a log of CAPACITY entries. THREADS 0: the first half through
 * gtl_append, the rest through a batch of BATCH entries (default 7, so that a reservation can straddle the
 * capacity), all in order, so the file is deterministic. THREADS > 0: thread t offers i = t, t+T, ...
 * alternating between gtl_append and its thread-local batch, so only the set of stored entries is.
 * Exits non-zero if the writer's return values disagree with its counters. */
#define GPUAN_TENSOR_LOG_IMPLEMENTATION
#include "gpuan_tensor_log.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const KINDS[4] = {"attn_q", "attn_k", "ffn_up", "ffn_gate_exps.weight"};

static uint16_t layer_of(uint64_t i) { return i % 11 == 10 ? GTL_NO_LAYER : (uint16_t)(i % 5); }

/* The 64-byte formats share their field names, so one macro fills either struct. */
#define FILL64(e, i)                                                                                  \
    do {                                                                                              \
        (e)->timestamp_ns = 1000 + 7 * (i);                                                           \
        (e)->token_id = (uint32_t)((i) / 13);                                                         \
        (e)->layer_id = layer_of(i);                                                                  \
        (e)->thread_id = (uint16_t)((i) % 3);                                                         \
        (e)->operation_type = (uint8_t)((i) % 7);                                                     \
        (e)->phase = (uint8_t)((i) % 2);                                                              \
        (e)->tensor_idx = (i) % 17 == 16 ? GTL_NO_TENSOR : (uint32_t)((i) % 97);                      \
        (e)->tensor_ptr = 0x7f0000000000ull + 64 * (i);                                               \
        (e)->file_offset = (i) % 11 == 10 ? GTL_NO_OFFSET : 4096 + 32 * (i);                          \
        (e)->size_bytes = (uint32_t)(1024 + 16 * (i));                                                \
        (e)->attention_head = (uint8_t)((i) % 8);                                                     \
        (e)->qkv_type = (uint8_t)((i) % 3);                                                           \
        (e)->expert_id = (i) % 4 == 3 ? GTL_NO_EXPERT : (uint8_t)((i) % 8);                           \
        (e)->expert_rank = (uint8_t)((i) % 2);                                                        \
        (e)->routing_score = (uint16_t)(((i) * 37) & 0xFFFF);                                         \
    } while (0)

/* The per-operation formats differ in name widths and op1024's experts only. */
#define FILL_OP(e, i)                                                                                 \
    do {                                                                                              \
        char name_[160];                                                                              \
        (e)->timestamp_ns = 1000 + 7 * (i);                                                           \
        (e)->token_id = (uint32_t)((i) / 13);                                                         \
        (e)->layer_id = layer_of(i);                                                                  \
        (e)->thread_id = (uint16_t)((i) % 3);                                                         \
        (e)->operation_type = (uint8_t)((i) % 7);                                                     \
        (e)->phase = (uint8_t)((i) % 2);                                                              \
        (e)->num_sources = (uint8_t)(1 + (i) % 4);                                                    \
        snprintf(name_, sizeof name_, "blk.%u.%s-%llu", (unsigned)((i) % 5), KINDS[(i) % 4],          \
                 (unsigned long long)(i));                                                            \
        gtl_copy_name((e)->dst_name, sizeof (e)->dst_name, name_);                                    \
        for (unsigned k_ = 0; k_ < (e)->num_sources; k_++) {                                          \
            snprintf(name_, sizeof name_, "blk.%u.%s.src%u-%llu", (unsigned)((i) % 5),                \
                     KINDS[((i) + k_) % 4], k_, (unsigned long long)(i));                             \
            gtl_copy_name((e)->sources[k_].name, sizeof (e)->sources[k_].name, name_);                \
            (e)->sources[k_].ptr = 0x7f0000000000ull + 64 * (i) + 0x1000000ull * (k_ + 1);            \
            (e)->sources[k_].size = (uint32_t)(1024 + 16 * (i) + k_);                                 \
            (e)->sources[k_].layer = layer_of(i);                                                     \
            (e)->sources[k_].memory_source = (uint8_t)(((i) + k_) % 2);                               \
            (e)->sources[k_].disk_offset_or_buffer_id =                                               \
                ((i) + k_) % 2 == GTL_FROM_DISK ? 4096 + 32 * (i) + 8 * k_ : 1 + ((i) + k_) % 6;      \
            (e)->sources[k_].tensor_idx = (uint32_t)(4 * (i) + k_);                                   \
        }                                                                                             \
    } while (0)

typedef union entry {
    gtl_seed64 seed64;
    gtl_packed64 packed64;
    gtl_op256 op256;
    gtl_op1024 op1024;
} entry;

static void fill(gtl_format fmt, uint64_t i, entry *e) {
    /* every byte, the padding included, is part of the comparison with the Python writer */
    memset(e, 0, sizeof *e);
    switch (fmt) {
    case GTL_SEED64: FILL64(&e->seed64, i); break;
    case GTL_PACKED64: FILL64(&e->packed64, i); break;
    case GTL_OP256: FILL_OP(&e->op256, i); break;
    case GTL_OP1024:
        FILL_OP(&e->op1024, i);
        e->op1024.num_experts = (uint8_t)(i % 9);
        for (unsigned j = 0; j < GTL_MAX_EXPERTS; j++)
            e->op1024.expert_ids[j] = j < e->op1024.num_experts ? (int32_t)((3 * i + j) % 64) : -1;
        break;
    }
}

typedef struct job {
    gtl_log *log;
    gtl_format fmt;
    uint64_t count;
    unsigned threads, index, batch_max;
    uint64_t dropped;
} job;

/* how an instrumented program would hold its batches: one per thread, initialised on first use */
static _Thread_local gtl_batch tls_batch;

static void *run_thread(void *arg) {
    job *j = (job *)arg;
    entry e;
    for (uint64_t i = j->index; i < j->count; i += j->threads) {
        fill(j->fmt, i, &e);
        if ((i / j->threads) % 2 == 0) {
            j->dropped += (uint64_t)gtl_append(j->log, &e);
        } else {
            if (tls_batch.log == NULL) gtl_batch_init(&tls_batch, j->log, j->batch_max);
            j->dropped += gtl_batch_add(&tls_batch, &e);
        }
    }
    if (tls_batch.log != NULL) j->dropped += gtl_batch_flush(&tls_batch);
    return NULL;
}

static int parse_format(const char *s, gtl_format *fmt) {
    for (int f = GTL_SEED64; f <= GTL_OP1024; f++)
        if (strcmp(s, gtl_format_name((gtl_format)f)) == 0) {
            *fmt = (gtl_format)f;
            return 0;
        }
    return -1;
}

static int check_errors(const char *path) {
    char bad[4096];
    snprintf(bad, sizeof bad, "%s.no-such-dir/log", path);
    errno = 0;
    if (gtl_open(bad, GTL_SEED64, 8) != NULL || errno != ENOENT) return fprintf(stderr, "missing dir\n"), -1;
    errno = 0;
    if (gtl_open(path, GTL_SEED64, 0) != NULL || errno != EINVAL) return fprintf(stderr, "capacity 0\n"), -1;
    errno = 0;
    if (gtl_open(path, (gtl_format)7, 8) != NULL || errno != EINVAL) return fprintf(stderr, "format 7\n"), -1;
    errno = 0;
    if (gtl_open(path, GTL_OP1024, UINT64_MAX / 512) != NULL || errno != EINVAL)
        return fprintf(stderr, "capacity too large\n"), -1;
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 6 || argc > 7) {
        fprintf(stderr, "usage: %s PATH FORMAT CAPACITY COUNT THREADS [BATCH]\n", argv[0]);
        return 2;
    }
    const char *path = argv[1];
    gtl_format fmt;
    if (parse_format(argv[2], &fmt) != 0) return fprintf(stderr, "unknown format %s\n", argv[2]), 2;
    uint64_t capacity = strtoull(argv[3], NULL, 10), count = strtoull(argv[4], NULL, 10);
    unsigned threads = (unsigned)strtoul(argv[5], NULL, 10);
    unsigned batch_max = argc > 6 ? (unsigned)strtoul(argv[6], NULL, 10) : 7;
    if (check_errors(path) != 0) return 1;

    gtl_log *log = gtl_open(path, fmt, capacity);
    if (log == NULL) return perror("gtl_open"), 1;
    uint64_t dropped = 0;
    if (threads == 0) {
        entry e;
        gtl_batch batch;
        gtl_batch_init(&batch, log, batch_max);
        for (uint64_t i = 0; i < count; i++) {
            fill(fmt, i, &e);
            dropped += i < count / 2 ? (uint64_t)gtl_append(log, &e) : gtl_batch_add(&batch, &e);
        }
        dropped += gtl_batch_flush(&batch);
    } else {
        pthread_t tid[64];
        job jobs[64];
        if (threads > 64) return fprintf(stderr, "at most 64 threads\n"), 2;
        for (unsigned t = 0; t < threads; t++) {
            jobs[t] = (job){log, fmt, count, threads, t, batch_max, 0};
            if (pthread_create(&tid[t], NULL, run_thread, &jobs[t]) != 0) return perror("pthread_create"), 1;
        }
        for (unsigned t = 0; t < threads; t++) {
            pthread_join(tid[t], NULL);
            dropped += jobs[t].dropped;
        }
    }
    uint64_t written = gtl_written(log), overflow = gtl_overflow(log);
    if (overflow != dropped || written + overflow != count || gtl_capacity(log) != capacity ||
        gtl_log_format(log) != fmt) {
        fprintf(stderr, "counters disagree: written %llu overflow %llu dropped %llu count %llu\n",
                (unsigned long long)written, (unsigned long long)overflow, (unsigned long long)dropped,
                (unsigned long long)count);
        return 1;
    }
    if (gtl_close(log) != 0) return perror("gtl_close"), 1;
    printf("%llu %llu\n", (unsigned long long)written, (unsigned long long)overflow);
    return 0;
}
