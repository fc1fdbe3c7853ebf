package leaseq

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// The errors a call may return, compared with errors.Is: every answer of the
// service that is not a success is an *Error, and an *Error is each of these
// whose code it carries.
var (
	// ErrLeaseLost means the lease was no longer valid (expired, swept,
	// re-leased, completed, cancelled, or its maximum runtime ended) when
	// the call reached the service: nothing was changed. Stop, do not retry.
	ErrLeaseLost = errors.New("leaseq: lease lost")
	// ErrNotFound: no such lead (or one of a session the token may not read).
	ErrNotFound = errors.New("leaseq: not found")
	// ErrValidation: the input was refused; nothing was written.
	ErrValidation = errors.New("leaseq: invalid input")
	// ErrConflict: the lead is not in a status that allows the operation.
	ErrConflict = errors.New("leaseq: conflict")
	// ErrUnauthorized: the service wants a valid bearer token (WithToken).
	ErrUnauthorized = errors.New("leaseq: unauthorized")
	// ErrForbidden: the token may not do this, or not in this session.
	ErrForbidden = errors.New("leaseq: forbidden")
	// ErrPayloadTooLarge: the request body is larger than the service takes.
	ErrPayloadTooLarge = errors.New("leaseq: payload too large")
	// ErrUnsupportedMediaType: the body was not sent as application/json.
	ErrUnsupportedMediaType = errors.New("leaseq: unsupported media type")
	// ErrQuotaExceeded: a push would pass the session's max_queued; none
	// of its leads was stored. Error.RetryAfter says when to try again.
	ErrQuotaExceeded = errors.New("leaseq: quota exceeded")
	// ErrUnavailable: the service (or its database) could not be reached,
	// after the client's retries.
	ErrUnavailable = errors.New("leaseq: unavailable")
)

// The problem codes of the contract, each with its sentinel error.
var sentinels = map[string]error{
	"lease_lost":             ErrLeaseLost,
	"not_found":              ErrNotFound,
	"validation_error":       ErrValidation,
	"conflict":               ErrConflict,
	"unauthorized":           ErrUnauthorized,
	"forbidden":              ErrForbidden,
	"payload_too_large":      ErrPayloadTooLarge,
	"unsupported_media_type": ErrUnsupportedMediaType,
	"quota_exceeded":         ErrQuotaExceeded,
	"unavailable":            ErrUnavailable,
}

// The code of an answer that carries none of its own, by its status.
var codeByStatus = map[int]string{
	401: "unauthorized",
	403: "forbidden",
	404: "not_found",
	409: "conflict",
	413: "payload_too_large",
	415: "unsupported_media_type",
	422: "validation_error",
	429: "quota_exceeded",
	502: "unavailable",
	503: "unavailable",
	504: "unavailable",
}

// Error is a call that did not succeed: the service's problem+json answer
// (RFC 9457), or a call that got no answer after the client's retries
// (Status 0, Code "unavailable", Err the transport's error), or input the
// client refused before sending anything (Status 0, Code "validation_error").
type Error struct {
	Status     int           // the HTTP status; 0 when no answer was received
	Code       string        // the stable code: lease_lost, not_found, validation_error, ...
	Title      string        // the problem's title
	Detail     string        // what went wrong, for a person
	Reason     string        // with lease_lost, when known: "max_runtime"
	RetryAfter time.Duration // the answer's Retry-After (503, 429); 0 when none
	Fields     []FieldError  // with validation_error: each fault's location and message
	Err        error         // the transport's error, when no answer came
}

// FieldError is one fault of a validation_error: where it is and what is wrong.
type FieldError struct {
	Loc []any  `json:"loc"`
	Msg string `json:"msg"`
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("leaseq: ")
	if e.Status != 0 {
		fmt.Fprintf(&b, "%d ", e.Status)
	}
	b.WriteString(e.Code)
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	return b.String()
}

// Is reports whether target is the sentinel error of e's code (ErrLeaseLost for
// lease_lost, ...), so that errors.Is(err, leaseq.ErrLeaseLost) holds.
func (e *Error) Is(target error) bool {
	sentinel, ok := sentinels[e.Code]
	return ok && sentinel == target
}

// Unwrap is the transport's error of a call that got no answer.
func (e *Error) Unwrap() error { return e.Err }

// invalid is input the client refuses before anything is sent.
func invalid(format string, args ...any) *Error {
	return &Error{Code: "validation_error", Title: "Invalid input", Detail: fmt.Sprintf(format, args...)}
}
