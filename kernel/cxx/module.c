// SPDX-License-Identifier: GPL-2.0
/*
 * kernel/cxx/module.c - tkcxx.ko's C part: the kernel's side of the C++
 * runtime (kmalloc, the log, WARN, the clock) and the module's entry points.
 *
 * Loading runs the global constructors and then, as the parameter `run`
 * says, the tests ("tests"), the measurements ("bench"), both ("all"), or
 * nothing ("none": load and unload alone).  Each line it writes starts with
 * "tkcxx:"; the results with "KT-SAY " and "KT-JSON " (scripts/kernel-test.py
 * reads them from the kernel log).  Unloading runs the global destructors
 * and says what the runtime still holds (objects from new, exceptions).
 */
#include <linux/bug.h>
#include <linux/kernel.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "include/tkcxx.h"

static char *run = "all";
module_param(run, charp, 0444);
MODULE_PARM_DESC(run, "what loading runs: tests, bench, all or none");
int tkcxx_ctor_throws;
module_param_named(ctor_throws, tkcxx_ctor_throws, int, 0444);
MODULE_PARM_DESC(ctor_throws, "a global constructor throws (the load must fail cleanly)");
char *tkcxx_unit = "TSC ticks";
module_param_named(unit, tkcxx_unit, charp, 0444);
MODULE_PARM_DESC(unit, "what the time-stamp counter counts (insn: instructions, under qemu -icount)");
int tkcxx_dtor_throws;
module_param_named(dtor_throws, tkcxx_dtor_throws, int, 0444);
MODULE_PARM_DESC(dtor_throws, "a global destructor throws (the unload goes on, with a warning)");
static int uncaught;
module_param(uncaught, int, 0444);
MODULE_PARM_DESC(uncaught, "also throw what nothing catches, leave a noexcept function and throw in a destructor the unwinding runs (5 warnings)");
static int opts = -1;
module_param(opts, int, 0444);
MODULE_PARM_DESC(opts, "the runtime's optimisations, bits: 1 one phase, 2 inline raise, 4 cache (default: all)");

static DEFINE_MUTEX(tkcxx_lock); /* one call into the C++ part at a time */

void *tkk_alloc(size_t n)
{
	/* (a failure is the caller's to report: std::bad_alloc) */
	return kmalloc(n, GFP_KERNEL | __GFP_NOWARN);
}

void tkk_free(void *p)
{
	kfree(p);
}

void tkk_print(const char *s)
{
	pr_info("%s\n", s);
}

void tkk_warn(const char *s)
{
	WARN(1, "%s\n", s);
}

void tkk_bug(const char *s)
{
	pr_emerg("%s\n", s);
	BUG();
}

uint64_t tkk_now(void)
{
	return ktime_get_ns();
}

int tkk_snprintf(char *buf, size_t n, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vsnprintf(buf, n, fmt, ap);
	va_end(ap);
	return r;
}

static int call(int (*fn)(void *), void *arg)
{
	int r;

	mutex_lock(&tkcxx_lock);
	r = tkcxx_call(fn, arg);
	mutex_unlock(&tkcxx_lock);
	return r;
}

static int __init tkcxx_init(void)
{
	int r, failed = 0;
	bool tests = !strcmp(run, "tests") || !strcmp(run, "all");
	bool bench = !strcmp(run, "bench") || !strcmp(run, "all");

	if (!tests && !bench && strcmp(run, "none")) {
		pr_err("tkcxx: run=%s: expected tests, bench, all or none\n", run);
		return -EINVAL;
	}
	mutex_lock(&tkcxx_lock);
	r = tkcxx_load();
	mutex_unlock(&tkcxx_lock);
	if (r) {
		struct tkcxx_counts c;

		tkcxx_get_counts(&c);
		pr_err("tkcxx: not loaded: the runtime's setup gave %d\n", r);
		pr_info("tkcxx: unloaded: %ld objects from new and %ld exceptions not freed\n",
			c.news, c.exceptions);
		return r;
	}
	if (tests) {
		r = call(tkcxx_run_tests, NULL);
		pr_info("KT-SAY tkcxx tests: %s (%d)\n", r ? "FAILED" : "passed", r);
		failed |= r != 0;
	}
	if (opts >= 0) {
		tkcxx_opts.one_phase = opts & 1;
		tkcxx_opts.inline_raise = (opts >> 1) & 1;
		tkcxx_opts.cache = (opts >> 2) & 1;
	}
	if (uncaught) {
		r = call(tkcxx_uncaught, NULL);
		pr_info("KT-SAY tkcxx uncaught exception: the call gave %d (expected %d)\n", r, -EPROTO);
		failed |= r != -EPROTO;
		r = call(tkcxx_terminates, NULL);
		pr_info("KT-SAY tkcxx std::terminate: the call gave %d (expected %d)\n", r, -ECANCELED);
		failed |= r != -ECANCELED;
		r = call(tkcxx_throws_in_unwinding, NULL);
		pr_info("KT-SAY tkcxx a destructor throws during unwinding: the call gave %d (expected %d)\n",
			r, -ECANCELED);
		failed |= r != -ECANCELED;
	}
	if (bench) {
		r = call(tkcxx_run_bench, NULL);
		failed |= r != 0;
	}
	if (failed)
		pr_info("KT-SAY tkcxx: FAILED\n");
	return 0;
}

static void __exit tkcxx_exit(void)
{
	struct tkcxx_counts c;

	mutex_lock(&tkcxx_lock);
	tkcxx_unload();
	tkcxx_get_counts(&c);
	mutex_unlock(&tkcxx_lock);
	pr_info("tkcxx: unloaded: %ld objects from new and %ld exceptions not freed\n", c.news,
		c.exceptions);
	if (c.news || c.exceptions)
		pr_info("KT-SAY tkcxx: LEAK: %ld objects, %ld exceptions\n", c.news, c.exceptions);
}

module_init(tkcxx_init);
module_exit(tkcxx_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("trapkit: C++ with exceptions, RTTI and global objects in a kernel module");
