package field

import (
	"errors"
	"fmt"
)

// Error is a refusal of input at a field path. The command maps it to exit 2.
type Error struct {
	Source string // what was read: "deployment.nix", "DEPLOYMENT", "plan.json", ...; may be empty
	Path   Path   // where in it; empty for the input as a whole
	Reason string // what is wrong, e.g. "unknown field"
}

func (e *Error) Error() string {
	s := e.Reason
	if e.Path != "" {
		s = string(e.Path) + ": " + s
	}
	if e.Source != "" {
		s = e.Source + ": " + s
	}
	return s
}

// Errorf is a refusal at path p; the source is set by whoever knows it (WithSource).
func Errorf(p Path, format string, args ...any) *Error {
	return &Error{Path: p, Reason: fmt.Sprintf(format, args...)}
}

// WithSource sets the source of a refusal that has none and returns err; any other error
// is returned unchanged. Call it before wrapping err in a formatted message.
func WithSource(err error, source string) error {
	var fe *Error
	if errors.As(err, &fe) && fe.Source == "" {
		fe.Source = source
	}
	return err
}

// IsRefusal reports whether err is (or wraps) a refusal of input: exit 2.
func IsRefusal(err error) bool {
	var fe *Error
	return errors.As(err, &fe)
}

// PathOf is the field path of a refusal, and false when err is not one.
func PathOf(err error) (Path, bool) {
	var fe *Error
	if errors.As(err, &fe) {
		return fe.Path, true
	}
	return "", false
}
