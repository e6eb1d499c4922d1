# shellcheck shell=bash
# Test prologue for the shell transport's unit tests: the "node" is this machine.
# SY_OUT (from Config.Env) is a file the hooks record their arguments in.

# The prologue's own output while it is sourced must not reach a hook's stdout.
echo "local-hooks: loaded"

target() {
	if [ -n "${SY_COUNT:-}" ]; then
		echo x >>"$SY_COUNT"
	fi
	printf 'local %s\n' "${SY_NAME:-node}"
	printf 'second line\n'
}

remote_exec() {
	if [ -n "${SWITCHYARD_REMOTE_PATH:-}" ]; then
		PATH="${PATH:+$PATH:}$SWITCHYARD_REMOTE_PATH"
	fi
	"$@"
}

copy_closure() {
	printf '%s\n' "$#" "$@" >"$SY_OUT"
}

switch_runtime_max_args() {
	if [ -n "${SY_FAIL:-}" ]; then
		return 1
	fi
	if [ -n "${SY_NOT_AN_OPTION:-}" ]; then
		printf '%s\n' RuntimeMaxSec=1
		return
	fi
	printf '%s\n' --property=RuntimeMaxSec=42 '' -p 'CPUQuota=50%'
}

finalize_bootloader() {
	printf '%s\n' "$#" "$@" >"$SY_OUT"
	if [ -n "${SY_FAIL:-}" ]; then
		echo "something first" >&2
		echo "boot entry: $SY_FAIL" >&2
		echo >&2
		return 3
	fi
}

revert_bootloader() {
	printf '%s\n' "$#" "$@" >"$SY_OUT"
	if [ -n "${SY_UNREACHABLE:-}" ]; then
		echo "ssh: connect to host node port 22: Connection refused" >&2
		return 255
	fi
}
