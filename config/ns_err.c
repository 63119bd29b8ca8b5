/* ns_err.c — names for the project-wide error codes (ns_err.h). */
#include "ns_err.h"

#include <stdarg.h>
#include <stdio.h>

const char *ns_strerror(int err) {
  switch (err) {
  case NS_OK: return "success";
  case NS_EINVAL: return "invalid argument";
  case NS_ENOMEM: return "out of memory";
  case NS_EIO: return "input/output error";
  case NS_ENOENT: return "not found";
  case NS_ERANGE: return "value out of range";
  case NS_EFORMAT: return "malformed data";
  case NS_EUNSUPPORTED: return "not supported";
  case NS_EBUSY: return "busy";
  case NS_ECANCELED: return "cancelled";
  case NS_ETIMEDOUT: return "timed out";
  case NS_ECUDA: return "CUDA error";
  case NS_ECLOSED: return "closed";
  case NS_EINTERNAL: return "internal error";
  default: return "unknown error";
  }
}

int ns_errf(char *err, size_t errlen, int code, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return code;
}
