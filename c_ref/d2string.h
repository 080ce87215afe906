/*
 * d2string.h -- a double as Valkey writes it in replies and listpacks (d2string.c).
 */
#ifndef KS_D2STRING_H
#define KS_D2STRING_H

/* the longest text (fpconv_dtoa's 24 bytes) plus its NUL, rounded up */
#define KS_D2STRING_MAX 32

/* Which path ksD2String took (the callers count its work by path). */
enum { KS_D2S_SPECIAL = 0, KS_D2S_INTEGER = 1, KS_D2S_GRISU = 2 };

/* Valkey util.c d2string: value's text into buf (KS_D2STRING_MAX bytes),
 * NUL-terminated; returns its length and sets *path. */
int ksD2String(char *buf, double value, int *path);
/* fpconv_dtoa: Grisu2's shortest-or-near digits, laid out; no NUL; at most 24 bytes. */
int ksFpconvDtoa(double d, char dest[24]);
/* util.c double2ll: 1 and *out if d is integral and within +-LLONG_MAX / 2. */
int ksDouble2ll(double d, long long *out);
/* ll2string: v's digits into dst, NUL-terminated; returns the length. */
int ksLl2String(char *dst, long long v);

#endif /* KS_D2STRING_H */
