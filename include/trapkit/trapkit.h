/* trapkit/trapkit.h - the whole public C API.
 *
 * trapkit makes hardware traps (page-protection faults, userfaultfd events,
 * signals) a fast, safe building block for user programs.  See README.md and
 * docs/design.md.
 */
#ifndef TRAPKIT_TRAPKIT_H
#define TRAPKIT_TRAPKIT_H

#define TRAPKIT_VERSION_MAJOR 0
#define TRAPKIT_VERSION_MINOR 1
#define TRAPKIT_VERSION_PATCH 0
#define TRAPKIT_VERSION "0.1.0"

#include <trapkit/error.h>
#include <trapkit/region.h>
#include <trapkit/probe.h>
#include <trapkit/fast.h>

#endif
