# shellcheck shell=bash
# Test prologue for the shell transport: reaches a test-bed node through ssh(1) and
# nix-copy-closure, the way an existing shell transport does. Its settings come from
# the environment (the test sets them through Config.Env):
#   SY_PORT         the 127.0.0.1 port forwarded to the node's sshd
#   SY_KEY          the client private key the node's root trusts
#   SY_KNOWN_HOSTS  a known_hosts file pinning the node's host key
# The host key is always checked (StrictHostKeyChecking=yes, only that file).

# sy_ssh_opts sets the array sy_opts to the ssh(1) options that reach the node.
sy_ssh_opts() {
	sy_opts=(
		-p "$SY_PORT"
		-i "$SY_KEY"
		-o IdentitiesOnly=yes
		-o BatchMode=yes
		-o StrictHostKeyChecking=yes
		-o "UserKnownHostsFile=$SY_KNOWN_HOSTS"
		-o GlobalKnownHostsFile=/dev/null
		-o HostKeyAlgorithms=ssh-ed25519
		-o ConnectTimeout=10
	)
}

target() {
	printf 'shell root@127.0.0.1:%s\n' "$SY_PORT"
}

# sy_reaper is the start of every remote command line: sshd does not end a command
# without a terminal when its connection goes (a cancel kills ssh(1) here, and root
# sessions refuse signals), so a watchdog, detached from the command, waits for the
# session's sshd (the login shell's parent) to exit and then ends the command's
# process group (the login shell's pid: sshd starts it with setsid, and exec keeps
# it) if the command still runs. Fixed text: nothing from input.
# shellcheck disable=SC2016
sy_reaper='sy_p=$PPID sy_s=$$; ( ( while kill -0 "$sy_p" 2>/dev/null; do sleep 1; done; '\
'kill -0 "$sy_s" 2>/dev/null && kill -TERM -"$sy_s" ) </dev/null >/dev/null 2>&1 & ); '

# remote_exec ARGV...: ssh(1) carries one command string, which the node's login
# shell (bash) parses, so every argument is quoted with printf %q. The directories in
# SWITCHYARD_REMOTE_PATH are appended to the remote PATH. ssh exits 255 when it
# cannot reach the node, which is the transport's "unreachable". A cancel (SIGINT to
# this hook's process group) ends ssh(1), and sy_reaper then ends the command.
remote_exec() {
	local line=$sy_reaper q a sy_opts
	if [ -n "${SWITCHYARD_REMOTE_PATH:-}" ]; then
		printf -v q %q "$SWITCHYARD_REMOTE_PATH"
		line+='PATH="${PATH:+$PATH:}"'"$q"'; export PATH; '
	fi
	line+="exec --"
	for a in "$@"; do
		printf -v q %q "$a"
		line+=" $q"
	done
	sy_ssh_opts
	ssh "${sy_opts[@]}" root@127.0.0.1 -- "$line"
}

# copy_closure PATH...: the reference tool. NIX_SSHOPTS is split at whitespace.
copy_closure() {
	local sy_opts
	sy_ssh_opts
	NIX_SSHOPTS="${sy_opts[*]}" nix-copy-closure --to root@127.0.0.1 "$@"
}

# No extra systemd-run arguments: switchyard bounds the switch itself (DEPLOY_SWITCH_TIMEOUT).
switch_runtime_max_args() {
	:
}

# finalize_bootloader TOPLEVEL: the system profile, then the toplevel's own boot entry.
finalize_bootloader() {
	local top=$1
	SWITCHYARD_REMOTE_PATH="$top/sw/bin" remote_exec nix-env -p /nix/var/nix/profiles/system --set "$top" &&
		SWITCHYARD_REMOTE_PATH="$top/sw/bin" remote_exec "$top/bin/switch-to-configuration" boot
}

# revert_bootloader: the running generation's own boot entry.
revert_bootloader() {
	local running
	running=$(remote_exec readlink -e /run/current-system) || return
	SWITCHYARD_REMOTE_PATH="$running/sw/bin" remote_exec "$running/bin/switch-to-configuration" boot
}
