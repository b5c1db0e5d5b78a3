// Command cdplace-image assembles the cdplace kube-scheduler OCI image without a container
// engine, with go-containerregistry: a multi-platform image index whose images each hold two
// layers, a Debian base (glibc and libgcc_s, extracted from pinned .deb files by fetch-debs.sh)
// and the kube-scheduler binary. Every byte is a function of the inputs: tar entries sorted, owned
// by root, stamped with -epoch; the config's and history's times are -epoch; gzip is Go's, at a
// fixed level. `make image` drives it; see the Makefile's image block.
//
//	cdplace-image build  -platform linux/amd64=<base rootfs>,<binary> ... -out target/image ...
//	cdplace-image pin    -digests target/image/digests.json -lock kube-scheduler-config/image.lock -values <values.yaml> [-update]
//	cdplace-image rootfs -oci target/image/oci -platform linux/amd64 -out <dir>
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "build":
		err = runBuild(os.Args[2:])
	case "pin":
		err = runPin(os.Args[2:])
	case "rootfs":
		err = runRootfs(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "cdplace-image %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: cdplace-image build|pin|rootfs [flags] (-h for each)")
	os.Exit(2)
}

// repeated is a flag that may be given more than once.
type repeated []string

func (r *repeated) String() string     { return fmt.Sprint(*r) }
func (r *repeated) Set(s string) error { *r = append(*r, s); return nil }

var _ flag.Value = (*repeated)(nil)
