package nixserve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"sync"
)

// Long paths whose references the node already holds go to it before the export
// starts, each NAR read from `nix-store --dump` straight into the connection
// (issue 35: the 1 GiB case). `nix-store --export` hashes every NAR it writes to
// check it against the store's record: for 1 GiB, 0.7 s of the deployer's CPU
// that the copy's cores then lack. A NAR sent with cmdAddToStoreNar is checked by
// the node against the hash and size the command announces (LocalStore::addToStore
// refuses a mismatch, as it does for `nix copy`, which reads NARs the same way);
// so the check happens once, where the path lands. The dumped NAR passes no
// parser here either: its length is the store's record, and exactly that many
// bytes go out.
//
// Only paths whose references are all valid on the node qualify: a path that
// refers to a missing one must follow it, and the export's records come in an
// order of their own. A data file, a firmware tree, an archive, or a new package
// on a node that holds its dependencies qualifies; cmdImportPaths (older nodes)
// never dumps, as its node takes the NAR's hash from the NAR itself.

// dumpMin is the NAR size from which a path qualifies: a `nix-store --dump` costs
// about 15 ms to start, what the export's check costs for some 16 MiB. A
// variable for tests.
var dumpMin uint64 = 16 << 20

// narOpener is a Store that can stream one path's NAR without its export record.
type narOpener interface {
	// OpenNAR streams path's NAR; Close ends the reading and gives the
	// producer's error.
	OpenNAR(ctx context.Context, path string) (io.ReadCloser, error)
}

var _ narOpener = LocalStore{}

// OpenNAR streams path's NAR as `nix-store --dump` writes it (not checked against
// the store's hash: see dumpMin's comment). Close waits for nix-store.
func (s LocalStore) OpenNAR(ctx context.Context, path string) (io.ReadCloser, error) {
	if err := checkStorePath(path); err != nil {
		return nil, err
	}
	command := s.Command
	if command == "" {
		command = "nix-store"
	}
	argv := []string{command, "--dump", path}
	cmd, stdout, stderr, err := startReading(ctx, argv)
	if err != nil {
		return nil, err
	}
	return &dumpReader{ReadCloser: stdout, close: func() error {
		_ = stdout.Close()
		return waitFor(ctx, cmd, argv, stderr)
	}}, nil
}

type dumpReader struct {
	io.ReadCloser
	close func() error
}

func (r *dumpReader) Close() error { return r.close() }

// dumpable gives the missing paths a copy sends from their dumps, in missing's
// order: at least dumpMin long, with the export trailer's fields recorded, and
// every reference valid on the node.
func dumpable(missing []string, valid map[string]bool, infos map[string]NARInfo) []string {
	var out []string
	for _, p := range missing {
		info, ok := infos[p]
		if !ok || !info.HasTrailer || info.Size < dumpMin {
			continue
		}
		held := true
		for _, ref := range info.References {
			if ref != p && !valid[ref] {
				held = false
				break
			}
		}
		if held {
			out = append(out, p)
		}
	}
	return out
}

// firstInfos gives the store's records for a copy of missing: the closure's,
// asked early, when they are here; else whichever comes first of them and the
// records of missing alone (a few paths of a large closure come back sooner).
// wait returns once the query it started has ended (cancel ctx first).
func firstInfos(ctx context.Context, local Store, missing []string, early <-chan infosResult) (_ <-chan infosResult, wait func()) {
	select {
	case r := <-early:
		return resent(r), func() {}
	default:
	}
	var wg sync.WaitGroup
	wg.Add(2)
	mine := make(chan infosResult, 1)
	go func() {
		defer wg.Done()
		m, err := local.NARInfos(ctx, missing)
		mine <- infosResult{m, err}
	}()
	out := make(chan infosResult, 1)
	go func() {
		defer wg.Done()
		select {
		case r := <-early:
			out <- r
		case r := <-mine:
			out <- r
		case <-ctx.Done():
			out <- infosResult{nil, ctx.Err()}
		}
	}()
	return out, wg.Wait
}

// resent is a channel that holds r.
func resent(r infosResult) <-chan infosResult {
	ch := make(chan infosResult, 1)
	ch <- r
	return ch
}

// dumpPlan is how a pipelined copy sends its missing paths: long ones from their
// dumps first, then the rest from the export, with the store's records (infos)
// passed on to the export's forwarder.
type dumpPlan struct {
	long, rest []string
	infos      map[string]NARInfo
	ch         <-chan infosResult
	opener     narOpener // the store, when it can dump
}

// planDumps waits for the store's records when the store can dump, and splits
// missing.
func planDumps(ctx context.Context, local Store, missing []string, valid map[string]bool, infos <-chan infosResult) (dumpPlan, error) {
	opener, ok := local.(narOpener)
	if !ok {
		return dumpPlan{rest: missing, ch: infos}, nil
	}
	var r infosResult
	select {
	case r = <-infos:
	case <-ctx.Done():
		return dumpPlan{}, ctx.Err()
	}
	plan := dumpPlan{rest: missing, ch: resent(r), opener: opener}
	if r.err != nil {
		return plan, nil // the forwarder reports it, at its first held path
	}
	plan.infos = r.infos
	plan.long = dumpable(missing, valid, r.infos)
	if len(plan.long) > 0 {
		skip := make(map[string]bool, len(plan.long))
		for _, p := range plan.long {
			skip[p] = true
		}
		plan.rest = notIn(missing, skip)
	}
	return plan, nil
}

// sendDumped writes cmdAddToStoreNar for each of plan's long paths with its NAR
// read from the store's dump, exactly the size the store records, and gives each
// to sent. It gives the path it failed on.
func sendDumped(ctx context.Context, enc *encoder, plan dumpPlan, sent chan<- string, st *Stats) (string, error) {
	for _, p := range plan.long {
		info := plan.infos[p]
		nar, err := plan.opener.OpenNAR(ctx, p)
		if err != nil {
			return p, fmt.Errorf("local store: %w", err)
		}
		writeAddToStoreNar(enc, trailer{Path: p, References: info.References, Deriver: info.Deriver}, info)
		if enc.err != nil {
			_ = nar.Close()
			return p, enc.err
		}
		if err := copyExactly(enc, nar, p, info.Size); err != nil {
			_ = nar.Close()
			return p, err
		}
		if err := nar.Close(); err != nil {
			return p, fmt.Errorf("local store: %w", err)
		}
		st.Sent++
		st.Dumped++
		sent <- p
	}
	return "", nil
}

// copyExactly copies size bytes of nar to the node and checks that nar ends
// there: the node reads the NAR by the size its command announced.
func copyExactly(enc *encoder, nar io.Reader, path string, size uint64) error {
	n, err := io.CopyN(enc.w, nar, int64(size))
	var we *writeError
	switch {
	case errors.As(err, &we):
		enc.err = err
		return err
	case err == io.EOF:
		return fmt.Errorf("local store: the NAR of %s has %d bytes, the store records %d", path, n, size)
	case err != nil:
		return fmt.Errorf("local store: NAR of %s: %w", path, err)
	}
	var one [1]byte
	if k, _ := io.ReadFull(nar, one[:]); k > 0 {
		return fmt.Errorf("local store: the NAR of %s is longer than the %d bytes the store records", path, size)
	}
	return nil
}

// withDumped is valid with the dumped paths added: the export's paths may refer
// to them.
func withDumped(valid map[string]bool, long []string) map[string]bool {
	if len(long) == 0 {
		return valid
	}
	m := maps.Clone(valid)
	for _, p := range long {
		m[p] = true
	}
	return m
}
