/*
 * adlist.c -- the doubly linked list of a server's lists, after Valkey's adlist.c.
 *
 *   list { head ─> node <─> node <─> node <─ tail, len, free }
 *   node { prev, next, value }
 *
 * Valkey keeps the server's small collections in this list: the clients, the clients with
 * pending writes, a client's reply blocks and (9.1) its deferred replies, the pending push
 * messages, the modules' post-execution jobs, a user's ACL selectors.  c_ref's server runs
 * the same operations on the same kind of list at the same points of a request, so the
 * loads, stores and branches of those steps are Valkey's: a node is unlinked by rewriting
 * its neighbours' links (or the list's head and tail at an end), a join is four pointer
 * writes, an empty list is emptied by a loop that does not run.
 *
 * Nodes that live inside another structure (a client's node in the client and pending-write
 * lists, as Valkey 8+'s client_list_node and pending-write node) are linked and unlinked
 * without allocation (listLinkNodeHead/Tail, listUnlinkNode); nodes the list owns are zfree'd
 * through callpath.c's zmalloc (Valkey's zfree with the libc allocator, used memory counted)
 * by listEmpty and listDelNode, their values by the list's free method.  Only the operations
 * the server performs are here, under Valkey's names.
 *
 * listCheckValid is the check_valid of the structure: every node's prev is the node before
 * it, the walk from the head ends at the tail after exactly len nodes.  As in Valkey, the
 * functions are calls from the other files, and a link-time-optimised build (the server's:
 * c_ref/Makefile SERVER_OPT, Valkey's flags) inlines the small ones where the compiler
 * sees fit.
 */
#include "adlist.h"

#include "callpath.h"

void listEmpty(ksList *list) {
    unsigned long len = list->len;
    ksListNode *current = list->head, *next;
    while (len--) {
        next = current->next;
        if (list->free) list->free(current->value);
        ksZfree(current);
        current = next;
    }
    list->head = list->tail = NULL;
    list->len = 0;
}

void listLinkNodeHead(ksList *list, ksListNode *node) {
    node->prev = NULL;
    node->next = list->head;
    if (list->head) list->head->prev = node;
    else list->tail = node;
    list->head = node;
    list->len++;
}

void listLinkNodeTail(ksList *list, ksListNode *node) {
    node->next = NULL;
    node->prev = list->tail;
    if (list->tail) list->tail->next = node;
    else list->head = node;
    list->tail = node;
    list->len++;
}

void listAddNodeTail(ksList *list, void *value) {
    ksListNode *node = ksZmalloc(sizeof(*node));
    node->value = value;
    listLinkNodeTail(list, node);
}

void listUnlinkNode(ksList *list, ksListNode *node) {
    if (node->prev) node->prev->next = node->next;
    else list->head = node->next;
    if (node->next) node->next->prev = node->prev;
    else list->tail = node->prev;
    node->next = node->prev = NULL;
    list->len--;
}

void listDelNode(ksList *list, ksListNode *node) {
    listUnlinkNode(list, node);
    if (list->free) list->free(node->value);
    ksZfree(node);
}

void listJoin(ksList *l, ksList *o) {
    if (o->len == 0) return;
    o->head->prev = l->tail;
    if (l->tail) l->tail->next = o->head;
    else l->head = o->head;
    l->tail = o->tail;
    l->len += o->len;
    o->head = o->tail = NULL;
    o->len = 0;
}

int listCheckValid(const ksList *list) {
    unsigned long n = 0;
    const ksListNode *prev = NULL;
    for (const ksListNode *ln = list->head; ln; prev = ln, ln = ln->next) {
        if (ln->prev != prev || ++n > list->len) return -1;
    }
    return n == list->len && list->tail == prev ? 0 : -1;
}
