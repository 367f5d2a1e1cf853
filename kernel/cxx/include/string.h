/* kernel/cxx/include/string.h - the C library functions the module's C++
 * code calls: the kernel's own (exported) implementations. */
#ifndef TKCXX_STRING_H
#define TKCXX_STRING_H
#include <stddef.h>
#ifdef __cplusplus
extern "C" {
#endif
void *memcpy(void *, const void *, size_t);
void *memmove(void *, const void *, size_t);
void *memset(void *, int, size_t);
int memcmp(const void *, const void *, size_t);
size_t strlen(const char *);
int strcmp(const char *, const char *);
#ifdef __cplusplus
}
#endif
#endif
