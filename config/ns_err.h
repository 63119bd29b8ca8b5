/* ns_err.h — project-wide error codes.
 * Fallible functions return 0 or a negative ns_err; ns_strerror() names it. */
#ifndef NS_ERR_H
#define NS_ERR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ns_err {
  NS_OK = 0,
  NS_EINVAL = -1,       /* bad argument or input */
  NS_ENOMEM = -2,       /* host or device memory exhausted */
  NS_EIO = -3,          /* read/write/system call failed */
  NS_ENOENT = -4,       /* file, key or item not found */
  NS_ERANGE = -5,       /* value out of bounds */
  NS_EFORMAT = -6,      /* malformed file or message */
  NS_EUNSUPPORTED = -7, /* valid but not supported by this build */
  NS_EBUSY = -8,        /* queue full, try later */
  NS_ECANCELED = -9,    /* cancelled by the caller or a client disconnect */
  NS_ETIMEDOUT = -10,   /* deadline passed */
  NS_ECUDA = -11,       /* CUDA or cuBLAS call failed */
  NS_ECLOSED = -12,     /* object shut down or draining */
  NS_EINTERNAL = -13,   /* broken invariant: a bug */
  NS_ERR_MIN_ = -14     /* one past the last code; keep last */
} ns_err;

/* Static string for an ns_err (or "unknown error" for anything else). Any thread. */
const char *ns_strerror(int err);

/* Format a message into err (when err != NULL and errlen > 0; truncated, always
 * NUL-terminated) and return code: `return ns_errf(err, errlen, NS_EINVAL, "...", ...);` */
int ns_errf(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#ifdef __cplusplus
}
#endif
#endif
