package testbed

import (
	"context"
	"fmt"
	"time"
)

// Reboot restarts the node's container (systemd stops, /run is emptied, the node
// boots its boot entry, /sbin/init) and waits until it booted again and its sshd
// answers. --force: the reboot of a fault, not a clean shutdown the node may delay.
func (n *Node) Reboot(ctx context.Context) error {
	if _, err := incus(ctx, "restart", "--force", n.Name); err != nil {
		return fmt.Errorf("reboot %s: %w", n.Name, err)
	}
	if err := n.waitBoot(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return n.waitSSH(ctx)
}

// BootInstead makes the node's next boots start init rather than its boot entry
// (/sbin/init): LXC's lxc.init.cmd, as a boot loader that falls back to another entry
// would. "" puts the boot entry back in charge. It changes nothing on the node, whose
// boot entry still names what a deploy set.
func (n *Node) BootInstead(ctx context.Context, init string) error {
	args := []string{"config", "set", n.Name, "raw.lxc", "lxc.init.cmd = " + init}
	if init == "" {
		args = []string{"config", "unset", n.Name, "raw.lxc"}
	}
	if _, err := incus(ctx, args...); err != nil {
		return fmt.Errorf("boot %s instead: %w", init, err)
	}
	return nil
}
