package nixserve_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"sync"

	"github.com/switchyard-nix/switchyard/transports/nixserve"
)

// An in-memory node and local store, written from the protocol's definition
// (serve-protocol.hh, opServe in nix-store.cc, importPaths in export-import.cc)
// independently of the client: the node parses what it is sent as Nix does and,
// like Nix, adds each path to its store when its record has arrived, refusing one
// whose references it does not hold.

// ---- wire encoding ----

func putInt(w io.Writer, n uint64) error {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], n)
	_, err := w.Write(b[:])
	return err
}

func putStr(w io.Writer, s string) error {
	if err := putInt(w, uint64(len(s))); err != nil {
		return err
	}
	_, err := w.Write(append([]byte(s), make([]byte, (8-len(s)%8)%8)...))
	return err
}

func putStrs(w io.Writer, list []string) error {
	if err := putInt(w, uint64(len(list))); err != nil {
		return err
	}
	for _, s := range list {
		if err := putStr(w, s); err != nil {
			return err
		}
	}
	return nil
}

func getInt(r io.Reader) (uint64, error) {
	var b [8]byte
	_, err := io.ReadFull(r, b[:])
	return binary.LittleEndian.Uint64(b[:]), err
}

func getStr(r io.Reader) (string, error) {
	n, err := getInt(r)
	if err != nil {
		return "", err
	}
	if n > 1<<20 {
		return "", fmt.Errorf("string of %d bytes", n)
	}
	b := make([]byte, n+(8-n%8)%8)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", err
	}
	return string(b[:n]), nil
}

func getStrs(r io.Reader) ([]string, error) {
	n, err := getInt(r)
	if err != nil {
		return nil, err
	}
	var list []string
	for i := uint64(0); i < n; i++ {
		s, err := getStr(r)
		if err != nil {
			return nil, err
		}
		list = append(list, s)
	}
	return list, nil
}

// ---- local store ----

// fakePath is a store path of the fake store: a directory with a file, an
// executable and a symlink, or (big > 0) one regular file of big bytes that is
// generated as it is written.
type fakePath struct {
	refs    []string
	deriver string
	text    string
	big     int64
}

// writeNAR writes the NAR of p.
func (p fakePath) writeNAR(w io.Writer) error {
	var err error
	str := func(s string) {
		if err == nil {
			err = putStr(w, s)
		}
	}
	str("nix-archive-1")
	str("(")
	str("type")
	if p.big > 0 {
		str("regular")
		str("contents")
		if err == nil {
			err = putInt(w, uint64(p.big))
		}
		if err == nil {
			_, err = io.CopyN(w, pattern{}, p.big)
		}
		if err == nil {
			_, err = w.Write(make([]byte, (8-p.big%8)%8))
		}
		str(")")
		return err
	}
	str("directory")
	// Entries sorted by name.
	str("entry")
	str("(")
	str("name")
	str("bin")
	str("node")
	str("(")
	str("type")
	str("directory")
	str("entry")
	str("(")
	str("name")
	str("run")
	str("node")
	str("(")
	str("type")
	str("regular")
	str("executable")
	str("")
	str("contents")
	str("#!/bin/sh\necho " + p.text + "\n")
	str(")")
	str(")")
	str(")")
	str(")")
	str("entry")
	str("(")
	str("name")
	str("data")
	str("node")
	str("(")
	str("type")
	str("regular")
	str("contents")
	str(p.text + fmt.Sprint(p.refs))
	str(")")
	str(")")
	str("entry")
	str("(")
	str("name")
	str("link")
	str("node")
	str("(")
	str("type")
	str("symlink")
	str("target")
	str("data")
	str(")")
	str(")")
	str(")")
	return err
}

// narHash is the sha256 of p's NAR.
func (p fakePath) narHash() [32]byte {
	h := sha256.New()
	_ = p.writeNAR(h)
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return sum
}

// pattern is an endless reader of a fixed pattern.
type pattern struct{}

func (pattern) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = "switchyard\n"[i%11]
	}
	return len(b), nil
}

// fakeStore is the local side: paths and knobs that make its export misbehave.
type fakeStore struct {
	paths map[string]fakePath

	mu      sync.Mutex
	exports [][]string // the paths of each Export call

	closureErr error
	closure    func([]string) []string // replaces the closure when set
	// reorder replaces the order of the exported paths.
	reorder func([]string) []string
	// failAfter makes Export fail after that many records and half of the next.
	failAfter int
	// block makes Export wait for its ctx after that many records.
	block int
	// oneWrite makes Export hand over its whole stream in one write, as a
	// nix-store that is ahead of the node fills its pipe.
	oneWrite bool
	// infos replaces a path's NAR hash and size in NARInfos's answer;
	// infosErr fails it.
	infos    map[string]nixserve.NARInfo
	infosErr error
	// infoCalls counts the NARInfos calls.
	infoCalls int
}

// NARInfos: each path's NAR hash in hexadecimal and NAR size.
func (s *fakeStore) NARInfos(_ context.Context, paths []string) (map[string]nixserve.NARInfo, error) {
	s.mu.Lock()
	s.infoCalls++
	s.mu.Unlock()
	if s.infosErr != nil {
		return nil, s.infosErr
	}
	m := map[string]nixserve.NARInfo{}
	for _, p := range paths {
		fp, ok := s.paths[p]
		if !ok {
			return nil, fmt.Errorf("path '%s' is not valid", p)
		}
		if info, ok := s.infos[p]; ok {
			m[p] = info
			continue
		}
		c := &countWriter{}
		_ = fp.writeNAR(c)
		sum := fp.narHash()
		m[p] = nixserve.NARInfo{Hash: hex.EncodeToString(sum[:]), Size: uint64(c.n)}
	}
	return m, nil
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}

var _ nixserve.Store = (*fakeStore)(nil)

// Closure: every path after its references (depth first, references sorted).
func (s *fakeStore) Closure(_ context.Context, roots []string) ([]string, error) {
	if s.closureErr != nil {
		return nil, s.closureErr
	}
	var order []string
	done := map[string]bool{}
	var visit func(string) error
	visit = func(p string) error {
		if done[p] {
			return nil
		}
		fp, ok := s.paths[p]
		if !ok {
			return fmt.Errorf("path '%s' is not valid", p)
		}
		done[p] = true
		refs := slices.Clone(fp.refs)
		sort.Strings(refs)
		for _, r := range refs {
			if r != p {
				if err := visit(r); err != nil {
					return err
				}
			}
		}
		order = append(order, p)
		return nil
	}
	for _, r := range roots {
		if err := visit(r); err != nil {
			return nil, err
		}
	}
	if s.closure != nil {
		return s.closure(order), nil
	}
	return order, nil
}

func (s *fakeStore) Export(ctx context.Context, paths []string, w io.Writer) error {
	s.mu.Lock()
	s.exports = append(s.exports, slices.Clone(paths))
	s.mu.Unlock()
	if s.reorder != nil {
		paths = s.reorder(slices.Clone(paths))
	}
	if s.oneWrite {
		var all bytes.Buffer
		out := w
		defer func() { _, _ = out.Write(all.Bytes()) }()
		w = &all
	}
	for i, p := range paths {
		if s.block > 0 && i == s.block {
			<-ctx.Done()
			return ctx.Err()
		}
		fp, ok := s.paths[p]
		if !ok {
			return fmt.Errorf("path '%s' is not valid", p)
		}
		if err := putInt(w, 1); err != nil {
			return err
		}
		if s.failAfter > 0 && i == s.failAfter {
			// Half a NAR, then the failure.
			_ = putStr(w, "nix-archive-1")
			_ = putStr(w, "(")
			return errors.New("hash of path '" + p + "' has changed")
		}
		if err := fp.writeNAR(w); err != nil {
			return err
		}
		if err := putInt(w, 0x4558494e); err != nil {
			return err
		}
		_ = putStr(w, p)
		_ = putStrs(w, fp.refs)
		_ = putStr(w, fp.deriver)
		if err := putInt(w, 0); err != nil {
			return err
		}
	}
	return putInt(w, 0)
}

// ---- node ----

// record is what the node holds of a path.
type record struct {
	narHash    [32]byte
	narSize    int64
	references []string
	deriver    string
}

// fakeNode is an in-memory `nix-store --serve --write`.
type fakeNode struct {
	mu       sync.Mutex
	store    map[string]record
	imported []string   // paths added, in order
	resent   []string   // paths sent although valid
	queries  [][]string // the paths of each cmdQueryValidPaths
	imports  int        // cmdImportPaths commands
	adds     int        // cmdAddToStoreNar commands

	// dieAfter ends the node after it has read that many bytes (0: never).
	dieAfter int64
	// greeting and version replace the node's answer to the greeting.
	greeting, version uint64
	// extraValid is added to every answer of cmdQueryValidPaths.
	extraValid string
	// ack replaces the 1 that confirms an import.
	ack uint64
	// mute makes the node read the greeting and end without a word.
	mute bool
}

func newFakeNode() *fakeNode { return &fakeNode{store: map[string]record{}} }

func (n *fakeNode) count() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.store)
}

// errDied is the node's end after dieAfter bytes.
var errDied = errors.New("node died")

type dyingReader struct {
	r    io.Reader
	left int64
}

func (d *dyingReader) Read(p []byte) (int, error) {
	if d.left <= 0 {
		return 0, errDied
	}
	if int64(len(p)) > d.left {
		p = p[:d.left]
	}
	k, err := d.r.Read(p)
	d.left -= int64(k)
	return k, err
}

// serve answers one client on in/out until in ends (nil) or something goes wrong.
func (n *fakeNode) serve(in io.Reader, out io.Writer) error {
	if n.dieAfter > 0 {
		in = &dyingReader{r: in, left: n.dieAfter}
	}
	in = bufio.NewReader(in)
	if n.mute {
		_, err := io.ReadFull(in, make([]byte, 16))
		return err
	}
	magic, err := getInt(in)
	if err != nil {
		return err
	}
	if magic != 0x390c9deb {
		return errors.New("protocol mismatch")
	}
	greeting, version := uint64(0x5452eecb), uint64(0x207)
	if n.greeting != 0 {
		greeting = n.greeting
	}
	if n.version != 0 {
		version = n.version
	}
	if err := putInt(out, greeting); err != nil {
		return err
	}
	if err := putInt(out, version); err != nil {
		return err
	}
	if _, err := getInt(in); err != nil { // the client's version
		return err
	}
	for {
		cmd, err := getInt(in)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		switch cmd {
		case 1: // cmdQueryValidPaths
			if _, err := getInt(in); err != nil { // lock
				return err
			}
			if _, err := getInt(in); err != nil { // substitute
				return err
			}
			paths, err := getStrs(in)
			if err != nil {
				return err
			}
			n.mu.Lock()
			n.queries = append(n.queries, paths)
			var valid []string
			for _, p := range paths {
				if _, ok := n.store[p]; ok {
					valid = append(valid, p)
				}
			}
			n.mu.Unlock()
			if n.extraValid != "" {
				valid = append(valid, n.extraValid)
			}
			if err := putStrs(out, valid); err != nil {
				return err
			}
		case 4: // cmdImportPaths
			n.mu.Lock()
			n.imports++
			n.mu.Unlock()
			if err := n.importPaths(in); err != nil {
				return err
			}
			ack := uint64(1)
			if n.ack != 0 {
				ack = n.ack
			}
			if err := putInt(out, ack); err != nil {
				return err
			}
		case 9: // cmdAddToStoreNar
			n.mu.Lock()
			n.adds++
			n.mu.Unlock()
			if err := n.addToStoreNar(in); err != nil {
				return err
			}
			ack := uint64(1)
			if n.ack != 0 {
				ack = n.ack
			}
			if err := putInt(out, ack); err != nil {
				return err
			}
		default:
			return fmt.Errorf("unknown serve command %d", cmd)
		}
	}
}

func (n *fakeNode) importPaths(in io.Reader) error {
	for {
		marker, err := getInt(in)
		if err != nil {
			return err
		}
		if marker == 0 {
			return nil
		}
		if marker != 1 {
			return errors.New("input doesn't look like something created by 'nix-store --export'")
		}
		h := sha256.New()
		counted := &countReader{r: io.TeeReader(in, h)}
		if err := parseNAR(counted); err != nil {
			return err
		}
		magic, err := getInt(in)
		if err != nil {
			return err
		}
		if magic != 0x4558494e {
			return errors.New("Nix archive cannot be imported; wrong format")
		}
		p, err := getStr(in)
		if err != nil {
			return err
		}
		refs, err := getStrs(in)
		if err != nil {
			return err
		}
		deriver, err := getStr(in)
		if err != nil {
			return err
		}
		sig, err := getInt(in)
		if err != nil {
			return err
		}
		if sig == 1 {
			if _, err := getStr(in); err != nil {
				return err
			}
		}
		n.mu.Lock()
		if _, ok := n.store[p]; ok {
			n.resent = append(n.resent, p)
		}
		for _, r := range refs {
			if _, ok := n.store[r]; !ok && r != p {
				n.mu.Unlock()
				return fmt.Errorf("cannot add path '%s' because it references path '%s' which is not valid", p, r)
			}
		}
		var sum [32]byte
		copy(sum[:], h.Sum(nil))
		n.store[p] = record{narHash: sum, narSize: counted.n, references: refs, deriver: deriver}
		n.imported = append(n.imported, p)
		n.mu.Unlock()
	}
}

// addToStoreNar reads one cmdAddToStoreNar as opServe does (path, deriver, NAR
// hash, references, registration time, NAR size, ultimate, signatures, content
// address, then exactly NAR size bytes) and adds the path as LocalStore::addToStore
// does: the NAR must have the hash and size it was announced with, and every
// reference must be valid. A path already valid is read and dropped.
func (n *fakeNode) addToStoreNar(in io.Reader) error {
	p, err := getStr(in)
	if err != nil {
		return err
	}
	deriver, err := getStr(in)
	if err != nil {
		return err
	}
	hash, err := getStr(in)
	if err != nil {
		return err
	}
	refs, err := getStrs(in)
	if err != nil {
		return err
	}
	var narSize uint64
	for i := range 3 { // registration time, NAR size, ultimate
		v, err := getInt(in)
		if err != nil {
			return err
		}
		if i == 1 {
			narSize = v
		}
	}
	if _, err := getStrs(in); err != nil { // signatures
		return err
	}
	if _, err := getStr(in); err != nil { // content address
		return err
	}
	if narSize == 0 {
		return errors.New("narInfo is too old and missing the narSize field")
	}
	want, err := hex.DecodeString(hash)
	if err != nil || len(want) != 32 {
		return fmt.Errorf("hash '%s' has wrong length for hash type 'sha256'", hash)
	}
	h := sha256.New()
	sized := &countReader{r: io.TeeReader(io.LimitReader(in, int64(narSize)), h)}
	if err := parseNAR(sized); err != nil {
		return err
	}
	if uint64(sized.n) != narSize {
		return fmt.Errorf("size mismatch importing path '%s'", p)
	}
	if !bytes.Equal(h.Sum(nil), want) {
		return fmt.Errorf("hash mismatch importing path '%s'", p)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.store[p]; ok {
		n.resent = append(n.resent, p)
		return nil
	}
	for _, r := range refs {
		if _, ok := n.store[r]; !ok && r != p {
			return fmt.Errorf("cannot add path '%s' because it references path '%s' which is not valid", p, r)
		}
	}
	var sum [32]byte
	copy(sum[:], want)
	n.store[p] = record{narHash: sum, narSize: int64(narSize), references: refs, deriver: deriver}
	n.imported = append(n.imported, p)
	return nil
}

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n += int64(k)
	return k, err
}

// parseNAR reads one NAR, discarding file contents.
func parseNAR(r io.Reader) error {
	expect := func(want string) error {
		got, err := getStr(r)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("NAR: %q, expected %q", got, want)
		}
		return nil
	}
	var node func() error
	node = func() error {
		if err := expect("("); err != nil {
			return err
		}
		if err := expect("type"); err != nil {
			return err
		}
		typ, err := getStr(r)
		if err != nil {
			return err
		}
		switch typ {
		case "regular":
			tok, err := getStr(r)
			if err != nil {
				return err
			}
			if tok == "executable" {
				if err := expect(""); err != nil {
					return err
				}
				if tok, err = getStr(r); err != nil {
					return err
				}
			}
			if tok != "contents" {
				return fmt.Errorf("NAR: %q, expected contents", tok)
			}
			size, err := getInt(r)
			if err != nil {
				return err
			}
			if _, err := io.CopyN(io.Discard, r, int64(size+(8-size%8)%8)); err != nil {
				return err
			}
		case "symlink":
			if err := expect("target"); err != nil {
				return err
			}
			if _, err := getStr(r); err != nil {
				return err
			}
		case "directory":
			for {
				tok, err := getStr(r)
				if err != nil {
					return err
				}
				if tok == ")" {
					return nil
				}
				if tok != "entry" {
					return fmt.Errorf("NAR: %q, expected entry", tok)
				}
				for _, want := range []string{"(", "name"} {
					if err := expect(want); err != nil {
						return err
					}
				}
				if _, err := getStr(r); err != nil {
					return err
				}
				if err := expect("node"); err != nil {
					return err
				}
				if err := node(); err != nil {
					return err
				}
				if err := expect(")"); err != nil {
					return err
				}
			}
		default:
			return fmt.Errorf("NAR: type %q", typ)
		}
		return expect(")")
	}
	if err := expect("nix-archive-1"); err != nil {
		return err
	}
	return node()
}

// copyTo runs Copy against node as a transport does: the node on the other ends
// of two pipes, the client's input closed when the node ends, and the node's
// input closed when Copy returns.
func copyTo(ctx context.Context, node *fakeNode, local nixserve.Store, paths ...string) (nixserve.Stats, error, error) {
	st, _, err, served := copyCounting(ctx, node, local, paths...)
	return st, err, served
}

// copyCounting is copyTo that also counts the writes that reach the node.
func copyCounting(ctx context.Context, node *fakeNode, local nixserve.Store, paths ...string) (nixserve.Stats, int, error, error) {
	return copyCountingWith(ctx, node, local, nixserve.Options{}, paths...)
}

// copyWith is copyTo with the copy's options; it gives Copy's error.
func copyWith(ctx context.Context, node *fakeNode, local nixserve.Store, opt nixserve.Options, paths ...string) (nixserve.Stats, error) {
	st, _, err, _ := copyCountingWith(ctx, node, local, opt, paths...)
	return st, err
}

func copyCountingWith(ctx context.Context, node *fakeNode, local nixserve.Store, opt nixserve.Options, paths ...string) (nixserve.Stats, int, error, error) {
	toNodeR, pw := io.Pipe()
	toNodeW := &writeCounter{w: pw}
	// The node's output is buffered, as a pipe or an SSH channel buffers it: the
	// node answers the greeting while the client may still be writing.
	fromNode := &bufferedPipe{}
	fromNode.cond.L = &fromNode.mu
	fromNodeR, fromNodeW := fromNode, fromNode
	served := make(chan error, 1)
	go func() {
		err := node.serve(toNodeR, fromNodeW)
		// The remote command has ended: its streams close.
		fromNodeW.CloseWithError(io.EOF)
		toNodeR.CloseWithError(errors.New("the node's command has ended"))
		served <- err
	}()
	st, err := nixserve.CopyWith(ctx, fromNodeR, toNodeW, paths, local, opt)
	pw.Close()
	return st, toNodeW.writes, err, <-served
}

// writeCounter counts the writes to w.
type writeCounter struct {
	w      io.Writer
	writes int
}

func (c *writeCounter) Write(p []byte) (int, error) {
	c.writes++
	return c.w.Write(p)
}

// bufferedPipe is a pipe whose writes never block.
type bufferedPipe struct {
	mu   sync.Mutex
	cond sync.Cond
	buf  []byte
	err  error // set by CloseWithError: reads return it once buf is empty
}

func (b *bufferedPipe) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return 0, io.ErrClosedPipe
	}
	b.buf = append(b.buf, p...)
	b.cond.Broadcast()
	return len(p), nil
}

func (b *bufferedPipe) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for len(b.buf) == 0 && b.err == nil {
		b.cond.Wait()
	}
	if len(b.buf) == 0 {
		return 0, b.err
	}
	n := copy(p, b.buf)
	b.buf = b.buf[n:]
	return n, nil
}

func (b *bufferedPipe) CloseWithError(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err == nil {
		b.err = err
	}
	b.cond.Broadcast()
}
