# Test closures: closures for what switch-to-configuration does (exit 100, hung switches, boot entries).
# Imported by default.nix; `toplevel`, `service`, `payload` and `hello` are its builders.
{ toplevel, service, payload, hello }:
{
}
