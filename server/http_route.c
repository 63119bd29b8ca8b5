/* http_route.c — the route table: exact method + path matches, 404 and 405 (with Allow),
 * and the API-key check of non-public routes. Entry: http_route_add, http__route_resolve. */
#include "http_int.h"
#include "ns_err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int http_route_add(http_server_t *s, const char *method, const char *path, http_handler_fn handler,
                   void *ud, unsigned flags) {
  if (!s || !method || !*method || !path || path[0] != '/' || !handler) return NS_EINVAL;
  if (strlen(method) >= sizeof(((http_req_t *)0)->method)) return NS_EINVAL;
  for (size_t i = 0; i < s->nroutes; i++)
    if (strcmp(s->routes[i].method, method) == 0 && strcmp(s->routes[i].path, path) == 0)
      return NS_EINVAL;
  if (s->nroutes == s->routes_cap) {
    size_t ncap = s->routes_cap ? s->routes_cap * 2 : 8;
    http_route_t *nr = realloc(s->routes, ncap * sizeof *nr);
    if (!nr) return NS_ENOMEM;
    s->routes = nr;
    s->routes_cap = ncap;
  }
  http_route_t *r = &s->routes[s->nroutes];
  r->method = strdup(method);
  r->path = strdup(path);
  if (!r->method || !r->path) {
    free(r->method);
    free(r->path);
    return NS_ENOMEM;
  }
  r->handler = handler;
  r->ud = ud;
  r->flags = flags;
  s->nroutes++;
  return 0;
}

void http__routes_free(http_server_t *s) {
  for (size_t i = 0; i < s->nroutes; i++) {
    free(s->routes[i].method);
    free(s->routes[i].path);
  }
  free(s->routes);
  s->routes = NULL;
  s->nroutes = s->routes_cap = 0;
}

/* HEAD is answered wherever GET is (RFC 9110 9.1): the handler runs, the response goes
 * out without its body (http_resp.c). */
static bool method_matches(const http_route_t *rt, const char *method) {
  return strcmp(rt->method, method) == 0 ||
         (strcmp(method, "HEAD") == 0 && strcmp(rt->method, "GET") == 0);
}

void http__route_resolve(http_req_t *req) {
  http_server_t *s = req->srv;
  const http_route_t *match = NULL;
  size_t alen = 0;
  req->pre_allow[0] = '\0';
  if (req->conn && req->conn->reserve) req->close_after = true; /* one request (http.h) */
  for (size_t i = 0; i < s->nroutes; i++) {
    const http_route_t *rt = &s->routes[i];
    if (strcmp(rt->path, req->path) != 0) continue;
    if (method_matches(rt, req->method)) {
      match = rt;
      break;
    }
    bool get = strcmp(rt->method, "GET") == 0;
    int n = snprintf(req->pre_allow + alen, sizeof req->pre_allow - alen, "%s%s%s",
                     alen ? ", " : "", rt->method, get ? ", HEAD" : "");
    if (n > 0 && alen + (size_t)n < sizeof req->pre_allow) alen += (size_t)n;
  }
  if (!match) {
    req->pre_status = alen ? 405 : 404;
    if (alen)
      snprintf(req->msg, sizeof req->msg, "Method %s is not allowed for %.100s (allowed: %.80s)",
               req->method, req->path, req->pre_allow);
    else
      snprintf(req->msg, sizeof req->msg, "Invalid URL (%s %.150s)", req->method, req->path);
    return;
  }
  if (req->conn && req->conn->reserve && !(match->flags & HTTP_ROUTE_PROBE)) {
    req->pre_status = 503;
    s->st.rejected_connections++;
    snprintf(req->msg, sizeof req->msg,
             "The server has server.max_connections (%d) connections open; only health, "
             "readiness and metrics are answered on this one",
             s->lim.max_connections);
    return;
  }
  if (!(match->flags & HTTP_ROUTE_PUBLIC)) {
    int a = http__auth_check(s, req);
    if (a != 0) {
      req->pre_status = 401;
      snprintf(req->msg, sizeof req->msg, "%s",
               a == 1 ? "You didn't provide an API key. You need to provide your API key in "
                        "an Authorization header using Bearer auth (i.e. Authorization: "
                        "Bearer YOUR_KEY)."
                      : "Incorrect API key provided");
      return;
    }
  }
  req->handler = match->handler;
  req->handler_ud = match->ud;
}
