package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// The simulated fleet's rows give the CPU and RSS per node, and what each node above
// the smallest fleet adds.
func TestPrintSim(t *testing.T) {
	var b bytes.Buffer
	err := printSim(&b, []simResult{
		{nodes: 1, wall: 3 * time.Second, cpu: 60 * time.Millisecond, rss: 20 << 20},
		{nodes: 201, wall: 6 * time.Second, cpu: 2060 * time.Millisecond, rss: 220 << 20},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := squeeze(b.String())
	for _, want := range []string{
		"1  3s  60ms  60ms  20.0 MiB  20480 KiB  -  -",
		"201  6s  2.06s  10ms  220.0 MiB  1120 KiB  10ms  1024 KiB",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in:\n%s", want, b.String())
		}
	}
}

func TestSimSizes(t *testing.T) {
	defer func(v string) { *simSizesArg = v }(*simSizesArg)
	*simSizesArg = "1, 50,200"
	if got, err := simSizes(); err != nil || len(got) != 3 || got[2] != 200 {
		t.Errorf("simSizes = %v, %v", got, err)
	}
	*simSizesArg = ""
	if got, err := simSizes(); err != nil || len(got) != 0 {
		t.Errorf("empty -sim-sizes = %v, %v; want none", got, err)
	}
	*simSizesArg = "1,x"
	if _, err := simSizes(); err == nil || !strings.Contains(err.Error(), "-sim-sizes") {
		t.Errorf("a bad -sim-sizes: %v", err)
	}
}
