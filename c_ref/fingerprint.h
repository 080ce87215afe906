/*
 * fingerprint.h -- the unsafe-iterator fingerprint shared by hashtable.c and dict.c.
 *
 * Both Valkey's hashtable and Redis' dict fold the six fields that any modification
 * changes (table pointers, size exponents, used counts of both tables) with Thomas
 * Wang's 64-bit integer mix; an unsafe iterator records the value on its first step and
 * asserts it unchanged when it is released.
 */
#ifndef KS_FINGERPRINT_H
#define KS_FINGERPRINT_H

#include <stdint.h>

static inline uint64_t ksFingerprintFold(const uint64_t integers[6]) {
    uint64_t hash = 0;
    for (int j = 0; j < 6; j++) {
        hash += integers[j];
        hash = (~hash) + (hash << 21);
        hash = hash ^ (hash >> 24);
        hash = (hash + (hash << 3)) + (hash << 8);
        hash = hash ^ (hash >> 14);
        hash = (hash + (hash << 2)) + (hash << 4);
        hash = hash ^ (hash >> 28);
        hash = hash + (hash << 31);
    }
    return hash;
}

#endif /* KS_FINGERPRINT_H */
