/*
 * warmset.h -- the cache lines a workload's setup left behind, in the order it
 * last touched them (the compact form of the setup's warm-up prefix; emit.c).
 *
 * A set of at most `max_lines` distinct 64-byte lines kept in exact LRU order:
 * touching a line moves it to the most recent end; touching a new line when
 * the set is full drops the least recently touched one.  Visiting the set from
 * its least to its most recent line and touching each line once replays, into
 * any LRU cache or TLB that holds no more than `max_lines` lines (or the pages
 * of them), the state the full access sequence leaves: an LRU stack orders
 * blocks by their last touch, and a page's last touch is its lines' latest.
 * See warmset.c for the design essay.
 */
#ifndef KS_WARMSET_H
#define KS_WARMSET_H

#include <stddef.h>
#include <stdint.h>

typedef struct ksWarmSet ksWarmSet;

/* One line as visited: its address (line aligned), whether any store touched
 * it since it entered the set, and the tag and site of its last touch. */
typedef struct ksWarmLine {
    uint64_t line;
    uint8_t dirty;
    uint8_t tag;
    uint16_t site;
} ksWarmLine;

/* A set holding at most max_lines lines (>= 1).  NULL when out of memory. */
ksWarmSet *ksWarmSetNew(uint64_t max_lines);
void ksWarmSetFree(ksWarmSet *s);
/* Touch every line of [addr, addr + size) (size 0 reads as 1). */
void ksWarmSetTouch(ksWarmSet *s, uint64_t addr, uint64_t size, int store, uint8_t tag, uint16_t site);
/* Lines in the set, and lines dropped because it was full. */
uint64_t ksWarmSetCount(const ksWarmSet *s);
uint64_t ksWarmSetDropped(const ksWarmSet *s);
/* Call fn for every line, least recently touched first. */
void ksWarmSetVisit(const ksWarmSet *s, void (*fn)(void *ctx, const ksWarmLine *l), void *ctx);
/* 0, or -1 with a message: list and hash chains agree, no line twice, count
 * within the bound. */
int ksWarmSetCheckValid(const ksWarmSet *s, char *err, size_t errlen);

#endif /* KS_WARMSET_H */
