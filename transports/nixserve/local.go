package nixserve

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// LocalStore is the Store of this machine's Nix, through the nix-store command:
// `nix-store --query --requisites` for the closure (printed in dependency order),
// `nix-store --dump-db` for the NAR hashes and sizes of the missing paths, and
// `nix-store --export` for the missing paths, each path's record produced
// once per process and shared by every copy (spool.go). nix-store checks each
// path's contents against its recorded hash as it exports it.
type LocalStore struct {
	// Command is the nix-store program; "" is "nix-store" from PATH.
	Command string
}

var _ Store = LocalStore{}

// maxArgBytes bounds the store paths of one nix-store command line, far below the
// kernel's limit; more paths take several commands. A variable for tests.
var maxArgBytes = 128 << 10

// requisitesArgvs are the commands that print the closure of paths, every path
// after the paths it references.
func requisitesArgvs(command string, paths []string) ([][]string, error) {
	return chunkedArgvs(command, []string{"--query", "--requisites"}, paths)
}

// exportArgvs are the commands that export paths. Each exports its share in
// dependency order and ends it with 0.
func exportArgvs(command string, paths []string) ([][]string, error) {
	return chunkedArgvs(command, []string{"--export"}, paths)
}

// chunkedArgvs builds `command op... paths...` with the paths split over as many
// command lines as maxArgBytes needs, in their order. Every path must be a store
// path (so none can be read as an option).
func chunkedArgvs(command string, op, paths []string) ([][]string, error) {
	if command == "" {
		command = "nix-store"
	}
	if len(paths) == 0 {
		return nil, errors.New("no store paths")
	}
	var argvs [][]string
	var cur []string
	size := 0
	for _, p := range paths {
		if err := checkStorePath(p); err != nil {
			return nil, err
		}
		if cur != nil && size+len(p)+1 > maxArgBytes {
			argvs = append(argvs, cur)
			cur = nil
		}
		if cur == nil {
			cur = append([]string{command}, op...)
			size = 0
		}
		cur = append(cur, p)
		size += len(p) + 1
	}
	return append(argvs, cur), nil
}

// Closure runs `nix-store --query --requisites paths...` and returns the paths it
// prints, in its order: every path after the paths it references. The closure of
// valid store paths never changes, so a process asks nix-store once per set of
// paths: the nodes of a fleet that share a toplevel share one query (issue 14: one
// query per run, not per node), concurrent callers waiting for the first.
func (s LocalStore) Closure(ctx context.Context, paths []string) ([]string, error) {
	key := s.Command + "\x00" + strings.Join(paths, "\x00")
	c, err := closures.get(ctx, key, func() ([]string, error) { return s.closure(ctx, paths) })
	return slices.Clone(c), err
}

// NARInfos runs `nix-store --dump-db paths...` (one process for all of them, or
// several for a long argv) and returns the NAR hash (hexadecimal) and size it
// prints of each path. Like the closure, the answer is shared by the concurrent
// and later copies of the same paths (a fleet's nodes that lack the same paths
// share one query), but only as long as the spool keeps the paths' exports: a
// path collected and built anew may have another NAR.
func (s LocalStore) NARInfos(ctx context.Context, paths []string) (map[string]NARInfo, error) {
	key := s.Command + "\x00" + strings.Join(paths, "\x00")
	m, err := exports.narInfos().get(ctx, key, func() (map[string]NARInfo, error) { return s.narInfos(ctx, paths) })
	return maps.Clone(m), err
}

// dumpDBArgvs are the commands that print the database records of paths.
func dumpDBArgvs(command string, paths []string) ([][]string, error) {
	return chunkedArgvs(command, []string{"--dump-db"}, paths)
}

// narInfos is NARInfos without the cache.
func (s LocalStore) narInfos(ctx context.Context, paths []string) (map[string]NARInfo, error) {
	// chunkedArgvs refuses an empty list: `nix-store --dump-db` without paths
	// dumps the whole database.
	argvs, err := dumpDBArgvs(s.Command, paths)
	if err != nil {
		return nil, err
	}
	infos := make(map[string]NARInfo, len(paths))
	for _, argv := range argvs {
		var out bytes.Buffer
		if err := run(ctx, argv, &out); err != nil {
			return nil, err
		}
		if err := readDumpDB(out.String(), infos); err != nil {
			return nil, fmt.Errorf("%s %s: %w", argv[0], argv[1], err)
		}
	}
	for _, p := range paths {
		if _, ok := infos[p]; !ok {
			return nil, fmt.Errorf("%s --dump-db: no record of %s", s.Command, p)
		}
	}
	return infos, nil
}

// readDumpDB reads the records `nix-store --dump-db` prints (Nix's
// makeValidityRegistration with hash and deriver): per path a line each for the
// path, the NAR's SHA-256 in hexadecimal, the NAR's size, the deriver ("" when
// unknown), the number of references, then a line per reference.
func readDumpDB(out string, infos map[string]NARInfo) error {
	lines := strings.Split(out, "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	for i := 0; i < len(lines); {
		if len(lines)-i < 5 {
			return fmt.Errorf("a record cut short after %q", clip(lines[i]))
		}
		p, hash, size, refs := lines[i], lines[i+1], lines[i+2], lines[i+4]
		if err := checkStorePath(p); err != nil {
			return err
		}
		if !isHex(hash, 64) {
			return fmt.Errorf("NAR hash of %s: %q is not a SHA-256 in hexadecimal", p, clip(hash))
		}
		n, err := strconv.ParseUint(size, 10, 64)
		if err != nil || n == 0 {
			return fmt.Errorf("NAR size of %s: %q", p, clip(size))
		}
		k, err := strconv.Atoi(refs)
		if err != nil || k < 0 || k > len(lines)-i-5 {
			return fmt.Errorf("references of %s: %q", p, clip(refs))
		}
		infos[p] = NARInfo{Hash: hash, Size: n, Deriver: lines[i+3], References: lines[i+5 : i+5+k], HasTrailer: true}
		i += 5 + k
	}
	return nil
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

// onceCache holds the answers of queries of the local store asked in this
// process, one per key, filled by the first caller while later ones wait; a
// failed answer is not kept.
type onceCache[T any] struct {
	mu      sync.Mutex
	entries map[string]*onceEntry[T]
	order   []string // oldest first, to bound the cache
}

type onceEntry[T any] struct {
	ready chan struct{} // closed when val and err are set
	val   T
	err   error
}

// maxClosures bounds the answers kept: a run deploys a handful of toplevels.
const maxClosures = 64

var closures onceCache[[]string]

// get gives key's answer, filled by fill when no one has it or is filling it.
func (c *onceCache[T]) get(ctx context.Context, key string, fill func() (T, error)) (T, error) {
	for {
		e, first := c.entry(key)
		if first {
			e.val, e.err = fill()
			c.done(key, e)
		} else {
			select {
			case <-e.ready:
			case <-ctx.Done():
				var zero T
				return zero, ctx.Err()
			}
		}
		if e.err == nil {
			return e.val, nil
		}
		if first || ctx.Err() != nil {
			var zero T
			return zero, e.err
		}
		// The first caller failed (its context, perhaps): ask again.
	}
}

// entry is key's entry, and whether the caller is the first, who must fill it.
func (c *onceCache[T]) entry(key string) (*onceEntry[T], bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok {
		return e, false
	}
	if c.entries == nil {
		c.entries = map[string]*onceEntry[T]{}
	}
	e := &onceEntry[T]{ready: make(chan struct{})}
	c.entries[key] = e
	c.order = append(c.order, key)
	if len(c.order) > maxClosures {
		delete(c.entries, c.order[0])
		c.order = c.order[1:]
	}
	return e, true
}

// done publishes e; a failed one is dropped so the next caller asks again.
func (c *onceCache[T]) done(key string, e *onceEntry[T]) {
	c.mu.Lock()
	if e.err != nil && c.entries[key] == e {
		delete(c.entries, key)
		c.order = slices.DeleteFunc(c.order, func(k string) bool { return k == key })
	}
	c.mu.Unlock()
	close(e.ready)
}

// closure is Closure without the cache.
func (s LocalStore) closure(ctx context.Context, paths []string) ([]string, error) {
	argvs, err := requisitesArgvs(s.Command, paths)
	if err != nil {
		return nil, err
	}
	var closure []string
	seen := map[string]bool{}
	for _, argv := range argvs {
		var out bytes.Buffer
		if err := run(ctx, argv, &out); err != nil {
			return nil, err
		}
		// A later command's paths keep the order: the ones an earlier command
		// printed already came before them.
		for _, line := range strings.Split(out.String(), "\n") {
			if line = strings.TrimSpace(line); line != "" && !seen[line] {
				seen[line] = true
				closure = append(closure, line)
			}
		}
	}
	return closure, nil
}

// run runs argv with its standard output to stdout; its error holds the last line
// of the command's standard error.
func run(ctx context.Context, argv []string, stdout io.Writer) error {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stderr tail
	cmd.Stdout, cmd.Stderr = stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	return cmdError(ctx, argv, cmd.Run(), &stderr)
}

// startReading starts argv with its standard output a pipe the caller reads
// (then calls waitFor): no goroutine between the two, so however long the
// reader takes, nothing of the output is lost when the command has exited.
func startReading(ctx context.Context, argv []string) (*exec.Cmd, io.ReadCloser, *tail, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	stderr := &tail{}
	cmd.Stderr = stderr
	cmd.WaitDelay = 5 * time.Second
	stdout, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		return nil, nil, nil, cmdError(ctx, argv, err, stderr)
	}
	return cmd, stdout, stderr, nil
}

// waitFor waits for a command of startReading.
func waitFor(ctx context.Context, cmd *exec.Cmd, argv []string, stderr *tail) error {
	return cmdError(ctx, argv, cmd.Wait(), stderr)
}

// cmdError is the error of running argv: nil, ctx's error, or err with the last
// line of the command's standard error.
func cmdError(ctx context.Context, argv []string, err error, stderr *tail) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%s %s: %w", argv[0], argv[1], ctx.Err())
	}
	msg := fmt.Sprintf("%s %s: %v", argv[0], argv[1], err)
	if last := stderr.lastLine(); last != "" {
		msg += ": " + last
	}
	return errors.New(msg)
}

// tail keeps the last 4 KiB written to it.
type tail struct{ b []byte }

func (t *tail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if over := len(t.b) - 4096; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tail) lastLine() string {
	sc := bufio.NewScanner(bytes.NewReader(bytes.ToValidUTF8(t.b, nil)))
	last := ""
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			last = l
		}
	}
	return last
}
