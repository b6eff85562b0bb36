#!/usr/bin/env bash
# Installs the Debian packages corral's demo and tests use, when missing:
# QEMU for the vm runner, the tools `make image` needs, swtpm (a
# software TPM) for the TPM attestation tests, chromium for the status
# page's browser test (e2e/TestStatusPageInChromium), PostgreSQL's server
# for the accounting sink's tests (they start their own), and MPICH for the
# MPI tests of srun's PMI server (internal/pmi, e2e/TestMPIHelloInABatchJob).
# Runs apt-get only as root and only for what is missing; otherwise says
# what to install.
set -euo pipefail
want=(qemu-system-x86 qemu-utils busybox-static lz4 cpio make git procps swtpm chromium postgresql mpich libmpich-dev)
missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "corral: missing Debian packages: ${missing[*]}" >&2
  echo "corral: install them as root: apt-get install -y ${missing[*]}" >&2
  exit 1
fi
. "$(dirname "$0")/apt-wait.sh"
echo "corral: installing ${missing[*]}"
apt_get install -y -qq "${missing[@]}" >/dev/null ||
  { apt_get update -qq && apt_get install -y -qq "${missing[@]}" >/dev/null; }
