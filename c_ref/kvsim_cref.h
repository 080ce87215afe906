/*
 * kvsim_cref.h -- the public C API of the c_ref keyspace library (libkvsim_cref.so).
 *
 * This is the contract between c_ref and its users (model/'s ctypes binding, the
 * property tests, anyone embedding the reference keyspace).  It is deliberately
 * small and string-configured so a foreign-function binding needs no struct layouts.
 *
 * Conventions
 *   - Every function returning int returns 0 on success and -1 on error; on error a
 *     one-line message is available from ksLastError(ks) (or ksLastError(NULL) for
 *     errors in ksCreate).
 *   - Buffers returned through uint8_t ** out-parameters are owned by the keyspace and
 *     stay valid until the next call on the same keyspace.  Copy them.
 *   - Option strings are space-separated key=value pairs; unknown keys are an error.
 *
 * Options for ksCreate (defaults in brackets):
 *   table=hashtable|dict [hashtable]   layout=unified|legacy [unified]
 *   cluster=0|1 [0]                     seed=N [0]   (SipHash key derived from it)
 *   hashtable_min_exp=N [0]             (tests: start tiny to force rehashing)
 *   rdbchecksum=yes|no [yes]            Valkey's rdbchecksum: CRC-64 of snapshots on save
 *                                       and load (no: the checksum is written as 0, and a
 *                                       stored 0 is not checked, as Valkey)
 *
 * Variant strings for ksExecute / ksLoadSnapshot / ksIterate (defaults in brackets):
 *   pipeline=naive|lookahead|lookahead-hash-once [naive]    batch=1..128 [16]
 *   multikey=none|batch|chunk-15133|batch-hash-once|redis-15043 [none]
 *   load=none|prefetch-after-key|prefetch-rehash [none]
 *   iterate=none|next-bucket|valkey [none]
 *   plus any test-only variants registered in the variant registry (see c_ref/README.md).
 */
#ifndef KVSIM_CREF_H
#define KVSIM_CREF_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ksKeyspace ksKeyspace;

/* Create a keyspace; NULL on bad options (see ksLastError(NULL)). */
ksKeyspace *ksCreate(const char *options);
void ksDestroy(ksKeyspace *ks);
const char *ksLastError(const ksKeyspace *ks);

/* Execute every complete RESP2 command in query[0..len) under `variant`.
 * *reply and *reply_len receive the concatenated replies; *consumed the bytes of query used
 * (an incomplete trailing command is left unconsumed).  A protocol error produces the
 * Valkey error reply, sets *consumed to len (the connection would be closed) and returns 0. */
int ksExecute(ksKeyspace *ks, const char *variant, const uint8_t *query, size_t len,
              const uint8_t **reply, size_t *reply_len, size_t *consumed);

/* Logical clock in milliseconds, used for expiry.  Starts at 0. */
void ksSetTimeMs(ksKeyspace *ks, int64_t now_ms);

/* Snapshot (format: c_ref/SNAPSHOT.md).  Save into a buffer owned by the keyspace. */
int ksSaveSnapshot(ksKeyspace *ks, const char *variant, const uint8_t **buf, size_t *len);
/* Replace the keyspace contents by a snapshot; on error the keyspace is left unchanged. */
int ksLoadSnapshot(ksKeyspace *ks, const char *variant, const uint8_t *buf, size_t len);

/* Number of keys (not counting logically expired ones not yet deleted? no: every key
 * stored, exactly as DBSIZE answers). */
uint64_t ksDbSize(ksKeyspace *ks);
/* Allocated bytes in the arena (used_memory). */
uint64_t ksMemoryBytes(const ksKeyspace *ks);

/* Verify every structural invariant (presence bits, tags, chain shape, used counts,
 * rehash index, slot tables, allocator accounting).  0 if valid; -1 with a message. */
int ksCheckValid(ksKeyspace *ks);

/* The CLI workloads (kvsim-cref trace|native WORKLOAD) and their options -- name, type,
 * range or choices, default, help, the workloads that use it -- as one JSON object, the
 * output of `kvsim-cref options --json` (format: c_ref/workload.h,
 * ksWorkloadOptionsWriteJson).  snprintf semantics: writes at most cap bytes including
 * the NUL and returns the full length without it, so (NULL, 0) asks for the size. */
size_t ksWorkloadOptionsJson(char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif /* KVSIM_CREF_H */
