package ssh

// Dials is how many TCP connections t has made.
func Dials(t *Transport) int64 { return t.dials.Load() }
