// Package coordinates is the registry of environment coordinates (SPEC 6.5): the
// environment variables a method's plans read, each declared with a description and a
// default. The plan reads the environment only through a Reader built from those
// declarations; reading an undeclared name is a programming error (Lookup panics).
//
// environment.go is the only file under plan/ that touches the process environment;
// plan/envread_test.go fails on any other os.Getenv, os.LookupEnv or os.Environ.
package coordinates
