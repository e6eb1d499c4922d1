# Test closures: closures whose units show one class of SPEC 4.2 (spawn faults, restart loops, pending units).
# Imported by default.nix; `toplevel`, `service`, `payload` and `hello` are its builders.
{ toplevel, service, payload, hello }:
{
}
