package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-nix/switchyard/testbed"
)

// confirmRows is (h), the cost of issue 30's confirmation: healthy one-node deploys
// of a new generation each, with the confirmation on (a fresh connection, one
// command) and off (DEPLOY_CONFIRM_TIMEOUT=0), alternating over rounds so a busy
// machine weighs on both sides alike. Short verdict windows (3 x 1 s), so the
// windows do not hide the difference. Each deploy's TCP connections are counted by
// the node's sshd: the confirmation may add one.
func confirmRows(binary, tag string, nd *testbed.Node) ([]row, error) {
	var on, off []time.Duration
	var connsOn, connsOff int
	for round := 0; round < *runs; round++ {
		order := []string{"", "0"}
		if round%2 == 1 {
			order = []string{"0", ""}
		}
		for _, timeout := range order {
			d, conns, err := confirmDeploy(binary, fmt.Sprintf("%sc%d%s", tag, round, timeout), timeout, nd)
			if err != nil {
				return nil, fmt.Errorf("(h) round %d: %w", round+1, err)
			}
			if timeout == "" {
				on, connsOn = append(on, d), conns
			} else {
				off, connsOff = append(off, d), conns
			}
		}
	}
	dOn, dOff := median(on), median(off)
	return []row{
		{"(h) healthy deploy (3 x 1 s windows), confirmation on vs off", dur(dOn), dur(dOff), ratio(dOn, dOff)},
		{"(h) TCP connections per deploy, confirmation on vs off", strconv.Itoa(connsOn), strconv.Itoa(connsOff), float64(connsOn) / float64(connsOff)},
	}, nil
}

// confirmDeploy deploys a fresh healthy generation (tagged) to nd, with
// DEPLOY_CONFIRM_TIMEOUT=timeout unless it is empty (the default: on), and returns
// the deploy's time and the connections the node's sshd accepted for it.
func confirmDeploy(binary, tag, timeout string, nd *testbed.Node) (time.Duration, int, error) {
	top, err := output("nix-build", "testbed/closures", "-A", "healthy", "--no-out-link", "--argstr", "tag", "bench"+tag)
	if err != nil {
		return 0, 0, err
	}
	before, err := acceptedConnections(nd)
	if err != nil {
		return 0, 0, err
	}
	cmd := exec.Command(binary, "deploy", "--node", "bench", "--target", fmt.Sprintf("root@127.0.0.1:%d", nd.SSHPort),
		"--known-hosts", nd.KnownHosts, "--ssh-key", nd.KeyFile, "--toplevel", strings.TrimSpace(top), "--output", "json")
	cmd.Env = append(os.Environ(), "DEPLOY_CYCLE_WINDOWS=3", "DEPLOY_CYCLE_INTERVAL=1")
	if timeout != "" {
		cmd.Env = append(cmd.Env, "DEPLOY_CONFIRM_TIMEOUT="+timeout)
	}
	d, err := timed(func() error { return runCmd(cmd) })
	if err != nil {
		return 0, 0, fmt.Errorf("deploy: %w", err)
	}
	after, err := acceptedConnections(nd)
	return d, after - before, err
}
