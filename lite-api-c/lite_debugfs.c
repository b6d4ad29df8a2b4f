// SPDX-License-Identifier: GPL-2.0
/*
 * LITE's debugfs files, in /sys/kernel/debug/lite/:
 *   stats             the node's counters as text (see <uapi/linux/lite.h>)
 *   resources         what the node holds (LMRs, chunks, handles, ports,
 *                     reply slots, locks, DMA buffers, memory regions, pool
 *                     bytes), one "name value" line each
 *   access_probe      reading it checks that the device refuses RDMA
 *                     access outside LITE's memory regions: one line per
 *                     check, "ok NAME" or "FAIL NAME: why"
 *   admin_group       a gid whose members may administer LITE (join,
 *                     leave, these settings) like holders of CAP_NET_ADMIN;
 *                     4294967295 (the default) for none; only CAP_NET_ADMIN
 *                     changes it
 *   quotas            per-user limits and usage, and what each other node
 *                     may hold here; one command per write changes a limit
 *                     (see "Quotas" in <uapi/linux/lite.h>)
 *   qos_enabled       traffic prioritization on (1) or off (0)
 *   qos_window_us     how long after high-priority work low-priority waits
 *   qos_delay_us      how long a waiting low-priority operation sleeps
 *   qos_max_delay_us  the longest a low-priority operation waits in all
 *   membership        this node's view of the cluster: epoch, incarnation,
 *                     each peer's state and incarnation, when the manager
 *                     was last heard from, and the two settings below
 *   heartbeat_ms      how often the node tells the manager it lives
 *   manager_timeout_ms  how long the node may hear nothing from the manager
 *                     before it counts itself cut off and fences itself
 *   rpc_fault_next    with CONFIG_LITE_FAULT_INJECTION only, write-only: the
 *                     next RPC request this node posts to the node written
 *                     here carries a header whose length disagrees with its
 *                     bytes, so that the server breaks the ring; 0 disarms
 * The values live in LITE's Rust code, which validates what is written.
 */

#include <linux/cred.h>
#include <linux/debugfs.h>
#include <linux/fs.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/uaccess.h>
#include <rdma/lite_api.h>

/* Room for the counters' text; it is well under this. */
#define LITE_STATS_TEXT_LEN	(64 * 1024)

static int lite_stats_show(struct seq_file *m, void *unused)
{
	ssize_t len;
	char *text = kvzalloc(LITE_STATS_TEXT_LEN, GFP_KERNEL);

	if (!text)
		return -ENOMEM;
	len = lite_rs_debugfs_stats(text, LITE_STATS_TEXT_LEN);
	if (len >= 0)
		seq_write(m, text, len);
	kvfree(text);
	return len < 0 ? len : 0;
}
DEFINE_SHOW_ATTRIBUTE(lite_stats);

/* Room for the resources' text: a few short lines. */
#define LITE_RESOURCES_TEXT_LEN	512

static int lite_resources_show(struct seq_file *m, void *unused)
{
	char text[LITE_RESOURCES_TEXT_LEN];
	ssize_t len = lite_rs_debugfs_resources(text, sizeof(text));

	if (len >= 0)
		seq_write(m, text, len);
	return len < 0 ? len : 0;
}
DEFINE_SHOW_ATTRIBUTE(lite_resources);

/* Room for the access checks' results: a few lines. */
/* A line of about 100 bytes per check and peer, up to 63 peers. */
#define LITE_PROBE_TEXT_LEN	65536

static int lite_access_probe_show(struct seq_file *m, void *unused)
{
	ssize_t len;
	char *text = kvzalloc(LITE_PROBE_TEXT_LEN, GFP_KERNEL);

	if (!text)
		return -ENOMEM;
	len = lite_rs_debugfs_access_probe(text, LITE_PROBE_TEXT_LEN);
	if (len >= 0)
		seq_write(m, text, len);
	kvfree(text);
	return len < 0 ? len : 0;
}
DEFINE_SHOW_ATTRIBUTE(lite_access_probe);

/* Room for the quotas' text: a few hundred users and 64 nodes. */
#define LITE_QUOTAS_TEXT_LEN	(64 * 1024)
/* Longest command line accepted. */
#define LITE_QUOTAS_LINE_LEN	256

static int lite_quotas_show(struct seq_file *m, void *unused)
{
	ssize_t len;
	char *text = kvzalloc(LITE_QUOTAS_TEXT_LEN, GFP_KERNEL);

	if (!text)
		return -ENOMEM;
	len = lite_rs_debugfs_quotas(text, LITE_QUOTAS_TEXT_LEN);
	if (len >= 0)
		seq_write(m, text, len);
	kvfree(text);
	return len < 0 ? len : 0;
}

static int lite_quotas_open(struct inode *inode, struct file *file)
{
	return single_open(file, lite_quotas_show, inode->i_private);
}

static ssize_t lite_quotas_write(struct file *file, const char __user *ubuf,
				 size_t count, loff_t *ppos)
{
	const struct cred *old;
	char *line;
	int ret;

	if (count == 0 || count > LITE_QUOTAS_LINE_LEN)
		return -EINVAL;
	line = memdup_user_nul(ubuf, count);
	if (IS_ERR(line))
		return PTR_ERR(line);
	/* The privilege checked is the opener's, not the writer's. */
	old = override_creds(file->f_cred);
	ret = lite_rs_quotas_write(line, count);
	revert_creds(old);
	kfree(line);
	return ret < 0 ? ret : count;
}

static const struct file_operations lite_quotas_fops = {
	.owner = THIS_MODULE,
	.open = lite_quotas_open,
	.read = seq_read,
	.llseek = seq_lseek,
	.release = single_release,
	.write = lite_quotas_write,
};

/* Room for the membership text: 64 peers of one line each, and a few more. */
#define LITE_MEMBERSHIP_TEXT_LEN	(8 * 1024)

static int lite_membership_show(struct seq_file *m, void *unused)
{
	ssize_t len;
	char *text = kzalloc(LITE_MEMBERSHIP_TEXT_LEN, GFP_KERNEL);

	if (!text)
		return -ENOMEM;
	len = lite_rs_debugfs_membership(text, LITE_MEMBERSHIP_TEXT_LEN);
	if (len >= 0)
		seq_write(m, text, len);
	kfree(text);
	return len < 0 ? len : 0;
}
DEFINE_SHOW_ATTRIBUTE(lite_membership);

#define LITE_MEMBERSHIP_PARAM(name, id)					\
	enum { lite_##name##_id = (id) };				\
	static int lite_##name##_get(void *data, u64 *value)		\
	{								\
		return lite_rs_membership_get(lite_##name##_id, value);	\
	}								\
	static int lite_##name##_set(void *data, u64 value)		\
	{								\
		return lite_rs_membership_set(lite_##name##_id, value);	\
	}								\
	DEFINE_DEBUGFS_ATTRIBUTE(lite_##name##_fops, lite_##name##_get,	\
				 lite_##name##_set, "%llu\n")

/* Ids as in SETTINGS (rust-lite/internal/membership/mod.rs). */
LITE_MEMBERSHIP_PARAM(heartbeat_ms, 0);
LITE_MEMBERSHIP_PARAM(manager_timeout_ms, 1);

#define LITE_QOS_PARAM(name, id)					\
	enum { lite_##name##_id = (id) };				\
	static int lite_##name##_get(void *data, u64 *value)		\
	{								\
		return lite_rs_qos_get(lite_##name##_id, value);	\
	}								\
	static int lite_##name##_set(void *data, u64 value)		\
	{								\
		return lite_rs_qos_set(lite_##name##_id, value);	\
	}								\
	DEFINE_DEBUGFS_ATTRIBUTE(lite_##name##_fops, lite_##name##_get,	\
				 lite_##name##_set, "%llu\n")

/* Ids as in Param::ALL (rust-lite/internal/qos/admission.rs). */
LITE_QOS_PARAM(qos_enabled, 0);
LITE_QOS_PARAM(qos_window_us, 1);
LITE_QOS_PARAM(qos_delay_us, 2);
LITE_QOS_PARAM(qos_max_delay_us, 3);

static int lite_admin_group_get(void *data, u64 *value)
{
	return lite_rs_admin_group_get(value);
}

static int lite_admin_group_set(void *data, u64 value)
{
	return lite_rs_admin_group_set(value);
}
DEFINE_DEBUGFS_ATTRIBUTE(lite_admin_group_fops, lite_admin_group_get,
			 lite_admin_group_set, "%llu\n");

#ifdef CONFIG_LITE_FAULT_INJECTION
static int lite_rpc_fault_next_set(void *data, u64 value)
{
	return lite_rs_rpc_fault_next(value);
}
DEFINE_DEBUGFS_ATTRIBUTE(lite_rpc_fault_next_fops, NULL,
			 lite_rpc_fault_next_set, "%llu\n");
#endif

static struct dentry *lite_debugfs_dir;

/* Creates LITE's files; LITE works without them if debugfs fails. */
void lite_debugfs_create(void)
{
	struct dentry *dir = debugfs_create_dir("lite", NULL);

	lite_debugfs_dir = dir;

	debugfs_create_file("stats", 0444, dir, NULL, &lite_stats_fops);
	debugfs_create_file("resources", 0444, dir, NULL,
			    &lite_resources_fops);
	debugfs_create_file("access_probe", 0400, dir, NULL,
			    &lite_access_probe_fops);
	debugfs_create_file("quotas", 0644, dir, NULL, &lite_quotas_fops);
	debugfs_create_file_unsafe("admin_group", 0644, dir, NULL,
				   &lite_admin_group_fops);
	debugfs_create_file_unsafe("qos_enabled", 0644, dir, NULL,
				   &lite_qos_enabled_fops);
	debugfs_create_file_unsafe("qos_window_us", 0644, dir, NULL,
				   &lite_qos_window_us_fops);
	debugfs_create_file_unsafe("qos_delay_us", 0644, dir, NULL,
				   &lite_qos_delay_us_fops);
	debugfs_create_file_unsafe("qos_max_delay_us", 0644, dir, NULL,
				   &lite_qos_max_delay_us_fops);
	debugfs_create_file("membership", 0444, dir, NULL,
			    &lite_membership_fops);
	debugfs_create_file_unsafe("heartbeat_ms", 0644, dir, NULL,
				   &lite_heartbeat_ms_fops);
	debugfs_create_file_unsafe("manager_timeout_ms", 0644, dir, NULL,
				   &lite_manager_timeout_ms_fops);
#ifdef CONFIG_LITE_FAULT_INJECTION
	debugfs_create_file_unsafe("rpc_fault_next", 0200, dir, NULL,
				   &lite_rpc_fault_next_fops);
#endif
}

/* Removes LITE's files, waiting for calls into them to end. */
void lite_debugfs_remove(void)
{
	debugfs_remove(lite_debugfs_dir);
	lite_debugfs_dir = NULL;
}
