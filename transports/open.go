package transports

import (
	"errors"
	"fmt"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/transports/incus"
	"github.com/switchyard-nix/switchyard/transports/shell"
	"github.com/switchyard-nix/switchyard/transports/ssh"
)

// Kind names a transport.
type Kind string

// The transports.
const (
	SSH   Kind = "ssh"
	Incus Kind = "incus"
	Shell Kind = "shell"
)

// Spec is everything needed to build one transport: its kind and that kind's
// settings (the other kinds' are ignored).
type Spec struct {
	Kind  Kind
	SSH   ssh.Config
	Incus incus.Config
	Shell shell.Config
}

// ErrUnknownKind is Open's error for a Spec whose Kind is none of the transports'.
var ErrUnknownKind = errors.New("unknown transport: want ssh, incus or shell")

// Open builds the transport spec names. It does not touch the node: the ssh and
// incus transports connect on their first Run; the shell transport checks its
// prologue file locally.
func Open(spec Spec) (effects.Transport, error) {
	var (
		t   effects.Transport
		err error
	)
	// Each case keeps a failed New's nil out of the interface (a nil *ssh.Transport
	// would be a non-nil effects.Transport).
	switch spec.Kind {
	case SSH:
		var s *ssh.Transport
		if s, err = ssh.New(spec.SSH); err == nil {
			t = s
		}
	case Incus:
		var i *incus.Transport
		if i, err = incus.New(spec.Incus); err == nil {
			t = i
		}
	case Shell:
		var h *shell.Transport
		if h, err = shell.New(spec.Shell); err == nil {
			t = h
		}
	default:
		err = fmt.Errorf("%w (got %q)", ErrUnknownKind, spec.Kind)
	}
	return t, err
}

// ParseTarget is the Spec of kind for a target as `switchyard deploy --target` takes
// it (ssh: [user@]host[:port]; incus: [remote:]instance; shell: none), and the node's
// default name (the host, the instance, or "node"). A kind that is none of the
// transports' is ErrUnknownKind.
func ParseTarget(kind Kind, target string) (spec Spec, name string, err error) {
	spec.Kind = kind
	switch kind {
	case SSH:
		spec.SSH.User, spec.SSH.Host, spec.SSH.Port, err = ssh.ParseTarget(target)
		return spec, spec.SSH.Host, err
	case Incus:
		spec.Incus.Remote, spec.Incus.Instance, err = incus.ParseTarget(target)
		return spec, spec.Incus.Instance, err
	case Shell:
		return spec, "node", nil
	}
	return spec, "", fmt.Errorf("%w (got %q)", ErrUnknownKind, kind)
}
