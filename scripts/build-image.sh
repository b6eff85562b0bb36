#!/usr/bin/env bash
# Builds the default guest image for the vm runner (`make image`):
#   OUTDIR/vmlinux            uncompressed kernel, booted through its PVH entry
#                             (OUTDIR/vmlinuz, the bzImage, when extraction fails)
#   OUTDIR/initramfs.cpio     busybox-static + /init (cmd/corral-init) + the kernel modules
#                             the guest loads (virtio-mmio, virtiofs, NFSv3, virtio-net,
#                             overlay, virtio-console, virtio-balloon) with their load
#                             order per feature in /etc/corral/modules/, uncompressed (the
#                             guest unpacks it ~0.1 s sooner than gzip under TCG)
#   OUTDIR/image.json         what vmimage.Load reads
# Usage: scripts/build-image.sh [OUTDIR]   (default build/images/default)
#
# The kernel comes from Debian's linux-image-cloud-amd64: its package is
# fetched with `apt-get download` and its /boot unpacked (dpkg-deb) into the
# cache (build/cache), so the host's /boot and package set stay as they are.
# Tools that are missing (lz4, cpio, busybox-static) are installed with
# apt-get when running as root. A rerun with unchanged inputs only checks
# timestamps; CORRAL_IMAGE_REFRESH=1 looks for a newer kernel package.
set -euo pipefail
export LC_ALL=C

root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/build/images/default}
cache=${CORRAL_IMAGE_CACHE:-$root/build/cache}
# The guest's /init is the project's Go program (cmd/corral-init), built
# static; the up-to-date check below looks at its sources: its packages
# and the ones it imports from this module (vmimage with the agent's
# protocol, internal/ident).
initsrc=("$root/cmd/corral-init" "$root/vmimage" "$root/internal/ident")
go=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
self=$root/scripts/build-image.sh
name=$(basename "$out")

say() { echo "build-image: $*"; }
. "$root/scripts/apt-wait.sh"
die() {
	echo "build-image: error: $*" >&2
	exit 1
}

mkdir -p "$out" "$cache"
out=$(cd "$out" && pwd)

# --- tools -------------------------------------------------------------------
apt_install() {
	if [ "$(id -u)" != 0 ]; then
		die "missing $*: run as root, or install them first: apt-get install -y $*"
	fi
	say "installing $* with apt-get"
	apt_get install -y -qq "$@" >/dev/null ||
		{ apt_get update -qq && apt_get install -y -qq "$@" >/dev/null; } ||
		die "apt-get install $* failed"
}

# fetch_deb PKG: downloads PKG's .deb into the cache (apt-get download) and
# prints its path.
fetch_deb() {
	local dir=$cache/deb
	mkdir -p "$dir"
	# _apt downloads into the directory; without access apt warns and falls
	# back to root, which works but is noisy.
	chown _apt "$dir" 2>/dev/null || true
	(cd "$dir" && apt-get download -qq "$1" >/dev/null 2>&1) ||
		(apt_get update -qq >/dev/null 2>&1 && cd "$dir" && apt-get download -qq "$1" >/dev/null 2>&1) ||
		return 1
	ls -t "$dir/$1"_*.deb 2>/dev/null | head -n 1
}

missing=()
command -v lz4 >/dev/null || missing+=(lz4)
command -v cpio >/dev/null || missing+=(cpio)
command -v modprobe >/dev/null && command -v depmod >/dev/null || missing+=(kmod)
command -v strip >/dev/null || missing+=(binutils)
command -v dpkg-deb >/dev/null || die "dpkg-deb not found: this script needs Debian (or Ubuntu)"
# The guest needs a static busybox: the one from busybox-static when it is
# installed, else the package unpacked into the cache (installing
# busybox-static would remove a dynamic busybox the host may rely on).
busybox=
if dpkg -s busybox-static >/dev/null 2>&1 && [ -x /bin/busybox ]; then
	busybox=/bin/busybox
elif ! dpkg -s busybox >/dev/null 2>&1; then
	missing+=(busybox-static)
	busybox=/bin/busybox
fi
[ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"
if [ -z "$busybox" ]; then
	busybox=$(ls "$cache"/busybox-static/bin/busybox 2>/dev/null || true)
	if [ -z "$busybox" ]; then
		say "fetching busybox-static (apt-get download)"
		deb=$(fetch_deb busybox-static) || die "apt-get download busybox-static failed"
		rm -rf "$cache/busybox-static"
		dpkg-deb -x "$deb" "$cache/busybox-static"
		busybox=$cache/busybox-static/bin/busybox
	fi
fi
ldd "$busybox" >/dev/null 2>&1 && die "$busybox is dynamically linked: install busybox-static"

# --- kernel package ----------------------------------------------------------
kdeb=$(ls "$cache"/deb/linux-image-*-cloud-amd64_*_amd64.deb 2>/dev/null | sort -V | tail -n 1 || true)
if [ -z "$kdeb" ] || [ -n "${CORRAL_IMAGE_REFRESH:-}" ]; then
	kpkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null | awk '/Depends: linux-image-/ { print $2; exit }')
	if [ -z "$kpkg" ]; then
		say "apt-get update (linux-image-cloud-amd64 unknown to apt)"
		apt_get update -qq >/dev/null 2>&1 || true
		kpkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null | awk '/Depends: linux-image-/ { print $2; exit }')
	fi
	if [ -n "$kpkg" ]; then
		say "fetching $kpkg (apt-get download)"
		if new=$(fetch_deb "$kpkg"); then
			[ -n "$kdeb" ] && [ "$kdeb" != "$new" ] && rm -f "$kdeb"
			kdeb=$new
		fi
	fi
fi

ksrc=
if [ -n "$kdeb" ]; then
	kroot=$cache/kernel/$(basename "$kdeb" .deb)
	if [ ! -e "$kroot/.unpacked" ]; then
		say "unpacking $(basename "$kdeb")"
		rm -rf "$cache/kernel"
		mkdir -p "$kroot"
		# /boot and the modules; the package ships no modules.dep, so
		# depmod writes one (the guest takes only the modules it loads).
		dpkg-deb --fsys-tarfile "$kdeb" | tar -x -C "$kroot" ./boot ./lib/modules
		touch "$kroot/.unpacked"
	fi
	vmlinuz=$(ls "$kroot"/boot/vmlinuz-*-cloud-amd64 | head -n 1)
	if [ ! -d "$kroot/lib/modules" ]; then
		# A cache unpacked by an older build-image.sh holds /boot only.
		dpkg-deb --fsys-tarfile "$kdeb" | tar -x -C "$kroot" ./lib/modules
	fi
	modroot=$kroot
	kpkgver=$(dpkg-deb -f "$kdeb" Version)
	ksrc=$kdeb
else
	# No package could be fetched (offline): use an installed cloud kernel.
	vmlinuz=$(ls /boot/vmlinuz-*-cloud-amd64 2>/dev/null | sort -V | tail -n 1 || true)
	[ -n "$vmlinuz" ] || die "no cloud kernel: apt-get download $(printf %s "${kpkg:-linux-image-cloud-amd64}") failed and /boot has no vmlinuz-*-cloud-amd64 (check apt sources, or apt-get install linux-image-cloud-amd64)"
	say "apt-get download failed; using installed $vmlinuz"
	modroot=/
	kpkgver=$(dpkg-query -W -f '${Version}' "linux-image-${vmlinuz#/boot/vmlinuz-}" 2>/dev/null || echo unknown)
	ksrc=$vmlinuz
fi
kver=${vmlinuz##*/vmlinuz-}

# --- up to date? ---------------------------------------------------------------
json=$out/image.json
if [ -f "$json" ] && [ -f "$out/initramfs.cpio" ] &&
	{ [ -f "$out/vmlinux" ] || [ -f "$out/vmlinuz" ]; } &&
	[ "$json" -nt "$ksrc" ] && [ -z "$(find "${initsrc[@]}" "$root/go.mod" -newer "$json" -print -quit)" ] &&
	[ "$json" -nt "$busybox" ] && [ "$json" -nt "$self" ] &&
	grep -q "\"kernel_version\": \"$kver\"" "$json"; then
	say "$out is up to date (kernel $kver)"
	exit 0
fi

tmp=$(mktemp -d "$out/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# --- kernel: vmlinux from the LZ4 payload of the bzImage ------------------------
# The vmlinuz is a bzImage whose payload is a legacy LZ4 frame (magic
# 02 21 4c 18). The ELF inside has a PVH entry note (Xen, type 0x12), which
# QEMU's microvm boots directly, skipping the decompressor.
pvh=false
kfile=vmlinuz
say "extracting vmlinux from $(basename "$vmlinuz")"
for off in $(grep -obUaP '\x02\x21\x4c\x18' "$vmlinuz" | cut -d: -f1 | head -n 4); do
	# lz4 exits non-zero on the bytes that follow the frame; the ELF check
	# below is what tells whether the extraction worked.
	tail -c +$((off + 1)) "$vmlinuz" | lz4 -dcq >"$tmp/vmlinux" 2>/dev/null || true
	if [ "$(head -c 4 "$tmp/vmlinux" | od -An -tx1 | tr -d ' ')" = 7f454c46 ] &&
		[ "$(stat -c %s "$tmp/vmlinux")" -gt 4000000 ]; then
		if grep -qaP '\x04\x00\x00\x00\x08\x00\x00\x00\x12\x00\x00\x00Xen\x00' "$tmp/vmlinux"; then
			pvh=true
			kfile=vmlinux
		else
			say "vmlinux has no PVH entry note"
		fi
		break
	fi
done
if [ "$pvh" = true ]; then
	say "kernel: vmlinux ($(($(stat -c %s "$tmp/vmlinux") / 1048576)) MiB, PVH entry)"
else
	say "kernel: falling back to the bzImage vmlinuz (no usable vmlinux)"
	rm -f "$tmp/vmlinux"
	cp "$vmlinuz" "$tmp/vmlinuz"
fi

# --- kernel modules ------------------------------------------------------------------
# Each feature of the guest is a list of modules in load order (dependencies
# first), which /init loads with finit_module when a job needs the feature.
# The modules are copied with their signatures stripped (strip --strip-debug
# drops the appended signature; they carry no debug information): the guest
# kernel does not enforce signatures (MODULE_SIG_FORCE is off) but checks
# any that is there, SHA-256 over the whole module and an RSA verify, which
# under TCG cost ~0.6 s of QEMU's CPU per boot of the NFS share's 15
# modules (~10% of its CPU to the job's first output). The kernel then logs
# "module verification failed" once and marks itself tainted, which nothing
# reads. CORRAL_KEEP_MODULE_SIG=1 keeps the signatures.
declare -A features=(
	[virtio]="virtio_mmio"
	[virtiofs]="virtiofs"
	[nfs]="virtio_net nfsv3"
	[net]="virtio_net"
	[overlay]="overlay"
	[agent]="virtio_console"
	[balloon]="virtio_balloon"
)
[ -d "$modroot/lib/modules/$kver" ] || die "no modules for $kver under $modroot/lib/modules (unpack the kernel package again: rm -rf $cache/kernel)"
[ -f "$modroot/lib/modules/$kver/modules.dep" ] || depmod -b "$modroot" "$kver" ||
	die "depmod -b $modroot $kver failed"

# --- initramfs ------------------------------------------------------------------------
say "initramfs: busybox $("$busybox" | head -n 1 | awk '{print $2}') + /init (cmd/corral-init)"
stage=$tmp/root
mkdir -p "$stage"/{bin,sbin,usr/bin,usr/sbin,dev,proc,sys,tmp,etc,root,run,mnt,var/tmp}
cp "$busybox" "$stage/bin/busybox"
chmod 0755 "$stage/bin/busybox"
for applet in $("$busybox" --list-full); do
	[ -e "$stage/$applet" ] || ln -s /bin/busybox "$stage/$applet"
done
# Slurm scripts start with #!/bin/bash; busybox ash runs most of them.
[ -e "$stage/bin/bash" ] || printf '#!/bin/sh\nexec /bin/sh "$@"\n' >"$stage/bin/bash"
chmod 0755 "$stage/bin/bash"
(cd "$root" && CGO_ENABLED=0 "$go" build -trimpath -ldflags "-s -w" -o "$stage/init" ./cmd/corral-init) ||
	die "go build ./cmd/corral-init failed (the guest's /init)"
chmod 0755 "$stage/init"
mkdir -p "$stage/etc/corral/modules"
for feature in "${!features[@]}"; do
	: >"$stage/etc/corral/modules/$feature"
	for mod in ${features[$feature]}; do
		modprobe -d "$modroot" -S "$kver" --show-depends "$mod" >"$tmp/deps" ||
			die "modprobe --show-depends $mod failed for kernel $kver"
		while read -r cmd path _; do
			[ "$cmd" = insmod ] || continue
			rel=${path#"$modroot"}
			rel=/${rel#/}
			grep -qxF "$rel" "$stage/etc/corral/modules/$feature" && continue
			mkdir -p "$stage$(dirname "$rel")"
			cp "$path" "$stage$rel"
			[ -n "${CORRAL_KEEP_MODULE_SIG:-}" ] || strip --strip-debug "$stage$rel"
			echo "$rel" >>"$stage/etc/corral/modules/$feature"
		done <"$tmp/deps"
	done
done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$stage/etc/passwd"
printf 'root:x:0:\ntty:x:5:\nnogroup:x:65534:\n' >"$stage/etc/group"
printf '127.0.0.1\tlocalhost\n::1\tlocalhost\n' >"$stage/etc/hosts"
chmod 1777 "$stage/tmp" "$stage/var/tmp"
# The kernel opens /dev/console for init before devtmpfs is mounted; init
# reopens it afterwards, so this node only matters for its first lines.
mknod -m 600 "$stage/dev/console" c 5 1 2>/dev/null || true
find "$stage" -exec touch -h -d @0 {} +
(cd "$stage" && find . -mindepth 1 -printf '%P\n' | sort |
	cpio -o -H newc -R 0:0 --reproducible --quiet) >"$tmp/initramfs.cpio"
say "initramfs: $(($(stat -c %s "$tmp/initramfs.cpio") / 1024)) KiB"

# --- metadata and install ----------------------------------------------------------
cat >"$tmp/image.json" <<EOF
{
  "name": "$name",
  "kernel": "$kfile",
  "initrd": "initramfs.cpio",
  "kernel_version": "$kver",
  "kernel_package_version": "$kpkgver",
  "kernel_format": "$([ "$pvh" = true ] && echo vmlinux-pvh || echo bzImage)",
  "pvh": $pvh,
  "busybox": "$("$busybox" | head -n 1 | awk '{print $2}')",
  "host_root": true,
  "protocol": 4
}
EOF
rm -f "$out/image.json" "$out/vmlinux" "$out/vmlinuz"
mv "$tmp/$kfile" "$out/$kfile"
rm -f "$out/initramfs.cpio.gz" # the gzip'd base of earlier builds
mv "$tmp/initramfs.cpio" "$out/initramfs.cpio"
mv "$tmp/image.json" "$out/image.json" # last: it marks the image complete
say "done: $out ($kfile, kernel $kver, pvh=$pvh)"
