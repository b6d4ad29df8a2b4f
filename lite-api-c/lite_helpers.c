// SPDX-License-Identifier: GPL-2.0
/*
 * C helpers of LITE that call into ib_core and the crypto API. Those may be
 * modules, so these helpers are part of LITE's module rather than of the Rust
 * helpers built into the kernel image; LITE's Rust code declares them itself.
 */

#include <crypto/hash.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <rdma/ib_verbs.h>
#include <rdma/lite_api.h>

/*
 * The RDMA device the node joins with: `modprobe lite device=NAME`,
 * `lite.device=NAME` on the command line when LITE is built in, or
 * /sys/module/lite/parameters/device at run time, read at each join. Empty,
 * the default: the first device with an active port.
 */
static char lite_device[IB_DEVICE_NAME_MAX];
module_param_string(device, lite_device, sizeof(lite_device), 0644);
MODULE_PARM_DESC(device,
		 "RDMA device to join with (default: the first with an active port)");

/* Copies the device parameter into the `len` bytes at `buf`, NUL-terminated. */
void lite_device_param(char *buf, size_t len)
{
	kernel_param_lock(THIS_MODULE);
	strscpy(buf, lite_device, len);
	kernel_param_unlock(THIS_MODULE);
}

/*
 * Maps `count` DMA-mapped ranges of `len` bytes each (whole pages of
 * `page_size` bytes) into a fast-registration memory region that peers
 * address from `iova` on, the ranges back to back. The region is only
 * usable after an IB_WR_REG_MR work request (lite_post_reg_mr()).
 */
int lite_map_mr(struct ib_mr *mr, const u64 *dma, u32 count, u32 len,
		u32 page_size, u64 iova)
{
	struct scatterlist *sgl;
	u32 i;
	int mapped;

	if (!count || !len || page_size < PAGE_SIZE || len % page_size ||
	    iova % page_size)
		return -EINVAL;
	sgl = kvcalloc(count, sizeof(*sgl), GFP_KERNEL | __GFP_NOWARN);
	if (!sgl)
		return -ENOMEM;
	sg_init_table(sgl, count);
	for (i = 0; i < count; i++) {
		sg_dma_address(&sgl[i]) = dma[i];
		sg_dma_len(&sgl[i]) = len;
	}
	mapped = ib_map_mr_sg(mr, sgl, count, NULL, page_size);
	kvfree(sgl);
	if (mapped < 0)
		return mapped;
	if (mapped != count)
		return -EINVAL;
	mr->iova = iova;
	return 0;
}

/*
 * HMAC-SHA256 of `len` bytes at `data` with the `keylen`-byte `key`, into
 * the 32 bytes at `out`. Used for the few frames exchanged with the
 * cluster manager, so the transform is not kept between calls.
 */
int lite_hmac_sha256(const u8 *key, unsigned int keylen, const u8 *data,
		     unsigned int len, u8 *out)
{
	struct crypto_shash *tfm = crypto_alloc_shash("hmac(sha256)", 0, 0);
	int err;

	if (IS_ERR(tfm))
		return PTR_ERR(tfm);
	err = crypto_shash_setkey(tfm, key, keylen);
	if (!err)
		err = crypto_shash_tfm_digest(tfm, data, len, out);
	crypto_free_shash(tfm);
	return err;
}

/*
 * The pieces of atomic kernel messages: struct atomic_struct is declared in
 * <rdma/lite_api.h> only, so these read, write and allocate them for
 * LITE's Rust.
 */
struct atomic_struct *lite_atomic_pieces(u32 count)
{
	return kvmalloc_array(count, sizeof(struct atomic_struct), GFP_KERNEL);
}

void lite_atomic_piece(const struct atomic_struct *list, u32 i, void **vaddr,
		       size_t *len)
{
	*vaddr = list[i].vaddr;
	*len = list[i].len;
}

void lite_set_atomic_piece(struct atomic_struct *list, u32 i, void *vaddr,
			   size_t len)
{
	list[i].vaddr = vaddr;
	list[i].len = len;
}

/*
 * Kernel message handlers are code of the modules that register them: a
 * module that goes with handlers registered has them unregistered, and the
 * one in flight waited for, before its memory is freed. A kernel without
 * modules has nothing to watch.
 */
#ifdef CONFIG_MODULES
static int lite_module_event(struct notifier_block *nb, unsigned long action,
			     void *data)
{
	if (action == MODULE_STATE_GOING)
		lite_rs_module_going(data);
	return NOTIFY_DONE;
}

static struct notifier_block lite_module_notifier = {
	.notifier_call = lite_module_event,
};

int lite_watch_modules(void)
{
	return register_module_notifier(&lite_module_notifier);
}

void lite_unwatch_modules(void)
{
	unregister_module_notifier(&lite_module_notifier);
}
#else
int lite_watch_modules(void)
{
	return 0;
}

void lite_unwatch_modules(void)
{
}
#endif

bool lite_within_module(unsigned long addr, const struct module *mod)
{
#ifdef CONFIG_MODULES
	return within_module(addr, (struct module *)mod);
#else
	return false;
#endif
}
