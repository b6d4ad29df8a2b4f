/* SPDX-License-Identifier: GPL-2.0 */
/*
 * KUnit cases of LITE written in Rust (kunit_tests.rs): each Rust case
 * lite_test_<name>() becomes the C case <name>().
 */

#ifndef LITE_KUNIT_H
#define LITE_KUNIT_H

#include <kunit/test.h>
#include <rdma/lite_api.h>

/* Reports a failed check of a Rust case. */
void lite_kunit_fail(struct kunit *test, const char *what);

#define LITE_RUST_CASE(name)						\
	void lite_test_##name(struct kunit *test);			\
	static void name(struct kunit *test) { lite_test_##name(test); }

/* Cases that need a joined cluster of two nodes or more; skipped otherwise. */
#define LITE_RUST_CLUSTER_CASE(name)					\
	void lite_test_##name(struct kunit *test);			\
	static void name(struct kunit *test)				\
	{								\
		if (liteapi_get_total_node() < 2)			\
			kunit_skip(test, "needs a joined cluster of 2+ nodes"); \
		lite_test_##name(test);					\
	}

#endif /* LITE_KUNIT_H */
