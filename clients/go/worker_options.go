package leaseq

import (
	"log"
	"time"
)

// The options of a Worker, each checked when the worker is made.

// WorkerOption configures a Worker.
type WorkerOption func(*Worker) error

// Defaults of a Worker.
const (
	DefaultWait  = 2 * time.Second  // the long poll of a lease
	DefaultGrace = 10 * time.Second // handlers' time to finish at a shutdown
)

// WithConcurrency runs up to n handlers at once (default 1).
func WithConcurrency(n int) WorkerOption {
	return func(w *Worker) error {
		if n < 1 {
			return invalid("concurrency is at least 1, not %d", n)
		}
		w.concurrency = n
		return nil
	}
}

// WithPrefetch holds up to n leads beyond those running, so the next lead is
// there when a handler ends (default: 1, and a quarter of the concurrency
// above 4; 0: none).
func WithPrefetch(n int) WorkerOption {
	return func(w *Worker) error {
		if n < 0 {
			return invalid("prefetch is not negative, not %d", n)
		}
		w.prefetch = n
		return nil
	}
}

// WithOwner leases under this name (default: hostname-pid).
func WithOwner(owner string) WorkerOption {
	return func(w *Worker) error {
		if owner == "" {
			return invalid("an owner's name is not empty")
		}
		w.owner = owner
		return nil
	}
}

// WithSessions leases from whichever of these sessions is furthest below
// its fair share, instead of NewWorker's session.
func WithSessions(sessions ...string) WorkerOption {
	return func(w *Worker) error {
		if len(sessions) == 0 {
			return invalid("name at least one session")
		}
		for _, s := range sessions {
			if _, err := sessionPath(s, ""); err != nil {
				return err
			}
		}
		w.sessions = leaseScope{sessions: append([]string(nil), sessions...)}
		return nil
	}
}

// WithWait holds each lease request up to d until work arrives (DefaultWait;
// 0 to 30 s).
func WithWait(d time.Duration) WorkerOption {
	return func(w *Worker) error {
		if d < 0 || d > maxWait {
			return invalid("a lease's wait is from 0 to 30s, not %v", d)
		}
		w.wait = d
		return nil
	}
}

// WithMaxRuntime cancels a handler that runs longer than d; the attempt then
// fails as an error would (0: none).
func WithMaxRuntime(d time.Duration) WorkerOption {
	return func(w *Worker) error {
		if d < 0 {
			return invalid("a maximum runtime is positive, not %v", d)
		}
		w.maxRuntime = d
		return nil
	}
}

// WithGrace gives running handlers d to finish once Run's ctx ends, before
// they are cancelled and their leads released (DefaultGrace).
func WithGrace(d time.Duration) WorkerOption {
	return func(w *Worker) error {
		if d < 0 {
			return invalid("a grace is not negative, not %v", d)
		}
		w.grace = d
		return nil
	}
}

// WithKillGrace gives a handler d to return once its ctx is cancelled
// (default 2 s, a tenth of a short ttl; at most what leaves half the ttl
// for renewals).
func WithKillGrace(d time.Duration) WorkerOption {
	return func(w *Worker) error {
		if d < 0 {
			return invalid("a kill grace is not negative, not %v", d)
		}
		if w.q.TTL() == DefaultLeaseTTL { // the worker's own ttl: made long enough for d
			if need := 2*d + 2*time.Second; need > w.ttl {
				w.ttl = need
				if w.ttl > maxTTL {
					w.ttl = maxTTL
				}
			}
		}
		if ttl := w.ttl; killGraceFor(ttl, d) < d {
			return invalid("a kill grace of %v is too long for a ttl of %v: at most %v (the stop must leave half the ttl for renewals)", d, ttl, killGraceFor(ttl, ttl))
		}
		w.killGrace = d
		return nil
	}
}

// WithRetryDelay sets the delay before a failed attempt n (1, 2, ...) is
// retried (default: 1 s doubling, at most 300 s, jittered).
func WithRetryDelay(delay func(attempt int) time.Duration) WorkerOption {
	return func(w *Worker) error {
		if delay == nil {
			return invalid("the retry delay is nil")
		}
		w.retryDelay = delay
		return nil
	}
}

// WithStopWhenEmpty makes Run return once a lease finds nothing to do after
// its whole wait and nothing is in flight (by default Run works until its
// ctx ends).
func WithStopWhenEmpty() WorkerOption {
	return func(w *Worker) error {
		w.untilEmpty = true
		return nil
	}
}

// WithGiveUpAfter makes Run return an error that is ErrUnavailable once the
// service has been out of reach for d (default: never; it keeps trying).
func WithGiveUpAfter(d time.Duration) WorkerOption {
	return func(w *Worker) error {
		if d <= 0 {
			return invalid("give up after a positive time, not %v", d)
		}
		w.giveUpAfter = d
		return nil
	}
}

// WithLogger logs what the worker does (nil: nothing; default: the standard error).
func WithLogger(logger *log.Logger) WorkerOption {
	return func(w *Worker) error {
		w.logger = logger
		return nil
	}
}

// DefaultRetryDelay is the wait before failed attempt n is retried: 1 s·2ⁿ⁻¹,
// at most 300 s, less up to a quarter at random.
func DefaultRetryDelay(attempt int) time.Duration {
	delay := 300 * time.Second
	if attempt < 10 {
		if d := time.Second << (attempt - 1); attempt >= 1 && d < delay {
			delay = d
		} else if attempt < 1 {
			delay = time.Second
		}
	}
	return delay - random(delay/4)
}
