package console

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// Terminal is what a Block needs of the terminal it draws on.
type Terminal struct {
	// Width is the terminal's columns, 0 when unknown: a line longer than that would
	// wrap into two rows and the next redraw's cursor-up count would be off.
	Width func() int
	Now   func() time.Time // time.Now; a fixed clock in tests
	// Tick is how often the block is redrawn between changes, so elapsed times move
	// during a long step; 0: only on changes.
	Tick time.Duration
}

// Detect is the terminal on w, or nil when w is not one (or TERM is dumb). A TIOCGWINSZ
// that succeeds means a terminal (a regular file, a pipe or /dev/null answer ENOTTY),
// and it gives the width.
func Detect(w io.Writer) *Terminal {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("TERM") == "dumb" {
		return nil
	}
	fd := int(f.Fd())
	if _, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ); err != nil {
		return nil
	}
	return &Terminal{
		Width: func() int {
			ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ)
			if err != nil {
				return 0
			}
			return int(ws.Col)
		},
		Now:  time.Now,
		Tick: time.Second,
	}
}

// Block is the status lines at the bottom of a terminal. It has no lock of its own:
// every method is called with the owner's lock held, the one New is given, which the
// tick takes too (the lines are the owner's state).
type Block struct {
	w      io.Writer
	term   *Terminal
	lock   sync.Locker
	render func() []string // the lines, read under lock
	drawn  int             // lines currently on the terminal
	stop   chan struct{}
}

// New is a block drawn on w, a terminal, with the lines render gives.
func New(w io.Writer, term *Terminal, lock sync.Locker, render func() []string) *Block {
	return &Block{w: w, term: term, lock: lock, render: render}
}

// Redraw rewrites the block in place: up to its first line, each line cleared and
// written again. The first call starts the tick.
func (b *Block) Redraw() {
	if b.drawn > 0 {
		fmt.Fprintf(b.w, "\x1b[%dA", b.drawn)
	}
	lines := b.render()
	for _, l := range lines {
		fmt.Fprintf(b.w, "\r\x1b[K%s\n", b.fit(l))
	}
	b.drawn = len(lines)
	b.startTick()
}

// Above writes text to w above the block: the block is erased, the text written, and
// the block drawn again below it (w may be the terminal or another writer on it).
func (b *Block) Above(w io.Writer, text string) {
	if b.drawn > 0 {
		fmt.Fprintf(b.w, "\x1b[%dA\x1b[J", b.drawn)
		b.drawn = 0
	}
	fmt.Fprint(w, text)
	if len(b.render()) > 0 {
		b.Redraw()
	}
}

// Release draws the block a last time and leaves it where it is: what is printed
// next goes below it, and the tick stops.
func (b *Block) Release() {
	b.stopTick()
	if b.drawn > 0 {
		b.Redraw()
		b.stopTick()
	}
	b.drawn = 0
}

func (b *Block) fit(line string) string {
	w := 0
	if b.term.Width != nil {
		w = b.term.Width()
	}
	if w <= 1 || utf8.RuneCountInString(line) < w {
		return line
	}
	return string([]rune(line)[:w-1])
}

func (b *Block) startTick() {
	if b.stop != nil || b.term.Tick <= 0 {
		return
	}
	t := time.NewTicker(b.term.Tick)
	stop := make(chan struct{})
	b.stop = stop
	go func() {
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				b.lock.Lock()
				select {
				case <-stop: // released while this tick waited for the lock
				default:
					if b.drawn > 0 {
						b.Redraw()
					}
				}
				b.lock.Unlock()
			}
		}
	}()
}

func (b *Block) stopTick() {
	if b.stop != nil {
		close(b.stop)
		b.stop = nil
	}
}

// Bytes is n in binary units, as a person reads sizes.
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
