package incus

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-nix/switchyard/effects"
)

// fakeRunner records every command and answers from a table: argv (joined by
// spaces) to exit status and stdout; a command not in the table exits 0.
type fakeRunner struct {
	answers map[string]fakeAnswer
	calls   []string // "argv... [PATH+=dirs]"
}

type fakeAnswer struct {
	code   int
	stdout string
	err    error
}

func (f *fakeRunner) Run(_ context.Context, cmd effects.Command) (int, error) {
	key := strings.Join(cmd.Argv, " ")
	call := key
	if len(cmd.Path) > 0 {
		call += " [PATH+=" + strings.Join(cmd.Path, ":") + "]"
	}
	f.calls = append(f.calls, call)
	a := f.answers[key]
	if a.stdout != "" && cmd.Stdout != nil {
		_, _ = io.WriteString(cmd.Stdout, a.stdout)
	}
	return a.code, a.err
}

const (
	newTop     = "/nix/store/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-nixos-system-web1-25.05"
	runningTop = "/nix/store/bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb-nixos-system-web1-25.05"
)

// Which commands each bootloader hook runs, container and VM alike (no VM can run
// on the test machines: no vhost_vsock): the argv sequence, with a fake node.
func TestBootloaderCommands(t *testing.T) {
	readRunning := "readlink -e /run/current-system"
	running := fakeAnswer{stdout: runningTop + "\n"}
	for _, tc := range []struct {
		name    string
		vm      bool
		revert  bool
		answers map[string]fakeAnswer
		want    []string
		err     string
	}{
		{name: "container finalize", answers: map[string]fakeAnswer{"test -e " + newTop + "/prepare-root": {code: 1}},
			want: []string{
				"nix-env -p /nix/var/nix/profiles/system --set " + newTop + " [PATH+=" + newTop + "/sw/bin]",
				"test -e " + newTop + "/prepare-root",
				"test -e " + newTop + "/init",
				"ln -sfn " + newTop + "/init /sbin/init",
			}},
		{name: "container finalize, systemd initrd", answers: map[string]fakeAnswer{},
			want: []string{
				"nix-env -p /nix/var/nix/profiles/system --set " + newTop + " [PATH+=" + newTop + "/sw/bin]",
				"test -e " + newTop + "/prepare-root",
				"ln -sfn " + newTop + "/prepare-root /sbin/init",
			}},
		{name: "container finalize, no init in the toplevel",
			answers: map[string]fakeAnswer{"test -e " + newTop + "/prepare-root": {code: 1}, "test -e " + newTop + "/init": {code: 1}},
			want: []string{
				"nix-env -p /nix/var/nix/profiles/system --set " + newTop + " [PATH+=" + newTop + "/sw/bin]",
				"test -e " + newTop + "/prepare-root",
				"test -e " + newTop + "/init",
			},
			err: "has neither init nor prepare-root: not a NixOS system; /sbin/init left as it is"},
		{name: "container finalize, profile fails", answers: map[string]fakeAnswer{"nix-env -p /nix/var/nix/profiles/system --set " + newTop: {code: 1}},
			want: []string{"nix-env -p /nix/var/nix/profiles/system --set " + newTop + " [PATH+=" + newTop + "/sw/bin]"},
			err:  "set the system profile: nix-env exited 1"},
		{name: "vm finalize", vm: true, answers: map[string]fakeAnswer{},
			want: []string{
				"nix-env -p /nix/var/nix/profiles/system --set " + newTop + " [PATH+=" + newTop + "/sw/bin]",
				newTop + "/bin/switch-to-configuration boot [PATH+=" + newTop + "/sw/bin]",
			}},
		{name: "vm finalize, boot entry fails", vm: true, answers: map[string]fakeAnswer{newTop + "/bin/switch-to-configuration boot": {code: 1}},
			want: []string{
				"nix-env -p /nix/var/nix/profiles/system --set " + newTop + " [PATH+=" + newTop + "/sw/bin]",
				newTop + "/bin/switch-to-configuration boot [PATH+=" + newTop + "/sw/bin]",
			},
			err: "install the boot entry: " + newTop + "/bin/switch-to-configuration exited 1"},
		{name: "container revert", revert: true,
			answers: map[string]fakeAnswer{readRunning: running, "test -e " + runningTop + "/prepare-root": {code: 1}},
			want: []string{
				readRunning,
				"test -e " + runningTop + "/prepare-root",
				"test -e " + runningTop + "/init",
				"ln -sfn " + runningTop + "/init /sbin/init",
			}},
		{name: "vm revert", vm: true, revert: true, answers: map[string]fakeAnswer{readRunning: running},
			want: []string{
				readRunning,
				runningTop + "/bin/switch-to-configuration boot [PATH+=" + runningTop + "/sw/bin]",
			}},
		{name: "container revert, no running generation", revert: true, answers: map[string]fakeAnswer{readRunning: {code: 1}},
			want: []string{readRunning}, err: "no running generation to revert to"},
		{name: "vm revert, no running generation", vm: true, revert: true, answers: map[string]fakeAnswer{readRunning: {code: 1}},
			want: []string{readRunning}, err: "no running generation to revert to"},
		{name: "revert, node unreachable", revert: true, answers: map[string]fakeAnswer{readRunning: {code: -1, err: effects.ErrUnreachable}},
			want: []string{readRunning}, err: "read /run/current-system"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeRunner{answers: tc.answers}
			var err error
			if tc.revert {
				err = revertBoot(context.Background(), f, tc.vm)
			} else {
				err = finalizeBoot(context.Background(), f, tc.vm, newTop)
			}
			if d := cmp.Diff(tc.want, f.calls); d != "" {
				t.Errorf("commands (-want +got)\n%s", d)
			}
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("error %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("error %v, want one containing %q", err, tc.err)
			}
		})
	}
	if err := finalizeBoot(context.Background(), &fakeRunner{}, false, "relative"); err == nil {
		t.Error("a toplevel that is not an absolute path was accepted")
	}
}

// The hooks ask the Incus API for the instance's type (once) and pick the branch
// from it: a fake daemon on a unix socket answers GET /1.0/instances/<name>.
func TestBootloaderInstanceType(t *testing.T) {
	for _, tc := range []struct {
		typ    string
		vm     bool
		errMsg string
	}{
		{typ: "container"}, {typ: "virtual-machine", vm: true}, {typ: ""}, {typ: "unikernel", errMsg: `instance type "unikernel" is neither`},
	} {
		t.Run("type "+tc.typ, func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "unix.socket")
			l, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			var gets atomic.Int32
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodGet || r.URL.Path != "/1.0/instances/web1" || r.URL.Query().Get("project") != "tenant-a" {
					http.Error(w, `{"type":"error","error_code":404,"error":"not found"}`, http.StatusNotFound)
					return
				}
				gets.Add(1)
				meta, _ := json.Marshal(map[string]any{"name": "web1", "project": "tenant-a", "type": tc.typ, "status": "Running"})
				_ = json.NewEncoder(w).Encode(map[string]any{"type": "sync", "status": "Success", "status_code": 200, "metadata": json.RawMessage(meta)})
			})}
			go srv.Serve(l)
			t.Cleanup(func() { srv.Close() })
			tr, err := New(Config{Instance: "web1", Project: "tenant-a", Socket: sock})
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			for i := 0; i < 2; i++ {
				vm, err := tr.isVM(context.Background())
				switch {
				case tc.errMsg != "":
					if err == nil || !strings.Contains(err.Error(), tc.errMsg) {
						t.Errorf("isVM = %v, %v; want an error containing %q", vm, err, tc.errMsg)
					}
				case err != nil || vm != tc.vm:
					t.Errorf("isVM = %v, %v; want %v", vm, err, tc.vm)
				}
			}
			if n := gets.Load(); n != 1 {
				t.Errorf("the instance was read %d times, want once", n)
			}
		})
	}
	// A daemon that does not answer: the hooks fail as unreachable, touching nothing.
	tr, err := New(Config{Instance: "web1", Socket: filepath.Join(t.TempDir(), "none.socket")})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if err := tr.FinalizeBootloader(context.Background(), newTop); !errors.Is(err, effects.ErrUnreachable) {
		t.Errorf("finalize with no daemon: %v, want ErrUnreachable", err)
	}
	if err := tr.RevertBootloader(context.Background()); !errors.Is(err, effects.ErrUnreachable) {
		t.Errorf("revert with no daemon: %v, want ErrUnreachable", err)
	}
}
