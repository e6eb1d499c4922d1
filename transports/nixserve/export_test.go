package nixserve

// For the external tests.

// PathInfo is what `nix-store --dump-db` records of a path.
type PathInfo = pathInfo

// ParseDumpDB parses the output of `nix-store --dump-db paths...`.
var ParseDumpDB = parseDumpDB
