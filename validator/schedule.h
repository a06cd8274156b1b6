/* The pipeline schedule (validator/schedule.c): what one stage does, in
 * order, for one step.  Plain C, no CUDA: the training step runs it, and a
 * CPU test runs every stage's list against the others' to show that the
 * transfers match, nothing deadlocks and no activation slot or gradient
 * buffer is overwritten while a micro-batch still needs it. */
#ifndef SEXTANT_SCHEDULE_H
#define SEXTANT_SCHEDULE_H

typedef enum { PIPE_FORWARD = 0, PIPE_BACKWARD, PIPE_EXCHANGE } pipe_kind;

#define PIPE_MAX_CHUNKS 16

typedef struct {
    pipe_kind kind;
    /* forward, backward: the micro-batch, the model chunk (0 without interleaving), the
     * activation slot it lives in and the buffer holding the chunk's input (1F1B: the slot's own
     * first residual, the same index; interleaved: an index into a pool of inputs, so that an
     * input received early holds one tensor, not a slot).  Interleaved, the slots are one pool for
     * all chunks, and the last virtual stage's head (final norm, logits) has a pool of its own:
     * head is its index there, -1 elsewhere. */
    int microbatch, chunk, slot, input, head;
    int grad_buf;             /* backward: the buffer its output gradient arrived in; -1: in place (or none) */
    /* exchange (one NCCL group): a chunk's output of act_send_mb to the next stage; the input of
     * act_recv_mb from the previous stage into input act_recv_slot, for act_recv_chunk; the input gradient
     * of grad_send_mb to the previous stage; the output gradient of grad_recv_mb from the next stage
     * into grad_recv_buf (-1: in place).  -1 micro-batch: that part is absent.  With interleaving
     * the stages form a ring: the last stage's chunk c feeds the first stage's chunk c + 1. */
    int act_send_mb, act_send_chunk, act_send_slot;
    int act_recv_mb, act_recv_chunk, act_recv_slot;
    int grad_send_mb, grad_send_chunk;
    int grad_recv_mb, grad_recv_chunk, grad_recv_buf;
} pipe_action;

/* What a stage must allocate to run its list. */
typedef struct {
    int slots;                   /* activation slots (interleaved: each one chunk's layers) */
    int inputs;                  /* input buffers (interleaved only; 1F1B's live in the slots) */
    int heads;                   /* the head's activations (interleaved only; 1F1B's live in the slots) */
    int grad_buffers;            /* receive buffers for output gradients (interleaved only) */
} pipe_buffers;

/* Activation slots a stage needs under 1F1B: min(pp - stage, m). */
int pipeline_slots(int pp, int stage, int microbatches);

/* The most actions a stage's list holds (vpp 1: 1F1B). */
int pipeline_max_actions(int pp, int microbatches, int vpp);

/* The 1F1B schedule (Narayanan et al. 2021; Megatron's non-interleaved
 * schedule) of `stage` of `pp` for `microbatches`: warm-up forwards, one
 * forward and one backward in turn, cool-down backwards, with the transfers
 * grouped as send_forward_recv_backward and send_backward_recv_forward so
 * that neighbours exchanging at once cannot wait on each other.  Writes at
 * most max actions; returns how many, or -1 when max is too small or an
 * argument is out of range. */
int pipeline_1f1b(int pp, int stage, int microbatches, pipe_action *out, int max);

/* Interleaved 1F1B (Narayanan et al. 2021, section 2.2; Megatron's
 * interleaved schedule): each stage holds vpp model chunks, chunk c of stage
 * s being virtual stage c pp + s.  The order of forwards and backwards is
 * Megatron's (warm-up of 2 (pp - stage - 1) + (vpp - 1) pp virtual
 * micro-batches, micro-batches taken pp at a time per chunk); the transfers
 * are placed by playing every stage at once in unit steps, a computation as
 * early as its inputs allow, and each transfer is one group on both sides in
 * the step its sender computed it, so both sides wait on the same group.
 * microbatches must be a multiple of pp.  need (may be NULL) gets the slots
 * and gradient buffers the list uses.  Returns the action count or -1. */
int pipeline_interleaved(int pp, int stage, int microbatches, int vpp, pipe_action *out, int max, pipe_buffers *need);

/* Running a list with the transfers on a stream of their own (the training
 * step does it for interleaved lists): what each action must wait for.  An
 * exchange waits for the computation before it in the list (what it sends is
 * written, and the buffers it receives into are no longer read); a
 * computation waits for the groups that brought its input or its output
 * gradient, and, before it writes a slot or the backward's gradient buffer,
 * for the group still sending from it.  The backward's gradient buffer and
 * the received-gradient buffers swap (a backward takes the buffer its
 * gradient arrived in), so the buffers are followed by identity: physical
 * buffer 0 starts as the backward's, 1 + b as received-gradient buffer b. */
typedef struct {
    int compute;     /* exchange: the computation it waits for, -1: none */
    int groups[3];   /* computation: the exchanges it waits for, -1: none */
} pipe_wait;

/* Fills waits[0..n) for a list of n actions using grad_buffers received-
 * gradient buffers; returns the last exchange's index (the step is over when
 * it is), -1 when there is none, or -2 on a list this cannot follow. */
int pipeline_async_waits(const pipe_action *actions, int n, int grad_buffers, pipe_wait *waits);

/* Either: 1F1B for vpp 1 (need: min(pp - stage, m) slots, nothing else),
 * else interleaved. */
int pipeline_schedule(int pp, int stage, int microbatches, int vpp, pipe_action *out, int max, pipe_buffers *need);

#endif
