// SPDX-License-Identifier: GPL-2.0
/* File I/O tracer: every completed read/write-family syscall on a regular file becomes one
 * record (device, inode, offset, bytes transferred, read/write, O_DIRECT) in a ring buffer.
 *
 * One program, at sys_exit: the syscall's number and arguments are still in the task's
 * saved user registers (pt_regs: orig_ax, di, si, dx, r10), and the return value is the
 * number of bytes moved, so nothing has to be carried from sys_enter to sys_exit and no
 * program runs at sys_enter. It filters (syscall number, bytes moved, process, cgroup),
 * then resolves fd -> struct file -> inode, filters on the device and emits the record.
 * Offsets: the pos argument for pread/pwrite/preadv/pwritev(2); otherwise f_pos after the
 * call minus the bytes moved (right for O_APPEND writes too, where f_pos before the call
 * is not where data went). The record holds no time, so nothing is lost by not seeing the
 * entry. */
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
const volatile bool filter_tgid = false; /* only tgids in `tgid_bits` (--pid, -- CMD) */
const volatile bool follow_forks = false; /* children of traced tgids join `tgid_bits` */
const volatile bool filter_comm = false;
const volatile u64 comm_word[2] = {};   /* the wanted comm, NUL-padded */
const volatile u64 comm_mask[2] = {};   /* 0xff over its bytes and its terminating NUL */
const volatile u64 cgroup_id = 0;       /* 0 = any; else this cgroup v2 or below */
const volatile int cgroup_level = 0;
const volatile u32 filter_dev = 0;      /* 0 = any; else kernel dev_t of the mount */
const volatile u64 wakeup_bytes = 1 << 20; /* wake the reader once this much is queued */

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

/* The traced processes (--pid, -- CMD and their children) as a bitmap indexed by tgid: a
 * process that is filtered out costs one load and a shift, not a hash lookup. Sized for
 * PID_MAX_LIMIT on 64-bit (4M, include/linux/threads.h): 512 KiB. User space sets bits
 * through the mmapped .bss (src/trace/loader.rs), the fork hook with an atomic OR; the
 * exit hook clears a process's bit with an atomic AND once its last thread exits. */
#define TGID_LIMIT (1u << 22)
u64 tgid_bits[TGID_LIMIT / 64];

/* The word of tgid_bits that holds tgid's bit; NULL past PID_MAX_LIMIT. */
static __always_inline u64 *tgid_word(u32 tgid)
{
	u32 word = tgid / 64;
	/* Check the index itself, in the register that indexes: otherwise clang recomputes it
	 * from the 64-bit pid_tgid past the check and the verifier sees no bound. */
	barrier_var(word);
	if (word >= TGID_LIMIT / 64)
		return NULL;
	return &tgid_bits[word];
}

static __always_inline bool tgid_traced(u32 tgid)
{
	u64 *word = tgid_word(tgid);
	return word && ((*word >> (tgid % 64)) & 1);
}

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20);
} events SEC(".maps");

/* [0] records lost to a full ring buffer. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} drops SEC(".maps");

static __always_inline void count_drop(u32 which)
{
	u64 *n = bpf_map_lookup_elem(&drops, &which);
	if (n)
		*n += 1;
}

/* The process filters, cheapest first. comm is compared as two 8-byte words under a mask
 * that covers the wanted name and its terminating NUL: an exact name match (a shorter name
 * has its NUL where the wanted one has a byte, a longer one a byte where it has its NUL;
 * what follows the NUL does not matter), without a helper call or a byte loop. */
static __always_inline bool wanted(u32 tgid)
{
	if (tgid == self_tgid)
		return false;
	if (filter_comm) {
		struct task_struct *task = bpf_get_current_task_btf();
		const u64 *c = (const u64 *)task->comm;
		if ((c[0] & comm_mask[0]) != comm_word[0] || (c[1] & comm_mask[1]) != comm_word[1])
			return false;
	}
	if (filter_tgid && !tgid_traced(tgid))
		return false;
	if (cgroup_id && bpf_get_current_ancestor_cgroup_id(cgroup_level) != cgroup_id)
		return false;
	return true;
}

/* One raw BTF tracepoint serves every syscall: raw_syscalls:sys_exit (regs, ret). Why not
 * one syscalls:sys_exit_<name> tracepoint per call: those go through perf's syscall
 * handler, which allocates a trace buffer and copies the arguments for every matching call
 * of every process before the program can filter it out (about 0.35 us per pread of a
 * process that is not traced, measured with bench/trace-overhead.sh); a raw tracepoint
 * runs the program directly, and its first instructions reject other syscalls. Why not
 * sys_enter too: every enabled raw syscall tracepoint runs a program on every syscall of
 * every process; the exit alone has all the record needs. The syscall numbers are the
 * running architecture's, set by the loader from libc (.rodata). */
const volatile s64 nr_read = -1, nr_write = -1, nr_readv = -1, nr_writev = -1;
const volatile s64 nr_pread64 = -1, nr_pwrite64 = -1, nr_preadv = -1, nr_pwritev = -1;
const volatile s64 nr_preadv2 = -1, nr_pwritev2 = -1;

/* x86-64 syscall arguments: di, si, dx, r10, r8, r9; orig_ax is the syscall number (ax
 * holds the return value by now). arch/x86/entry/entry_64.S, syscall_get_nr(). */
SEC("tp_btf/sys_exit")
int on_sys_exit(u64 *ctx)
{
	struct pt_regs *regs = (struct pt_regs *)ctx[0];
	s64 ret = (s64)ctx[1];
	s64 id = regs->orig_ax;
	u8 op;
	bool has_pos;
	if (id == nr_pread64 || id == nr_preadv || id == nr_preadv2) {
		op = OP_READ;
		has_pos = true;
	} else if (id == nr_read || id == nr_readv) {
		op = OP_READ;
		has_pos = false;
	} else if (id == nr_pwrite64 || id == nr_pwritev || id == nr_pwritev2) {
		op = OP_WRITE;
		has_pos = true;
	} else if (id == nr_write || id == nr_writev) {
		op = OP_WRITE;
		has_pos = false;
	} else {
		return 0;
	}
	if (ret <= 0)
		return 0;
	u64 pid_tgid = bpf_get_current_pid_tgid();
	u32 tgid = pid_tgid >> 32;
	if (!wanted(tgid))
		return 0;

	/* BTF-typed pointers: plain loads (no helper call per field), faults read as 0. */
	struct task_struct *task = bpf_get_current_task_btf();
	u64 fd = regs->di;
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
	/* pread64/pwrite64: pos is the 4th argument; preadv/pwritev(2): pos_l (x86-64 passes
	 * the whole offset there); -1 in preadv2/pwritev2 means f_pos. */
	s64 pos = has_pos ? (s64)regs->r10 : -1;

	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_drop(0);
		return 0;
	}
	e->ino = inode->i_ino;
	e->bytes = ret;
	e->offset = pos >= 0 ? (u64)pos : (u64)(file->f_pos - ret);
	e->file = (u64)raw;
	e->size = inode->i_size;
	e->dev = dev;
	e->tgid = tgid;
	e->op = op;
	e->direct = (file->f_flags & O_DIRECT) != 0;
	e->blkbits = sb->s_blocksize_bits;
	e->pad = 0;
	e->gen = inode->i_generation;
	/* Batch: wake the reader only when a good share of the buffer is waiting; it also
	 * polls on a timer, so a quiet trace is still drained. */
	u64 flags = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wakeup_bytes ?
			    BPF_RB_FORCE_WAKEUP :
			    BPF_RB_NO_WAKEUP;
	bpf_ringbuf_submit(e, flags);
	return 0;
}

/* Children of traced processes are traced too (threads share their tgid already). */
SEC("tp_btf/sched_process_fork")
int on_fork(u64 *ctx)
{
	if (!follow_forks)
		return 0;
	struct task_struct *parent = (struct task_struct *)ctx[0];
	struct task_struct *child = (struct task_struct *)ctx[1];
	u32 ptgid = BPF_CORE_READ(parent, tgid);
	if (!tgid_traced(ptgid))
		return 0;
	u32 ctgid = BPF_CORE_READ(child, tgid);
	u64 *word = tgid_word(ctgid);
	/* Atomic: parents on other CPUs may be setting bits of the same word. */
	if (word)
		__sync_fetch_and_or(word, 1ull << (ctgid % 64));
	return 0;
}

/* A traced process leaves the set when its whole thread group has exited, so a later
 * process that is given the same pid is not traced. do_exit() decrements signal->live
 * before this tracepoint fires, so the last thread to exit reads 0 (two threads exiting
 * together may both read 0: clearing twice is harmless). A thread that exits while others
 * of its group run leaves the bit set. Runs once per exiting thread, never on sys_exit. */
SEC("tp_btf/sched_process_exit")
int on_process_exit(u64 *ctx)
{
	struct task_struct *task = (struct task_struct *)ctx[0];
	u32 tgid = task->tgid;
	if (!tgid_traced(tgid))
		return 0;
	if (task->signal->live.counter != 0)
		return 0;
	u64 *word = tgid_word(tgid);
	if (word)
		__sync_fetch_and_and(word, ~(1ull << (tgid % 64)));
	return 0;
}
