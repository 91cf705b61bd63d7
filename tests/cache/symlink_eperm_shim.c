/* LD_PRELOAD shim for tests: symlink() and symlinkat() fail with EPERM, as on
   vfat/exFAT mounts or Windows without Developer Mode (field failure B14). */
#include <errno.h>

int symlink(const char* target, const char* linkpath) {
  (void)target;
  (void)linkpath;
  errno = EPERM;
  return -1;
}

int symlinkat(const char* target, int newdirfd, const char* linkpath) {
  (void)target;
  (void)newdirfd;
  (void)linkpath;
  errno = EPERM;
  return -1;
}
