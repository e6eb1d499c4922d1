package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-nix/switchyard/testbed"
)

// cachePortInNode is where the node reaches the bench's binary cache on its own
// loopback (an Incus proxy device bound in the instance).
const cachePortInNode = 5080

// substituteRow is (a) with half the closure in the node's own binary cache (issue
// 34 item 1): the node fetches that half itself and switchyard streams the rest,
// against the same copy with substitution off. The cache is a signed file cache
// served on the host's loopback, which the node reaches on its own. nd holds the
// closure before and after.
//
// The node is left as it was found: the rows after this one deploy to it, and a node
// still naming the closed cache as its substituter asks it for every path it lacks
// (a deploy's push took 4.9 s instead of 0.2 s, and (h) doubled, until this was so).
func substituteRow(ctx context.Context, self, tmp string, nd *testbed.Node, top string, paths []string) (_ row, err error) {
	dir, secret := filepath.Join(tmp, "cache"), filepath.Join(tmp, "cache.secret")
	if _, err := output("nix-store", "--generate-binary-cache-key", "switchyard-bench-cache-1", secret, secret+".pub"); err != nil {
		return row{}, err
	}
	pub, err := os.ReadFile(secret + ".pub")
	if err != nil {
		return row{}, err
	}
	// -qR lists references first: the first half is (nearly) closed, so nearly
	// all of it can be substituted.
	half := paths[:len(paths)/2]
	if _, err := output("nix", append([]string{"--extra-experimental-features", "nix-command", "copy",
		"--to", "file://" + dir + "?compression=none&secret-key=" + secret}, half...)...); err != nil {
		return row{}, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return row{}, err
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(dir)), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	if _, err := output("incus", "config", "device", "add", nd.Name, "cache", "proxy", "bind=instance",
		"listen=tcp:127.0.0.1:"+strconv.Itoa(cachePortInNode), "connect=tcp:127.0.0.1:"+strconv.Itoa(port)); err != nil {
		return row{}, err
	}
	defer func() {
		if _, rerr := output("incus", "config", "device", "remove", nd.Name, "cache"); rerr != nil && err == nil {
			err = fmt.Errorf("remove %s's cache device: %w", nd.Name, rerr)
		}
	}()
	conf, err := nd.Exec(ctx, "cat", "/etc/nix/nix.conf")
	if err != nil {
		return row{}, fmt.Errorf("read %s's nix.conf: %w", nd.Name, err)
	}
	defer func() {
		if _, rerr := nd.Exec(ctx, "sh", "-c", `printf '%s' "$1" >/etc/nix/nix.conf`, "sh", conf); rerr != nil && err == nil {
			err = fmt.Errorf("restore %s's nix.conf: %w", nd.Name, rerr)
		}
	}()
	if _, err := nd.Exec(ctx, "sh", "-c", `printf '%s\n' "$@" >/etc/nix/nix.conf`, "sh",
		"sandbox = false", "build-users-group =",
		"substituters = http://127.0.0.1:"+strconv.Itoa(cachePortInNode),
		"trusted-public-keys = "+strings.TrimSpace(string(pub))); err != nil {
		return row{}, fmt.Errorf("configure %s's caches: %w", nd.Name, err)
	}
	copyFresh := func(args ...string) (time.Duration, error) {
		if _, err := nd.Exec(ctx, append([]string{"nix-store", "--delete"}, paths...)...); err != nil {
			return 0, fmt.Errorf("reset %s: %w", nd.Name, err)
		}
		d, _, err := timedChild(self, nd, top, args...)
		return d, err
	}
	with, err := copyFresh()
	if err != nil {
		return row{}, fmt.Errorf("copy with the node's cache: %w", err)
	}
	without, err := copyFresh("--no-substitute")
	if err != nil {
		return row{}, fmt.Errorf("copy without the node's cache: %w", err)
	}
	return row{"(a) copy, half the closure in the node's cache vs without it", dur(with), dur(without), ratio(with, without)}, nil
}
