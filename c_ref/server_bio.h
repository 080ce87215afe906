/* server_bio.h -- the server's idle background threads (Valkey's bio workers; server_bio.c). */
#ifndef KS_SERVER_BIO_H
#define KS_SERVER_BIO_H

/* server.c makeThreadKillable: the calling thread's cancel state enabled and its type
 * asynchronous; returns the previous type (for ksRestoreCancelType). */
int ksMakeThreadKillable(void);
void ksRestoreCancelType(int type);
/* Start the workers (bio.c bioInit); 0, or -1 if a thread could not be created. */
int ksBioInit(void);
/* Stop and join the workers (bio.c bioKillThreads). */
void ksBioKillThreads(void);

#endif
