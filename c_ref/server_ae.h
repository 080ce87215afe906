/*
 * server_ae.h -- the server's event loop and socket connections (server_ae.c), the
 * layers Valkey's main thread runs every request through: ae.c's file events over
 * epoll, and connection.h / socket.c's connection type (a table of functions a
 * connection calls through, its state, its handlers).
 */
#ifndef KS_SERVER_AE_H
#define KS_SERVER_AE_H

#include <signal.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

/* --- ae.c ---------------------------------------------------------------------- */

#define AE_NONE 0
#define AE_READABLE 1
#define AE_WRITABLE 2
#define AE_BARRIER 4 /* with WRITABLE: never fire the write after the read in one iteration */

typedef struct aeEventLoop aeEventLoop;
typedef void aeFileProc(aeEventLoop *el, int fd, void *clientData, int mask);
typedef void aeBeforeSleepProc(aeEventLoop *el);

typedef struct aeFileEvent {
    int mask; /* AE_(READABLE|WRITABLE|BARRIER) */
    aeFileProc *rfileProc, *wfileProc;
    void *clientData;
} aeFileEvent;

typedef struct aeFiredEvent {
    int fd, mask;
} aeFiredEvent;

struct aeEventLoop {
    int maxfd;   /* highest file descriptor registered */
    int setsize; /* events[] and fired[] hold this many */
    aeFileEvent *events;
    aeFiredEvent *fired;
    int epfd;
    void *ep_events; /* struct epoll_event[setsize] */
    const sigset_t *waitmask; /* signals let in while waiting (epoll_pwait) */
    aeBeforeSleepProc *beforesleep, *aftersleep;
    int numevents; /* fired by the last wait (aftersleep reads it) */
};

/* NULL when the epoll instance cannot be made (errno set). */
aeEventLoop *aeCreateEventLoop(int setsize);
void aeDeleteEventLoop(aeEventLoop *el);
/* 0, or -1 (errno) when the fd is past what the table can grow to or epoll refuses it. */
int aeCreateFileEvent(aeEventLoop *el, int fd, int mask, aeFileProc *proc, void *clientData);
void aeDeleteFileEvent(aeEventLoop *el, int fd, int mask);
int aeGetFileEvents(const aeEventLoop *el, int fd);
/* One iteration: beforesleep, wait, aftersleep, the fired events' handlers.  The number
 * of events processed, or -1 when the wait failed with anything but EINTR. */
int aeProcessEvents(aeEventLoop *el);

/* --- connection.h / socket.c --------------------------------------------------- */

enum { CONN_STATE_NONE, CONN_STATE_CONNECTING, CONN_STATE_ACCEPTING, CONN_STATE_CONNECTED,
       CONN_STATE_CLOSED, CONN_STATE_ERROR };
#define CONN_FLAG_CLOSE_SCHEDULED (1 << 0) /* closed inside a handler: close when it returns */
#define CONN_FLAG_WRITE_BARRIER (1 << 1)

typedef struct connection connection;
typedef void (*ConnectionCallbackFunc)(connection *conn);

typedef struct ConnectionType {
    void (*ae_handler)(aeEventLoop *el, int fd, void *clientData, int mask);
    void (*close)(connection *conn);
    ssize_t (*write)(connection *conn, const void *data, size_t len);
    ssize_t (*writev)(connection *conn, const struct iovec *iov, int iovcnt);
    ssize_t (*read)(connection *conn, void *buf, size_t len);
    int (*set_write_handler)(connection *conn, ConnectionCallbackFunc handler, int barrier);
    int (*set_read_handler)(connection *conn, ConnectionCallbackFunc handler);
} ConnectionType;

struct connection {
    const ConnectionType *type;
    aeEventLoop *el;
    int state;
    short flags, refs;
    int last_errno;
    int fd;
    void *private_data;
    ConnectionCallbackFunc conn_handler, write_handler, read_handler;
};

/* connCreateAcceptedSocket: a connected socket's connection (calloc'd). */
connection *connCreateAcceptedSocket(aeEventLoop *el, int fd);

static inline ssize_t connRead(connection *conn, void *buf, size_t len) { return conn->type->read(conn, buf, len); }
static inline ssize_t connWrite(connection *conn, const void *data, size_t len) {
    return conn->type->write(conn, data, len);
}
static inline ssize_t connWritev(connection *conn, const struct iovec *iov, int iovcnt) {
    return conn->type->writev(conn, iov, iovcnt);
}
static inline int connSetReadHandler(connection *conn, ConnectionCallbackFunc func) {
    return conn->type->set_read_handler(conn, func);
}
static inline int connSetWriteHandler(connection *conn, ConnectionCallbackFunc func) {
    return conn->type->set_write_handler(conn, func, 0);
}
static inline int connHasWriteHandler(const connection *conn) { return conn->write_handler != NULL; }
static inline void connClose(connection *conn) { conn->type->close(conn); }
static inline int connGetState(const connection *conn) { return conn->state; }
static inline void *connGetPrivateData(const connection *conn) { return conn->private_data; }
static inline void connSetPrivateData(connection *conn, void *data) { conn->private_data = data; }

#endif
