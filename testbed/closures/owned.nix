# Test closures: closures for which units a configuration owns (fstab mounts and swaps, oneshot chains, an unreadable unit directory).
# Imported by default.nix; `toplevel`, `service`, `payload` and `hello` are its builders.
{ toplevel, service, payload, hello }:
{
}
