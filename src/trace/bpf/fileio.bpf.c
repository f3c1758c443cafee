// SPDX-License-Identifier: GPL-2.0
/* File I/O tracer: every completed read/write-family syscall on a regular file becomes one
 * record (device, inode, offset, bytes transferred, read/write, O_DIRECT) in a ring buffer.
 *
 * sys_enter_* resolves fd -> struct file -> inode and applies the filters, then parks the
 * file in the calling thread's task-local storage (`pending`: no hashing, no allocation
 * after a thread's first call); sys_exit_* takes it back and, if the call moved any bytes,
 * emits the record with the return value as the length. Offsets: the pos argument
 * for pread/pwrite/preadv/pwritev(2); otherwise f_pos after the call minus the bytes moved
 * (right for O_APPEND writes too, where f_pos before the call is not where data went). */
#include "kernel.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

#define S_IFMT 00170000
#define S_IFREG 0100000
#define O_DIRECT 00040000 /* x86 include/uapi/asm-generic/fcntl.h */

#define OP_READ 0
#define OP_WRITE 1

/* Filters, fixed before load by the loader (.rodata). */
const volatile u32 self_tgid = 0;      /* never trace fragkit itself */
const volatile bool filter_tgid = false; /* only tgids in `tgids` (--pid, -- CMD) */
const volatile bool follow_forks = false; /* children of traced tgids join `tgids` */
const volatile bool filter_comm = false;
const volatile char comm[16] = {};
const volatile u64 cgroup_id = 0;       /* 0 = any; else this cgroup v2 or below */
const volatile int cgroup_level = 0;
const volatile u32 filter_dev = 0;      /* 0 = any; else kernel dev_t of the mount */
const volatile u64 wakeup_bytes = 1 << 20; /* wake the reader once this much is queued */

struct pending {
	struct file *file;
	u8 active;
	s64 pos;   /* -1: use f_pos */
	u64 ino;
	u32 dev;
	u32 gen;
	u8 op;
	u8 blkbits;
};

/* Shared with src/trace/loader.rs (struct Event there); 56 bytes. */
struct event {
	u64 ino;
	u64 offset;
	u64 bytes;
	u64 file;  /* struct file address: identifies one open file (readahead stream) */
	u64 size;  /* i_size after the call */
	u32 dev;
	u32 tgid;
	u8 op;
	u8 direct;
	u8 blkbits;
	u8 pad;
	u32 gen;   /* i_generation: with ino, a file handle for open_by_handle_at */
};

/* Never written: a global of the type makes the skeleton generate `types::event`, which
 * src/trace/loader.rs checks its struct Event against at compile time. */
struct event event_layout = {};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct pending);
} pending SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, u32);
	__type(value, u8);
} tgids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20);
} events SEC(".maps");

/* [0] records lost to a full ring buffer, [1] calls whose task storage could not be made. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, u32);
	__type(value, u64);
} drops SEC(".maps");

struct sys_enter_ctx {
	u64 common;
	s64 nr;
	u64 args[6];
};

struct sys_exit_ctx {
	u64 common;
	s64 nr;
	s64 ret;
};

static __always_inline void count_drop(u32 which)
{
	u64 *n = bpf_map_lookup_elem(&drops, &which);
	if (n)
		*n += 1;
}

static __always_inline bool wanted(u32 tgid)
{
	if (tgid == self_tgid)
		return false;
	if (filter_tgid && !bpf_map_lookup_elem(&tgids, &tgid))
		return false;
	if (filter_comm) {
		char c[16];
		bpf_get_current_comm(c, sizeof(c));
		for (int i = 0; i < 16; i++) {
			if (c[i] != comm[i])
				return false;
			if (c[i] == 0)
				break;
		}
	}
	if (cgroup_id && bpf_get_current_ancestor_cgroup_id(cgroup_level) != cgroup_id)
		return false;
	return true;
}

static __always_inline int on_enter(u64 fd, s64 pos, u8 op)
{
	u64 id = bpf_get_current_pid_tgid();
	if (!wanted(id >> 32))
		return 0;

	/* BTF-typed pointers: plain loads (no helper call per field), faults read as 0. */
	struct task_struct *task = bpf_get_current_task_btf();
	/* Storage first: a call rejected below must also clear a record an earlier call may
	 * have left (one whose exit ran before the exit programs were attached). */
	struct pending *p = bpf_task_storage_get(&pending, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!p) {
		count_drop(1);
		return 0;
	}
	p->active = 0;
	struct fdtable *fdt = task->files->fdt;
	if (fd >= fdt->max_fds)
		return 0;
	struct file *raw = 0;
	bpf_probe_read_kernel(&raw, sizeof(raw), &fdt->fd[fd]);
	if (!raw)
		return 0;
	struct file *file = bpf_core_cast(raw, struct file);
	struct inode *inode = file->f_inode;
	if (!inode || (inode->i_mode & S_IFMT) != S_IFREG)
		return 0;
	struct super_block *sb = inode->i_sb;
	u32 dev = sb->s_dev;
	if (filter_dev && dev != filter_dev)
		return 0;

	p->file = raw;
	p->pos = pos;
	p->ino = inode->i_ino;
	p->gen = inode->i_generation;
	p->dev = dev;
	p->op = op;
	p->blkbits = sb->s_blocksize_bits;
	p->active = 1;
	return 0;
}

static __always_inline int on_exit(s64 ret)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct pending *pp = bpf_task_storage_get(&pending, task, 0, 0);
	if (!pp || !pp->active)
		return 0;
	pp->active = 0;
	if (ret <= 0)
		return 0;
	struct pending p = *pp;
	u64 id = bpf_get_current_pid_tgid();

	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_drop(0);
		return 0;
	}
	struct file *file = bpf_core_cast(p.file, struct file);
	e->ino = p.ino;
	e->bytes = ret;
	e->offset = p.pos >= 0 ? (u64)p.pos : (u64)(file->f_pos - ret);
	e->file = (u64)p.file;
	e->size = file->f_inode->i_size;
	e->dev = p.dev;
	e->tgid = id >> 32;
	e->op = p.op;
	e->direct = (file->f_flags & O_DIRECT) != 0;
	e->blkbits = p.blkbits;
	e->pad = 0;
	e->gen = p.gen;
	/* Batch: wake the reader only when a good share of the buffer is waiting; it also
	 * polls on a timer, so a quiet trace is still drained. */
	u64 flags = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wakeup_bytes ?
			    BPF_RB_FORCE_WAKEUP :
			    BPF_RB_NO_WAKEUP;
	bpf_ringbuf_submit(e, flags);
	return 0;
}

/* fd, buf, count (read/write); fd, buf, count, pos (pread64/pwrite64);
 * fd, iov, iovcnt (readv/writev); fd, iov, iovcnt, pos_l, pos_h (preadv/pwritev; x86_64
 * passes the whole offset in pos_l); preadv2/pwritev2 add flags, and pos -1 means f_pos. */
#define ENTER_FPOS(name, op)                                                        \
	SEC("tp/syscalls/sys_enter_" #name)                                         \
	int enter_##name(struct sys_enter_ctx *ctx) { return on_enter(ctx->args[0], -1, op); }
#define ENTER_POS(name, op)                                                         \
	SEC("tp/syscalls/sys_enter_" #name)                                         \
	int enter_##name(struct sys_enter_ctx *ctx)                                 \
	{                                                                           \
		s64 pos = (s64)ctx->args[3];                                        \
		return on_enter(ctx->args[0], pos < 0 ? -1 : pos, op);              \
	}
#define EXIT(name)                                                                  \
	SEC("tp/syscalls/sys_exit_" #name)                                          \
	int exit_##name(struct sys_exit_ctx *ctx) { return on_exit(ctx->ret); }

ENTER_FPOS(read, OP_READ)
ENTER_FPOS(write, OP_WRITE)
ENTER_FPOS(readv, OP_READ)
ENTER_FPOS(writev, OP_WRITE)
ENTER_POS(pread64, OP_READ)
ENTER_POS(pwrite64, OP_WRITE)
ENTER_POS(preadv, OP_READ)
ENTER_POS(pwritev, OP_WRITE)
ENTER_POS(preadv2, OP_READ)
ENTER_POS(pwritev2, OP_WRITE)
EXIT(read)
EXIT(write)
EXIT(readv)
EXIT(writev)
EXIT(pread64)
EXIT(pwrite64)
EXIT(preadv)
EXIT(pwritev)
EXIT(preadv2)
EXIT(pwritev2)

/* Children of traced processes are traced too (threads share their tgid already). */
SEC("tp_btf/sched_process_fork")
int on_fork(u64 *ctx)
{
	if (!follow_forks)
		return 0;
	struct task_struct *parent = (struct task_struct *)ctx[0];
	struct task_struct *child = (struct task_struct *)ctx[1];
	u32 ptgid = BPF_CORE_READ(parent, tgid);
	if (!bpf_map_lookup_elem(&tgids, &ptgid))
		return 0;
	u32 ctgid = BPF_CORE_READ(child, tgid);
	u8 one = 1;
	bpf_map_update_elem(&tgids, &ctgid, &one, BPF_ANY);
	return 0;
}
