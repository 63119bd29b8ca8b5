/* gen.c — a synchronous generation loop: each step packs one decode row per running
 * sequence plus prompt chunks into a ragged batch, samples, and stops sequences at EOS,
 * max_tokens or the callback's word. Entry point: eng_gen_run. */
#include "gen.h"

#include "ns_err.h"

#include <stdlib.h>
#include <string.h>

const char *eng_finish_name(eng_finish f) {
  switch (f) {
  case ENG_FINISH_LENGTH: return "length";
  case ENG_FINISH_STOP: return "stop";
  case ENG_FINISH_NONE: break;
  }
  return "none";
}

static int is_eos(const model_cfg *g, int32_t id) {
  for (int i = 0; i < g->n_eos; i++)
    if (g->eos_ids[i] == id) return 1;
  return 0;
}

static void seq_end(kv_t *kv, eng_gen_seq *s, eng_finish why) {
  s->finish = why;
  kv_seq_free(kv, &s->kv_);
}

int eng_gen_run(fwd_t *f, kv_t *kv, eng_gen_seq *seqs, int n, int max_step_tokens, eng_gen_cb cb,
                void (*on_prefill)(void *ud), void *ud) {
  const model_cfg *g = &fwd_backend(f)->cfg;
  int rc = 0;
  batch_t b;
  be_batch_init(&b);
  for (int i = 0; i < n; i++) {
    eng_gen_seq *s = &seqs[i];
    s->ids = NULL;
    s->logprobs = NULL;
    s->hist_ = NULL;
    s->n_ids = s->n_done_ = 0;
    s->finish = ENG_FINISH_NONE;
    kv_seq_init(&s->kv_);
  }
  int32_t *owner = malloc((size_t)(n > 0 ? n : 1) * sizeof *owner);
  int32_t *out_ids = malloc((size_t)(n > 0 ? n : 1) * sizeof *out_ids);
  float *out_lp = malloc((size_t)(n > 0 ? n : 1) * sizeof *out_lp);
  if (!owner || !out_ids || !out_lp) {
    rc = NS_ENOMEM;
    goto end;
  }
  if (max_step_tokens > fwd_max_tokens(f)) max_step_tokens = fwd_max_tokens(f);
  if (n < 1 || max_step_tokens < 1) {
    rc = NS_EINVAL;
    goto end;
  }
  for (int i = 0; i < n; i++) {
    eng_gen_seq *s = &seqs[i];
    if (s->n_prompt < 1 || s->max_tokens < 1) {
      rc = NS_EINVAL;
      goto end;
    }
    s->ids = malloc((size_t)s->max_tokens * sizeof *s->ids);
    s->logprobs = malloc((size_t)s->max_tokens * sizeof *s->logprobs);
    s->hist_ = malloc((size_t)(s->n_prompt + s->max_tokens) * sizeof *s->hist_);
    if (!s->ids || !s->logprobs || !s->hist_) {
      rc = NS_ENOMEM;
      goto end;
    }
    memcpy(s->hist_, s->prompt, (size_t)s->n_prompt * sizeof *s->hist_);
  }
  step_out_t out = {.ids = out_ids, .logprob = out_lp};
  int prefill_reported = 0;
  for (;;) {
    be_batch_reset(&b, 0);
    int budget = max_step_tokens, running = 0;
    /* pass 0: decodes (one row each) first, so they never wait behind a long prompt;
     * pass 1: prompt chunks with what is left */
    for (int pass = 0; pass < 2; pass++) {
      for (int i = 0; i < n && budget > 0; i++) {
        eng_gen_seq *s = &seqs[i];
        if (s->finish != ENG_FINISH_NONE) continue;
        int have = s->n_prompt + s->n_ids, pending = have - s->n_done_;
        int decoding = s->n_done_ >= s->n_prompt;
        if (decoding != (pass == 0)) continue;
        int take = pending < budget ? pending : budget;
        if ((rc = kv_seq_reserve(kv, &s->kv_, s->n_done_ + take))) goto end;
        batch_seq q = {.n_new = take,
                       .pos0 = s->n_done_,
                       .pages = s->kv_.pages,
                       .n_pages = s->kv_.n_pages,
                       .sample = take == pending,
                       .sp = s->sp,
                       .hist = s->hist_,
                       .n_prompt = s->n_prompt,
                       .n_hist = have,
                       .step = (uint64_t)s->n_ids};
        owner[b.n_seqs] = i;
        if ((rc = be_batch_add(&b, &q, s->hist_ + s->n_done_))) goto end;
        budget -= take;
        running++;
      }
    }
    if (running == 0) break;
    if ((rc = fwd_step(f, &b, &out, NULL))) goto end;
    int all_prefilled = 1;
    for (int k = 0; k < b.n_seqs; k++)
      seqs[owner[k]].n_done_ += b.seqs[k].n_new;
    for (int i = 0; i < n; i++)
      if (seqs[i].finish == ENG_FINISH_NONE && seqs[i].n_done_ < seqs[i].n_prompt)
        all_prefilled = 0;
    if (all_prefilled && !prefill_reported) {
      prefill_reported = 1;
      if (on_prefill) on_prefill(ud);
    }
    for (int k = 0; k < b.n_seqs; k++) {
      if (!b.seqs[k].sample) continue;
      int i = owner[k];
      eng_gen_seq *s = &seqs[i];
      int32_t id = out.ids[k];
      if (!s->ignore_eos && is_eos(g, id)) {
        seq_end(kv, s, ENG_FINISH_STOP);
        continue;
      }
      s->ids[s->n_ids] = id;
      s->logprobs[s->n_ids] = out.logprob[k];
      s->hist_[s->n_prompt + s->n_ids] = id;
      s->n_ids++;
      int stop = cb ? cb(ud, i, id, out.logprob[k]) : 0;
      if (stop < 0) {
        rc = stop;
        goto end;
      }
      if (stop)
        seq_end(kv, s, ENG_FINISH_STOP);
      else if (s->n_ids == s->max_tokens)
        seq_end(kv, s, ENG_FINISH_LENGTH);
    }
  }
end:
  for (int i = 0; i < n; i++) {
    kv_seq_free(kv, &seqs[i].kv_);
    free(seqs[i].hist_);
    seqs[i].hist_ = NULL;
  }
  be_batch_free(&b);
  free(owner);
  free(out_ids);
  free(out_lp);
  return rc;
}
