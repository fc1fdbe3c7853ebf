package leaseq

import (
	"errors"
	"testing"
	"time"
)

// The vectors every client checks (the fence format's definition).
var fenceVectors = []struct {
	key     string
	lead    int64
	attempt int
	expires int64
	fence   string
}{
	{"k-2026-a", 42, 3, 1796611200123, "1.42.3.1796611200123.-ukt_rUUIf6mjuGLPostt3_dMcVDUVxu0x7Bv1qbsLo"},
	{"k-2026-b", 42, 3, 1796611200123, "1.42.3.1796611200123.MsSP4KhXx7uAOYAgfFTDhA1YwONTxY4FHA2xowy7iUQ"},
	{"k-2026-a", 7, 1, 1796611260000, "1.7.1.1796611260000.JPhhvCbmsjdAufw1McrWEHBIoXOegoBkt9qo-qnMsHQ"},
}

func TestEachVectorVerifiesWithItsKeyAndNamesItsLease(t *testing.T) {
	for _, v := range fenceVectors {
		got, err := VerifyFence(v.fence, []string{v.key})
		if err != nil {
			t.Fatalf("%s: %v", v.fence, err)
		}
		want := Fence{LeadID: v.lead, Attempt: v.attempt, ExpiresAt: time.UnixMilli(v.expires).UTC()}
		if got != want {
			t.Errorf("%s: got %+v, want %+v", v.fence, got, want)
		}
	}
}

func TestAFenceSignedByTheSecondKeyVerifiesOnlyWhenThatKeyIsGiven(t *testing.T) {
	fence := fenceVectors[1].fence
	if _, err := VerifyFence(fence, []string{"k-2026-a", "k-2026-b"}); err != nil {
		t.Fatalf("with both keys: %v", err)
	}
	if _, err := VerifyFence(fence, []string{"k-2026-a"}); !errors.Is(err, ErrInvalidFence) {
		t.Fatalf("with the other key alone: %v, want ErrInvalidFence", err)
	}
	if _, err := VerifyFence(fence, nil); !errors.Is(err, ErrInvalidFence) {
		t.Fatalf("with no key: %v, want ErrInvalidFence", err)
	}
}

func TestAnAlteredOrMalformedFenceIsRefused(t *testing.T) {
	keys := []string{"k-2026-a", "k-2026-b"}
	for _, fence := range []string{
		"1.42.4.1796611200123.-ukt_rUUIf6mjuGLPostt3_dMcVDUVxu0x7Bv1qbsLo",  // attempt 4, the original signature
		"1.43.3.1796611200123.-ukt_rUUIf6mjuGLPostt3_dMcVDUVxu0x7Bv1qbsLo",  // another lead
		"1.42.3.1796611200124.-ukt_rUUIf6mjuGLPostt3_dMcVDUVxu0x7Bv1qbsLo",  // a later expiry
		"2.42.3.1796611200123.-ukt_rUUIf6mjuGLPostt3_dMcVDUVxu0x7Bv1qbsLo",  // another version
		"1.42.3.1796611200123.-ukt_rUUIf6mjuGLPostt3_dMcVDUVxu0x7Bv1qbsLo=", // padded
		"1.42.3.1796611200123.-ukt_rUUIf6mjuGLPostt3_dMcVDUVxu0x7Bv1qbs",    // short
		"1.42.3.1796611200123.+ukt/rUUIf6mjuGLPostt3/dMcVDUVxu0x7Bv1qbsLo",  // not URL-safe
		"1.+42.3.1796611200123.-ukt_rUUIf6mjuGLPostt3_dMcVDUVxu0x7Bv1qbsLo", // a sign
		"1.42.3.1796611200123", // no signature
		"1.42.3.1796611200123.-ukt_rUUIf6mjuGLPostt3_dMcVDUVxu0x7Bv1qbsLo.x", // six parts
		"",
	} {
		if _, err := VerifyFence(fence, keys); !errors.Is(err, ErrInvalidFence) {
			t.Errorf("%q: %v, want ErrInvalidFence", fence, err)
		}
	}
}
