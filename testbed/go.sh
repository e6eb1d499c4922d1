# Sourced by the README's scripts: puts a Go toolchain (go.mod's version or newer) on
# PATH. A fresh Debian 12 machine has none and no download site is reachable, so the
# toolchain comes from the Go module proxy (golang.org/toolchain), cached per machine.
# shellcheck shell=bash source=testbed/versions.sh
. "$(dirname "${BASH_SOURCE[0]}")/versions.sh"

switchyard_ensure_go() {
	local cache=${SWITCHYARD_TESTBED_CACHE:-/var/cache/switchyard-testbed}
	local dir=$cache/go$switchyard_go_version
	if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
		PATH=/usr/local/go/bin:$PATH
	fi
	if command -v go >/dev/null; then
		return
	fi
	switchyard_fetch_go "$switchyard_go_version" >/dev/null
	PATH=$dir/bin:$PATH
	export PATH
}

# switchyard_go_proxy: the first Go module proxy the machine's configuration names
# (`go env GOPROXY` where a Go is installed, else the GOPROXY variable); this script
# names none. Fails, saying so, where none is configured.
switchyard_go_proxy() {
	local list entry
	if command -v go >/dev/null; then
		list=$(go env GOPROXY)
	else
		list=${GOPROXY:-}
	fi
	for entry in ${list//[,|]/ }; do
		case $entry in
		http://* | https://*)
			echo "${entry%/}"
			return
			;;
		esac
	done
	echo "testbed: no Go module proxy configured (go env GOPROXY, or the GOPROXY variable where no Go is installed): set one to fetch Go" >&2
	return 1
}

# switchyard_fetch_go VERSION: a Go toolchain of exactly VERSION from the Go module proxy
# (golang.org/toolchain), cached per machine; prints its directory.
switchyard_fetch_go() {
	local version=$1 cache=${SWITCHYARD_TESTBED_CACHE:-/var/cache/switchyard-testbed}
	local dir=$cache/go$version
	if [ ! -x "$dir/bin/go" ]; then
		local proxy v=v0.0.1-go$version.linux-amd64 tmp
		proxy=$(switchyard_go_proxy) || return 2
		echo "testbed: fetching Go $version from $proxy" >&2
		# A fresh machine may have no package lists yet: they are read once, if needed.
		for tool in unzip curl; do
			command -v "$tool" >/dev/null ||
				DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$tool" >&2 ||
				{ apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$tool" >&2; }
		done
		tmp=$(mktemp -d)
		curl -fsSL -o "$tmp/go.zip" "$proxy/golang.org/toolchain/@v/$v.zip"
		unzip -q "$tmp/go.zip" -d "$tmp/x"
		mkdir -p "$cache"
		rm -rf "$dir"
		mv "$tmp/x/golang.org/toolchain@$v" "$dir"
		chmod -R a+rX "$dir" && chmod +x "$dir"/bin/* "$dir"/pkg/tool/*/* 2>/dev/null || true
		rm -rf "$tmp"
	fi
	echo "$dir"
}
