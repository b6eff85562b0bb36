//go:build linux

package main

import "corral/vmimage/guestinit"

func main() { guestinit.Main() }
