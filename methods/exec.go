package methods

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/plan"
	"github.com/switchyard-nix/switchyard/pool"
)

// execCapture bounds what exec keeps of one node's stdout and of its stderr: the
// transport already stops a command past 64 MiB, but a fleet's answers are held until
// each node is done, so a node's share is smaller (SPEC 6.9: a node's answer may be
// hostile).
const execCapture = 1 << 20

// ExitUnreachable is exec's exit code for a node the command could not be run on
// (unreachable, refused, no status): ssh's own code for a connection that failed.
const ExitUnreachable = 255

// exec is the exec verb: argv run on every planned node at once (the method's
// parallel width), each node's output reported when it is done, and the exit code the
// highest of the nodes'.
func (f *fleet) exec(ctx context.Context, argv []string) int {
	codes := pool.Map(ctx, f.p.Nodes, f.width(), func(ctx context.Context, n *plan.Node) int {
		return f.execNode(ctx, n, argv)
	})
	code, ok := ExitOK, 0
	for _, c := range codes {
		code = max(code, c)
		if c == ExitOK {
			ok++
		}
	}
	f.out.Summary(len(f.p.Nodes), ok, len(f.p.Nodes)-ok, code)
	return code
}

func (f *fleet) execNode(ctx context.Context, n *plan.Node, argv []string) int {
	t, err := f.open(n)
	if err != nil {
		f.out.Log(n.Name, "error", fmt.Sprintf("%s: exec: %v", n.Name, err))
		return ExitUnreachable
	}
	defer t.Close()
	var stdout, stderr capped
	code, err := t.Run(ctx, effects.Command{Argv: argv, Stdout: &stdout, Stderr: &stderr})
	if err != nil {
		f.out.Log(n.Name, "error", fmt.Sprintf("%s: exec: %v", n.Name, err))
		return ExitUnreachable
	}
	f.out.Exec(n.Name, code, stdout.String(), stderr.String())
	return code
}

// capped keeps the first execCapture bytes written to it and says how many it dropped.
type capped struct {
	buf     bytes.Buffer
	dropped int64
}

var _ io.Writer = (*capped)(nil)

func (c *capped) Write(p []byte) (int, error) {
	room := execCapture - c.buf.Len()
	if room >= len(p) {
		return c.buf.Write(p)
	}
	c.buf.Write(p[:max(room, 0)])
	c.dropped += int64(len(p) - max(room, 0))
	return len(p), nil
}

func (c *capped) String() string {
	if c.dropped == 0 {
		return c.buf.String()
	}
	return fmt.Sprintf("%s\n[switchyard: %d more bytes not kept]\n", c.buf.String(), c.dropped)
}
