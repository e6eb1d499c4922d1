package evalcache

import (
	"os"
	"syscall"
)

// ownerOf is the uid owning a file, when the platform says.
func ownerOf(fi os.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return -1, false
	}
	return int(st.Uid), true
}
