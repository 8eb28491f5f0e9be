/* gpuan_tensor_log.h: write the tensor-access logs of an instrumented llama.cpp (ggml) from C or C++.
 *
 * The C twin of gpuan/trace/tensorlog/write.py: a pre-sized, memory-mapped file (tmpfs, e.g. /dev/shm, is
 * the intended home) that fixed-size entries are appended to until it is full. Entries past the capacity
 * are dropped and counted, never wrapped, because readers rely on time order and on the all-zero tail of
 * the pre-sized file to find the used part. On close a sidecar `<path>.meta.json` records the format, the
 * capacity and how many entries were stored and dropped. The layouts are those of
 * gpuan/trace/tensorlog/formats.py; the static assertions below pin every size and key offset to it.
 *
 * Usage (single-file, stb style): in exactly one C or C++ file
 *
 *     #define GPUAN_TENSOR_LOG_IMPLEMENTATION
 *     #include "gpuan_tensor_log.h"      (first, before any system header; see below)
 *
 * and include it plainly everywhere else. Then
 *
 *     gtl_log *log = gtl_open("/dev/shm/llama-tensors.log", GTL_SEED64, 1u << 24);
 *     gtl_seed64 e = {0};  e.timestamp_ns = gtl_now_ns();  ...;  gtl_append(log, &e);
 *     ...
 *     gtl_close(log);
 *
 * Under many threads, a thread-local batch takes one atomic reservation per batch instead of per entry:
 *
 *     static _Thread_local gtl_batch batch;       (C++: thread_local)
 *     if (!batch.log) gtl_batch_init(&batch, log, 0);
 *     gtl_batch_add(&batch, &e);
 *     ...  gtl_batch_flush(&batch);                (before the thread ends and before gtl_close)
 *
 * Entries land in the order their slots were reserved, so a log written by several threads is in time
 * order only up to the reordering that concurrent reservations (and batches) introduce. A timestamp of 0
 * marks the unused tail: never log one (gtl_now_ns() never returns 0 in practice).
 *
 * POSIX (Linux) only; needs GCC or Clang (packed structs). Fill every byte of an entry before logging it
 * (start from `= {0}` or memset): the writer copies entries verbatim, except that it zeroes the 4-byte
 * compiler hole of gtl_seed64, which no initializer is guaranteed to clear, so that logs are reproducible.
 *
 * The implementation needs POSIX declarations (mmap, ftruncate, clock_gettime) that a strict -std=c11
 * build hides: unless _POSIX_C_SOURCE or _GNU_SOURCE is already set, this header requests POSIX 2008 for
 * the implementation file, which works only when it comes before every system header there (or build that
 * file with -D_POSIX_C_SOURCE=200809L).
 */
#if defined(GPUAN_TENSOR_LOG_IMPLEMENTATION) && !defined(_POSIX_C_SOURCE) && !defined(_GNU_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#ifndef GPUAN_TENSOR_LOG_H
#define GPUAN_TENSOR_LOG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define GTL__STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#define GTL__ALIGN8 alignas(8)
#else
#define GTL__STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#define GTL__ALIGN8 _Alignas(8)
#endif
#define GTL__PACKED __attribute__((packed))

#ifdef __cplusplus
extern "C" {
#endif

/* The all-ones "none" values of formats.py (NO_LAYER, NO_TENSOR, NO_EXPERT, NO_OFFSET). */
#define GTL_NO_LAYER 0xFFFFu
#define GTL_NO_TENSOR 0xFFFFFFFFu
#define GTL_NO_EXPERT 0xFFu
#define GTL_NO_OFFSET UINT64_MAX
#define GTL_MAX_SOURCES 4
#define GTL_MAX_EXPERTS 16
/* memory_source of a per-operation source record */
#define GTL_FROM_DISK 0
#define GTL_FROM_BUFFER 1

typedef enum gtl_format { GTL_SEED64 = 0, GTL_PACKED64 = 1, GTL_OP256 = 2, GTL_OP1024 = 3 } gtl_format;

/* The design note's 64-byte entry as a plain C compiler lays it out: its fields add up to 60 bytes and
 * natural alignment puts a 4-byte hole before tensor_ptr. The explicit alignment keeps that hole on ABIs
 * (i386) that align uint64_t members to 4 only. */
typedef struct gtl_seed64 {
    uint64_t timestamp_ns;
    uint32_t token_id;
    uint16_t layer_id;
    uint16_t thread_id;
    uint8_t operation_type;
    uint8_t phase;
    uint16_t padding1;
    uint32_t padding1b;
    uint32_t tensor_idx;
    GTL__ALIGN8 uint64_t tensor_ptr;
    uint64_t file_offset;
    uint32_t size_bytes;
    uint8_t attention_head;
    uint8_t qkv_type;
    uint16_t padding2;
    uint8_t expert_id;
    uint8_t expert_rank;
    uint16_t routing_score;
    uint32_t padding3;
} gtl_seed64;

/* The same fields as the instrumented fork declared them: packed, with padding4 restoring 64 bytes. */
typedef struct GTL__PACKED gtl_packed64 {
    uint64_t timestamp_ns;
    uint32_t token_id;
    uint16_t layer_id;
    uint16_t thread_id;
    uint8_t operation_type;
    uint8_t phase;
    uint16_t padding1;
    uint32_t padding1b;
    uint32_t tensor_idx;
    uint64_t tensor_ptr;
    uint64_t file_offset;
    uint32_t size_bytes;
    uint8_t attention_head;
    uint8_t qkv_type;
    uint16_t padding2;
    uint8_t expert_id;
    uint8_t expert_rank;
    uint16_t routing_score;
    uint32_t padding3;
    uint32_t padding4;
} gtl_packed64;

/* Names in the per-operation formats are fixed-width and need not be NUL-terminated (a name filling the
 * whole field has none); gtl_copy_name fills one. */
typedef struct GTL__PACKED gtl_source256 {
    char name[20];
    uint64_t ptr;
    uint32_t size;
    uint16_t layer;
    uint8_t memory_source; /* GTL_FROM_DISK or GTL_FROM_BUFFER */
    uint8_t pad0;
    uint64_t disk_offset_or_buffer_id;
    uint32_t tensor_idx;
    uint32_t pad1;
} gtl_source256;

typedef struct GTL__PACKED gtl_op256 {
    uint64_t timestamp_ns;
    uint32_t token_id;
    uint16_t layer_id;
    uint16_t thread_id;
    uint8_t operation_type;
    uint8_t phase;
    uint8_t num_sources;
    uint8_t pad[5];
    char dst_name[24];
    gtl_source256 sources[GTL_MAX_SOURCES];
} gtl_op256;

typedef struct GTL__PACKED gtl_source1024 {
    char name[128];
    uint64_t ptr;
    uint32_t size;
    uint16_t layer;
    uint8_t memory_source;
    uint8_t pad0;
    uint64_t disk_offset_or_buffer_id;
    uint32_t tensor_idx;
    uint32_t pad1;
} gtl_source1024;

typedef struct GTL__PACKED gtl_op1024 {
    uint64_t timestamp_ns;
    uint32_t token_id;
    uint16_t layer_id;
    uint16_t thread_id;
    uint8_t operation_type;
    uint8_t phase;
    uint8_t num_sources;
    uint8_t pad[5];
    char dst_name[128];
    gtl_source1024 sources[GTL_MAX_SOURCES];
    int32_t expert_ids[GTL_MAX_EXPERTS];
    uint8_t num_experts;
    uint8_t pad_end[167];
} gtl_op1024;

GTL__STATIC_ASSERT(sizeof(gtl_seed64) == 64, "seed64 entry must be 64 bytes");
GTL__STATIC_ASSERT(offsetof(gtl_seed64, token_id) == 8, "seed64 token_id offset");
GTL__STATIC_ASSERT(offsetof(gtl_seed64, operation_type) == 16, "seed64 operation_type offset");
GTL__STATIC_ASSERT(offsetof(gtl_seed64, padding1b) == 20, "seed64 padding1b offset");
GTL__STATIC_ASSERT(offsetof(gtl_seed64, tensor_idx) == 24, "seed64 tensor_idx offset");
GTL__STATIC_ASSERT(offsetof(gtl_seed64, tensor_ptr) == 32, "seed64 tensor_ptr offset (after the hole)");
GTL__STATIC_ASSERT(offsetof(gtl_seed64, file_offset) == 40, "seed64 file_offset offset");
GTL__STATIC_ASSERT(offsetof(gtl_seed64, size_bytes) == 48, "seed64 size_bytes offset");
GTL__STATIC_ASSERT(offsetof(gtl_seed64, attention_head) == 52, "seed64 attention_head offset");
GTL__STATIC_ASSERT(offsetof(gtl_seed64, expert_id) == 56, "seed64 expert_id offset");
GTL__STATIC_ASSERT(offsetof(gtl_seed64, routing_score) == 58, "seed64 routing_score offset");
GTL__STATIC_ASSERT(offsetof(gtl_seed64, padding3) == 60, "seed64 padding3 offset");

GTL__STATIC_ASSERT(sizeof(gtl_packed64) == 64, "packed64 entry must be 64 bytes");
GTL__STATIC_ASSERT(offsetof(gtl_packed64, tensor_idx) == 24, "packed64 tensor_idx offset");
GTL__STATIC_ASSERT(offsetof(gtl_packed64, tensor_ptr) == 28, "packed64 tensor_ptr offset (no hole)");
GTL__STATIC_ASSERT(offsetof(gtl_packed64, file_offset) == 36, "packed64 file_offset offset");
GTL__STATIC_ASSERT(offsetof(gtl_packed64, size_bytes) == 44, "packed64 size_bytes offset");
GTL__STATIC_ASSERT(offsetof(gtl_packed64, attention_head) == 48, "packed64 attention_head offset");
GTL__STATIC_ASSERT(offsetof(gtl_packed64, expert_id) == 52, "packed64 expert_id offset");
GTL__STATIC_ASSERT(offsetof(gtl_packed64, routing_score) == 54, "packed64 routing_score offset");
GTL__STATIC_ASSERT(offsetof(gtl_packed64, padding3) == 56, "packed64 padding3 offset");
GTL__STATIC_ASSERT(offsetof(gtl_packed64, padding4) == 60, "packed64 padding4 offset");

GTL__STATIC_ASSERT(sizeof(gtl_source256) == 52, "op256 source record must be 52 bytes");
GTL__STATIC_ASSERT(offsetof(gtl_source256, ptr) == 20, "source256 ptr offset");
GTL__STATIC_ASSERT(offsetof(gtl_source256, size) == 28, "source256 size offset");
GTL__STATIC_ASSERT(offsetof(gtl_source256, layer) == 32, "source256 layer offset");
GTL__STATIC_ASSERT(offsetof(gtl_source256, memory_source) == 34, "source256 memory_source offset");
GTL__STATIC_ASSERT(offsetof(gtl_source256, disk_offset_or_buffer_id) == 36, "source256 disk_offset offset");
GTL__STATIC_ASSERT(offsetof(gtl_source256, tensor_idx) == 44, "source256 tensor_idx offset");
GTL__STATIC_ASSERT(sizeof(gtl_op256) == 256, "op256 entry must be 256 bytes");
GTL__STATIC_ASSERT(offsetof(gtl_op256, num_sources) == 18, "op256 num_sources offset");
GTL__STATIC_ASSERT(offsetof(gtl_op256, dst_name) == 24, "op256 dst_name offset");
GTL__STATIC_ASSERT(offsetof(gtl_op256, sources) == 48, "op256 sources offset");

GTL__STATIC_ASSERT(sizeof(gtl_source1024) == 160, "op1024 source record must be 160 bytes");
GTL__STATIC_ASSERT(offsetof(gtl_source1024, ptr) == 128, "source1024 ptr offset");
GTL__STATIC_ASSERT(offsetof(gtl_source1024, memory_source) == 142, "source1024 memory_source offset");
GTL__STATIC_ASSERT(offsetof(gtl_source1024, disk_offset_or_buffer_id) == 144, "source1024 disk_offset offset");
GTL__STATIC_ASSERT(offsetof(gtl_source1024, tensor_idx) == 152, "source1024 tensor_idx offset");
GTL__STATIC_ASSERT(sizeof(gtl_op1024) == 1024, "op1024 entry must be 1024 bytes");
GTL__STATIC_ASSERT(offsetof(gtl_op1024, num_sources) == 18, "op1024 num_sources offset");
GTL__STATIC_ASSERT(offsetof(gtl_op1024, dst_name) == 24, "op1024 dst_name offset");
GTL__STATIC_ASSERT(offsetof(gtl_op1024, sources) == 152, "op1024 sources offset");
GTL__STATIC_ASSERT(offsetof(gtl_op1024, expert_ids) == 792, "op1024 expert_ids offset");
GTL__STATIC_ASSERT(offsetof(gtl_op1024, num_experts) == 856, "op1024 num_experts offset");

/* An open log; opaque because its counters are atomics, which C and C++ spell differently. */
typedef struct gtl_log gtl_log;

/* Bytes of entry storage in a gtl_batch. Define it identically in every file that includes this header
 * (the struct's size depends on it). 16 KiB: 256 64-byte entries, 64 of 256 bytes, 16 of 1024 bytes. */
#ifndef GTL_BATCH_BYTES
#define GTL_BATCH_BYTES 16384
#endif
GTL__STATIC_ASSERT(GTL_BATCH_BYTES >= 1024, "a batch must hold at least one entry of every format");

/* Entries collected by one thread and stored with a single reservation; owned by the caller (typically a
 * thread-local variable). Zero-initialised (log == NULL) means "not yet initialised". */
typedef struct gtl_batch {
    gtl_log *log;
    uint32_t count;       /* entries held */
    uint32_t max;         /* entries per reservation */
    uint32_t entry_bytes;
    unsigned char data[GTL_BATCH_BYTES];
} gtl_batch;

/* Create (or truncate) `path`, size it to capacity entries of fmt, zero-filled, and map it. Returns NULL
 * with errno set on failure (EINVAL for an unknown format or a zero or unrepresentable capacity). */
gtl_log *gtl_open(const char *path, gtl_format fmt, uint64_t capacity);

/* Store one entry (a gtl_seed64/gtl_packed64/gtl_op256/gtl_op1024 matching the log's format). Thread-safe.
 * Returns 0 when stored, 1 when dropped because the log is full (counted in gtl_overflow). */
int gtl_append(gtl_log *log, const void *entry);

/* Attach `b` to `log`, holding up to max_entries (0, or more than fit in GTL_BATCH_BYTES: as many as fit).
 * Returns the number of entries the batch holds per reservation. */
uint32_t gtl_batch_init(gtl_batch *b, gtl_log *log, uint32_t max_entries);

/* Add one entry to the batch; a full batch is flushed at once. Returns the number of entries that flush
 * dropped (0 when there was none or everything fitted). Not thread-safe: one batch per thread. */
uint32_t gtl_batch_add(gtl_batch *b, const void *entry);

/* Reserve slots for every held entry with one atomic add and store those that fit; the rest are dropped
 * and counted. Returns the number dropped. Call it before the owning thread ends and before gtl_close. */
uint32_t gtl_batch_flush(gtl_batch *b);

/* Entries stored so far, and entries dropped because the log was full. */
uint64_t gtl_written(const gtl_log *log);
uint64_t gtl_overflow(const gtl_log *log);
uint64_t gtl_capacity(const gtl_log *log);
gtl_format gtl_log_format(const gtl_log *log);

/* Sync and unmap the log, close it and write `<path>.meta.json`
 * ({"format", "entry_bytes", "capacity", "written", "overflow"}). Frees `log` whatever happens. Returns 0, or
 * -1 with errno from the first step that failed. No thread may still append, and batches must be flushed. */
int gtl_close(gtl_log *log);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t gtl_now_ns(void);

/* "seed64", "packed64", "op256", "op1024" (NULL for an unknown value), and the entry size (0 if unknown). */
const char *gtl_format_name(gtl_format fmt);
size_t gtl_entry_bytes(gtl_format fmt);

/* Copy src into the fixed-width name field dst[width]: truncated if longer, NUL-padded if shorter. */
void gtl_copy_name(char *dst, size_t width, const char *src);

#ifdef __cplusplus
}
#endif
#endif /* GPUAN_TENSOR_LOG_H */

#if defined(GPUAN_TENSOR_LOG_IMPLEMENTATION) && !defined(GPUAN_TENSOR_LOG_IMPLEMENTED)
#define GPUAN_TENSOR_LOG_IMPLEMENTED

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* C11 atomics are not C++ (before C++23) and std::atomic is not C: the counters hide behind these. Relaxed
 * order suffices: a reservation only has to hand out distinct slots, and the entries become visible to
 * readers through munmap/close after the writers were joined, which orders everything anyway. */
#ifdef __cplusplus
#include <atomic>
#include <new>
typedef std::atomic<uint64_t> gtl__counter;
#define GTL__INIT(p, v) ((void)new (p) std::atomic<uint64_t>(v))
#define GTL__ADD(p, n) ((p)->fetch_add((n), std::memory_order_relaxed))
#define GTL__LOAD(p) ((p)->load(std::memory_order_relaxed))
#else
#include <stdatomic.h>
typedef _Atomic uint64_t gtl__counter;
#define GTL__INIT(p, v) atomic_init((p), (v))
#define GTL__ADD(p, n) atomic_fetch_add_explicit((p), (n), memory_order_relaxed)
#define GTL__LOAD(p) atomic_load_explicit((p), memory_order_relaxed)
#endif

#ifdef __cplusplus
extern "C" {
#endif

struct gtl_log {
    /* next slot to hand out; it runs past capacity when the log is full (uint64_t: it cannot wrap), which
     * is why stored entries are min(next, capacity) */
    gtl__counter next;
    gtl__counter overflow;
    unsigned char *base;
    uint64_t capacity;
    size_t entry_bytes;
    size_t map_bytes;
    int fd;
    gtl_format format;
    char *path;
};

const char *gtl_format_name(gtl_format fmt) {
    switch (fmt) {
    case GTL_SEED64: return "seed64";
    case GTL_PACKED64: return "packed64";
    case GTL_OP256: return "op256";
    case GTL_OP1024: return "op1024";
    }
    return NULL;
}

size_t gtl_entry_bytes(gtl_format fmt) {
    switch (fmt) {
    case GTL_SEED64: return sizeof(gtl_seed64);
    case GTL_PACKED64: return sizeof(gtl_packed64);
    case GTL_OP256: return sizeof(gtl_op256);
    case GTL_OP1024: return sizeof(gtl_op1024);
    }
    return 0;
}

void gtl_copy_name(char *dst, size_t width, const char *src) {
    size_t n = 0;
    while (n < width && src[n] != '\0') n++;
    memcpy(dst, src, n);
    memset(dst + n, 0, width - n);
}

uint64_t gtl_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

gtl_log *gtl_open(const char *path, gtl_format fmt, uint64_t capacity) {
    size_t entry_bytes = gtl_entry_bytes(fmt);
    if (path == NULL || entry_bytes == 0 || capacity == 0 || capacity > (uint64_t)SIZE_MAX / entry_bytes ||
        capacity > (uint64_t)INT64_MAX / entry_bytes) {
        errno = EINVAL;
        return NULL;
    }
    size_t map_bytes = (size_t)capacity * entry_bytes;
    gtl_log *log = (gtl_log *)calloc(1, sizeof *log);
    char *path_copy = (char *)malloc(strlen(path) + 1);
    if (log == NULL || path_copy == NULL) {
        free(log);
        free(path_copy);
        errno = ENOMEM;
        return NULL;
    }
    strcpy(path_copy, path);
    void *base = MAP_FAILED;
    /* O_TRUNC before sizing: an old log's entries left under the new size would look like a used part */
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0 && ftruncate(fd, (off_t)map_bytes) == 0)
        base = mmap(NULL, map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        int saved = errno;
        if (fd >= 0) close(fd);
        free(path_copy);
        free(log);
        errno = saved;
        return NULL;
    }
    GTL__INIT(&log->next, 0);
    GTL__INIT(&log->overflow, 0);
    log->base = (unsigned char *)base;
    log->capacity = capacity;
    log->entry_bytes = entry_bytes;
    log->map_bytes = map_bytes;
    log->fd = fd;
    log->format = fmt;
    log->path = path_copy;
    return log;
}

/* Copy one entry. The seed64 hole is padding, which neither member assignments nor struct copies are
 * required to clear: stray stack bytes there would make logs differ run to run (and from the Python
 * writer's zeroed arrays). */
static void gtl__copy_entry(gtl_format fmt, unsigned char *dst, const void *src, size_t entry_bytes) {
    memcpy(dst, src, entry_bytes);
    if (fmt == GTL_SEED64) memset(dst + offsetof(gtl_seed64, tensor_idx) + 4, 0, 4);
}

int gtl_append(gtl_log *log, const void *entry) {
    uint64_t slot = GTL__ADD(&log->next, 1);
    if (slot >= log->capacity) {
        GTL__ADD(&log->overflow, 1);
        return 1;
    }
    gtl__copy_entry(log->format, log->base + slot * log->entry_bytes, entry, log->entry_bytes);
    return 0;
}

uint32_t gtl_batch_init(gtl_batch *b, gtl_log *log, uint32_t max_entries) {
    uint32_t fit = (uint32_t)(GTL_BATCH_BYTES / log->entry_bytes);
    b->log = log;
    b->count = 0;
    b->max = (max_entries == 0 || max_entries > fit) ? fit : max_entries;
    b->entry_bytes = (uint32_t)log->entry_bytes;
    return b->max;
}

uint32_t gtl_batch_flush(gtl_batch *b) {
    gtl_log *log = b->log;
    uint32_t n = b->count;
    if (n == 0) return 0;
    b->count = 0;
    uint64_t first = GTL__ADD(&log->next, n);
    /* near the end the reservation may straddle the capacity: store the part that fits */
    uint64_t fit = first >= log->capacity ? 0 : log->capacity - first;
    if (fit > n) fit = n;
    if (fit > 0) memcpy(log->base + first * log->entry_bytes, b->data, (size_t)fit * log->entry_bytes);
    uint32_t dropped = n - (uint32_t)fit;
    if (dropped > 0) GTL__ADD(&log->overflow, dropped);
    return dropped;
}

uint32_t gtl_batch_add(gtl_batch *b, const void *entry) {
    gtl__copy_entry(b->log->format, b->data + (size_t)b->count * b->entry_bytes, entry, b->entry_bytes);
    /* flush as soon as it is full rather than on the next add, so no full batch sits unstored */
    if (++b->count == b->max) return gtl_batch_flush(b);
    return 0;
}

uint64_t gtl_written(const gtl_log *log) {
    uint64_t next = GTL__LOAD(&log->next);
    return next < log->capacity ? next : log->capacity;
}

uint64_t gtl_overflow(const gtl_log *log) { return GTL__LOAD(&log->overflow); }

uint64_t gtl_capacity(const gtl_log *log) { return log->capacity; }

gtl_format gtl_log_format(const gtl_log *log) { return log->format; }

int gtl_close(gtl_log *log) {
    if (log == NULL) {
        errno = EINVAL;
        return -1;
    }
    int err = 0;
    if (msync(log->base, log->map_bytes, MS_SYNC) != 0) err = errno;
    if (munmap(log->base, log->map_bytes) != 0 && !err) err = errno;
    if (close(log->fd) != 0 && !err) err = errno;
    /* the same bytes as write.py's json.dump, so the two writers' sidecars are interchangeable */
    size_t len = strlen(log->path);
    char *meta_path = (char *)malloc(len + sizeof ".meta.json");
    if (meta_path == NULL) {
        if (!err) err = ENOMEM;
    } else {
        memcpy(meta_path, log->path, len);
        memcpy(meta_path + len, ".meta.json", sizeof ".meta.json");
        FILE *f = fopen(meta_path, "w");
        if (f == NULL) {
            if (!err) err = errno;
        } else {
            int bad = fprintf(f,
                              "{\"format\": \"%s\", \"entry_bytes\": %zu, \"capacity\": %" PRIu64
                              ", \"written\": %" PRIu64 ", \"overflow\": %" PRIu64 "}",
                              gtl_format_name(log->format), log->entry_bytes, log->capacity, gtl_written(log),
                              gtl_overflow(log)) < 0;
            if (bad && !err) err = errno ? errno : EIO;
            if (fclose(f) != 0 && !err) err = errno;
        }
        free(meta_path);
    }
    free(log->path);
    free(log);
    if (err) {
        errno = err;
        return -1;
    }
    return 0;
}

#ifdef __cplusplus
}
#endif
#endif /* GPUAN_TENSOR_LOG_IMPLEMENTATION */
