//go:build benchprofile

package main

// Only in the binary `go run ./bench -profile DIR` builds (-tags benchprofile): the
// deployer under Go's block and mutex profiles, to find what serialises a fleet
// (issue 35: a shared lock, a single goroutine, a semaphore). The released binary
// has none of this.

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
)

// profileVar names the files' prefix: PREFIX.block.pprof, PREFIX.mutex.pprof, PREFIX.heap.pprof
// (what the run allocated, by call site: what a fleet's peak RSS is made of).
const profileVar = "SWITCHYARD_BENCH_PROFILE"

func init() {
	prefix := os.Getenv(profileVar)
	if prefix == "" {
		return
	}
	// Every blocking event and every contended lock: a bench run, not production.
	runtime.SetBlockProfileRate(1)
	runtime.SetMutexProfileFraction(1)
	atExit = func() {
		for _, name := range []string{"block", "mutex", "goroutine", "heap"} {
			if err := writeProfile(prefix+"."+name+".pprof", name); err != nil {
				fmt.Fprintf(os.Stderr, "switchyard: %s profile: %v\n", name, err)
			}
		}
	}
}

func writeProfile(path, name string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
