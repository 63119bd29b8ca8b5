/* standalone_main.c — runs a libFuzzer harness without libFuzzer: replays every
 * file in the given folders, then 20,000 pseudo-random inputs from a fixed seed. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  if (n < 0) n = 0;
  uint8_t *buf = malloc((size_t)n + 1);
  size_t got = fread(buf, 1, (size_t)n, f);
  fclose(f);
  LLVMFuzzerTestOneInput(buf, got);
  free(buf);
  return 1;
}

int main(int argc, char **argv) {
  int files = 0;
  for (int a = 1; a < argc; a++) {
    DIR *d = opendir(argv[a]);
    if (!d) {
      files += run_file(argv[a]);
      continue;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
      if (e->d_name[0] == '.') continue;
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", argv[a], e->d_name);
      files += run_file(path);
    }
    closedir(d);
  }
  uint64_t s = 0x9e3779b97f4a7c15ull;
  enum { N = 20000, MAXLEN = 4096 };
  static uint8_t buf[MAXLEN];
  for (int i = 0; i < N; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    size_t len = (size_t)(s % MAXLEN);
    for (size_t j = 0; j < len; j++) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      buf[j] = (uint8_t)(s >> 24);
    }
    LLVMFuzzerTestOneInput(buf, len);
  }
  printf("replayed %d corpus files and %d random inputs\n", files, N);
  return 0;
}
