/*
 * callpath.h -- the server's per-command work around the keyspace, as Valkey's
 * main thread does it (callpath.c): argv objects from the libc allocator, the
 * command dict, processCommand's checks and call()'s bookkeeping, replies
 * appended piece by piece.  Off unless a server turns it on (ksCallPathEnable);
 * the in-memory workloads never do, so their code paths and traces are unchanged.
 */
#ifndef KS_CALLPATH_H
#define KS_CALLPATH_H

#include <stddef.h>
#include <stdint.h>

#include "adlist.h"
#include "sds.h"

typedef struct ksKeyspace ksKeyspace;
typedef struct ksClient ksClient;
typedef struct ksCommand ksCommand;
typedef struct ksCommandDef ksCommandDef;
typedef struct ksKeyInfo ksKeyInfo;


/* On: builds the command table (a hashtable of names) from the registered commands;
 * `pending` is called when a client's first reply byte is queued (prepareClientToWrite's
 * pending-write list), may be NULL.  Off: frees the table and the latency histograms. */
void ksCallPathEnable(uint64_t seed, void (*pending)(ksClient *c));
void ksCallPathDisable(void);
extern int ksCallPathOn; /* read on every command: a plain flag */
/* 1 if Valkey's command table flags the command `name` (lower case) CMD_WRITE. */
int ksCallIsWrite(const char *name);

/* networking.c createClient's part of a server's client: id, protocol, default user, the
 * empty deferred-reply buffer. */
void ksCallClientInit(ksClient *c);
/* A server's client between commands (resetClient done): the deferred-reply buffer
 * committed and empty, the reply list's links consistent.  0, else -1 and err. */
int ksCallClientCheckValid(const ksClient *c, char *err, size_t errlen);

/* Valkey 9's read flags (c->read_flags) of one parse attempt of the query buffer, and
 * handleParseResults's verdict on them.  Parse rc 1 (a command) sets PARSING_COMPLETED,
 * or for an empty command (argc 0) INLINE_ZERO_QUERY_LEN (inline) or
 * PARSING_NEGATIVE_MBULK_LEN ("*0", "*-1"), which resetClient drops; -1 a protocol
 * error; 0 (more bytes needed) none.  Returns the verdict as a parse rc (1, -1, 0). */
enum { /* the bits as the reference binary tests them */
    KS_READ_FLAGS_ERRORS = 0x7fe | (1 << 22), /* Valkey's parse errors (c_ref sets one of them) */
    KS_READ_FLAGS_ERROR_PROTOCOL = 1 << 4,
    KS_READ_FLAGS_INLINE_ZERO_QUERY_LEN = 1 << 11,
    KS_READ_FLAGS_PARSING_NEGATIVE_MBULK_LEN = 1 << 12,
    KS_READ_FLAGS_PARSING_COMPLETED = 1 << 13,
};
int ksCallParseResults(ksClient *c, int rc, int argc, int multibulk);

/* zmalloc/zfree with the libc allocator (Valkey's mem_allocator:libc build):
 * malloc or free plus malloc_usable_size into used_memory. */
void *ksZmalloc(size_t n);
void *ksZcalloc(size_t n);
void ksZfree(void *p);
/* zmalloc_usable: the block and its usable size (a reply block's, reply.c). */
void *ksZmallocUsable(size_t n, size_t *usable);
size_t ksZmallocUsed(void);

/* argv: one zmalloc'd array and an object per argument (createStringObject:
 * EMBSTR up to 44 bytes, else a RAW object and its sds); freed per command
 * (freeClientArgv: decrRefCount each, zfree the array). */
void ksCallArgvNew(ksCommand *cmd, int argc);
void ksCallArgAdd(ksCommand *cmd, const uint8_t *p, size_t len);
void ksCallArgvFree(ksCommand *cmd);

/* object.c objectGetVal of argument j (a server's argv): the string, read through the
 * object's header as Valkey 9.1 reads every argument. */
sds ksCallArgVal(const ksCommand *cmd, int j);
sds ksObjectGetVal(const void *o); /* the same of an argument object (a robj) */
/* The same of a value object of the keyspace (addReplyBulk's reads): its header recorded
 * as an object's, its instructions as measured (callpath.c KS_OBJECT_GET_VAL_VALUE_WORK). */
sds ksObjectGetValOfValue(const void *o);
/* db.c getKeysFromCommand -> getKeysUsingLegacyRangeSpec for a server's command: the
 * positions of its keys in a getKeysResult (a stack buffer of MAX_KEYS_BUFFER entries,
 * zmalloc'd past it: getKeysPrepareResult), freed by ksCallGetKeysFree. */
#define KS_MAX_KEYS_BUFFER 256
typedef struct ksKeyReference {
    int pos, flags;
} ksKeyReference;
typedef struct ksGetKeysResult {
    int numkeys, size;
    ksKeyReference *keys;
    ksKeyReference keysbuf[KS_MAX_KEYS_BUFFER];
} ksGetKeysResult;
int ksCallGetKeys(const ksCommand *cmd, ksGetKeysResult *result);
void ksCallGetKeysFree(ksGetKeysResult *result);
/* lookupCommand: the dict of command names (case-insensitive SipHash). */
const ksCommandDef *ksCallLookup(const char *name, size_t len);
/* A string key's write in a server: tryObjectEncoding of value argument j (before setKey);
 * after it, dbSetValue's unlink notifications (old_type: the overwritten value's type, -1
 * for a new key), setKey's removeExpire and signalModifiedKey, notifyKeyspaceEvent "set". */
void ksCallSetKeyValueArg(ksCommand *cmd, int j);
void ksCallSetKeyDone(ksKeyspace *ks, ksKeyInfo *ki, int old_type);
/* db.c dbSetValue's swap of two RAW strings: argument j's value into the old entry, the old
 * value into argument j (freed with the argv); 0 if not applicable (see callpath.c). */
int ksCallSetValueSwap(ksKeyspace *ks, ksKeyInfo *ki, void *entry, ksCommand *cmd, int j, int64_t expire_ms);
/* db.c dbAdd's objectSetKeyAndExpire of a new key: the entry made around argument j's value
 * (the argument's sds taken over), inserted; 0 if not applicable (see callpath.c). */
int ksCallSetValueAdopt(ksKeyspace *ks, ksKeyInfo *ki, ksCommand *cmd, int j, int64_t expire_ms);

/* processCommand's checks and call() around def->proc (id: its commandstats row). */
void ksCallCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd, const ksCommandDef *def, int id);

/* addReply*: prepareClientToWrite, then _addReplyToBufferOrList of each piece. */
int ksCallPrepareWrite(ksClient *c);
/* Valkey 9's isCopyAvoidPreferred (reply offload): 1 if a bulk reply of len bytes (of the
 * object obj, read through objectGetVal, or of bytes without one: obj NULL) would be
 * referenced, not copied; has_obj 0: a reply into an empty buffer. */
int ksCallCopyAvoidPreferred(const ksClient *c, int has_obj, const void *obj, size_t len);
/* object.c stringObjectLen of a string object: sdslen(objectGetVal(o)). */
size_t ksCallStringObjectLen(const void *o);
void ksCallAppend(ksKeyspace *ks, ksClient *c, const void *s, size_t len);
/* _addReplyLongLongWithPrefix: a shared header below 32, else formatted. */
void ksCallAppendLen(ksKeyspace *ks, ksClient *c, char prefix, long long v);

/* handleReadResult's counters after n > 0 bytes were read, postWriteToClient's after a
 * write of `written` bytes (0: none). */
void ksCallReadDone(ksClient *c, size_t n);
void ksCallWriteDone(ksClient *c, size_t written);
/* getClientType(c) == CLIENT_TYPE_REPLICA; clientHasPendingReplies(c). */
int ksCallClientIsReplica(const ksClient *c);
int ksCallClientHasPendingReplies(const ksClient *c);

/* server.c afterSleep (moduleAcquireGIL, the event loop's start time and command count,
 * updateCachedTime(1) with localtime_r's daylight flag, the command time snapshot) and
 * beforeSleep's moduleReleaseGIL. */
void ksCallAfterSleep(int numevents);
void ksCallBeforeSleepDone(void);
/* db.c lookupKey's steps for a found key in a server: the client's CLIENT NO-TOUCH,
 * hasActiveChildProcess, canUseSharedObject, the maxmemory policy's LFU bit; 1 and *lru set
 * to LRU_CLOCK() when the access time is to be stored, else 0.  A missed key: the
 * "keymiss" keyspace event (read lookups). */
int ksCallLookupKeyTouch(unsigned *lru);
void ksCallLookupKeyMiss(void);
/* INFO's figures. */
uint64_t ksCallStatNumcommands(void);

#endif
