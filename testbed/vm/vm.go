// Package vm runs test nodes as qemu virtual machines booted through a real BIOS bootloader (the test bed's VM tier).
package vm

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/testbed"
)

// The VM tier (testbed/vm-image.sh, built by testbed/setup.sh under
// SWITCHYARD_TESTBED_VM=1): a Debian 12 disk booted SeaBIOS -> extlinux -> kernel ->
// systemd by qemu in software emulation (KVM does not work on the test machines), each VM
// on its own copy-on-write overlay of the cached disk, sshd reached through a loopback
// port of qemu's user network. The guest gets no other network: slirp in restricted mode,
// so nothing leaves the machine.

// Timeouts are generous: under TCG on a loaded 2-core machine a boot to systemd's
// "running" takes one to two minutes.
const (
	bootTimeout = 8 * time.Minute
	execTimeout = 3 * time.Minute
)

// Image is the cached VM image of the current recipe.
type Image struct {
	Dir     string // $SWITCHYARD_TESTBED_CACHE/vm-<recipe hash>
	Disk    string // the base disk; VMs never write to it
	HostKey string // the image's ed25519 host key, "ssh-ed25519 AAAA...", shared by its VMs
	KeyFile string // the test bed's client key, trusted by the image's root
}

var (
	imageOnce sync.Once
	image     *Image
	imageErr  error
)

// Require returns the VM image, or ends the test: a skip normally, a failure when
// SWITCHYARD_TESTBED=require.
func Require(t testing.TB) *Image {
	t.Helper()
	imageOnce.Do(func() { image, imageErr = Open() })
	if imageErr != nil {
		testbed.Unavailable(t, "VM tier", "SWITCHYARD_TESTBED_VM=1 testbed/setup.sh", imageErr)
	}
	return image
}

// Open finds the image setup.sh built from the current recipe, and the tools to run it.
func Open() (*Image, error) {
	for _, tool := range []string{"qemu-system-x86_64", "qemu-img", "ssh", "nix-build"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%s not on PATH", tool)
		}
	}
	recipe, err := os.ReadFile(filepath.Join(testbed.RepoRoot(), "testbed", "vm-image.sh"))
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(recipe)
	dir := filepath.Join(testbed.CacheDir(), "vm-"+hex.EncodeToString(sum[:])[:12])
	img := &Image{Dir: dir, Disk: filepath.Join(dir, "disk.img")}
	if _, err := os.Stat(img.Disk); err != nil {
		return nil, fmt.Errorf("VM image of the current recipe not built: %w", err)
	}
	pub, err := os.ReadFile(filepath.Join(dir, "ssh_host_ed25519_key.pub"))
	if err != nil {
		return nil, fmt.Errorf("VM image host key not recorded: %w", err)
	}
	fields := strings.Fields(string(pub))
	if len(fields) < 2 || fields[0] != "ssh-ed25519" {
		return nil, fmt.Errorf("VM image host key %q not understood", pub)
	}
	img.HostKey = fields[0] + " " + fields[1]
	if img.KeyFile, err = testbed.ClientKey(); err != nil {
		return nil, err
	}
	// setup.sh records the client key it put into the image; a key made since (the
	// cache's ssh/ removed) would be refused by every VM.
	want, err := os.ReadFile(img.KeyFile + ".pub")
	if err != nil {
		return nil, err
	}
	if got, err := os.ReadFile(filepath.Join(dir, "authorized_keys")); err != nil || !bytes.Equal(got, want) {
		return nil, fmt.Errorf("the VM image does not trust the test bed's client key %s (run testbed/setup.sh again)", img.KeyFile)
	}
	return img, nil
}

// VM is one running virtual machine. It is killed when its test ends.
type VM struct {
	SSHPort    int    // 127.0.0.1 port qemu forwards to the guest's sshd
	KnownHosts string // a known_hosts file pinning the image's host key for 127.0.0.1:SSHPort
	KeyFile    string // client private key the guest's root trusts
	Console    string // the guest's serial console, as a file

	dir     string
	cancel  context.CancelFunc
	exited  chan struct{} // closed when qemu exits
	waitErr error         // qemu's exit, once exited is closed
}

// Launch boots a VM for t on a fresh overlay of the image and waits until sshd answers
// and systemd finished booting. The VM is killed when t ends; when t failed, the tail
// of its serial console goes to the test log.
func (img *Image) Launch(t testing.TB) *VM {
	t.Helper()
	dir := t.TempDir()
	overlay := filepath.Join(dir, "disk.qcow2")
	// The overlay takes every write; the base image stays as setup.sh built it.
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", img.Disk, overlay).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img create overlay: %v: %s", err, out)
	}
	v := &VM{KeyFile: img.KeyFile, Console: filepath.Join(dir, "console.log"), dir: dir,
		KnownHosts: filepath.Join(dir, "known_hosts")}
	var err error
	// Another process may take the probed port before qemu binds it; qemu then exits at
	// once and another port is tried.
	for attempt := 0; attempt < 5; attempt++ {
		if err = v.start(overlay); err == nil {
			break
		}
		t.Logf("qemu did not start: %v", err)
	}
	if err != nil {
		t.Fatalf("start qemu: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("serial console of the VM (last lines):\n%s", v.consoleTail(60))
		}
		v.stop()
	})
	line := fmt.Sprintf("[127.0.0.1]:%d %s\n", v.SSHPort, img.HostKey)
	if err := os.WriteFile(v.KnownHosts, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := v.waitBoot(""); err != nil {
		t.Fatalf("VM boot: %v", err)
	}
	t.Logf("VM up on 127.0.0.1:%d after %s", v.SSHPort, time.Since(start).Round(time.Second))
	return v
}

// start runs qemu on a free loopback port and checks it did not exit at once.
func (v *VM) start(overlay string) error {
	port, err := testbed.FreePort()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	args := []string{
		"-accel", "tcg,thread=multi", "-smp", "2", "-m", "1024",
		"-nodefaults", "-display", "none", "-monitor", "none",
		"-serial", "file:" + v.Console,
		"-drive", "file=" + overlay + ",if=virtio,format=qcow2",
		// restrict=on: the guest reaches nothing outside; only the forward comes in.
		"-netdev", fmt.Sprintf("user,id=net0,restrict=on,hostfwd=tcp:127.0.0.1:%d-:22", port),
		"-device", "virtio-net-pci,netdev=net0",
	}
	log, err := os.Create(filepath.Join(v.dir, "qemu.log"))
	if err != nil {
		cancel()
		return err
	}
	cmd := exec.CommandContext(ctx, "qemu-system-x86_64", args...)
	cmd.Stdout, cmd.Stderr = log, log
	// A test process killed outright (a timeout's panic, a signal) takes its VM along.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		cancel()
		log.Close()
		return err
	}
	v.SSHPort, v.cancel, v.exited = port, cancel, make(chan struct{})
	go func() {
		v.waitErr = cmd.Wait()
		log.Close()
		close(v.exited)
	}()
	select {
	case <-v.exited:
		cancel()
		out, _ := os.ReadFile(filepath.Join(v.dir, "qemu.log"))
		return fmt.Errorf("qemu exited at once: %v: %s", v.waitErr, bytes.TrimSpace(out))
	case <-time.After(2 * time.Second):
		return nil
	}
}

// stop kills qemu and waits for it.
func (v *VM) stop() {
	v.cancel()
	<-v.exited
}

// waitBoot waits until sshd answers and systemd finished booting, on a boot other than
// notBoot (a boot ID; "" for any).
func (v *VM) waitBoot(notBoot string) error {
	deadline := time.Now().Add(bootTimeout)
	var last string
	for time.Now().Before(deadline) {
		select {
		case <-v.exited:
			return fmt.Errorf("qemu exited: %v", v.waitErr)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		id, err := v.Exec(ctx, "cat", "/proc/sys/kernel/random/boot_id")
		id = strings.TrimSpace(id)
		var state string
		if err == nil && id != notBoot {
			// --wait blocks until boot finished; it exits non-zero for "degraded" too.
			state, err = v.Exec(ctx, "systemctl", "is-system-running", "--wait")
			state = strings.TrimSpace(state)
			if state == "running" || state == "degraded" {
				cancel()
				return nil
			}
		}
		cancel()
		switch {
		case err != nil:
			last = err.Error()
		case id == notBoot:
			last = "still the boot before"
		default:
			last = "system state " + state
		}
		time.Sleep(2 * time.Second)
	}
	return fmt.Errorf("not up after %s: %s", bootTimeout, last)
}

// SSHOptions are the ssh(1) options that reach the guest with its host key checked.
func (v *VM) SSHOptions() []string {
	return []string{
		"-p", strconv.Itoa(v.SSHPort),
		"-i", v.KeyFile,
		"-o", "IdentitiesOnly=yes",
		"-o", "BatchMode=yes",
		"-o", "StrictHostKeyChecking=yes",
		"-o", "UserKnownHostsFile=" + v.KnownHosts,
		"-o", "GlobalKnownHostsFile=/dev/null",
		"-o", "HostKeyAlgorithms=ssh-ed25519",
		"-o", "ConnectTimeout=20",
		// A guest that reboots under a command must not hang the client forever.
		"-o", "ServerAliveInterval=5",
		"-o", "ServerAliveCountMax=6",
	}
}

// Target is the SSH target switchyard deploys to: root@127.0.0.1:<port>.
func (v *VM) Target() string { return fmt.Sprintf("root@127.0.0.1:%d", v.SSHPort) }

// Exec runs argv on the guest through sshd and returns stdout. Each argument is quoted
// for the remote shell, since the SSH protocol carries one command string. A non-zero
// exit is an error wrapping *exec.ExitError.
func (v *VM) Exec(ctx context.Context, argv ...string) (string, error) {
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = testbed.ShellQuote(a)
	}
	args := append(v.SSHOptions(), "root@127.0.0.1", "--", strings.Join(quoted, " "))
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "ssh", args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("ssh %v: %w: %s", argv, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.String(), nil
}

// MustExec is Exec that fails the test on error.
func (v *VM) MustExec(t testing.TB, argv ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), execTimeout)
	defer cancel()
	out, err := v.Exec(ctx, argv...)
	if err != nil {
		t.Fatalf("VM: %v", err)
	}
	return out
}

// Readlink resolves a link on the guest; "" when it does not exist or dangles.
func (v *VM) Readlink(t testing.TB, path string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), execTimeout)
	defer cancel()
	out, err := v.Exec(ctx, "readlink", "-e", path)
	var ee *exec.ExitError
	switch {
	case err == nil:
		return strings.TrimSpace(out)
	case errors.As(err, &ee) && ee.ExitCode() == 1:
		return ""
	}
	t.Fatalf("VM: %v", err)
	return ""
}

// Reboot reboots the guest with `systemctl reboot` (through its bootloader again:
// qemu resets the machine, SeaBIOS loads extlinux) and waits until it is back.
func (v *VM) Reboot(t testing.TB) {
	t.Helper()
	before := v.Boot(t).ID
	ctx, cancel := context.WithTimeout(context.Background(), execTimeout)
	// The connection may drop before ssh sees the exit status: the boot ID tells.
	_, err := v.Exec(ctx, "systemctl", "reboot")
	cancel()
	if err != nil {
		t.Logf("systemctl reboot: %v", err)
	}
	start := time.Now()
	if err := v.waitBoot(before); err != nil {
		t.Fatalf("reboot: %v", err)
	}
	t.Logf("VM rebooted in %s", time.Since(start).Round(time.Second))
}

// Boot is what the guest booted and what it will boot next.
type Boot struct {
	ID       string // /proc/sys/kernel/random/boot_id
	Booted   string // /run/booted-system, resolved; "" when missing (Debian booted, no generation)
	Current  string // /run/current-system, resolved
	Cmdline  string // /proc/cmdline
	Extlinux string // /boot/extlinux/extlinux.conf: the bootloader's own configuration
}

// Boot reads the boot facts of the guest.
func (v *VM) Boot(t testing.TB) Boot {
	t.Helper()
	return Boot{
		ID:       strings.TrimSpace(v.MustExec(t, "cat", "/proc/sys/kernel/random/boot_id")),
		Booted:   v.Readlink(t, "/run/booted-system"),
		Current:  v.Readlink(t, "/run/current-system"),
		Cmdline:  strings.TrimSpace(v.MustExec(t, "cat", "/proc/cmdline")),
		Extlinux: v.MustExec(t, "cat", "/boot/extlinux/extlinux.conf"),
	}
}

// CmdlineInit is the init= of the running kernel's command line; "" without one.
func (b Boot) CmdlineInit() string { return initParam(b.Cmdline) }

// DefaultInit is the init= of extlinux.conf's DEFAULT entry: the toplevel's init the
// guest boots next. "" when the DEFAULT entry has none (Debian as installed).
func (b Boot) DefaultInit() string {
	entries := ExtlinuxEntries(b.Extlinux)
	return initParam(entries[entries[""]])
}

// ExtlinuxEntries reads an extlinux.conf: each LABEL's APPEND line by label, and the
// DEFAULT label under the key "".
func ExtlinuxEntries(conf string) map[string]string {
	m := map[string]string{}
	label := ""
	sc := bufio.NewScanner(strings.NewReader(conf))
	for sc.Scan() {
		key, rest, _ := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToUpper(key) {
		case "DEFAULT":
			m[""] = rest
		case "LABEL":
			label = rest
			if _, ok := m[label]; !ok {
				m[label] = ""
			}
		case "APPEND":
			if label != "" {
				m[label] = rest
			}
		}
	}
	return m
}

// initParam is the value of init= among kernel parameters.
func initParam(params string) string {
	for _, f := range strings.Fields(params) {
		if v, ok := strings.CutPrefix(f, "init="); ok {
			return v
		}
	}
	return ""
}

// consoleTail is the end of the serial console log.
func (v *VM) consoleTail(lines int) string {
	b, err := os.ReadFile(v.Console)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}
