/* request.c — allocation of generation requests (request.h): eng_req_new gives a zeroed
 * request with OpenAI's default sampling, eng_req_free releases it and what it owns. */
#include "request.h"

#include <stdlib.h>

eng_req *eng_req_new(void) {
  eng_req *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  r->sp = samp_params_default();
  r->stream = 0;
  r->state = ENG_QUEUED;
  return r;
}

void eng_req_free(eng_req *r) {
  if (!r) return;
  free(r->prompt);
  for (int i = 0; i < ENG_MAX_STOP; i++)
    free(r->stop[i]);
  free(r->sp.bias);
  free(r->stop_ids);
  free(r);
}
