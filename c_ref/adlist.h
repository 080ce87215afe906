/*
 * adlist.h -- a doubly linked list, as Valkey's adlist.c/.h (adlist.c explains the design).
 * A server's lists: the clients and the clients with pending writes (server.c, nodes
 * embedded in the clients), a client's reply and deferred-reply lists, the pending push
 * messages, the modules' post-execution jobs and the default user's selectors (callpath.c).
 * The functions keep Valkey's names (not c_ref's ks prefix), as the code that calls them
 * reads like Valkey's; the types are ksList and ksListNode.
 */
#ifndef KS_ADLIST_H
#define KS_ADLIST_H

typedef struct ksListNode {
    struct ksListNode *prev, *next;
    void *value;
} ksListNode;

typedef struct ksList {
    ksListNode *head, *tail;
    void (*free)(void *ptr); /* each node's value, at listEmpty and listDelNode (NULL: none) */
    unsigned long len;
} ksList;

/* listEmpty: every node zfree'd (its value by the list's free method), the list left empty. */
void listEmpty(ksList *list);
/* listLinkNodeHead / listLinkNodeTail: a node the caller owns linked at the head / tail. */
void listLinkNodeHead(ksList *list, ksListNode *node);
void listLinkNodeTail(ksList *list, ksListNode *node);
/* listAddNodeTail: a zmalloc'd node holding value linked at the tail. */
void listAddNodeTail(ksList *list, void *value);
/* listUnlinkNode: a node taken out of its list (not freed), its links cleared. */
void listUnlinkNode(ksList *list, ksListNode *node);
/* listDelNode: a zmalloc'd node unlinked, its value freed by the list's free method, the
 * node zfree'd. */
void listDelNode(ksList *list, ksListNode *node);
/* listJoin: o's nodes appended to l in order, o left empty. */
void listJoin(ksList *l, ksList *o);
/* The list's links against its length and tail: 0, else -1 (check_valid). */
int listCheckValid(const ksList *list);

#endif
