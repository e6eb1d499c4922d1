// Package nixserve copies store paths to a node over Nix's `nix-store --serve --write` protocol.
//
// The client speaks the legacy serve protocol (src/libstore/serve-protocol.hh of
// Nix, the server being nix-store.cc's opServe) over any byte stream, so it does
// not care how the node's `nix-store --serve --write` is reached: an SSH session,
// an Incus exec stream, a local pipe. A copy is one query of which paths of the
// closure the node already holds (cmdQueryValidPaths), then the missing paths in
// dependency order: one cmdAddToStoreNar per path, written one after the other
// without waiting for the node's answers, which a reader collects meanwhile (a
// node of protocol 2.5 or later: Nix 2.4 on); an older node gets them all in one
// cmdImportPaths in the export format of `nix-store --export`. The node adds each
// path to its store as soon as the path has arrived, so a copy cut short leaves
// every path sent before the cut valid on the node, and the next copy sends only
// what is still missing.
package nixserve

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
)

// Stats describes one copy.
type Stats struct {
	Paths   int // store paths in the closure of the paths asked for
	Missing int // of those, the paths the node did not hold
	Sent    int // paths sent to the node in full, each in its entirety
	// Streamed is how many of them went out as they were read, their path named by
	// their length before the export's trailer came (NARInfo.HasTrailer).
	Streamed int
	// Dumped is how many of them went out read from the store's dump, before the
	// export (long paths whose references the node held: dumpMin).
	Dumped int
	Bytes  int64 // bytes written to the node, protocol included
	// Substituted is how many of the missing paths the node fetched from its own
	// binary caches (Options.Substitute) instead of being sent them.
	Substituted int
	// Substitute tells that the node was asked to substitute; SubstituteFailed is
	// then, when not empty, why its caches gave nothing (the node's words): the
	// copy went on without them.
	Substitute       bool
	SubstituteFailed string
}

// Options are a copy's choices.
type Options struct {
	// Substitute lets the node fetch the paths it lacks from the binary caches of
	// its own Nix configuration (its substituters and trusted keys, never the
	// deployer's) before the rest is streamed: the serve protocol's
	// cmdQueryValidPaths with substitute = 1.
	Substitute bool
}

// Store is the local side of a copy: where the closure is computed and the
// missing paths are read.
type Store interface {
	// Closure returns the store paths paths refer to, directly or not, and
	// paths themselves, each once, preferably every path after the paths it
	// references.
	Closure(ctx context.Context, paths []string) ([]string, error)
	// Export writes paths to w in the format of `nix-store --export`: for each
	// path, the integer 1 and the path's export record (NAR, export magic, path,
	// references, deriver, 0); then 0. paths come in dependency order (a path
	// after the paths it references); the records must keep to it, and must
	// cover exactly paths. Export streams: it never holds a whole NAR.
	Export(ctx context.Context, paths []string, w io.Writer) error
	// NARInfos gives the NAR hash and size of each of paths as the store
	// records them (what cmdAddToStoreNar tells the node before the NAR).
	NARInfos(ctx context.Context, paths []string) (map[string]NARInfo, error)
}

// NARInfo is what a store records of a path's NAR.
type NARInfo struct {
	// Hash is the NAR's SHA-256 in a form Nix's Hash::parseAny reads with
	// SHA-256 as the default type: 64 hexadecimal digits (as `nix-store
	// --dump-db` prints it and Nix's own ssh store sends it), or "sha256:" and
	// the base-32 or hexadecimal digest.
	Hash string
	Size uint64
	// Deriver and References are what the export's trailer will say of the path,
	// when HasTrailer is set (`nix-store --dump-db` records them): a copy can then
	// tell which path a long NAR is of before its trailer comes, and send it to
	// the node as it is read instead of holding all of it (the trailer is still
	// checked against them).
	Deriver    string
	References []string
	HasTrailer bool
}

// forceImport makes every copy use cmdImportPaths: tests measure it against
// cmdAddToStoreNar on the same nodes.
var forceImport = false

// bufSize is the buffer between the local export and the node.
const bufSize = 64 << 10

// Copy makes paths (and their closures) valid on the node behind r/w: one query of
// which closure paths the node already has, then the missing ones streamed in
// dependency order in export format, with bounded memory.
//
// r is the node's `nix-store --serve --write` standard output and w its standard
// input. Copy does not close w: the caller closes it afterwards, which ends the
// remote command. When w has a method CloseWrite() error, Copy calls it once the
// last command is written, so that the node's output ends once the node has
// answered (or failed on) everything it was sent. A cancelled ctx stops the local export; a read from r or a write
// to w that blocks ends when the caller closes them (as a transport does when its
// remote command ends). The Stats are filled in as far as the copy got, also when
// it fails.
func Copy(ctx context.Context, r io.Reader, w io.Writer, paths []string, local Store) (Stats, error) {
	return CopyWith(ctx, r, w, paths, local, Options{})
}

// CopyWith is Copy with opt. With opt.Substitute the node is asked a second time,
// for the paths it lacks and with substitute = 1: its nix-store tries its own
// substituters for them and answers which are valid then; only the others are
// streamed. A node whose substitution fails ends its nix-store (Nix throws from
// the query when a cache is unreachable), and the error is then a
// *SubstituteError: CopyThrough copies again without substitution.
func CopyWith(ctx context.Context, r io.Reader, w io.Writer, paths []string, local Store, opt Options) (Stats, error) {
	st, err := copyPaths(ctx, r, w, paths, local, opt)
	if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		err = fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return st, err
}

func copyPaths(ctx context.Context, r io.Reader, w io.Writer, paths []string, local Store, opt Options) (Stats, error) {
	st := Stats{Substitute: opt.Substitute}
	if len(paths) == 0 {
		return st, nil
	}
	for _, p := range paths {
		if err := checkStorePath(p); err != nil {
			return st, err
		}
	}
	if err := ctx.Err(); err != nil {
		return st, err
	}
	enc := &encoder{w: bufio.NewWriterSize(&countingWriter{w: w, n: &st.Bytes}, bufSize)}
	in := bufio.NewReader(r)

	// The local closure is asked while the node is reached and greeted: the
	// greeting's write waits for the transport's connection, and the query need
	// not wait behind it. The node's answer is read after the closure is known,
	// so the remote nix-store starts while the local one works.
	type closureResult struct {
		paths []string
		err   error
	}
	cctx, cancelClosure := context.WithCancel(ctx)
	defer cancelClosure()
	closed := make(chan closureResult, 1)
	go func() {
		c, err := local.Closure(cctx, paths)
		closed <- closureResult{c, err}
	}()
	enc.uint64(serveMagic1)
	enc.uint64(clientVersion)
	if err := enc.flush(); err != nil {
		return st, fmt.Errorf("greeting the node: %w", err)
	}
	res := <-closed
	closure, err := res.paths, res.err
	if err != nil {
		return st, fmt.Errorf("closure of %s: %w", describe(paths), err)
	}
	if err := checkClosure(closure, paths); err != nil {
		return st, err
	}
	st.Paths = len(closure)
	version, err := readGreeting(in)
	if err != nil {
		return st, err
	}

	pipelined := version&0xff >= addToStoreNarMinorMin && !forceImport
	var early chan infosResult
	if pipelined {
		// The store's records of the closure are read while the node answers the
		// query below: the copy needs them before its first path (which paths it
		// dumps), and the local query then hides behind the node's.
		early = make(chan infosResult, 1)
		ictx, cancelInfos := context.WithCancel(ctx)
		asked := make(chan struct{})
		// No query outlives the copy: one not needed (nothing missing) is stopped.
		defer func() { cancelInfos(); <-asked }()
		go func() {
			defer close(asked)
			m, err := local.NARInfos(ictx, closure)
			early <- infosResult{m, err}
		}()
	}

	// Which of the closure does the node hold? lock: the node keeps them from
	// its garbage collector until the copy ends.
	valid, err := queryValid(enc, in, closure, false)
	if err != nil {
		return st, err
	}
	missing := notIn(closure, valid)
	st.Missing = len(missing)
	if len(missing) > 0 && opt.Substitute {
		// The node's own caches first: what they hold never crosses the
		// deployer's link. Asked apart from the first query, so that the push
		// line can say how many paths came from them.
		got, err := queryValid(enc, in, missing, true)
		if err != nil {
			return st, &SubstituteError{err}
		}
		st.Substituted = len(got)
		for p := range got {
			valid[p] = true
		}
		missing = notIn(missing, valid)
	}
	if len(missing) == 0 {
		return st, nil
	}

	// After the last command the node's input can end (w's CloseWrite, when it
	// has one): the node still answers every command it has read, then ends by
	// itself. A transport may not end the remote command's output before its
	// input has ended, so a node that fails after the last command reached it
	// would otherwise leave the copy waiting for an answer that never comes.
	closeWrite := func() {}
	if cw, ok := w.(interface{ CloseWrite() error }); ok {
		closeWrite = func() { _ = cw.CloseWrite() }
	}
	if pipelined {
		return st, sendPipelined(ctx, enc, in, missing, valid, len(closure), local, early, &st, closeWrite)
	}
	enc.uint64(cmdImportPaths)
	if err := sendExports(ctx, enc, missing, valid, len(closure), local, &st); err != nil {
		return st, err
	}
	enc.uint64(0) // end of the import
	if err := enc.flush(); err != nil {
		return st, fmt.Errorf("ending the import: %w", err)
	}
	closeWrite()
	ack, err := readUint64(in)
	if err != nil {
		return st, fmt.Errorf("the node did not confirm the import: %w", noEOF(err))
	}
	if ack != 1 {
		return st, fmt.Errorf("the node answered the import with %d, not 1", ack)
	}
	return st, nil
}

// queryValid asks the node which of paths it holds (cmdQueryValidPaths, with
// lock: the node keeps them from its garbage collector until the copy ends),
// after trying its substituters for them when substitute is set. The answer is
// bounded by the question: at most len(paths) paths, each one asked about.
func queryValid(enc *encoder, in io.Reader, paths []string, substitute bool) (map[string]bool, error) {
	enc.uint64(cmdQueryValidPaths)
	enc.uint64(1) // lock
	if substitute {
		enc.uint64(1)
	} else {
		enc.uint64(0)
	}
	enc.strings(paths)
	if err := enc.flush(); err != nil {
		return nil, fmt.Errorf("asking the node for valid paths: %w", err)
	}
	answer, err := readStrings(in, len(paths), maxToken)
	if err != nil {
		return nil, fmt.Errorf("reading the node's valid paths: %w", noEOF(err))
	}
	asked := make(map[string]bool, len(paths))
	for _, p := range paths {
		asked[p] = true
	}
	valid := make(map[string]bool, len(answer))
	for _, p := range answer {
		if !asked[p] {
			return nil, fmt.Errorf("the node answered with %q, which was not asked about", clip(p))
		}
		valid[p] = true
	}
	return valid, nil
}

// notIn is paths without those in valid, in their order.
func notIn(paths []string, valid map[string]bool) []string {
	var out []string
	for _, p := range paths {
		if !valid[p] {
			out = append(out, p)
		}
	}
	return out
}

// SubstituteError is a copy that broke off while the node substituted from its
// caches: nothing was streamed yet.
type SubstituteError struct{ Err error }

func (e *SubstituteError) Error() string {
	return "substituting from the node's caches: " + e.Err.Error()
}
func (e *SubstituteError) Unwrap() error { return e.Err }

// readGreeting reads the node's answer to the greeting and gives the node's
// protocol version.
func readGreeting(in io.Reader) (uint64, error) {
	magic, err := readUint64(in)
	if err != nil {
		return 0, fmt.Errorf("the node did not answer the serve protocol's greeting: %w", noEOF(err))
	}
	if magic != serveMagic2 {
		return 0, fmt.Errorf("the node answered the greeting with %#x: not nix-store --serve", magic)
	}
	version, err := readUint64(in)
	if err != nil {
		return 0, fmt.Errorf("the node's serve protocol version: %w", noEOF(err))
	}
	if version&0xff00 != clientVersion&0xff00 {
		return 0, fmt.Errorf("the node's nix-store --serve speaks protocol %d.%d, not 2.x", version>>8, version&0xff)
	}
	return version, nil
}

// sendExports streams the local export of missing into the import, checking each
// record before the node may add it: a path that was asked for, once, after every
// path it references. A record is written in full or, when a check fails, only up
// to its NAR, which the node then drops.
func sendExports(ctx context.Context, enc *encoder, missing []string, valid map[string]bool, maxRefs int, local Store, st *Stats) error {
	ectx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	exported := make(chan error, 1)
	go func() {
		err := local.Export(ectx, missing, pw)
		_ = pw.CloseWithError(err)
		exported <- err
	}()
	err := forwardExports(ctx, bufio.NewReaderSize(pr, bufSize), enc, missing, valid, maxRefs, st)
	if err != nil {
		cancel()
		_ = pr.CloseWithError(errors.New("copy aborted"))
	}
	// A failed export shows in err already: its reads returned the export's error.
	if exportErr := <-exported; err == nil && exportErr != nil {
		err = fmt.Errorf("local export: %w", exportErr)
	}
	return err
}

func forwardExports(ctx context.Context, src *bufio.Reader, enc *encoder, missing []string, valid map[string]bool, maxRefs int, st *Stats) error {
	sent := make(map[string]bool, len(missing))
	asked := make(map[string]bool, len(missing))
	for _, p := range missing {
		asked[p] = true
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		marker, err := readUint64(src)
		if err != nil {
			return fmt.Errorf("local export: %w", noEOF(err))
		}
		if marker == 0 {
			break
		}
		if marker != 1 {
			return fmt.Errorf("local export: %d where 1 or 0 belongs", marker)
		}
		enc.uint64(1)
		if enc.err != nil {
			return enc.err
		}
		if err := forwardNAR(src, enc.w); err != nil {
			return exportOrWriteErr(err)
		}
		t, err := readTrailer(src, maxRefs)
		if err != nil {
			return fmt.Errorf("local export: %w", err)
		}
		if !asked[t.Path] || sent[t.Path] {
			return fmt.Errorf("local export: %s was not asked for or comes twice", clip(t.Path))
		}
		for _, ref := range t.References {
			if ref != t.Path && !valid[ref] && !sent[ref] {
				return fmt.Errorf("local export: %s comes before its reference %s", t.Path, clip(ref))
			}
		}
		writeTrailer(enc, t)
		// A flush per path would make a packet per path of a closure of many
		// small paths (issue 14 item 4): what is buffered goes out when the buffer
		// fills, or here when the local export has nothing more ready, so the node
		// still gets every path the export has produced while it waits for more.
		if src.Buffered() == 0 {
			if err := enc.flush(); err != nil {
				return err
			}
		}
		sent[t.Path] = true
		st.Sent++
	}
	switch _, err := src.ReadByte(); {
	case err == nil:
		return errors.New("local export: data after its end")
	case err != io.EOF:
		return fmt.Errorf("local export: %w", err)
	}
	if st.Sent != len(missing) {
		for _, p := range missing {
			if !sent[p] {
				return fmt.Errorf("local export: %d of %d paths left out, %s among them", len(missing)-st.Sent, len(missing), p)
			}
		}
	}
	return nil
}

// exportOrWriteErr labels an error of forwarding a NAR: a failed write to the node
// stays as it is, anything else is the local export's.
func exportOrWriteErr(err error) error {
	var we *writeError
	if errors.As(err, &we) {
		return err
	}
	return fmt.Errorf("local export: %w", err)
}

// writeError is a failed write to the node.
type writeError struct{ err error }

func (e *writeError) Error() string { return "writing to the node: " + e.err.Error() }
func (e *writeError) Unwrap() error { return e.err }

// countingWriter counts the bytes written to w in *n.
type countingWriter struct {
	w io.Writer
	n *int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	k, err := c.w.Write(p)
	*c.n += int64(k)
	if err != nil {
		return k, &writeError{err}
	}
	return k, nil
}

// checkClosure checks the local closure: store paths of one store, each once,
// holding the paths asked for.
func checkClosure(closure, paths []string) error {
	seen := make(map[string]bool, len(closure))
	dir := ""
	for _, p := range closure {
		if err := checkStorePath(p); err != nil {
			return fmt.Errorf("local closure: %w", err)
		}
		if seen[p] {
			return fmt.Errorf("local closure: %s comes twice", p)
		}
		seen[p] = true
		if d := path.Dir(p); dir == "" {
			dir = d
		} else if d != dir {
			return fmt.Errorf("local closure: %s and %s are in different stores", closure[0], p)
		}
	}
	for _, p := range paths {
		if !seen[p] {
			return fmt.Errorf("local closure of %s: %s is not in it", describe(paths), p)
		}
	}
	return nil
}

// nixBase32 is the alphabet of a store path's hash part.
const nixBase32 = "0123456789abcdfghijklmnpqrsvwxyz"

// checkStorePath checks that p is a store path: an absolute store directory, then
// "/", a hash part of 32 base-32 characters, "-" and a name of at most 211
// characters from [A-Za-z0-9+-._?=] not starting with ".".
func checkStorePath(p string) error {
	bad := func(why string) error { return fmt.Errorf("%q is not a store path: %s", clip(p), why) }
	dir, base := path.Split(p)
	dir = strings.TrimSuffix(dir, "/")
	if !strings.HasPrefix(p, "/") || dir == "" || path.Clean(dir) != dir {
		return bad("not in an absolute store directory")
	}
	for _, c := range dir {
		if c < 0x21 || c == 0x7f {
			return bad("space or control character in the store directory")
		}
	}
	if len(base) < 34 || base[32] != '-' {
		return bad("no hash part")
	}
	for i := 0; i < 32; i++ {
		if !strings.ContainsRune(nixBase32, rune(base[i])) {
			return bad("no hash part")
		}
	}
	name := base[33:]
	if len(name) > 211 || strings.HasPrefix(name, ".") {
		return bad("bad name")
	}
	for _, c := range name {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', strings.ContainsRune("+-._?=", c):
		default:
			return bad("bad name")
		}
	}
	return nil
}

// describe names the paths of a copy for a message.
func describe(paths []string) string {
	if len(paths) == 1 {
		return paths[0]
	}
	return fmt.Sprintf("%s and %d more", paths[0], len(paths)-1)
}
