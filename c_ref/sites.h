/*
 * sites.h -- the code sites of the traced build and their instruction costs.
 *
 * A trace record carries a site id in place of a program counter.  Each site
 * also carries a cost: the number of non-memory instructions the native code
 * executes between the previous recorded access and this one, on the common
 * path (the gap model KS_GAP_MODEL, see emit.h).  Variable work (hashing n
 * bytes, comparing or copying n bytes) is added with KS_WORK() at the call site.
 * The costs were calibrated against callgrind instruction counts of the native
 * build (c_ref/tests/calibrate.sh); change them only together with a re-run, and
 * with the next KS_GAP_MODEL name (emit.h).
 *
 * Adding a site: append one X() line in the group of its module.  Site ids are
 * positions in this list and are named in the trace header ("sites"), so
 * readers never hard-code them.
 *
 *   X(ENUM_SUFFIX, "module.what", cost)
 */
#ifndef KS_SITES_H
#define KS_SITES_H

#define KS_SITES(X)                                                             \
    X(NONE, "none", 0)                                                         \
    /* --- hashtable.c (Valkey hashtable) --- */                               \
    X(HT_META, "ht.meta", 10)                     /* read tables/exp/rehash_idx */ \
    X(HT_META_STORE, "ht.meta_store", 49)         /* used[], rehash_idx updates */ \
    X(HT_FIND_BUCKET, "ht.find.bucket", 2)      /* presence+tags of a bucket */  \
    X(HT_FIND_CHILD, "ht.find.child", 88)         /* follow chained slot 6 */      \
    X(HT_INSERT_BUCKET, "ht.insert.bucket", 37)  /* findBucketForInsert walk */   \
    X(HT_INSERT_STORE, "ht.insert.store", 71)     /* write tag/presence/entry */   \
    X(HT_DELETE_STORE, "ht.delete.store", 10)                                  \
    X(HT_REHASH_BUCKET, "ht.rehash.bucket", 193)  /* rehashStep source bucket */   \
    X(HT_REHASH_STORE, "ht.rehash.store", 87)                                  \
    X(HT_ITER_BUCKET, "ht.iter.bucket", 212)       /* iterator reads a bucket */    \
    X(HT_ITER_PREFETCH, "ht.iter.prefetch", 19)   /* iterator prefetch */          \
    X(HT_SCAN_BUCKET, "ht.scan.bucket", 10)                                    \
    X(HT_INCR_PREFETCH_BUCKET, "ht.incr.prefetch_bucket", 30)                  \
    X(HT_INCR_BUCKET, "ht.incr.bucket", 50)                                    \
    X(HT_INCR_PREFETCH_ENTRY, "ht.incr.prefetch_entry", 58)                     \
    X(HT_PREFETCH_BUCKET, "ht.prefetch_bucket", 28) /* load variants: native +28/key */ \
    /* --- object.c (unified kvobj / legacy entry+robj+sds) --- */             \
    X(OBJ_HEADER, "obj.header", 164)               /* robj type/enc/flags */        \
    X(OBJ_KEY, "obj.key", 46)                     /* embedded or separate key */   \
    X(OBJ_VALUE, "obj.value", 0)                 /* value bytes */                \
    X(OBJ_VALUE_PTR, "obj.value_ptr", 46)         /* robj->ptr */                  \
    X(OBJ_EXPIRE, "obj.expire", 55)                                             \
    X(OBJ_CREATE_STORE, "obj.create", 143)        /* writing a new object */       \
    X(OBJ_ENTRY, "obj.legacy_entry", 82)          /* legacy entry {key,val} */     \
    X(OBJ_PREFETCH_VALUE, "obj.prefetch_value", 42)                             \
    /* --- kvstore.c (per-slot tables) --- */                                  \
    X(KVS_SLOT, "kvs.slot_table", 71)                                           \
    /* --- resp.c / commands (query and reply buffers) --- */                  \
    X(RESP_PARSE, "resp.parse", 147)              /* reading the query buffer */   \
    X(RESP_ARGV, "resp.argv", 83)                 /* argv array and strings */     \
    X(RESP_REPLY, "resp.reply", 27)               /* writing the reply buffer */   \
    X(CMD_DISPATCH, "cmd.dispatch", 272)         /* lookupCommand (the server's, callpath.c \
     * ksCallLookup): callgrind's 337 per command (serverloop GET) less the 65 traced apart \
     * (the name's hash work, the table's loads): siphash_nocase's lowering, strncasecmp, the \
     * calls */                                                                   \
    X(CMD_EXEC, "cmd.exec", 20)                                                \
    /* --- prefetch drivers --- */                                             \
    X(PF_PIPELINE, "pf.pipeline", 12)            /* lookahead step machine */     \
    X(PF_MULTIKEY, "pf.multikey", 12)            /* MGET/MSET batch */            \
    X(PF_ITERATE, "pf.iterate", 6)                                             \
    X(PF_LOAD, "pf.load", 8)                                                   \
    /* --- snapshot.c --- */                                                   \
    X(SNAP_READ, "snap.read", 68)                                              \
    X(SNAP_WRITE, "snap.write", 35)                                            \
    X(SNAP_REFILL, "snap.refill", 180)  /* a 4 KiB copy in user space (calibrate_work.py; a load's refill is sys.file_read) */ \
    /* --- dict.c, dict_prefetch.c (Redis dict, table=dict) --- */            \
    X(DICT_META, "dict.meta", 6)                                               \
    X(DICT_BUCKET, "dict.bucket", 10)            /* ht_table[t][idx] cell */      \
    X(DICT_ENTRY, "dict.entry", 8)               /* dictEntry / NoValue node */   \
    X(DICT_KEY, "dict.key", 8)                   /* key via entry */              \
    X(DICT_STORE, "dict.store", 8)                                             \
    X(DICT_REHASH, "dict.rehash", 14)                                          \
    X(DICT_ITER, "dict.iter", 45)                /* fit: KEYS, SAVE (table=dict) */ \
    X(DICT_SCAN, "dict.scan", 10)                                              \
    X(DICT_PREFETCH, "dict.prefetch", 81)        /* dictPrefetcher states; fit: */ \
    /* least squares over lookahead (x2), MGET and MSET batch on table=dict */ \
    X(DICT_PREFETCH_VALUE, "dict.prefetch_value", 14) /* ENTRY_VALUE's value */ \
    /* prefetch after the header read (obj.prefetch_value): native +58/key */  \
    /* --- misc --- */                                                         \
    X(STACK, "stack", 2)                                                       \
    X(OTHER, "other", 4)                                                       \
    /* --- lookupKey's LRU store, kvstore's key counts, lookup re-hash --- */ \
    X(OBJ_LRU, "obj.lru", 6)                      /* val->lru = LRU_CLOCK() */      \
    X(KVS_KEY_COUNT, "kvs.key_count", 3)          /* cumulativeKeyCountAdd step */ \
    X(KEY_REHASH, "key.rehash", 10)               /* hashtableFind's hashKey call */ \
    /* --- t_hash.c (the hash type; calibrated by tests/calibrate.sh) --- */           \
    X(HASH_LP, "hash.lp", 8)                     /* a listpack element's header/bytes */ \
    X(HASH_ENTRY, "hash.entry", 12)              /* a field-value entry's value / pointer */ \
    X(HASH_STORE, "hash.store", 20)              /* writing a listpack, entry or value */ \
    X(PF_HASH, "pf.hash", 12)                    /* nested field prefetch (variants) */ \
    /* --- t_zset.c (the sorted set): zset.node's cost, the hash entry's, checked by      \
     * tests/calibrate.sh's zscore and zmscore lines; zset.store writes only in ZADD and    \
     * ZREM, which no measured phase runs: hash.store's figure (c_ref/FIDELITY.md) --- */   \
    X(ZSET_NODE, "zset.node", 12)                /* a skiplist node: score, levels, member */ \
    X(ZSET_STORE, "zset.store", 20)              /* writing a node or the zset's structs */ \
    /* --- server.c's system calls: the sites of SYSCALL markers, named "sys.<call>" as \
     * trace_format.h's enum kvtSyscall (FORMAT.md); no user-space work of their own --- */ \
    X(SYS_READ, "sys.read", 0)                   /* read(2) into the query buffer */ \
    X(SYS_WRITE, "sys.write", 0)                 /* write(2) from the reply buffer */ \
    X(SYS_EPOLL_WAIT, "sys.epoll_wait", 0)       /* epoll_pwait(2) */ \
    /* --- snapshot.c's file reads and arena.c's first touches (the same markers) --- */ \
    X(SYS_FILE_READ, "sys.file_read", 0)         /* read(2) of the snapshot file */ \
    X(SYS_PAGE_FAULT, "sys.page_fault", 0)       /* a fresh page's first touch */ \
    /* --- libc_alloc.h: glibc's accesses inside the blocks (libc mode: the server); no cost \
     * of their own: callpath.c's KS_ZMALLOC_WORK and KS_ZFREE_WORK count the calls --- */ \
    X(ALLOC_MALLOC, "alloc.malloc", 0)           /* tcache_get: e->next, e->key */ \
    X(ALLOC_FREE, "alloc.free", 0)               /* the size; tcache_put: e->next, e->key */ \
    X(ALLOC_USABLE_SIZE, "alloc.usable_size", 0) /* musable: the size, the next chunk's */ \
    /* --- rio.c, snapshot.c: the load's rio (rioRead's loop, rdbLoadProgressCallback) --- */ \
    X(RIO_READ, "rio.read", 20)                  /* rioRead: cksum, flags, processed_bytes */ \
    X(RIO_PROGRESS, "rio.progress", 42)          /* rdbLoadProgressCallback, with the checksum call */ \
    X(RIO_LOADING, "rio.loading", 20)            /* loadingAbsProgress per interval */ \
    /* --- callpath.c, resp.c: a server's argument objects (ksCallPathOn only; the in-memory \
     * parse keeps resp.parse and resp.argv).  Counted against callgrind of the native \
     * `kvsim-cref serverloop` (tests/calibrate.sh's serverloop lines, GET and MSET) --- */ \
    X(ARGV_OBJ_READ, "argv.obj_read", 0)         /* objectGetVal's header read: its code is \
                                                  * KS_OBJECT_GET_VAL_WORK (callpath.c) */ \
    X(ARGV_FREE, "argv.free", 30)                /* freeClientArgv's loop and decrRefCount's \
                                                  * own code per argument (8 + 22) */ \
    X(ARGV_BYTES, "argv.bytes", 0)               /* an argument's bytes read for its object: \
                                                  * the loop is the parse's KS_WORK, the copy \
                                                  * ksCallArgAdd's (resp.argv's stores) */

enum ksSite {
#define KS_SITE_ENUM(id, name, cost) KS_SITE_##id,
    KS_SITES(KS_SITE_ENUM)
#undef KS_SITE_ENUM
    KS_NUM_SITES
};

#endif /* KS_SITES_H */
