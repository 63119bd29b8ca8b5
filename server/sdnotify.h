/* sdnotify.h — systemd's service notification protocol without libsystemd: datagrams
 * ("READY=1", "STOPPING=1", "WATCHDOG=1") to the unix socket named by NOTIFY_SOCKET.
 * Entry points: srv_sdnotify_open, srv_sdnotify_send.
 *
 * Threads: the daemon's loop thread (any single thread). */
#ifndef SRV_SDNOTIFY_H
#define SRV_SDNOTIFY_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct srv_sdnotify {
  int fd;               /* -1: notifications off (no NOTIFY_SOCKET) */
  char path[108];       /* sun_path; '@' of an abstract name already turned into '\0' */
  int path_len;         /* bytes of path used in the address */
  uint64_t watchdog_us; /* WATCHDOG_USEC, 0 when unset */
} srv_sdnotify_t;

/* Read NOTIFY_SOCKET and WATCHDOG_USEC (and WATCHDOG_PID: the watchdog is ours only when
 * it is unset or our pid) and open a datagram socket. Without NOTIFY_SOCKET, n->fd = -1 and
 * 0 is returned. NS_EINVAL for a malformed variable, NS_EIO when no socket can be made. */
int srv_sdnotify_open(srv_sdnotify_t *n);
/* Send one state string; a no-op returning 0 when notifications are off. NS_EIO when the
 * datagram cannot be sent (the daemon logs it and goes on). */
int srv_sdnotify_send(const srv_sdnotify_t *n, const char *state);
void srv_sdnotify_close(srv_sdnotify_t *n);

#ifdef __cplusplus
}
#endif
#endif
