package nixserve

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// The export of a store path is the same for every node, so a process produces it
// once and every copy that sends the path reads it (issue 14 item 4: a fleet's
// closure is exported once per run, not once per node). The records go to a
// spool: temporary files unlinked as soon as they are created, so they are gone
// when the process ends, however it ends, and only the page cache holds what is
// read back. Memory stays bounded: no record is held in memory.

// maxSpoolBytes bounds what the spool keeps while no copy is running; beyond it
// the spool is emptied when the last copy ends. A variable for tests.
var maxSpoolBytes int64 = 1 << 30

// spoolIdle is how long the spool is kept once no copy is running: long enough
// for the next stage of a rollout or the next wave of a bounded fan-out to read
// it, short enough that a long-lived process (the OpenTofu provider) does not keep
// records of paths that may since have been collected and built anew.
var spoolIdle = 2 * time.Minute

// spoolDir is where the spool's files are created ("": os.TempDir). For tests.
var spoolDir = ""

// spoolAloneMax is how much of one record a copy alone in the process spools
// (issue 35): past it, while no other copy runs, the record streams to its node
// only. Spooling a 1 GiB record cost a lone copy a tenth of its CPU (the write
// into the page cache and the disk's writeback) for copies that may never come; a
// later one exports the path again, and spools it if it has company. A variable
// for tests.
var spoolAloneMax int64 = 64 << 20

// exports is the process's spool.
var exports spool

type spool struct {
	mu      sync.Mutex
	entries map[string]*spoolEntry // by command and store path
	files   []*os.File
	size    int64 // bytes of the records in files
	users   int   // Exports running
	idle    *time.Timer
	// infos holds the NAR hashes asked (LocalStore.NARInfos); it is emptied
	// with the records, which were exported under the same hashes.
	infos *onceCache[map[string]NARInfo]
}

// narInfos is the cache of NAR hashes that goes with the records spooled now.
func (sp *spool) narInfos() *onceCache[map[string]NARInfo] {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.infos == nil {
		sp.infos = &onceCache[map[string]NARInfo]{}
	}
	return sp.infos
}

// spoolEntry is one path's record (the export format's NAR and trailer, without
// the leading 1), once ready is closed: in f at off, n bytes, or err when its
// producer failed (the entry is then no longer in the spool).
type spoolEntry struct {
	ready chan struct{}
	by    *producer
	f     *os.File
	off   int64
	n     int64
	err   error
}

// producer is one `nix-store --export` run (or several, for a long argv) that
// fills the entries it claimed.
type producer struct{}

func spoolKey(command, path string) string { return command + "\x00" + path }

// enter and leave bracket an Export; the last one out empties a spool grown
// beyond maxSpoolBytes.
func (sp *spool) enter() {
	sp.mu.Lock()
	sp.users++
	if sp.idle != nil {
		sp.idle.Stop()
		sp.idle = nil
	}
	sp.mu.Unlock()
}

func (sp *spool) leave() {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.users--
	if sp.users > 0 {
		return
	}
	if sp.size > maxSpoolBytes {
		sp.empty()
		return
	}
	var t *time.Timer
	t = time.AfterFunc(spoolIdle, func() {
		sp.mu.Lock()
		defer sp.mu.Unlock()
		if sp.idle == t && sp.users == 0 {
			sp.empty()
		}
	})
	sp.idle = t
}

// empty drops every record; sp.mu is held and no Export is running.
func (sp *spool) empty() {
	for _, f := range sp.files {
		_ = f.Close()
	}
	sp.files, sp.entries, sp.size, sp.idle, sp.infos = nil, nil, 0, nil, nil
}

// claim makes the caller the producer of the paths that have no entry and
// returns them with their producer (nil when every path has one).
func (sp *spool) claim(command string, paths []string) (*producer, []string) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.entries == nil {
		sp.entries = map[string]*spoolEntry{}
	}
	var pr *producer
	var claimed []string
	for _, p := range paths {
		k := spoolKey(command, p)
		if _, ok := sp.entries[k]; ok {
			continue
		}
		if pr == nil {
			pr = &producer{}
		}
		sp.entries[k] = &spoolEntry{ready: make(chan struct{}), by: pr}
		claimed = append(claimed, p)
	}
	return pr, claimed
}

func (sp *spool) entry(command, path string) *spoolEntry {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.entries[spoolKey(command, path)]
}

// newFile is a spool file, already unlinked.
func (sp *spool) newFile() (*os.File, error) {
	f, err := os.CreateTemp(spoolDir, "switchyard-export-*")
	if err != nil {
		return nil, fmt.Errorf("export spool: %w", err)
	}
	_ = os.Remove(f.Name())
	sp.mu.Lock()
	sp.files = append(sp.files, f)
	sp.mu.Unlock()
	return f, nil
}

// pending is pr's entry of path, not ready yet; sp.mu is held.
func (sp *spool) pending(command, path string, pr *producer) (*spoolEntry, error) {
	e := sp.entries[spoolKey(command, path)]
	if e == nil || e.by != pr {
		return nil, fmt.Errorf("%s was not asked for", clip(path))
	}
	select {
	case <-e.ready:
		return nil, fmt.Errorf("%s comes twice", clip(path))
	default:
	}
	return e, nil
}

// done publishes a path's record.
func (sp *spool) done(command, path string, pr *producer, f *os.File, off, n int64) error {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	e, err := sp.pending(command, path, pr)
	if err != nil {
		return err
	}
	e.f, e.off, e.n = f, off, n
	sp.size += n
	close(e.ready)
	return nil
}

// settle publishes the record of path spooled in f at off, n bytes long, or,
// dropped, takes back what of it was spooled (the next record takes its place)
// and leaves it out. It gives how far the file's next record starts past off.
func (sp *spool) settle(command, path string, pr *producer, f *os.File, off, n int64, dropped bool) (int64, error) {
	if !dropped {
		return n, sp.done(command, path, pr, f, off, n)
	}
	if err := f.Truncate(off); err != nil {
		return 0, fmt.Errorf("export spool: %w", err)
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return 0, fmt.Errorf("export spool: %w", err)
	}
	return 0, sp.leaveOut(command, path, pr)
}

// alone tells whether one Export runs: the caller's.
func (sp *spool) alone() bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.users <= 1
}

// errLeftOut is the error of an entry whose record its producer did not spool.
var errLeftOut = errors.New("left out of the spool")

// leaveOut drops pr's entry of path, which was streamed and not spooled; whoever
// waits for it exports the path itself.
func (sp *spool) leaveOut(command, path string, pr *producer) error {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	e, err := sp.pending(command, path, pr)
	if err != nil {
		return err
	}
	e.err = errLeftOut
	delete(sp.entries, spoolKey(command, path))
	close(e.ready)
	return nil
}

// recordSpool passes a record's bytes to the spool file's writer; a record that
// is streamed to a node as well is dropped once it passes spoolAloneMax bytes while
// no other copy runs.
type recordSpool struct {
	w        io.Writer
	streamed bool
	n        int64
	dropped  bool
}

func (r *recordSpool) Write(p []byte) (int, error) {
	if r.dropped {
		return len(p), nil
	}
	if r.streamed && r.n+int64(len(p)) > spoolAloneMax && exports.alone() {
		r.dropped = true
		return len(p), nil
	}
	r.n += int64(len(p))
	return r.w.Write(p)
}

// fail drops pr's entries of paths that are not ready yet; whoever waits for them
// sees err and asks again.
func (sp *spool) fail(command string, paths []string, pr *producer, err error) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	for _, p := range paths {
		k := spoolKey(command, p)
		e := sp.entries[k]
		if e == nil || e.by != pr {
			continue
		}
		select {
		case <-e.ready:
		default:
			e.err = err
			delete(sp.entries, k)
			close(e.ready)
		}
	}
}

// produce runs `nix-store --export` of paths once and puts each record into the
// spool as soon as it is complete (and, with tee, streams it there as it reads it).
// Records come in nix-store's order, which need not be the caller's. The paths not
// spooled when it ends are failed for whoever waits on them; the error is
// nix-store's or the spool's (nil when every record was read).
func (s LocalStore) produce(ctx context.Context, pr *producer, paths []string, tee io.Writer) error {
	err := s.produceRecords(ctx, pr, paths, tee)
	left := err
	if left == nil {
		left = errors.New("nix-store --export left it out")
	}
	// Whatever is not ready now never will be.
	exports.fail(s.Command, paths, pr, left)
	return err
}

// produceRecords spools the records of paths as nix-store exports them; with tee,
// each record (after its leading 1) also goes to tee as it is read: the export
// streamed to one copy while it is kept for the others.
func (s LocalStore) produceRecords(ctx context.Context, pr *producer, paths []string, tee io.Writer) error {
	argvs, err := exportArgvs(s.Command, paths)
	if err != nil {
		return err
	}
	f, err := exports.newFile()
	if err != nil {
		return err
	}
	var off int64
	out := bufio.NewWriterSize(f, bufSize)
	// What goes to tee is buffered and passed on when nix-store has nothing more
	// ready (its output pipe is empty) or the buffer fills: the copy reading tee
	// then sends many small records in one write to the node, not one each (a
	// packet per path of a closure of many small paths), and still every record
	// nix-store has produced while it is busy with the next.
	var teeBuf *bufio.Writer
	if tee != nil {
		teeBuf = bufio.NewWriterSize(tee, bufSize)
		tee = teeBuf
	}
	for _, argv := range argvs {
		// The export is read straight from nix-store's output pipe: a copy that
		// reads it slower than nix-store writes it (a node that takes its time)
		// must not lose its tail when nix-store has written everything and exited.
		cmd, stdout, stderr, startErr := startReading(ctx, argv)
		if startErr != nil {
			return startErr
		}
		src := bufio.NewReaderSize(stdout, bufSize)
		err := func() error {
			for {
				marker, err := readUint64(src)
				if err != nil {
					return fmt.Errorf("%s %s: %w", argv[0], argv[1], noEOF(err))
				}
				if marker == 0 {
					return nil
				}
				if marker != 1 {
					return fmt.Errorf("%s %s: %d where 1 or 0 belongs", argv[0], argv[1], marker)
				}
				// A record streamed to a node may be left out of the spool.
				rec := &recordSpool{w: out, streamed: tee != nil}
				var dst io.Writer = rec
				if tee != nil {
					if _, err := tee.Write(one[:]); err != nil {
						return err
					}
					dst = io.MultiWriter(rec, tee)
				}
				cw := &countingWriter{w: dst, n: new(int64)}
				if err := forwardNAR(src, cw); err != nil {
					return fmt.Errorf("%s %s: %w", argv[0], argv[1], err)
				}
				t, err := readTrailer(src, maxSpoolRefs)
				if err != nil {
					return fmt.Errorf("%s %s: %w", argv[0], argv[1], err)
				}
				enc := &encoder{w: bufio.NewWriterSize(cw, 4096)}
				writeTrailer(enc, t)
				if err := enc.flush(); err != nil {
					return fmt.Errorf("export spool: %w", err)
				}
				if err := out.Flush(); err != nil {
					return fmt.Errorf("export spool: %w", err)
				}
				n, err := exports.settle(s.Command, t.Path, pr, f, off, *cw.n, rec.dropped)
				if err != nil {
					return fmt.Errorf("%s %s: %w", argv[0], argv[1], err)
				}
				off += n
				if teeBuf != nil && src.Buffered() == 0 {
					if err := teeBuf.Flush(); err != nil {
						return err
					}
				}
			}
		}()
		if err == nil && teeBuf != nil {
			err = teeBuf.Flush()
		}
		if err == nil {
			if _, rerr := src.ReadByte(); rerr == nil {
				err = fmt.Errorf("%s %s: data after the end of the export", argv[0], argv[1])
			}
		}
		// Reading stopped: a nix-store that still writes ends on its closed pipe.
		_ = stdout.Close()
		runErr := waitFor(ctx, cmd, argv, stderr)
		switch {
		case err == nil:
			if runErr != nil {
				return runErr
			}
		case runErr != nil && (errors.Is(err, io.ErrUnexpectedEOF) || ctx.Err() != nil):
			// nix-store's own words say why its output broke off.
			return runErr
		default:
			return err
		}
	}
	return nil
}

// one is the export format's marker before each record.
var one = [8]byte{1}

// maxSpoolRefs bounds the references of one path in a spooled record; the copy
// checks them again against its closure.
const maxSpoolRefs = 1 << 20

// Export writes paths to w in the export format of `nix-store --export`: in
// nix-store's order when this Export produces every one of them itself (streamed as
// nix-store writes it), else in their order. A path's record is produced once per process: the first Export
// that needs it runs nix-store for it (for every path it needs that no one has
// produced or is producing), and every Export of the same path, also a
// concurrent one, reads that record. An Export whose producer failed fails; one
// that waited for another's failed producer produces the paths itself.
func (s LocalStore) Export(ctx context.Context, paths []string, w io.Writer) error {
	if _, err := exportArgvs(s.Command, paths); err != nil {
		return err
	}
	exports.enter()
	defer exports.leave()
	pctx, cancel := context.WithCancel(ctx)
	mine := map[*producer]bool{}
	var producers sync.WaitGroup
	defer producers.Wait()
	defer cancel()
	start := func(from []string) {
		if pr, claimed := exports.claim(s.Command, from); pr != nil {
			mine[pr] = true
			producers.Add(1)
			go func() {
				defer producers.Done()
				_ = s.produce(pctx, pr, claimed, nil)
			}()
		}
	}
	if pr, claimed := exports.claim(s.Command, paths); pr != nil && len(claimed) == len(paths) {
		// No one else has or makes any of them (a single copy, a fleet's first):
		// nix-store's export goes to w as it is read, in its order (every path after
		// the paths it references), and into the spool for the copies after this one.
		if err := s.produce(pctx, pr, claimed, w); err != nil {
			return err
		}
		_, err := w.Write(make([]byte, 8))
		return err
	} else if pr != nil {
		mine[pr] = true
		producers.Add(1)
		go func() {
			defer producers.Done()
			_ = s.produce(pctx, pr, claimed, nil)
		}()
	}
	// Records already spooled go out together, in writes of up to bufSize; what
	// is buffered is passed on before waiting for a record still being produced.
	bw := bufio.NewWriterSize(w, bufSize)
	w = bw
	for i, p := range paths {
		for {
			e := exports.entry(s.Command, p)
			if e != nil {
				select {
				case <-e.ready:
				default:
					if err := bw.Flush(); err != nil {
						return err
					}
				}
			}
			if e == nil {
				// Its producer failed meanwhile: this Export produces what is left.
				start(paths[i:])
				continue
			}
			select {
			case <-e.ready:
			case <-ctx.Done():
				return ctx.Err()
			}
			if e.err != nil {
				if mine[e.by] || ctx.Err() != nil {
					return e.err
				}
				continue
			}
			if _, err := w.Write(one[:]); err != nil {
				return err
			}
			if _, err := io.Copy(w, io.NewSectionReader(e.f, e.off, e.n)); err != nil {
				return err
			}
			break
		}
	}
	if _, err := w.Write(make([]byte, 8)); err != nil {
		return err
	}
	return bw.Flush()
}
