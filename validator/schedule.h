/* The pipeline schedule (validator/schedule.c): what one stage does, in
 * order, for one step.  Plain C, no CUDA: the training step runs it, and a
 * CPU test runs every stage's list against the others' to show that the
 * transfers match, nothing deadlocks and no activation slot is overwritten
 * while a micro-batch still needs it. */
#ifndef SEXTANT_SCHEDULE_H
#define SEXTANT_SCHEDULE_H

typedef enum { PIPE_FORWARD = 0, PIPE_BACKWARD, PIPE_EXCHANGE } pipe_kind;

typedef struct {
    pipe_kind kind;
    int microbatch, slot;     /* forward, backward: the micro-batch and the activation slot it lives in */
    /* exchange (one NCCL group): the stage's output of act_mb to the next stage, and/or the input of
     * recv_mb from the previous one into recv_slot; the input gradient of grad_send_mb to the previous
     * stage, and/or the output gradient of grad_recv_mb from the next (-1: none) */
    int act_send_mb, act_send_slot, act_recv_mb, act_recv_slot;
    int grad_send_mb, grad_recv_mb;
} pipe_action;

/* Activation slots a stage needs under 1F1B: min(pp - stage, m). */
int pipeline_slots(int pp, int stage, int microbatches);

/* The most actions a stage's list holds: 4 per micro-batch in the steady
 * state, 3 in warm-up and cool-down (at most pp - 1 each), and one receive. */
int pipeline_max_actions(int pp, int microbatches);

/* The 1F1B schedule (Narayanan et al. 2021; Megatron's non-interleaved
 * schedule) of `stage` of `pp` for `microbatches`: warm-up forwards, one
 * forward and one backward in turn, cool-down backwards, with the transfers
 * grouped as send_forward_recv_backward and send_backward_recv_forward so
 * that neighbours exchanging at once cannot wait on each other.  Writes at
 * most max actions; returns how many, or -1 when max is too small or an
 * argument is out of range. */
int pipeline_1f1b(int pp, int stage, int microbatches, pipe_action *out, int max);

#endif
