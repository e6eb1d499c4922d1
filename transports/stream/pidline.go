package stream

import (
	"bytes"
	"io"
	"strconv"
	"sync"
)

// PIDPrefix starts the line a remote command line writes first on stderr to
// tell the transport its process id (so that a cancel can kill its process
// group); PIDLine takes that line out of the stream.
const PIDPrefix = "switchyard-pid "

// PIDLine passes a stream to w without its first line of the form
// "switchyard-pid <digits>\n" and keeps the number. Lines before it (a login
// shell's rc files may write some) pass through; a partial line that may still
// become the marker is held until it is told apart. Safe for concurrent use.
type PIDLine struct {
	mu      sync.Mutex
	w       io.Writer
	held    []byte // the current line so far, while it may be the marker
	midLine bool   // the current line is not the marker and was passed on in part
	pid     int
	ready   chan struct{}
}

// NewPIDLine strips the pid line out of what is written to w (nil: discarded).
func NewPIDLine(w io.Writer) *PIDLine {
	if w == nil {
		w = io.Discard
	}
	return &PIDLine{w: w, ready: make(chan struct{})}
}

// Ready is closed once the pid line has been read.
func (p *PIDLine) Ready() <-chan struct{} { return p.ready }

// PID is the number of the pid line; 0 before Ready is closed.
func (p *PIDLine) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pid
}

func (p *PIDLine) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(b)
	for len(b) > 0 {
		if p.pid != 0 {
			_, err := p.w.Write(b)
			return n, err
		}
		nl := bytes.IndexByte(b, '\n')
		if p.midLine {
			end := len(b)
			if nl >= 0 {
				end = nl + 1
				p.midLine = false
			}
			if _, err := p.w.Write(b[:end]); err != nil {
				return n, err
			}
			b = b[end:]
			continue
		}
		if nl < 0 {
			p.held = append(p.held, b...)
			b = nil
			if !maybePIDLine(p.held) {
				p.midLine = true
				if err := p.flushHeld(); err != nil {
					return n, err
				}
			}
			continue
		}
		p.held = append(p.held, b[:nl+1]...)
		b = b[nl+1:]
		if pid, ok := parsePIDLine(p.held); ok {
			p.pid, p.held = pid, nil
			close(p.ready)
			continue
		}
		if err := p.flushHeld(); err != nil {
			return n, err
		}
	}
	return n, nil
}

// Flush passes on a held partial line: the stream has ended without the
// marker line's newline.
func (p *PIDLine) Flush() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.flushHeld()
}

func (p *PIDLine) flushHeld() error {
	if len(p.held) == 0 {
		return nil
	}
	_, err := p.w.Write(p.held)
	p.held = nil
	return err
}

// maxPIDDigits bounds the number of a pid line (a Linux pid has at most 7 digits).
const maxPIDDigits = 10

// maybePIDLine tells whether b (no newline yet) may still become a pid line.
func maybePIDLine(b []byte) bool {
	if len(b) <= len(PIDPrefix) {
		return bytes.HasPrefix([]byte(PIDPrefix), b)
	}
	digits := b[len(PIDPrefix):]
	return bytes.HasPrefix(b, []byte(PIDPrefix)) && len(digits) <= maxPIDDigits && allDigits(digits)
}

// parsePIDLine reads a whole line "switchyard-pid <digits>\n".
func parsePIDLine(line []byte) (int, bool) {
	digits, ok := bytes.CutPrefix(bytes.TrimSuffix(line, []byte("\n")), []byte(PIDPrefix))
	if !ok || len(digits) == 0 || len(digits) > maxPIDDigits || !allDigits(digits) {
		return 0, false
	}
	pid, err := strconv.Atoi(string(digits))
	if err != nil || pid <= 1 {
		return 0, false
	}
	return pid, true
}

func allDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
