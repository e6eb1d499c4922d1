package nixserve

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// The pipelined copy (issue 14 item 4): one cmdAddToStoreNar per missing path,
// written one after another without waiting for the node's answer to each. A
// node of Nix 2.8 spends about half the CPU on a path added from its NAR that it
// spends on the same path in cmdImportPaths (whose importPaths holds each NAR in
// memory, then parses and hashes it twice), and the node's CPU is what a copy is
// bounded by on shared cores.
//
// opServe reads the command's fields (path, deriver, NAR hash, references,
// registration time, NAR size, ultimate, signatures, content address), then
// exactly the NAR's size of bytes, adds the path (LocalStore::addToStore with
// NoCheckSigs: the node's trust is in who may run nix-store --serve --write, as
// for cmdImportPaths), and answers 1. A reference that is not valid on the node
// fails the path, so paths go in dependency order. A failure ends nix-store: its
// error is on its standard error, and its output ends where its answers stop,
// which names the path it failed on.
//
// The NAR's hash and size must precede it, but the export format gives a path's
// name only after its NAR: each NAR is held (in memory up to narMemory, the rest
// in an unlinked temporary file) until its record's trailer names it, and then
// sent. The hashes and sizes come from the local store's database, one query for
// all missing paths (Store.NARInfos), asked while the export starts.

// narMemory bounds the part of one NAR a copy holds in memory; a longer NAR
// goes to a temporary file (page cache, in practice). Every copy of a fleet holds
// its own: at 1 MiB, 16 nodes' copies held 16 MiB, which the collector's headroom
// doubles (issue 35: the deployer's peak RSS). A variable for tests.
var narMemory = 256 << 10

// ackWait bounds how long a copy whose write to the node failed waits for the
// node's last answers, which tell the path it failed on.
const ackWait = 5 * time.Second

// AddError is a path the node did not add: it answered the paths before it and
// then ended, or answered this one with something other than success.
type AddError struct {
	Path    string
	Added   int // missing paths the node confirmed before this one
	Missing int
	Err     error
}

func (e *AddError) Error() string {
	return fmt.Sprintf("the node did not add %s (%d of %d missing paths added before it): %v", e.Path, e.Added, e.Missing, e.Err)
}

func (e *AddError) Unwrap() error { return e.Err }

type infosResult struct {
	infos map[string]NARInfo
	err   error
}

// sendPipelined adds missing to the node with one cmdAddToStoreNar each: the long
// paths it can dump first (planDumps), then the rest in the local export's order
// (every path after the paths it references); it returns once the node has
// confirmed every one. early is the store's records of the closure, asked while
// the node answered which paths it holds.
func sendPipelined(ctx context.Context, enc *encoder, in io.Reader, missing []string, valid map[string]bool, maxRefs int, local Store, early <-chan infosResult, st *Stats, closeWrite func()) error {
	ectx, cancel := context.WithCancel(ctx)
	defer cancel()

	infos, waitInfos := firstInfos(ectx, local, missing, early)
	defer func() { cancel(); waitInfos() }()
	plan, err := planDumps(ctx, local, missing, valid, infos)
	if err != nil {
		return err
	}
	rest := plan.rest
	pr, pw := io.Pipe()
	exported := make(chan error, 1)
	if len(rest) > 0 {
		go func() {
			err := local.Export(ectx, rest, pw)
			_ = pw.CloseWithError(err)
			exported <- err
		}()
	} else {
		exported <- nil
	}
	// The node's answers, one per path, are read as they come: the node never
	// waits to write one, and the client never waits for one before the next
	// path. sent tells the reader which path each answer is of.
	sent := make(chan string, len(missing))
	acked := make(chan error, 1)
	go func() { acked <- readAcks(in, sent, len(missing)) }()

	current, err := sendDumped(ctx, enc, plan, sent, st)
	if err == nil && len(rest) > 0 {
		current, err = forwardNARs(ctx, bufio.NewReaderSize(pr, bufSize), enc, rest, withDumped(valid, plan.long), maxRefs, plan.ch, sent, st)
	} else if err == nil {
		err = enc.flush()
	}
	close(sent)
	if err != nil {
		cancel()
		_ = pr.CloseWithError(errors.New("copy aborted"))
		var we *writeError
		if errors.As(err, &we) {
			// The node's input is closed: it has ended. Where its answers stop
			// tells the path it failed on; a node that answered every path sent
			// in full failed on the one being written.
			select {
			case ackErr := <-acked:
				if ackErr != nil {
					err = ackErr
				} else if current != "" {
					err = &AddError{Path: current, Added: st.Sent, Missing: len(missing), Err: err}
				}
			case <-time.After(ackWait):
			case <-ctx.Done():
			}
		}
	}
	// A failed export shows in err already: its reads returned the export's error.
	if exportErr := <-exported; err == nil && exportErr != nil {
		err = fmt.Errorf("local export: %w", exportErr)
	}
	if err != nil {
		return err
	}
	closeWrite()
	select {
	case err := <-acked:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// readAcks reads the node's answer to each path sent, in order, until sent is
// closed.
func readAcks(in io.Reader, sent <-chan string, missing int) error {
	added := 0
	for p := range sent {
		ack, err := readUint64(in)
		if err != nil {
			return &AddError{Path: p, Added: added, Missing: missing, Err: noEOF(err)}
		}
		if ack != 1 {
			return &AddError{Path: p, Added: added, Missing: missing, Err: fmt.Errorf("the node answered %d, not 1", ack)}
		}
		added++
	}
	return nil
}

// forwardNARs turns the local export's records into cmdAddToStoreNar commands,
// checking each before it goes out: a path that was asked for, once, after every
// path it references, whose NAR has the size the store records. It gives the
// path whose command was being written when it failed ("" between commands).
func forwardNARs(ctx context.Context, src *bufio.Reader, enc *encoder, missing []string, valid map[string]bool, maxRefs int, infosCh <-chan infosResult, sent chan<- string, st *Stats) (string, error) {
	done := make(map[string]bool, len(missing))
	asked := make(map[string]bool, len(missing))
	for _, p := range missing {
		asked[p] = true
	}
	infos := &narInfos{ch: infosCh}
	forwarded := 0
	nar := &narBuffer{limit: narMemory}
	defer nar.close()
	for {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		marker, err := readUint64(src)
		if err != nil {
			return "", fmt.Errorf("local export: %w", noEOF(err))
		}
		if marker == 0 {
			break
		}
		if marker != 1 {
			return "", fmt.Errorf("local export: %d where 1 or 0 belongs", marker)
		}
		nar.reset()
		out := &narOut{buf: nar, pick: func(n int64) string {
			if !infos.poll() {
				return ""
			}
			return longNAR(n, missing, done, valid, infos.m)
		}, sizeOf: func(p string) int64 { return int64(infos.m[p].Size) }, begin: func(p string) error {
			info := infos.m[p]
			writeAddToStoreNar(enc, trailer{Path: p, References: info.References, Deriver: info.Deriver}, info)
			if enc.err != nil {
				return enc.err
			}
			return nar.writeTo(enc.w)
		}, direct: enc.w}
		if err := forwardNAR(src, out); err != nil {
			return out.path, exportOrWriteErr(err)
		}
		t, err := readTrailer(src, maxRefs)
		if err != nil {
			return out.path, fmt.Errorf("local export: %w", err)
		}
		if out.path != "" {
			// The NAR went out under the path its length named: the trailer must
			// agree, or the node now holds a command it must not act on, and the
			// copy ends here.
			if err := sameTrailer(t, out.path, out.n, infos.m[out.path]); err != nil {
				return out.path, fmt.Errorf("local export: %w", err)
			}
			st.Streamed++
		} else if err := sendHeld(ctx, enc, t, nar, asked, done, valid, infos); err != nil {
			return t.Path, err
		}
		done[t.Path] = true
		st.Sent++
		forwarded++
		sent <- t.Path
		// As in the import: what is buffered goes out when the buffer fills, or
		// here when the local export has nothing more ready.
		if src.Buffered() == 0 {
			if err := enc.flush(); err != nil {
				return "", err
			}
		}
	}
	switch _, err := src.ReadByte(); {
	case err == nil:
		return "", errors.New("local export: data after its end")
	case err != io.EOF:
		return "", fmt.Errorf("local export: %w", err)
	}
	if forwarded != len(missing) {
		for _, p := range missing {
			if !done[p] {
				return "", fmt.Errorf("local export: %d of %d paths left out, %s among them", len(missing)-forwarded, len(missing), p)
			}
		}
	}
	return "", enc.flush()
}

// sendHeld checks a record held whole until its trailer and sends it: a path that
// was asked for, once, after every path it references, whose NAR has the size the
// store records.
func sendHeld(ctx context.Context, enc *encoder, t trailer, nar *narBuffer, asked, done, valid map[string]bool, infos *narInfos) error {
	if !asked[t.Path] || done[t.Path] {
		return fmt.Errorf("local export: %s was not asked for or comes twice", clip(t.Path))
	}
	for _, ref := range t.References {
		if ref != t.Path && !valid[ref] && !done[ref] {
			return fmt.Errorf("local export: %s comes before its reference %s", t.Path, clip(ref))
		}
	}
	if err := infos.wait(ctx); err != nil {
		return err
	}
	info, ok := infos.m[t.Path]
	if !ok {
		return fmt.Errorf("local store: no NAR hash of %s", t.Path)
	}
	if info.Size != uint64(nar.n) {
		return fmt.Errorf("local store: the NAR of %s has %d bytes, the store records %d", t.Path, nar.n, info.Size)
	}
	writeAddToStoreNar(enc, t, info)
	if enc.err != nil {
		return enc.err
	}
	if err := nar.writeTo(enc.w); err != nil {
		enc.err = err
		return exportOrWriteErr(err)
	}
	return nil
}

// narInfos is the answer of the local store's NAR hashes, asked while the export
// starts: polled for a long NAR, waited for by the first record held whole.
type narInfos struct {
	ch  <-chan infosResult
	m   map[string]NARInfo // nil until the answer came
	err error
}

// take keeps an answer received.
func (s *narInfos) take(r infosResult) {
	s.m, s.err = r.infos, r.err
	if s.m == nil {
		s.m = map[string]NARInfo{}
	}
	if s.err != nil {
		s.err = fmt.Errorf("NAR hashes of the local store: %w", s.err)
	}
	s.ch = nil
}

// poll tells whether the hashes are here (and were got), without waiting.
func (s *narInfos) poll() bool {
	if s.ch != nil {
		select {
		case r := <-s.ch:
			s.take(r)
		default:
			return false
		}
	}
	return s.err == nil
}

// wait waits for the hashes; an error is the local store's (or ctx's).
func (s *narInfos) wait(ctx context.Context) error {
	if s.ch != nil {
		select {
		case r := <-s.ch:
			s.take(r)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return s.err
}

// longNAR is the one missing path a NAR already n bytes long (narMemory or more)
// can be of: the only path not yet sent whose recorded NAR is at least that long, whose
// store gave its trailer, and whose references the node holds or was sent. "" when
// there is none or more than one: the NAR is then held until its trailer names it.
func longNAR(n int64, missing []string, done, valid map[string]bool, infos map[string]NARInfo) string {
	found := ""
	for _, p := range missing {
		info, ok := infos[p]
		if done[p] || !ok || info.Size < uint64(n) {
			continue
		}
		if found != "" || !info.HasTrailer {
			return ""
		}
		found = p
	}
	if found == "" {
		return ""
	}
	for _, ref := range infos[found].References {
		if ref != found && !valid[ref] && !done[ref] {
			return ""
		}
	}
	return found
}

// sameTrailer checks a record sent before its trailer came: the trailer names the
// path its NAR went out as, with the references and deriver the store recorded,
// and the NAR had the recorded length.
func sameTrailer(t trailer, path string, n int64, info NARInfo) error {
	if t.Path != path {
		return fmt.Errorf("the NAR sent as %s is of %s", clip(path), clip(t.Path))
	}
	if uint64(n) != info.Size {
		return fmt.Errorf("the NAR of %s has %d bytes, the store records %d", path, n, info.Size)
	}
	if t.Deriver != info.Deriver || !sameSet(t.References, info.References) {
		return fmt.Errorf("the export's references or deriver of %s are not the store's", path)
	}
	return nil
}

// sameSet tells whether a and b hold the same strings, each once.
func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	in := make(map[string]bool, len(a))
	for _, s := range a {
		in[s] = true
	}
	for _, s := range b {
		if !in[s] {
			return false
		}
	}
	return len(in) == len(a)
}

// narOut is where one NAR of the export goes: into buf until it fills the memory
// buf holds; then, as soon as pick names the one path it can be of,
// begin sends that path's command and what buf holds, and the rest goes straight
// to direct (the node's buffered writer) as it is read. A long path thus streams
// at the link's pace instead of waiting in a temporary file for its trailer.
//
// A NAR sent never goes past the size its command announced: bytes beyond it
// would reach the node as the next command.
type narOut struct {
	buf    *narBuffer
	pick   func(n int64) string
	sizeOf func(path string) int64 // the NAR size the store records
	begin  func(path string) error
	direct *bufio.Writer
	path   string // the path the NAR is being sent as ("" while held)
	size   int64  // the size its command announced
	n      int64  // the NAR's bytes so far
}

func (o *narOut) tooLong() error {
	return fmt.Errorf("the NAR of %s is longer than the %d bytes the store records", o.path, o.size)
}

// pickStep is how much of a held NAR is read between two tries of pick.
const pickStep = 1 << 20

func (o *narOut) Write(p []byte) (int, error) {
	if o.path != "" {
		if int64(len(p)) > o.size-o.n {
			return 0, o.tooLong()
		}
		k, err := o.direct.Write(p)
		o.n += int64(k)
		return k, err
	}
	k, err := o.buf.Write(p)
	o.n += int64(k)
	if err != nil {
		return k, err
	}
	return k, o.tryBegin()
}

// ReadFrom reads a file's contents (narForwarder.contents): held in steps while
// the NAR's path is not known, then straight into the node's buffered writer,
// which reads into its own buffer (no copy buffer is allocated).
func (o *narOut) ReadFrom(r io.Reader) (int64, error) {
	var total int64
	for o.path == "" {
		step := int64(pickStep)
		if room := int64(o.buf.limit) - o.n; room > 0 {
			step = room // up to the memory held, no further: the first try
		}
		k, err := o.buf.ReadFrom(io.LimitReader(r, step))
		o.n += k
		total += k
		if err != nil {
			return total, err
		}
		if err := o.tryBegin(); err != nil {
			return total, err
		}
		if k < step {
			return total, nil // r has ended
		}
	}
	k, err := o.direct.ReadFrom(io.LimitReader(r, o.size-o.n))
	o.n += k
	total += k
	if err != nil {
		return total, err
	}
	var probe [1]byte
	if m, _ := r.Read(probe[:]); m > 0 {
		return total, o.tooLong()
	}
	return total, nil
}

// tryBegin starts sending once the NAR fills the memory held and its path is known.
func (o *narOut) tryBegin() error {
	if o.path != "" || o.n < int64(o.buf.limit) {
		return nil
	}
	p := o.pick(o.n)
	if p == "" {
		return nil
	}
	o.path = p
	if o.size = o.sizeOf(p); o.n > o.size {
		return o.tooLong() // nothing of it has gone out
	}
	return o.begin(p)
}

// writeAddToStoreNar writes a cmdAddToStoreNar command up to its NAR: path,
// deriver, NAR hash, references, registration time (0: the node's clock), NAR
// size, ultimate (0: not built here for the node), signatures (none: the node
// does not check them), content address (none).
func writeAddToStoreNar(e *encoder, t trailer, info NARInfo) {
	e.uint64(cmdAddToStoreNar)
	e.string(t.Path)
	e.string(t.Deriver)
	e.string(info.Hash)
	e.strings(t.References)
	e.uint64(0)
	e.uint64(info.Size)
	e.uint64(0)
	e.strings(nil)
	e.string("")
}

// narBuffer holds one NAR: in memory up to limit bytes, beyond that in an
// unlinked temporary file that is reused for every longer NAR of a copy.
type narBuffer struct {
	limit   int
	mem     []byte
	f       *os.File
	fw      *bufio.Writer
	spilled bool
	n       int64
}

func (b *narBuffer) reset() {
	b.mem, b.spilled, b.n = b.mem[:0], false, 0
}

func (b *narBuffer) Write(p []byte) (int, error) {
	if !b.spilled && len(b.mem)+len(p) <= b.limit {
		b.mem = append(b.mem, p...)
		b.n += int64(len(p))
		return len(p), nil
	}
	if err := b.spill(); err != nil {
		return 0, err
	}
	k, err := b.fw.Write(p)
	b.n += int64(k)
	if err != nil {
		return k, fmt.Errorf("NAR buffer: %w", err)
	}
	return k, nil
}

// ReadFrom reads r to its end into the buffer. io.CopyN of a file's contents
// (narForwarder.contents) lands here, straight into the memory held or the
// temporary file's writer: without it, io.Copy allocates a 32 KiB buffer for every
// file of every NAR, the largest part of a fleet copy's garbage.
func (b *narBuffer) ReadFrom(r io.Reader) (int64, error) {
	var total int64
	for !b.spilled {
		if len(b.mem) == b.limit {
			// Full: spill only if r has more.
			var probe [512]byte
			k, err := r.Read(probe[:])
			if k > 0 {
				if _, werr := b.Write(probe[:k]); werr != nil {
					return total, werr
				}
				total += int64(k)
			}
			if err == io.EOF {
				return total, nil
			}
			if err != nil {
				return total, err
			}
			continue
		}
		b.grow()
		k, err := r.Read(b.mem[len(b.mem):cap(b.mem)])
		b.mem = b.mem[:len(b.mem)+k]
		b.n += int64(k)
		total += int64(k)
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
	k, err := b.fw.ReadFrom(r)
	b.n += k
	total += k
	if err != nil {
		return total, fmt.Errorf("NAR buffer: %w", err)
	}
	return total, nil
}

// grow makes room past len(b.mem), doubling the capacity up to the limit: each
// copy's buffer grows once, to its largest NAR, and keeps its capacity (reset).
func (b *narBuffer) grow() {
	if len(b.mem) < cap(b.mem) {
		return
	}
	next := min(max(2*cap(b.mem), 32<<10), b.limit)
	mem := make([]byte, len(b.mem), next)
	copy(mem, b.mem)
	b.mem = mem
}

// spill moves what memory holds to the temporary file, once per NAR; the file is
// made at the first NAR longer than the limit and reused for the next ones.
func (b *narBuffer) spill() error {
	if b.spilled {
		return nil
	}
	if b.f == nil {
		f, err := os.CreateTemp(spoolDir, "switchyard-nar-*")
		if err != nil {
			return fmt.Errorf("NAR buffer: %w", err)
		}
		_ = os.Remove(f.Name())
		b.f, b.fw = f, bufio.NewWriterSize(f, bufSize)
	}
	if _, err := b.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("NAR buffer: %w", err)
	}
	b.fw.Reset(b.f)
	if _, err := b.fw.Write(b.mem); err != nil {
		return fmt.Errorf("NAR buffer: %w", err)
	}
	b.mem, b.spilled = b.mem[:0], true
	return nil
}

// writeTo writes the NAR held to w.
func (b *narBuffer) writeTo(w io.Writer) error {
	if !b.spilled {
		_, err := w.Write(b.mem)
		return err
	}
	if err := b.fw.Flush(); err != nil {
		return fmt.Errorf("NAR buffer: %w", err)
	}
	_, err := io.Copy(w, io.NewSectionReader(b.f, 0, b.n))
	return err
}

func (b *narBuffer) close() {
	if b.f != nil {
		_ = b.f.Close()
	}
}
