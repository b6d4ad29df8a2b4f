// SPDX-License-Identifier: GPL-2.0
/*
 * An out-of-tree kernel module using LITE's kernel API (<rdma/lite_api.h>),
 * as a kernel user of LITE writes one. Loaded on every node of a joined
 * cluster, it works with the next node (wrapping around):
 *
 * - memory: allocates an LMR there, writes a pattern, reads it back;
 * - locks: creates a lock there, takes and releases it;
 * - RPC: registers port LITE_EXAMPLE_PORT, calls the next node's port and
 *   answers the previous node's call (each reply is the request with every
 *   byte incremented);
 * - kernel messages: registers a send-reply handler, which answers the
 *   previous node's message in LITE's thread, and calls the next node's.
 *
 * The work happens at load: the load fails, with the first error, unless
 * every step succeeded, and the module prints one line per step.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/jiffies.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <rdma/lite_api.h>

#define LITE_EXAMPLE_PORT	40
#define LITE_EXAMPLE_LMR_SIZE	(64 * 1024)
#define LITE_EXAMPLE_REQUEST	"lite_example request"
/* How long a node waits for its neighbour's port or call. */
#define LITE_EXAMPLE_PATIENCE	(60 * HZ)

static bool keep_handler;
module_param(keep_handler, bool, 0444);
MODULE_PARM_DESC(keep_handler,
		 "leave the handler registered at unload, for LITE to remove (tests)");

static DECLARE_COMPLETION(handler_called);

/* Answers with the message, every byte incremented, as the RPC port does. */
static int example_handler(char *msg, u32 size, char *reply, u32 *reply_size,
			   int sender_id)
{
	u32 i;

	for (i = 0; i < size; i++)
		reply[i] = msg[i] + 1;
	*reply_size = size;
	complete(&handler_called);
	return 0;
}

/* Calls the next node's handler and waits for the previous node's call. */
static int example_messages(unsigned int next)
{
	static const char request[] = LITE_EXAMPLE_REQUEST;
	unsigned long deadline = jiffies + LITE_EXAMPLE_PATIENCE;
	char *reply;
	int ret, i;

	reply = kzalloc(LITE_KMSG_MAX_REPLY, GFP_KERNEL);
	if (!reply)
		return -ENOMEM;
	/* The next node registers its handler when it loads this module. */
	while ((ret = liteapi_send_reply(next, request, sizeof(request), reply)) ==
	       -ECONNREFUSED && !time_after(jiffies, deadline))
		msleep(100);
	for (i = 0; ret == sizeof(request) && i < ret; i++)
		if (reply[i] != (char)(request[i] + 1))
			ret = -EPROTO;
	kfree(reply);
	if (ret != sizeof(request))
		return ret < 0 ? ret : -EPROTO;
	if (!wait_for_completion_timeout(&handler_called, LITE_EXAMPLE_PATIENCE))
		return -ETIMEDOUT;
	return 0;
}

static unsigned int node_after(unsigned int me, unsigned int total)
{
	return me % total + 1;
}

static int example_memory(unsigned int next, u64 password)
{
	u8 *data, *back;
	long lh;
	int ret, i;

	data = kmalloc(LITE_EXAMPLE_LMR_SIZE, GFP_KERNEL);
	back = kzalloc(LITE_EXAMPLE_LMR_SIZE, GFP_KERNEL);
	if (!data || !back) {
		ret = -ENOMEM;
		goto out;
	}
	for (i = 0; i < LITE_EXAMPLE_LMR_SIZE; i++)
		data[i] = i * 7 + next;
	lh = liteapi_alloc_remote_mem(next, LITE_EXAMPLE_LMR_SIZE, 0, password);
	if (lh < 0) {
		ret = lh;
		goto out;
	}
	ret = liteapi_rdma_write_offset(lh, data, LITE_EXAMPLE_LMR_SIZE,
					LITE_PRIORITY_NONE, 0, password);
	if (!ret)
		ret = liteapi_rdma_read_offset(lh, back, LITE_EXAMPLE_LMR_SIZE,
					       LITE_PRIORITY_NONE, 0, password);
	if (!ret && memcmp(data, back, LITE_EXAMPLE_LMR_SIZE))
		ret = -EIO;
	if (liteapi_free(lh) && !ret)
		ret = -EIO;
out:
	kfree(back);
	kfree(data);
	return ret;
}

static int example_lock(unsigned int next)
{
	struct lite_lock lock;
	int ret;

	/* Returns the new lock's number, or an error. */
	ret = liteapi_create_lock(next, &lock);
	if (ret < 0)
		return ret;
	/* EOWNERDEAD: acquired, but its last holder's node died holding it. */
	ret = liteapi_lock(&lock);
	if (ret && ret != -EOWNERDEAD)
		return ret;
	return liteapi_unlock(&lock);
}

/* Answers one call to this node's port, waiting for it a bounded time. */
static int example_serve_one(void)
{
	unsigned long deadline = jiffies + LITE_EXAMPLE_PATIENCE;
	u8 request[64];
	u64 descriptor;
	long len;
	int i;

	for (;;) {
		len = liteapi_receive_message(LITE_EXAMPLE_PORT, request,
					      sizeof(request), &descriptor,
					      LITE_RECV_NONBLOCK);
		if (len != -EAGAIN)
			break;
		if (time_after(jiffies, deadline))
			return -ETIMEDOUT;
		msleep(20);
	}
	if (len < 0)
		return len;
	for (i = 0; i < len; i++)
		request[i]++;
	return liteapi_reply_message(request, len, descriptor);
}

/* Calls the next node's port and answers the previous node's call. */
static int example_rpc(unsigned int next)
{
	static const char request[] = LITE_EXAMPLE_REQUEST;
	unsigned long deadline = jiffies + LITE_EXAMPLE_PATIENCE;
	u8 reply[64] = {};
	long op, ret;
	unsigned int i;
	int served;

	/* The next node registers its port when it loads this module. */
	while (liteapi_query_port(next, LITE_EXAMPLE_PORT) < 0) {
		if (time_after(jiffies, deadline))
			return -ETIMEDOUT;
		msleep(100);
	}
	op = liteapi_send_reply_imm_async(next, LITE_EXAMPLE_PORT, request,
					  sizeof(request), reply,
					  sizeof(reply));
	if (op < 0)
		return op;
	served = example_serve_one();
	ret = liteapi_rdma_asywait(op, 0);
	if (served)
		return served;
	if (ret != sizeof(request))
		return ret < 0 ? ret : -EPROTO;
	for (i = 0; i < sizeof(request); i++)
		if (reply[i] != (u8)(request[i] + 1))
			return -EPROTO;
	return 0;
}

static int __init lite_example_init(void)
{
	static const char name[] = "lite_example";
	int me = liteapi_get_node_id();
	int total = liteapi_get_total_node();
	unsigned int next;
	int ret;

	if (me < 0)
		return me;
	if (total < 2)
		return total < 0 ? total : -ENOTCONN;
	next = node_after(me, total);

	ret = liteapi_register_application(LITE_EXAMPLE_PORT, 64, name,
					   sizeof(name) - 1);
	if (ret)
		return ret;
	ret = liteapi_reg_send_reply_handler(example_handler);
	if (ret) {
		liteapi_unregister_application(LITE_EXAMPLE_PORT);
		return ret;
	}
	ret = example_memory(next, 0x6c697465ULL << 32 | me);
	pr_info("node %d: memory on node %u: %d\n", me, next, ret);
	if (!ret) {
		ret = example_lock(next);
		pr_info("node %d: lock on node %u: %d\n", me, next, ret);
	}
	if (!ret) {
		ret = example_rpc(next);
		pr_info("node %d: RPC with node %u: %d\n", me, next, ret);
	}
	if (!ret) {
		ret = example_messages(next);
		pr_info("node %d: kernel messages with node %u: %d\n", me, next, ret);
	}
	liteapi_unregister_application(LITE_EXAMPLE_PORT);
	/* A failed load goes without its exit function: LITE removes the handler. */
	return ret;
}

static void __exit lite_example_exit(void)
{
	if (!keep_handler)
		liteapi_reg_send_reply_handler(NULL);
}

module_init(lite_example_init);
module_exit(lite_example_exit);
MODULE_DESCRIPTION("An out-of-tree user of LITE's kernel API");
MODULE_LICENSE("GPL");
