/*
 * test_adlist.c -- adlist.c against a model: random sequences of the list's operations
 * (link at the head or tail, unlink, delete, join, empty) run on lists and on arrays of the
 * same nodes in the same order; after every step the lists' order matches the arrays' in
 * both directions, listCheckValid holds, and zmalloc's used memory and the free method's
 * count account for every node deleted or emptied.  listCheckValid itself fails on each kind
 * of broken list (a wrong prev link, length, or tail).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../adlist.h"
#include "../callpath.h"
#include "testhelp.h"

#define NLISTS 3
#define MAXN 64

static int freed_values;
static void countFree(void *ptr) {
    if (ptr) freed_values++; /* every value is non-NULL */
}

typedef struct {
    ksListNode *nodes[NLISTS * MAXN];
    int n;
} model;

/* The list against the model: the same nodes forwards from the head and backwards from
 * the tail, the same length, and listCheckValid. */
static int same(const ksList *l, const model *m) {
    TEST_ASSERT(listCheckValid(l) == 0);
    TEST_ASSERT((int)l->len == m->n);
    const ksListNode *ln = l->head;
    for (int i = 0; i < m->n; i++, ln = ln->next) TEST_ASSERT(ln == m->nodes[i]);
    TEST_ASSERT(ln == NULL);
    ln = l->tail;
    for (int i = m->n - 1; i >= 0; i--, ln = ln->prev) TEST_ASSERT(ln == m->nodes[i]);
    TEST_ASSERT(ln == NULL);
    return 0;
}

static ksListNode *newNode(int tag) {
    ksListNode *n = ksZmalloc(sizeof(*n));
    n->prev = n->next = (ksListNode *)(uintptr_t)0x1; /* linking must overwrite both */
    n->value = (void *)(uintptr_t)(tag + 1);
    return n;
}

static int test_operations_match_a_model(void) {
    unsigned long long s = test_seed;
    size_t used0 = ksZmallocUsed();
    int steps = test_accurate ? 200000 : 20000;
    ksList lists[NLISTS];
    model models[NLISTS];
    memset(lists, 0, sizeof(lists));
    memset(models, 0, sizeof(models));
    for (int i = 0; i < NLISTS; i++) lists[i].free = countFree;
    int expect_freed = 0, tag = 0;
    for (int step = 0; step < steps; step++) {
        int li = (int)(test_rand(&s) % NLISTS), op = (int)(test_rand(&s) % 100);
        ksList *l = &lists[li];
        model *m = &models[li];
        if (op < 30 && m->n < MAXN) { /* link at the head */
            ksListNode *n = newNode(tag++);
            listLinkNodeHead(l, n);
            memmove(m->nodes + 1, m->nodes, (size_t)m->n * sizeof(m->nodes[0]));
            m->nodes[0] = n, m->n++;
        } else if (op < 60 && m->n < MAXN) { /* link at the tail */
            ksListNode *n = newNode(tag++);
            listLinkNodeTail(l, n);
            m->nodes[m->n++] = n;
        } else if (op < 75 && m->n) { /* unlink a node (then link it back at the tail) */
            int k = (int)(test_rand(&s) % (unsigned)m->n);
            ksListNode *n = m->nodes[k];
            listUnlinkNode(l, n);
            TEST_ASSERT(n->prev == NULL && n->next == NULL);
            memmove(m->nodes + k, m->nodes + k + 1, (size_t)(m->n - k - 1) * sizeof(m->nodes[0]));
            m->n--;
            TEST_ASSERT(same(l, m) == 0);
            listLinkNodeTail(l, n);
            m->nodes[m->n++] = n;
        } else if (op < 88 && m->n) { /* delete a node: its value freed, the node zfree'd */
            int k = (int)(test_rand(&s) % (unsigned)m->n);
            listDelNode(l, m->nodes[k]);
            memmove(m->nodes + k, m->nodes + k + 1, (size_t)(m->n - k - 1) * sizeof(m->nodes[0]));
            m->n--, expect_freed++;
        } else if (op < 96) { /* join another list into this one */
            int oi = (li + 1 + (int)(test_rand(&s) % (NLISTS - 1))) % NLISTS;
            if (m->n + models[oi].n > NLISTS * MAXN / 2) continue;
            listJoin(l, &lists[oi]);
            memcpy(m->nodes + m->n, models[oi].nodes, (size_t)models[oi].n * sizeof(m->nodes[0]));
            m->n += models[oi].n, models[oi].n = 0;
            TEST_ASSERT(same(&lists[oi], &models[oi]) == 0);
            TEST_ASSERT(lists[oi].head == NULL && lists[oi].tail == NULL);
        } else { /* empty it */
            expect_freed += m->n;
            listEmpty(l);
            m->n = 0;
            TEST_ASSERT(l->head == NULL && l->tail == NULL);
        }
        TEST_ASSERT_MSG(same(l, m) == 0, "step %d", step);
        TEST_ASSERT(freed_values == expect_freed);
    }
    for (int i = 0; i < NLISTS; i++) {
        expect_freed += models[i].n;
        listEmpty(&lists[i]);
        TEST_ASSERT(lists[i].len == 0 && listCheckValid(&lists[i]) == 0);
    }
    TEST_ASSERT(freed_values == expect_freed);
    TEST_ASSERT_MSG(ksZmallocUsed() == used0, "used memory %zu after, %zu before", ksZmallocUsed(), used0);
    return 0;
}

/* listEmpty and listDelNode without a free method leave the values alone. */
static int test_no_free_method(void) {
    ksList l = {0};
    int before = freed_values;
    for (int i = 0; i < 5; i++) listLinkNodeTail(&l, newNode(i));
    listDelNode(&l, l.head->next);
    TEST_ASSERT(l.len == 4 && listCheckValid(&l) == 0);
    listEmpty(&l);
    TEST_ASSERT(freed_values == before && l.len == 0 && listCheckValid(&l) == 0);
    listEmpty(&l); /* an empty list: nothing to do */
    ksList o = {0};
    listJoin(&l, &o); /* joining an empty list changes nothing */
    TEST_ASSERT(l.head == NULL && l.len == 0 && listCheckValid(&l) == 0);
    return 0;
}

/* listCheckValid fails on a wrong prev link, a wrong length (either way) and a wrong tail. */
static int test_check_valid_catches_broken_lists(void) {
    ksListNode n[3];
    ksList l = {0};
    for (int i = 0; i < 3; i++) listLinkNodeTail(&l, &n[i]);
    TEST_ASSERT(listCheckValid(&l) == 0);
    n[2].prev = &n[0];
    TEST_ASSERT(listCheckValid(&l) == -1);
    n[2].prev = &n[1];
    l.len = 2;
    TEST_ASSERT(listCheckValid(&l) == -1);
    l.len = 4;
    TEST_ASSERT(listCheckValid(&l) == -1);
    l.len = 3, l.tail = &n[1];
    TEST_ASSERT(listCheckValid(&l) == -1);
    l.tail = &n[2];
    TEST_ASSERT(listCheckValid(&l) == 0);
    ksList e = {.tail = &n[0]}; /* empty but with a tail */
    TEST_ASSERT(listCheckValid(&e) == -1);
    return 0;
}

int main(int argc, char **argv) {
    TEST_INIT(argc, argv);
    RUN(test_operations_match_a_model);
    RUN(test_no_free_method);
    RUN(test_check_valid_catches_broken_lists);
    return TEST_DONE();
}
