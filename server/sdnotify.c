/* sdnotify.c — sd_notify(3)'s wire protocol in a few lines: one AF_UNIX datagram per
 * state change to $NOTIFY_SOCKET (a path, or '@' for the abstract namespace). */
#include "sdnotify.h"

#include "ns_err.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int srv_sdnotify_open(srv_sdnotify_t *n) {
  memset(n, 0, sizeof *n);
  n->fd = -1;
  /* The one place nanoserve reads the environment: NOTIFY_SOCKET and WATCHDOG_USEC are how
   * systemd (the service manager, not the operator) talks to the service, so they cannot be
   * settings in the config file. */
  const char *sock = getenv("NOTIFY_SOCKET");
  const char *wd = getenv("WATCHDOG_USEC");
  const char *wpid = getenv("WATCHDOG_PID");
  if (!sock || !*sock) return 0;
  size_t len = strlen(sock);
  if ((sock[0] != '/' && sock[0] != '@') || len >= sizeof n->path) return NS_EINVAL;
  memcpy(n->path, sock, len);
  if (n->path[0] == '@') n->path[0] = '\0';
  n->path_len = (int)len;
  if (wd && *wd) {
    char *end;
    errno = 0;
    unsigned long long us = strtoull(wd, &end, 10);
    if (errno || *end || us == 0) return NS_EINVAL;
    int mine = 1;
    if (wpid && *wpid) mine = strtol(wpid, NULL, 10) == (long)getpid();
    n->watchdog_us = mine ? us : 0;
  }
  n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (n->fd < 0) return NS_EIO;
  return 0;
}

int srv_sdnotify_send(const srv_sdnotify_t *n, const char *state) {
  if (n->fd < 0) return 0;
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  memcpy(sa.sun_path, n->path, (size_t)n->path_len);
  socklen_t salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (size_t)n->path_len +
                                (n->path[0] ? 1 : 0));
  ssize_t w;
  do
    w = sendto(n->fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, salen);
  while (w < 0 && errno == EINTR);
  return w < 0 ? NS_EIO : 0;
}

void srv_sdnotify_close(srv_sdnotify_t *n) {
  if (n->fd >= 0) close(n->fd);
  n->fd = -1;
}
