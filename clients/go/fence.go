package leaseq

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrInvalidFence is a fence that does not verify: malformed, of an unknown
// version, or signed by none of the keys given. VerifyFence's errors are it
// (errors.Is), with the reason.
var ErrInvalidFence = errors.New("leaseq: invalid fence")

// FenceVersion is the only fence format VerifyFence reads.
const FenceVersion = "1"

// Fence is what a fence names: the lead, its attempt, and the lease's expiry
// when the fence was made (a renewal's answer carries a new fence).
type Fence struct {
	LeadID    int64
	Attempt   int
	ExpiresAt time.Time
}

// VerifyFence checks a fence offline against the service's keys
// (LEASEQ_FENCE_KEYS: any of them may have signed it) and returns what it
// names. A fence whose lease has expired still verifies: comparing ExpiresAt
// with a clock is the caller's choice (PostgreSQL's leaseq_fence_current(fence)
// says whether it is the lead's current lease by the database's clock).
//
// The format: "1.<lead>.<attempt>.<expires_at_unix_ms>.<sig>", where sig is
// the unpadded base64url HMAC-SHA256, keyed by a key's UTF-8 bytes, of the
// text before its last dot.
func VerifyFence(fence string, keys []string) (Fence, error) {
	parts := strings.Split(fence, ".")
	if len(parts) != 5 {
		return Fence{}, fenceError("not five dot-separated parts")
	}
	if parts[0] != FenceVersion {
		return Fence{}, fenceError("version %q is not %s", parts[0], FenceVersion)
	}
	lead, okLead := decimal(parts[1])
	attempt, okAttempt := decimal(parts[2])
	expires, okExpires := decimal(parts[3])
	if !okLead || !okAttempt || !okExpires || lead < 1 || attempt < 1 || attempt > 1<<31-1 {
		return Fence{}, fenceError("the lead, attempt and expiry are not decimal integers")
	}
	sig, err := base64.RawURLEncoding.Strict().DecodeString(parts[4])
	if err != nil || len(sig) != sha256.Size {
		return Fence{}, fenceError("the signature is not %d bytes of unpadded base64url", sha256.Size)
	}
	body := []byte(fence[:strings.LastIndexByte(fence, '.')])
	matched := false
	for _, key := range keys {
		mac := hmac.New(sha256.New, []byte(key))
		mac.Write(body)
		// Every key is compared, each in constant time: the time taken says nothing of which.
		if hmac.Equal(mac.Sum(nil), sig) {
			matched = true
		}
	}
	if !matched {
		return Fence{}, fenceError("no key given signed it")
	}
	return Fence{LeadID: lead, Attempt: int(attempt), ExpiresAt: time.UnixMilli(expires).UTC()}, nil
}

// decimal reads a non-negative ASCII decimal integer (no sign, no space).
func decimal(text string) (int64, bool) {
	if text == "" || len(text) > 18 || strings.TrimLeft(text, "0123456789") != "" {
		return 0, false
	}
	value, err := strconv.ParseInt(text, 10, 64)
	return value, err == nil
}

func fenceError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidFence, fmt.Sprintf(format, args...))
}
