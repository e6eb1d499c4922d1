package coordinates

import "os"

// Environment is a Reader over the process environment: the one place the plan reads it.
func Environment(decls []Coordinate) *Reader {
	return newReader(decls, os.LookupEnv)
}
