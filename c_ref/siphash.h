/* siphash.h -- SipHash-1-2, the keyspace hash (see siphash.c). */
#ifndef KS_SIPHASH_H
#define KS_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

/* 64-bit SipHash-1-2 of in[0..inlen) under the 16-byte key k. */
uint64_t ksSiphash(const void *in, size_t inlen, const uint8_t k[16]);
/* The same of the bytes lowered (ASCII letters), as loaded: siphash.c siphash_nocase, the
 * hash of a case-insensitive table (the server's command table, dictSdsCaseHash). */
uint64_t ksSiphashNocase(const void *in, size_t inlen, const uint8_t k[16]);
/* Derive the 16-byte key from a 64-bit seed (splitmix64). */
void ksSiphashSeed(uint64_t seed, uint8_t k[16]);

/* The instructions of one ksSiphash / ksSiphashNocase call over len bytes, as the traces
 * charge them (the gap model, KS_WORK_EXACT_OF; siphash.c's constants, fitted to callgrind). */
uint64_t ksSiphashCost(size_t len);
uint64_t ksSiphashNocaseCost(size_t len);

#endif
