/* src/arch/context.h - picks the architecture's fault-context macros. */
#ifndef TK_ARCH_CONTEXT_H
#define TK_ARCH_CONTEXT_H
#if defined(__x86_64__)
#include "arch/x86_64/context.h"
#else
#error "trapkit: this architecture has no src/arch/<arch>/context.h yet"
#endif
#endif
