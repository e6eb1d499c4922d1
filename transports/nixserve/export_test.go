package nixserve

import "time"

// For the external tests.

// PathInfo is what `nix-store --dump-db` records of a path.
type PathInfo = pathInfo

// ParseDumpDB parses the output of `nix-store --dump-db paths...`.
var ParseDumpDB = parseDumpDB

// resetSpool empties the process's export spool, as if no path had been exported.
func resetSpool() {
	exports.mu.Lock()
	defer exports.mu.Unlock()
	if exports.idle != nil {
		exports.idle.Stop()
	}
	exports.empty()
}

// ResetSpool empties the process's export spool.
var ResetSpool = resetSpool

// SetSpoolIdle sets how long an idle spool is kept; the returned func restores it.
func SetSpoolIdle(d time.Duration) func() {
	old := spoolIdle
	spoolIdle = d
	return func() { spoolIdle = old }
}

// SetThroughStore sets the local store of CopyThrough; the returned func restores it.
func SetThroughStore(s Store) func() {
	old := throughStore
	throughStore = s
	return func() { throughStore = old }
}

// SetForceImport makes copies use cmdImportPaths whatever the node's version; the
// returned func restores it.
func SetForceImport(on bool) func() {
	old := forceImport
	forceImport = on
	return func() { forceImport = old }
}

// SetSpoolAloneMax sets how much of a record a lone copy spools; the returned func
// restores it.
func SetSpoolAloneMax(n int64) func() {
	old := spoolAloneMax
	spoolAloneMax = n
	return func() { spoolAloneMax = old }
}

// HoldSpool counts one more copy running in the process, as another copy would,
// until the returned func is called.
func HoldSpool() func() {
	exports.enter()
	return exports.leave
}

// SetDumpMin sets the NAR size from which a path is sent from its dump; the
// returned func restores it.
func SetDumpMin(n uint64) func() {
	old := dumpMin
	dumpMin = n
	return func() { dumpMin = old }
}
