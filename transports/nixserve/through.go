package nixserve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/switchyard-nix/switchyard/transports/stream"
)

// ServeArgv is the node's side of a copy: Nix's serve protocol on its standard
// input and output, with the right to add paths.
var ServeArgv = []string{"nix-store", "--serve", "--write"}

// throughStore is the local store of CopyThrough; tests replace it.
var throughStore Store = LocalStore{}

// errServeEnded is what a copy's writes get once the remote command has ended.
var errServeEnded = errors.New("nix-store --serve on the node has ended")

// RunFunc runs argv on the node with the given streams and gives its exit status:
// a transport's way to run a command, whatever carries it (an SSH session, an
// Incus exec).
type RunFunc func(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error)

// CopyThrough makes paths valid on a node: it runs ServeArgv there through run and
// Copies over its streams, with the local Nix store as the source. wrap, when not
// nil, wraps what the copy writes to the node (tests pause or cut it there). The
// Stats are those of Copy; errors begin "copy: ", and an error of run itself (the
// node not reached or refused) is wrapped as it is.
func CopyThrough(ctx context.Context, run RunFunc, paths []string, wrap func(io.Writer) io.Writer) (Stats, error) {
	return CopyThroughWith(ctx, run, paths, wrap, Options{})
}

// CopyThroughWith is CopyThrough with opt. With opt.Substitute, a node whose
// substitution fails (its nix-store ends: Nix throws from the query when one of
// its caches cannot be reached) gets a second session without substitution, in
// which the deployer streams what is still missing: a cache that is down costs
// the node's attempt, never the copy. The Stats are then the second session's,
// with the paths its caches did give before the failure (valid by now) counted
// as substituted, the bytes of both sessions, and SubstituteFailed the node's words.
func CopyThroughWith(ctx context.Context, run RunFunc, paths []string, wrap func(io.Writer) io.Writer, opt Options) (Stats, error) {
	st, err := copyThrough(ctx, run, paths, wrap, opt)
	var se *SubstituteError
	if err == nil || !opt.Substitute || !errors.As(err, &se) || ctx.Err() != nil {
		return st, err
	}
	again, err := copyThrough(ctx, run, paths, wrap, Options{})
	again.Substitute = true
	again.SubstituteFailed = se.Err.Error()
	again.Substituted = max(0, st.Missing-again.Missing)
	again.Missing = st.Missing
	again.Bytes += st.Bytes
	return again, err
}

func copyThrough(ctx context.Context, run RunFunc, paths []string, wrap func(io.Writer) io.Writer, opt Options) (Stats, error) {
	if len(paths) == 0 {
		return Stats{}, nil
	}
	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	stderr := &stream.Tail{}
	type result struct {
		code int
		err  error
	}
	ran := make(chan result, 1)
	go func() {
		code, err := run(ctx, ServeArgv, stdinR, stdoutW, stderr)
		// The command has ended (or never started): its output ends, and what the
		// copy still writes to it fails.
		_ = stdoutW.CloseWithError(errServeEnded)
		_ = stdinR.CloseWithError(errServeEnded)
		ran <- result{code, err}
	}()

	var w io.Writer = stdinW
	if wrap != nil {
		w = wrap(w)
	}
	w = halfCloser{w, stdinW}
	// The greeting goes out before any local work: a node that cannot be
	// reached, or is refused, fails the copy before the closure is computed.
	st, copyErr := CopyWith(ctx, stdoutR, w, paths, throughStore, opt)
	// End of input: the node's nix-store ends, after the last command or, when
	// the copy broke off, in the middle of a path, which it then drops.
	_ = stdinW.Close()
	// Whatever the node still says goes nowhere, so the command can end.
	go func() { _, _ = io.Copy(io.Discard, stdoutR) }()
	res := <-ran

	switch {
	case res.err != nil:
		// Not run, or the connection failed: the transport's own error, which
		// says so (effects.ErrUnreachable, effects.ErrRefused, ctx.Err()).
		return st, fmt.Errorf("copy: %w", res.err)
	case res.code != 0:
		msg := fmt.Sprintf("nix-store --serve on the node exited %d", res.code)
		if last := nodeWords(stderr.String()); last != "" {
			msg += ": " + last
		}
		var se *SubstituteError
		if errors.As(copyErr, &se) {
			// The node's substitution failed: its words say why.
			return st, fmt.Errorf("copy: %w", &SubstituteError{errors.New(msg)})
		}
		if copyErr == nil || errors.Is(copyErr, errServeEnded) {
			// The node's side ended the copy: its words say why, and where its
			// answers stopped says which path it failed on.
			var ae *AddError
			if errors.As(copyErr, &ae) {
				return st, fmt.Errorf("copy: adding %s: %s (%d of %d missing paths added before it)", ae.Path, msg, ae.Added, ae.Missing)
			}
			return st, fmt.Errorf("copy: %s (%d of %d missing paths sent)", msg, st.Sent, st.Missing)
		}
		return st, fmt.Errorf("copy: %w (%s)", copyErr, msg)
	case copyErr != nil:
		return st, fmt.Errorf("copy: %w", copyErr)
	}
	return st, nil
}

// Last keeps what a transport's last copy did, for effects.CopyCounter. Its zero
// value is ready; it is safe for concurrent use.
type Last struct {
	mu sync.Mutex
	st Stats
}

// Set records a copy's Stats.
func (l *Last) Set(st Stats) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.st = st
}

// Get gives the last recorded Stats.
func (l *Last) Get() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st
}

// halfCloser is the node's input as Copy writes it: CloseWrite ends it once the
// last command is written.
type halfCloser struct {
	io.Writer
	c io.Closer
}

func (h halfCloser) CloseWrite() error { return h.c.Close() }

// nodeWords is what the node's nix-store said last, on one line: its last
// "error:" and the lines after it (Nix spreads one error over several, as in
// "hash mismatch importing path ...; specified: ...; got: ..."), or its last line.
func nodeWords(stderr string) string {
	lines := strings.Split(stderr, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(strings.TrimSpace(lines[i]), "error:") {
			words := strings.Join(strings.Fields(strings.Join(lines[i:], " ")), " ")
			if len(words) > 1024 {
				words = words[:1024] + "..."
			}
			return words
		}
	}
	return stream.LastLine(stderr)
}
