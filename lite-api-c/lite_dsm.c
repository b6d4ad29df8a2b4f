// SPDX-License-Identifier: GPL-2.0
/*
 * The files and mappings of LITE-DSM regions.
 *
 * A region open on a node has one anchor file: every file opened on the
 * region shares the anchor's address space, so unmap_mapping_range() on it
 * removes a page from every process's page tables at once. The file and
 * fault operations forward to LITE's Rust code, which returns 0 or a
 * negative errno; these map the errno to what the mm expects.
 */

#include <linux/anon_inodes.h>
#include <linux/err.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/pagemap.h>
#include <rdma/lite_api.h>

static const struct file_operations lite_dsm_anchor_fops = {
	.owner = THIS_MODULE,
};

/*
 * A fault's errno as a vm_fault_t. -EAGAIN, and a wait a signal ended, make
 * the access fault again, once the signal is handled; any other error means
 * the page cannot be had.
 */
static vm_fault_t lite_dsm_fault_result(int ret)
{
	switch (ret) {
	case 0:
		return VM_FAULT_LOCKED;
	case -EAGAIN:
	case -EINTR:
	case -ERESTARTSYS:
		return VM_FAULT_NOPAGE;
	case -ENOMEM:
		return VM_FAULT_OOM;
	default:
		return VM_FAULT_SIGBUS;
	}
}

static vm_fault_t lite_dsm_fault(struct vm_fault *vmf)
{
	int ret = lite_rs_dsm_fault(vmf->vma->vm_file->private_data, vmf->pgoff,
				    vmf->flags & FAULT_FLAG_WRITE, &vmf->page);

	return lite_dsm_fault_result(ret);
}

static vm_fault_t lite_dsm_page_mkwrite(struct vm_fault *vmf)
{
	int ret = lite_rs_dsm_page_mkwrite(vmf->vma->vm_file->private_data,
					   vmf->pgoff, vmf->page);

	return lite_dsm_fault_result(ret);
}

static const struct vm_operations_struct lite_dsm_vm_ops = {
	.fault = lite_dsm_fault,
	.page_mkwrite = lite_dsm_page_mkwrite,
};

static int lite_dsm_mmap(struct file *file, struct vm_area_struct *vma)
{
	int ret;

	/* A private mapping's copies would escape coherence. */
	if (!(vma->vm_flags & VM_SHARED))
		return -EINVAL;
	ret = lite_rs_dsm_mmap(file->private_data, vma->vm_pgoff,
			       vma_pages(vma));
	if (ret)
		return ret;
	vm_flags_set(vma, VM_DONTEXPAND | VM_DONTDUMP);
	vma->vm_ops = &lite_dsm_vm_ops;
	return 0;
}

static int lite_dsm_release(struct inode *inode, struct file *file)
{
	lite_rs_dsm_release(file->private_data);
	return 0;
}

static const struct file_operations lite_dsm_fops = {
	.owner = THIS_MODULE,
	.mmap = lite_dsm_mmap,
	.release = lite_dsm_release,
};

/* Stores in @anchor a new anchor file; returns 0 or a negative errno. */
int lite_dsm_anchor_create(struct file **anchor)
{
	struct file *file = anon_inode_create_getfile("[lite-dsm]",
						      &lite_dsm_anchor_fops,
						      NULL, O_RDWR, NULL);

	if (IS_ERR(file))
		return PTR_ERR(file);
	*anchor = file;
	return 0;
}

/*
 * Gives the calling process a descriptor of a new region file sharing
 * @anchor's address space, whose private data is @private; its release
 * hands @private to lite_rs_dsm_release(). Returns the descriptor or a
 * negative errno, in which case @private stays the caller's.
 */
int lite_dsm_install_fd(struct file *anchor, void *private)
{
	struct file *file;
	int fd = get_unused_fd_flags(O_CLOEXEC);

	if (fd < 0)
		return fd;
	file = anon_inode_getfile("[lite-dsm]", &lite_dsm_fops, private, O_RDWR);
	if (IS_ERR(file)) {
		put_unused_fd(fd);
		return PTR_ERR(file);
	}
	file->f_mapping = anchor->f_mapping;
	fd_install(fd, file);
	return fd;
}

/* Removes page @index of the region from every mapping of @anchor. */
void lite_dsm_zap(struct file *anchor, pgoff_t index)
{
	unmap_mapping_pages(anchor->f_mapping, index, 1, true);
}

void lite_dsm_lock_page(struct page *page)
{
	lock_page(page);
}

void lite_dsm_unlock_page(struct page *page)
{
	unlock_page(page);
}

void lite_dsm_get_page(struct page *page)
{
	get_page(page);
}
