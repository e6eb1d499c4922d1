package provider

import (
	"bufio"
	"encoding/json"
	"net"
	"path/filepath"
	"testing"

	"github.com/switchyard-nix/switchyard/provider/contract"
)

// The relay dials at its first line and sends each line whole; none, or a socket
// that is not there, drops the lines without failing the deploy.
func TestRelay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	r := newRelay(path)
	want := contract.LogLine{Node: "web1", Level: "info", Msg: "web1: push: 1 paths in the closure, 0 missing, 0 sent (0 bytes)"}
	go r.send(want)
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc := bufio.NewScanner(c)
	if !sc.Scan() {
		t.Fatalf("no line: %v", sc.Err())
	}
	var got contract.LogLine
	if err := json.Unmarshal(sc.Bytes(), &got); err != nil || got != want {
		t.Errorf("line %s (%v), want %v", sc.Bytes(), err, want)
	}

	newRelay("").send(want)                                    // none
	newRelay(filepath.Join(t.TempDir(), "missing")).send(want) // not there
}
