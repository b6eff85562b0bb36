//go:build linux

// Package main is corral-init, /init (PID 1) in corral's guest images: it
// runs the job appended to the initramfs and powers the VM off.
// scripts/build-image.sh builds it statically (CGO_ENABLED=0); see package
// guestinit.
package main
