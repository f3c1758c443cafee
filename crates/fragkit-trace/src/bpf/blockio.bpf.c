// SPDX-License-Identifier: GPL-2.0
/* Block request tracer: every block:block_rq_issue and block:block_rq_complete on one
 * device becomes one 40-byte record (time, sector, bytes, rwbs) in a ring buffer; user
 * space pairs issues with completions. The tracepoint records are read through their
 * format (/sys/kernel/tracing/events/block/block_rq_{issue,complete}/format), which is
 * stable ABI for these fields. */
#include "kernel.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

/* Kernel dev_t (major << 20 | minor) of the traced device, fixed before load. */
const volatile u32 filter_dev = 0;
const volatile u64 wakeup_bytes = 1 << 20;

/* Shared with src/trace/block.rs (struct BlockEvent there); 40 bytes. */
struct blk_event {
	u64 ts;
	u64 sector;
	u32 bytes;
	u32 dev;
	u8 complete;
	char rwbs[10];
	u8 pad[5];
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 << 20);
} blk_events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} blk_drops SEC(".maps");

struct rq_issue_ctx {
	u64 common;
	u32 dev;
	u32 pad;
	u64 sector;
	u32 nr_sector;
	u32 bytes;
	u16 ioprio;
	char rwbs[10];
};

struct rq_complete_ctx {
	u64 common;
	u32 dev;
	u32 pad;
	u64 sector;
	u32 nr_sector;
	__s32 error;
	u16 ioprio;
	char rwbs[10];
};

static __always_inline void emit(u32 dev, u64 sector, u32 bytes, const char *rwbs, u8 complete)
{
	if (dev != filter_dev)
		return;
	struct blk_event *e = bpf_ringbuf_reserve(&blk_events, sizeof(*e), 0);
	if (!e) {
		u32 k = 0;
		u64 *n = bpf_map_lookup_elem(&blk_drops, &k);
		if (n)
			*n += 1;
		return;
	}
	e->ts = bpf_ktime_get_ns();
	e->sector = sector;
	e->bytes = bytes;
	e->dev = dev;
	e->complete = complete;
	/* The verifier refuses loads through an offset ctx pointer: copy with a helper. */
	bpf_probe_read_kernel(e->rwbs, sizeof(e->rwbs), rwbs);
	__builtin_memset(e->pad, 0, sizeof(e->pad));
	u64 flags = bpf_ringbuf_query(&blk_events, BPF_RB_AVAIL_DATA) >= wakeup_bytes ?
			    BPF_RB_FORCE_WAKEUP :
			    BPF_RB_NO_WAKEUP;
	bpf_ringbuf_submit(e, flags);
}

SEC("tp/block/block_rq_issue")
int rq_issue(struct rq_issue_ctx *ctx)
{
	emit(ctx->dev, ctx->sector, ctx->bytes, ctx->rwbs, 0);
	return 0;
}

SEC("tp/block/block_rq_complete")
int rq_complete(struct rq_complete_ctx *ctx)
{
	emit(ctx->dev, ctx->sector, ctx->nr_sector << 9, ctx->rwbs, 1);
	return 0;
}
