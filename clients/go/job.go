package leaseq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Handler runs one lead. It returns the lead's result (any value
// encoding/json takes; CachedResult to finish the lead as cached), or an
// error to fail the attempt: the worker releases the lead for a retry while
// attempts remain, and completes it as failed on its last.
//
// ctx is cancelled when the handler must stop: its lease is lost or may end
// before a renewal is confirmed, its maximum runtime is over, or the worker
// is shutting down (Job.StopReason says which). It then has Job.KillGrace
// to return; a handler that does not is abandoned (nothing is sent for its
// lead, whose lease is left to expire) and may run on beside the lead's
// next holder: honour ctx.
type Handler func(ctx context.Context, job *Job) (any, error)

// CachedResult, returned by a handler, finishes the lead as cached ("the
// result came from elsewhere") with Value as its result.
type CachedResult struct {
	Value any
}

// ErrHandlerUnusable, wrapped in a handler's error, says the handler can run
// no lead at all (its program is missing, say): the worker gives the lead
// back and stops, rather than burn one lead after another on the same
// failure. Run returns that error.
var ErrHandlerUnusable = errors.New("leaseq: the handler cannot run")

// ThrottleError, returned by a handler, says "the upstream is throttling
// us": the lead goes back without using up an attempt, and its whole
// session pauses for RetryAfter (held to 1 s to 1 h), for every worker.
type ThrottleError struct {
	RetryAfter time.Duration
}

func (e *ThrottleError) Error() string {
	return fmt.Sprintf("throttled: pause the session for %v", e.RetryAfter)
}

// Throttle is the error a handler returns to throttle its session for d.
func Throttle(d time.Duration) error { return &ThrottleError{RetryAfter: d} }

// StopReason says why a handler's ctx was cancelled.
type StopReason string

// The reasons a handler is stopped. The first two mean the lease may be
// someone else's: nothing is sent for the lead.
const (
	StopLost       StopReason = "lease lost"
	StopExpired    StopReason = "lease not renewed in time"
	StopMaxRuntime StopReason = "max runtime exceeded"
	StopShutdown   StopReason = "worker shutting down"
)

// leaseGone: the lease may be someone else's now; the worker sends nothing for it.
func (r StopReason) leaseGone() bool { return r == StopLost || r == StopExpired }

// Job is what a handler gets: its lead and lease, and a way to say where it
// got to (Checkpoint). Safe for concurrent use.
type Job struct {
	lease *Lease
	h     *held
	w     *Worker
}

// Lead is the lead leased (as the lease found it).
func (j *Job) Lead() *Lead { return j.lease.Lead }

// ID is the lead's id.
func (j *Job) ID() int64 { return j.lease.Lead.ID }

// Session is the lead's session.
func (j *Job) Session() string { return j.lease.Lead.SessionID }

// Payload is the lead's payload (a JSON object).
func (j *Job) Payload() json.RawMessage { return j.lease.Lead.Payload }

// Attempt is the lease's attempt: a fencing number that only grows for the lead.
func (j *Job) Attempt() int { return j.lease.Attempt }

// Owner is the worker's name the lead is leased under.
func (j *Job) Owner() string { return j.lease.Owner }

// Fence is the lease's latest fence (a renewal brings a new one), for the
// writers downstream to check (VerifyFence).
func (j *Job) Fence() string {
	j.w.mu.Lock()
	defer j.w.mu.Unlock()
	return j.h.fence
}

// KillGrace is how long the handler has to return once its ctx is cancelled.
func (j *Job) KillGrace() time.Duration { return j.h.killGrace }

// StopReason says why ctx was cancelled; "" while the handler may run.
func (j *Job) StopReason() StopReason {
	j.w.mu.Lock()
	defer j.w.mu.Unlock()
	return j.h.reason
}

// Checkpoint says where the work got to (any JSON value but null): the next
// renewal of the lease carries it to the service, which stores it on the
// lead, so a holder after a lost lease resumes from Lead().Checkpoint. Before
// the worker gives the lead back, one more renewal carries a checkpoint no
// renewal carried yet.
func (j *Job) Checkpoint(value any) error {
	raw, err := jsonValue(value, "the checkpoint")
	if err != nil {
		return err
	}
	if raw == nil {
		return invalid("a checkpoint cannot be null")
	}
	j.w.mu.Lock()
	defer j.w.mu.Unlock()
	j.h.checkpoint = raw
	j.h.checkpointVersion++
	return nil
}

// SavedCheckpoint is where to resume from: the last checkpoint set here, else
// the lead's (nil: none).
func (j *Job) SavedCheckpoint() json.RawMessage {
	j.w.mu.Lock()
	defer j.w.mu.Unlock()
	return j.h.checkpoint
}
