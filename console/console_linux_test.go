package console

import (
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// A real pseudo-terminal is taken for one, with its width.
func TestDetectTerminalOnPTY(t *testing.T) {
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	defer ptm.Close()
	fd := int(ptm.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlocking the pty: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("the pty's number: %v", err)
	}
	pts, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("opening the pty's terminal: %v", err)
	}
	defer pts.Close()
	if err := unix.IoctlSetWinsize(int(pts.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 77}); err != nil {
		t.Fatalf("setting the width: %v", err)
	}
	t.Setenv("TERM", "xterm")
	term := Detect(pts)
	if term == nil {
		t.Fatal("a pty is not taken for a terminal")
	}
	if w := term.Width(); w != 77 {
		t.Errorf("width %d, want 77", w)
	}
	t.Setenv("TERM", "dumb")
	if Detect(pts) != nil {
		t.Errorf("TERM=dumb: still a terminal")
	}
}
