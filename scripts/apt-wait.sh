# Sourced by the scripts that install Debian packages. apt_get runs apt-get
# and, when another apt or dpkg holds its locks (an unattended upgrade, a
# second `make`), waits for them — up to CORRAL_APT_WAIT seconds (default
# 600) — instead of failing at once.
apt_get() {
	local deadline=$(($(date +%s) + ${CORRAL_APT_WAIT:-600})) told="" err rc
	err=$(mktemp)
	while :; do
		rc=0
		DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=10 "$@" 2>"$err" || rc=$?
		if [ "$rc" = 0 ]; then
			rm -f "$err"
			return 0
		fi
		if ! grep -qiE 'could not get lock|unable to acquire|unable to lock|is held by process' "$err" ||
			[ "$(date +%s)" -ge "$deadline" ]; then
			cat "$err" >&2
			rm -f "$err"
			return "$rc"
		fi
		if [ -z "$told" ]; then
			echo "corral: another apt or dpkg holds its lock; waiting for it (up to ${CORRAL_APT_WAIT:-600} s)" >&2
			told=1
		fi
		sleep 3
	done
}
