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
