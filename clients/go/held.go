package leaseq

import "time"

// A lease in flight in a worker, and its time, on the worker's own monotonic
// clock: from the instants the worker sent its requests and the ttl the
// service granted. The service's expires_at (its database's clock) is never
// compared with it.
//
//   - a lease (or renewal) sent at S with ttl T is surely valid until S + T:
//     the service started it after S (validUntil);
//   - the handler's ctx is cancelled at stopAt = validUntil − (kill grace +
//     margin), so the handler has its kill grace to return and a margin is
//     left before the lease can have ended;
//   - renewals follow a fixed schedule: a third of the ttl after the send of
//     the last confirmed one (renewAt), however long its answer took; after
//     a failure, again after a short backoff;
//   - a lease whose answer came after its first renewal was due (a long poll
//     that waited, a slow service) may be older than its send time tells: it
//     is renewed at once, and nothing runs before that renewal is confirmed;
//     unconfirmed once surely over (received + ttl), it is lost.
//
// Every field is guarded by its worker's mu.
type held struct {
	lease     *Lease
	job       *Job
	ttl       time.Duration
	killGrace time.Duration

	validUntil    time.Time
	received      time.Time // when the lease's answer came
	started       time.Time // when the handler started (zero: not yet)
	renewAt       time.Time
	renewFailures int
	confirmed     bool

	reason    StopReason // why the handler must stop; "" while it may run
	settling  bool       // the handler is over; complete or release is being sent
	abandoned bool       // the handler did not return when told: left to its lease's expiry
	gone      bool       // no longer held
	queued    bool       // waiting for a handler slot
	slot      bool       // given a handler slot
	fence     string     // the lease's latest fence

	checkpoint        []byte // the latest set (or the lead's own), nil: none
	checkpointVersion int    // of the latest set here; 0: none set
	checkpointSent    int    // the newest version a confirmed renewal carried

	cancel func()        // cancels the handler's ctx, once it runs
	wake   chan struct{} // wakes the lead's goroutine: interrupted, confirmed, renewed
}

const (
	defaultKillGrace = 2 * time.Second
	maxMargin        = time.Second
	renewRetryFirst  = 100 * time.Millisecond
	renewRetryMax    = 2 * time.Second
	minCallTimeout   = 50 * time.Millisecond
)

// margin is what the stop must finish ahead of the lease's end by: a late
// timer, the handler's last write (a tenth of the ttl, at most 1 s).
func margin(ttl time.Duration) time.Duration {
	if ttl/10 < maxMargin {
		return ttl / 10
	}
	return maxMargin
}

// killGraceFor is the kill grace for a lease of ttl: asked (negative: the
// default, 2 s or a tenth of a short ttl), never more than leaves half the
// ttl before the stop, so renewals (every third of it) have time to come
// back and be retried.
func killGraceFor(ttl, asked time.Duration) time.Duration {
	room := ttl/2 - margin(ttl)
	if room < 0 {
		room = 0
	}
	wanted := asked
	if wanted < 0 {
		wanted = defaultKillGrace
		if ttl/10 < wanted {
			wanted = ttl / 10
		}
	}
	if wanted > room {
		return room
	}
	return wanted
}

// renewBackoff is the wait before a failed renewal is tried again: 0.1 s
// doubling, at most a twentieth of the ttl (and 2 s).
func renewBackoff(failures int, ttl time.Duration) time.Duration {
	limit := ttl / 20
	if limit > renewRetryMax {
		limit = renewRetryMax
	}
	if limit < renewRetryFirst {
		limit = renewRetryFirst
	}
	wait := renewRetryFirst
	for i := 1; i < failures && wait < limit; i++ {
		wait *= 2
	}
	if wait > limit {
		return limit
	}
	return wait
}

// newHeld is a lease asked for at sent, granted ttl, its answer received at received.
func newHeld(lease *Lease, sent, received time.Time, ttl, killGrace time.Duration) *held {
	h := &held{
		lease:      lease,
		ttl:        ttl,
		killGrace:  killGraceFor(ttl, killGrace),
		validUntil: sent.Add(ttl),
		received:   received,
		renewAt:    sent.Add(ttl / 3),
		fence:      lease.Fence,
		checkpoint: lease.Lead.Checkpoint,
		wake:       make(chan struct{}, 1),
	}
	h.confirmed = received.Before(h.renewAt) // fresh: its first renewal is still ahead
	return h
}

// stopAt is when the handler must be told to stop, unless a renewal is confirmed before.
func (h *held) stopAt() time.Time { return h.validUntil.Add(-h.killGrace - margin(h.ttl)) }

// unconfirmedUntil: an unconfirmed lease has surely ended by then.
func (h *held) unconfirmedUntil() time.Time { return h.received.Add(h.ttl) }

// neededBy is until when a renewal's answer is of use: the stop; settling,
// the lease's end; unconfirmed, until it has surely ended.
func (h *held) neededBy() time.Time {
	switch {
	case !h.confirmed:
		return h.unconfirmedUntil()
	case h.settling:
		return h.validUntil
	default:
		return h.stopAt()
	}
}

// deadline is when the handler (or its wait for a slot) must stop at the latest.
func (h *held) deadline(maxRuntime time.Duration) time.Time {
	if !h.confirmed {
		return h.unconfirmedUntil()
	}
	stop := h.stopAt()
	if maxRuntime > 0 && !h.started.IsZero() && h.started.Add(maxRuntime).Before(stop) {
		return h.started.Add(maxRuntime)
	}
	return stop
}

// due is why the handler must stop at now ("": it may run on).
func (h *held) due(now time.Time, maxRuntime time.Duration) StopReason {
	if !h.confirmed {
		if !now.Before(h.unconfirmedUntil()) {
			return StopExpired
		}
		return ""
	}
	if !now.Before(h.stopAt()) {
		return StopExpired
	}
	if maxRuntime > 0 && !h.started.IsZero() && !now.Before(h.started.Add(maxRuntime)) {
		return StopMaxRuntime
	}
	return ""
}

// interrupt stops the handler (cancels its ctx); losing the lease overrides an earlier reason.
func (h *held) interrupt(reason StopReason) {
	if h.reason == "" || reason.leaseGone() {
		h.reason = reason
	}
	if h.cancel != nil {
		h.cancel()
	}
	h.signal()
}

// renewed: a renewal sent at sent was confirmed, granting ttl (valid from then, never less).
func (h *held) renewed(sent time.Time, ttl time.Duration) {
	h.ttl = ttl
	if until := sent.Add(ttl); until.After(h.validUntil) {
		h.validUntil = until
	}
	if at := sent.Add(ttl / 3); at.After(h.renewAt) {
		h.renewAt = at
	}
	h.renewFailures = 0
	h.confirmed = true
	h.signal()
}

// renewFailed: a renewal was not confirmed; try again soon, or after the
// answer's Retry-After when the lease leaves time for it (at most half of
// what is left before it is needed, so more than one try still fits).
func (h *held) renewFailed(now time.Time, retryAfter time.Duration) {
	h.renewFailures++
	wait := renewBackoff(h.renewFailures, h.ttl)
	if half := h.neededBy().Sub(now) / 2; retryAfter > wait {
		wait = retryAfter
		if wait > half {
			wait = half
		}
		if wait < renewRetryFirst {
			wait = renewRetryFirst
		}
	}
	h.renewAt = now.Add(wait)
}

// unsentCheckpoint is the latest checkpoint set here that no confirmed
// renewal carried, with its version; nil when none.
func (h *held) unsentCheckpoint() ([]byte, int) {
	if h.checkpointVersion == h.checkpointSent {
		return nil, 0
	}
	return h.checkpoint, h.checkpointVersion
}

func (h *held) signal() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}
