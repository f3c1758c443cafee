/* The few kernel types fileio.bpf.c reads, declared by hand for CO-RE: libbpf relocates
 * every field access against the running kernel's BTF (/sys/kernel/btf/vmlinux), so only
 * the names and types of the fields used matter here, not their offsets or the rest of
 * each struct. Field names as in include/linux/{fs,fdtable,sched}.h. */
#ifndef FRAGKIT_KERNEL_H
#define FRAGKIT_KERNEL_H

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef signed char __s8;
typedef short __s16;
typedef int __s32;
typedef long long __s64;
typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;
typedef __s64 s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef _Bool bool;
#define true 1
#define false 0

/* include/uapi/linux/bpf.h: the map types, flags and helper numbers libbpf's headers use. */
enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_RINGBUF = 27,
};
enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
};
enum {
	BPF_RB_NO_WAKEUP = 1,
	BPF_RB_FORCE_WAKEUP = 2,
};
enum {
	BPF_RB_AVAIL_DATA = 0,
};

struct super_block {
	unsigned int s_dev; /* dev_t: major << 20 | minor */
	unsigned char s_blocksize_bits;
} __attribute__((preserve_access_index));

struct inode {
	unsigned short i_mode;
	unsigned long i_ino;
	struct super_block *i_sb;
	long long i_size;
	unsigned int i_generation;
} __attribute__((preserve_access_index));

struct file {
	struct inode *f_inode;
	unsigned int f_flags;
	long long f_pos;
} __attribute__((preserve_access_index));

struct fdtable {
	unsigned int max_fds;
	struct file **fd;
} __attribute__((preserve_access_index));

struct files_struct {
	struct fdtable *fdt;
} __attribute__((preserve_access_index));

/* include/linux/types.h, include/linux/sched/signal.h: live counts the thread group's
 * threads that have not yet passed do_exit()'s exit point. */
typedef struct {
	int counter;
} atomic_t;

struct signal_struct {
	atomic_t live;
} __attribute__((preserve_access_index));

struct task_struct {
	int pid;
	int tgid;
	struct files_struct *files;
	struct signal_struct *signal;
	char comm[16];
} __attribute__((preserve_access_index));

/* arch/x86/include/asm/ptrace.h: the registers a syscall's arguments arrive in. */
struct pt_regs {
	unsigned long di;
	unsigned long si;
	unsigned long dx;
	unsigned long r10;
	unsigned long r8;
	unsigned long orig_ax;
} __attribute__((preserve_access_index));

#endif
