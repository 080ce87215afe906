/*
 * server.h -- c_ref's keyspace behind a RESP2 server on TCP (server.c).
 *
 * One process, one keyspace, one thread: an epoll event loop shaped like
 * Valkey's main thread (see the essay atop server.c).  `kvsim-cref serve`
 * (main.c) fills a ksServerConfig from its command line and calls ksServe.
 */
#ifndef KS_SERVER_H
#define KS_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct ksServerConfig {
    const char *bind;     /* address to listen on [127.0.0.1] */
    int port;             /* 0: an ephemeral port (printed on the ready line) */
    const char *options;  /* ksKeyspaceNew options: "table=... layout=... cluster=..." */
    const char *pipeline; /* pipeline variant running a query buffer (pipeline.c) */
    const char *multikey; /* multi-key variant of MGET/MSET (commands.c) */
    int batch;            /* prefetch-batch-max-size at start: 0 off, 1..128 */
    int maxclients;       /* Valkey's maxclients [10000] */
    FILE *ready;          /* "ready HOST PORT\n" is printed here once listening (NULL: none) */
    size_t querybuf_limit; /* client-query-buffer-limit [1 GiB] (0: the default) */
    int arena_allocator;  /* 1: the keyspace's deterministic arena; 0: the C library's
                           * malloc, as the reference Valkey (MALLOC=libc) [0] */
} ksServerConfig;

/* Prefetch-batch-max-size's range (Valkey's CONFIG SET limits). */
#define KS_SERVER_MAX_BATCH 128

/* Serve until SIGTERM or SIGINT; 0 after a clean shutdown, -1 with a one-line
 * message in err when the server cannot start (bad options, address in use). */
int ksServe(const ksServerConfig *cfg, char *err, size_t errlen);

/* One client without sockets, for the fuzz target and tests: the server's query
 * handling (query buffer, pipeline, compaction, limit) on bytes given as reads.
 * Feed returns 1 once the client is to be closed (protocol error, query buffer
 * limit; further input is ignored), else 0; *reply is valid until the next call. */
int ksServerSessionOpen(const ksServerConfig *cfg, char *err, size_t errlen);
int ksServerSessionFeed(const uint8_t *p, size_t n, const uint8_t **reply, size_t *reply_len);
int ksServerSessionCheckValid(char *err, size_t errlen);
void ksServerSessionClose(void);

#endif
