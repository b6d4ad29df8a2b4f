// SPDX-License-Identifier: GPL-2.0
/*
 * Times kernel-to-kernel message round trips through LITE's handlers, for
 * lite-bench. Every node that loads it answers send-reply calls with the
 * request. Writing "NODE SIZE CALLS" to
 * /sys/kernel/debug/lite_kmsg_bench/round_trips makes CALLS calls of SIZE
 * bytes to NODE, one after the other, each reply checked; reading the file
 * then gives each call's time in nanoseconds, one per line.
 *
 * With the parameter "hold" set (at load time or later, in
 * /sys/module/lite_kmsg_bench/parameters/hold), the handler answers no call
 * until the module unloads: the failure test makes a node that is killed
 * with kernel messages in its hands.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/completion.h>
#include <linux/debugfs.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <rdma/lite_api.h>

/* Most calls one write may ask for. */
#define KMSG_BENCH_MAX_CALLS 1000000

static struct dentry *bench_dir;

static bool hold;
module_param(hold, bool, 0644);
MODULE_PARM_DESC(hold, "Hold every call until the module unloads");

/* Completed on unload, which releases the calls held. */
static DECLARE_COMPLETION(unloading);

/* The last run's times, in nanoseconds. */
static DEFINE_MUTEX(bench_lock);
static u64 *bench_times;
static unsigned int bench_count;

static int bench_echo(char *msg, u32 size, char *reply, u32 *reply_size,
		      int sender_id)
{
	/* Interruptible: a held call must not look like a hung task. */
	if (READ_ONCE(hold) && !wait_for_completion_interruptible(&unloading))
		return -ECANCELED;
	if (size > LITE_KMSG_MAX_REPLY)
		return -EMSGSIZE;
	memcpy(reply, msg, size);
	*reply_size = size;
	return 0;
}

/* Makes @calls round trips of @size bytes to @node into @times. */
static int bench_run(int node, unsigned int size, unsigned int calls, u64 *times)
{
	char *request = kmalloc(size, GFP_KERNEL);
	char *reply = kmalloc(LITE_KMSG_MAX_REPLY, GFP_KERNEL);
	unsigned int i;
	int ret = 0;

	if (!request || !reply) {
		ret = -ENOMEM;
		goto out;
	}
	for (i = 0; i < size; i++)
		request[i] = i * 31 + size;
	for (i = 0; i < calls; i++) {
		u64 start = ktime_get_ns();

		ret = liteapi_send_reply(node, request, size, reply);
		times[i] = ktime_get_ns() - start;
		if (ret >= 0 && (ret != size || memcmp(reply, request, size)))
			ret = -EIO;
		if (ret < 0)
			goto out;
		ret = 0;
	}
out:
	kfree(reply);
	kfree(request);
	return ret;
}

static ssize_t bench_write(struct file *file, const char __user *buf,
			   size_t len, loff_t *pos)
{
	unsigned int size, calls;
	char text[48];
	u64 *times;
	int node, ret;

	if (len >= sizeof(text))
		return -EINVAL;
	if (copy_from_user(text, buf, len))
		return -EFAULT;
	text[len] = '\0';
	if (sscanf(text, "%d %u %u", &node, &size, &calls) != 3 || !size ||
	    size > LITE_KMSG_MAX_REPLY || !calls || calls > KMSG_BENCH_MAX_CALLS)
		return -EINVAL;
	times = kvmalloc_array(calls, sizeof(*times), GFP_KERNEL);
	if (!times)
		return -ENOMEM;
	ret = bench_run(node, size, calls, times);
	if (ret) {
		kvfree(times);
		return ret;
	}
	mutex_lock(&bench_lock);
	kvfree(bench_times);
	bench_times = times;
	bench_count = calls;
	mutex_unlock(&bench_lock);
	return len;
}

static int bench_show(struct seq_file *seq, void *unused)
{
	unsigned int i;

	mutex_lock(&bench_lock);
	for (i = 0; i < bench_count; i++)
		seq_printf(seq, "%llu\n", bench_times[i]);
	mutex_unlock(&bench_lock);
	return 0;
}

static int bench_open(struct inode *inode, struct file *file)
{
	return single_open(file, bench_show, NULL);
}

static const struct file_operations bench_fops = {
	.owner = THIS_MODULE,
	.open = bench_open,
	.read = seq_read,
	.llseek = seq_lseek,
	.release = single_release,
	.write = bench_write,
};

static int __init lite_kmsg_bench_init(void)
{
	int ret = liteapi_reg_send_reply_handler(bench_echo);

	if (ret) {
		pr_err("cannot register the handler: %d\n", ret);
		return ret;
	}
	bench_dir = debugfs_create_dir(KBUILD_MODNAME, NULL);
	debugfs_create_file("round_trips", 0600, bench_dir, NULL, &bench_fops);
	return 0;
}

static void __exit lite_kmsg_bench_exit(void)
{
	debugfs_remove(bench_dir);
	complete_all(&unloading);
	liteapi_reg_send_reply_handler(NULL);
	kvfree(bench_times);
}

module_init(lite_kmsg_bench_init);
module_exit(lite_kmsg_bench_exit);
MODULE_DESCRIPTION("Round trips of LITE kernel messages, timed for lite-bench");
MODULE_LICENSE("GPL");
