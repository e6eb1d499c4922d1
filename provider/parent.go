package provider

import (
	"os"
	"time"
)

// parentPoll is how often the provider looks whether OpenTofu still runs.
const parentPoll = 250 * time.Millisecond

// exitWithParent ends the provider once the OpenTofu that started it is gone
// (issue 31 item 9). A plugin outlives a SIGKILLed OpenTofu otherwise: go-plugin
// notices only when the provider next writes to the dead pipe, and a deploy body
// that waits silently (a long switch, a verdict window) holds the node's lock on
// for a run nobody waits for, so a rerun right after is refused. The parent's death
// shows as a changed parent pid (the process is reparented); exiting then is what a
// kill of the whole process group does, which the journal and the lock recover from.
func exitWithParent() {
	parent := os.Getppid()
	go func() {
		for range time.Tick(parentPoll) {
			if os.Getppid() != parent {
				os.Exit(1)
			}
		}
	}()
}
