package ssh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// copyInvocation is everything nix-copy-closure needs to reach the node with its
// host key checked exactly as the transport checks it.
type copyInvocation struct {
	User, Host        string
	Port              int
	KnownHostsFile    string   // the only known_hosts file ssh(1) reads
	HostKeyAlgorithms []string // the key types recorded for the node
	KeyFiles          []string
	ConnectTimeout    time.Duration
	Paths             []string
}

// command builds the argv of nix-copy-closure and the environment it adds
// (NIX_SSHOPTS). Nix splits NIX_SSHOPTS at whitespace without quoting, so a value
// holding whitespace is refused; the error never names a key file.
func (c copyInvocation) command() (argv, env []string, err error) {
	if len(c.Paths) == 0 {
		return nil, nil, errors.New("no store paths to copy")
	}
	for _, p := range c.Paths {
		if !strings.HasPrefix(p, "/") || hasSpace(p) {
			return nil, nil, fmt.Errorf("%q is not a store path", p)
		}
	}
	if c.KnownHostsFile == "" || len(c.HostKeyAlgorithms) == 0 {
		return nil, nil, errors.New("no known host key to check the copy against")
	}
	if hasSpace(c.KnownHostsFile) {
		return nil, nil, errors.New("the known_hosts file's path holds whitespace, which NIX_SSHOPTS cannot carry")
	}
	opts := []string{
		"-p", strconv.Itoa(c.Port),
		"-o", "BatchMode=yes",
		"-o", "StrictHostKeyChecking=yes",
		"-o", "UserKnownHostsFile=" + c.KnownHostsFile,
		"-o", "GlobalKnownHostsFile=/dev/null",
		"-o", "HostKeyAlgorithms=" + strings.Join(c.HostKeyAlgorithms, ","),
	}
	if c.ConnectTimeout > 0 {
		secs := int64((c.ConnectTimeout + time.Second - 1) / time.Second)
		opts = append(opts, "-o", "ConnectTimeout="+strconv.FormatInt(secs, 10))
	}
	for i, key := range c.KeyFiles {
		if hasSpace(key) {
			return nil, nil, fmt.Errorf("the path of key file %d of %d holds whitespace, which NIX_SSHOPTS cannot carry", i+1, len(c.KeyFiles))
		}
		opts = append(opts, "-i", key)
	}
	argv = append([]string{"nix-copy-closure", "--to", c.User + "@" + c.Host}, c.Paths...)
	env = []string{"NIX_SSHOPTS=" + strings.Join(opts, " ")}
	return argv, env, nil
}

func hasSpace(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0
}

// CopyClosure makes paths and their closures valid on the node with the reference
// tool, nix-copy-closure (which sends only what the node is missing), over ssh(1)
// checking the same host key. The transport's own connection is made first, so a
// host key mismatch refuses the node (effects.ErrRefused) before anything is sent.
func (t *Transport) CopyClosure(ctx context.Context, paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	if _, _, err := t.conn(ctx); err != nil {
		return err
	}
	algos, err := t.hostKeyAlgorithms()
	if err != nil {
		return err
	}
	inv := copyInvocation{
		User: t.cfg.User, Host: t.cfg.Host, Port: t.cfg.Port,
		KnownHostsFile:    t.cfg.KnownHostsFile,
		HostKeyAlgorithms: algos,
		KeyFiles:          t.cfg.KeyFiles,
		ConnectTimeout:    t.cfg.DialTimeout,
		Paths:             paths,
	}
	if t.pinned != nil {
		dir, err := os.MkdirTemp("", "switchyard-known-hosts")
		if err != nil {
			return fmt.Errorf("copy failed: %v", err)
		}
		defer os.RemoveAll(dir)
		inv.KnownHostsFile = filepath.Join(dir, "known_hosts")
		line := knownHostsLine(t.cfg.Host, t.cfg.Port, t.pinned) + "\n"
		if err := os.WriteFile(inv.KnownHostsFile, []byte(line), 0o600); err != nil {
			return fmt.Errorf("copy failed: %v", err)
		}
	}
	argv, env, err := inv.command()
	if err != nil {
		return fmt.Errorf("copy failed: %v", err)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	var out tailBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		msg := err.Error()
		var execErr *exec.Error
		if errors.As(err, &execErr) {
			msg = fmt.Sprintf("%s: %v", execErr.Name, execErr.Err)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("copy failed: %w", ctx.Err())
		}
		if last := lastLine(scrub(out.String(), t.cfg.KeyFiles, inv.KnownHostsFile)); last != "" {
			msg += ": " + last
		}
		if strings.Contains(msg, "Connection refused") || strings.Contains(msg, "Connection reset") ||
			strings.Contains(msg, "Connection timed out") {
			return unreachable(nil, "copy failed: %s", msg)
		}
		return fmt.Errorf("copy failed: %s", msg)
	}
	return nil
}

// scrub replaces credential paths in tool output.
func scrub(s string, keyFiles []string, knownHosts string) string {
	for _, k := range keyFiles {
		if k == "" {
			continue
		}
		s = strings.ReplaceAll(s, k, "<key file>")
		if abs, err := filepath.Abs(k); err == nil {
			s = strings.ReplaceAll(s, abs, "<key file>")
		}
	}
	if knownHosts != "" {
		s = strings.ReplaceAll(s, knownHosts, "<known_hosts>")
	}
	return s
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			return l
		}
	}
	return ""
}

// tailBuffer keeps the last tailMax bytes written to it.
type tailBuffer struct{ b []byte }

const tailMax = 16 << 10

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > tailMax {
		t.b = append(t.b[:0], t.b[len(t.b)-tailMax:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(bytes.ToValidUTF8(t.b, nil)) }
