/*
 * server_ae.c -- the server's event loop and its socket connections, as Valkey's main
 * thread runs them (ae.c with ae_epoll.c; connection.h and socket.c):
 *
 *   aeProcessEvents: beforesleep -> aeApiPoll (epoll_pwait, fired[] from the epoll
 *        │           events) -> aftersleep -> per fired fd: its aeFileEvent, the read
 *        │           handler, then the write handler unless it is the same one already
 *        │           called (or, with AE_BARRIER, write before read)
 *        └── a connection's fd has connSocketEventHandler as both handlers: it calls the
 *              connection's read_handler / write_handler through callHandler, which holds
 *              a reference so that a connection closed inside its handler is closed only
 *              when the handler returns (CONN_FLAG_CLOSE_SCHEDULED)
 *
 *   connRead / connWrite / connWritev / connSetWriteHandler / connClose go through the
 *   connection's type (the socket type here: connSocketRead calls read(2) and keeps the
 *   connection's state and last errno, connSocketSetWriteHandler adds or removes
 *   AE_WRITABLE).
 *
 * Why these layers and not a plain epoll loop: a request to Valkey pays them (the
 * indirect calls, the event table, the connection's state checks), and c_ref's server
 * exists to be measured against Valkey's under the same client (docs/server.md).  The
 * event table grows with the highest fd (Valkey sizes it maxclients + reserved once);
 * otherwise the loop is ae's.
 *
 * Conventions: Valkey's names for Valkey's functions; no keyspace code here.
 */
#include "server_ae.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#define AE_MIN_SETSIZE 64

static_assert(AE_MIN_SETSIZE > 0 && (AE_MIN_SETSIZE & (AE_MIN_SETSIZE - 1)) == 0, "the table doubles from a power of two");
static_assert((AE_READABLE | AE_WRITABLE | AE_BARRIER) == 7, "three distinct event bits");

/* --- ae.c / ae_epoll.c --------------------------------------------------------- */

aeEventLoop *aeCreateEventLoop(int setsize) {
    aeEventLoop *el = calloc(1, sizeof(*el));
    if (!el) abort();
    el->setsize = setsize < AE_MIN_SETSIZE ? AE_MIN_SETSIZE : setsize;
    el->events = calloc((size_t)el->setsize, sizeof(aeFileEvent));
    el->fired = calloc((size_t)el->setsize, sizeof(aeFiredEvent));
    el->ep_events = calloc((size_t)el->setsize, sizeof(struct epoll_event));
    if (!el->events || !el->fired || !el->ep_events) abort();
    el->maxfd = -1;
    el->epfd = epoll_create1(EPOLL_CLOEXEC); /* aeApiCreate */
    if (el->epfd < 0) {
        int e = errno;
        aeDeleteEventLoop(el);
        errno = e;
        return NULL;
    }
    return el;
}

void aeDeleteEventLoop(aeEventLoop *el) {
    if (!el) return;
    if (el->epfd >= 0) close(el->epfd);
    free(el->events);
    free(el->fired);
    free(el->ep_events);
    free(el);
}

/* aeResizeSetSize: the table covers fd (c_ref grows it; Valkey sizes it once). */
static int aeFit(aeEventLoop *el, int fd) {
    if (fd < el->setsize) return 0;
    int n = el->setsize;
    while (n <= fd) n *= 2;
    aeFileEvent *ev = realloc(el->events, sizeof(*ev) * (size_t)n);
    aeFiredEvent *fi = realloc(el->fired, sizeof(*fi) * (size_t)n);
    struct epoll_event *ep = realloc(el->ep_events, sizeof(*ep) * (size_t)n);
    if (!ev || !fi || !ep) abort();
    memset(ev + el->setsize, 0, sizeof(*ev) * (size_t)(n - el->setsize)); /* AE_NONE */
    el->events = ev;
    el->fired = fi;
    el->ep_events = ep;
    el->setsize = n;
    return 0;
}

/* aeApiAddEvent: ADD for a new fd, MOD with the merged mask otherwise. */
static int aeApiAddEvent(aeEventLoop *el, int fd, int mask) {
    struct epoll_event ee = {0};
    int op = el->events[fd].mask == AE_NONE ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
    mask |= el->events[fd].mask;
    if (mask & AE_READABLE) ee.events |= EPOLLIN;
    if (mask & AE_WRITABLE) ee.events |= EPOLLOUT;
    ee.data.fd = fd;
    return epoll_ctl(el->epfd, op, fd, &ee) == -1 ? -1 : 0;
}

static void aeApiDelEvent(aeEventLoop *el, int fd, int delmask) {
    struct epoll_event ee = {0};
    int mask = el->events[fd].mask & ~delmask;
    if (mask & AE_READABLE) ee.events |= EPOLLIN;
    if (mask & AE_WRITABLE) ee.events |= EPOLLOUT;
    ee.data.fd = fd;
    epoll_ctl(el->epfd, mask != AE_NONE ? EPOLL_CTL_MOD : EPOLL_CTL_DEL, fd, &ee);
}

int aeCreateFileEvent(aeEventLoop *el, int fd, int mask, aeFileProc *proc, void *clientData) {
    if (fd < 0 || aeFit(el, fd)) {
        errno = ERANGE;
        return -1;
    }
    aeFileEvent *fe = &el->events[fd];
    if (aeApiAddEvent(el, fd, mask) == -1) return -1;
    fe->mask |= mask;
    if (mask & AE_READABLE) fe->rfileProc = proc;
    if (mask & AE_WRITABLE) fe->wfileProc = proc;
    fe->clientData = clientData;
    if (fd > el->maxfd) el->maxfd = fd;
    return 0;
}

void aeDeleteFileEvent(aeEventLoop *el, int fd, int mask) {
    if (fd < 0 || fd >= el->setsize) return;
    aeFileEvent *fe = &el->events[fd];
    if (fe->mask == AE_NONE) return;
    if (mask & AE_WRITABLE) mask |= AE_BARRIER; /* the barrier goes with the write event */
    aeApiDelEvent(el, fd, mask);
    fe->mask &= ~mask;
    if (fd == el->maxfd && fe->mask == AE_NONE) {
        int j;
        for (j = el->maxfd - 1; j >= 0; j--)
            if (el->events[j].mask != AE_NONE) break;
        el->maxfd = j;
    }
}

int aeGetFileEvents(const aeEventLoop *el, int fd) {
    if (fd < 0 || fd >= el->setsize) return 0;
    return el->events[fd].mask;
}

/* aeApiPoll: wait (signals in waitmask let in), the fired events with ae's masks. */
static int aeApiPoll(aeEventLoop *el) {
    struct epoll_event *ev = el->ep_events;
    int retval = epoll_pwait(el->epfd, ev, el->setsize, -1, el->waitmask);
    int numevents = 0;
    if (retval > 0) {
        numevents = retval;
        for (int j = 0; j < numevents; j++) {
            int mask = 0;
            struct epoll_event *e = ev + j;
            if (e->events & EPOLLIN) mask |= AE_READABLE;
            if (e->events & EPOLLOUT) mask |= AE_WRITABLE;
            if (e->events & EPOLLERR) mask |= AE_WRITABLE | AE_READABLE;
            if (e->events & EPOLLHUP) mask |= AE_WRITABLE | AE_READABLE;
            el->fired[j].fd = e->data.fd;
            el->fired[j].mask = mask;
        }
    } else if (retval == -1 && errno != EINTR) {
        return -1;
    }
    return numevents;
}

int aeProcessEvents(aeEventLoop *el) {
    if (el->beforesleep) el->beforesleep(el);
    int numevents = aeApiPoll(el);
    if (numevents < 0) return -1;
    el->numevents = numevents;
    if (el->aftersleep) el->aftersleep(el);
    int processed = 0;
    for (int j = 0; j < numevents; j++) {
        int fd = el->fired[j].fd;
        aeFileEvent *fe = &el->events[fd];
        int mask = el->fired[j].mask;
        int fired = 0; /* events fired for this fd */
        int invert = fe->mask & AE_BARRIER;
        if (!invert && fe->mask & mask & AE_READABLE) {
            fe->rfileProc(el, fd, fe->clientData, mask);
            fired++;
            fe = &el->events[fd]; /* refresh: the handler may resize the table */
        }
        if (fe->mask & mask & AE_WRITABLE) {
            if (!fired || fe->wfileProc != fe->rfileProc) {
                fe->wfileProc(el, fd, fe->clientData, mask);
                fired++;
            }
        }
        if (invert) {
            fe = &el->events[fd];
            if ((fe->mask & mask & AE_READABLE) && (!fired || fe->wfileProc != fe->rfileProc)) {
                fe->rfileProc(el, fd, fe->clientData, mask);
                fired++;
            }
        }
        processed++;
    }
    return processed;
}

/* --- connection.h / socket.c --------------------------------------------------- */

static void connSocketClose(connection *conn);

static inline void connIncrRefs(connection *conn) { conn->refs++; }
static inline void connDecrRefs(connection *conn) { conn->refs--; }
static inline int connHasRefs(const connection *conn) { return conn->refs != 0; }

/* connhelpers.h callHandler: 0 if the connection was closed inside the handler. */
static inline int callHandler(connection *conn, ConnectionCallbackFunc handler) {
    connIncrRefs(conn);
    if (handler) handler(conn);
    connDecrRefs(conn);
    if (conn->flags & CONN_FLAG_CLOSE_SCHEDULED) {
        if (!connHasRefs(conn)) connSocketClose(conn);
        return 0;
    }
    return 1;
}

static void connSocketEventHandler(aeEventLoop *el, int fd, void *clientData, int mask) {
    (void)el, (void)fd;
    connection *conn = clientData;
    if (conn->state == CONN_STATE_CONNECTING && (mask & AE_WRITABLE) && conn->conn_handler) {
        conn->state = CONN_STATE_CONNECTED; /* outgoing connections: none in this server */
        if (!callHandler(conn, conn->conn_handler)) return;
        conn->conn_handler = NULL;
    }
    /* Normally the read runs before the write; with the barrier the write goes first
     * (AOF fsync=always: never reply in the iteration that read the command). */
    int invert = conn->flags & CONN_FLAG_WRITE_BARRIER;
    int call_write = (mask & AE_WRITABLE) && conn->write_handler;
    int call_read = (mask & AE_READABLE) && conn->read_handler;
    if (!invert && call_read) {
        if (!callHandler(conn, conn->read_handler)) return;
    }
    if (call_write) {
        if (!callHandler(conn, conn->write_handler)) return;
    }
    if (invert && call_read) {
        if (!callHandler(conn, conn->read_handler)) return;
    }
}

static void connSocketClose(connection *conn) {
    if (conn->fd != -1) {
        aeDeleteFileEvent(conn->el, conn->fd, AE_READABLE | AE_WRITABLE);
        close(conn->fd);
        conn->fd = -1;
    }
    /* Inside a handler: the handler's callHandler closes it when it returns. */
    if (connHasRefs(conn)) {
        conn->flags |= CONN_FLAG_CLOSE_SCHEDULED;
        return;
    }
    free(conn);
}

static ssize_t connSocketWrite(connection *conn, const void *data, size_t data_len) {
    ssize_t ret = write(conn->fd, data, data_len);
    if (ret < 0 && errno != EAGAIN) {
        conn->last_errno = errno;
        /* Don't overwrite the state of a connection that is not already connected */
        if (errno != EINTR && conn->state == CONN_STATE_CONNECTED) conn->state = CONN_STATE_ERROR;
    }
    return ret;
}

/* connSocketWritev: writev(2), its errors kept as connSocketWrite keeps them. */
static ssize_t connSocketWritev(connection *conn, const struct iovec *iov, int iovcnt) {
    ssize_t ret = writev(conn->fd, iov, iovcnt);
    if (ret < 0 && errno != EAGAIN) {
        conn->last_errno = errno;
        if (errno != EINTR && conn->state == CONN_STATE_CONNECTED) conn->state = CONN_STATE_ERROR;
    }
    return ret;
}

static ssize_t connSocketRead(connection *conn, void *buf, size_t buf_len) {
    ssize_t ret = read(conn->fd, buf, buf_len);
    if (!ret) {
        conn->state = CONN_STATE_CLOSED;
    } else if (ret < 0 && errno != EAGAIN) {
        conn->last_errno = errno;
        if (errno != EINTR && conn->state == CONN_STATE_CONNECTED) conn->state = CONN_STATE_ERROR;
    }
    return ret;
}

/* connSocketSetWriteHandler: AE_WRITABLE (with the barrier if asked) while a handler is set. */
static int connSocketSetWriteHandler(connection *conn, ConnectionCallbackFunc func, int barrier) {
    if (func == conn->write_handler) return 0;
    conn->write_handler = func;
    if (barrier) conn->flags |= CONN_FLAG_WRITE_BARRIER;
    else conn->flags &= ~CONN_FLAG_WRITE_BARRIER;
    if (!conn->write_handler) {
        aeDeleteFileEvent(conn->el, conn->fd, AE_WRITABLE);
    } else if (aeCreateFileEvent(conn->el, conn->fd, AE_WRITABLE, conn->type->ae_handler, conn) == -1) {
        return -1;
    }
    return 0;
}

static int connSocketSetReadHandler(connection *conn, ConnectionCallbackFunc func) {
    if (func == conn->read_handler) return 0;
    conn->read_handler = func;
    if (!conn->read_handler) {
        aeDeleteFileEvent(conn->el, conn->fd, AE_READABLE);
    } else if (aeCreateFileEvent(conn->el, conn->fd, AE_READABLE, conn->type->ae_handler, conn) == -1) {
        return -1;
    }
    return 0;
}

static const ConnectionType CT_Socket = {
    .ae_handler = connSocketEventHandler,
    .close = connSocketClose,
    .write = connSocketWrite,
    .writev = connSocketWritev,
    .read = connSocketRead,
    .set_write_handler = connSocketSetWriteHandler,
    .set_read_handler = connSocketSetReadHandler,
};

connection *connCreateAcceptedSocket(aeEventLoop *el, int fd) {
    connection *conn = calloc(1, sizeof(*conn)); /* connCreateSocket: zcalloc */
    if (!conn) abort();
    conn->type = &CT_Socket;
    conn->el = el;
    conn->fd = fd;
    conn->state = CONN_STATE_CONNECTED; /* accepted, no TLS handshake */
    return conn;
}
