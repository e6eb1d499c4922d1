package nixserve

// For the external tests.

// PathInfo is what `nix-store --dump-db` records of a path.
type PathInfo = pathInfo

// ParseDumpDB parses the output of `nix-store --dump-db paths...`.
var ParseDumpDB = parseDumpDB

// resetSpool empties the process's export spool, as if no path had been exported.
func resetSpool() {
	exports.mu.Lock()
	defer exports.mu.Unlock()
	for _, f := range exports.files {
		_ = f.Close()
	}
	exports.files, exports.entries, exports.size = nil, nil, 0
}

// ResetSpool empties the process's export spool.
var ResetSpool = resetSpool
