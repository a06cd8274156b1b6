/* Every closed-form formula of the planner, one function each.
 * Derivations and sources: docs/model.md (section named in each comment). */
#include "planner.h"

#include <math.h>

/* "Compute": forward 2ND, backward 4ND (Kaplan et al. 2020). */
double six_n_d_flops(double params, double tokens) { return 6.0 * params * tokens; }

/* "Compute": Narayanan et al. SC'21, section 5.1: the FLOPs of a GPT step
 * without recomputation (their eq. (3) is the form with it, below). */
double narayanan_model_flops(double batch, double seq, double layers, double hidden, double vocab)
{
    return 72.0 * batch * seq * layers * hidden * hidden *
           (1.0 + seq / (6.0 * hidden) + vocab / (12.0 * layers * hidden));
}

/* "Compute": Narayanan et al. SC'21, eq. (3): one extra forward pass of every layer. */
double narayanan_full_recompute_flops(double batch, double seq, double layers, double hidden,
                                      double vocab)
{
    return 96.0 * batch * seq * layers * hidden * hidden *
           (1.0 + seq / (6.0 * hidden) + vocab / (16.0 * layers * hidden));
}

/* "Compute": Hoffmann et al. 2022, about 20 tokens per parameter. */
double chinchilla_tokens(double params) { return 20.0 * params; }

/* "Activations": Korthikanti et al. 2022, Table 2. */
double korthikanti_activation_bytes_per_layer(double s, double b, double h, double a, double t,
                                              int sp, recompute_t recompute)
{
    double attention_scores = recompute == RECOMPUTE_NONE ? 5.0 * a * s / h : 0.0;
    if (recompute == RECOMPUTE_FULL) return 2.0 * s * b * h / (sp ? t : 1.0);
    if (sp) return s * b * h / t * (34.0 + attention_scores);
    if (t > 1.0) return s * b * h * (10.0 + 24.0 / t + attention_scores / t);
    return s * b * h * (34.0 + attention_scores);
}

/* "Weights, gradients, optimizer": 2 (bf16 weights) + the gradients' bytes (2, 4 in fp32, 6 with
 * DeepSpeed's fp32 copy beside the 16-bit gradient) + 12 (fp32 master, Adam m, Adam v). */
double adam_bytes_per_param(double gradient_bytes) { return 2.0 + gradient_bytes + 12.0; }

/* "The loss": bytes a logit holds beyond the 16-bit logits themselves while the loss's backward runs.
 * PyTorch's cross_entropy on .float() logits: the fp32 cast and the fp32 log-softmax (4 + 4); flash-attn's
 * fused kernel: the gradient it writes to a new buffer beside the logits (one more 16-bit value); a fused
 * kernel writing in place: nothing. */
double loss_held_bytes_per_logit(loss_kernel_t loss, double elem_bytes)
{
    return loss == LOSS_FP32 ? 8.0 : loss == LOSS_FUSED_OUTPLACE ? elem_bytes : 0.0;
}

/* "FP8 GEMMs", energy: a GEMM FLOP's switching energy at a precision, from the 16-bit one calibrate measures.
 * The tensor cores run FP8 at twice the 16-bit rate within the same board power (the datasheet's peaks), so an
 * FP8 FLOP costs the 16-bit energy times peak_16 / peak_fp8 (one H100: 0.45-0.5 pJ against 0.90 pJ, from
 * llama3.2-3b trained in both; docs/model.md).  Other precisions keep the 16-bit energy. */
double gemm_energy_j_per_flop(double energy_16bit, double peak_16bit, double peak_matrix, int fp8)
{
    return fp8 && peak_matrix > 0.0 && peak_16bit > 0.0 ? energy_16bit * peak_16bit / peak_matrix : energy_16bit;
}

/* "The network at scale": the mean latency of one step of a ring over n ranks spread over `nodes` nodes, as NCCL's
 * tuning model prices it (src/graph/tuning.cc): of a reduce-scatter's or all-gather's n - 1 steps, nodes - 1 cross
 * the network (2 (nodes - 1) of an all-reduce's 2 (n - 1)), the others stay inside a node at its own hop latency. */
double ring_step_latency_s(double n, double nodes, double intra_s, double inter_s)
{
    if (n <= 1.0 || nodes <= 1.0) return intra_s;
    double inter_steps = nodes - 1.0 < n - 1.0 ? nodes - 1.0 : n - 1.0;
    return ((n - 1.0 - inter_steps) * intra_s + inter_steps * inter_s) / (n - 1.0);
}

/* "Published runs": the FLOPs a source adds when it counts the K and V projections of every query head (as if
 * there were as many KV heads as heads): forward 2 x 2 x h x d x (a - g) a token a layer, times 3 for training. */
double kv_per_head_extra_flops(double tokens, double layers, double hidden, double head_dim, double heads, double kv_heads)
{
    if (kv_heads <= 0.0 || kv_heads >= heads) return 0.0;
    return 12.0 * tokens * layers * hidden * head_dim * (heads - kv_heads);
}

/* "Gradient accumulation": DeepSpeed's BF16 optimizer runs hp_grad.add_(lp_grad.to(float32)) per
 * parameter tensor after each micro-batch's backward: the conversion reads the 16-bit gradient and writes
 * an fp32 temporary, the add reads the temporary and the fp32 copy and writes the copy:
 * g16 + 4 + 4 + 4 + 4 bytes (18 in bf16). */
double fp32_copy_accumulate_bytes_per_param(double grad16_bytes) { return grad16_bytes + 16.0; }

/* "Attention kernel generations": a FlashAttention-style kernel's efficiency rises with the sequence and
 * saturates, s / (s + s_half) with s_half = 230 tokens (pytorch/benchmark's flash attention on H100, head dim
 * 128, 16k tokens per call: Triton's FlashAttention-2 and FlashAttention-3 both at 0.69 of their 16k rate at
 * 512 tokens, 0.82 at 1k, 0.91 at 2k, 0.96 at 4k, 0.99 at 8k).  The efficiency priors are read at 2048 tokens,
 * so the factor is 1 there. */
#define FLASH_SEQ_HALF 230.0
#define FLASH_SEQ_PRIOR 2048.0
double flash_sequence_factor(double s)
{
    if (s <= 0.0) return 1.0;
    return (s / (s + FLASH_SEQ_HALF)) / (FLASH_SEQ_PRIOR / (FLASH_SEQ_PRIOR + FLASH_SEQ_HALF));
}

/* "Communication": ring all-reduce = reduce-scatter + all-gather. */
double ring_allreduce_s(double n, double bytes, double bw, double latency)
{
    if (n <= 1.0) return 0.0;
    return 2.0 * (n - 1.0) / n * bytes / bw + 2.0 * (n - 1.0) * latency;
}

double ring_reduce_scatter_s(double n, double bytes, double bw, double latency)
{
    if (n <= 1.0) return 0.0;
    return (n - 1.0) / n * bytes / bw + (n - 1.0) * latency;
}

double ring_allgather_s(double n, double bytes, double bw, double latency)
{
    return ring_reduce_scatter_s(n, bytes, bw, latency);
}

double sendrecv_s(double bytes, double bw, double latency) { return bytes / bw + latency; }

/* "Mixture of experts": the bytes one rank sends in the token dispatch (and
 * receives in the combine) of one MoE layer: each of its tokens goes to
 * top_k experts, h values of B bytes each; S counts the part that stays on
 * the rank too, as nccl-tests' size does. */
double moe_alltoall_bytes(double tokens, double top_k, double hidden, double elem_bytes)
{
    return tokens * top_k * hidden * elem_bytes;
}

/* "Mixture of experts": the bytes of one chunk sort (Megatron's sort_chunks_by_idxs) around an
 * all-to-all.  The all-to-all moves one message per peer, so a rank receives its rows rank-major
 * (every expert's rows from rank 0, then from rank 1, ...) while its experts' GEMMs take them
 * expert-major; after the dispatch every received row is read and written once into that order,
 * and before the combine once back.  With one expert a rank the two orders are one, and only the
 * rank's own share (rows / ep, which no message carries) is copied.  rows: the rows the rank's
 * experts receive; 2 x rows x hidden x B, read and written. */
double moe_sort_chunks_bytes(double rows, double hidden, double elem_bytes, double local_experts, double ep)
{
    double copied = local_experts > 1.0 ? rows : rows / ep;
    return 2.0 * copied * hidden * elem_bytes;
}

/* "Mixture of experts": an all-to-all of S bytes per rank among n ranks.
 * Each rank keeps S/n and sends S/n to each of the n - 1 others, n - 1
 * point-to-point transfers that share its link: (n-1)/n * S / BW, and one
 * latency per peer (NCCL posts them as n - 1 send/recv pairs). */
double alltoall_s(double n, double bytes, double bw, double latency)
{
    if (n <= 1.0) return 0.0;
    return (n - 1.0) / n * bytes / bw + (n - 1.0) * latency;
}

/* The same from the time of one send/recv pair of S/n bytes as calibrate --comm measured it
 * (NCCL's climb in bandwidth with the message and its latency in it): the n - 1 pairs one after
 * another on the rank's link, (n - 1) x pair, which alltoall_s is with the pair's fit. */
double alltoall_pairs_s(double n, double pair_s)
{
    return n > 1.0 ? (n - 1.0) * pair_s : 0.0;
}

/* The same across nodes: of the n - 1 peers, n_local - 1 share the node and
 * take their S/n each over its link while the n - n_local others go out
 * through the NICs at the same time; the slower of the two sets the time.
 * A node-limited dispatcher sends internode_share of those inter-node bytes
 * (moe_remote_node_copies over the plain exchange's; 1 for the plain one). */
double alltoall_two_level_s(double n, double n_local, double bytes, double bw_intra, double latency_intra,
                            double bw_inter, double latency_inter, double internode_share)
{
    if (n <= 1.0) return 0.0;
    if (n_local >= n) return alltoall_s(n, bytes, bw_intra, latency_intra);
    if (n_local < 1.0) n_local = 1.0;
    double intra = (n_local - 1.0) / n * bytes / bw_intra + (n_local - 1.0) * latency_intra;
    double inter = internode_share * (n - n_local) / n * bytes / bw_inter + (n - n_local) * latency_inter;
    return intra > inter ? intra : inter;
}

/* "Mixture of experts": how much longer the busiest rank's expert GEMMs take
 * than the mean's.  Without a capacity limit the busiest rank takes its
 * imbalance; with capacity factor c an expert takes at most c x its mean
 * share and drops the rest, so the busiest rank takes min(imbalance, c)
 * (and exactly c when Megatron pads every expert to its capacity). */
double moe_load_factor(double imbalance, double capacity_factor, int pad_to_capacity)
{
    if (capacity_factor <= 0.0) return imbalance;
    if (pad_to_capacity) return capacity_factor;
    return imbalance < capacity_factor ? imbalance : capacity_factor;
}

/* "Mixture of experts": the copies of a token the dispatch sends to other nodes, when the EP group spans
 * `nodes` nodes and the experts are spread evenly over them.  A plain all-to-all sends each of its top_k
 * copies to its expert's rank, (nodes - 1)/nodes of them off the node.  DeepSeek-V3's dispatcher (section
 * 3.2.2) sends a token once to each node it has experts on, over IB, and forwards it inside the node over
 * NVLink; with group-limited routing (its experts in `groups` groups, each token within `group_limit` of
 * them, the groups one per node) that is at most group_limit x nodes / groups nodes.  Without a limit
 * (group_limit 0) the plain exchange's k (nodes - 1)/nodes. */
double moe_remote_node_copies(double top_k, double nodes, double groups, double group_limit)
{
    if (nodes <= 1.0) return 0.0;
    double remote = (nodes - 1.0) / nodes;
    if (group_limit <= 0.0 || groups <= 0.0) return top_k * remote;
    double targets = group_limit * nodes / groups;
    if (targets > top_k) targets = top_k;
    if (targets > nodes) targets = nodes;
    return targets * remote;
}

/* The share of the routed tokens dropped when the busiest expert gets
 * `imbalance` x its mean and may keep c x: an upper bound over the experts,
 * 1 - c / imbalance of that expert's tokens (0 when c covers it). */
double moe_dropped_fraction(double imbalance, double capacity_factor)
{
    if (capacity_factor <= 0.0 || capacity_factor >= imbalance) return 0.0;
    return 1.0 - capacity_factor / imbalance;
}

/* "Mixture of experts": the dispatcher's per-expert token counts of every EP rank, all-gathered before
 * the dispatch (Megatron's MoEAlltoAllTokenDispatcher, the validator's moe.c): E 32-bit integers from each
 * of the ep ranks. */
double moe_counts_bytes(double ep, double experts)
{
    return ep * experts * 4.0;
}

/* "Mixture of experts": what the GPU idles when the host must see a result before it launches the next
 * kernel (the all-to-all's split sizes from those counts).  Elsewhere the host runs ahead and a launch's
 * cost hides behind the kernels queued before it; here the queue is empty: the host's wait returns when
 * the counts arrive, and the GPU waits again while the host issues the dispatch.  Each is taken as one
 * kernel issue, launch_overhead_s (calibrated: the CPU's fixed cost per kernel). */
double host_sync_s(double launch_overhead_s)
{
    return 2.0 * launch_overhead_s;
}

/* "Mixture of experts", the host's issue after the routing sync: once the counts are on the host the GPU's queue
 * is empty, and a forward whose experts' GEMMs are separate launches (Transformer Engine's grouped linear, the
 * trainer) gets each only as the host issues it: the op lasts at least its launches' issue, gemm_issue_s a
 * launch (calibrate's measurement), a kernel launch (launch_overhead_s) where none was made. */
double expert_gemm_issue_s(double launches, double gemm_issue_s, double launch_overhead_s)
{
    return launches * (gemm_issue_s > 0.0 ? gemm_issue_s : launch_overhead_s);
}

/* "Mixture of experts", the host's issue carried from op to op: the host issues the ops after the routing sync one
 * after another while the GPU runs them.  An op whose launches take issue_s to issue, the host lead_s into them when
 * the GPU starts it, lasts at least issue_s - lead_s; where the GPU took op_s >= that, the host had op_s - (issue_s -
 * lead_s) to start on the next op: its lead, lead_s + op_s - issue_s (never below 0). */
double host_issue_lead_s(double lead_s, double op_s, double issue_s)
{
    double lead = lead_s + op_s - issue_s;
    return lead > 0.0 ? lead : 0.0;
}

/* "Context parallelism": the K and V of one rank's seq/cp tokens, the block
 * the ring passes on at each of its cp - 1 steps (Megatron-LM's context
 * parallelism, Transformer Engine's p2p ring).  kv_heads are the rank's own
 * (after TP); the all-gather variant gathers cp of them. */
double cp_kv_block_bytes(double kv_heads, double head_dim, double seq, double cp, double mbs, double elem_bytes)
{
    return 2.0 * kv_heads * head_dim * (seq / cp) * mbs * elem_bytes;
}

/* "Context parallelism": the sequence length the ring's attention kernels run at.  With causal load
 * balancing a rank holds two chunks of s / (2 cp) tokens, s / cp in all; the ring runs its attention as cp
 * kernel calls, one a step: its own causal block (s/cp queries against s/cp keys) and cp - 1 blocks of the
 * peers' keys (half the queries against all s/cp received keys, or all queries against half of them: Transformer
 * Engine's p2p ring), each the work of a causal kernel at s/cp.  So the rank's attention is cp kernels at s/cp,
 * the same FLOPs as its share of one kernel at s but at the efficiency of s/cp, which is lower (a fused kernel's
 * rate rises with the sequence: "Attention kernel generations"). */
double cp_ring_attention_length(double seq, double cp)
{
    return cp > 1.0 ? seq / cp : seq;
}

/* "Context parallelism": the bytes of the ring's K, V pack.  Before its first step the ring copies the rank's
 * K and V, which the QKV projection left interleaved with Q, into one send buffer: Transformer Engine's
 * p2p ring concatenates them (torch.cat of k and v, its forward) and copies the saved pair into its comm
 * buffer (its backward), once per attention call, as the validator does; one block read, one written. */
double cp_kv_pack_bytes(double kv_block_bytes)
{
    return 2.0 * kv_block_bytes;
}

/* "Context parallelism": the bytes of one ring step's dK, dV addition in the backward.  The partial
 * dK, dV that arrive (one KV block's size) are added to those the step's attention computed: two blocks
 * read, one written (Transformer Engine's p2p ring accumulates them so; the validator adds the peer's
 * into the rank's own at CP 2). */
double cp_dkv_add_bytes(double kv_block_bytes)
{
    return 3.0 * kv_block_bytes;
}

/* "Context parallelism": what one step of the KV ring adds to the step.  The step's send/recv is
 * posted beside the attention of the block the rank holds, but on a stream of the same priority
 * (Megatron's and Transformer Engine's default, and the validator's): its NCCL kernel gets SMs only
 * once the attention kernel, whose grid fills every SM, has finished, and the next block's
 * attention waits for the data.  So the transfer runs between the blocks, serialised: exposed in
 * full (measured on 2 x H200: the forward exchange never ends before the attention beside it,
 * docs/validation/2026-11-26-h200x2-cp).  Were the exchange on a stream of higher priority, it
 * would run beside the block, 1/cp of the layer's attention with causal load balancing, and only
 * its excess would be exposed. */
double cp_ring_exposed_s(double transfer_s, double attention_s, double cp, int serialised)
{
    if (serialised) return transfer_s;
    double hidden_by = attention_s / cp;
    return transfer_s > hidden_by ? transfer_s - hidden_by : 0.0;
}

/* "Communication": nccl-tests' busbw = algbw * factor, so that busbw is
 * comparable to the link's bandwidth whatever n is. */
double bus_bandwidth(coll_t coll, double n, double bytes, double seconds)
{
    double algbw = bytes / seconds;
    switch (coll) {
    case COLL_ALLREDUCE: return algbw * 2.0 * (n - 1.0) / n;
    case COLL_REDUCE_SCATTER:
    case COLL_ALLGATHER: return algbw * (n - 1.0) / n;
    case COLL_SENDRECV: return algbw;
    case COLL_ALLTOALL: return algbw * (n - 1.0) / n;
    }
    return algbw;
}

/* "The TP ratio limit": per token a TP rank does 2*3*h*(h/t) FLOP per h*h/t
 * weight shard and exchanges about h values of B bytes. */
double tp_compute_comm_ratio(double h, double t, double bytes_per_value)
{
    return 6.0 * (h / t) / bytes_per_value;
}

double tp_ratio_limit(double h, double bytes_per_value, double flops, double bw)
{
    return 6.0 * h / (bytes_per_value * flops / bw);
}

/* "Pipeline": 1F1B idles (p-1) micro-batch slots of m + p - 1; interleaving
 * with v chunks shrinks each slot v-fold. */
double pipeline_bubble_fraction(double p, double m, double v)
{
    double bubble = (p - 1.0) / v;
    return bubble / (m + bubble);
}

/* "Pipeline": stage i of 1F1B runs p - i forwards before its first
 * backward.  Interleaved (Megatron's order, validator/schedule.c), stage i
 * runs 2 (p - i - 1) + (v - 1) p chunk forwards before its first backward
 * and holds one more; with m = p it runs every forward first.  In whole-stage
 * micro-batches (a chunk is 1/v of the stage's layers). */
double pipeline_inflight_microbatches(double p, double m, double v, double stage)
{
    if (v <= 1.0) return p - stage < m ? p - stage : m;
    if (m <= p) return m;
    double chunks = 2.0 * (p - stage - 1.0) + (v - 1.0) * p + 1.0;
    return (chunks < m * v ? chunks : m * v) / v;
}

/* "Pipeline": micro-batches whose logits the last stage holds at once: one,
 * but every one of them when interleaving with m = p runs all forwards first. */
double pipeline_inflight_heads(double p, double m, double v)
{
    return v > 1.0 && m <= p ? m : 1.0;
}

/* "Step time": an op is bound by arithmetic or by memory traffic. */
double roofline_s(double flops, double flop_per_s, double bytes, double bytes_per_s)
{
    double compute = flop_per_s > 0 ? flops / flop_per_s : 0.0;
    double memory = bytes_per_s > 0 ? bytes / bytes_per_s : 0.0;
    return compute > memory ? compute : memory;
}

/* "Other memory": NCCL's device memory.  Each group of more than one GPU the rank belongs to is a communicator (a
 * framework makes none for a group of one: PyTorch's ProcessGroupNCCL creates it on the first collective), besides
 * the world's.  NCCL connects an algorithm's buffers on its first use, so a communicator costs what runs on it:
 *   collectives: TP's, the gradients' DP x CP, the tied embedding's pair, the experts' data-parallel group, an expert TP
 *     group apart from TP; the EP group's count all-gather; with a mixture of experts the CP group's count sum;
 *   send/recv: the pipeline's, CP's ring, EP's dispatch and combine. */
int nccl_groups(const layout_t *l, int tied_group, int moe, nccl_group out[NCCL_GROUPS_MAX])
{
    int n = 0;
    int64_t cp = l->cp > 1 ? l->cp : 1;
    int64_t ep = l->ep > 1 ? l->ep : 1, etp = l->etp > 0 ? l->etp : l->tp;   /* layout_ep, layout_etp: this file
                                                                              stands alone in the tests */
    if (l->gpus <= 1) return 0;
    if (l->tp > 1) out[n++] = (nccl_group){"TP", 1, 0, 0};
    if (l->dp * cp > 1) out[n++] = (nccl_group){cp > 1 ? "DP x CP" : "DP", 1, 0, 0};
    /* a ring of cp ranks: the next and the previous, one rank when cp is 2 */
    if (cp > 1) out[n++] = (nccl_group){"CP", moe, cp > 2 ? 2 : 1, 0};
    if (tied_group) out[n++] = (nccl_group){"tied embedding", 1, 0, 0};
    if (moe && ep > 1) out[n++] = (nccl_group){"EP", 1, (int)(ep - 1), 0};   /* the dispatch: every other EP rank */
    /* the experts' own gradient group, TP x CP x DP / (ETP x EP), a communicator apart from DP's even where it holds the
     * same ranks (Megatron-Core's expert-data-parallel group; the validator's) */
    if (moe && l->tp * l->dp * cp / (etp * ep) > 1) out[n++] = (nccl_group){"experts' DP", 1, 0, 0};
    /* an expert TP other than TP opens its own group (at ETP = TP it holds the TP group's ranks) */
    if (moe && etp > 1 && etp != l->tp) out[n++] = (nccl_group){"expert TP", 1, 0, 0};
    /* a stage's neighbours: one at 2 stages; two (a middle stage's, the interleaved ring's) over more: the first and
     * last stages of plain 1F1B have one, priced as the middle's */
    if (l->pp > 1) out[n++] = (nccl_group){"PP", 0, l->pp > 2 ? 2 : 1, 1};
    return n;
}

int nccl_memory_by_parts(const nccl_memory_figures *f) { return f->split > 0.0 && f->process > 0.0; }

double nccl_group_bytes(const nccl_memory_figures *f, const nccl_group *g)
{
    if (nccl_memory_by_parts(f))
        return f->split + (g->collective ? f->collective : 0.0) + (double)g->peers * f->p2p_buffers;
    /* the totals: one per communicator, a pipeline's send/recv-only one at its own figure where set */
    double per_comm = f->comm > 0.0 ? f->comm : 0.25 * 1073741824.0;
    return g->pipeline && f->p2p > 0.0 ? f->p2p : per_comm;
}

double nccl_world_bytes(const nccl_memory_figures *f, const nccl_group *groups, int n)
{
    if (nccl_memory_by_parts(f)) {
        /* the world's (NCCL's per-process state, the first collective's one-time part), and once, where any group runs
         * send/recv, the first send/recv's one-time part */
        int p2p = 0;
        for (int i = 0; i < n; i++) p2p |= groups[i].peers > 0;
        return f->process + (p2p && f->p2p_first > f->p2p_buffers ? f->p2p_first - f->p2p_buffers : 0.0);
    }
    /* the totals: the world's communicator, which carried NCCL's per-process state when a calibration measured it */
    return f->first > 0.0 ? f->first : f->comm > 0.0 ? f->comm : 0.25 * 1073741824.0;
}

double nccl_memory_bytes(const layout_t *l, const nccl_memory_figures *f, int tied_group, int moe)
{
    nccl_group groups[NCCL_GROUPS_MAX];
    int n = nccl_groups(l, tied_group, moe, groups);
    if (l->gpus <= 1) return 0.0;
    double bytes = nccl_world_bytes(f, groups, n);
    for (int i = 0; i < n; i++) bytes += nccl_group_bytes(f, &groups[i]);
    return bytes;
}

/* "Other memory": CUDA context and library workspaces (1 GiB until a calibration measures them), NCCL's buffers for
 * every communicator the layout opens, the backward's workspace, and a mixture of experts' GEMM workspaces. */
double other_memory_allowance(const layout_t *l, double context_bytes, const nccl_memory_figures *nccl, int tied_group,
                              int moe, double backward_workspace)
{
    const double gib = 1073741824.0;
    double bytes = context_bytes > 0.0 ? context_bytes : 1.0 * gib;
    return bytes + nccl_memory_bytes(l, nccl, tied_group, moe) + backward_workspace + (moe ? moe_gemm_workspace_bytes() : 0.0);
}

/* "Mixture of experts", memory: the experts' GEMMs of a layer run over 4 streams, each with its own cuBLAS
 * workspace, 32 MiB on Hopper (Transformer Engine's grouped GEMM: 4 compute streams,
 * transformer_engine/common/util/multi_stream.cpp, and a workspace per stream; validator/moe.c the same). */
double moe_gemm_workspace_bytes(void)
{
    return 4.0 * 32.0 * 1048576.0;
}

/* "Mixture of experts", memory: the routed rows' gradients one MoE layer's backward holds beside its experts' own
 * (backward_workspace_bytes' expert widths).  The experts' output rows' gradient in expert order (the combine's
 * backward, then gathered over expert TP or received from the EP ranks), and their input rows' gradient, sent back
 * before the permutation's backward sums each token's k rows: rows x hidden each, both live while the experts'
 * backward runs.  Where no rows move (EP 1 and expert TP 1) the two are one buffer: the input's gradient is written
 * where the output's was read (validator/moe.c, moe_backward).  rows: the rank's routed rows, the busiest rank's
 * (tokens x top_k x load x t_e / t). */
double moe_routed_grad_bytes(double rows, double hidden, double elem_bytes, int exchanged)
{
    return (exchanged ? 2.0 : 1.0) * rows * hidden * elem_bytes;
}

/* The gradients one layer's backward holds at once, reused layer after
 * layer (docs/model.md, "Memory"): the residual stream's gradient and one
 * more of its size, the gradient of the QKV projection's output, of the FFN's
 * widest activation (for SwiGLU: gate and up, and the gradient of their product
 * while those two are written), and, when attention is
 * unfused, of the s x s scores of every local head. */
double backward_workspace_bytes(double tokens, double hidden, double qkv_width, double ffn_up_width,
                                double score_elements, double elem_bytes)
{
    return elem_bytes * (tokens * (2.0 * hidden + qkv_width + ffn_up_width) + score_elements);
}

/* sextant-gpu's fused attention backward (kernels/attention.cu, `dkdv_splits`, docs/model.md "Other memory"):
 * its dK, dV kernel runs a block per 64 keys of each (sequence, kv head), (tk + 63) / 64 x b x kv blocks.  Under
 * ATTENTION_DKDV_BLOCKS (264, the kernel's DKDV_BLOCKS) the kv head's group of query heads is split over more
 * blocks: the smallest divisor d of the group (2 <= d < group) with blocks x d >= 264, else the whole group;
 * 1 (no split) when the grid is full or empty.  tests/test_formulas.c checks the constant against the kernel's. */
int attention_dkdv_splits(int64_t b, int64_t tk, int64_t kv, int64_t group)
{
    const int64_t blocks = (tk + 63) / 64 * b * kv;
    if (blocks <= 0 || blocks >= ATTENTION_DKDV_BLOCKS) return 1;
    for (int64_t d = 2; d < group; d++)
        if (group % d == 0 && blocks * d >= ATTENTION_DKDV_BLOCKS) return (int)d;
    return group > 1 ? (int)group : 1;
}

/* The split's fp32 partial dK and dV in the backward's workspace, which a fourth kernel sums: 2 x splits x b x tk x
 * kv x d x 4 bytes when the group is split, else 0 (h query heads, kv kv heads, head size d). */
double attention_dkdv_split_bytes(int64_t b, int64_t tk, int64_t h, int64_t kv, int64_t d)
{
    if (b <= 0 || tk <= 0 || h <= 0 || kv <= 0 || d <= 0 || h % kv) return 0.0;
    int splits = attention_dkdv_splits(b, tk, kv, h / kv);
    return splits > 1 ? 2.0 * (double)splits * (double)b * (double)tk * (double)kv * (double)d * 4.0 : 0.0;
}

/* The whole workspace sextant-gpu's trainer allocates for that backward, once a rank and reused by every layer
 * (validator/step_layout.c, `flash_ws`): sx_flash_attention_backward_workspace_bytes(b, tq, tk, h, kv, d), the rows'
 * fp32 dot products dO . O (b x h x tq x 4 bytes, rounded up to 256) and the split's partials after them. */
double sextant_attention_workspace_bytes(int64_t b, int64_t tq, int64_t tk, int64_t h, int64_t kv, int64_t d)
{
    if (b < 0 || tq < 0 || tk < 0 || h < 0 || kv <= 0 || d < 0 || h % kv) return 0.0;
    double rows = (double)((b * h * tq * 4 + 255) / 256 * 256);
    return rows + attention_dkdv_split_bytes(b, tk, h, kv, d);
}

/* The FLOPs a fused (flash-style) attention executes for b sequences of s
 * tokens and `heads` heads of size d (docs/model.md, "The op list"): the two
 * products Q K^T and P V, 4 b heads s^2 d, halved when causal (the masked
 * tiles are skipped); the backward recomputes Q K^T besides its four
 * products, 2.5 times the forward (FlashAttention-2).  The op list costs
 * these, and calibrate measures the kernel's efficiency against them. */
double flash_attention_flops(double b, double heads, double s, double d, int causal, int backward)
{
    double core = 4.0 * b * heads * s * s * d;
    double forward = causal ? core / 2.0 : core;
    return backward ? 2.5 * forward : forward;
}

/* A compute-bound kernel's time measured at clock_mhz, as at the reference clock ref_mhz
 * (docs/model.md, "Step time"): tensor-core and SM work takes a fixed number of cycles, so its
 * time scales as 1 / clock.  calibrate --clock-scaling brings its GEMMs of 1 GFLOP or more and
 * our fused attention to one reference clock, the median clock under sustained GEMMs, because
 * under the power cap each timing lands wherever the clock happened to be (an H100: 1480-2085
 * MHz), and a step holds yet another (1780-1965 MHz).  A clock of 0 (not measured): the time
 * as is. */
double seconds_at_clock(double seconds, double clock_mhz, double ref_mhz)
{
    return ref_mhz > 0 && clock_mhz > 0 ? seconds * clock_mhz / ref_mhz : seconds;
}

/* "Clock under the power cap", collectives: an NCCL collective is kernels that copy and reduce
 * through HBM and drive the links, so while it runs alone the GPU draws collective_w (measured:
 * dev/cuda/collective_power.cu), not the static power.  Its seconds add what it draws above the
 * static power to the step's energy, as a kernel's switching energy; 0 when collective_w is unknown
 * (0) or below the static power. */
double collective_energy_j(double seconds, double collective_w, double static_w)
{
    return collective_w > static_w && seconds > 0.0 ? (collective_w - static_w) * seconds : 0.0;
}

/* "Clock under the power cap", the slowest GPU: how many standard deviations above the mean the largest of n
 * normal draws lies, on average (the chip of n that leaks most): Blom's approximation Phi^-1((n - 0.375) /
 * (n + 0.25)) of the expected maximum (exact: 0.564 for 2, 1.029 for 4, 3.25 for 1024; Blom: 0.589, 1.049, 3.234),
 * Phi^-1 by Abramowitz and Stegun 26.2.23 (error below 4.5e-4); 0 for one. */
double expected_max_sigmas(double n)
{
    if (n <= 1.0) return 0.0;
    double p = (n - 0.375) / (n + 0.25);
    double t = sqrt(-2.0 * log(1.0 - p));
    return t - (2.515517 + 0.802853 * t + 0.010328 * t * t) / (1.0 + 1.432788 * t + 0.189269 * t * t + 0.001308 * t * t * t);
}

/* "Clock under the power cap", GEMM time against the clock: the factor by
 * which the clock-bound seconds of a step at clock fraction x exceed
 * calibrate's top-clock time, factor x^-exponent.  1 / x (factor 1,
 * exponent 1) if the work were bound by the clock alone and ran in the step
 * as fast as calibrate timed it alone; the recorded steps read a factor of
 * about 1.07 and an exponent of about 0.35 (docs/model.md). */
double clock_bound_stretch(double x, double factor, double exponent)
{
    if (factor == 1.0 && exponent == 1.0) return 1.0 / x;
    return factor * pow(x, -exponent);
}

/* "Clock under the power cap": the SM clock, as a fraction x of the top
 * clock, at which a step's average power meets the cap.  At x the step draws
 *     P(x) = static_w + dynamic_j x^g / T(x),
 *     T(x) = other_s + gemm_s K x^-b + kernel_s / x
 * where dynamic_j is the switching energy of the step's work at the top clock
 * (it falls with the voltage a lower clock needs: x^g, g the exponent),
 * other_s the seconds that do not follow the clock (memory-bound kernels,
 * launches, exposed communication), gemm_s the top-clock seconds of the
 * tensor-core GEMMs, which take K x^-b of them at x (clock_bound_stretch; K =
 * b = 1: 1 / x), and kernel_s those of the other clock-bound kernels (our
 * fused attention), which take 1 / x.  P rises with x, so the clock is the top
 * one when P(1) <= cap_w, else the x in [x_min, 1] where P(x) = cap_w, x_min
 * when even x_min draws more.  Solved by Newton's method, whose slope is
 *     P'(x) = dynamic_j x^(g-1) (g T + b gemm_s K x^-b + kernel_s / x) / T^2,
 * kept inside a bracket that each step narrows (bisecting where Newton would
 * leave it): a handful of pow() calls to 1e-12 instead of bisection's forty,
 * which the search pays for every layout. */
double power_capped_clock_fraction(double static_w, double cap_w, double dynamic_j, double other_s, double gemm_s,
                                   double kernel_s, double exponent, double time_factor, double time_exponent,
                                   double x_min)
{
    if (gemm_s + kernel_s <= 0.0 || dynamic_j <= 0.0 || cap_w <= 0.0) return 1.0;
    const double k_gemm = time_factor * gemm_s, b = time_exponent;
    double lo = x_min, hi = 1.0;
    /* P(1) needs no pow(); P(x_min) is asked only when the answer is below x = 1 */
    if (static_w + dynamic_j / (other_s + k_gemm + kernel_s) <= cap_w) return 1.0;
    if (static_w + dynamic_j * pow(lo, exponent) /
                       (other_s + gemm_s * clock_bound_stretch(lo, time_factor, b) + kernel_s / lo) >= cap_w)
        return lo;
    double x = 1.0;
    for (int i = 0; i < 100 && hi - lo > 1e-12; i++) {
        double x_g = pow(x, exponent), gemm_t = k_gemm * (b == 1.0 ? 1.0 / x : pow(x, -b)), kernel_t = kernel_s / x;
        double t = other_s + gemm_t + kernel_t;
        double excess = static_w + dynamic_j * x_g / t - cap_w;
        if (excess > 0.0) hi = x;
        else lo = x;
        double slope = dynamic_j * x_g / x * (exponent * t + b * gemm_t + kernel_t) / (t * t);
        double next = slope > 0.0 ? x - excess / slope : 0.5 * (lo + hi);
        if (!(next > lo && next < hi)) next = 0.5 * (lo + hi);
        if (fabs(next - x) <= 1e-13) return next;
        x = next;
    }
    return 0.5 * (lo + hi);
}

/* "Attention kernel generations", occupancy: a kernel of one block per (query or key block, batch x head) fills
 * the GPU as its batch x heads b grows and its rate saturates as r(b) = R · b / (b + b_half), the form of
 * calibrate's GEMM efficiency curve; 1/r is then a line in 1/b.  The rate at b on the curve through the timed
 * (b1, r1) and (b2, r2): between them an interpolation, beyond them the curve carried on.  r1 where the two
 * are one point, or where the line would not give a positive rate. */
double occupancy_rate(double b, double b1, double r1, double b2, double r2)
{
    if (!(b > 0.0 && b1 > 0.0 && r1 > 0.0)) return r1;
    if (!(b2 > 0.0 && r2 > 0.0) || b2 == b1) return r1;
    double slope = (1.0 / r1 - 1.0 / r2) / (1.0 / b1 - 1.0 / b2);
    double inv = 1.0 / r1 + slope * (1.0 / b - 1.0 / b1);
    return inv > 0.0 ? 1.0 / inv : r1;
}

/* Unfused attention as the kernels that run it (docs/model.md, "Attention"),
 * per (micro-batch x head): the score GEMM, the softmax, the value GEMM
 * forward; dP, dV, the softmax backward, dQ and dK backward.  Each kernel
 * touches the s x s matrix once; mask_bytes is dropout's mask per score.
 * Fills flops[] and bytes[] and returns the number of kernels. */
int unfused_attention_kernels(double s, double d, double elem_bytes, double mask_bytes, int backward,
                              double flops[UNFUSED_ATTENTION_KERNELS_MAX], double bytes[UNFUSED_ATTENTION_KERNELS_MAX])
{
    const double gemm = 2.0 * s * s * d, tile = s * d * elem_bytes, scores = s * s * elem_bytes;
    const double mask = s * s * mask_bytes;
    if (!backward) {
        flops[0] = gemm; bytes[0] = 2.0 * tile + scores;                 /* S = Q K^T */
        flops[1] = 5.0 * s * s; bytes[1] = 2.0 * scores + mask;         /* P = softmax(S) */
        flops[2] = gemm; bytes[2] = scores + 2.0 * tile;                 /* O = P V */
        return 3;
    }
    flops[0] = gemm; bytes[0] = 2.0 * tile + scores;                     /* dP = dO V^T */
    flops[1] = gemm; bytes[1] = scores + 2.0 * tile;                     /* dV = P^T dO */
    flops[2] = 5.0 * s * s; bytes[2] = 3.0 * scores + mask;             /* dS from P and dP */
    flops[3] = gemm; bytes[3] = scores + 2.0 * tile;                     /* dQ = dS K */
    flops[4] = gemm; bytes[4] = scores + 2.0 * tile;                     /* dK = dS^T Q */
    return 5;
}

/* Bytes an FP8 GEMM (m x k)(k x n) moves to quantize its 16-bit activation first: each element read at
 * 2 bytes and written twice at 1, plain and transposed (Hopper's FP8 GEMMs take only K-major operands,
 * so the backward needs the other layout; the amax rides along), 4 bytes in all.  Forward (and its
 * recomputation): the input (m x k); one that a norm wrote in FP8 itself (`norm_fed`, TE's
 * LayerNormLinear) only needs its transpose, read 1 and write 1.  Data gradient: the output gradient
 * (its m x k).  Weight gradient: nothing, its operands are the transposed copies the other casts wrote.
 * The weight (k x n) is cast apart, into TE's cache of FP8 weights (fp8_weight_cast_bytes)
 * (docs/model.md, "FP8 GEMMs"). */
double fp8_cast_bytes(double m, double k, int backward, int weight_gradient, int norm_fed)
{
    if (weight_gradient) return 0.0;
    if (backward) return 4.0 * m * k;
    return (norm_fed ? 2.0 : 4.0) * m * k;
}

/* Once per step, after the optimizer has written new 16-bit weights, the first micro-batch casts each
 * FP8 GEMM's weight into its cached FP8 copy and transpose (TE's FP8 weight caching, Megatron's
 * is_first_microbatch): read at 2 bytes, written twice at 1.  ZeRO-3 casts each micro-batch's gathered
 * weights instead (docs/model.md, "FP8 GEMMs"). */
double fp8_weight_cast_bytes(double fp8_weights)
{
    return 4.0 * fp8_weights;
}

/* What those cached copies hold: one byte each for the weight and its transpose, beside the 16-bit
 * weight and the fp32 master (docs/model.md, "FP8 GEMMs"). */
double fp8_weight_copy_bytes(double fp8_weights)
{
    return 2.0 * fp8_weights;
}

/* What ZeRO-2/3 and FSDP hold beyond their shards, one wrapped unit at a time: the layer being computed and
 * the next one arriving (the prefetch), and one buffer for the largest unit that is not a layer (the
 * embedding, an untied head), `big` (0 on a middle stage).  ZeRO-3 gathers parameters and
 * reduce-scatters gradients in those buffers; ZeRO-2 only the gradients (docs/model.md, "ZeRO-3 and FSDP";
 * measured in docs/validation/2026-11-25-h100x2-zero). */
double zero_unit_buffer_bytes(int zero, double layer_params, double big_params, double weight_bytes, double grad_bytes)
{
    if (zero < 2) return 0.0;
    double units = 2.0 * layer_params + big_params;
    return units * (zero >= 3 ? weight_bytes + grad_bytes : grad_bytes);
}

/* Seconds a collective of `comm` seconds adds to a compute window of `window` seconds it overlaps, when
 * running side by side slows the compute by a fraction sc and the collective by sm (measured: NCCL's
 * kernels hold SMs and share HBM; docs/model.md, "Overlap is not free").  The tail (tail_fraction of the
 * collective: the last bucket, the last layer) runs alone, exposed.  The rest, stretched to
 * C' = (comm - tail)(1 + sm), runs beside the compute: while it lasts the compute advances at 1/(1 + sc).
 *   C' <= W (1 + sc):  the window grows by C' sc / (1 + sc);
 *   else:              the compute is slowed all along, W sc, and the collective's remainder runs alone,
 *                      (C' - W (1 + sc)) / (1 + sm).
 * With sc = sm = 0 this is max(comm - window, tail): the old perfect hiding.  The parts: `slowdown_s`, what
 * the compute beside the collective lost, and `beside_s`, the seconds of the collective (alone) that ran
 * beside it, W (1 + sc) / (1 + sm) of them when it outlasts the window; the rest of the cost ran alone
 * (docs/model.md, "Clock under the power cap", overlapped collectives). */
overlap_cost overlapped_comm_parts(double comm, double window, double tail_fraction, double sc, double sm)
{
    overlap_segment whole = {window, sc, sm};
    return overlapped_comm_walk(comm, tail_fraction, &whole, 1);
}

/* The same collective beside compute that changes as it runs: the segments seg[0..n) in the order the compute runs
 * them (ZeRO-3's collectives of a layer beside that layer's ops, from its start), each its own seconds t and its own
 * slowdowns sc, sm (what runs beside decides them: a GEMM that holds every SM against the experts' small GEMMs or
 * the fused attention; docs/model.md, "Overlap is not free").  The overlapping part R = comm (1 - tail_fraction),
 * in the collective's own seconds (alone), is spent segment by segment from the first:
 *   R (1 + sm) >= t (1 + sc):  it outlasts the segment: the compute loses t sc, and t (1 + sc) / (1 + sm) of R is done;
 *   else:                      it ends inside it, after w = R (1 + sm): the compute loses w sc / (1 + sc);
 * what is left of R after the last segment runs alone.  With one segment this is the rule above, term for term. */
overlap_cost overlapped_comm_walk(double comm, double tail_fraction, const overlap_segment *seg, int n)
{
    overlap_cost o = {0.0, 0.0, 0.0};
    if (comm <= 0.0) return o;
    double tail = comm * tail_fraction, left = comm - tail;
    for (int i = 0; i < n && left > 0.0; i++) {
        double sc = seg[i].sc, sm = seg[i].sm, stretched = seg[i].t * (1.0 + sc);
        if (left * (1.0 + sm) >= stretched) {
            double done = stretched / (1.0 + sm);
            o.slowdown_s += seg[i].t * sc;
            o.beside_s += done;
            left -= done;
        } else {
            o.slowdown_s += left * (1.0 + sm) * sc / (1.0 + sc);
            o.beside_s += left;
            left = 0.0;
        }
    }
    o.cost_s = tail + o.slowdown_s + (left > 0.0 ? left : 0.0);
    return o;
}

double overlapped_comm_cost_s(double comm, double window, double tail_fraction, double sc, double sm)
{
    return overlapped_comm_parts(comm, window, tail_fraction, sc, sm).cost_s;
}

void zero3_turns(double microbatches, double warmup, double *bwd_after_fwd, double *fwd_after_bwd)
{
    /* F^w (F B)^(m-w) B^w, or F^m B^m when the warm-up takes every micro-batch */
    double m = microbatches, w = warmup < microbatches ? warmup : microbatches;
    *bwd_after_fwd = m - w > 1.0 ? m - w : 1.0;
    *fwd_after_bwd = m - w - 1.0 > 0.0 ? m - w - 1.0 : 0.0;
}

/* What a collective reaches across nodes of the NICs' line rate: NCCL's protocols pipeline a message in
 * chunks, so small messages leave the links idle part of the time; measured bus bandwidth rises with the
 * message size S as S / (S + S_half) towards a plateau `efficiency` of line rate (nccl-tests on 2-4 nodes,
 * data/published/collectives.csv; docs/model.md, "The network at scale").  No S_half: the plateau alone. */
double network_bus_bytes_per_s(double line_bytes_per_s, double message_bytes, double efficiency, double half_bytes)
{
    double bw = line_bytes_per_s * (efficiency > 0.0 ? efficiency : 1.0);
    if (half_bytes > 0.0 && message_bytes > 0.0) bw *= message_bytes / (message_bytes + half_bytes);
    return bw;
}

/* "GEMM time over M, N, K": the waves of output tiles a GEMM of `batch`
 * problems m x n x k runs in on `sms` SMs, one GEMM_TILE_M x GEMM_TILE_N tile
 * per CTA and one CTA per SM at a time, and the K each CTA loops over.  A
 * GEMM with fewer tiles than SMs splits K (split-K) so that the idle SMs take
 * a share, while each share keeps at least GEMM_SPLIT_K_MIN of it. */
void gemm_waves(double batch, double m, double n, double k, double sms, double *waves, double *k_per_cta)
{
    double tiles = (batch > 1.0 ? batch : 1.0) * ceil(m / GEMM_TILE_M) * ceil(n / GEMM_TILE_N);
    double split = 1.0;
    if (tiles < sms) {
        split = floor(sms / tiles);
        double most = floor(k / GEMM_SPLIT_K_MIN);
        if (most < split) split = most;
        if (split < 1.0) split = 1.0;
    }
    *waves = ceil(tiles * split / sms);
    *k_per_cta = k / split;
}

/* "Mixture of experts", a router's rows: the whole tiles (or K steps) of `tile` rows an expert's GEMM runs on
 * average when a router deals the rows.  Each expert rounds its own rows up (to row tiles of the output's M in the
 * forward and the data gradient, to the kernel's K steps in the weight gradient, whose K is the rows).  A router
 * spreads an expert's rows by more than a tile (the validator's routers: a coefficient of variation of 0.28-1.6 at
 * 256-1024 rows an expert, 80-400 rows), so the part of its last tile each expert fills is even over (0, 1]: on
 * average rows / tile + 1/2 tiles, where the balanced shape has ceil(rows / tile). */
double routed_row_tiles(double rows, double tile)
{
    return rows > 0.0 && tile > 0.0 ? rows / tile + 0.5 : 0.0;
}

/* "GEMM time over M, N, K", accumulating weight gradients: a weight gradient added into the gradient (cuBLAS's
 * beta = 1: sextant's trainer into its 16-bit gradient, Megatron's gradient-accumulation fusion into an fp32
 * main_grad) reads its `elements` outputs before its epilogue writes them back, at `accumulate_bytes` each, where
 * the GEMM that writes its output (beta = 0) stores `written_bytes`.  The time it adds: the read's time at HBM
 * speed times `read_factor` (the epilogue loads its source partly beside the mainloop: under 1), the wider
 * store's times `write_factor` (an fp32 epilogue stores slower than HBM takes it: over 1); both measured on
 * gradients larger than L2, as a step's are when the next micro-batch adds into them (dev/cuda/gemm_accumulate.cu). */
double gemm_accumulate_s(double elements, double accumulate_bytes, double written_bytes, double bytes_per_s,
                         double read_factor, double write_factor)
{
    if (bytes_per_s <= 0.0 || accumulate_bytes <= 0.0 || elements <= 0.0) return 0.0;
    double wider = accumulate_bytes > written_bytes ? accumulate_bytes - written_bytes : 0.0;
    return elements * (accumulate_bytes * read_factor + wider * write_factor) / bytes_per_s;
}

/* "GEMM time over M, N, K": each wave costs a tile's fixed time (filling the
 * pipeline, the epilogue's store) plus its K loop at one SM's share of
 * `tile_flop_per_s`; the GEMM adds one fixed cost (launch, ramp, tail) and
 * is never faster than its bytes at `bytes_per_s`. */
double gemm_tile_wave_s(double batch, double m, double n, double k, double sms, double tile_flop_per_s, double tile_s,
                        double fixed_s, double bytes, double bytes_per_s)
{
    double waves, k_per_cta;
    gemm_waves(batch, m, n, k, sms, &waves, &k_per_cta);
    double mma = waves * (tile_s + 2.0 * GEMM_TILE_M * GEMM_TILE_N * k_per_cta * sms / tile_flop_per_s);
    double memory = bytes_per_s > 0.0 ? bytes / bytes_per_s : 0.0;
    return fixed_s + (mma > memory ? mma : memory);
}
